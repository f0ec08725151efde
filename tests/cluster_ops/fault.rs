//! Latency fault tolerance (Java `sendLatencyFaultEnable`) around a crashed broker.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rocketmq_blocking::{Message, Producer};

use crate::cluster::{self, RestartOnDrop, SendCounter, BROKER_A, BROKER_B};
use rocketmq_blocking::ClientOptions;

#[test]
fn send_latency_fault_tolerance_avoids_a_dead_broker() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("fault", 4);
    let (addr_a, addr_b) = (
        cluster::broker_addr(BROKER_A),
        cluster::broker_addr(BROKER_B),
    );
    // The name server drops a broker as soon as its connection closes, crash or not; a
    // route refresh would then hide the dead broker from the producer. The test is about
    // the window in which the cached route still lists it, so refresh rarely.
    let p = Producer::builder(cluster::unique("pg_fault"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .poll_name_server_interval(Duration::from_secs(600)),
        )
        .latency_fault_tolerance(true)
        .start()
        .unwrap();
    let attempts = SendCounter::install(&p);
    let mut warm = BTreeMap::<String, usize>::new();
    for _ in 0..16 {
        let r = p.send(&Message::new(&topic, "warm")).unwrap();
        *warm
            .entry(r.message_queue().broker_name().to_string())
            .or_default() += 1;
    }
    assert_eq!(
        warm.len(),
        2,
        "both brokers take sends before the crash: {warm:?}"
    );

    let restart = RestartOnDrop(BROKER_B);
    cluster::cluster().lock().kill_broker(BROKER_B).unwrap();
    let before_b = attempts.get(&addr_b);
    let before_a = attempts.get(&addr_a);
    let n = 50;
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for i in 0..n {
        let t = Instant::now();
        let r = p
            .send(&Message::new(&topic, format!("after crash {i}")))
            .unwrap_or_else(|e| panic!("send {i} after the crash: {e}"));
        slowest = slowest.max(t.elapsed());
        assert_eq!(r.message_queue().broker_name(), BROKER_A);
    }
    let on_b = attempts.get(&addr_b) - before_b;
    let on_a = attempts.get(&addr_a) - before_a;
    eprintln!(
        "{n} sends after the crash in {:.2}s (slowest {slowest:?}): {on_b} attempts on {BROKER_B}, {on_a} on {BROKER_A}",
        started.elapsed().as_secs_f64()
    );
    // Without fault tolerance about half of the sends would try broker-b first.
    assert!(
        on_b >= 1,
        "the crash was never noticed: {:?}",
        attempts.snapshot()
    );
    assert!(on_b <= 2, "{on_b} of {n} sends tried the dead broker first");
    assert_eq!(on_a, n, "every send was stored by {BROKER_A} once");
    drop(p);
    drop(restart);
    assert!(cluster::cluster().lock().is_broker_running(BROKER_B));
}
