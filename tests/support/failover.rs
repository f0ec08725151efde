//! What the failover binaries (`tests/master_slave`, `tests/controller`) share: the scale,
//! names, polling, a hook that logs pulls per broker address, the read-back that counts
//! messages by id, and the table each scenario prints.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode};
use rocketmq_blocking::remoting::{RemotingClient, RpcHook};
use rocketmq_blocking::{ConsumeFromWhere, LitePullConsumer, MessageQueue, Producer};

/// `RMQ_RELIABILITY_SCALE` (default 1: the reduced size of `cargo test`; 10 is full size).
pub fn scale() -> usize {
    std::env::var("RMQ_RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(1)
}

/// A name unique in this test run: `<prefix>_<pid>_<n>`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Polls `cond` every 50 ms for up to `timeout`; true as soon as it holds.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

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

/// Reads every queue of `topic` from offset 0 until `want` is covered or `timeout` passes;
/// returns how often each message id was seen.
pub fn read_back(
    namesrv: &str,
    topic: &str,
    want: &HashSet<String>,
    timeout: Duration,
) -> HashMap<String, usize> {
    let p = Producer::builder(unique("pg_readback"))
        .namesrv_addr(namesrv)
        .start()
        .expect("read-back producer");
    let queues: Vec<MessageQueue> = p.fetch_publish_message_queues(topic).expect("queues");
    p.shutdown();
    let c = LitePullConsumer::builder(unique("cg_readback"))
        .namesrv_addr(namesrv)
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .auto_commit(false)
        .start()
        .expect("read-back consumer");
    c.assign(&queues).expect("assign");
    for q in &queues {
        c.seek_to_begin(q).expect("seek");
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && !want.iter().all(|id| seen.contains_key(id)) {
        for m in c
            .poll_timeout(Duration::from_millis(500))
            .unwrap_or_default()
        {
            *seen.entry(m.msg_id().to_string()).or_default() += 1;
        }
    }
    c.shutdown();
    seen
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
