//! Lite pull for users who follow queues themselves (issue 29): the read queues of a
//! topic, commits of an offset map, subscriptions changed while running, the listeners
//! told of a topic's queue set and of an allocation, and the admin views an operator
//! compares them with (`consumerConnection`, `topicStatus`, `consumerProgress`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use rocketmq_blocking::{
    Admin, ClientOptions, ConsumeStatus, ErrorKind, Message, MessageQueue, Producer, PushConsumer,
    ResponseCode, TopicConfig,
};

use crate::admin_tool::mqadmin;
use crate::cluster;
use crate::consumer::{consumer, lite, poll_until, producer, wait_for};

fn admin() -> Admin {
    Admin::builder()
        .client_options(cluster::options())
        .start()
        .unwrap()
}

/// A topic of `read` readable and `write` writable queues (mqadmin `updateTopic -r -w`).
fn topic_rw(prefix: &str, read: u32, write: u32) -> String {
    let name = cluster::unique(prefix);
    let mut config = TopicConfig::new(&name, read.max(write));
    config.read_queue_nums = read;
    config.write_queue_nums = write;
    admin().create_topic(&config).unwrap();
    name
}

fn ids(qs: &[MessageQueue]) -> Vec<i32> {
    qs.iter().map(|q| q.queue_id()).collect()
}

#[test]
fn fetch_message_queues_gives_the_read_queues_when_read_and_write_counts_differ() {
    let p = producer();
    let c = lite(&cluster::unique("lp_rw_g")).start().unwrap();

    // More readable than writable queues: 8 to read, messages only in the first 4.
    let wide = topic_rw("lp_r8w4", 8, 4);
    let read = c.fetch_message_queues(&wide).unwrap();
    let write = p.fetch_publish_message_queues(&wide).unwrap();
    assert_eq!(ids(&read), (0..8).collect::<Vec<_>>());
    assert_eq!(write.len(), 4, "{write:?}");
    assert!(read.iter().all(|q| q.topic() == wide));

    // Fewer readable than writable: 2 to read of 4 written.
    let narrow = topic_rw("lp_r2w4", 2, 4);
    assert_eq!(ids(&c.fetch_message_queues(&narrow).unwrap()), [0, 1]);
    assert_eq!(p.fetch_publish_message_queues(&narrow).unwrap().len(), 4);

    // Assigning the read queues of the wide topic reads everything sent to it.
    for i in 0..12 {
        p.send(&Message::new(&wide, format!("m{i}"))).unwrap();
    }
    c.assign(&read).unwrap();
    let got = poll_until(&c, 12);
    assert_eq!(got.len(), 12);
    assert!(got.iter().all(|m| m.queue_id() < 4));

    let e = c.fetch_message_queues("lp_no_such_topic_x").unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Response | ErrorKind::NoRoute),
        "{e}"
    );
    assert_eq!(
        c.fetch_message_queues("bad topic").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    c.shutdown();
    p.shutdown();
}

#[test]
fn commit_of_an_offset_map_shows_in_committed_and_in_consumer_progress() {
    let topic = cluster::topic("lp_commit", 2);
    let group = cluster::unique("lp_commit_g");
    let p = producer();
    for i in 0..10 {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    let c = lite(&group).auto_commit(false).start().unwrap();
    let queues = c.fetch_message_queues(&topic).unwrap();
    c.assign(&queues).unwrap();
    assert_eq!(poll_until(&c, 10).len(), 10);

    let offsets: HashMap<MessageQueue, i64> =
        [(queues[0].clone(), 3), (queues[1].clone(), 2)].into();
    c.commit(&offsets, true).unwrap();
    assert_eq!(c.committed(&queues[0]).unwrap(), Some(3));
    assert_eq!(c.committed(&queues[1]).unwrap(), Some(2));

    // The official tool reads the same offsets from the broker.
    let out = mqadmin(&["consumerProgress", "-g", &group]);
    let progress: HashMap<i32, i64> = out
        .lines()
        .filter(|l| l.starts_with(topic.as_str()))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.get(2)?.parse().ok()?, f.get(4)?.parse().ok()?))
        })
        .collect();
    assert_eq!(progress, [(0, 3), (1, 2)].into(), "{out}");

    // Refused, and nothing committed: a queue not held, a negative offset.
    let other = MessageQueue::new(&topic, queues[0].broker_name(), 7);
    let bad: HashMap<MessageQueue, i64> = [(queues[0].clone(), 5), (other, 1)].into();
    assert_eq!(c.commit(&bad, true).unwrap_err().kind(), ErrorKind::State);
    let negative: HashMap<MessageQueue, i64> = [(queues[0].clone(), -1)].into();
    assert_eq!(
        c.commit(&negative, true).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(c.committed(&queues[0]).unwrap(), Some(3));

    // Without persist the offset is written with the next periodic persist (5 s).
    let later: HashMap<MessageQueue, i64> = [(queues[1].clone(), 4)].into();
    c.commit(&later, false).unwrap();
    let a = admin();
    wait_for("the periodic persist", Duration::from_secs(30), || {
        a.consume_stats(&group, Some(&topic))
            .ok()
            .and_then(|s| Some(s.queues.get(&queues[1])?.consumer_offset))
            == Some(4)
    });
    assert_eq!(c.committed(&queues[1]).unwrap(), Some(4));
    c.shutdown();
    p.shutdown();
}

