//! TLS for test clusters: a CA and certificates generated at run time (nothing is
//! committed), and the settings the JVMs read.
//!
//! Java reads the server's TLS settings from system properties (`tls.server.mode`,
//! `tls.enable`, `tls.config.file`) and the file `tls.config.file` names (the rest:
//! `TlsSystemConfig`, `TlsHelper.extractTlsConfigFromFile` in `rocketmq-remoting`,
//! the same keys in 4.9.7 and 5.3.3). The broker is a TLS client of the name server too
//! (`tls.enable`, `tls.client.*`), so both sides get their certificate from here.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::TestkitError;
use crate::TlsConfig;

/// How a test cluster's name servers and brokers take TLS (Java `tls.server.mode` and
/// `tls.server.need.client.auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    enforcing: bool,
    require_client_cert: bool,
}

impl TlsOptions {
    /// `tls.server.mode=enforcing`: TLS only; a plain connection is closed at its first
    /// bytes.
    pub fn enforcing() -> Self {
        TlsOptions {
            enforcing: true,
            require_client_cert: false,
        }
    }

    /// `tls.server.mode=permissive`: TLS and plain connections both (the server looks at
    /// the first byte).
    pub fn permissive() -> Self {
        TlsOptions {
            enforcing: false,
            require_client_cert: false,
        }
    }

    /// Mutual TLS: clients must present a certificate signed by the cluster's CA
    /// (`tls.server.need.client.auth=require`, `tls.server.authClient=true`).
    pub fn require_client_cert(mut self, require: bool) -> Self {
        self.require_client_cert = require;
        self
    }

    /// Whether plain connections are refused.
    pub fn is_enforcing(&self) -> bool {
        self.enforcing
    }

    /// Whether clients must present a certificate.
    pub fn requires_client_cert(&self) -> bool {
        self.require_client_cert
    }
}

/// A CA and two certificates it signed, as PEM files in one directory: the server's
/// (for `localhost` and `127.0.0.1`) and a client's. Keys are PKCS#8, as Java needs.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA certificate.
    pub ca_cert: PathBuf,
    /// The server certificate (signed by the CA; DNS `localhost`, IP `127.0.0.1`).
    pub server_cert: PathBuf,
    /// The server's private key.
    pub server_key: PathBuf,
    /// The client certificate (signed by the CA).
    pub client_cert: PathBuf,
    /// The client's private key.
    pub client_key: PathBuf,
}

impl TlsFiles {
    /// Generates a new CA (ECDSA P-256) and the certificates, writing them into `dir`
    /// (created if missing).
    pub fn generate(dir: &Path) -> Result<TlsFiles, TestkitError> {
        fs::create_dir_all(dir).map_err(|e| TestkitError::io("create TLS dir", dir, e))?;
        let gen = |e: rcgen::Error| TestkitError::InvalidArgument(format!("certificate: {e}"));

        let ca_key = KeyPair::generate().map_err(gen)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own: another CA's certificate is then an unknown issuer, not
        // the same issuer with a bad signature.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        ca.distinguished_name.push(
            DnType::CommonName,
            format!("rocketmq-blocking testkit CA {nanos:x}"),
        );
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(gen)?;

        let leaf = |cn: &str, purpose: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().map_err(gen)?;
            let mut p = CertificateParams::new(vec!["localhost".to_string()]).map_err(gen)?;
            p.subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            p.distinguished_name.push(DnType::CommonName, cn);
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            p.extended_key_usages = vec![purpose];
            let cert = p.signed_by(&key, &ca_cert, &ca_key).map_err(gen)?;
            Ok::<_, TestkitError>((cert.pem(), key.serialize_pem()))
        };
        let (server_pem, server_key_pem) =
            leaf("rocketmq server", ExtendedKeyUsagePurpose::ServerAuth)?;
        let (client_pem, client_key_pem) =
            leaf("rocketmq client", ExtendedKeyUsagePurpose::ClientAuth)?;

        let files = TlsFiles {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        };
        for (path, text) in [
            (&files.ca_cert, ca_cert.pem()),
            (&files.server_cert, server_pem),
            (&files.server_key, server_key_pem),
            (&files.client_cert, client_pem),
            (&files.client_key, client_key_pem),
        ] {
            fs::write(path, text).map_err(|e| TestkitError::io("write TLS file", path, e))?;
        }
        Ok(files)
    }

    /// Client settings that trust this CA and present the client certificate.
    pub fn client_config(&self) -> TlsConfig {
        TlsConfig::new()
            .ca_file(&self.ca_cert)
            .client_cert(&self.client_cert, &self.client_key)
    }
}

