//! The push consumer against the real broker.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::Admin;
use rocketmq_blocking::SelectMessageQueueByHash;
use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus, MessageModel, PushConsumer,
    PushConsumerBuilder, ReconsumeDelay,
};
use rocketmq_blocking::{Message, MessageExt, Producer};

use crate::cluster;
use rocketmq_blocking::ClientOptions;

pub(crate) fn producer() -> Producer {
    Producer::builder(cluster::unique("cpg"))
        .client_options(cluster::options())
        .start()
        .unwrap()
}

pub(crate) fn consumer(group: &str, topic: &str) -> PushConsumerBuilder {
    PushConsumer::builder(group)
        .client_options(cluster::options())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .consume_thread_min(4)
        .consume_thread_max(4)
}

type Seen = Arc<Mutex<Vec<MessageExt>>>;

pub(crate) fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn recording(group: &str, topic: &str) -> (PushConsumer, Seen) {
    record(consumer(group, topic))
}

/// Starts `builder` with a listener that records every message and succeeds.
fn record(builder: PushConsumerBuilder) -> (PushConsumer, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = builder
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().cloned());
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    (c, seen)
}

fn ids(seen: &Seen) -> HashSet<String> {
    seen.lock().iter().map(|m| m.msg_id().to_string()).collect()
}

#[test]
fn every_message_arrives_intact_and_a_restart_resumes_after_the_committed_offset() {
    let topic = cluster::topic("consume", 4);
    let group = cluster::unique("cg");
    let p = producer();
    let mut sent = HashMap::new();
    for i in 0..100 {
        let mut m = Message::new(&topic, format!("body {i}"))
            .with_tags("T")
            .with_keys([format!("k{i}")]);
        m.put_user_property("n", i.to_string()).unwrap();
        let r = p.send(&m).unwrap();
        sent.insert(r.msg_id().to_string(), i);
    }
    let (c, seen) = recording(&group, &topic);
    wait_for("100 messages", Duration::from_secs(60), || {
        ids(&seen).len() >= 100
    });
    for m in seen.lock().iter() {
        let i = sent[m.msg_id()];
        assert_eq!(m.body(), format!("body {i}").as_bytes());
        assert_eq!(m.tags(), Some("T"));
        assert_eq!(m.property("n"), Some(i.to_string().as_str()));
        assert_eq!(m.topic(), topic);
    }
    assert_eq!(ids(&seen), sent.keys().map(|k| k.to_string()).collect());
    // Everything consumed: the committed offsets are the end of each queue.
    wait_for("offsets to catch up", Duration::from_secs(10), || {
        c.offsets().values().sum::<i64>() >= 100
    });
    c.shutdown();

    let mut second = HashSet::new();
    for i in 0..20 {
        second.insert(
            p.send(&Message::new(&topic, format!("late {i}")))
                .unwrap()
                .msg_id()
                .to_string(),
        );
    }
    let (c2, seen2) = recording(&group, &topic);
    wait_for("20 new messages", Duration::from_secs(60), || {
        ids(&seen2).len() >= 20
    });
    std::thread::sleep(Duration::from_millis(500));
    let got = ids(&seen2);
    assert_eq!(
        got, second,
        "a restarted consumer reads only what it had not committed"
    );
    c2.shutdown();
}

