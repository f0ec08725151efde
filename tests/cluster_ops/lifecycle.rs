//! The client instance's life cycle: shared by producers of one instance name, stopped
//! with its last user, leaving no thread behind.

use std::time::Duration;

use rocketmq_blocking::client::manager;
use rocketmq_blocking::{Message, Producer};

use crate::cluster;
use rocketmq_blocking::ClientOptions;

/// `rmq-client-timer-0` as `/proc` shows it (names are cut to 15 bytes).
const TIMER: &str = "rmq-client-time";

/// Names of this process's threads, without libtest's runner threads. Those are named
/// after their test (`module::test_name`, cut to 15 bytes by the kernel) and come and go
/// with the tests queued behind [`cluster::serial`], which this test cannot control.
fn threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_string())
        .filter(|n| !n.contains("::"))
        .collect();
    names.sort();
    names
}

fn producer(group: &str, instance: &str) -> Producer {
    Producer::builder(group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .instance_name(instance)
                .heartbeat_interval(Duration::from_millis(200))
                .poll_name_server_interval(Duration::from_millis(200)),
        )
        .start()
        .unwrap()
}

/// Waits up to 1 s for the thread list to be `baseline` again. The baseline may hold
/// `rmq-*` threads that are not the producers': the testkit's readiness check keeps an
/// admin client (one remoting client) per name server for as long as the cluster lives.
fn assert_back_to(baseline: &[String], instances: usize) {
    let back = cluster::eventually(Duration::from_secs(1), || {
        threads() == baseline && manager::instance_count() == instances
    });
    assert!(
        back,
        "threads {:?} (baseline {baseline:?}); instances {} (baseline {instances})",
        threads(),
        manager::instance_count()
    );
}

fn rmq(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| n.starts_with("rmq-"))
        .cloned()
        .collect()
}

#[test]
fn shutdown_of_the_last_user_stops_the_instance_and_leaves_no_thread() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("life", 2);
    // Lazily created process-wide threads (if any) appear with the first producer.
    let warm = producer(&cluster::unique("pg_warm"), &cluster::unique("warm"));
    warm.send(&Message::new(&topic, "warm-up")).unwrap();
    warm.shutdown();
    drop(warm);
    let baseline = threads();
    let instances = manager::instance_count();
    assert!(
        !rmq(&baseline).iter().any(|n| n == TIMER),
        "the warm-up instance still runs: {baseline:?}"
    );

    // One producer: its instance runs threads while it lives, none after.
    let p = producer(&cluster::unique("pg_life"), &cluster::unique("life"));
    p.send(&Message::new(&topic, "one")).unwrap();
    let running = threads();
    assert!(
        running.iter().any(|n| n == TIMER) && rmq(&running).len() > rmq(&baseline).len(),
        "{running:?}"
    );
    assert_eq!(manager::instance_count(), instances + 1);
    p.shutdown();
    assert_back_to(&baseline, instances);
    drop(p);

    // Two producers of one instance name share the instance; it outlives the first.
    let shared = cluster::unique("shared");
    let first = producer(&cluster::unique("pg_first"), &shared);
    let second = producer(&cluster::unique("pg_second"), &shared);
    assert_eq!(first.client_id(), second.client_id());
    let (i1, i2) = (
        first.client_instance().unwrap(),
        second.client_instance().unwrap(),
    );
    assert!(
        std::sync::Arc::ptr_eq(&i1, &i2),
        "one instance for one client id"
    );
    drop(i1);
    assert_eq!(manager::instance_count(), instances + 1);
    first.send(&Message::new(&topic, "first")).unwrap();
    first.shutdown();
    // Let the timer run a few rounds without the first producer.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(i2.state(), rocketmq_blocking::client::ServiceState::Running);
    assert_eq!(manager::instance_count(), instances + 1);
    second.send(&Message::new(&topic, "second")).unwrap();
    drop(i2);
    second.shutdown();
    assert_back_to(&baseline, instances);
}

fn orderly_consumer(
    group: &str,
    topic: &str,
    instance: &str,
    seen: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
) -> rocketmq_blocking::PushConsumer {
    use rocketmq_blocking::{ConsumeFromWhere, ConsumeOrderlyStatus, PushConsumer};
    PushConsumer::builder(group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .instance_name(instance),
        )
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .consume_thread_min(2)
        .consume_thread_max(2)
        .orderly_listener(move |msgs, _| {
            seen.lock()
                .extend(msgs.iter().map(|m| m.msg_id().to_string()));
            ConsumeOrderlyStatus::Success
        })
        .start()
        .unwrap()
}

#[test]
fn consumer_shutdown_persists_offsets_unlocks_unregisters_and_leaves_no_thread() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("clife", 2);
    let group = cluster::unique("cg_life");
    let p = producer(&cluster::unique("pg_clife"), &cluster::unique("cp"));
    // Warm-up so that process-wide lazily created threads are in the baseline.
    let warm_seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let warm = orderly_consumer(
        &cluster::unique("cg_warm"),
        &topic,
        &cluster::unique("cw"),
        warm_seen,
    );
    warm.shutdown();
    drop(warm);
    let baseline = threads();
    let instances = manager::instance_count();

    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(
            p.send(&Message::new(&topic, format!("c{i}")))
                .unwrap()
                .msg_id()
                .to_string(),
        );
    }
    let seen_a = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let a = orderly_consumer(&group, &topic, &cluster::unique("ca"), seen_a.clone());
    assert!(cluster::eventually(Duration::from_secs(30), || seen_a
        .lock()
        .len()
        >= 20));
    let a_id = a.client_id().to_string();
    let held = a
        .assigned_queues()
        .into_iter()
        .filter(|q| q.topic() == topic)
        .count();
    assert_eq!(held, 4, "2 queues on each of 2 brokers");
    a.shutdown();
    drop(a);
    assert_back_to(&baseline, instances);

    // Unregistered: no broker lists the consumer any more.
    let admin = cluster::admin();
    for b in ["broker-a", "broker-b"] {
        let ids = admin
            .api()
            .get_consumer_id_list(&cluster::broker_addr(b), &group, Duration::from_secs(3))
            .unwrap_or_default();
        assert!(!ids.contains(&a_id), "{b} still lists {a_id}: {ids:?}");
    }

    // Unlocked and persisted: a new consumer of the group takes every queue at once
    // (a broker lock would otherwise hold for 60 s) and starts after what A consumed.
    let late: Vec<String> = (0..5)
        .map(|i| {
            p.send(&Message::new(&topic, format!("late{i}")))
                .unwrap()
                .msg_id()
                .to_string()
        })
        .collect();
    let seen_b = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let started = std::time::Instant::now();
    let b = orderly_consumer(&group, &topic, &cluster::unique("cb"), seen_b.clone());
    assert!(
        cluster::eventually(Duration::from_secs(20), || seen_b.lock().len() >= 5),
        "the new consumer got {:?}",
        seen_b.lock()
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    let got: std::collections::HashSet<String> = seen_b.lock().iter().cloned().collect();
    assert_eq!(
        got,
        late.into_iter().collect(),
        "nothing consumed by A comes again"
    );
    b.shutdown();
    p.shutdown();
}
