//! Timer messages (`Message::set_deliver_time`, `set_delivery_delay`) against the real
//! broker: a 5.x broker holds them until their time (to its `timerPrecisionMs`, 1 s, which
//! may bring one up to that much early) and refuses a delay beyond its `timerMaxDelaySec`;
//! a 4.x broker has no timer and delivers them at once, which these tests assert too.
//! The official Java 5.x client consumes our timer messages at their time, and we consume
//! its (`setDeliverTimeMs`, `setDelayTimeSec`) at theirs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rocketmq_blocking::{ConsumeStatus, ErrorKind, Message};

use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};
use crate::java::{lines_after, wait_or_kill, JavaProgram};

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

// --- Java interop: the official 5.x client on the other end (java/TimerInterop.java) ---

const JAVA_TIMEOUT: Duration = Duration::from_secs(180);
/// The interop timers are due this many seconds after their send.
const DUE_S: u64 = 5;

/// The Java program, or `None` on a 4.x cluster (no timer messages there).
fn java() -> Option<JavaProgram> {
    let version = cluster::cluster().lock().version().to_string();
    if version.starts_with("4.") {
        eprintln!("timer messages need a 5.x broker and client; {version} has none");
        return None;
    }
    Some(JavaProgram::compile(
        &version,
        "tests/it/java/TimerInterop.java",
        "TimerInterop",
    ))
}

fn now_ms() -> i64 {
    ms_of(SystemTime::now())
}

fn ms_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// When a timer message reached a consumer, and when the broker's timer put it into the
/// topic (its store timestamp): a late arrival shows whether the broker or the delivery
/// was late.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    at_ms: i64,
    stored_ms: i64,
}

/// Asserts that each message of `sent` (body → wall clock ms of its send) arrived at its
/// time: not before it (to the broker's 1 s precision), and at most 3 s after.
fn assert_on_time(sent: &HashMap<String, i64>, arrived: &HashMap<String, Arrival>) {
    assert_eq!(sent.len(), 2, "{sent:?}");
    // Every message's time first, so that a failure shows whether the other was on time.
    let mut took = Vec::new();
    for (body, at) in sent {
        let got = arrived
            .get(body)
            .unwrap_or_else(|| panic!("{body} never arrived: {arrived:?}"));
        println!(
            "{body}: due in {DUE_S} s, stored in the topic after {} ms, arrived after {} ms",
            got.stored_ms - at,
            got.at_ms - at
        );
        took.push((body, got.at_ms - at, got.stored_ms - at));
    }
    let due = DUE_S as i64 * 1000;
    // (body, arrived after, stored after), each in ms after the send.
    for (body, ms, _) in &took {
        assert!(
            *ms >= due - 1000,
            "{body}: early, after {ms} ms (all, as (body, arrived, stored): {took:?})"
        );
        assert!(
            *ms <= due + 3000,
            "{body}: late, after {ms} ms (all, as (body, arrived, stored): {took:?})"
        );
    }
}

#[test]
fn timer_messages_java_sends_arrive_at_a_rust_consumer_at_their_time() {
    let Some(java) = java() else { return };
    let topic = cluster::topic("timer_java_to_rust", 1);
    let arrived: Arc<Mutex<HashMap<String, Arrival>>> = Arc::default();
    let a = arrived.clone();
    let c = consumer(&cluster::unique("timer_jr_g"), &topic)
        .listener(move |msgs, _| {
            let now = now_ms();
            for m in msgs {
                let body = String::from_utf8_lossy(m.body()).into_owned();
                a.lock().entry(body).or_insert(Arrival {
                    at_ms: now,
                    stored_ms: ms_of(m.store_timestamp()),
                });
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for("the queue's assignment", Duration::from_secs(30), || {
        !c.assigned_queues().is_empty()
    });
    let out = java.run(
        &[],
        &["produce", cluster::namesrv(), &topic, &DUE_S.to_string()],
        JAVA_TIMEOUT,
    );
    let sent: HashMap<String, i64> = lines_after(&out, "SENT ")
        .iter()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let body = f.next()?.to_string();
            let _id = f.next()?;
            Some((body, f.next()?.parse().ok()?))
        })
        .collect();
    wait_for("both Java timer messages", Duration::from_secs(60), || {
        arrived.lock().len() >= 2
    });
    c.shutdown();
    assert_on_time(&sent, &arrived.lock());
}

/// Kills the Java child if the test fails before it ends.
struct Child(Option<std::process::Child>);

impl Drop for Child {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn timer_messages_we_send_arrive_at_a_java_consumer_at_their_time() {
    let Some(java) = java() else { return };
    let topic = cluster::topic("timer_rust_to_java", 1);
    let group = cluster::unique("timer_rj_g");
    let mut child = Child(Some(
        java.command(&[], &["consume", cluster::namesrv(), &topic, &group, "2"])
            .spawn()
            .expect("java runs"),
    ));
    let stdout = child
        .0
        .as_mut()
        .and_then(|c| c.stdout.take())
        .expect("the child's stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = |what: &str| {
        lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the Java consumer printed no {what}"))
    };
    while next_line("READY") != "READY" {}
    let p = producer();
    let mut sent = HashMap::new();
    let due = Duration::from_secs(DUE_S);
    sent.insert("rust-at".to_string(), now_ms());
    p.send(&Message::new(&topic, "rust-at").with_deliver_time(SystemTime::now() + due))
        .unwrap();
    sent.insert("rust-delay".to_string(), now_ms());
    p.send(&Message::new(&topic, "rust-delay").with_delivery_delay(due))
        .unwrap();
    p.shutdown();
    let mut arrived = HashMap::new();
    while arrived.len() < 2 {
        let line = next_line("GOT line");
        let mut f = line.strip_prefix("GOT ").unwrap_or_default().split(' ');
        if let (Some(body), Some(at), Some(stored)) = (f.next(), f.next(), f.next()) {
            arrived.insert(
                body.to_string(),
                Arrival {
                    at_ms: at.parse().unwrap_or(0),
                    stored_ms: stored.parse().unwrap_or(0),
                },
            );
        }
    }
    let out = wait_or_kill(child.0.take().expect("the child"), JAVA_TIMEOUT);
    assert!(
        out.status.success(),
        "the Java consumer failed: {}",
        out.status
    );
    assert_on_time(&sent, &arrived);
}
