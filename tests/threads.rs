//! Thread census: every thread a client starts is named `rmq-*` and is gone when the client
//! is shut down or dropped ("every thread is named and joined by its owner").
//!
//! This binary has its own cluster and nothing else: a census needs a process where no
//! other test starts or stops clients meanwhile. Its tests take [`SERIAL`] for their whole
//! run and count `rmq-*` threads against a baseline taken under it. The baseline is not
//! empty: the testkit's readiness check keeps an admin client (a remoting client's
//! threads) per name server while the cluster lives.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::{Mutex, MutexGuard};
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{
    Admin, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus, LitePullConsumer,
    LitePullConsumerBuilder, Message, Producer, PushConsumer,
};

/// The prefix of every thread the crate names (see the thread table in ARCHITECTURE.md).
const PREFIX: &str = "rmq-";

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

fn namesrv() -> String {
    CLUSTER
        .get_or_init(|| {
            let _ = env_logger::builder().is_test(true).try_init();
            match Cluster::builder().brokers(1).start() {
                Ok(c) => Mutex::new(c),
                Err(e) => panic!("could not start the test cluster: {e}"),
            }
        })
        .lock()
        .namesrv_addr()
}

fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    )
}

/// This process's `rmq-*` threads by name, sorted (names as `/proc` shows them: cut to
/// 15 bytes).
fn rmq_threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_string())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    names.sort();
    names
}

/// Holds the census lock and the baseline taken under it.
struct Census {
    _serial: MutexGuard<'static, ()>,
    namesrv: String,
    baseline: Vec<String>,
}

impl Census {
    fn begin() -> Census {
        let serial = SERIAL.lock();
        let namesrv = namesrv();
        Census {
            _serial: serial,
            namesrv,
            baseline: rmq_threads(),
        }
    }

    /// Asserts that `used` started threads of its own (so the census sees them).
    fn assert_running(&self, what: &str) {
        let now = rmq_threads();
        assert!(
            now.len() > self.baseline.len(),
            "{what}: no thread of its own while running: {now:?}"
        );
    }

    /// Waits up to 5 s for the `rmq-*` threads to be the baseline again (a joined thread
    /// leaves `/proc` a moment after the join), then asserts exactly that.
    fn assert_back(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while rmq_threads() != self.baseline && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let now = rmq_threads();
        let left: Vec<&String> = now
            .iter()
            .filter(|n| {
                now.iter().filter(|m| m == n).count()
                    > self.baseline.iter().filter(|m| m == n).count()
            })
            .collect();
        assert_eq!(
            now, self.baseline,
            "{what} left threads behind: {left:?} (baseline {:?})",
            self.baseline
        );
    }
}

fn producer(namesrv: &str) -> Producer {
    Producer::builder(unique("pg_census"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .instance_name(unique("census_p")),
        )
        .start()
        .expect("producer start")
}

/// A topic the broker creates on the first send, holding one message.
fn topic_with_a_message(p: &Producer) -> String {
    let topic = unique("census");
    p.send(&Message::new(&topic, "census"))
        .expect("first send to a new topic");
    topic
}

fn push_consumer(namesrv: &str, topic: &str, orderly: bool, got: Sender<()>) -> PushConsumer {
    let b = PushConsumer::builder(unique("cg_census"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .instance_name(unique("census_c"))
                .poll_name_server_interval(Duration::from_millis(500)),
        )
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset);
    let b = if orderly {
        b.orderly_listener(move |_, _| {
            let _ = got.try_send(());
            ConsumeOrderlyStatus::Success
        })
    } else {
        b.listener(move |_, _| {
            let _ = got.try_send(());
            ConsumeStatus::Success
        })
    };
    b.start().expect("push consumer start")
}

fn lite_builder(namesrv: &str) -> LitePullConsumerBuilder {
    LitePullConsumer::builder(unique("lg_census"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv))
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .broker_suspend_max_time(Duration::from_millis(500))
}

fn poll_one(c: &LitePullConsumer, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match c.poll_timeout(Duration::from_millis(500)) {
            Ok(msgs) if !msgs.is_empty() => return,
            Ok(_) => {}
            Err(e) => panic!("{what}: poll failed: {e}"),
        }
    }
    panic!("{what}: no message within 30 s");
}

fn lite_subscribed(namesrv: &str, topic: &str) -> LitePullConsumer {
    let c = lite_builder(namesrv)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .instance_name(unique("census_l"))
                .poll_name_server_interval(Duration::from_millis(500)),
        )
        .subscribe(topic, "*")
        .start()
        .expect("lite pull consumer start");
    poll_one(&c, "lite pull (subscribe)");
    c
}

