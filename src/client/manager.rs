//! `MQClientManager`: one shared [`MQClientInstance`] per client id in this process.
//!
//! The table holds weak references: the producers and consumers using an instance keep
//! it alive, and dropping the last of them ends it (its `Drop` stops its threads).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use super::config::ClientConfig;
use super::instance::{MQClientInstance, ServiceState};
use crate::error::{Error, ErrorKind, Result};
use crate::remoting::{Credentials, TlsConfig};

/// Client id → instance. No strong reference to an instance is ever dropped while this
/// lock is held: dropping the last one runs the instance's `Drop`, which takes the lock.
fn table() -> &'static Mutex<HashMap<String, Weak<MQClientInstance>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Weak<MQClientInstance>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The instance for `config`'s client id, created on first use (Java
/// `MQClientManager.getOrCreateMQClientInstance`). Clients with the same id share it; an
/// instance that is shut down or failed to start is replaced by a new one.
///
/// The instance signs with the credentials and connects with the TLS settings it was
/// created with, so a client asking for a live instance with other credentials or other TLS
/// settings (or none where it has some) is a `Config` error: it would otherwise sign
/// silently as the first one, or run in plaintext where it asked for TLS.
pub fn get_or_create_instance(config: &ClientConfig) -> Result<Arc<MQClientInstance>> {
    let id = config.client_id();
    // Declared before the guard so that it is dropped after it (see `table`).
    let mut stale: Option<Arc<MQClientInstance>> = None;
    let mut t = table().lock();
    t.retain(|_, w| w.strong_count() > 0);
    if let Some(i) = t.get(&id).and_then(Weak::upgrade) {
        match i.state() {
            ServiceState::CreateJust | ServiceState::Running => {
                let (theirs, ours) = (i.config(), config);
                let clash = if theirs.credentials() != ours.credentials() {
                    Some((describe(theirs.credentials()), describe(ours.credentials())))
                } else if theirs.remoting.tls != ours.remoting.tls {
                    Some((
                        describe_tls(theirs.remoting.tls.as_ref()),
                        describe_tls(ours.remoting.tls.as_ref()),
                    ))
                } else {
                    None
                };
                if let Some((theirs, ours)) = clash {
                    drop(t);
                    return Err(Error::new(
                        ErrorKind::Config,
                        format!(
                            "client instance {id} already runs with {theirs}; give this client \
                             another instance name to use {ours}"
                        ),
                    ));
                }
                return Ok(i);
            }
            ServiceState::ShutdownAlready | ServiceState::StartFailed => stale = Some(i),
        }
    }
    let instance = MQClientInstance::new(config.clone())?;
    t.insert(id, Arc::downgrade(&instance));
    drop(t);
    drop(stale);
    Ok(instance)
}

/// Credentials as an error message may name them: the access key only.
fn describe(credentials: Option<&Credentials>) -> String {
    match credentials {
        Some(c) => format!("the credentials of access key {:?}", c.access_key()),
        None => "no credentials".to_string(),
    }
}

/// TLS settings as an error message names them.
fn describe_tls(tls: Option<&TlsConfig>) -> String {
    match tls {
        Some(t) => format!("TLS settings {t:?}"),
        None => "no TLS (plaintext)".to_string(),
    }
}

/// Forgets `instance` (called by its shutdown, a failed start and its `Drop`); a newer
/// instance under the same id stays.
pub(crate) fn remove(client_id: &str, instance: &MQClientInstance) {
    let mut t = table().lock();
    if t.get(client_id)
        .is_some_and(|w| std::ptr::eq(w.as_ptr(), instance))
    {
        t.remove(client_id);
    }
}

/// Number of live instances (for tests and diagnostics).
#[cfg(feature = "unstable-internals")]
pub fn instance_count() -> usize {
    table()
        .lock()
        .values()
        .filter(|w| w.strong_count() > 0)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(instance: &str) -> ClientConfig {
        // Nothing listens there; the jobs fail quietly.
        crate::ClientOptions::new()
            .namesrv_addr("127.0.0.1:1")
            .instance_name(format!(
                "{instance}-{}-{}",
                std::process::id(),
                crate::util::random_u64()
            ))
            .into_config()
    }

    fn in_table(config: &ClientConfig) -> bool {
        table().lock().contains_key(&config.client_id())
    }

    #[test]
    fn dropping_the_last_user_ends_the_instance() {
        let config = config("drop");
        let instance = get_or_create_instance(&config).unwrap();
        instance.start().unwrap();
        let again = get_or_create_instance(&config).unwrap();
        assert!(Arc::ptr_eq(&instance, &again), "one instance per client id");
        let weak = Arc::downgrade(&instance);
        let remoting = instance.remoting().clone();
        drop(again);
        drop(instance);
        // A job running on the timer holds a strong reference for its run; then the
        // instance ends there (and must not join that thread). So wait a little.
        let refused = || {
            remoting
                .invoke_sync(
                    "127.0.0.1:1",
                    crate::protocol::RemotingCommand::request(
                        crate::protocol::RequestCode::GET_BROKER_CLUSTER_INFO,
                    ),
                    Duration::from_millis(100),
                )
                .err()
                .is_some_and(|e| e.kind() == crate::ErrorKind::State)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while (weak.strong_count() > 0 || in_table(&config) || !refused())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            weak.upgrade().is_none(),
            "the table kept the instance alive"
        );
        assert!(!in_table(&config), "a dead entry stayed in the table");
        // Its Drop stopped the remoting client (and with it the I/O thread).
        assert!(refused(), "the remoting client still runs");
    }

    #[test]
    fn clients_of_one_instance_with_other_credentials_are_a_config_error() {
        let plain = config("creds");
        let mut signed = plain.clone();
        signed.remoting.credentials = Some(Credentials::new("ak", "first-secret"));
        let mut other = plain.clone();
        other.remoting.credentials = Some(Credentials::new("ak", "second-secret"));
        let instance = get_or_create_instance(&signed).unwrap();
        let same = get_or_create_instance(&signed.clone()).unwrap();
        assert!(Arc::ptr_eq(&instance, &same));
        for config in [&plain, &other] {
            let Err(e) = get_or_create_instance(config) else {
                panic!("an instance with other credentials was shared");
            };
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{e}");
            let text = format!("{e} {e:?}");
            assert!(text.contains("access key \"ak\""), "{text}");
            assert!(!text.contains("secret"), "{text}");
        }
    }

    #[test]
    fn a_tls_client_of_a_plain_instance_is_a_config_error_not_a_plaintext_client() {
        use crate::remoting::TlsConfig;
        let plain = config("tls");
        let mut tls = plain.clone();
        tls.remoting.tls = Some(TlsConfig::new());
        let mut other_tls = plain.clone();
        other_tls.remoting.tls = Some(TlsConfig::danger_accept_any_server_certificate());
        let instance = get_or_create_instance(&plain).unwrap();
        for config in [&tls, &other_tls] {
            let Err(e) = get_or_create_instance(config) else {
                panic!("a TLS client shared a plaintext instance");
            };
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{e}");
            assert!(e.to_string().contains("TLS"), "{e}");
        }
        drop(instance);
        // The other way round: a plain client of a TLS instance.
        let mut tls = config("tls-first");
        tls.remoting.tls = Some(TlsConfig::new());
        let mut plain = tls.clone();
        plain.remoting.tls = None;
        let _instance = get_or_create_instance(&tls).unwrap();
        let same = get_or_create_instance(&tls.clone()).unwrap();
        assert!(Arc::ptr_eq(&_instance, &same), "same TLS settings share");
        let e = get_or_create_instance(&plain)
            .err()
            .expect("a plaintext client of a TLS instance");
        assert_eq!(e.kind(), crate::ErrorKind::Config, "{e}");
    }

    #[test]
    fn a_failed_start_leaves_no_instance_behind() {
        let mut config = config("failed");
        // A zero period is refused when the jobs are scheduled: start fails.
        config.poll_name_server_interval = Duration::ZERO;
        let instance = get_or_create_instance(&config).unwrap();
        let e = instance.start().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
        assert_eq!(instance.state(), ServiceState::StartFailed);
        assert!(
            !in_table(&config),
            "the failed instance stayed in the table"
        );
        // The next user gets a new instance, not the failed one.
        let next = get_or_create_instance(&config).unwrap();
        assert!(!Arc::ptr_eq(&instance, &next));
        assert_eq!(next.state(), ServiceState::CreateJust);
        drop(next);
        assert!(!in_table(&config));
    }
}
