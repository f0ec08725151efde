//! Unit tests of the client instance (fake name servers and brokers on loopback).

/// The admin requests of [`ConsumerInner`], for test consumers that never get them.
macro_rules! no_admin_answers {
    () => {
        fn running_info(&self) -> ConsumerRunningInfo {
            ConsumerRunningInfo::default()
        }
        fn offsets_of(&self, _: &str) -> BTreeMap<MessageQueue, i64> {
            BTreeMap::new()
        }
        fn reset_offset(&self, _: &str, _: &HashMap<MessageQueue, i64>) {}
        fn consume_message_directly(
            &self,
            _: MessageExt,
            _: &str,
        ) -> Option<ConsumeMessageDirectlyResult> {
            None
        }
    };
}

use super::*;
use crate::message::property;
use crate::protocol::heartbeat::{ConsumeFromWhere, ConsumeType, MessageModel};
use crate::protocol::{frame_len, RemotingCommand, DEFAULT_MAX_FRAME};
use crate::protocol::{BrokerData, QueueData};
use crate::protocol::{RequestCode, ResponseCode};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Instant;

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        crate::util::random_u64()
    )
}

/// A name server on loopback that answers every request on one connection with
/// SUCCESS and `body`.
fn fake_namesrv(body: Vec<u8>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            while let Ok(Some(n)) = frame_len(&buf, DEFAULT_MAX_FRAME) {
                if buf.len() < 4 + n {
                    break;
                }
                let frame: Vec<u8> = buf.drain(..4 + n).collect();
                let Ok(req) = RemotingCommand::decode(&frame[4..]) else {
                    return;
                };
                let ok = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None)
                    .with_body(body.clone());
                if s.write_all(&ok.to_frame()).is_err() {
                    return;
                }
            }
        }
    });
    addr
}

/// A producer and consumer that record every call made into them while one of the
/// instance's locks is held.
#[derive(Default)]
struct Probe {
    instance: OnceLock<Weak<MQClientInstance>>,
    published: AtomicUsize,
    held: Mutex<Vec<String>>,
}

impl Probe {
    fn check(&self, call: &str) {
        let Some(i) = self.instance.get().and_then(Weak::upgrade) else {
            return;
        };
        let mut held = Vec::new();
        if i.namesrv_lock.try_lock().is_none() {
            held.push("namesrv_lock");
        }
        if i.heartbeat_lock.try_lock().is_none() {
            held.push("heartbeat_lock");
        }
        if i.producers.try_write().is_none() {
            held.push("producers");
        }
        if i.consumers.try_write().is_none() {
            held.push("consumers");
        }
        if i.route_table.try_write().is_none() {
            held.push("route_table");
        }
        if i.broker_addr_table.try_write().is_none() {
            held.push("broker_addr_table");
        }
        if !held.is_empty() {
            self.held.lock().push(format!("{call} under {held:?}"));
        }
    }
}

impl ProducerInner for Probe {
    fn publish_topics(&self) -> Vec<String> {
        self.check("publish_topics");
        vec!["T".to_string()]
    }
    fn is_publish_topic_need_update(&self, _: &str) -> bool {
        self.check("is_publish_topic_need_update");
        false
    }
    fn update_topic_publish_info(&self, _: &str, _: Arc<TopicPublishInfo>) {
        self.check("update_topic_publish_info");
        self.published.fetch_add(1, Ordering::SeqCst);
    }
}

impl ConsumerInner for Probe {
    no_admin_answers!();
    fn consumer_data(&self) -> ConsumerData {
        self.check("consumer_data");
        ConsumerData {
            group_name: "cg".into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            subscription_data_set: Vec::new(),
            unit_mode: false,
        }
    }
    fn update_topic_subscribe_info(&self, _: &str, _: &HashSet<MessageQueue>) -> bool {
        self.check("update_topic_subscribe_info");
        false
    }
    fn is_subscribe_topic_need_update(&self, _: &str) -> bool {
        self.check("is_subscribe_topic_need_update");
        false
    }
    fn persist_consumer_offset(&self) {
        self.check("persist_consumer_offset");
    }
    fn adjust_thread_pool(&self) {
        self.check("adjust_thread_pool");
    }
    fn do_rebalance(&self) {
        self.check("do_rebalance");
    }
}