fn lite_assigned(namesrv: &str, p: &Producer, topic: &str) -> LitePullConsumer {
    let c = lite_builder(namesrv)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .instance_name(unique("census_a")),
        )
        .start()
        .expect("lite pull consumer start");
    let mqs = p
        .fetch_publish_message_queues(topic)
        .expect("queues of the topic");
    c.assign(&mqs).expect("assign");
    poll_one(&c, "lite pull (assign)");
    c
}

/// How a client ends in a census.
#[derive(Clone, Copy, Debug)]
enum End {
    Shutdown,
    Drop,
}

const ENDS: [End; 2] = [End::Shutdown, End::Drop];

#[test]
fn a_producer_leaves_no_thread_behind() {
    for end in ENDS {
        let census = Census::begin();
        let p = producer(&census.namesrv);
        topic_with_a_message(&p);
        census.assert_running("producer");
        if let End::Shutdown = end {
            p.shutdown();
        }
        drop(p);
        census.assert_back(&format!("producer ({end:?})"));
    }
}

#[test]
fn a_transaction_producer_leaves_no_thread_behind() {
    use rocketmq_blocking::{LocalTransactionState as S, TransactionProducer};
    for end in ENDS {
        let census = Census::begin();
        let listener = (
            |_: &rocketmq_blocking::Message, _: &dyn std::any::Any| S::CommitMessage,
            |_: &rocketmq_blocking::MessageExt| S::CommitMessage,
        );
        let p = TransactionProducer::builder(unique("pg_census_tx"), listener)
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(&census.namesrv)
                    .instance_name(unique("census_tx")),
            )
            .check_thread_pool_min_size(2)
            .check_thread_pool_max_size(2)
            .start()
            .expect("transaction producer start");
        let topic = topic_with_a_message(p.producer());
        let msg = rocketmq_blocking::Message::new(&topic, "tx");
        p.send_in_transaction(&msg, &())
            .expect("send in transaction");
        census.assert_running("transaction producer");
        let checkers = rmq_threads()
            .iter()
            .filter(|n| n.starts_with("rmq-tx-check"))
            .count();
        assert_eq!(checkers, 2, "{:?}", rmq_threads());
        if let End::Shutdown = end {
            p.shutdown();
        }
        drop(p);
        census.assert_back(&format!("transaction producer ({end:?})"));
    }
}

#[test]
fn push_consumers_leave_no_thread_behind() {
    for (orderly, end) in [
        (false, End::Shutdown),
        (false, End::Drop),
        (true, End::Shutdown),
        (true, End::Drop),
    ] {
        let census = Census::begin();
        let what = format!(
            "{} push consumer ({end:?})",
            if orderly { "orderly" } else { "concurrent" }
        );
        let p = producer(&census.namesrv);
        let topic = topic_with_a_message(&p);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let c = push_consumer(&census.namesrv, &topic, orderly, tx);
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            panic!("{what}: no message within 30 s");
        }
        census.assert_running(&what);
        if let End::Shutdown = end {
            c.shutdown();
        }
        drop(c);
        p.shutdown();
        drop(p);
        census.assert_back(&what);
    }
}

#[test]
fn lite_pull_consumers_leave_no_thread_behind() {
    for (assign, end) in [
        (false, End::Shutdown),
        (false, End::Drop),
        (true, End::Shutdown),
        (true, End::Drop),
    ] {
        let census = Census::begin();
        let what = format!(
            "lite pull consumer in {} mode ({end:?})",
            if assign { "assign" } else { "subscribe" }
        );
        let p = producer(&census.namesrv);
        let topic = topic_with_a_message(&p);
        let c = if assign {
            lite_assigned(&census.namesrv, &p, &topic)
        } else {
            lite_subscribed(&census.namesrv, &topic)
        };
        census.assert_running(&what);
        if let End::Shutdown = end {
            c.shutdown();
        }
        drop(c);
        p.shutdown();
        drop(p);
        census.assert_back(&what);
    }
}

#[test]
fn a_start_without_a_name_server_leaves_no_thread_behind() {
    let census = Census::begin();
    let p = Producer::builder(unique("pg_no_ns"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("census_no_ns")),
        )
        .start();
    assert!(p.is_err(), "a producer without a name server started");
    census.assert_back("producer without a name server");
    let c = PushConsumer::builder(unique("cg_no_ns"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("census_no_ns")),
        )
        .subscribe("TopicTest", "*")
        .listener(|_, _| ConsumeStatus::Success)
        .start();
    assert!(c.is_err(), "a push consumer without a name server started");
    census.assert_back("push consumer without a name server");
    let l = LitePullConsumer::builder(unique("lg_no_ns"))
        .client_options(
            ClientOptions::new()
                .no_namesrv_addr()
                .instance_name(unique("census_no_ns")),
        )
        .subscribe("TopicTest", "*")
        .start();
    assert!(
        l.is_err(),
        "a lite pull consumer without a name server started"
    );
    census.assert_back("lite pull consumer without a name server");
}