#[test]
fn tag_filters_deliver_exactly_the_matching_messages() {
    let topic = cluster::topic("tags", 2);
    let p = producer();
    let mut want = HashSet::new();
    for i in 0..30 {
        let tag = ["TagA", "TagB", "TagC"][i % 3];
        let r = p
            .send(&Message::new(&topic, format!("{tag} {i}")).with_tags(tag))
            .unwrap();
        if tag != "TagC" {
            want.insert(r.msg_id().to_string());
        }
    }
    let (c, seen) = record(
        PushConsumer::builder(cluster::unique("tagg"))
            .client_options(cluster::options())
            .subscribe(&topic, "TagA || TagB")
            .consume_from_where(ConsumeFromWhere::FirstOffset),
    );
    wait_for("20 tagged messages", Duration::from_secs(60), || {
        ids(&seen).len() >= 20
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ids(&seen), want);
    assert!(seen.lock().iter().all(|m| m.tags() != Some("TagC")));
    c.shutdown();
}

#[test]
fn sql92_filters_deliver_exactly_the_matching_messages() {
    use rocketmq_blocking::MessageSelector;
    let topic = cluster::topic("sql", 2);
    let p = producer();
    let mut want = HashSet::new();
    for i in 0..30 {
        let mut m = Message::new(&topic, format!("n={i}")).with_tags(if i % 2 == 0 {
            "even"
        } else {
            "odd"
        });
        m.put_user_property("n", i.to_string()).unwrap();
        let r = p.send(&m).unwrap();
        if i >= 10 && i % 2 == 0 {
            want.insert(r.msg_id().to_string());
        }
    }
    let (c, seen) = record(
        PushConsumer::builder(cluster::unique("sqlg"))
            .client_options(cluster::options())
            .subscribe_with(&topic, MessageSelector::by_sql("n >= 10 AND TAGS = 'even'"))
            .consume_from_where(ConsumeFromWhere::FirstOffset),
    );
    wait_for("10 matching messages", Duration::from_secs(60), || {
        ids(&seen).len() >= 10
    });
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(ids(&seen), want);
    c.shutdown();
}

#[test]
fn a_failed_message_comes_back_with_growing_reconsume_times() {
    let topic = cluster::topic("retry", 1);
    let p = producer();
    let failing = p
        .send(&Message::new(&topic, "fail twice"))
        .unwrap()
        .msg_id()
        .to_string();
    let seen: Arc<Mutex<Vec<(String, u32, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = consumer(&cluster::unique("retryg"), &topic)
        .listener(move |msgs, ctx| {
            let m = &msgs[0];
            s.lock().push((
                m.msg_id().to_string(),
                m.reconsume_times(),
                m.topic().to_string(),
            ));
            // 1 s delay levels keep the test short (Java: delayLevelWhenNextConsume).
            ctx.set_reconsume_delay(ReconsumeDelay::Level(1));
            if m.reconsume_times() < 2 {
                ConsumeStatus::ReconsumeLater
            } else {
                ConsumeStatus::Success
            }
        })
        .start()
        .unwrap();
    wait_for("the third delivery", Duration::from_secs(60), || {
        seen.lock().len() >= 3
    });
    let seen = seen.lock().clone();
    let times: Vec<u32> = seen.iter().map(|(_, t, _)| *t).collect();
    assert_eq!(&times[..3], &[0, 1, 2]);
    assert!(
        seen.iter().all(|(id, _, t)| *id == failing && *t == topic),
        "{seen:?}"
    );
    c.shutdown();
}

#[test]
fn a_message_that_always_fails_ends_in_the_dead_letter_queue() {
    let topic = cluster::topic("dlq", 1);
    let group = cluster::unique("dlqg");
    let p = producer();
    p.send(&Message::new(&topic, "poison")).unwrap();
    let deliveries = Arc::new(Mutex::new(0));
    let d = deliveries.clone();
    let c = consumer(&group, &topic)
        .max_reconsume_times(1)
        .listener(move |_, ctx| {
            *d.lock() += 1;
            ctx.set_reconsume_delay(ReconsumeDelay::Level(1));
            ConsumeStatus::ReconsumeLater
        })
        .start()
        .unwrap();
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    let dlq = format!("%DLQ%{group}");
    wait_for(
        "the DLQ to hold the message",
        Duration::from_secs(60),
        || admin.total_max_offset(&dlq).unwrap_or(0) >= 1,
    );
    assert_eq!(
        *deliveries.lock(),
        2,
        "first delivery + max_reconsume_times (1)"
    );
    c.shutdown();
}

#[test]
fn three_consumers_split_eight_queues_without_overlap_and_survive_join_and_leave() {
    let topic = cluster::topic("split", 8);
    let group = cluster::unique("splitg");
    let p = producer();
    let start = |name: &str| -> (PushConsumer, Seen) {
        record(consumer(&group, &topic).client_options(cluster::options().instance_name(name)))
    };
    let mut consumers: Vec<(PushConsumer, Seen)> =
        ["c1", "c2", "c3"].iter().map(|n| start(n)).collect();
    let all: HashSet<_> = p
        .fetch_publish_message_queues(&topic)
        .unwrap()
        .into_iter()
        .collect();
    // Rebalance converges: until all three consumers are registered, two of them may
    // hold 4 queues each. Wait for the settled averagely split.
    let sizes = |cs: &[(PushConsumer, Seen)]| -> Vec<usize> {
        let mut v: Vec<usize> = cs
            .iter()
            .map(|(c, _)| {
                c.assigned_queues()
                    .iter()
                    .filter(|q| q.topic() == topic)
                    .count()
            })
            .collect();
        v.sort();
        v
    };
    let held = |cs: &[(PushConsumer, Seen)]| -> Vec<_> {
        cs.iter()
            .flat_map(|(c, _)| c.assigned_queues())
            .filter(|q| q.topic() == topic)
            .collect()
    };
    // Rebalance is eventually consistent, as in Java: while the consumers' rounds
    // interleave, one may already hold a queue another has not released yet, even when
    // the counts look settled. What must happen is that they settle: 3/3/2, no overlap,
    // no gap.
    wait_for(
        "the 3/3/2 split without overlap or gap",
        Duration::from_secs(60),
        || {
            let h = held(&consumers);
            sizes(&consumers) == vec![2, 3, 3]
                && h.len() == 8
                && h.into_iter().collect::<HashSet<_>>() == all
        },
    );

    // Messages keep flowing while a consumer joins and another leaves.
    let mut all_seen: Vec<Seen> = consumers.iter().map(|(_, s)| s.clone()).collect();
    let mut sent = HashSet::new();
    for i in 0..300 {
        sent.insert(
            p.send(&Message::new(&topic, format!("m{i}")))
                .unwrap()
                .msg_id()
                .to_string(),
        );
        if i == 100 {
            let (c, s) = start("c4");
            all_seen.push(s.clone());
            consumers.push((c, s));
        }
        if i == 200 {
            let (c, _) = consumers.remove(0);
            c.shutdown();
        }
    }
    let union = |all: &[Seen]| -> HashSet<String> { all.iter().flat_map(ids).collect() };
    wait_for(
        "every message at least once",
        Duration::from_secs(90),
        || sent.is_subset(&union(&all_seen)),
    );
    let deliveries: usize = all_seen
        .iter()
        .map(|s| {
            s.lock()
                .iter()
                .filter(|m| sent.contains(m.msg_id()))
                .count()
        })
        .sum();
    eprintln!(
        "join/leave: {} messages, {} deliveries, {} duplicates",
        sent.len(),
        deliveries,
        deliveries - sent.len()
    );
    for (c, _) in consumers {
        c.shutdown();
    }
}

#[test]
fn broadcasting_consumers_each_get_every_message_and_keep_offsets_in_a_file() {
    let topic = cluster::topic("bcast", 2);
    let group = cluster::unique("bcastg");
    let dir = std::env::temp_dir().join(cluster::unique("offsets"));
    let p = producer();
    let start = |name: &str| -> (PushConsumer, Seen) {
        record(
            consumer(&group, &topic)
                .message_model(MessageModel::Broadcasting)
                .offset_store_dir(dir.clone())
                .client_options(cluster::options().instance_name(name)),
        )
    };
    let (a, seen_a) = start("b1");
    let (b, seen_b) = start("b2");
    let mut sent = HashSet::new();
    for i in 0..40 {
        sent.insert(
            p.send(&Message::new(&topic, format!("b{i}")))
                .unwrap()
                .msg_id()
                .to_string(),
        );
    }
    wait_for("both to see all 40", Duration::from_secs(60), || {
        sent.is_subset(&ids(&seen_a)) && sent.is_subset(&ids(&seen_b))
    });
    let client_a = a.client_id().to_string();
    a.shutdown();
    b.shutdown();
    let file = dir.join(&client_a).join(&group).join("offsets.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(text.starts_with("{\"offsetTable\":{{"), "{text}");

    // The same client id resumes from the file: nothing is delivered twice.
    let (again, seen) = record(
        consumer(&group, &topic)
            .message_model(MessageModel::Broadcasting)
            .offset_store_dir(dir.clone())
            .client_options(cluster::options().instance_name("b1")),
    );
    let late = p
        .send(&Message::new(&topic, "after restart"))
        .unwrap()
        .msg_id()
        .to_string();
    wait_for("the new message", Duration::from_secs(30), || {
        ids(&seen).contains(&late)
    });
    assert_eq!(ids(&seen), [late].into_iter().collect());
    again.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn orderly_consumption_keeps_queue_order_across_a_suspend() {
    let topic = cluster::topic("orderly", 4);
    let p = producer();
    let keys = ["order-1", "order-3"];
    for i in 0..20 {
        for k in keys {
            p.send_with_selector(
                &Message::new(&topic, format!("{k}:{i}")).with_keys([k]),
                &SelectMessageQueueByHash,
                k,
            )
            .unwrap();
        }
    }
    let seen: Arc<Mutex<Vec<(String, i64, i32)>>> = Arc::new(Mutex::new(Vec::new()));
    let suspended = Arc::new(Mutex::new(false));
    let (s, sus) = (seen.clone(), suspended.clone());
    let c = consumer(&cluster::unique("ordg"), &topic)
        .suspend_time(Duration::from_millis(100))
        .orderly_listener(move |msgs, _| {
            let m = &msgs[0];
            let body = String::from_utf8_lossy(m.body()).to_string();
            // Suspend once in the middle of order-1.
            if body == "order-1:7" && !*sus.lock() {
                *sus.lock() = true;
                return ConsumeOrderlyStatus::Suspend;
            }
            s.lock().push((body, m.queue_offset(), m.queue_id()));
            ConsumeOrderlyStatus::Success
        })
        .start()
        .unwrap();
    wait_for("40 ordered messages", Duration::from_secs(60), || {
        seen.lock().len() >= 40
    });
    let seen = seen.lock().clone();
    for k in keys {
        let steps: Vec<usize> = seen
            .iter()
            .filter(|(b, _, _)| b.starts_with(&format!("{k}:")))
            .filter_map(|(b, _, _)| b.rsplit(':').next()?.parse().ok())
            .collect();
        assert_eq!(
            steps,
            (0..20).collect::<Vec<_>>(),
            "{k} in order, each once"
        );
    }
    assert!(*suspended.lock());
    c.shutdown();
}

#[test]
fn the_consume_pool_grows_under_backlog_and_shrinks_when_idle() {
    let topic = cluster::topic("pool", 2);
    let p = producer();
    for i in 0..400 {
        p.send_oneway(&Message::new(&topic, format!("p{i}")))
            .unwrap();
    }
    let release = Arc::new(Mutex::new(false));
    let r = release.clone();
    let c = consumer(&cluster::unique("poolg"), &topic)
        .consume_thread_min(1)
        .consume_thread_max(4)
        .adjust_thread_pool_nums_threshold(50)
        .pull_batch_size(1)
        .adjust_thread_pool_interval(Duration::from_millis(200))
        .listener(move |_, _| {
            // Slow until released, so a backlog builds up at the broker.
            if !*r.lock() {
                std::thread::sleep(Duration::from_millis(50));
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    assert_eq!(c.consume_pool_size(), 1);
    wait_for("the pool to grow to 4", Duration::from_secs(30), || {
        c.consume_pool_size() == 4
    });
    *release.lock() = true;
    wait_for("the pool to shrink to 1", Duration::from_secs(60), || {
        c.consume_pool_size() == 1
    });
    c.shutdown();
}

pub(crate) fn lite(group: &str) -> rocketmq_blocking::LitePullConsumerBuilder {
    use rocketmq_blocking::LitePullConsumer;
    LitePullConsumer::builder(group)
        .client_options(cluster::options())
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .broker_suspend_max_time(Duration::from_millis(500))
}

pub(crate) fn poll_until(c: &rocketmq_blocking::LitePullConsumer, n: usize) -> Vec<MessageExt> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < n && Instant::now() < deadline {
        got.extend(c.poll_timeout(Duration::from_millis(500)).unwrap());
    }
    got
}

#[test]
fn lite_pull_assign_seek_poll_and_commit_round_trip() {
    let topic = cluster::topic("lite", 1);
    let group = cluster::unique("liteg");
    let p = producer();
    for i in 0..10 {
        p.send(&Message::new(&topic, format!("l{i}"))).unwrap();
    }
    let mq = p.fetch_publish_message_queues(&topic).unwrap().remove(0);
    let c = lite(&group).start().unwrap();
    c.assign(std::slice::from_ref(&mq)).unwrap();
    assert_eq!(c.assignment(), vec![mq.clone()]);
    let first = poll_until(&c, 10);
    let bodies: Vec<String> = first
        .iter()
        .map(|m| String::from_utf8_lossy(m.body()).to_string())
        .collect();
    assert_eq!(bodies, (0..10).map(|i| format!("l{i}")).collect::<Vec<_>>());
    assert!(first.iter().all(|m| m.topic() == topic));

    // Seek back to offset 7: exactly 7, 8, 9 come again.
    c.seek(&mq, 7).unwrap();
    let again = poll_until(&c, 3);
    assert_eq!(
        again.iter().map(|m| m.queue_offset()).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    assert!(c.seek(&mq, 11).is_err(), "beyond the max offset");

    c.commit_sync().unwrap();
    assert_eq!(c.committed(&mq).unwrap(), Some(10));
    c.seek_to_begin(&mq).unwrap();
    assert_eq!(poll_until(&c, 1)[0].queue_offset(), 0);
    let ts = first[5].store_timestamp();
    let at = c.offset_for_timestamp(&mq, ts).unwrap();
    // 5.x answers the first offset stored at or after the time; 4.9's binary search stops
    // at any offset stored in that very millisecond, and sends a few microseconds apart
    // share one (seen in a 4.9.7 CI run: offset 6 or 7 for message 5's time).
    let same_ms = |o: i64| {
        usize::try_from(o)
            .ok()
            .and_then(|i| first.get(i))
            .is_some_and(|m| m.store_timestamp() == ts)
    };
    assert!(
        at <= 5 || same_ms(at),
        "offset {at} for the time of offset 5 ({ts:?})"
    );
    c.shutdown();
}

#[test]
fn lite_pull_subscribe_gets_every_message() {
    let topic = cluster::topic("litesub", 4);
    let p = producer();
    let mut sent = HashSet::new();
    for i in 0..40 {
        sent.insert(
            p.send(&Message::new(&topic, format!("s{i}")))
                .unwrap()
                .msg_id()
                .to_string(),
        );
    }
    let c = lite(&cluster::unique("litesubg"))
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    let got: HashSet<String> = poll_until(&c, 40)
        .iter()
        .map(|m| m.msg_id().to_string())
        .collect();
    assert_eq!(got, sent);
    assert_eq!(c.assignment().len(), 4);
    c.shutdown();
}

/// An allocation strategy that panics every time it is asked, counting the calls.
struct PanickingStrategy(Arc<std::sync::atomic::AtomicUsize>);

impl rocketmq_blocking::AllocateStrategy for PanickingStrategy {
    fn name(&self) -> &str {
        "PANICKING"
    }
    fn allocate(
        &self,
        _current: &str,
        _all: &[rocketmq_blocking::MessageQueue],
        _cids: &[String],
    ) -> Vec<rocketmq_blocking::MessageQueue> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        panic!("a user strategy that panics");
    }
}

#[test]
fn a_panicking_allocation_strategy_harms_neither_its_group_nor_the_others_on_the_instance() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let topic = cluster::topic("panicky", 4);
    let instance = cluster::unique("panicky");
    let p = producer();
    let mut sent = HashSet::new();
    for i in 0..20 {
        let r = p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
        sent.insert(r.msg_id().to_string());
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let (bad, bad_seen) = record(
        consumer(&cluster::unique("panicg"), &topic)
            .client_options(cluster::options().instance_name(&instance))
            .allocate_strategy(PanickingStrategy(calls.clone())),
    );
    // The first rebalance round has run (and panicked) before the second group starts.
    wait_for("the strategy to be asked", Duration::from_secs(30), || {
        calls.load(Ordering::SeqCst) >= 1
    });
    let (good, seen) = record(
        consumer(&cluster::unique("calmg"), &topic)
            .client_options(cluster::options().instance_name(&instance)),
    );
    assert_eq!(good.client_id(), bad.client_id(), "one client instance");
    wait_for(
        "the other group to get its queues and the messages",
        Duration::from_secs(60),
        || ids(&seen) == sent,
    );
    let held = good.assigned_queues();
    assert_eq!(held.iter().filter(|q| q.topic() == topic).count(), 4);
    // Later rounds still ask the panicking group's strategy: the rebalance thread lives.
    wait_for("another rebalance round", Duration::from_secs(30), || {
        calls.load(Ordering::SeqCst) >= 2
    });
    assert!(
        bad.assigned_queues().is_empty(),
        "a panicking strategy keeps the current assignment (none)"
    );
    assert!(bad_seen.lock().is_empty());
    good.shutdown();
    bad.shutdown();
}

/// The group's offset of `mq` as the broker answers it (`None`: nothing committed, or 0
/// while the queue's first message is still in memory).
fn broker_offset(group: &str, mq: &rocketmq_blocking::MessageQueue) -> Option<i64> {
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    let addr = admin.master_addrs().unwrap()[mq.broker_name()].clone();
    admin
        .api()
        .query_consumer_offset(&addr, group, mq, Duration::from_secs(5))
        .unwrap()
}

/// The next non-empty batch `poll` returns.
fn poll_batch(c: &rocketmq_blocking::LitePullConsumer) -> Vec<MessageExt> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let batch = c.poll_timeout(Duration::from_millis(500)).unwrap();
        if !batch.is_empty() {
            return batch;
        }
        assert!(Instant::now() < deadline, "no batch in 30 s");
    }
}

#[test]
fn lite_pull_auto_commit_commits_a_batch_only_when_the_next_poll_comes() {
    let topic = cluster::topic("liteac", 1);
    let group = cluster::unique("liteacg");
    let p = producer();
    for i in 0..20 {
        p.send(&Message::new(&topic, format!("a{i}"))).unwrap();
    }
    let mq = p.fetch_publish_message_queues(&topic).unwrap().remove(0);
    let c = lite(&group)
        .pull_batch_size(5)
        .auto_commit_interval(Duration::from_secs(1))
        .persist_offset_interval(Duration::from_millis(200))
        .start()
        .unwrap();
    c.assign(std::slice::from_ref(&mq)).unwrap();
    let first = poll_batch(&c);
    let (start, end) = (
        first[0].queue_offset(),
        first.last().unwrap().queue_offset() + 1,
    );
    // The application is still processing `first`: several persist rounds and more than
    // the auto-commit interval go by without a poll. A crash now must not lose the batch.
    std::thread::sleep(Duration::from_millis(1500));
    let during = broker_offset(&group, &mq);
    let lost = during.map_or(0, |o| (o - start).max(0));
    assert_eq!(
        lost, 0,
        "the broker holds {during:?} while the batch [{start}, {end}) is in processing: \
         a crash would lose {lost} messages"
    );

    // The next poll marks `first` processed: its end is committed, and nothing past it
    // (the second batch is in processing now).
    let second = poll_batch(&c);
    assert_eq!(second[0].queue_offset(), end);
    wait_for(
        "the first batch's end on the broker",
        Duration::from_secs(10),
        || broker_offset(&group, &mq) == Some(end),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        broker_offset(&group, &mq),
        Some(end),
        "the second batch is unprocessed"
    );
    c.shutdown();
}

/// How a lite pull consumer holding an unprocessed batch ends.
#[derive(Debug, Clone, Copy)]
enum LiteEnd {
    Shutdown,
    Drop,
    /// The application panics while processing the batch: unwinding drops the consumer.
    Panic,
}

#[test]
fn lite_pull_shutdown_drop_or_panic_commits_only_the_batches_a_later_poll_confirmed() {
    for end in [LiteEnd::Shutdown, LiteEnd::Drop, LiteEnd::Panic] {
        let topic = cluster::topic("litesd", 1);
        let group = cluster::unique("litesdg");
        let p = producer();
        for i in 0..30 {
            p.send(&Message::new(&topic, format!("s{i}"))).unwrap();
        }
        let mq = p.fetch_publish_message_queues(&topic).unwrap().remove(0);
        let c = lite(&group).pull_batch_size(10).start().unwrap();
        c.assign(std::slice::from_ref(&mq)).unwrap();
        let first = poll_batch(&c);
        // This poll confirms `first`; `second` is never processed.
        let second = poll_batch(&c);
        let confirmed = second[0].queue_offset();
        assert_eq!(confirmed, first.last().unwrap().queue_offset() + 1);
        match end {
            LiteEnd::Shutdown => c.shutdown(),
            LiteEnd::Drop => drop(c),
            LiteEnd::Panic => {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let _consumer = c;
                    panic!("processing the batch failed");
                }));
                assert!(r.is_err());
            }
        }
        assert_eq!(
            broker_offset(&group, &mq),
            Some(confirmed),
            "{end:?}: the broker must hold the end of the confirmed batch, not of the \
             {} unprocessed messages",
            second.len()
        );
        // A new member of the group gets the unprocessed batch again.
        let c2 = lite(&group).pull_batch_size(10).start().unwrap();
        c2.assign(std::slice::from_ref(&mq)).unwrap();
        let again = poll_batch(&c2);
        let ids = |v: &[MessageExt]| v.iter().map(|m| m.msg_id().to_string()).collect::<Vec<_>>();
        assert_eq!(ids(&again), ids(&second), "{end:?}: the batch comes again");
        c2.shutdown();
    }
}

