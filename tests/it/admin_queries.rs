//! `Admin`'s queries and admin calls against the real broker, with the official tool
//! (`mqadmin` of the cluster's version) reading the same state: messages by key and by
//! unique key, a group's progress, offsets by time and their reset, subscription groups,
//! topic listing and deletion, the cluster as the tool lists it.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rocketmq_blocking::{
    Admin, ConsumeStatus, ErrorKind, Message, MessageQuery, MessageQueue, ResetTarget,
    ResponseCode, SubscriptionGroupConfig,
};

use crate::admin_tool::{mqadmin, send, wait_for_committed};
use crate::cluster;
use crate::consumer::{consumer, producer, wait_for};
use rocketmq_blocking::ClientOptions;

fn admin() -> Admin {
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .expect("admin")
}

/// Polls `f` until it returns `Some` (the broker builds its index and commits offsets
/// in the background), at most `timeout`.
fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    wait_for(what, timeout, || {
        found = f();
        found.is_some()
    });
    found.expect("wait_for returned")
}

#[test]
fn messages_are_found_by_key_and_unique_key_only_within_their_time_range() {
    let topic = cluster::topic("adm_query", 2);
    let key = cluster::unique("K");
    let before = SystemTime::now() - Duration::from_secs(2);
    let p = producer();
    let with_key = |body: &str, keys: &[&str]| {
        p.send(&Message::new(&topic, body.to_string()).with_keys(keys.iter().copied()))
            .unwrap()
    };
    let a = with_key("a", &[key.as_str()]);
    let b = with_key("b", &["other", key.as_str()]);
    let _c = with_key("c", &[&format!("{key}0")]); // a key that starts the same
    p.shutdown();
    let after = SystemTime::now() + Duration::from_secs(2);
    let admin = admin();

    let found = eventually("both messages by key", Duration::from_secs(30), || {
        let r = admin
            .query_messages(&MessageQuery::by_key(&topic, &key))
            .unwrap();
        (r.messages.len() >= 2).then_some(r)
    });
    let ids: BTreeSet<&str> = found.messages.iter().map(|m| m.msg_id()).collect();
    assert_eq!(ids, BTreeSet::from([a.msg_id(), b.msg_id()]));
    let bodies: BTreeSet<&[u8]> = found.messages.iter().map(|m| m.body()).collect();
    assert_eq!(bodies, BTreeSet::from([&b"a"[..], &b"b"[..]]));
    assert!(found.index_last_update.is_some());
    // Inside the range it is found; a range before the sends or after them finds nothing.
    let inside = MessageQuery::by_key(&topic, &key).begin(before).end(after);
    assert_eq!(admin.query_messages(&inside).unwrap().messages.len(), 2);
    let earlier = MessageQuery::by_key(&topic, &key)
        .within(before - Duration::from_secs(3600), Duration::from_secs(600));
    assert!(admin.query_messages(&earlier).unwrap().messages.is_empty());
    let later = MessageQuery::by_key(&topic, &key).begin(after + Duration::from_secs(600));
    assert!(admin.query_messages(&later).unwrap().messages.is_empty());
    let unknown = MessageQuery::by_key(&topic, cluster::unique("nokey"));
    assert!(admin.query_messages(&unknown).unwrap().messages.is_empty());

    // By unique key: exactly that message, with its store details.
    let m = admin
        .query_message_by_unique_key(&topic, a.msg_id())
        .unwrap()
        .expect("found by unique key");
    assert_eq!(m.body(), b"a");
    assert_eq!(m.offset_msg_id(), a.offset_msg_id());
    assert_eq!(m.queue_offset(), a.queue_offset());
    assert_eq!(&m.message_queue(), a.message_queue());
    let none = admin
        .query_message_by_unique_key(&topic, &rocketmq_blocking::message::uniq::create_uniq_id())
        .unwrap();
    assert!(none.is_none());

    // Bad input is refused before anything is sent.
    let e = admin
        .query_messages(&MessageQuery::by_key(&topic, "").max(1))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    // The official tool finds the same two by key, and the one by unique key.
    let by_key = mqadmin(&["queryMsgByKey", "-t", &topic, "-k", &key]);
    assert!(by_key.contains("#Message ID"), "{by_key}");
    for id in [a.msg_id(), b.msg_id()] {
        assert!(by_key.contains(id), "no {id} in:\n{by_key}");
    }
    let rows = by_key
        .lines()
        .filter(|l| l.contains(a.msg_id()) || l.contains(b.msg_id()));
    assert_eq!(rows.count(), 2, "{by_key}");
    let by_uniq = mqadmin(&["queryMsgByUniqueKey", "-i", b.msg_id(), "-t", &topic]);
    let field = |name: &str| {
        by_uniq
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in:\n{by_uniq}"))
            .to_string()
    };
    assert_eq!(field("Topic:"), topic);
    assert!(field("Keys:").contains(&key), "{by_uniq}");
    assert_eq!(field("Queue ID:"), b.message_queue().queue_id().to_string());
    assert_eq!(field("Queue Offset:"), b.queue_offset().to_string());
}