/// A producer that records the transaction checks handed to it.
#[derive(Default)]
struct CheckRecorder(Mutex<Vec<(String, MessageExt, CheckTransactionStateRequestHeader)>>);

impl ProducerInner for CheckRecorder {
    fn publish_topics(&self) -> Vec<String> {
        Vec::new()
    }
    fn is_publish_topic_need_update(&self, _: &str) -> bool {
        false
    }
    fn update_topic_publish_info(&self, _: &str, _: Arc<TopicPublishInfo>) {}
    fn check_transaction_state(
        &self,
        addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        self.0.lock().push((addr.to_string(), msg, header));
    }
}

#[test]
fn a_transaction_check_goes_to_the_producer_of_its_group_and_garbage_is_dropped() {
    let config = crate::client::ClientOptions::new()
        .namesrv_addr("127.0.0.1:1")
        .namespace("ns")
        .instance_name(unique("tx-check"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    let (a, b) = (
        Arc::new(CheckRecorder::default()),
        Arc::new(CheckRecorder::default()),
    );
    assert!(instance.register_producer("ns%pg_a", a.clone()));
    assert!(instance.register_producer("ns%pg_b", b.clone()));
    let half = |group: &str| {
        let mut m = MessageExt::default();
        m.message.set_topic("ns%Orders");
        m.message.set_body("half");
        m.message.put_property(property::PGROUP, group);
        m.message.put_property(property::UNIQ_KEY, "ID-1");
        m.message.put_property(property::TRAN_MSG, "true");
        crate::message::encode_message_ext(&m).unwrap()
    };
    let check = |body: Vec<u8>, with_offsets: bool| {
        let mut req = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE);
        req.ext_fields.insert("commitLogOffset", "4096");
        if with_offsets {
            req.ext_fields.insert("tranStateTableOffset", "7");
        }
        req.ext_fields.insert("transactionId", "ID-1");
        req.body = body;
        req
    };
    instance.process_check_transaction_state("127.0.0.1:10911", check(half("ns%pg_a"), true));
    // Dropped: a body that is no message, a header without its offsets, a group
    // that has no producer here, no group at all.
    instance.process_check_transaction_state("b", check(b"\x00\x00garbage".to_vec(), true));
    instance.process_check_transaction_state("b", check(half("ns%pg_a"), false));
    instance.process_check_transaction_state("b", check(half("ns%pg_other"), true));
    let mut no_group = MessageExt::default();
    no_group.message.set_topic("T");
    let no_group = crate::message::encode_message_ext(&no_group).unwrap();
    instance.process_check_transaction_state("b", check(no_group, true));

    let got = a.0.lock().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let (addr, msg, header) = &got[0];
    assert_eq!(addr, "127.0.0.1:10911");
    // The user sees the topic without the namespace, and the id as transaction id.
    assert_eq!(msg.topic(), "Orders");
    assert_eq!(msg.message().transaction_id(), Some("ID-1"));
    assert_eq!(msg.body(), b"half");
    assert_eq!(
        (header.commit_log_offset, header.tran_state_table_offset),
        (4096, 7)
    );
    assert!(b.0.lock().is_empty());
    instance.producers.write().clear();
    instance.shutdown();
}

#[test]
fn no_lock_is_held_while_calling_into_producers_and_consumers() {
    let route = TopicRouteData {
        queue_datas: vec![QueueData {
            broker_name: "b".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: crate::protocol::Perm::READ_WRITE,
            ..Default::default()
        }],
        broker_datas: vec![BrokerData {
            cluster: "c".into(),
            broker_name: "b".into(),
            // Nothing listens there: heartbeats fail at once.
            broker_addrs: [(0, "127.0.0.1:1".to_string())].into_iter().collect(),
        }],
        ..Default::default()
    };
    let namesrv =
        fake_namesrv(serde_json::to_vec(&crate::protocol::route_to_json(&route)).unwrap());
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(namesrv)
        .instance_name(unique("locks"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    let probe = Arc::new(Probe::default());
    let _ = probe.instance.set(Arc::downgrade(&instance));
    assert!(instance.register_producer("pg", probe.clone()));
    assert!(instance.register_consumer("cg", probe.clone()));

    assert!(instance.update_topic_route("T").unwrap(), "a new route");
    assert_eq!(probe.published.load(Ordering::SeqCst), 1);
    instance.update_topic_route_info_from_name_server();
    instance.send_heartbeat_to_all_brokers_waiting();
    instance.send_heartbeat_to_all_brokers_with_lock();
    instance.persist_all_consumer_offsets();
    instance.adjust_thread_pool();
    instance.do_rebalance();
    let held = probe.held.lock().clone();
    assert!(held.is_empty(), "{held:?}");
    instance.producers.write().clear();
    instance.consumers.write().clear();
    instance.shutdown();
}

/// A pull task that runs `f`.
struct Task<F>(F);

impl<F: FnOnce() + Send> PullTask for Task<F> {
    fn pull(self: Box<Self>) {
        (self.0)()
    }
}

#[test]
fn the_pull_and_rebalance_services_survive_a_panicking_job() {
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(fake_namesrv(b"{}".to_vec()))
        .instance_name(unique("panics"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    instance.start().unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    instance.execute_pull_request_immediately(Task(|| panic!("a pull task that panics")));
    let t = tx.clone();
    instance.execute_pull_request_immediately(Task(move || t.send("pulled").unwrap()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("pulled"));

    /// A consumer whose rebalance panics, or reports on `tx`.
    struct Rebalancing(Option<crossbeam_channel::Sender<&'static str>>);
    impl ConsumerInner for Rebalancing {
        fn consumer_data(&self) -> ConsumerData {
            unreachable!("no heartbeat in this test")
        }
        fn update_topic_subscribe_info(&self, _: &str, _: &HashSet<MessageQueue>) -> bool {
            false
        }
        fn is_subscribe_topic_need_update(&self, _: &str) -> bool {
            false
        }
        fn persist_consumer_offset(&self) {}
        fn adjust_thread_pool(&self) {}
        no_admin_answers!();
        fn do_rebalance(&self) {
            match &self.0 {
                Some(tx) => tx.send("rebalanced").unwrap(),
                None => panic!("a rebalance that panics"),
            }
        }
    }
    assert!(instance.register_consumer("a", Arc::new(Rebalancing(None))));
    assert!(instance.register_consumer("b", Arc::new(Rebalancing(Some(tx)))));
    for _ in 0..2 {
        // Each round reaches "b", whatever the order: the thread lives on.
        instance.rebalance_immediately();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("rebalanced"));
    }
    instance.consumers.write().clear();
    instance.shutdown();
}

/// A route of one queue on broker "b" at `addrs` (broker id, address).
#[cfg(feature = "testkit")]
fn route_of_b(addrs: &[(u64, &str)]) -> TopicRouteData {
    TopicRouteData {
        queue_datas: vec![QueueData {
            broker_name: "b".into(),
            read_queue_nums: 1,
            write_queue_nums: 1,
            perm: crate::protocol::Perm::READ_WRITE,
            ..Default::default()
        }],
        broker_datas: vec![BrokerData {
            cluster: "c".into(),
            broker_name: "b".into(),
            broker_addrs: addrs.iter().map(|(i, a)| (*i, a.to_string())).collect(),
        }],
        ..Default::default()
    }
}

#[cfg(feature = "testkit")]
#[test]
fn a_requested_heartbeat_goes_out_on_the_timer_not_on_the_calling_thread() {
    use crate::testkit::fault_peer::{Fault, FaultPeer};
    // A broker that takes 1.5 s to answer anything.
    let broker = FaultPeer::start(Fault::SlowAnswer(Duration::from_millis(1500))).unwrap();
    let route = route_of_b(&[(0, broker.addr())]);
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(fake_namesrv(
            serde_json::to_vec(&crate::protocol::route_to_json(&route)).unwrap(),
        ))
        .instance_name(unique("hb_request"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    instance.start().unwrap();
    let probe = Arc::new(Probe::default());
    assert!(instance.register_producer("pg", probe.clone()));
    assert!(instance.update_topic_route("T").unwrap());
    let asked = std::time::Instant::now();
    for _ in 0..100 {
        instance.request_heartbeat();
    }
    // A callback thread asking for a heartbeat is not held for the broker's 1.5 s.
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "{:?}",
        asked.elapsed()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while broker.accepted() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        broker.accepted(),
        1,
        "the heartbeat went out, on one connection"
    );
    instance.producers.write().clear();
    instance.shutdown();
}

#[cfg(feature = "testkit")]
#[test]
fn a_requested_route_is_fetched_on_the_timer_and_its_jobs_run_after_it() {
    use crate::protocol::RequestCode;
    use crate::testkit::fault_peer::{Fault, FaultPeer, Responder};
    // A name server that holds each route request until released (or 20 s).
    let route = serde_json::to_vec(&crate::protocol::route_to_json(&route_of_b(&[(
        0,
        "127.0.0.1:1",
    )])))
    .unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let (release, held) = crossbeam_channel::bounded::<()>(0);
    let counter = asked.clone();
    let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
        if req.request_code() == RequestCode::GET_ROUTEINFO_BY_TOPIC
            && req.ext_fields.get("topic") == Some("T")
        {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = held.recv_timeout(Duration::from_secs(20));
        }
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None).with_body(route.clone())
    })))
    .unwrap();
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(namesrv.addr())
        .instance_name(unique("route_request"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    instance.start().unwrap();
    // A producer of "T" keeps the route in use (routes nobody uses are forgotten).
    assert!(instance.register_producer("pg", Arc::new(Probe::default())));
    let (ran_tx, ran) = crossbeam_channel::unbounded();
    let asking = std::time::Instant::now();
    for _ in 0..100 {
        let (tx, i) = (ran_tx.clone(), instance.clone());
        instance.request_route(
            "T",
            Some(Box::new(move || {
                let thread = std::thread::current().name().unwrap_or("").to_string();
                let _ = tx.send((thread, i.topic_route("T").is_some()));
            })),
        );
    }
    // The caller (a callback or the pull thread) is not held by the name server.
    let took = asking.elapsed();
    assert!(took < Duration::from_millis(500), "{took:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while asked.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ran.try_recv().is_err(), "a job ran before the route came");
    drop(release);
    for _ in 0..100 {
        let (thread, routed) = ran.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(thread.starts_with("rmq-callback"), "ran on {thread}");
        assert!(routed, "a job ran before the route was stored");
    }
    // One fetch took the requests made before it; one more at most the rest (and the
    // periodic refresh, which may have come due meanwhile, one).
    let fetches = asked.load(Ordering::SeqCst);
    assert!((1..=3).contains(&fetches), "{fetches} route requests");
    instance.producers.write().clear();
    instance.shutdown();
}

#[cfg(feature = "testkit")]
#[test]
fn a_new_address_for_a_known_broker_gets_a_heartbeat_at_once() {
    use crate::testkit::fault_peer::{Fault, FaultPeer, Responder};
    let ok = || {
        Fault::Respond(Responder::new(|_| {
            RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
        }))
    };
    let (master, slave) = (
        FaultPeer::start(ok()).unwrap(),
        FaultPeer::start(ok()).unwrap(),
    );
    let route_with = |addrs: &[(u64, &str)]| {
        serde_json::to_vec(&crate::protocol::route_to_json(&route_of_b(addrs))).unwrap()
    };
    // The name server answers with whatever route `current` holds.
    let current = Arc::new(Mutex::new(route_with(&[(1, slave.addr())])));
    let answer = current.clone();
    let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |_| {
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None).with_body(answer.lock().clone())
    })))
    .unwrap();
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(namesrv.addr())
        .instance_name(unique("new_addr"))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    instance.start().unwrap();
    let probe = Arc::new(Probe::default());
    assert!(instance.register_consumer("cg", probe.clone()));
    // A producer of "T" keeps the route in use (routes nobody uses are forgotten).
    assert!(instance.register_producer("pg", probe.clone()));
    assert!(instance.update_topic_route("T").unwrap());
    // The periodic heartbeat's first round (1 s after start) reaches the slave; the next
    // is 30 s away.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while slave.accepted() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(slave.accepted(), 1, "the first periodic heartbeat");
    // The master comes back (or a slave is promoted): its address is new for "b".
    *current.lock() = route_with(&[(0, master.addr()), (1, slave.addr())]);
    assert!(instance.update_topic_route("T").unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while master.accepted() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Without it the heartbeat waits for the 30 s period, and the broker refuses the
    // group's pulls (SUBSCRIPTION_NOT_EXIST) until then.
    assert_eq!(master.accepted(), 1, "a heartbeat went to the new address");
    instance.consumers.write().clear();
    instance.producers.write().clear();
    instance.shutdown();
}

#[test]
fn start_fetches_name_server_addresses_without_holding_the_state_lock() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/rocketmq/nsaddr", l.local_addr().unwrap());
    let (asked_tx, asked) = crossbeam_channel::bounded(1);
    let (answer, answer_rx) = crossbeam_channel::bounded::<()>(1);
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        asked_tx.send(()).unwrap();
        // Answers only when the test has looked at the lock.
        let _ = answer_rx.recv_timeout(Duration::from_secs(10));
        let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n127.0.0.1:19876\n");
    });
    let config = crate::client::ClientOptions::new()
        .no_namesrv_addr()
        .name_server_address_url(url)
        .instance_name(unique("http"))
        .api_timeout(Duration::from_secs(10))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    let starting = instance.clone();
    let starter = std::thread::spawn(move || starting.start());
    asked.recv_timeout(Duration::from_secs(5)).unwrap();
    // The fetch waits for the answer now; the state must be free to read.
    let free = instance
        .state
        .try_lock_for(Duration::from_millis(500))
        .map(|s| *s);
    answer.send(()).unwrap();
    assert_eq!(
        free,
        Some(ServiceState::CreateJust),
        "start holds the state lock across the HTTP fetch"
    );
    starter.join().unwrap().unwrap();
    server.join().unwrap();
    assert_eq!(instance.state(), ServiceState::Running);
    assert_eq!(
        instance.remoting().name_server_address_list(),
        vec!["127.0.0.1:19876".to_string()]
    );
    instance.shutdown();
    assert_eq!(instance.state(), ServiceState::ShutdownAlready);
}

