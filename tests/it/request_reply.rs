//! Request-reply against the real broker: `Producer::request` and `request_async`, a
//! responder built on a push consumer and `create_reply_message`, and the official Java
//! client (`java/RequestInterop.java`) as the responder and as the requester.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    create_reply_message, ConsumeFromWhere, ConsumeStatus, ErrorKind, Message, MessageExt,
    Producer, PushConsumer,
};

use crate::cluster;
use crate::consumer::{producer, wait_for};
use crate::java::{lines_after, wait_or_kill, JavaProgram};

const JAVA_TIMEOUT: Duration = Duration::from_secs(100);

/// A responder on `topic`: answers each request with `re:` + its body, after `delay` for
/// bodies that start with "slow". Counts the requests it answered.
fn responder(topic: &str, delay: Duration) -> (PushConsumer, Arc<AtomicUsize>) {
    let replier = Arc::new(producer());
    let answered = Arc::new(AtomicUsize::new(0));
    let n = answered.clone();
    let c = PushConsumer::builder(cluster::unique("responder"))
        .client_options(cluster::options())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .consume_thread_min(8)
        .consume_thread_max(8)
        .listener(move |msgs, _| {
            for m in msgs {
                if m.body().starts_with(b"slow") {
                    std::thread::sleep(delay);
                }
                let mut body = b"re:".to_vec();
                body.extend_from_slice(m.body());
                let reply = create_reply_message(m, body).expect("a stored request");
                if replier.send(&reply).is_err() {
                    return ConsumeStatus::ReconsumeLater;
                }
                n.fetch_add(1, Ordering::SeqCst);
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    (c, answered)
}

fn waiting(p: &Producer) -> usize {
    p.client_instance().map_or(0, |i| i.waiting_requests())
}

#[test]
fn concurrent_requests_each_get_their_own_reply_and_leave_no_entry() {
    let topic = cluster::topic("rr_many", 4);
    let (c, answered) = responder(&topic, Duration::ZERO);
    let p = Arc::new(producer());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (p, topic) = (p.clone(), topic.clone());
            std::thread::spawn(move || {
                for i in 0..5 {
                    let body = format!("request {t}-{i}");
                    let reply = p
                        .request(&Message::new(&topic, body.clone()), Duration::from_secs(60))
                        .unwrap_or_else(|e| panic!("{body}: {e}"));
                    assert_eq!(reply.body(), format!("re:{body}").as_bytes());
                    assert!(reply.property("CORRELATION_ID").is_some());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The responder counts after its send returns, which may be after the reply arrived.
    wait_for("40 answered", Duration::from_secs(30), || {
        answered.load(Ordering::SeqCst) == 40
    });
    assert_eq!(waiting(&p), 0, "every request's entry is gone");
    c.shutdown();
}

#[test]
fn a_request_nobody_answers_times_out_on_time_and_a_late_reply_is_dropped() {
    let topic = cluster::topic("rr_late", 1);
    let p = producer();
    // Nobody consumes yet: the request times out after its 2 s.
    let started = Instant::now();
    let e = p
        .request(&Message::new(&topic, "slow 1"), Duration::from_secs(2))
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(12),
        "timed out after {took:?}"
    );
    assert_eq!(waiting(&p), 0);

    // A responder answers it now, too late: the reply comes to this client and is dropped.
    let (c, answered) = responder(&topic, Duration::ZERO);
    let instance = p.client_instance().expect("running");
    wait_for("the late reply", Duration::from_secs(60), || {
        instance.unmatched_replies() >= 1
    });
    assert_eq!(instance.unmatched_replies(), 1);
    // The client goes on: the next request gets its own reply.
    let reply = p
        .request(&Message::new(&topic, "fast"), Duration::from_secs(60))
        .unwrap();
    assert_eq!(reply.body(), b"re:fast");
    wait_for("both answered", Duration::from_secs(30), || {
        answered.load(Ordering::SeqCst) == 2
    });
    assert_eq!(waiting(&p), 0);
    c.shutdown();
}

#[test]
fn request_async_calls_back_once_with_the_reply_or_the_timeout() {
    let topic = cluster::topic("rr_async", 2);
    let (c, _) = responder(&topic, Duration::from_secs(4));
    let p = producer();
    let (tx, rx) =
        crossbeam_channel::unbounded::<(String, rocketmq_blocking::Result<MessageExt>)>();
    for (body, timeout) in [("quick", 60), ("slow", 1)] {
        let tx = tx.clone();
        p.request_async(
            Message::new(&topic, body),
            Duration::from_secs(timeout),
            move |r| {
                let _ = tx.send((body.to_string(), r));
            },
        )
        .unwrap();
    }
    drop(tx);
    let mut results: Vec<(String, rocketmq_blocking::Result<MessageExt>)> = Vec::new();
    while let Ok(r) = rx.recv_timeout(Duration::from_secs(90)) {
        results.push(r);
    }
    // Both senders are gone once each callback ran: exactly two results.
    assert_eq!(results.len(), 2);
    for (body, r) in results {
        match body.as_str() {
            "quick" => assert_eq!(r.unwrap().body(), b"re:quick"),
            _ => assert_eq!(r.unwrap_err().kind(), ErrorKind::Timeout),
        }
    }
    assert_eq!(waiting(&p), 0);
    c.shutdown();
}

/// The Java side, built against the cluster's client jars.
fn java() -> JavaProgram {
    let version = cluster::cluster().lock().version().to_string();
    java_of(&version)
}

fn java_of(version: &str) -> JavaProgram {
    JavaProgram::compile(
        version,
        "tests/it/java/RequestInterop.java",
        "RequestInterop",
    )
}

/// The Java requester is the 4.9 client on every cluster: 5.3.3's `request` returns as
/// soon as the request is stored, before the reply (its send callback counts the latch
/// down; fixed after 5.3.3 by apache/rocketmq#9608), so no 5.3.3 requester gets a reply
/// from any responder.
const JAVA_REQUESTER_VERSION: &str = "4.9.7";

#[test]
fn a_rust_requester_gets_the_replies_of_a_java_responder() {
    let topic = cluster::topic("rr_java_resp", 2);
    let group = cluster::unique("rr_java_g");
    let child = java()
        .command(&[], &["respond", cluster::namesrv(), &topic, &group, "3"])
        .spawn()
        .expect("java runs");
    let p = producer();
    let replies: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            p.request(
                &Message::new(&topic, format!("rust {i}")),
                Duration::from_secs(90),
            )
            .unwrap_or_else(|e| panic!("request {i}: {e}"))
            .body()
            .to_vec()
        })
        .collect();
    let out = wait_or_kill(child, JAVA_TIMEOUT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for (i, body) in replies.iter().enumerate() {
        assert_eq!(body, format!("java:rust {i}").as_bytes());
    }
}

#[test]
fn a_java_requester_gets_the_replies_of_a_rust_responder() {
    let topic = cluster::topic("rr_rust_resp", 2);
    let (c, answered) = responder(&topic, Duration::ZERO);
    let out = java_of(JAVA_REQUESTER_VERSION).run(
        &[],
        &["request", cluster::namesrv(), &topic, "3"],
        JAVA_TIMEOUT,
    );
    let replies = lines_after(&out, "REPLY ");
    assert_eq!(
        replies,
        (0..3)
            .map(|i| format!("re:java request {i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(answered.load(Ordering::SeqCst), 3);
    c.shutdown();
}
