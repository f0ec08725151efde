//! A master–slave pair (`broker-a` and its slave `broker-a-1`, one name server) and the
//! master SIGKILLed under push consumption: the consumer goes on reading from the slave,
//! keeps its offsets there while the master is down, and goes back to the master, with its
//! offsets, once it is restarted. Counts are by message id.
//!
//! The cluster is this binary's own; its one test prints a table of figures. Reduced size
//! by default, full size with `RMQ_RELIABILITY_SCALE=10 cargo test --test master_slave --
//! --nocapture`; `RMQ_TEST_VERSION=4.9.7` runs it against 4.9.7.

#[path = "../common/counting.rs"]
mod counting;
#[path = "../support/failover.rs"]
mod failover;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode, ResponseCode};
use rocketmq_blocking::remoting::{RemotingClient, RemotingConfig};
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{
    Admin, ConsumeFromWhere, ConsumeStatus, Message, MessageQueue, Producer, PushConsumer,
    TopicConfig,
};

use failover::{eventually, lost_and_duplicates, print_table, scale, secs, unique, PullLog};
use rocketmq_blocking::ClientOptions;

const MASTER: &str = "broker-a";
const SLAVE: &str = "broker-a-1";
const QUEUES: i32 = 4;

/// What the listener saw: per message id the count, and per (queue, offset) when.
#[derive(Default)]
struct Seen {
    ids: HashMap<String, usize>,
    at: Vec<(i32, i64, Instant)>,
}

/// The group's committed offsets of `topic`'s queues at `addr`, summed (-1 when the
/// broker does not answer).
fn committed(admin: &Admin, addr: &str, group: &str, topic: &str) -> i64 {
    let mut sum = 0;
    for q in 0..QUEUES {
        let mq = MessageQueue::new(topic, MASTER, q);
        match admin
            .api()
            .query_consumer_offset(addr, group, &mq, Duration::from_secs(3))
        {
            Ok(o) => sum += o.unwrap_or(0),
            Err(_) => return -1,
        }
    }
    sum
}

/// Whether the broker at `addr` has `topic`'s config (GET_TOPIC_STATS_INFO answers
/// TOPIC_NOT_EXIST otherwise).
fn knows_topic(client: &RemotingClient, addr: &str, topic: &str) -> bool {
    let mut request = RemotingCommand::request(RequestCode::GET_TOPIC_STATS_INFO);
    request.ext_fields.insert("topic", topic);
    client
        .invoke_sync(addr, request, Duration::from_secs(3))
        .is_ok_and(|r| r.response_code() == ResponseCode::SUCCESS)
}

fn max_offsets(admin: &Admin, addr: &str, topic: &str) -> Option<i64> {
    (0..QUEUES)
        .map(|q| {
            admin
                .max_offset_on(addr, &MessageQueue::new(topic, MASTER, q))
                .ok()
        })
        .sum()
}

