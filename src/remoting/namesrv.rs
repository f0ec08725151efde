//! Name-server selection of the remoting client (Java `NettyRemotingClient`'s
//! `namesrvAddrList`, `getAndCreateNameserverChannel`): the address list, the chosen
//! server and the calls that go to it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use log::{debug, info};

use super::RemotingClient;
use crate::error::{Error, ErrorKind, Result, TimeoutPhase};
use crate::protocol::RemotingCommand;
use crate::util;

pub(super) struct NamesrvState {
    pub(super) list: Vec<String>,
    pub(super) chosen: Option<String>,
}

/// The error of a name-server choice that failed on every address: when they all failed
/// alike (refused, timed out, TLS), the last error with its kind, phase and address, so
/// that a TLS or timeout failure is not reported as a mere connect error.
pub(super) fn no_name_server(mut failures: Vec<Error>) -> Error {
    let alike = failures.windows(2).all(|w| w[0].kind() == w[1].kind());
    let listed = |failures: &[Error]| {
        failures
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    };
    match failures.pop() {
        Some(last) if alike && failures.is_empty() => {
            last.context("no name server could be reached")
        }
        Some(last) if alike => {
            let others = listed(&failures);
            last.context(format!("no name server could be reached [{others}]"))
        }
        last => {
            failures.extend(last);
            Error::new(
                ErrorKind::Connect,
                format!("no name server could be reached [{}]", listed(&failures)),
            )
        }
    }
}

impl RemotingClient {
    /// Replaces the name-server list when it differs from the current one (as a set).
    /// The new list is shuffled; returns whether it changed. Java:
    /// `updateNameServerAddressList`.
    pub fn update_name_server_address_list(&self, addrs: &[String]) -> bool {
        let mut addrs: Vec<String> = addrs
            .iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if addrs.is_empty() {
            return false;
        }
        let mut st = self.namesrv.lock();
        let changed = addrs.len() != st.list.len() || addrs.iter().any(|a| !st.list.contains(a));
        if changed {
            util::shuffle(&mut addrs);
            info!("name server address list updated: {addrs:?}");
            st.list = addrs;
            // A chosen server that left the list is dropped and its connection closed.
            if let Some(chosen) = st.chosen.clone() {
                if !st.list.contains(&chosen) {
                    st.chosen = None;
                    drop(st);
                    self.close_connection(&chosen, "name server left the address list");
                }
            }
        }
        changed
    }

    /// The current name-server list.
    pub fn name_server_address_list(&self) -> Vec<String> {
        self.namesrv.lock().list.clone()
    }

    /// The name server requests currently go to, if one was chosen.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn chosen_name_server(&self) -> Option<String> {
        self.namesrv.lock().chosen.clone()
    }

    /// Sends `request` to a name server (Java `invokeSync(null, ...)`), choosing one as
    /// `getAndCreateNameserverChannel` does: keep the chosen server while its connection is
    /// up, otherwise try each address in turn from a rotating index.
    pub fn invoke_namesrv_sync(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let deadline = Instant::now() + timeout;
        let addr = self.choose_name_server(deadline)?;
        let left = deadline.saturating_duration_since(Instant::now());
        let result = self.invoke_sync(&addr, request, left);
        if let Err(e) = &result {
            if matches!(
                e.kind(),
                ErrorKind::Connect | ErrorKind::ConnectionClosed | ErrorKind::Tls
            ) {
                let mut st = self.namesrv.lock();
                if st.chosen.as_deref() == Some(addr.as_str()) {
                    st.chosen = None;
                }
            }
        }
        result
    }

    /// Sends every request to one name server (chosen as
    /// [`invoke_namesrv_sync`](Self::invoke_namesrv_sync) does) at once and waits for all
    /// the answers, returned in the order of `requests`: a refresh of many topics costs
    /// about one round trip instead of one per topic. `Err` when no name server can be
    /// chosen (nothing was sent).
    pub(crate) fn invoke_namesrv_all(
        &self,
        requests: Vec<RemotingCommand>,
        timeout: Duration,
    ) -> Result<Vec<Result<RemotingCommand>>> {
        let deadline = Instant::now() + timeout;
        let addr = self.choose_name_server(deadline)?;
        let answers = self.invoke_all(
            requests.into_iter().map(|r| (addr.clone(), r)).collect(),
            deadline,
        );
        let connection_lost = answers.iter().any(|r| {
            r.as_ref().err().is_some_and(|e| {
                matches!(
                    e.kind(),
                    ErrorKind::Connect | ErrorKind::ConnectionClosed | ErrorKind::Tls
                )
            })
        });
        if connection_lost {
            let mut st = self.namesrv.lock();
            if st.chosen.as_deref() == Some(addr.as_str()) {
                st.chosen = None;
            }
        }
        Ok(answers)
    }

    fn choose_name_server(&self, deadline: Instant) -> Result<String> {
        let chosen = self.namesrv.lock().chosen.clone();
        if let Some(addr) = chosen {
            if self.is_connected(&addr) {
                return Ok(addr);
            }
        }
        let lock_deadline = deadline.min(Instant::now() + self.shared.config.namesrv_lock_timeout);
        let Some(_guard) = self.namesrv_lock.try_lock_until(lock_deadline) else {
            return Err(Error::timeout(
                TimeoutPhase::Lock,
                self.shared.config.namesrv_lock_timeout,
            )
            .context("choosing a name server"));
        };
        let list = {
            let st = self.namesrv.lock();
            if let Some(addr) = &st.chosen {
                if self.is_connected(addr) {
                    return Ok(addr.clone());
                }
            }
            st.list.clone()
        };
        if list.is_empty() {
            return Err(Error::new(
                ErrorKind::Config,
                "no name server address is configured (set NAMESRV_ADDR or namesrv_addr)",
            ));
        }
        let mut failures = Vec::new();
        for _ in 0..list.len() {
            let i = self.namesrv_index.fetch_add(1, Ordering::Relaxed) % list.len();
            let addr = &list[i];
            match self.connect(addr, deadline) {
                Ok(()) => {
                    debug!("name server chosen: {addr}");
                    self.namesrv.lock().chosen = Some(addr.clone());
                    return Ok(addr.clone());
                }
                Err(e) => failures.push(e),
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(no_name_server(failures))
    }
}
