//! The producer against the real broker: what is sent is what is stored.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::message::{property, sys_flag, MessageExt};
use rocketmq_blocking::testkit::proxy::TcpProxy;
use rocketmq_blocking::Admin;
use rocketmq_blocking::SelectMessageQueueByHash;
use rocketmq_blocking::{ErrorKind, Message, Producer, SendStatus};

use crate::cluster;
use rocketmq_blocking::ClientOptions;

fn producer() -> Producer {
    Producer::builder(cluster::unique("pg"))
        .client_options(cluster::options())
        .start()
        .unwrap()
}

fn admin() -> Admin {
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap()
}

fn stored(offset_msg_id: &str) -> MessageExt {
    admin()
        .view_message(offset_msg_id)
        .unwrap_or_else(|e| panic!("view {offset_msg_id}: {e}"))
}

fn user_props(m: &MessageExt) -> HashMap<String, String> {
    m.message()
        .properties()
        .filter(|(k, _)| k.starts_with("user-"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_sent_message_is_stored_byte_exact() {
    let topic = cluster::topic("exact", 4);
    let p = producer();
    let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let mut msg = Message::new(&topic, body.clone())
        .with_tags("TagA")
        .with_keys(["k1", "k2"]);
    msg.put_user_property("user-a", "1").unwrap();
    msg.put_user_property("user-ü", "välue with spaces")
        .unwrap();
    msg.set_flag(7);
    let r = p.send(&msg).unwrap();
    assert_eq!(r.send_status(), SendStatus::Ok);
    assert_eq!(r.message_queue().topic(), topic);
    assert_eq!(r.msg_id().len(), 32, "UNIQ_KEY of an IPv4 client");
    // The broker answers with its `regionId`, by default the one Java reports.
    assert_eq!(r.region_id(), "DefaultRegion");
    assert!(r.trace_on());
    let m = stored(r.offset_msg_id());
    assert_eq!(m.topic(), topic);
    assert_eq!(m.body(), body.as_slice());
    assert_eq!(m.tags(), Some("TagA"));
    assert_eq!(m.keys().collect::<Vec<_>>(), vec!["k1", "k2"]);
    assert_eq!(m.flag(), 7);
    assert_eq!(m.msg_id(), r.msg_id(), "UNIQ_KEY stored as sent");
    assert_eq!(m.queue_id(), r.message_queue().queue_id());
    assert_eq!(m.queue_offset(), r.queue_offset());
    let props = user_props(&m);
    assert_eq!(props.get("user-a").map(String::as_str), Some("1"));
    assert_eq!(
        props.get("user-ü").map(String::as_str),
        Some("välue with spaces")
    );
}

/// The born timestamp is read once per send, when it begins, and serves its first attempt
/// (sync, async and batch): the stored time lies between the clock before and after.
#[test]
fn each_send_is_stored_with_the_time_it_was_sent() {
    let topic = cluster::topic("born", 2);
    let p = producer();
    let ms = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    };
    let within = |label: &str, before: u128, offset_msg_id: &str, after: u128| {
        let born = ms(stored(offset_msg_id).born_timestamp());
        assert!(
            before <= born && born <= after,
            "{label}: born at {born}, sent between {before} and {after}"
        );
    };
    // Apart in time, so that a stale clock read would show.
    for round in 0..2 {
        std::thread::sleep(Duration::from_millis(30));
        let before = ms(std::time::SystemTime::now());
        let r = p.send(&Message::new(&topic, "sync")).unwrap();
        within(
            &format!("sync {round}"),
            before,
            r.offset_msg_id(),
            ms(std::time::SystemTime::now()),
        );

        std::thread::sleep(Duration::from_millis(30));
        let before = ms(std::time::SystemTime::now());
        let r = p
            .send_async_future(Message::new(&topic, "async"))
            .unwrap()
            .wait()
            .unwrap();
        within(
            &format!("async {round}"),
            before,
            r.offset_msg_id(),
            ms(std::time::SystemTime::now()),
        );

        std::thread::sleep(Duration::from_millis(30));
        let before = ms(std::time::SystemTime::now());
        let batch = [Message::new(&topic, "b0"), Message::new(&topic, "b1")];
        let r = p.send_batch(&batch).unwrap();
        let after = ms(std::time::SystemTime::now());
        for off in r.offset_msg_id().split(',') {
            within(&format!("batch {round}"), before, off, after);
        }
    }
}

/// The first attempt begins with the send, but a route lookup that outlasts the send's
/// timeout ends it before anything is sent (Java `sendDefaultImpl` checks the time spent
/// before every attempt): sync and async, the caller gets a timeout and the broker stores
/// nothing.
#[test]
fn a_send_whose_route_lookup_outlasts_its_timeout_sends_nothing() {
    let topic = cluster::topic("slowroute", 1);
    let upstream = cluster::namesrv().parse().unwrap();
    // Each way of the route lookup waits 300 ms at the name server's door.
    let mut namesrv = TcpProxy::start("127.0.0.1:0".parse().unwrap(), upstream).unwrap();
    namesrv.set_delay(Duration::from_millis(300));
    let warm = cluster::topic("slowroute_warm", 1);
    let slow = |group: &str| {
        let p = Producer::builder(cluster::unique(group))
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(namesrv.listen_addr().to_string())
                    .api_timeout(Duration::from_secs(5)),
            )
            .send_timeout(Duration::from_millis(250))
            .start()
            .unwrap();
        // Connected to the broker already: a frame would leave at once.
        p.send_timeout(&Message::new(&warm, "warm"), Duration::from_secs(10))
            .unwrap();
        p
    };
    let p = slow("slowroute_sync");
    let e = p.send(&Message::new(&topic, "sync")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    p.shutdown();
    let p = slow("slowroute_async");
    let e = match p.send_async_future(Message::new(&topic, "async")) {
        Err(refused) => refused.into_parts().0,
        Ok(future) => future.wait().unwrap_err(),
    };
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    p.shutdown();
    namesrv.shutdown();
    // Nothing reached the broker, a second after the sends.
    std::thread::sleep(Duration::from_secs(1));
    let mq = producer()
        .fetch_publish_message_queues(&topic)
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(
        admin().max_offset(&mq).unwrap(),
        0,
        "messages stored in {mq}"
    );
}

#[test]
fn a_large_body_is_stored_compressed_and_reads_back_identical() {
    let topic = cluster::topic("compressed", 2);
    let p = producer();
    let body: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    let r = p.send(&Message::new(&topic, body.clone())).unwrap();
    let m = stored(r.offset_msg_id());
    assert_ne!(m.sys_flag() & sys_flag::COMPRESSED, 0, "stored compressed");
    assert!(
        m.store_size() < 20 * 1024,
        "stored {} bytes for a 100 KiB body",
        m.store_size()
    );
    assert_eq!(m.body(), body.as_slice(), "decompressed on read");
}

#[test]
fn a_batch_is_stored_as_separate_messages() {
    let topic = cluster::topic("batch", 2);
    let p = producer();
    let msgs: Vec<Message> = (0..3)
        .map(|i| Message::new(&topic, format!("batch body {i}")).with_keys([format!("bk{i}")]))
        .collect();
    let r = p.send_batch(&msgs).unwrap();
    let ids: Vec<&str> = r.msg_id().split(',').collect();
    let offsets: Vec<&str> = r.offset_msg_id().split(',').collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(offsets.len(), 3);
    for (i, off) in offsets.iter().enumerate() {
        let m = stored(off);
        assert_eq!(m.body(), format!("batch body {i}").as_bytes());
        assert_eq!(m.keys().collect::<Vec<_>>(), vec![format!("bk{i}")]);
        assert_eq!(m.msg_id(), ids[i]);
        assert_eq!(m.queue_offset(), r.queue_offset() + i as i64);
    }
}

#[test]
fn ten_thousand_async_sends_each_call_back_exactly_once() {
    let topic = cluster::topic("async10k", 8);
    // Unbounded, 10,000 sends overrun a broker sharing two cores (it answers SYSTEM_BUSY,
    // which async sends do not retry, as in Java); the in-flight bound is the back-pressure.
    let p = Producer::builder(cluster::unique("pg"))
        .client_options(cluster::options().async_permits(256))
        .start()
        .unwrap();
    let n = 10_000;
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = crossbeam_channel::unbounded();
    for i in 0..n {
        let calls = calls.clone();
        let tx = tx.clone();
        p.send_async(Message::new(&topic, format!("m{i}")), move |r| {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(r.map(|r| r.msg_id().to_string()));
        })
        .unwrap();
    }
    let mut ids = std::collections::HashSet::new();
    for _ in 0..n {
        let id = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
        assert!(ids.insert(id));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(calls.load(Ordering::SeqCst), n);
    // The consume queues hold what was acknowledged once the broker has dispatched it.
    let admin = admin();
    let mut total = 0;
    crate::consumer::wait_for(
        "every message in its queue",
        Duration::from_secs(10),
        || {
            total = admin.total_max_offset(&topic).unwrap();
            total >= n as i64
        },
    );
    assert_eq!(total, n as i64);
}

#[test]
fn async_future_resolves_to_the_send_result() {
    let topic = cluster::topic("future", 1);
    let p = producer();
    let f = p.send_async_future(Message::new(&topic, "f")).unwrap();
    let r = f.wait().unwrap();
    assert_eq!(stored(r.offset_msg_id()).body(), b"f");
}

#[test]
fn oneway_messages_arrive() {
    let topic = cluster::topic("oneway", 4);
    let p = producer();
    for i in 0..200 {
        p.send_oneway(&Message::new(&topic, format!("o{i}")))
            .unwrap();
    }
    let admin = admin();
    let mut total = 0;
    for _ in 0..100 {
        total = admin.total_max_offset(&topic).unwrap();
        if total == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(total, 200);
}

#[test]
fn ordered_sends_with_a_selector_land_on_the_selected_queue_in_order() {
    let topic = cluster::topic("ordered", 8);
    let p = producer();
    let mut last = None;
    let mut queue = None;
    for i in 0..50 {
        let r = p
            .send_with_selector(
                &Message::new(&topic, format!("step {i}")),
                &SelectMessageQueueByHash,
                "order-1",
            )
            .unwrap();
        // Java: abs("order-1".hashCode() % 8) = 6.
        assert_eq!(r.message_queue().queue_id(), 6);
        queue.get_or_insert(r.message_queue().queue_id());
        if let Some(prev) = last {
            assert_eq!(r.queue_offset(), prev + 1, "consecutive on the queue");
        }
        last = Some(r.queue_offset());
    }
}

#[test]
fn send_to_a_chosen_queue() {
    let topic = cluster::topic("toqueue", 4);
    let p = producer();
    let mqs = p.fetch_publish_message_queues(&topic).unwrap();
    assert_eq!(mqs.len(), 4);
    let r = p
        .send_to_queue(&Message::new(&topic, "q3"), &mqs[3])
        .unwrap();
    assert_eq!(r.message_queue(), &mqs[3]);
}

#[test]
fn every_send_overload_puts_its_messages_where_asked() {
    let topic = cluster::topic("overloads", 4);
    let p = producer();
    let mqs = p.fetch_publish_message_queues(&topic).unwrap();
    assert_eq!(mqs.len(), 4);
    let mut expected = [0i64; 4];
    let batch = |n: usize, tag: &str| -> Vec<Message> {
        (0..n)
            .map(|i| Message::new(&topic, format!("{tag} {i}")))
            .collect()
    };

    let r = p.send_batch_to_queue(&batch(4, "b"), &mqs[0]).unwrap();
    assert_eq!(r.message_queue(), &mqs[0]);
    expected[0] += 4;

    let r = p
        .send_batch_timeout(&batch(2, "bt"), Duration::from_secs(10))
        .unwrap();
    expected[r.message_queue().queue_id() as usize] += 2;

    // Async: to a queue, and to the queue the selector picks ("order-1": Java
    // abs(hashCode % 4) = 2); every callback reports the queue it was sent to.
    let (tx, rx) = crossbeam_channel::unbounded();
    for i in 0..5 {
        let tx = tx.clone();
        p.send_async_to_queue(Message::new(&topic, format!("a{i}")), &mqs[1], move |r| {
            let _ = tx.send((1, r.map(|r| r.message_queue().queue_id())));
        })
        .unwrap();
    }
    for i in 0..3 {
        let tx = tx.clone();
        p.send_async_with_selector(
            Message::new(&topic, format!("s{i}")),
            &SelectMessageQueueByHash,
            "order-1",
            move |r| {
                let _ = tx.send((2, r.map(|r| r.message_queue().queue_id())));
            },
        )
        .unwrap();
    }
    for _ in 0..8 {
        let (want, got) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(got.unwrap(), want);
        expected[want as usize] += 1;
    }

    for i in 0..3 {
        p.send_oneway_with_selector(
            &Message::new(&topic, format!("os{i}")),
            &SelectMessageQueueByHash,
            "order-1",
        )
        .unwrap();
    }
    expected[2] += 3;
    for i in 0..7 {
        p.send_oneway_to_queue(&Message::new(&topic, format!("oq{i}")), &mqs[3])
            .unwrap();
    }
    expected[3] += 7;

    // Oneway sends are acknowledged by nobody: wait for the broker to have stored them.
    let admin = admin();
    let addrs = admin.master_addrs().unwrap();
    let mut stored = [0i64; 4];
    for _ in 0..200 {
        for mq in &mqs {
            let addr = &addrs[mq.broker_name()];
            stored[mq.queue_id() as usize] = admin.max_offset_on(addr, mq).unwrap();
        }
        if stored == expected {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(stored, expected, "messages per queue");
}

#[test]
fn a_queue_of_another_topic_is_refused_by_every_overload() {
    let topic = cluster::topic("otherq", 2);
    let other = cluster::topic("otherq", 2);
    let p = producer();
    let mq = p.fetch_publish_message_queues(&other).unwrap().remove(0);
    let msg = Message::new(&topic, "x");
    let kinds = [
        p.send_to_queue(&msg, &mq).unwrap_err().kind(),
        p.send_oneway_to_queue(&msg, &mq).unwrap_err().kind(),
        p.send_batch_to_queue(std::slice::from_ref(&msg), &mq)
            .unwrap_err()
            .kind(),
        p.send_async_to_queue(msg.clone(), &mq, |_| panic!("must not run"))
            .unwrap_err()
            .error()
            .kind(),
    ];
    assert!(
        kinds.iter().all(|k| *k == ErrorKind::InvalidArgument),
        "{kinds:?}"
    );
    let admin = admin();
    assert_eq!(admin.total_max_offset(&topic).unwrap(), 0);
    assert_eq!(admin.total_max_offset(&other).unwrap(), 0);
}

#[test]
fn a_new_topic_is_auto_created_through_tbw102() {
    let topic = cluster::unique("autocreated");
    let p = producer();
    let r = p.send(&Message::new(&topic, "first")).unwrap();
    assert_eq!(r.send_status(), SendStatus::Ok);
    assert!(r.message_queue().queue_id() < 4, "default topic queue nums");
    assert_eq!(stored(r.offset_msg_id()).body(), b"first");
}

#[test]
fn heartbeats_register_the_producer_group_at_the_broker() {
    let p = producer();
    let group = p.group().to_string();
    let admin = admin();
    let mut found = None;
    for _ in 0..100 {
        let conns = admin.producer_connections(&group).unwrap_or_default();
        if let Some(c) = conns.into_iter().find(|c| c.client_id == p.client_id()) {
            found = Some(c);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = found.expect("the broker lists our producer");
    assert_eq!(c.language, "RUST");
    assert_eq!(c.version, 409);
}

#[test]
fn bad_input_is_a_typed_error_before_anything_is_sent() {
    let p = producer();
    let e = p.send(&Message::new("bad topic", "x")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = p
        .send(&Message::new("SCHEDULE_TOPIC_XXXX", "x"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = p.send(&Message::new("T", Vec::new())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let big = vec![b'x'; 4 * 1024 * 1024 + 1];
    let e = p.send(&Message::new("T", big)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("4194305"), "{e}");
    let mut m = Message::new("T", "x");
    assert!(m.put_user_property(property::UNIQ_KEY, "x").is_err());
    let e = Producer::builder("bad/group")
        .client_options(cluster::options())
        .start()
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn a_group_registered_twice_in_one_instance_is_refused() {
    let group = cluster::unique("dup");
    let a = Producer::builder(&group)
        .client_options(cluster::options().instance_name("dup-instance"))
        .start()
        .unwrap();
    let e = Producer::builder(&group)
        .client_options(cluster::options().instance_name("dup-instance"))
        .start()
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::State, "{e}");
    drop(a);
}

#[test]
fn an_unreachable_name_server_is_a_connect_error() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let p = Producer::builder(cluster::unique("deadns"))
        .client_options(ClientOptions::new().namesrv_addr(&dead))
        .start()
        .unwrap();
    let e = p.send(&Message::new("T", "x")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
    assert!(e.to_string().contains(&dead), "{e}");
}

/// Counts the GET_ROUTEINFO_BY_TOPIC requests of a client instance.
#[derive(Default)]
struct RouteRequests(AtomicUsize);

impl rocketmq_blocking::remoting::RpcHook for RouteRequests {
    fn before_request(&self, _: &str, request: &mut rocketmq_blocking::protocol::RemotingCommand) {
        if request.request_code()
            == rocketmq_blocking::protocol::RequestCode::GET_ROUTEINFO_BY_TOPIC
        {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A route round over more topics than one batch of requests (256) asks for each route
/// once and stores each answer under its own topic: every topic's queues change, each to
/// its own count, and rounds bring the instance every new route (a route stored under
/// another topic would be stored there again each round).
#[test]
fn a_route_round_over_many_topics_stores_each_changed_route_under_its_topic() {
    use rocketmq_blocking::TopicConfig;
    const TOPICS: usize = 300;
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    let queues = |i: usize, round: usize| (1 + (i + round) % 4) as u32;
    let topics: Vec<String> = (0..TOPICS).map(|_| cluster::unique("routeround")).collect();
    for (i, t) in topics.iter().enumerate() {
        admin
            .create_topic(&TopicConfig::new(t, queues(i, 0)))
            .unwrap();
    }
    let name = cluster::unique("route-round");
    let instance = cluster::instance(&name);
    let p = Producer::builder(cluster::unique("pg_route_round"))
        .client_options(
            cluster::options()
                .instance_name(&name)
                .poll_name_server_interval(Duration::from_secs(3600)),
        )
        // Only the rounds this test runs.
        .start()
        .unwrap();
    for t in &topics {
        p.send(&Message::new(t, &b"x"[..])).unwrap();
    }
    // Every topic gets another queue count; the name server learns it when the broker
    // registers (at once, or with its next periodic registration under load).
    for (i, t) in topics.iter().enumerate() {
        admin
            .create_topic(&TopicConfig::new(t, queues(i, 1)))
            .unwrap();
    }
    let write_queues = |route: &rocketmq_blocking::protocol::TopicRouteData| {
        route
            .queue_datas
            .iter()
            .map(|q| q.write_queue_nums)
            .sum::<u32>()
    };
    // Against what the name server answers now (a broker registration lost under load
    // leaves a topic at its old count there for a while): each topic its own count.
    let wrong = || -> Vec<(&String, Option<u32>, Option<u32>)> {
        topics
            .iter()
            .filter_map(|t| {
                let held = instance.topic_route(t).map(|r| write_queues(&r));
                let served = admin.topic_route(t).ok().map(|r| write_queues(&r));
                (held != served).then_some((t, held, served))
            })
            .collect()
    };
    // Rounds until the instance holds every new route: a route stored under another
    // topic would be stored there again every round, so it never would.
    let counter = Arc::new(RouteRequests::default());
    instance.remoting().register_rpc_hook(counter.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut requests = Vec::new();
    loop {
        let before = counter.0.load(Ordering::Relaxed);
        instance.update_topic_route_info_from_name_server();
        requests.push(counter.0.load(Ordering::Relaxed) - before);
        if wrong().is_empty() || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let wrong = wrong();
    p.shutdown();
    drop(instance);
    // The producer's topics and the default topic it starts with (TBW102).
    assert!(
        requests.iter().all(|n| (TOPICS..=TOPICS + 1).contains(n)),
        "route requests per round for {TOPICS} topics: {requests:?}"
    );
    assert!(
        wrong.is_empty(),
        "{} routes not updated: {wrong:?}",
        wrong.len()
    );
}
