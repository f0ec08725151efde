//! What every client of the 2.x API is configured with (`Set*NameServerAddress`,
//! `Set*SessionCredentials`, ...): the setters record into [`Settings`], which `Start*`
//! turns into the client's options. One implementation of each common setter, for the
//! three client kinds ([`Configurable`]).

use std::ffi::{c_char, c_int, c_long, CString};
use std::sync::Arc;

use parking_lot::MappedMutexGuard;
use rocketmq_blocking::{ClientOptions, Credentials};

use crate::{c_str, guard, guard_value, logs, CResult, Failure};

/// What the setters record, applied at start.
#[derive(Default, Clone)]
pub(crate) struct Settings {
    pub(crate) group: String,
    /// `group` for `Get*GroupID`: valid until the group is set again.
    pub(crate) group_c: CString,
    pub(crate) namesrv: Option<String>,
    pub(crate) domain: Option<String>,
    pub(crate) instance: Option<String>,
    pub(crate) credentials: Option<(String, String)>,
    pub(crate) trace: bool,
}

impl Settings {
    /// Settings of a client of `group` (a C string argument).
    pub(crate) fn new(group: *const c_char) -> CResult<Settings> {
        let mut s = Settings::default();
        set_group(&mut s, group)?;
        Ok(s)
    }

    /// The client options of these settings.
    pub(crate) fn client_options(&self) -> ClientOptions {
        let mut o = ClientOptions::new();
        if let Some(a) = &self.namesrv {
            o = o.namesrv_addr(a.clone());
        } else if let Some(d) = &self.domain {
            o = o.no_namesrv_addr().name_server_address_url(domain_url(d));
        }
        if let Some(i) = &self.instance {
            o = o.instance_name(i.clone());
        }
        if let Some((ak, sk)) = &self.credentials {
            o = o.credentials(Credentials::new(ak.clone(), sk.clone()));
        }
        o
    }
}

fn set_group(s: &mut Settings, group: *const c_char) -> CResult<()> {
    let g = c_str(group, "groupId")?;
    s.group_c = CString::new(g).map_err(|_| Failure::bad("groupId has a NUL"))?;
    s.group = g.to_string();
    Ok(())
}

/// The name-server address server of a 2.x "domain": a full URL as is, else
/// `http://<domain>:8080/rocketmq/nsaddr` (the original's default path).
pub(crate) fn domain_url(domain: &str) -> String {
    if domain.contains("://") {
        domain.to_string()
    } else if domain.contains(':') {
        format!("http://{domain}/rocketmq/nsaddr")
    } else {
        format!("http://{domain}:8080/rocketmq/nsaddr")
    }
}

/// A count or size argument: positive, or `NULL_POINTER` naming it.
pub(crate) fn positive(v: c_int, what: &str) -> CResult<usize> {
    usize::try_from(v)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Failure::bad(format!("{what} {v} is not positive")))
}

/// A client handle with [`Settings`].
pub(crate) trait Configurable {
    fn settings(&self) -> MappedMutexGuard<'_, Settings>;
}

/// Applies `f` to the settings of the client `h` (a registry lookup).
fn set<H: Configurable>(h: CResult<Arc<H>>, f: impl FnOnce(&mut Settings) -> CResult<()>) -> c_int {
    guard(|| f(&mut h?.settings()))
}

/// Sets `slot` to the C string `p`.
fn text(slot: &mut Option<String>, p: *const c_char, what: &str) -> CResult<()> {
    *slot = Some(c_str(p, what)?.to_string());
    Ok(())
}

pub(crate) fn group<H: Configurable>(h: CResult<Arc<H>>, group: *const c_char) -> c_int {
    set(h, |s| set_group(s, group))
}

/// The group; valid until the group is set again or the client destroyed.
pub(crate) fn group_id<H: Configurable>(h: CResult<Arc<H>>) -> *const c_char {
    guard_value(std::ptr::null(), || Ok(h?.settings().group_c.as_ptr()))
}

pub(crate) fn namesrv<H: Configurable>(h: CResult<Arc<H>>, p: *const c_char) -> c_int {
    set(h, |s| text(&mut s.namesrv, p, "namesrv"))
}

/// The HTTP address server of `domain`, asked when no name-server address is set.
pub(crate) fn domain<H: Configurable>(h: CResult<Arc<H>>, p: *const c_char) -> c_int {
    set(h, |s| text(&mut s.domain, p, "domain"))
}

pub(crate) fn instance<H: Configurable>(h: CResult<Arc<H>>, p: *const c_char) -> c_int {
    set(h, |s| text(&mut s.instance, p, "instanceName"))
}

/// ACL credentials. The channel is checked and otherwise unused: the broker's ACL signs
/// only the access key and secret.
pub(crate) fn credentials<H: Configurable>(
    h: CResult<Arc<H>>,
    access_key: *const c_char,
    secret_key: *const c_char,
    channel: *const c_char,
) -> c_int {
    set(h, |s| {
        let ak = c_str(access_key, "accessKey")?;
        let sk = c_str(secret_key, "secretKey")?;
        c_str(channel, "channel")?;
        s.credentials = Some((ak.to_string(), sk.to_string()));
        Ok(())
    })
}

/// `OPEN` (0) traces in `RMQ_SYS_TRACE_TOPIC`; `CLOSE` (1) does not.
pub(crate) fn trace<H: Configurable>(h: CResult<Arc<H>>, model: c_int) -> c_int {
    set(h, |s| {
        s.trace = match model {
            0 => true,
            1 => false,
            _ => {
                return Err(Failure::bad(format!(
                    "trace model {model} is not OPEN or CLOSE"
                )))
            }
        };
        Ok(())
    })
}

/// Accepted and ignored: this library writes no log files.
pub(crate) fn log_path<H: Configurable>(h: CResult<Arc<H>>, p: *const c_char) -> c_int {
    set(h, |_| c_str(p, "logPath").map(|_| ()))
}

/// Checked and ignored: this library writes no log files.
pub(crate) fn log_files<H: Configurable>(h: CResult<Arc<H>>, num: c_int, size: c_long) -> c_int {
    set(h, |_| logs::check_files(num, size))
}

/// The process-wide maximum level of the Rust `log` facade; the first call installs a
/// logger printing to standard error (see `logs`).
pub(crate) fn log_level<H: Configurable>(h: CResult<Arc<H>>, level: c_int) -> c_int {
    set(h, |_| logs::set_level(level))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_become_address_server_urls() {
        assert_eq!(
            domain_url("ns.example"),
            "http://ns.example:8080/rocketmq/nsaddr"
        );
        assert_eq!(
            domain_url("ns.example:9000"),
            "http://ns.example:9000/rocketmq/nsaddr"
        );
        assert_eq!(domain_url("http://a/b"), "http://a/b");
    }
}