#[test]
fn lite_pull_caches_about_its_size_threshold_of_64_kib_bodies_when_nobody_polls() {
    const BODY: usize = 64 << 10;
    // Per queue (one queue, 1 MiB) and for the whole consumer (four queues, 1 MiB in all).
    for (queues, per_queue_mib, all_mib) in [(1, 1, 1024), (4, 1024, 1)] {
        let topic = cluster::topic("litesz", queues);
        let group = cluster::unique("liteszg");
        let p = producer();
        let body = vec![b'x'; BODY];
        for _ in 0..200 {
            p.send(&Message::new(&topic, body.clone())).unwrap();
        }
        let batch = 8;
        let c = lite(&group)
            .pull_batch_size(batch)
            .pull_threshold_size_for_queue_mib(per_queue_mib)
            .pull_threshold_size_for_all_mib(all_mib)
            .subscribe(&topic, "*")
            .start()
            .unwrap();
        // Nobody polls while the pulls run into the threshold.
        std::thread::sleep(Duration::from_secs(4));
        // What is cached now comes out of polls that wait for nothing; paused queues start
        // no pull meanwhile (none is in flight: the cache is at its threshold).
        let assigned = c.assignment();
        assert_eq!(assigned.len(), queues as usize);
        c.pause(&assigned);
        let mut cached = 0;
        loop {
            let got = c.poll_timeout(Duration::ZERO).unwrap();
            if got.is_empty() {
                break;
            }
            cached += got.len();
        }
        // The threshold, plus one pull per queue that started just below it.
        let bound = (1 << 20) / BODY + queues as usize * batch;
        println!("{queues} queue(s): {cached} bodies of 64 KiB cached while nobody polled (bound {bound})");
        assert!(
            cached > 0 && cached <= bound,
            "{queues} queue(s): {cached} bodies of 64 KiB cached ({} KiB) against a bound of {bound}",
            cached * 64
        );
        // The rest still comes once polled.
        c.resume(&assigned);
        let rest = poll_until(&c, 200 - cached);
        assert_eq!(cached + rest.len(), 200);
        c.shutdown();
    }
}