/// The cluster's TLS: what it was asked for and the files it made.
#[derive(Debug, Clone)]
pub(crate) struct ClusterTls {
    pub(crate) options: TlsOptions,
    pub(crate) files: TlsFiles,
    /// `tls.config.file`.
    pub(crate) config_file: PathBuf,
}

impl ClusterTls {
    /// Generates the files under `dir` and writes the JVMs' TLS config file.
    pub(crate) fn create(options: TlsOptions, dir: &Path) -> Result<ClusterTls, TestkitError> {
        let files = TlsFiles::generate(dir)?;
        let config_file = dir.join("tls.properties");
        let p = |path: &Path| path.display().to_string();
        let client_auth = if options.require_client_cert {
            "require"
        } else {
            "none"
        };
        let text = format!(
            "# Written by the rocketmq-blocking testkit (TlsSystemConfig keys).\n\
             tls.test.mode.enable=false\n\
             tls.server.certPath={}\n\
             tls.server.keyPath={}\n\
             tls.server.need.client.auth={client_auth}\n\
             tls.server.authClient={}\n\
             tls.server.trustCertPath={}\n\
             tls.client.certPath={}\n\
             tls.client.keyPath={}\n\
             tls.client.authServer=true\n\
             tls.client.trustCertPath={}\n",
            p(&files.server_cert),
            p(&files.server_key),
            options.require_client_cert,
            p(&files.ca_cert),
            p(&files.client_cert),
            p(&files.client_key),
            p(&files.ca_cert),
        );
        fs::write(&config_file, text)
            .map_err(|e| TestkitError::io("write TLS config", &config_file, e))?;
        Ok(ClusterTls {
            options,
            files,
            config_file,
        })
    }

    /// The system properties of every JVM (they override the launcher's
    /// `tls.server.mode=disabled`).
    pub(crate) fn jvm_properties(&self) -> Vec<std::ffi::OsString> {
        let mode = if self.options.enforcing {
            "enforcing"
        } else {
            "permissive"
        };
        let mut file = std::ffi::OsString::from("-Dtls.config.file=");
        file.push(&self.config_file);
        vec![
            format!("-Dtls.server.mode={mode}").into(),
            // The broker talks TLS to the name server too.
            "-Dtls.enable=true".into(),
            "-Dtls.test.mode.enable=false".into(),
            file,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jvms_get_java_s_tls_keys_for_the_asked_mode() {
        let dir = std::env::temp_dir().join(format!("rmq-testkit-tls-{}", std::process::id()));
        for (options, mode, client_auth) in [
            (TlsOptions::enforcing(), "enforcing", "none"),
            (
                TlsOptions::permissive().require_client_cert(true),
                "permissive",
                "require",
            ),
        ] {
            let tls = ClusterTls::create(options, &dir.join(mode)).unwrap();
            let props = fs::read_to_string(&tls.config_file).unwrap();
            for line in [
                "tls.test.mode.enable=false".to_string(),
                format!("tls.server.need.client.auth={client_auth}"),
                format!("tls.server.certPath={}", tls.files.server_cert.display()),
                format!("tls.server.keyPath={}", tls.files.server_key.display()),
                format!("tls.server.trustCertPath={}", tls.files.ca_cert.display()),
                format!("tls.client.certPath={}", tls.files.client_cert.display()),
                format!("tls.client.keyPath={}", tls.files.client_key.display()),
                format!("tls.client.trustCertPath={}", tls.files.ca_cert.display()),
            ] {
                assert!(props.lines().any(|l| l == line), "{line} in\n{props}");
            }
            let args: Vec<String> = tls
                .jvm_properties()
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert!(
                args.contains(&format!("-Dtls.server.mode={mode}")),
                "{args:?}"
            );
            assert!(args.contains(&"-Dtls.enable=true".to_string()), "{args:?}");
            // Java reads the server key as PKCS#8 only.
            let key = fs::read_to_string(&tls.files.server_key).unwrap();
            assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