#[test]
fn an_admin_client_leaves_no_thread_behind() {
    let census = Census::begin();
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&census.namesrv))
        .start()
        .expect("admin");
    assert!(admin.cluster_info().is_ok(), "cluster info");
    census.assert_running("admin");
    drop(admin);
    census.assert_back("admin (drop)");
}

/// Resident set size of this process in KiB (`VmRSS`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Start and stop a producer, a push consumer and a lite pull consumer over and over
/// (every other round dropped without `shutdown`): no thread stays, memory stays flat, and
/// the broker forgets each client (UNREGISTER_CLIENT). `RMQ_RELIABILITY_SCALE=10` makes it
/// the 200 cycles of RELIABILITY.md; `cargo test` runs 20.
#[test]
fn start_and_shutdown_cycles_leave_no_thread_and_no_registration() {
    let mut census = Census::begin();
    let cycles = 20
        * std::env::var("RMQ_RELIABILITY_SCALE")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&s| s > 0)
            .unwrap_or(1);
    let p = producer(&census.namesrv);
    let topic = topic_with_a_message(&p);
    p.shutdown();
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&census.namesrv))
        .start()
        .expect("admin");
    // The admin's own connection threads live through the whole test.
    admin.cluster_info().expect("cluster info");
    census.baseline = rmq_threads();
    let mut rss_after_warmup = 0;
    let started = Instant::now();
    for cycle in 0..cycles {
        let group = unique("pg_cycle");
        // One client instance for the producer and the push consumer: the consumer's start
        // heartbeat registers the producer group too (a producer alone has no broker to
        // tell until its first route, and then waits for the 30 s heartbeat, as in Java).
        let instance = unique("cycle");
        let p = Producer::builder(&group)
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(&census.namesrv)
                    .instance_name(&instance),
            )
            .start()
            .expect("producer start");
        p.send(&Message::new(&topic, "cycle")).expect("send");
        let push = PushConsumer::builder(unique("cg_cycle"))
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(&census.namesrv)
                    .instance_name(&instance),
            )
            .subscribe(&topic, "*")
            .listener(|_, _| ConsumeStatus::Success)
            .start()
            .expect("push consumer start");
        let lite = lite_builder(&census.namesrv)
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(&census.namesrv)
                    .instance_name(unique("cycle_l")),
            )
            .subscribe(&topic, "*")
            .start()
            .expect("lite pull start");
        // The broker lists the producer while it runs (its heartbeat went out at start).
        let listed = |g: &str| {
            admin
                .producer_connections(g)
                .map(|c| !c.is_empty())
                .unwrap_or(false)
        };
        assert!(listed(&group), "cycle {cycle}: producer not registered");
        if cycle % 2 == 0 {
            lite.shutdown();
            push.shutdown();
            p.shutdown();
        } else {
            drop(lite);
            drop(push);
            drop(p);
        }
        census.assert_back(&format!("cycle {cycle}"));
        // UNREGISTER_CLIENT went out: the broker no longer lists the group.
        let deadline = Instant::now() + Duration::from_secs(5);
        while listed(&group) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !listed(&group),
            "cycle {cycle}: the broker still lists {group}"
        );
        if cycle == 4 {
            rss_after_warmup = rss_kib();
        }
    }
    let rss_end = rss_kib();
    eprintln!(
        "reliability: {cycles} start/shutdown cycles of producer + push + lite pull in {:.1} s: \
         threads left 0, RSS {rss_after_warmup} KiB after 5 cycles, {rss_end} KiB after {cycles}",
        started.elapsed().as_secs_f64()
    );
    // Growth per cycle stays small: allocator noise, not a leak of clients.
    let growth = rss_end.saturating_sub(rss_after_warmup);
    assert!(
        growth < 200 * cycles as u64,
        "RSS grew {growth} KiB over {cycles} cycles"
    );
}

#[test]
fn traced_clients_leave_no_thread_behind() {
    let census = Census::begin();
    let p = Producer::builder(unique("pg_census_trace"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&census.namesrv)
                .instance_name(unique("census_tp")),
        )
        .enable_msg_trace(true)
        .start()
        .expect("traced producer start");
    let topic = topic_with_a_message(&p);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let c = PushConsumer::builder(unique("cg_census_trace"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&census.namesrv)
                .instance_name(unique("census_tc")),
        )
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .enable_msg_trace(true)
        .listener(move |_, _| {
            let _ = tx.try_send(());
            ConsumeStatus::Success
        })
        .start()
        .expect("traced consumer start");
    rx.recv_timeout(Duration::from_secs(60)).expect("consumed");
    let traces = rmq_threads()
        .iter()
        .filter(|n| n.starts_with("rmq-trace"))
        .count();
    assert_eq!(traces, 2, "one trace thread per traced client");
    census.assert_running("traced clients");
    c.shutdown();
    p.shutdown();
    census.assert_back("traced clients");
}