#[test]
fn a_push_consumer_reads_from_the_slave_while_the_master_is_down_and_loses_nothing() {
    let _ = env_logger::builder().is_test(true).try_init();
    let mut b = Cluster::builder()
        .brokers(1)
        .slaves(1)
        // A 5.x slave answers pulls SYSTEM_BUSY without it (`rejectRequest`); 4.9.x serves
        // them either way.
        .broker_config("slaveReadEnable", "true");
    if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
        b = b.version(&v);
    }
    let started = Instant::now();
    let mut cluster = b.start().expect("master-slave cluster");
    eprintln!(
        "master_slave: RocketMQ {} name server + master + slave up in {:.1}s",
        cluster.version(),
        started.elapsed().as_secs_f64()
    );
    let ns = cluster.namesrv_addr();
    let nodes = cluster.broker_nodes();
    let addr_of = |name: &str| {
        nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.addr.clone())
            .expect("node")
    };
    let (master, slave) = (addr_of(MASTER), addr_of(SLAVE));
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&ns))
        .start()
        .expect("admin");
    let topic = unique("ms");
    let config = TopicConfig::new(&topic, QUEUES as u32);
    admin
        .create_topic_on(&master, &config)
        .expect("topic on the master");
    // The slave must have it before the master dies, or it answers pulls TOPIC_NOT_EXIST.
    // A 5.3.3 slave takes it directly (it would copy it from its master only every 60 s);
    // 4.9.7 refuses and copies it within 10 s.
    let _ = admin.create_topic_on(&slave, &config);
    let client = RemotingClient::new(RemotingConfig::default()).expect("remoting client");
    assert!(
        eventually(Duration::from_secs(60), || knows_topic(
            &client, &slave, &topic
        )),
        "the slave never learnt the topic"
    );
    admin
        .wait_for_route(&topic, 1, Duration::from_secs(30))
        .expect("route");

    let total = 2_000 * scale();
    let instance = unique("ms_client");
    // The producer has a client instance of its own; the consumer's (below) has its pulls
    // watched and persists its offsets every second. Its periodic heartbeats are rare
    // (5 min), so only the one a new broker address asks for can register the group with
    // the restarted master.
    let p = Producer::builder(unique("pg_ms"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .poll_name_server_interval(Duration::from_secs(1)),
        )
        .start()
        .expect("producer");
    let mut acked = HashSet::new();
    for i in 0..total {
        let r = p
            .send(&Message::new(&topic, format!("m{i}")))
            .expect("send to the pair");
        acked.insert(r.msg_id().to_string());
    }
    let replicated = eventually(Duration::from_secs(60), || {
        max_offsets(&admin, &slave, &topic) == max_offsets(&admin, &master, &topic)
    });
    assert!(replicated, "the slave never caught up with the master");

    let group = unique("cg_ms");
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s = seen.clone();
    let c = PushConsumer::builder(&group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .instance_name(&instance)
                .poll_name_server_interval(Duration::from_secs(1))
                .heartbeat_interval(Duration::from_secs(300)),
        )
        .persist_offset_interval(Duration::from_secs(1))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        // One listener thread at ~200 messages/s and a small cache per queue, so the kill
        // lands mid-stream and what the consumer had cached is gone in well under a second.
        .consume_thread_min(1)
        .consume_thread_max(1)
        .pull_batch_size(8)
        .pull_threshold_for_queue(16)
        .listener(move |msgs, _| {
            std::thread::sleep(Duration::from_millis(5) * msgs.len() as u32);
            let mut s = s.lock();
            for m in msgs {
                *s.ids.entry(m.msg_id().to_string()).or_default() += 1;
                s.at.push((m.queue_id(), m.queue_offset(), Instant::now()));
            }
            ConsumeStatus::Success
        })
        .start()
        .expect("consumer");
    let pulls = PullLog::install(c.client_instance().remoting());
    let consumed = || seen.lock().ids.len();
    assert!(eventually(Duration::from_secs(60), || consumed() >= total / 4));

    cluster.kill_broker(MASTER).expect("kill the master");
    let killed = Instant::now();
    let at_kill = consumed();
    let slave_offsets_at_kill = committed(&admin, &slave, &group, &topic);
    // The master stays down until half of the rest came from the slave.
    let from_slave_enough = eventually(Duration::from_secs(60 + 10 * scale() as u64), || {
        consumed() >= at_kill + (total - at_kill) / 2
    });
    // Two persist periods, so the slave holds the offsets of what it served.
    std::thread::sleep(Duration::from_secs(2));
    let slave_offsets_later = committed(&admin, &slave, &group, &topic);

    cluster.start_broker(MASTER).expect("restart the master");
    let restarted = Instant::now();
    // Sent once the master is back: these are stored by it alone.
    let mut after = 0;
    for i in 0..total / 4 {
        if let Ok(r) = p.send(&Message::new(&topic, format!("after m{i}"))) {
            acked.insert(r.msg_id().to_string());
            after += 1;
        }
    }
    let all = eventually(Duration::from_secs(120 + 10 * scale() as u64), || {
        let s = seen.lock();
        acked.iter().all(|id| s.ids.contains_key(id))
    });
    let all_at = all.then(Instant::now);
    // Every message consumed: the master must end up with offsets at the end of every queue.
    let end = max_offsets(&admin, &master, &topic).unwrap_or(-1);
    let mut master_offsets_at = None;
    let offsets_back = eventually(Duration::from_secs(30), || {
        let done = committed(&admin, &master, &group, &topic) == end;
        if done {
            master_offsets_at = Some(Instant::now());
        }
        done
    });
    c.shutdown();
    p.shutdown();

    // A message was pulled from the slave if its offset is at or past the first pull the
    // slave got for its queue after the kill, and before the first one the master got
    // after its restart.
    let from_slave = pulls.first_to_each_queue(&slave, killed);
    let back_to_master = pulls.first_to_each_queue(&master, restarted);
    let s = seen.lock();
    let slave_served = |q: i32, o: i64| {
        from_slave.get(&q).is_some_and(|first| o >= first.0)
            && back_to_master.get(&q).is_none_or(|first| o < first.0)
    };
    let first_consumed = |served: &dyn Fn(i32, i64, Instant) -> bool| {
        s.at.iter()
            .filter(|(q, o, at)| served(*q, *o, *at))
            .map(|e| e.2)
            .min()
    };
    // Consumed after the first pull of its queue from the slave, too.
    let first_from_slave = first_consumed(&|q, o, at| {
        from_slave.get(&q).is_some_and(|first| at >= first.1) && slave_served(q, o)
    });
    // The same for the master after its restart.
    let first_from_master = first_consumed(&|q, o, at| {
        back_to_master
            .get(&q)
            .is_some_and(|first| at >= first.1 && o >= first.0)
    });
    let consumed_from_slave = s.at.iter().filter(|(q, o, _)| slave_served(*q, *o)).count();
    let (lost, duplicates) = lost_and_duplicates(&acked, &s.ids);
    print_table(
        &format!(
            "master_slave: master SIGKILLed under push consumption (RocketMQ {})",
            cluster.version()
        ),
        &[
            (
                "messages",
                format!(
                    "{} ({total} before the kill, {after} after the restart)",
                    acked.len()
                ),
            ),
            ("lost", lost.to_string()),
            ("duplicates", duplicates.to_string()),
            ("consumed before the kill", at_kill.to_string()),
            ("consumed from the slave", consumed_from_slave.to_string()),
            (
                "kill → first pull to the slave",
                secs(killed, pulls.first_to(&slave, killed)),
            ),
            (
                "kill → first message from the slave",
                secs(killed, first_from_slave),
            ),
            (
                "slave's committed offsets (sum) at the kill → 2 s later",
                format!("{slave_offsets_at_kill} → {slave_offsets_later}"),
            ),
            (
                "master down",
                format!("{:.1} s", restarted.duration_since(killed).as_secs_f64()),
            ),
            (
                "restart → first pull to the master",
                secs(restarted, pulls.first_to(&master, restarted)),
            ),
            (
                "restart → first message from the master",
                secs(restarted, first_from_master),
            ),
            ("restart → every message consumed", secs(restarted, all_at)),
            (
                "restart → the master has every offset",
                secs(restarted, master_offsets_at),
            ),
        ],
    );
    assert!(all, "not every acknowledged message was consumed");
    assert_eq!(lost, 0);
    assert!(
        from_slave_enough,
        "consumption did not go on from the slave"
    );
    assert!(
        consumed_from_slave > 0,
        "no message was pulled from the slave"
    );
    assert!(
        slave_offsets_later > slave_offsets_at_kill,
        "offsets were not committed to the slave while the master was down \
         ({slave_offsets_at_kill} → {slave_offsets_later})"
    );
    // The restarted master refuses the group's pulls until a heartbeat registers it there
    // (SUBSCRIPTION_NOT_EXIST): before the new address asked for one, consumption from it
    // waited for the periodic heartbeat (up to 30 s at the default; 5 min here).
    let resumed = first_from_master.map(|t| t.duration_since(restarted));
    assert!(
        resumed.is_some_and(|d| d < Duration::from_secs(30)),
        "consumption from the restarted master began {resumed:?} after its restart"
    );
    assert!(
        offsets_back,
        "the master never got the group's offsets back (end of queues {end})"
    );
}
