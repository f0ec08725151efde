//! Transactional messages against a real RocketMQ cluster (5.3.3 unless
//! `RMQ_TEST_VERSION` says otherwise; `.ci/run` runs it on 4.9.7 too), started once for
//! this binary with check-backs that come within seconds: the broker checks every
//! second (`transactionCheckInterval`) each half message older than two seconds
//! (`transactionTimeOut`), and 5.x writes its commit/rollback records every 200 ms
//! (`transactionOpBatchInterval`, 3 s by default). The last must stay well below the
//! timeout: a check that comes before a commit's record is written asks about a
//! committed message, and a checker that answers commit again has the broker deliver it
//! twice (`examples/transaction.rs` did so with the default 3 s and a 2 s timeout).
//!
//! Every test counts by message id, reading from the first offset afterwards:
//! committed messages are all there, rolled-back ones never; duplicates are counted and
//! printed, never hidden. Sizes scale with `RMQ_RELIABILITY_SCALE` (default 1).
mod cli;
#[path = "../common/counting.rs"]
mod counting;
mod delivery;
mod interop;
#[path = "../common/java.rs"]
mod java;
mod trace;

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{
    Admin, LocalTransactionState, Message, MessageExt, Producer, ProducerBuilder, TopicConfig,
    TransactionListener, TransactionProducerBuilder,
};

pub use counting::{eventually, read_back, scale, unique};

/// Broker settings of this binary's cluster.
pub const CHECK_INTERVAL_MS: u64 = 1000;
pub const TRANSACTION_TIMEOUT_MS: u64 = 2000;
/// Checks of one half message before the broker discards it (Java 15): the storm test
/// leaves its messages unknown for many rounds.
pub const CHECK_MAX: u32 = 60;

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        let started = Instant::now();
        let version = std::env::var("RMQ_TEST_VERSION").unwrap_or_else(|_| "5.3.3".into());
        let c = Cluster::builder()
            .version(&version)
            .brokers(1)
            .broker_config("transactionCheckInterval", &CHECK_INTERVAL_MS.to_string())
            .broker_config("transactionTimeOut", &TRANSACTION_TIMEOUT_MS.to_string())
            .broker_config("transactionCheckMax", &CHECK_MAX.to_string())
            .broker_config("transactionOpBatchInterval", "200")
            .broker_config("waitTimeMillsInSendQueue", "5000")
            .broker_config("osPageCacheBusyTimeOutMills", "5000")
            .start()
            .unwrap_or_else(|e| panic!("could not start the test cluster: {e}"));
        eprintln!(
            "transactions: RocketMQ {} up in {:.1}s",
            c.version(),
            started.elapsed().as_secs_f64()
        );
        c
    })
}

pub fn namesrv() -> String {
    cluster().namesrv_addr()
}

pub fn version() -> String {
    cluster().version().to_string()
}

/// A fresh topic with `queues` queues.
pub fn topic(prefix: &str, queues: u32) -> String {
    let name = unique(prefix);
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin client");
    admin
        .create_topic(&TopicConfig::new(&name, queues))
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

/// What the local transaction (`local`) and the checker (`check`) do with a message, as
/// its user properties say: `commit`, `rollback`, `unknown`, `panic`, and for the checker
/// `panic-once` (panics on the first check, commits on the next).
pub fn message(topic: &str, i: usize, local: &str, check: &str) -> Message {
    let mut m = Message::new(topic, format!("tx {i} {local}/{check}"));
    m.put_user_property("local", local).unwrap();
    m.put_user_property("check", check).unwrap();
    m
}

fn state(s: Option<&str>) -> LocalTransactionState {
    match s {
        Some("commit") => LocalTransactionState::CommitMessage,
        Some("rollback") => LocalTransactionState::RollbackMessage,
        Some("panic") => panic!("a local transaction that panics"),
        _ => LocalTransactionState::Unknown,
    }
}

/// Every check a listener was asked, by message id, with when it came.
#[derive(Default)]
pub struct Checks {
    pub seen: Mutex<Vec<(String, Instant)>>,
    /// Ids the local transaction saw, with their transaction ids.
    pub executed: Mutex<HashMap<String, Option<String>>>,
    /// The threads the checks ran on.
    pub threads: Mutex<HashSet<String>>,
}

impl Checks {
    pub fn count(&self, id: &str) -> usize {
        self.seen.lock().iter().filter(|(i, _)| i == id).count()
    }

    pub fn first(&self, id: &str) -> Option<Instant> {
        self.seen
            .lock()
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, t)| *t)
    }

    pub fn total(&self) -> usize {
        self.seen.lock().len()
    }
}

/// The listener of the tests: it does what each message's properties say and records
/// every call in `checks`.
pub struct ByProperties(pub Arc<Checks>);

impl TransactionListener for ByProperties {
    fn execute_local_transaction(&self, msg: &Message, _arg: &dyn Any) -> LocalTransactionState {
        let id = msg.property("UNIQ_KEY").unwrap_or_default().to_string();
        self.0
            .executed
            .lock()
            .insert(id, msg.transaction_id().map(str::to_string));
        state(msg.property("local"))
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let id = msg.msg_id().to_string();
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        self.0.threads.lock().insert(thread);
        let n = {
            let mut seen = self.0.seen.lock();
            seen.push((id.clone(), Instant::now()));
            seen.iter().filter(|(i, _)| *i == id).count()
        };
        match msg.property("check") {
            Some("panic-once") if n == 1 => panic!("a checker that panics on {id}"),
            Some("panic-once") => LocalTransactionState::CommitMessage,
            other => state(other),
        }
    }
}

/// A producer of `group` on this cluster with a generous send timeout (a loaded
/// machine's first route lookup can eat Java's 3 s), to be made transactional.
pub fn plain_builder(group: &str) -> ProducerBuilder {
    Producer::builder(group)
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .send_timeout(Duration::from_secs(10))
}

/// [`plain_builder`] made transactional with `listener`.
pub fn producer_builder(
    group: &str,
    listener: impl TransactionListener,
) -> TransactionProducerBuilder {
    plain_builder(group).transactional(listener)
}

/// Reads `topic` from the first offset; returns (found once, duplicated, missing) of
/// `committed` and the ids of `rolled_back` that were found.
pub fn count(
    topic: &str,
    committed: &HashSet<String>,
    rolled_back: &HashSet<String>,
    timeout: Duration,
) -> Counted {
    let found = read_back(&namesrv(), topic, committed, timeout);
    let missing = committed
        .iter()
        .filter(|id| !found.contains_key(*id))
        .count();
    let duplicates = found.values().map(|n| n - 1).sum();
    let leaked: Vec<String> = rolled_back
        .iter()
        .filter(|id| found.contains_key(*id))
        .cloned()
        .collect();
    let strangers = found
        .keys()
        .filter(|id| !committed.contains(*id) && !rolled_back.contains(*id))
        .count();
    Counted {
        delivered: committed.len() - missing,
        missing,
        duplicates,
        leaked,
        strangers,
    }
}

#[derive(Debug)]
pub struct Counted {
    pub delivered: usize,
    pub missing: usize,
    pub duplicates: usize,
    /// Rolled-back ids that a consumer saw.
    pub leaked: Vec<String>,
    /// Ids nobody sent in this test.
    pub strangers: usize,
}