/// A commit written through is what `committed` reads next, however the periodic persist
/// interleaves: the persist must not send an older offset that the broker applies after
/// the commit (one CI run read 0 instead of a committed 1).
#[test]
fn a_written_through_commit_is_not_overtaken_by_the_periodic_persist() {
    let topic = cluster::topic("lp_race", 4);
    let group = cluster::unique("lp_race_g");
    // Its own client instance, so that the persist running every few milliseconds is this
    // consumer's alone.
    let options = cluster::options().instance_name(cluster::unique("lp_race_i"));
    let c = lite(&group)
        .client_options(options)
        .auto_commit(false)
        .persist_offset_interval(Duration::from_millis(2))
        .start()
        .unwrap();
    let queues = c.fetch_message_queues(&topic).unwrap();
    c.assign(&queues).unwrap();
    // The broker knows the group after its first heartbeat or pull.
    let zero: HashMap<MessageQueue, i64> = queues.iter().map(|q| (q.clone(), 0)).collect();
    wait_for("the group on the broker", Duration::from_secs(30), || {
        c.commit(&zero, true).is_ok()
    });
    let mut stale = Vec::new();
    for round in 1..=300i64 {
        let offsets: HashMap<MessageQueue, i64> =
            queues.iter().map(|q| (q.clone(), round)).collect();
        c.commit(&offsets, true).unwrap();
        for q in &queues {
            let got = c.committed(q).unwrap();
            if got != Some(round) {
                stale.push((round, q.queue_id(), got));
            }
        }
    }
    c.shutdown();
    assert!(
        stale.is_empty(),
        "{} stale reads (round, queue, read): {stale:?}",
        stale.len()
    );
}

#[test]
fn a_running_lite_pull_consumer_subscribes_and_unsubscribes() {
    let a = cluster::topic("lp_sub_a", 2);
    let b = cluster::topic("lp_sub_b", 2);
    let p = producer();
    let c = lite(&cluster::unique("lp_sub_g"))
        .subscribe(&a, "*")
        .start()
        .unwrap();
    for i in 0..6 {
        p.send(&Message::new(&b, format!("b{i}"))).unwrap();
    }
    c.subscribe(&b, "*").unwrap();
    assert_eq!(c.subscriptions(), {
        let mut v = vec![a.clone(), b.clone()];
        v.sort();
        v
    });
    let got = poll_until(&c, 6);
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|m| m.topic() == b));
    assert!(c.assignment().iter().any(|q| q.topic() == b));

    c.unsubscribe(&b).unwrap();
    assert!(
        c.assignment().iter().all(|q| q.topic() != b),
        "{:?}",
        c.assignment()
    );
    for i in 0..4 {
        p.send(&Message::new(&b, format!("later{i}"))).unwrap();
        p.send(&Message::new(&a, format!("a{i}"))).unwrap();
    }
    let got = poll_until(&c, 4);
    assert!(got.iter().all(|m| m.topic() == a), "{got:?}");
    assert_eq!(got.len(), 4);
    // The four of b that were sent after the unsubscribe never come.
    let more = c.poll_timeout(Duration::from_secs(2)).unwrap();
    assert!(more.iter().all(|m| m.topic() == a), "{more:?}");
    assert_eq!(
        c.unsubscribe(&b).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // An assigning consumer cannot subscribe.
    let d = lite(&cluster::unique("lp_sub_assign")).start().unwrap();
    d.assign(&d.fetch_message_queues(&a).unwrap()).unwrap();
    assert_eq!(d.subscribe(&b, "*").unwrap_err().kind(), ErrorKind::State);
    d.shutdown();
    c.shutdown();
    p.shutdown();
}

