//! ACL request signing (Java `AclClientRPCHook`, `AclUtils`, `AclSigner`) and the
//! [`Credentials`] it signs with.
//!
//! Brokers and name servers that enforce ACL (4.x `aclEnable`, 5.x authentication) check
//! every request's `Signature` field: the request's header fields — the typed header's
//! included, which are already in `ext_fields` here (Java needs `makeCustomHeaderToNet`
//! first) — plus `AccessKey` (and `SecurityToken` when set), sorted by key, their values
//! concatenated in that order, the body appended, HMAC-SHA1 with the secret key, base64.
//! The signature covers the fields and the body only, so it is the same whatever header
//! encoding (JSON or ROCKETMQ) the frame is written in.
//!
//! The remoting client signs right before encoding, after every RPC hook, so nothing a
//! hook adds is left out of the signature.
//!
//! Invariant: the secret key and the security token appear in no log line, no `Debug`
//! output and no error message: [`Credentials`]' `Debug` redacts them and nothing else
//! reads them but [`sign`]. Kept by `tests::debug_redacts_the_secret_and_the_token` and
//! `tests/secure` (the log of a full run is searched for the secret).

use std::fmt;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RemotingCommand;

/// The header field carrying the access key (Java `SessionCredentials.ACCESS_KEY`).
pub const ACCESS_KEY: &str = "AccessKey";
/// The header field carrying the security token (Java `SessionCredentials.SECURITY_TOKEN`).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// The header field carrying the signature (Java `SessionCredentials.SIGNATURE`).
pub const SIGNATURE: &str = "Signature";

/// The access key, secret key and optional security token a client signs its requests
/// with, for clusters that enforce ACL (Java `SessionCredentials` with `AclClientRPCHook`).
///
/// For RocketMQ 4.x ACL (`plain_acl.yml`) these are an account's `accessKey` and
/// `secretKey`; for 5.x ACL 2.0 the user's name and password. `Debug` shows the access key
/// only: the secret key and the token print as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    access_key: String,
    secret_key: String,
    security_token: Option<String>,
}

impl Credentials {
    /// Credentials of `access_key` with `secret_key`.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Credentials {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }

    /// Adds a security token, sent as the `SecurityToken` field and signed with the rest.
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }

    /// The access key (user name in ACL 2.0).
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Whether a security token is set (the token itself is not handed out).
    pub fn has_security_token(&self) -> bool {
        self.security_token.is_some()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &format_args!("<redacted>"))
            .field(
                "security_token",
                &self
                    .security_token
                    .as_ref()
                    .map(|_| format_args!("<redacted>")),
            )
            .finish()
    }
}

/// Signs `request` in place: sets `AccessKey`, `SecurityToken` (when the credentials have
/// one) and `Signature` (Java `AclClientRPCHook.doBeforeRequest`). A `Signature` already
/// there (a request encoded again) is left out of the signed text and replaced.
pub fn sign(credentials: &Credentials, request: &mut RemotingCommand) -> Result<()> {
    let fields = &mut request.ext_fields;
    fields.insert(ACCESS_KEY, &credentials.access_key);
    if let Some(token) = &credentials.security_token {
        fields.insert(SECURITY_TOKEN, token);
    }
    let signature = signature(credentials, request)?;
    request.ext_fields.insert(SIGNATURE, signature);
    Ok(())
}

