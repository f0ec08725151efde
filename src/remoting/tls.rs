//! TLS settings ([`TlsConfig`]) and what the I/O thread needs to speak TLS: one rustls
//! client configuration per remoting client, built once from the settings (files are
//! read then, not per connection), and the server name of each address.
//!
//! rustls is sans-I/O: the I/O thread moves the bytes between the mio socket and the
//! `rustls::ClientConnection` of each connection (`io/`), so the handshake, reads and
//! writes stay non-blocking on that one thread. Only rustls with the ring provider is
//! used; no OpenSSL.
//!
//! Java (`TlsHelper.buildSslContext(true)`) checks no host name: with
//! `tls.client.authServer` it verifies the chain against `tls.client.trustCertPath`, and in
//! its test mode (`tls.test.mode.enable`) it trusts any certificate. Here the chain *and*
//! the name are verified by default: a DNS name against the certificate's DNS names, an IP
//! address (brokers register by IP) against its IP addresses (`iPAddress` SANs).
//! [`TlsConfig::verify_server_name`]`(false)` verifies the chain only, as Java does.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, ErrorKind, Result};

/// TLS for every connection of a client, to name servers and brokers alike (Java
/// `setUseTLS(true)` with the `tls.client.*` settings). Off unless given to a builder's
/// `tls`; a cluster that requires TLS needs it on every client.
///
/// ```no_run
/// use rocketmq_blocking::{Producer, TlsConfig};
///
/// // The cluster's CA, and a client certificate for brokers that require one.
/// let tls = TlsConfig::new()
///     .ca_file("/etc/rocketmq/ca.pem")
///     .client_cert("/etc/rocketmq/client.pem", "/etc/rocketmq/client.key");
/// let options = rocketmq_blocking::ClientOptions::new().namesrv_addr("10.0.0.1:9876").tls(tls);
/// let producer = Producer::builder("g").client_options(options).start()?;
/// # Ok::<(), rocketmq_blocking::Error>(())
/// ```
///
/// The server's certificate is verified against the operating system's roots unless a
/// CA file is given, and its names against the address (see
/// [`verify_server_name`](Self::verify_server_name)). Files are read when the client
/// starts: a missing or unreadable one is an [`ErrorKind::Config`] error then. A failed
/// handshake is an [`ErrorKind::Tls`] error naming the peer.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsConfig {
    trust: Trust,
    client_cert: Option<(PathBuf, PathBuf)>,
    verify_server_name: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Trust {
    SystemRoots,
    CaFile(PathBuf),
    AnyCertificate,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Paths only: a key file's path is no secret, its contents are never read here.
        f.debug_struct("TlsConfig")
            .field("trust", &self.trust)
            .field("client_cert", &self.client_cert)
            .field("verify_server_name", &self.verify_server_name)
            .finish()
    }
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig::new()
    }
}

impl TlsConfig {
    /// TLS with the server verified against the operating system's trust store
    /// (`rustls-native-certs`: `/etc/ssl/certs` and friends, or `SSL_CERT_FILE` /
    /// `SSL_CERT_DIR`), its name checked, and no client certificate.
    pub fn new() -> Self {
        TlsConfig {
            trust: Trust::SystemRoots,
            client_cert: None,
            verify_server_name: true,
        }
    }

    /// Java's test mode (`tls.test.mode.enable=true`): TLS that accepts **any** server
    /// certificate, so the connection is encrypted but the server is not authenticated
    /// (anyone in the middle can read and change the traffic). For tests against servers
    /// with self-signed certificates; never for production. The handshake signatures are
    /// still checked.
    pub fn danger_accept_any_server_certificate() -> Self {
        TlsConfig {
            trust: Trust::AnyCertificate,
            ..TlsConfig::new()
        }
    }

    /// Trust the CA certificates in this PEM file instead of the system's roots (Java
    /// `tls.client.trustCertPath` with `tls.client.authServer=true`).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.trust = Trust::CaFile(path.into());
        self
    }

    /// Present this client certificate chain (PEM) and private key (PEM: PKCS#8, PKCS#1
    /// or SEC1) to servers that ask for one, for mutual TLS (Java `tls.client.certPath`,
    /// `tls.client.keyPath`; encrypted keys are not supported).
    pub fn client_cert(mut self, cert_chain: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert = Some((cert_chain.into(), key.into()));
        self
    }

    /// Whether the server's certificate must be valid for the host of the address
    /// (default true): a DNS name for a host name, an IP address SAN for an IP. With
    /// `false` only the chain is verified, as the Java client does; use it when the
    /// cluster's certificates do not name the addresses brokers register with.
    pub fn verify_server_name(mut self, verify: bool) -> Self {
        self.verify_server_name = verify;
        self
    }

    /// Whether any server certificate is accepted
    /// ([`danger_accept_any_server_certificate`](Self::danger_accept_any_server_certificate)).
    pub fn accepts_any_server_certificate(&self) -> bool {
        self.trust == Trust::AnyCertificate
    }

    /// The rustls configuration these settings describe; reads the files.
    pub(crate) fn client_config(&self) -> Result<Arc<rustls::ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error("no TLS protocol version", e))?;
        let verifier = self.verifier(provider)?;
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = read_certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    config_error(format!("cannot read the private key {}", key.display()), e)
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| config_error("the client certificate and key do not fit", e))?
            }
        };
        Ok(Arc::new(config))
    }

    fn verifier(&self, provider: Arc<CryptoProvider>) -> Result<Arc<dyn ServerCertVerifier>> {
        Ok(match &self.trust {
            Trust::AnyCertificate => Arc::new(AcceptAnyCertificate(provider)),
            Trust::SystemRoots | Trust::CaFile(_) => {
                let roots = Arc::new(self.roots()?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| config_error("cannot build the certificate verifier", e))?;
                if self.verify_server_name {
                    webpki
                } else {
                    Arc::new(ChainOnly(webpki))
                }
            }
        })
    }

    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        match &self.trust {
            Trust::CaFile(path) => {
                let (added, _) = roots.add_parsable_certificates(read_certs(path)?);
                if added == 0 {
                    return Err(Error::new(
                        ErrorKind::Config,
                        format!("no usable CA certificate in {}", path.display()),
                    ));
                }
            }
            _ => {
                let found = rustls_native_certs::load_native_certs();
                for e in &found.errors {
                    log::debug!("system trust store: {e}");
                }
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(Error::new(
                        ErrorKind::Config,
                        "no system root certificate found (give a CA file with TlsConfig::ca_file)",
                    ));
                }
            }
        }
        Ok(roots)
    }
}