#[cfg(feature = "testkit")]
/// A client instance with producer `pg` whose route of `T` leads to `broker`.
fn instance_routed_to(broker: &str, name: &str) -> (Arc<MQClientInstance>, Arc<Probe>) {
    let route = route_of_b(&[(0, broker)]);
    let config = crate::client::ClientOptions::new()
        .namesrv_addr(fake_namesrv(
            serde_json::to_vec(&crate::protocol::route_to_json(&route)).unwrap(),
        ))
        .instance_name(unique(name))
        .into_config();
    let instance = MQClientInstance::new(config).unwrap();
    instance.start().unwrap();
    let probe = Arc::new(Probe::default());
    assert!(instance.register_producer("pg", probe.clone()));
    assert!(instance.update_topic_route("T").unwrap());
    (instance, probe)
}

#[cfg(feature = "testkit")]
#[test]
fn a_new_connection_to_a_broker_gets_a_heartbeat_at_once() {
    use crate::protocol::RequestCode;
    use crate::testkit::fault_peer::{Fault, FaultPeer, Responder};
    let heartbeats = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = heartbeats.clone();
    let broker = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
        if req.request_code() == RequestCode::HEART_BEAT {
            h.fetch_add(1, Ordering::SeqCst);
        }
        RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
    })))
    .unwrap();
    let (instance, _probe) = instance_routed_to(broker.addr(), "hb_connect");
    let count = || heartbeats.load(Ordering::SeqCst);
    let wait_for_more_than = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while count() <= n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        count() > n
    };
    // The first periodic heartbeat (1 s after start) opens the connection.
    assert!(wait_for_more_than(0));
    std::thread::sleep(Duration::from_secs(2));
    let before = count();
    // The connection is lost and made again by the next request: a broker forgets a
    // client whose connection closed, so the new one needs a heartbeat now, not at
    // the next periodic one (30 s away).
    instance.remoting().close_connection(broker.addr(), "test");
    let _ = instance.remoting().invoke_sync(
        broker.addr(),
        RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
        Duration::from_secs(3),
    );
    assert!(
        wait_for_more_than(before),
        "no heartbeat on the new connection"
    );
    instance.producers.write().clear();
    instance.shutdown();
}

#[cfg(feature = "testkit")]
#[test]
fn a_broker_that_closes_every_connection_gets_about_one_heartbeat_a_second() {
    use crate::testkit::fault_peer::{Fault, FaultPeer};
    let broker = FaultPeer::start(Fault::CloseOnRequest).unwrap();
    let (instance, _probe) = instance_routed_to(broker.addr(), "hb_storm");
    instance.request_heartbeat();
    std::thread::sleep(Duration::from_secs(3));
    // Each heartbeat connects, which asks for the next one: spaced, not a storm.
    let connections = broker.accepted();
    assert!(
        (1..=8).contains(&connections),
        "{connections} connections in 3 s"
    );
    instance.producers.write().clear();
    instance.shutdown();
}
