//! What the failover binaries (`tests/master_slave`, `tests/controller`) share beyond
//! `tests/common/counting.rs` (the scale, names, polling and the read-back, re-exported
//! here): a hook that logs pulls per broker address, the loss count and the table each
//! scenario prints.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode};
use rocketmq_blocking::remoting::{RemotingClient, RpcHook};

// Not every binary uses every one of them.
#[allow(unused_imports)]
pub use crate::counting::{eventually, read_back, scale, unique};

/// Every PULL_MESSAGE request a client sends, with its target, queue id, offset and time.
#[derive(Default)]
pub struct PullLog {
    pulls: Mutex<Vec<(String, i32, i64, Instant)>>,
}

impl PullLog {
    pub fn install(remoting: &RemotingClient) -> Arc<PullLog> {
        let log = Arc::new(PullLog::default());
        remoting.register_rpc_hook(log.clone());
        log
    }

    /// Per queue id, the offset and time of the first pull sent to `addr` at or after
    /// `since`.
    pub fn first_to_each_queue(&self, addr: &str, since: Instant) -> HashMap<i32, (i64, Instant)> {
        let mut first = HashMap::new();
        for (a, q, o, at) in self.pulls.lock().iter() {
            if a == addr && *at >= since {
                first.entry(*q).or_insert((*o, *at));
            }
        }
        first
    }

    /// The first pull sent to `addr` at or after `since`.
    pub fn first_to(&self, addr: &str, since: Instant) -> Option<Instant> {
        self.pulls
            .lock()
            .iter()
            .find(|(a, _, _, at)| a == addr && *at >= since)
            .map(|p| p.3)
    }
}

impl RpcHook for PullLog {
    fn before_request(&self, addr: &str, request: &mut RemotingCommand) {
        if request.request_code() != RequestCode::PULL_MESSAGE {
            return;
        }
        let field = |k: &str| request.ext_fields.get(k).and_then(|v| v.parse().ok());
        if let (Some(q), Some(o)) = (field("queueId"), field("queueOffset")) {
            self.pulls
                .lock()
                .push((addr.to_string(), q as i32, o, Instant::now()));
        }
    }
}

/// `(lost, duplicates)` of `seen` against `want`.
pub fn lost_and_duplicates(
    want: &HashSet<String>,
    seen: &HashMap<String, usize>,
) -> (usize, usize) {
    let lost = want.iter().filter(|id| !seen.contains_key(*id)).count();
    let duplicates = seen.values().map(|n| n.saturating_sub(1)).sum();
    (lost, duplicates)
}

/// Seconds from `from` to `to`, `-` when there is no `to`.
pub fn secs(from: Instant, to: Option<Instant>) -> String {
    to.map_or_else(
        || "-".to_string(),
        |t| format!("{:.1} s", t.saturating_duration_since(from).as_secs_f64()),
    )
}

/// Prints a scenario's figures as a two-column table.
pub fn print_table(title: &str, rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    eprintln!("\n{title} (scale {})", scale());
    for (k, v) in rows {
        eprintln!("  {k:<width$}  {v}");
    }
}