#[test]
fn lite_pull_without_auto_commit_a_rebalance_commits_nothing() {
    let topic = cluster::topic("literb", 4);
    let group = cluster::unique("literbg");
    let p = producer();
    for i in 0..40 {
        p.send(&Message::new(&topic, format!("r{i}"))).unwrap();
    }
    let c1 = lite(&group)
        .auto_commit(false)
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    let polled = poll_until(&c1, 40);
    assert_eq!(polled.len(), 40);
    let queues: Vec<_> = p.fetch_publish_message_queues(&topic).unwrap();

    // A second consumer joins: c1 gives up two queues, which must not commit what c1
    // polled (the application never committed it).
    let c2 = lite(&group)
        .auto_commit(false)
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    wait_for("the 2/2 split", Duration::from_secs(60), || {
        c1.assignment().len() == 2 && c2.assignment().len() == 2
    });
    let taken = c2.assignment();
    let expected = polled
        .iter()
        .filter(|m| taken.contains(&m.message_queue()))
        .count();
    // Uncommitted, those messages come again from the new owner.
    let again = poll_until(&c2, expected);
    assert_eq!(
        again.len(),
        expected,
        "{} of the {expected} uncommitted messages of the moved queues never came again",
        expected.saturating_sub(again.len())
    );
    // A group without an offset reads as 0 while the queue's first message is in memory
    // (the broker's QUERY_CONSUMER_OFFSET answer).
    let offsets: Vec<i64> = queues
        .iter()
        .map(|mq| broker_offset(&group, mq).unwrap_or(0))
        .collect();
    assert_eq!(offsets, vec![0; 4], "no offset was committed");
    c2.shutdown();
    c1.shutdown();
}

