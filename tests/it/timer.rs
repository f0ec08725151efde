//! Timer messages (`Message::set_deliver_time`, `set_delivery_delay`) against the real
//! broker: a 5.x broker holds them until their time (to its `timerPrecisionMs`, 1 s, which
//! may bring one up to that much early) and refuses a delay beyond its `timerMaxDelaySec`;
//! a 4.x broker has no timer and delivers them at once, which these tests assert too.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rocketmq_blocking::{ConsumeStatus, ErrorKind, Message};

use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};

/// Whether the shared cluster is a 4.x one (`RMQ_TEST_VERSION=4.9.7`).
fn broker_4x() -> bool {
    std::env::var("RMQ_TEST_VERSION").is_ok_and(|v| v.starts_with("4."))
}

/// Sends one message made by `timed` from `body` and returns when it was consumed,
/// measured from just before the send.
fn consumed_after(topic: &str, body: &str, timed: impl FnOnce(Message) -> Message) -> Duration {
    let arrived: Arc<Mutex<Option<Instant>>> = Arc::default();
    let a = arrived.clone();
    let c = consumer(&cluster::unique("timer_g"), topic)
        .listener(move |msgs, _| {
            if !msgs.is_empty() {
                a.lock().get_or_insert_with(Instant::now);
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let p = producer();
    // The consumer holds the queue before the message exists, so its arrival is not
    // delayed by the first rebalance.
    wait_for("the queue's assignment", Duration::from_secs(30), || {
        !c.assigned_queues().is_empty()
    });
    let sent = Instant::now();
    p.send(&timed(Message::new(topic, body))).unwrap();
    wait_for("the timer message", Duration::from_secs(60), || {
        arrived.lock().is_some()
    });
    let after = arrived.lock().map(|at| at - sent).unwrap_or_default();
    c.shutdown();
    p.shutdown();
    after
}

#[test]
fn timer_message_due_in_5_s_arrives_then_and_not_before() {
    let due = Duration::from_secs(5);
    let topic = cluster::topic("timer_at", 1);
    let at = consumed_after(&topic, "at", |m| {
        m.with_deliver_time(SystemTime::now() + due)
    });
    let topic = cluster::topic("timer_after", 1);
    let after = consumed_after(&topic, "after", |m| m.with_delivery_delay(due));
    println!("timer message due in {due:?}: consumed after {at:?} (a time), {after:?} (a delay)");
    for (how, took) in [("deliver time", at), ("delivery delay", after)] {
        if broker_4x() {
            // No timer on 4.x: delivered as a plain message.
            assert!(took < Duration::from_secs(3), "4.x, {how}: {took:?}");
        } else {
            // The broker rounds the time down to its 1 s precision.
            assert!(
                took >= due - Duration::from_secs(1),
                "{how}: early, {took:?}"
            );
            assert!(
                took <= due + Duration::from_secs(3),
                "{how}: late, {took:?}"
            );
        }
    }
}

#[test]
fn timer_message_beyond_the_brokers_maximum_delay_is_refused_by_it() {
    // `timerMaxDelaySec` is 3 days by default.
    let topic = cluster::topic("timer_max", 1);
    let p = producer();
    let r =
        p.send(&Message::new(&topic, "far").with_delivery_delay(Duration::from_secs(4 * 86_400)));
    if broker_4x() {
        assert!(r.is_ok(), "4.x stores it as a plain message: {r:?}");
    } else {
        let e = r.expect_err("5.x refuses a timer beyond timerMaxDelaySec");
        assert_eq!(e.kind(), ErrorKind::Response, "{e}");
        println!("4 days' delay: {e}");
    }
    // A timer with a delay level is refused before anything is sent, on any broker.
    let mut both = Message::new(&topic, "both").with_delivery_delay(Duration::from_secs(5));
    both.set_delay_time_level(2);
    let e = p.send(&both).expect_err("a timer and a delay level");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    p.shutdown();
}