#[test]
fn a_groups_progress_shows_its_lag_and_the_lag_falls_to_zero_after_consumption() {
    let topic = cluster::topic("adm_progress", 4);
    let group = cluster::unique("adm_progress_g");
    send(&topic, 12);
    let open = Arc::new(AtomicBool::new(false));
    let consumed = Arc::new(AtomicUsize::new(0));
    let (gate, seen) = (open.clone(), consumed.clone());
    let c = consumer(&group, &topic)
        .listener(move |msgs, _| {
            while !gate.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            seen.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    let admin = admin();
    // The group's retry topic is routed once a broker has its heartbeat.
    let stats = eventually("the group's stats", Duration::from_secs(60), || {
        let s = admin.consume_stats(&group, Some(&topic)).ok()?;
        (s.queues.len() == 4).then_some(s)
    });
    assert_eq!(stats.queues.len(), 4, "{stats:?}");
    let stored: i64 = stats.queues.values().map(|q| q.broker_offset).sum();
    assert_eq!(stored, 12);
    assert_eq!(stats.total_diff(), 12, "nothing consumed yet: {stats:?}");
    assert!(stats.queues.values().all(|q| q.last_timestamp.is_none()));

    open.store(true, Ordering::SeqCst);
    wait_for("12 consumed", Duration::from_secs(60), || {
        consumed.load(Ordering::SeqCst) >= 12
    });
    // Offsets reach the broker with the consumer's next persist (every 5 s).
    let done = eventually("the lag at 0", Duration::from_secs(30), || {
        let s = admin.consume_stats(&group, None).ok()?;
        let of_topic = s.queues.keys().filter(|q| q.topic() == topic).count();
        (of_topic == 4 && s.total_diff() == 0).then_some(s)
    });
    let committed: i64 = done
        .queues
        .values()
        .filter(|q| q.queue.topic() == topic)
        .map(|q| q.consumer_offset)
        .sum();
    assert_eq!(committed, 12);
    assert!(done
        .queues
        .values()
        .filter(|q| q.queue.topic() == topic && q.consumer_offset > 0)
        .all(|q| q.last_timestamp.is_some()));

    // The official tool sees the Rust group's four queues with the same offsets.
    let out = mqadmin(&["consumerProgress", "-g", &group]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with(topic.as_str()))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    for row in &rows {
        let q: i32 = row[2].parse().unwrap();
        let mq = rocketmq_blocking::MessageQueue::new(&topic, row[1], q);
        let ours = &done.queues[&mq];
        assert_eq!(row[3], ours.broker_offset.to_string(), "{out}");
        assert_eq!(row[4], ours.consumer_offset.to_string(), "{out}");
        assert_eq!(row[5], "0", "diff of {mq:?} in:\n{out}");
    }
    assert!(out.contains("Diff Total: 0"), "{out}");
    c.shutdown();
}

#[test]
fn offsets_by_time_and_resets_move_a_running_group_and_an_absent_one() {
    let topic = cluster::topic("adm_offsets", 2);
    let group = cluster::unique("adm_offsets_g");
    send(&topic, 6);
    let admin = admin();
    let route = admin.topic_route(&topic).unwrap();
    let addr = route.broker_datas[0].master_addr().unwrap().to_string();
    let broker = route.broker_datas[0].broker_name.clone();
    let mq = |q| MessageQueue::new(&topic, &broker, q);
    let max: Vec<i64> = (0..2).map(|q| admin.max_offset(&mq(q)).unwrap()).collect();
    // The `_on` forms ask the given broker, here the same master.
    assert_eq!(admin.max_offset_on(&addr, &mq(0)).unwrap(), max[0]);
    assert_eq!(max.iter().sum::<i64>(), 6);
    assert!(max.iter().all(|&m| m > 0), "{max:?}");
    let v4 = cluster::cluster().lock().version().starts_with("4.");
    for q in 0..2 {
        assert_eq!(admin.min_offset(&mq(q)).unwrap(), 0);
        let first = admin.search_offset(&mq(q), SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(first, 0);
        let future = SystemTime::now() + Duration::from_secs(3600);
        let end = admin.search_offset_on(&addr, &mq(q), future).unwrap();
        // 5.x: the first offset stored later, none here; 4.x: the closest, the last.
        let want = max[q as usize] - i64::from(v4);
        assert_eq!(end, want, "queue {q}");
    }

    let consumed = Arc::new(AtomicUsize::new(0));
    let seen = consumed.clone();
    let c = consumer(&group, &topic)
        .listener(move |msgs, _| {
            seen.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    wait_for("6 consumed", Duration::from_secs(60), || {
        consumed.load(Ordering::SeqCst) >= 6
    });
    // The broker has to know the group's offsets before it resets them.
    wait_for_committed(&group, &topic, 2);
    // Through the broker: the running consumer is told and consumes everything again.
    let reset = admin
        .reset_offset(&group, &topic, ResetTarget::Earliest)
        .unwrap();
    let expected: Vec<(rocketmq_blocking::MessageQueue, i64)> = (0..2)
        .map(|q| (rocketmq_blocking::MessageQueue::new(&topic, &broker, q), 0))
        .collect();
    assert_eq!(reset.into_iter().collect::<Vec<_>>(), expected);
    wait_for("the 6 consumed again", Duration::from_secs(60), || {
        consumed.load(Ordering::SeqCst) >= 12
    });
    c.shutdown();

    // No consumer online: the offsets are written directly, back to the start...
    let reset = admin
        .reset_offset(&group, &topic, ResetTarget::Earliest)
        .unwrap();
    assert!(reset.values().all(|&o| o == 0), "{reset:?}");
    let stats = admin.consume_stats(&group, Some(&topic)).unwrap();
    assert_eq!(stats.total_diff(), 6, "{stats:?}");
    // ...and to the end.
    let reset = admin
        .reset_offset(&group, &topic, ResetTarget::Latest)
        .unwrap();
    let ends: Vec<i64> = reset.values().copied().collect();
    assert_eq!(ends, max);
    let stats = admin.consume_stats(&group, Some(&topic)).unwrap();
    assert_eq!(stats.total_diff(), 0, "{stats:?}");

    let e = admin
        .reset_offset("bad group", &topic, ResetTarget::Latest)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn a_created_subscription_group_is_listed_with_its_settings() {
    let group = cluster::unique("adm_sub_g");
    let mut config = SubscriptionGroupConfig::new(&group);
    config.retry_max_times = 3;
    config.consume_broadcast_enable = false;
    let admin = admin();
    let brokers = admin.create_subscription_group(&config).unwrap();
    assert!(!brokers.is_empty());
    let groups = admin.subscription_groups().unwrap();
    let listed = groups
        .get(&group)
        .unwrap_or_else(|| panic!("{group} not in {groups:?}"));
    assert_eq!(listed.retry_max_times, 3);
    assert!(!listed.consume_broadcast_enable);
    assert!(listed.consume_enable);
    assert_eq!(listed.retry_queue_nums, 1);
    // The brokers' own groups are listed too.
    assert!(groups.contains_key("TOOLS_CONSUMER"), "{:?}", groups.keys());

    let bad = SubscriptionGroupConfig::new("bad group");
    let e = admin.create_subscription_group(&bad).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn a_deleted_topic_loses_its_route_and_leaves_the_topic_list() {
    let topic = cluster::topic("adm_delete", 2);
    let admin = admin();
    assert!(admin.topic_list().unwrap().contains(&topic));
    let route = admin.topic_route(&topic).unwrap();

    // The official tool routes it and lists the cluster as the admin sees them.
    let tool_route = mqadmin(&["topicRoute", "-t", &topic]);
    for bd in &route.broker_datas {
        assert!(tool_route.contains(&bd.broker_name), "{tool_route}");
        assert!(
            tool_route.contains(bd.master_addr().unwrap()),
            "{tool_route}"
        );
    }
    assert!(tool_route.contains("\"readQueueNums\":2"), "{tool_route}");
    let clusters = mqadmin(&["clusterList"]);
    let version = format!("V{}", cluster::cluster().lock().version().replace('.', "_"));
    let info = admin.cluster_info().unwrap();
    for (name, bd) in &info.broker_addr_table {
        let row = clusters
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no row of {name} in:\n{clusters}"));
        assert!(row.starts_with(&bd.cluster), "{row}");
        assert!(row.contains(bd.master_addr().unwrap()), "{row}");
        assert!(row.contains(&version), "{row}");
    }

    let brokers = admin.delete_topic(&topic).unwrap();
    assert_eq!(brokers.len(), route.broker_datas.len());
    let e = admin.topic_route(&topic).unwrap_err();
    assert_eq!(
        e.response_code(),
        Some(ResponseCode::TOPIC_NOT_EXIST),
        "{e}"
    );
    assert!(!admin.topic_list().unwrap().contains(&topic));
    let e = admin.delete_topic("bad topic").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}