/// A broadcasting consumer restarted while messages keep coming, on a queue that was idle
/// before the restart too: the local offset file must know every queue, or an idle one
/// restarts at its end and skips what arrived while the consumer was down.
#[test]
fn a_restarted_broadcasting_consumer_misses_nothing_sent_while_it_was_down() {
    let topic = cluster::topic("bcast_restart", 4);
    let group = cluster::unique("bcast_restart_g");
    let instance = cluster::unique("bcast_restart_i");
    let dir = std::env::temp_dir().join(cluster::unique("bcast_offsets"));
    let p = producer();
    let queues = p.fetch_publish_message_queues(&topic).unwrap();
    let (busy, idle) = (&queues[..2], &queues[2..]);
    // Like Java's default: a broadcasting consumer without an offset starts at the end.
    let start = || {
        record(
            PushConsumer::builder(&group)
                .client_options(cluster::options().instance_name(&instance))
                .subscribe(&topic, "*")
                .message_model(MessageModel::Broadcasting)
                .consume_from_where(ConsumeFromWhere::LastOffset)
                .offset_store_dir(dir.clone())
                .persist_offset_interval(Duration::from_millis(200)),
        )
    };
    let send_to = |mqs: &[rocketmq_blocking::MessageQueue], n: usize, tag: &str| {
        let mut ids = HashSet::new();
        for i in 0..n {
            let mq = &mqs[i % mqs.len()];
            let r = p
                .send_to_queue(&Message::new(&topic, format!("{tag} {i}")), mq)
                .unwrap();
            ids.insert(r.msg_id().to_string());
        }
        ids
    };
    let (c, seen) = start();
    wait_for("the queues", Duration::from_secs(30), || {
        c.assigned_queues().len() == 4
    });
    // Only two queues carry traffic in the first life.
    let first = send_to(busy, 40, "first");
    wait_for("the first life's messages", Duration::from_secs(30), || {
        ids(&seen).is_superset(&first)
    });
    c.shutdown();
    // While it is down, every queue gets messages, the idle ones included.
    let while_down = send_to(&queues, 40, "while down");
    let (c, seen) = start();
    let after = send_to(idle, 20, "after");
    let want: HashSet<String> = while_down.union(&after).cloned().collect();
    let got_all = {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ids(&seen).is_superset(&want) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        ids(&seen).is_superset(&want)
    };
    c.shutdown();
    let lost = want.difference(&ids(&seen)).count();
    let again = ids(&seen).intersection(&first).count();
    eprintln!(
        "broadcasting restart: lost {lost} of {}, first-life messages again {again}",
        want.len()
    );
    assert!(got_all, "lost {lost} of {}", want.len());
    assert_eq!(again, 0, "the first life's consumed messages came again");
    let _ = std::fs::remove_dir_all(&dir);
    p.shutdown();
}