type Changes = Arc<Mutex<Vec<(String, Vec<MessageQueue>)>>>;

#[test]
fn queue_change_listener_follows_a_topic_grown_from_4_to_8_queues() {
    let topic = cluster::topic("lp_grow", 4);
    let changes: Changes = Default::default();
    let allocations: Changes = Default::default();
    let (ch, al) = (changes.clone(), allocations.clone());
    let c = lite(&cluster::unique("lp_grow_g"))
        .subscribe(&topic, "*")
        .topic_metadata_check_interval(Duration::from_millis(500))
        .topic_queue_change_listener(&topic, move |t: &str, qs: &[MessageQueue]| {
            ch.lock().push((t.to_string(), qs.to_vec()))
        })
        .message_queue_listener(
            move |t: &str, _all: &[MessageQueue], mine: &[MessageQueue]| {
                al.lock().push((t.to_string(), mine.to_vec()))
            },
        )
        .start()
        .unwrap();
    wait_for("the first 4 queues", Duration::from_secs(30), || {
        c.assignment().len() == 4
    });
    assert!(changes.lock().is_empty(), "fired before any change");

    admin().create_topic(&TopicConfig::new(&topic, 8)).unwrap();
    wait_for(
        "the listener to see 8 queues",
        Duration::from_secs(30),
        || changes.lock().iter().any(|(_, qs)| qs.len() == 8),
    );
    let (t, qs) = changes.lock().last().cloned().unwrap();
    assert_eq!(t, topic);
    assert_eq!(ids(&qs), (0..8).collect::<Vec<_>>());
    wait_for(
        "the consumer to take 8 queues",
        Duration::from_secs(30),
        || c.assignment().len() == 8,
    );
    wait_for("the allocation listener", Duration::from_secs(10), || {
        allocations
            .lock()
            .iter()
            .any(|(t, mine)| *t == topic && mine.len() == 8)
    });

    // Messages sent to the new queues are read.
    let p = producer();
    for q in &qs[4..] {
        p.send_to_queue(&Message::new(&topic, format!("q{}", q.queue_id())), q)
            .unwrap();
    }
    let got = poll_until(&c, 4);
    let from: BTreeSet<i32> = got.iter().map(|m| m.queue_id()).collect();
    assert_eq!(from, (4..8).collect::<BTreeSet<_>>());

    // Registered while running: the set now is the baseline, nothing fires for it.
    let again: Changes = Default::default();
    let ag = again.clone();
    c.register_topic_queue_change_listener(&topic, move |t: &str, qs: &[MessageQueue]| {
        ag.lock().push((t.to_string(), qs.to_vec()))
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(again.lock().is_empty(), "{:?}", again.lock());
    c.shutdown();
    p.shutdown();
}

#[test]
fn queue_change_push_message_queue_listener_sees_each_allocation() {
    let topic = cluster::topic("push_grow", 4);
    let group = cluster::unique("push_grow_g");
    let allocations: Changes = Default::default();
    let al = allocations.clone();
    // Its own client instance, refreshing routes every second.
    let options = ClientOptions::new()
        .namesrv_addr(cluster::namesrv())
        .instance_name(cluster::unique("push_grow_i"))
        .poll_name_server_interval(Duration::from_secs(1));
    let c: PushConsumer = consumer(&group, &topic)
        .client_options(options)
        .message_queue_listener(
            move |t: &str, all: &[MessageQueue], mine: &[MessageQueue]| {
                assert!(mine.iter().all(|q| all.contains(q)));
                al.lock().push((t.to_string(), mine.to_vec()))
            },
        )
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap();
    wait_for("the first allocation", Duration::from_secs(30), || {
        allocations
            .lock()
            .iter()
            .any(|(t, mine)| *t == topic && mine.len() == 4)
    });
    admin().create_topic(&TopicConfig::new(&topic, 8)).unwrap();
    wait_for(
        "the allocation of 8 queues",
        Duration::from_secs(60),
        || {
            allocations
                .lock()
                .iter()
                .any(|(t, mine)| *t == topic && mine.len() == 8)
        },
    );
    // The group's retry topic is reported too, as Java does. Its route exists only after
    // the broker has seen the group's first heartbeat, so its allocation may come after
    // the topic's (one rebalance round later).
    let retry = format!("%RETRY%{group}");
    wait_for(
        "the allocation of the retry topic",
        Duration::from_secs(60),
        || {
            allocations
                .lock()
                .iter()
                .any(|(t, mine)| *t == retry && !mine.is_empty())
        },
    );
    c.shutdown();
}

#[test]
fn admin_consumer_connections_and_topic_stats_match_the_admin_tool() {
    let topic = cluster::topic("adm_conn", 4);
    let group = cluster::unique("adm_conn_g");
    let c = consumer(&group, &topic)
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap();
    let a = admin();
    let mut conns = None;
    wait_for("the group online", Duration::from_secs(30), || {
        conns = a.consumer_connections(&group).ok();
        conns.is_some()
    });
    let conns = conns.unwrap();
    assert_eq!(conns.connections.len(), 1, "{conns:?}");
    assert_eq!(conns.connections[0].client_id, c.client_id());
    assert_eq!(conns.connections[0].language, "RUST");
    assert_eq!(
        conns.subscriptions.get(&topic).map(String::as_str),
        Some("*")
    );
    assert_eq!(conns.consume_type, "CONSUME_PASSIVELY");
    assert_eq!(conns.message_model, "CLUSTERING");
    let tool = mqadmin(&["consumerConnection", "-g", &group]);
    assert!(tool.contains(&c.client_id()), "{tool}");
    c.shutdown();

    let e = a
        .consumer_connections(&cluster::unique("adm_nobody"))
        .unwrap_err();
    assert!(
        e.response_code() == Some(ResponseCode::CONSUMER_NOT_ONLINE)
            || e.kind() == ErrorKind::Response,
        "{e}"
    );

    // Five messages in one async batch, then the topic's stats.
    let p: Producer = producer();
    let before = SystemTime::now() - Duration::from_secs(1);
    let batch: Vec<Message> = (0..5)
        .map(|i| Message::new(&topic, format!("b{i}")))
        .collect();
    let q = p.fetch_publish_message_queues(&topic).unwrap()[2].clone();
    let (tx, rx) = crossbeam_channel::bounded(1);
    p.send_batch_async_to_queue(&batch, &q, move |r| {
        let _ = tx.send(r);
    })
    .unwrap();
    let r = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
    assert_eq!(r.message_queue(), &q);
    // SEND_OK means the commit log holds the batch; the broker moves it into the consume
    // queue (whose offsets the stats report) on its own thread a moment later.
    let mut stats = None;
    wait_for(
        "the batch in the consume queue",
        Duration::from_secs(10),
        || {
            stats = a.topic_stats(&topic).ok().filter(|s| s.stored() == 5);
            stats.is_some()
        },
    );
    let stats = stats.unwrap();
    assert_eq!(stats.queues.len(), 4);
    assert_eq!(stats.stored(), 5);
    assert_eq!(stats.queues[&q].max_offset, 5);
    let tool = mqadmin(&["topicStatus", "-t", &topic]);
    let max_by_tool: Vec<i64> = tool
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if *f.first()? != q.broker_name() {
                return None;
            }
            f.get(3)?.parse().ok()
        })
        .collect();
    let max_by_us: Vec<i64> = stats.queues.values().map(|o| o.max_offset).collect();
    assert_eq!(max_by_tool, max_by_us, "{tool}");

    // The earliest store time: the batch's for its queue, none for an empty one.
    let t = a.earliest_msg_store_time(&q).unwrap().unwrap();
    assert!(t >= before && t <= SystemTime::now(), "{t:?}");
    let empty = stats.queues.keys().find(|k| **k != q).unwrap();
    assert_eq!(a.earliest_msg_store_time(empty).unwrap(), None);

    // An invalid batch is refused before anything is sent; its callback never runs.
    let mixed = [Message::new(&topic, "x"), Message::new("other_topic", "y")];
    let e = p
        .send_batch_async(&mixed, |_| panic!("called for a refused batch"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    p.shutdown();
}
