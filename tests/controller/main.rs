//! 5.x controller mode (RocketMQ 5.3.3 only): one name server with the controller embedded,
//! one broker group of two nodes (`broker-a`, `broker-a-1`) whose master the controller
//! elects. The master is SIGKILLed while a producer sends and a push consumer consumes; the
//! controller promotes the other node, and both clients must follow it through route
//! refresh. Every acknowledged send must be consumed (counted by message id). The old
//! master, restarted with its store, must come back as a slave.
//!
//! The cluster is this binary's own; its one test prints a table of figures. Reduced size
//! by default, full size with `RMQ_RELIABILITY_SCALE=10 cargo test --test controller --
//! --nocapture`.

#[path = "../common/counting.rs"]
mod counting;
#[path = "../support/failover.rs"]
mod failover;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{
    Admin, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer, TopicConfig,
};

use failover::{eventually, lost_and_duplicates, print_table, scale, secs, unique};
use rocketmq_blocking::ClientOptions;

const GROUP: &str = "broker-a";

/// The master of `broker-a` as the name server has it.
fn master_addr(admin: &Admin) -> Option<String> {
    admin
        .cluster_info()
        .ok()?
        .broker_addr_table
        .get(GROUP)?
        .master_addr()
        .map(str::to_string)
}

#[test]
fn a_promoted_slave_takes_over_sends_and_consumption_and_nothing_acknowledged_is_lost() {
    let _ = env_logger::builder().is_test(true).try_init();
    let started = Instant::now();
    let mut cluster = Cluster::builder()
        .controller_mode(1)
        .brokers(1)
        .slaves(1)
        .start()
        .expect("controller-mode cluster");
    eprintln!(
        "controller: RocketMQ {} name server with controller + 2 broker nodes up in {:.1}s",
        cluster.version(),
        started.elapsed().as_secs_f64()
    );
    let ns = cluster.namesrv_addr();
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&ns))
        .start()
        .expect("admin");
    let old_master = master_addr(&admin).expect("an elected master");
    let nodes = cluster.broker_nodes();
    let node_of = |addr: &str| {
        nodes
            .iter()
            .find(|n| n.addr == addr)
            .map(|n| n.name.clone())
            .expect("a node of the cluster")
    };
    let killed_node = node_of(&old_master);
    let topic = unique("ctl");
    let config = TopicConfig::new(&topic, 4);
    // On both nodes: the promoted one must have the topic before its master dies (a slave
    // copies topic configs from its master only every 60 s).
    for n in &nodes {
        admin.create_topic_on(&n.addr, &config).expect("topic");
    }
    admin
        .wait_for_route(&topic, 1, Duration::from_secs(30))
        .expect("route");

    // The controller promotes only a node of the SyncStateSet, which the slave joins once
    // it has caught up (the master checks every 5 s): killing the master before that
    // leaves nobody to promote, whatever the clients do.
    let controller = cluster.controller_addrs()[0].clone();
    let mut sync_state = String::new();
    let in_sync = eventually(Duration::from_secs(60), || {
        sync_state = cluster
            .mqadmin(
                &["getSyncStateSet", "-a", &controller, "-b", GROUP],
                Duration::from_secs(60),
            )
            .unwrap_or_else(|e| e.to_string());
        sync_state.contains("#SyncStateSetNums\t2")
    });
    assert!(
        in_sync,
        "the slave never joined the SyncStateSet:\n{sync_state}"
    );

    let total = 3_000 * scale();
    let p = Producer::builder(unique("pg_ctl"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .poll_name_server_interval(Duration::from_secs(1)),
        )
        .start()
        .expect("producer");
    let consumed: Arc<Mutex<HashMap<String, (usize, Instant)>>> = Arc::default();
    let c_seen = consumed.clone();
    let c = PushConsumer::builder(unique("cg_ctl"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .poll_name_server_interval(Duration::from_secs(1)),
        )
        .persist_offset_interval(Duration::from_secs(1))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            let mut s = c_seen.lock();
            for m in msgs {
                s.entry(m.msg_id().to_string())
                    .or_insert((0, Instant::now()))
                    .0 += 1;
            }
            ConsumeStatus::Success
        })
        .start()
        .expect("consumer");

    // Sends until `total` are acknowledged; a failed send is counted and retried after a
    // pause. The master is killed once a third are acknowledged.
    let acked: Mutex<HashSet<String>> = Mutex::default();
    let acked_after_kill: Mutex<Vec<(String, Instant)>> = Mutex::default();
    let failed = AtomicUsize::new(0);
    let killed_at: Mutex<Option<Instant>> = Mutex::default();
    let kill_now = AtomicBool::new(false);
    let send_deadline = Instant::now() + Duration::from_secs(120 + 20 * scale() as u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while acked.lock().len() < total && Instant::now() < send_deadline {
                i += 1;
                match p.send(&Message::new(&topic, format!("m{i}"))) {
                    Ok(r) => {
                        let id = r.msg_id().to_string();
                        let n = {
                            let mut a = acked.lock();
                            a.insert(id.clone());
                            a.len()
                        };
                        if killed_at.lock().is_some() {
                            acked_after_kill.lock().push((id, Instant::now()));
                        }
                        if n == total / 3 {
                            kill_now.store(true, Ordering::SeqCst);
                        }
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        });
        s.spawn(|| {
            while !kill_now.load(Ordering::SeqCst) {
                if Instant::now() >= send_deadline {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            cluster.kill_broker(&killed_node).expect("kill the master");
            *killed_at.lock() = Some(Instant::now());
        });
    });
    let killed = killed_at.lock().expect("the master was killed");
    let acked = acked.into_inner();
    let all = eventually(Duration::from_secs(120), || {
        let s = consumed.lock();
        acked.iter().all(|id| s.contains_key(id))
    });
    let new_master = master_addr(&admin);
    c.shutdown();
    p.shutdown();

    // The old master comes back with its store: the controller makes it a slave.
    cluster
        .start_broker(&killed_node)
        .expect("restart the old master");
    let restarted = Instant::now();
    let mut rejoined_at = None;
    let rejoined = eventually(Duration::from_secs(60), || {
        let slave = admin.cluster_info().ok().and_then(|info| {
            let group = info.broker_addr_table.get(GROUP)?;
            let as_slave = group
                .broker_addrs
                .iter()
                .any(|(id, a)| *id != 0 && *a == old_master);
            Some(as_slave && group.master_addr() == new_master.as_deref())
        });
        if slave == Some(true) {
            rejoined_at = Some(Instant::now());
        }
        slave == Some(true)
    });

    let seen = consumed.lock();
    let counts: HashMap<String, usize> = seen.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    let (lost, duplicates) = lost_and_duplicates(&acked, &counts);
    let after_kill = acked_after_kill.into_inner();
    let sends_back = after_kill.first().map(|e| e.1);
    let consumption_back = after_kill
        .iter()
        .filter_map(|(id, _)| seen.get(id).map(|e| e.1))
        .min();
    print_table(
        "controller: master SIGKILLed under sends and push consumption (RocketMQ 5.3.3, controller in the name server)",
        &[
            ("acknowledged sends", acked.len().to_string()),
            ("failed sends (retried)", failed.load(Ordering::SeqCst).to_string()),
            ("lost", lost.to_string()),
            ("duplicates", duplicates.to_string()),
            (
                "master before → after",
                format!(
                    "{killed_node} ({old_master}) → {}",
                    new_master.as_deref().map_or("none".to_string(), node_of)
                ),
            ),
            ("kill → first acknowledged send", secs(killed, sends_back)),
            (
                "kill → first message sent after the kill consumed",
                secs(killed, consumption_back),
            ),
            (
                "old master restarted → listed as a slave",
                secs(restarted, rejoined_at),
            ),
        ],
    );
    assert!(all, "not every acknowledged send was consumed");
    assert_eq!(lost, 0);
    assert_eq!(acked.len(), total, "sends never succeeded again");
    assert!(
        new_master.as_deref().is_some_and(|m| m != old_master),
        "no other node was promoted"
    );
    assert!(
        consumption_back.is_some(),
        "nothing sent after the kill was consumed"
    );
    assert!(rejoined, "the old master did not come back as a slave");
}