fn config_error(
    what: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::new(ErrorKind::Config, format!("TLS: {}", what.into())).with_source(source)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let what = || format!("cannot read the certificates in {}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| config_error(what(), e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| config_error(what(), e))?;
    if certs.is_empty() {
        return Err(Error::new(
            ErrorKind::Config,
            format!("TLS: no certificate in {}", path.display()),
        ));
    }
    Ok(certs)
}

/// The name the server's certificate must carry: the host of `host:port` (brackets of
/// an IPv6 literal removed), as an IP address when it parses as one.
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        Error::new(
            ErrorKind::Tls,
            format!("TLS: {host:?} is not a server name"),
        )
        .with_addr(addr)
        .with_source(e)
    })
}

/// The Java client's `authServer=false` / test mode: any certificate, signatures checked.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The chain verified, the name not: webpki checks the chain first, so "not valid for
/// this name" means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_are_the_host_of_the_address() {
        let ip = |s: &str| ServerName::try_from(s.to_string()).unwrap();
        assert_eq!(server_name("127.0.0.1:9876").unwrap(), ip("127.0.0.1"));
        assert!(matches!(
            server_name("127.0.0.1:9876").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert_eq!(server_name("[::1]:10911").unwrap(), ip("::1"));
        assert_eq!(
            server_name("broker.example.com:10911").unwrap(),
            ip("broker.example.com")
        );
        let e = server_name("bad name!:1").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Tls);
        assert_eq!(e.addr(), Some("bad name!:1"));
    }

    #[test]
    fn missing_files_are_configuration_errors_naming_the_file() {
        let e = TlsConfig::new()
            .ca_file("/nonexistent/ca.pem")
            .client_config()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        let e = TlsConfig::danger_accept_any_server_certificate()
            .client_cert("/nonexistent/c.pem", "/nonexistent/c.key")
            .client_config()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("/nonexistent/c.pem"), "{e}");
    }

    /// What each mode makes of the testkit's server certificate (DNS `localhost`, IP
    /// `127.0.0.1`) under other names and another CA.
    #[cfg(feature = "testkit")]
    #[test]
    fn names_are_checked_against_the_sans_unless_only_the_chain_is() {
        use rustls::Error::InvalidCertificate;
        let dir = std::env::temp_dir().join(format!("rmq-tls-unit-{}", std::process::id()));
        let files = crate::testkit::TlsFiles::generate(&dir.join("a")).unwrap();
        let other = crate::testkit::TlsFiles::generate(&dir.join("b")).unwrap();
        let server = CertificateDer::from_pem_file(&files.server_cert).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let check = |tls: TlsConfig, name: &str| {
            let v = tls.verifier(provider.clone()).unwrap();
            let name = ServerName::try_from(name.to_string()).unwrap();
            v.verify_server_cert(&server, &[], &name, &[], UnixTime::now())
                .map(|_| ())
        };
        let named = || TlsConfig::new().ca_file(&files.ca_cert);
        assert_eq!(check(named(), "127.0.0.1"), Ok(()));
        assert_eq!(check(named(), "localhost"), Ok(()));
        for name in ["10.1.2.3", "127.0.0.2", "broker.example.com"] {
            let r = check(named(), name);
            assert!(
                matches!(
                    r,
                    Err(InvalidCertificate(
                        CertificateError::NotValidForName
                            | CertificateError::NotValidForNameContext { .. }
                    ))
                ),
                "{name}: {r:?}"
            );
            assert_eq!(
                check(named().verify_server_name(false), name),
                Ok(()),
                "{name}"
            );
            assert_eq!(
                check(TlsConfig::danger_accept_any_server_certificate(), name),
                Ok(())
            );
        }
        // Another CA: the chain fails, name check or not.
        for verify_name in [true, false] {
            let r = check(
                TlsConfig::new()
                    .ca_file(&other.ca_cert)
                    .verify_server_name(verify_name),
                "127.0.0.1",
            );
            assert_eq!(
                r,
                Err(InvalidCertificate(CertificateError::UnknownIssuer)),
                "verify name {verify_name}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn test_mode_needs_no_file() {
        let tls = TlsConfig::danger_accept_any_server_certificate();
        assert!(tls.accepts_any_server_certificate());
        assert!(!TlsConfig::new().accepts_any_server_certificate());
        assert!(tls.client_config().is_ok());
    }
}
