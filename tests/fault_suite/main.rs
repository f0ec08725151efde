//! The fault suite: scenarios with counts against a real RocketMQ 5.3.3 cluster (one name
//! server, `broker-a` and `broker-b`) whose brokers are reached only through the testkit's
//! TCP proxies, which stall, cut and black-hole the clients' connections. Every
//! acknowledged send must be found again by a consumer reading from the first offset;
//! duplicates are counted, never hidden.
//!
//! Sizes scale with `RMQ_RELIABILITY_SCALE` (default 1, the reduced size CI runs); the
//! full-size run for RELIABILITY.md is
//! `RMQ_RELIABILITY_SCALE=10 cargo test --test fault_suite -- --nocapture`.
//! Each test prints a small table of its figures. The tests disturb the shared cluster,
//! so each holds [`serial`] for its whole run.
#[path = "../common/counting.rs"]
mod counting;
mod cut;
mod stall;

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use rocketmq_blocking::testkit::proxy::TcpProxy;
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{Admin, TopicConfig};

pub use counting::{eventually, scale, unique};

pub const BROKER_A: &str = "broker-a";
pub const BROKER_B: &str = "broker-b";

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

/// Taken by every test for its whole run. (parking_lot: a failed test does not poison it.)
pub fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock();
    let _ = env_logger::builder().is_test(true).try_init();
    guard
}

/// The shared cluster, started on first use. It is never restarted, so it needs no lock.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let started = Instant::now();
        let c = Cluster::builder()
            .version("5.3.3")
            .brokers(2)
            .broker_proxies(true)
            .start()
            .unwrap_or_else(|e| panic!("could not start the test cluster: {e}"));
        eprintln!(
            "fault_suite: 1 name server + 2 proxied brokers up in {:.1}s: {:?}",
            started.elapsed().as_secs_f64(),
            c.broker_addrs()
        );
        c
    })
}

pub fn namesrv() -> String {
    cluster().namesrv_addr()
}

pub fn proxy(broker: &str) -> &'static TcpProxy {
    cluster()
        .broker_proxy(broker)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Puts every proxy back to plain forwarding on drop, so a failing test does not leave
/// the cluster stalled or black-holed for the next one.
pub struct ForwardOnDrop;

impl Drop for ForwardOnDrop {
    fn drop(&mut self) {
        for b in [BROKER_A, BROKER_B] {
            proxy(b).forward();
        }
    }
}

/// [`counting::read_back`] from this binary's cluster.
pub fn read_back(topic: &str, want: &HashSet<String>, timeout: Duration) -> HashMap<String, usize> {
    counting::read_back(&namesrv(), topic, want, timeout)
}

/// Creates a fresh topic with `queues` queues on both brokers.
pub fn topic_on_both(prefix: &str, queues: u32) -> String {
    let name = unique(prefix);
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin client")
        .create_topic(&TopicConfig::new(&name, queues))
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

/// This process's resident set size in KiB (`VmRSS` of `/proc/self/status`).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What a read-back found: acknowledged ids missing, extra copies, and ids stored though
/// their send failed at the client.
pub struct Tally {
    pub lost: usize,
    pub duplicates: usize,
    pub stored_unacked: usize,
}

pub fn tally(acked: &HashSet<String>, seen: &HashMap<String, usize>) -> Tally {
    Tally {
        lost: acked.iter().filter(|id| !seen.contains_key(*id)).count(),
        duplicates: seen.values().map(|n| n - 1).sum(),
        stored_unacked: seen.keys().filter(|id| !acked.contains(*id)).count(),
    }
}

/// Prints `rows` as a two-column table under `title`.
pub fn table(title: &str, rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = format!("fault_suite: {title}\n");
    for (k, v) in rows {
        out.push_str(&format!("  {k:<width$}  {v}\n"));
    }
    eprint!("{out}");
}