/// Java `setAckIndex`: with Success, only the messages up to the index count as consumed;
/// the rest of the batch comes back (through the retry topic), and nothing is lost.
#[test]
fn an_ack_index_retries_exactly_the_messages_after_it() {
    let topic = cluster::topic("ackidx", 1);
    let p = producer();
    let mut sent = HashSet::new();
    for i in 0..4 {
        let r = p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
        sent.insert(r.msg_id().to_string());
    }
    // (message id, reconsume times) of every delivery, and the first batch's ids.
    let deliveries: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let first_batch: Arc<Mutex<Vec<String>>> = Arc::default();
    let (d, f) = (deliveries.clone(), first_batch.clone());
    let c = consumer(&cluster::unique("ackidxg"), &topic)
        .consume_message_batch_max_size(4)
        .listener(move |msgs, ctx| {
            d.lock().extend(
                msgs.iter()
                    .map(|m| (m.msg_id().to_string(), m.reconsume_times())),
            );
            let mut first = f.lock();
            if first.is_empty() && msgs.len() > 1 {
                // Only the first message of the first multi-message batch is acknowledged.
                first.extend(msgs.iter().map(|m| m.msg_id().to_string()));
                ctx.set_ack_index(0);
                ctx.set_reconsume_delay(ReconsumeDelay::Level(1));
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for(
        "a multi-message batch and its retries",
        Duration::from_secs(60),
        || {
            let first = first_batch.lock().clone();
            let d = deliveries.lock();
            !first.is_empty()
                && first[1..]
                    .iter()
                    .all(|id| d.iter().any(|(m, t)| m == id && *t == 1))
                && sent.iter().all(|id| d.iter().any(|(m, _)| m == id))
        },
    );
    // Give a wrongly retried first message time to show up too.
    std::thread::sleep(Duration::from_secs(3));
    c.shutdown();
    let first = first_batch.lock().clone();
    let d = deliveries.lock().clone();
    let count = |id: &str| d.iter().filter(|(m, _)| m == id).count();
    assert_eq!(
        count(&first[0]),
        1,
        "the acknowledged message came again: {d:?}"
    );
    for id in &first[1..] {
        assert_eq!(count(id), 2, "{id} was not retried exactly once: {d:?}");
    }
    assert!(sent.iter().all(|id| count(id) >= 1), "lost: {d:?}");
}

/// NOTIFY_CONSUMER_IDS_CHANGED: when a second member joins, the broker tells the first,
/// which rebalances at once instead of at its next 20 s round.
#[test]
fn a_member_joining_makes_the_others_rebalance_well_before_the_periodic_round() {
    let topic = cluster::topic("notify_ids", 4);
    let group = cluster::unique("notify_ids_g");
    // Queues of the topic only: the group's retry queue goes to one of the two as well.
    let held = |c: &PushConsumer| {
        c.assigned_queues()
            .iter()
            .filter(|mq| mq.topic() == topic)
            .count()
    };
    let (c1, _) = recording(&group, &topic);
    wait_for("c1 holding all 4 queues", Duration::from_secs(60), || {
        held(&c1) == 4
    });
    // c1's own rebalance rounds now run 20 s apart; c2's start is what the broker notifies.
    let joined = Instant::now();
    let (c2, _) = recording(&group, &topic);
    wait_for("the 2/2 split", Duration::from_secs(60), || {
        held(&c1) == 2 && held(&c2) == 2
    });
    let took = joined.elapsed();
    eprintln!("the first member gave up its queues {took:?} after the second joined");
    assert!(
        took < Duration::from_secs(10),
        "the split took {took:?}: the first member waited for its periodic rebalance"
    );
    c2.shutdown();
    c1.shutdown();
}

/// Java `consumeTimeout` (`cleanExpiredMsg`): a message whose listener runs past the
/// consume timeout is sent back for retry and leaves the process queue, so one hung
/// listener no longer pins its queue's offset.
#[test]
fn a_listener_past_the_consume_timeout_has_its_message_retried_and_the_offset_moves_on() {
    let topic = cluster::topic("consume_timeout", 1);
    let group = cluster::unique("consume_timeout_g");
    let p = producer();
    for i in 0..3 {
        p.send(&Message::new(&topic, format!("t{i}"))).unwrap();
    }
    let mq = p.fetch_publish_message_queues(&topic).unwrap()[0].clone();
    let (release, released) = crossbeam_channel::unbounded::<()>();
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let began = Instant::now();
    let c = consumer(&group, &topic)
        .consume_timeout(Duration::from_secs(2))
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().cloned());
            // The first delivery of t0 hangs (until the test ends); its retry does not.
            if msgs[0].body() == b"t0" && msgs[0].reconsume_times() == 0 {
                let _ = released.recv_timeout(Duration::from_secs(120));
            }
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for("t0 retried", Duration::from_secs(60), || {
        seen.lock()
            .iter()
            .any(|m| m.body() == b"t0" && m.reconsume_times() == 1)
    });
    let retried_after = began.elapsed();
    // The queue's offset moves past the hung message to the end (3).
    wait_for(
        "the offset past the hung message",
        Duration::from_secs(30),
        || c.offsets().get(&mq).copied() == Some(3),
    );
    eprintln!("the hung message came again {retried_after:?} after the start");
    let _ = release.send(());
    c.shutdown();
    let bodies: Vec<Vec<u8>> = seen.lock().iter().map(|m| m.body().to_vec()).collect();
    for b in [&b"t1"[..], b"t2"] {
        assert!(bodies.iter().any(|x| x == b), "{b:?} never came");
    }
}

/// Counts the HEART_BEAT requests of a client instance.
#[derive(Default)]
struct HeartbeatCounter(std::sync::atomic::AtomicUsize);

impl rocketmq_blocking::remoting::RpcHook for HeartbeatCounter {
    fn before_request(&self, _: &str, request: &mut rocketmq_blocking::protocol::RemotingCommand) {
        if request.request_code() == rocketmq_blocking::protocol::RequestCode::HEART_BEAT {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// A first rebalance over many topics tells the broker once, not once per topic: each
/// heartbeat carries every subscription, so one per topic grew with the square of the
/// topics (5,000 topics: minutes of heartbeats before the last queue was pulled).
#[test]
fn a_consumer_of_many_topics_sends_one_heartbeat_per_rebalance_round() {
    const TOPICS: usize = 20;
    let topics: Vec<String> = (0..TOPICS).map(|_| cluster::topic("hbround", 1)).collect();
    let p = producer();
    for t in &topics {
        p.send(&Message::new(t, &b"x"[..])).unwrap();
    }
    // The consumer's instance, made first so that the counter sees all it sends.
    let name = cluster::unique("hb-round");
    let instance = cluster::instance(&name);
    let counter = Arc::new(HeartbeatCounter::default());
    instance.remoting().register_rpc_hook(counter.clone());
    let mut builder = consumer(&cluster::unique("hbround"), &topics[0])
        .client_options(cluster::options().instance_name(&name));
    for t in &topics[1..] {
        builder = builder.subscribe(t, "*");
    }
    let (c, seen) = record(builder);
    wait_for("a message of every topic", Duration::from_secs(60), || {
        seen.lock().len() >= TOPICS
    });
    let heartbeats = counter.0.load(std::sync::atomic::Ordering::Relaxed);
    c.shutdown();
    drop(instance);
    eprintln!("{heartbeats} heartbeats until {TOPICS} topics were consumed");
    // The start's, the first round's, a new connection's, a periodic one or two: far
    // fewer than one per topic.
    assert!(
        heartbeats < TOPICS / 2,
        "{heartbeats} heartbeats for {TOPICS} topics"
    );
}
