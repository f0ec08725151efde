//! Jobs 2 and 3: route refresh and offline-broker cleanup, and what a missing topic is.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rocketmq_blocking::TopicConfig;
use rocketmq_blocking::{ErrorKind, Message, Producer, SendResult};

use crate::cluster::{self, RestartOnDrop, BROKER_A, BROKER_B};
use rocketmq_blocking::ClientOptions;

const INTERVAL: Duration = Duration::from_millis(500);

fn fast_producer() -> Producer {
    Producer::builder(cluster::unique("pg_routes"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .poll_name_server_interval(INTERVAL)
                .heartbeat_interval(INTERVAL),
        )
        .start()
        .unwrap()
}

fn send(p: &Producer, topic: &str) -> SendResult {
    p.send(&Message::new(topic, "route test"))
        .unwrap_or_else(|e| panic!("send to {topic}: {e}"))
}

fn brokers_of(results: &[SendResult]) -> BTreeSet<String> {
    results
        .iter()
        .map(|r| r.message_queue().broker_name().to_string())
        .collect()
}

#[test]
fn route_refresh_picks_up_a_topic_created_on_a_second_broker() {
    let _serial = cluster::serial();
    let admin = cluster::admin();
    let topic = cluster::unique("route_grow");
    admin
        .create_topic_on(
            &cluster::broker_addr(BROKER_A),
            &TopicConfig::new(&topic, 4),
        )
        .unwrap();
    admin
        .wait_for_route(&topic, 1, Duration::from_secs(10))
        .unwrap();
    let p = fast_producer();

    let first: Vec<SendResult> = (0..8).map(|_| send(&p, &topic)).collect();
    assert_eq!(brokers_of(&first), BTreeSet::from([BROKER_A.to_string()]));

    admin
        .create_topic_on(
            &cluster::broker_addr(BROKER_B),
            &TopicConfig::new(&topic, 4),
        )
        .unwrap();
    admin
        .wait_for_route(&topic, 2, Duration::from_secs(10))
        .unwrap();
    // Route refresh runs every 500 ms; allow a few periods plus a loaded machine.
    let started = Instant::now();
    let mut seen = BTreeSet::new();
    let reached_both = cluster::eventually(INTERVAL * 10, || {
        seen.insert(send(&p, &topic).message_queue().broker_name().to_string());
        seen.len() == 2
    });
    assert!(
        reached_both,
        "sends reached only {seen:?} {:.1}s after the topic appeared on {BROKER_B}",
        started.elapsed().as_secs_f64()
    );
    eprintln!(
        "route change picked up after {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let instance = p.client_instance().unwrap();
    let route = instance.topic_route(&topic).expect("cached route");
    let names: BTreeSet<&str> = route
        .broker_datas
        .iter()
        .map(|b| b.broker_name.as_str())
        .collect();
    assert_eq!(names, BTreeSet::from([BROKER_A, BROKER_B]));
    assert_eq!(route.queue_datas.len(), 2);
    let table = instance.broker_addresses();
    assert!(
        table.contains_key(BROKER_A) && table.contains_key(BROKER_B),
        "{table:?}"
    );
}

#[test]
fn clean_offline_broker_drops_a_broker_that_left_the_routes() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("route_offline", 4);
    let (addr_a, addr_b) = (
        cluster::broker_addr(BROKER_A),
        cluster::broker_addr(BROKER_B),
    );
    let p = fast_producer();
    let instance = p.client_instance().unwrap();
    let warm: Vec<SendResult> = (0..8).map(|_| send(&p, &topic)).collect();
    assert_eq!(
        brokers_of(&warm).len(),
        2,
        "both brokers take sends at first"
    );
    assert!(instance.knows_broker_addr(&addr_a) && instance.knows_broker_addr(&addr_b));

    let restart = RestartOnDrop(BROKER_B);
    let admin = cluster::admin();
    // The JVM takes seconds to exit after it unregistered, so stop it on another thread
    // and time the client from the moment the name server stops routing broker-b.
    std::thread::scope(|s| {
        let stopping = s.spawn(|| {
            let started = Instant::now();
            cluster::cluster().lock().stop_broker(BROKER_B).unwrap();
            started.elapsed()
        });
        assert!(
            cluster::eventually(Duration::from_secs(30), || admin
                .topic_route(&topic)
                .is_ok_and(|r| r.broker_datas.iter().all(|b| b.broker_name != BROKER_B))),
            "the name server still routes {BROKER_B}"
        );
        let unrouted = Instant::now();
        assert!(
            cluster::eventually(INTERVAL * 10, || !instance.knows_broker_addr(&addr_b)),
            "{addr_b} still in the broker table: {:?}",
            instance.broker_addresses()
        );
        eprintln!(
            "{BROKER_B} left the broker table {:.2}s after the name server dropped it",
            unrouted.elapsed().as_secs_f64()
        );
        let took = stopping.join().unwrap();
        eprintln!("{BROKER_B} stopped in {:.1}s", took.as_secs_f64());
    });
    assert!(instance.knows_broker_addr(&addr_a));
    assert!(!instance.broker_addresses().contains_key(BROKER_B));
    let after: Vec<SendResult> = (0..8).map(|_| send(&p, &topic)).collect();
    assert_eq!(brokers_of(&after), BTreeSet::from([BROKER_A.to_string()]));

    let starting = Instant::now();
    cluster::cluster().lock().start_broker(BROKER_B).unwrap();
    eprintln!(
        "{BROKER_B} started in {:.1}s",
        starting.elapsed().as_secs_f64()
    );
    drop(restart);
    let back = Instant::now();
    assert!(
        cluster::eventually(INTERVAL * 10, || instance.knows_broker_addr(&addr_b)),
        "{addr_b} did not come back: {:?}",
        instance.broker_addresses()
    );
    let mut seen = BTreeSet::new();
    assert!(
        cluster::eventually(INTERVAL * 10, || {
            seen.insert(send(&p, &topic).message_queue().broker_name().to_string());
            seen.len() == 2
        }),
        "sends reached only {seen:?} after {BROKER_B} came back"
    );
    eprintln!(
        "{BROKER_B} back in the broker table and taking sends after {:.2}s",
        back.elapsed().as_secs_f64()
    );
}

#[test]
fn a_topic_that_does_not_exist_without_auto_create_is_a_no_route_error() {
    let _serial = cluster::serial();
    let p = Producer::builder(cluster::unique("pg_noroute"))
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    // Connections to the name server are set up by an earlier call, not timed here.
    let known = cluster::topic_on_both("route_known", 1);
    send(&p, &known);

    let topic = cluster::unique("route_missing");
    for _ in 0..2 {
        let started = Instant::now();
        let e = p.send(&Message::new(&topic, "x")).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.kind(), ErrorKind::NoRoute, "{e}");
        assert!(e.to_string().contains(&topic), "{e}");
        assert!(
            took < p.options().send_timeout / 3,
            "a missing route took {took:?} to report"
        );
    }
}
