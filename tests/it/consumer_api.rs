//! Consumer calls made after start, and timed redelivery: subscribe/unsubscribe on a running
//! push consumer, `send_message_back` with a delay level, delay-level sends, and SQL92 for
//! lite pull, against the real broker.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, MessageExt, MessageSelector, PushConsumer,
    ReconsumeDelay,
};

use crate::cluster;
use crate::consumer::{producer, wait_for};

/// Sends `n` messages to `topic`, returns their ids.
fn send(topic: &str, n: usize, tag: &str) -> HashSet<String> {
    let p = producer();
    let ids = (0..n)
        .map(|i| {
            p.send(&Message::new(topic, format!("{tag}{i}")))
                .unwrap()
                .msg_id()
                .to_string()
        })
        .collect();
    p.shutdown();
    ids
}

type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A push consumer of `topic` recording (topic, msg id) of what it consumes.
fn recording(group: &str, topic: &str) -> (PushConsumer, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let c = PushConsumer::builder(group)
        .client_options(cluster::options())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            let mut s = s.lock();
            s.extend(
                msgs.iter()
                    .map(|m| (m.topic().to_string(), m.msg_id().to_string())),
            );
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    (c, seen)
}

fn ids_of(seen: &Seen, topic: &str) -> Vec<String> {
    seen.lock()
        .iter()
        .filter(|(t, _)| t == topic)
        .map(|(_, id)| id.clone())
        .collect()
}

#[test]
fn a_running_consumer_subscribes_and_unsubscribes_and_a_successor_resumes_where_it_stopped() {
    let a = cluster::topic("subrun_a", 2);
    let b = cluster::topic("subrun_b", 2);
    let group = cluster::unique("subrun_g");
    let (c, seen) = recording(&group, &a);
    let first_b = send(&b, 10, "b");

    c.subscribe(&b, "*").unwrap();
    assert!(c.subscriptions().contains(&b), "{:?}", c.subscriptions());
    wait_for(
        "the 10 messages of the new topic",
        Duration::from_secs(60),
        || ids_of(&seen, &b).len() >= 10,
    );
    assert_eq!(
        ids_of(&seen, &b).into_iter().collect::<HashSet<_>>(),
        first_b
    );

    c.unsubscribe(&b).unwrap();
    wait_for("the queues of b dropped", Duration::from_secs(30), || {
        c.assigned_queues().iter().all(|mq| mq.topic() != b)
    });
    let later_b = send(&b, 10, "later");
    let sent_a = send(&a, 5, "a");
    wait_for("a still consumed", Duration::from_secs(60), || {
        ids_of(&seen, &a).len() >= 5
    });
    // a's five arrived through the same pulls that would have brought b's: none of b's came.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        ids_of(&seen, &b).len(),
        10,
        "messages of an unsubscribed topic consumed"
    );
    assert_eq!(
        ids_of(&seen, &a).into_iter().collect::<HashSet<_>>(),
        sent_a
    );
    assert!(c.unsubscribe(&b).is_err(), "not subscribed any more");
    c.shutdown();

    // The offsets of b were persisted when its queues were dropped: a successor of the
    // group gets exactly the ten sent after the unsubscribe.
    let (d, seen2) = recording(&group, &b);
    wait_for("the 10 later messages", Duration::from_secs(60), || {
        ids_of(&seen2, &b).len() >= 10
    });
    std::thread::sleep(Duration::from_secs(1));
    let got: Vec<String> = ids_of(&seen2, &b);
    assert_eq!(got.len(), 10, "redelivered: {got:?}");
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), later_b);
    d.shutdown();
}

#[test]
fn a_message_sent_back_with_delay_level_2_comes_again_after_about_5_seconds() {
    let topic = cluster::topic("sendback", 1);
    let consumer: Arc<OnceLock<PushConsumer>> = Arc::default();
    let deliveries: Arc<Mutex<Vec<(Instant, MessageExt)>>> = Arc::default();
    let (cons, got) = (consumer.clone(), deliveries.clone());
    let c = PushConsumer::builder(cluster::unique("sendback_g"))
        .client_options(cluster::options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            for m in msgs {
                got.lock().push((Instant::now(), m.clone()));
                if m.reconsume_times() == 0 {
                    let c = cons.get().expect("set before anything is sent");
                    c.send_message_back(m, ReconsumeDelay::Level(2))
                        .expect("send-back");
                }
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    assert!(consumer.set(c).is_ok());
    let id = send(&topic, 1, "back").into_iter().next().unwrap();
    wait_for("the message twice", Duration::from_secs(90), || {
        deliveries.lock().len() >= 2
    });
    let d = deliveries.lock();
    assert!(d.iter().all(|(_, m)| m.msg_id() == id));
    assert_eq!(d[1].1.reconsume_times(), 1);
    let gap = d[1].0 - d[0].0;
    // Level 2 is 5 s on the broker's default table (1s 5s 10s ...).
    assert!(gap >= Duration::from_secs(4), "came again after {gap:?}");
    drop(d);
    if let Some(c) = consumer.get() {
        c.shutdown();
    }
}

#[test]
fn a_delay_level_send_arrives_after_its_delay_and_not_before() {
    let topic = cluster::topic("delay", 1);
    let arrived: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let a = arrived.clone();
    let c = PushConsumer::builder(cluster::unique("delay_g"))
        .client_options(cluster::options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            let mut a = a.lock();
            a.extend(
                msgs.iter()
                    .map(|m| (Instant::now(), m.msg_id().to_string())),
            );
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let p = producer();
    let mut delayed = Message::new(&topic, "in 5 s");
    delayed.set_delay_time_level(2);
    let sent = Instant::now();
    let delayed_id = p.send(&delayed).unwrap().msg_id().to_string();
    let plain_id = p
        .send(&Message::new(&topic, "now"))
        .unwrap()
        .msg_id()
        .to_string();
    wait_for("both messages", Duration::from_secs(90), || {
        arrived.lock().len() >= 2
    });
    let a = arrived.lock();
    let at = |id: &str| a.iter().find(|(_, i)| i == id).map(|(t, _)| *t - sent);
    let (delayed_at, plain_at) = (at(&delayed_id).unwrap(), at(&plain_id).unwrap());
    assert!(
        delayed_at >= Duration::from_millis(4500),
        "the delayed message came after {delayed_at:?}"
    );
    assert!(
        plain_at < delayed_at,
        "plain {plain_at:?}, delayed {delayed_at:?}"
    );
    drop(a);
    c.shutdown();
}

#[test]
fn a_lite_pull_sql92_subscription_gets_exactly_the_matching_messages() {
    let topic = cluster::topic("litesql", 2);
    let p = producer();
    let mut want = HashSet::new();
    for i in 0..30 {
        let mut m = Message::new(&topic, format!("n={i}"));
        m.put_user_property("n", i.to_string()).unwrap();
        let id = p.send(&m).unwrap().msg_id().to_string();
        if (5..=14).contains(&i) {
            want.insert(id);
        }
    }
    let c = crate::consumer::lite(&cluster::unique("litesql_g"))
        .subscribe_with(&topic, MessageSelector::by_sql("n BETWEEN 5 AND 14"))
        .start()
        .unwrap();
    let mut got = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < want.len() && Instant::now() < deadline {
        for m in c.poll_timeout(Duration::from_millis(500)).unwrap() {
            got.insert(m.msg_id().to_string());
        }
    }
    // Anything that does not match would have come with the matching ones.
    for m in c.poll_timeout(Duration::from_secs(1)).unwrap() {
        got.insert(m.msg_id().to_string());
    }
    assert_eq!(got, want);
    c.shutdown();
}
