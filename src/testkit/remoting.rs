//! The requests the testkit sends itself, through the crate's own client: the readiness
//! check (is every broker registered at every name server?) and a registration nudge.
//!
//! A 5.x broker registers at boot only with the name servers that its client's
//! asynchronous availability scan has already confirmed (`getAvailableNameSrvList`).
//! When the scan loses that race (seen on a busy 2-core machine), the next attempt is
//! the periodic one, 10 s later. `UPDATE_BROKER_CONFIG` with `brokerPermission` makes
//! the broker call `registerBrokerAll` at once; we send the value it already has.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use parking_lot::Mutex;

use super::ReadinessCheck;
use crate::admin::Admin;
use crate::client::expect_success;
use crate::protocol::{RemotingCommand, RequestCode};
use crate::remoting::{Credentials, RemotingClient, RemotingConfig};
use crate::TlsConfig;

const TIMEOUT: Duration = Duration::from_secs(3);

/// Asks the broker at `addr` to set `brokerPermission` (to its current value), which
/// re-registers it with every name server it knows to be available.
/// On a cluster that enforces ACL the request is signed as its admin; with TLS it
/// connects with `tls`.
pub(crate) fn nudge_registration(
    addr: &SocketAddr,
    permission: &str,
    credentials: Option<Credentials>,
    tls: Option<TlsConfig>,
) -> Result<(), String> {
    let config = RemotingConfig {
        credentials,
        tls,
        ..RemotingConfig::default()
    };
    let client = RemotingClient::new(config).map_err(|e| e.to_string())?;
    let request = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(format!("brokerPermission={permission}\n").into_bytes());
    let response = client
        .invoke_sync(&addr.to_string(), request, TIMEOUT)
        .map_err(|e| e.to_string())?;
    expect_success(&response).map_err(|e| e.to_string())
}

/// The default readiness check: every expected broker is registered, with its address
/// (under any broker id: a slave's is 1 and up), at every name server
/// (GET_BROKER_CLUSTER_INFO through our own client). With `require_master` (controller
/// mode, where the controllers pick the master), every expected group also has one.
/// With TLS, it connects with `tls`.
pub(crate) fn registered_at_every_name_server(
    require_master: bool,
    tls: Option<TlsConfig>,
) -> ReadinessCheck {
    let admins: Mutex<HashMap<String, Admin>> = Mutex::new(HashMap::new());
    Box::new(move |namesrv, expected| {
        let mut admins = admins.lock();
        for ns in namesrv.split(';').filter(|s| !s.is_empty()) {
            if !admins.contains_key(ns) {
                let mut options = crate::ClientOptions::new().namesrv_addr(ns);
                if let Some(tls) = &tls {
                    options = options.tls(tls.clone());
                }
                let admin = Admin::builder().client_options(options).start();
                admins.insert(ns.to_string(), admin.map_err(|e| e.to_string())?);
            }
            let Some(admin) = admins.get(ns) else {
                return Ok(false);
            };
            let info = admin.cluster_info().map_err(|e| format!("{ns}: {e}"))?;
            for (name, addr) in expected {
                let Some(group) = info.broker_addr_table.get(name) else {
                    return Ok(false);
                };
                if !group.broker_addrs.values().any(|a| a == addr)
                    || (require_master && group.master_addr().is_none())
                {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    })
}