/// The signature of `request`'s fields (but `Signature`) and body, as Java's
/// `AclUtils.combineRequestContent` and `AclSigner.calSignature` compute it.
fn signature(credentials: &Credentials, request: &RemotingCommand) -> Result<String> {
    let mut fields: Vec<(&str, &str)> = request
        .ext_fields
        .iter()
        .filter(|(k, _)| *k != SIGNATURE)
        .collect();
    // Java sorts in a TreeMap, by `String.compareTo`: UTF-16 code units, which differs
    // from byte order only for keys beyond the basic plane.
    fields.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut mac = Hmac::<Sha1>::new_from_slice(credentials.secret_key.as_bytes())
        // HMAC takes a key of any length; the error names no part of the key.
        .map_err(|_| Error::new(ErrorKind::Config, "the secret key cannot key HMAC-SHA1"))?;
    for (_, value) in &fields {
        mac.update(value.as_bytes());
    }
    mac.update(&request.body);
    Ok(base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::{GetRouteInfoRequestHeader, SendMessageRequestHeaderV2};
    use crate::protocol::{RequestCode, SerializeType};

    fn captured(version: &str, name: &str) -> RemotingCommand {
        let path = format!(
            "{}/tests/data/acl/{version}/{name}.bin",
            env!("CARGO_MANIFEST_DIR")
        );
        let frame = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // The frame's 4-byte length prefix is not part of what `decode` reads.
        RemotingCommand::decode(&frame[4..]).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// What `tests/data/acl/SignCapture.java` signed each case with.
    fn credentials_of(case: &str) -> Credentials {
        match case {
            "route" => Credentials::new("RocketMQ_ak", "12345678_secret"),
            "send" => {
                Credentials::new("RocketMQ_ak", "12345678_secret").with_security_token("token-1")
            }
            "heartbeat" => Credentials::new("admin_ak", "another secret"),
            _ => unreachable!(),
        }
    }

    /// Every request the real Java hook signed (4.9.7 and 5.3.3, JSON and ROCKETMQ
    /// headers) gets the same signature from ours, from the same fields and body.
    #[test]
    fn signatures_match_the_java_hook_byte_for_byte() {
        for version in ["4.9.7", "5.3.3"] {
            for case in ["route", "send", "heartbeat"] {
                for encoding in ["json", "rocketmq"] {
                    let mut cmd = captured(version, &format!("{case}.{encoding}"));
                    let expected = cmd.ext_fields.get(SIGNATURE).map(str::to_string);
                    assert!(expected.is_some(), "{version} {case}.{encoding}");
                    let creds = credentials_of(case);
                    assert_eq!(cmd.ext_fields.get(ACCESS_KEY), Some(creds.access_key()));
                    cmd.ext_fields.remove(SIGNATURE);
                    cmd.ext_fields.remove(ACCESS_KEY);
                    cmd.ext_fields.remove(SECURITY_TOKEN);
                    sign(&creds, &mut cmd).unwrap();
                    assert_eq!(
                        cmd.ext_fields.get(SIGNATURE).map(str::to_string),
                        expected,
                        "{version} {case}.{encoding}"
                    );
                }
            }
        }
    }

    /// Requests built here from typed headers carry exactly the fields Java's headers
    /// put on the wire, so they get the Java hook's signature too.
    #[test]
    fn typed_headers_sign_as_the_java_headers_do() {
        let route = GetRouteInfoRequestHeader {
            topic: "AclSignTopic".into(),
            accept_standard_json_only: Some(true),
        };
        let send = SendMessageRequestHeaderV2 {
            producer_group: "acl_sign_group".into(),
            topic: "AclSignTopic".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_123,
            flag: 0,
            properties: Some("UNIQ_KEY\u{1}ABC123\u{2}KEYS\u{1}schlüssel 键\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: Some(16),
            batch: false,
            broker_name: None,
        };
        let cases = [
            (
                "route",
                RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &route),
            ),
            (
                "send",
                RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &send)
                    .with_body("hello ACL — ünïcödé".as_bytes().to_vec()),
            ),
        ];
        for (case, mut ours) in cases {
            for version in ["4.9.7", "5.3.3"] {
                let java = captured(version, &format!("{case}.json"));
                sign(&credentials_of(case), &mut ours).unwrap();
                assert_eq!(ours.ext_fields, java.ext_fields, "{version} {case}");
                assert_eq!(ours.body, java.body, "{version} {case}");
            }
        }
    }

    #[test]
    fn the_signature_is_the_same_in_either_header_encoding_and_survives_decoding() {
        let creds = Credentials::new("ak", "sk");
        let mut cmd = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(b"{}".to_vec());
        cmd.ext_fields.insert("zeta", "é");
        sign(&creds, &mut cmd).unwrap();
        for ty in [SerializeType::Json, SerializeType::RocketMq] {
            cmd.serialize_type = ty;
            let frame = cmd.to_frame();
            let mut back = RemotingCommand::decode(&frame[4..]).unwrap();
            let sent = back.ext_fields.get(SIGNATURE).map(str::to_string);
            sign(&creds, &mut back).unwrap();
            assert_eq!(back.ext_fields.get(SIGNATURE).map(str::to_string), sent);
        }
    }

    #[test]
    fn signing_again_replaces_the_signature_with_the_same_one() {
        let creds = Credentials::new("ak", "sk").with_security_token("t");
        let mut cmd = RemotingCommand::request(RequestCode::HEART_BEAT);
        sign(&creds, &mut cmd).unwrap();
        let first = cmd.ext_fields.get(SIGNATURE).map(str::to_string);
        sign(&creds, &mut cmd).unwrap();
        assert_eq!(cmd.ext_fields.get(SIGNATURE).map(str::to_string), first);
        assert_eq!(cmd.ext_fields.len(), 3);
    }

    #[test]
    fn keys_sort_by_utf16_as_java_does() {
        // U+1F600 (surrogates D83D DE00) sorts before U+FF21 in UTF-16, after it in UTF-8.
        let creds = Credentials::new("ak", "sk");
        let mut a = RemotingCommand::request(RequestCode::HEART_BEAT);
        a.ext_fields.insert("\u{1F600}", "1");
        a.ext_fields.insert("\u{FF21}", "2");
        // AccessKey, then U+1F600, then U+FF21.
        let expected = {
            let mut mac = Hmac::<Sha1>::new_from_slice(b"sk").unwrap();
            mac.update(b"ak12");
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        };
        sign(&creds, &mut a).unwrap();
        assert_eq!(a.ext_fields.get(SIGNATURE), Some(expected.as_str()));
    }

    #[test]
    fn debug_redacts_the_secret_and_the_token() {
        let creds = Credentials::new("my-access", "s3cr3t-key").with_security_token("t0k3n");
        let text = format!("{creds:?} {creds:#?}");
        assert!(text.contains("my-access"), "{text}");
        assert!(!text.contains("s3cr3t-key"), "{text}");
        assert!(!text.contains("t0k3n"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
