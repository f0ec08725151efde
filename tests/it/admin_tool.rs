//! The official admin tool (`mqadmin` of the cluster's version) against Rust consumers:
//! what an operator sees of them, and the requests the broker relays to them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{Admin, ConsumeStatus, Message, PushConsumer};

use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};
use rocketmq_blocking::ClientOptions;

const TOOL_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn mqadmin(args: &[&str]) -> String {
    // The tool is a JVM of its own; the cluster lock only guards the handle.
    let c = cluster::cluster().lock();
    c.mqadmin(args, TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("mqadmin {args:?}: {e}"))
}

/// Sends `n` messages, returns the offset message ids.
pub(crate) fn send(topic: &str, n: usize) -> Vec<String> {
    let p = producer();
    let sent: Vec<_> = (0..n)
        .map(|i| p.send(&Message::new(topic, format!("m{i}"))).unwrap())
        .collect();
    p.shutdown();
    crate::cluster::wait_dispatched(&sent);
    sent.iter().map(|r| r.offset_msg_id().to_string()).collect()
}

/// Waits until the brokers hold `group`'s committed offset of each of the `queues` queues
/// of `topic`, every one at the queue's end. A 4.9 broker refuses a reset through it
/// (`resetOffsetByTime`, INVOKE_BROKER_TO_RESET_OFFSET) with "consumer group not exist"
/// while it has no committed offset for some queue of the topic, whatever consumers are
/// online (`Broker2Client.resetOffset`); a consumer, Rust or Java 4.9, commits what it
/// consumed only with its next persist or a later pull of the queue. The broker reports
/// a queue it has no offset for as offset 0, so every queue must hold messages for the
/// wait to tell committed from absent. (5.x brokers reset on their own side.)
pub(crate) fn wait_for_committed(group: &str, topic: &str, queues: usize) {
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .expect("admin client");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match admin.consume_stats(group, Some(topic)) {
            Ok(s)
                if s.queues.len() == queues
                    && s.queues
                        .values()
                        .all(|q| q.broker_offset > 0 && q.consumer_offset == q.broker_offset) =>
            {
                return
            }
            other => assert!(
                Instant::now() < deadline,
                "{group}'s offsets in {topic} are not all committed: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A push consumer counting what it consumes.
fn counting(group: &str, topic: &str) -> (PushConsumer, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    let c = consumer(group, topic)
        .listener(move |msgs, _| {
            seen.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    (c, n)
}

#[test]
fn consumer_status_shows_a_rust_consumer_as_the_java_tool_reads_it() {
    let topic = cluster::topic("adm_status", 4);
    let group = cluster::unique("adm_status_g");
    send(&topic, 20);
    let (c, n) = counting(&group, &topic);
    wait_for("20 consumed", Duration::from_secs(60), || {
        n.load(Ordering::SeqCst) >= 20
    });
    let client_id = c.client_id();

    // One client in detail: GET_CONSUMER_RUNNING_INFO through the broker.
    let detail = mqadmin(&["consumerStatus", "-g", &group, "-i", &client_id]);
    for want in [
        "#Consumer Properties#",
        "PROP_CONSUME_TYPE",
        "CONSUME_PASSIVELY",
        "PROP_CONSUMEORDERLY",
        "#Consumer Subscription#",
        "#Consumer Offset#",
        "#Consumer MQ Detail#",
        "#Consumer RT&TPS#",
        topic.as_str(),
    ] {
        assert!(detail.contains(want), "no {want:?} in:\n{detail}");
    }
    // The four held queues with their offsets, which add up to what was consumed.
    let offsets: i64 = detail
        .lines()
        .filter(|l| l.starts_with(topic.as_str()))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<i64>().ok())
        .sum();
    assert!(offsets >= 20, "offsets {offsets} in:\n{detail}");

    // The whole group, with the thread listing Java fills with its jstack.
    let group_view = mqadmin(&["consumerStatus", "-g", &group, "-s"]);
    assert!(group_view.contains(&client_id), "{group_view}");
    assert!(group_view.contains("Rebalance OK"), "{group_view}");

    let conn = mqadmin(&["consumerConnection", "-g", &group]);
    assert!(conn.contains(&client_id) && conn.contains("RUST"), "{conn}");
    c.shutdown();
}

#[test]
fn reset_offset_by_time_makes_a_rust_consumer_consume_again() {
    let topic = cluster::topic("adm_reset", 4);
    let group = cluster::unique("adm_reset_g");
    send(&topic, 10);
    // The listener's count says nothing about what the broker knows, and this consumer
    // makes it so every time rather than once in a while: each queue's messages come in
    // its first pull, the next pull leaves before a listener that takes a moment has
    // finished them (so it commits nothing) and the broker holds it 15 s, and an
    // instance of its own persists first after 10 s (then every 60 s).
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    let c = consumer(&group, &topic)
        .client_options(cluster::options().instance_name(cluster::unique("adm_reset_i")))
        .persist_offset_interval(Duration::from_secs(60))
        .listener(move |msgs, _| {
            // The consumer's work, not a wait for anything.
            std::thread::sleep(Duration::from_millis(100));
            seen.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for("10 consumed", Duration::from_secs(60), || {
        n.load(Ordering::SeqCst) >= 10
    });
    // What a 4.9 broker needs before it relays a reset.
    wait_for_committed(&group, &topic, 4);
    // RESET_CONSUMER_CLIENT_OFFSET through the broker, to the first message.
    let out = mqadmin(&["resetOffsetByTime", "-g", &group, "-t", &topic, "-s", "0"]);
    assert!(out.contains("#brokerName"), "{out}");
    wait_for("the 10 consumed again", Duration::from_secs(60), || {
        n.load(Ordering::SeqCst) >= 20
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        n.load(Ordering::SeqCst),
        20,
        "each message once more, no more"
    );
    c.shutdown();
}

#[test]
fn the_admin_tool_can_make_a_rust_consumer_consume_a_message_directly() {
    let topic = cluster::topic("adm_direct", 2);
    let group = cluster::unique("adm_direct_g");
    let ids = send(&topic, 2);
    let direct = Arc::new(AtomicUsize::new(0));
    let seen = direct.clone();
    let c = consumer(&group, &topic)
        .listener(move |msgs, _| {
            if msgs[0].body() == b"m1" {
                seen.fetch_add(1, Ordering::SeqCst);
                panic!("m1 is refused");
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let client_id = c.client_id();
    // Queues are taken after the first heartbeat: the broker knows the client then.
    wait_for("the consumer's queues", Duration::from_secs(60), || {
        !c.assigned_queues().is_empty()
    });
    // 5.x names the topic (`-t`); 4.9 has no such option.
    let v5 = !cluster::cluster().lock().version().starts_with("4.");
    let direct_args = |id: &str| {
        let mut args = vec!["queryMsgById", "-i", id, "-g", &group, "-d", &client_id];
        if v5 {
            args.extend(["-t", topic.as_str()]);
        }
        mqadmin(&args)
    };
    let ok = direct_args(&ids[0]);
    assert!(ok.contains("CR_SUCCESS"), "{ok}");
    let before = direct.load(Ordering::SeqCst);
    let panicked = direct_args(&ids[1]);
    assert!(panicked.contains("CR_THROW_EXCEPTION"), "{panicked}");
    assert!(panicked.contains("m1 is refused"), "{panicked}");
    assert!(direct.load(Ordering::SeqCst) > before);
    c.shutdown();
}
