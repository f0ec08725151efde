//! 5.3.3, one name server and one broker: readiness, stop/start (graceful and crash),
//! add_broker, shutdown leaving no process behind.

use std::time::{Duration, Instant};

use crate::common::{
    all_registered, cluster_info, disk_use, eventually, init_logging, processes_mentioning,
};
use rocketmq_blocking::testkit::Cluster;

#[test]
fn single_broker_lifecycle() {
    init_logging();
    let t = Instant::now();
    let mut cluster = Cluster::builder()
        .start()
        .unwrap_or_else(|e| panic!("start: {e}"));
    eprintln!("start took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(cluster.version(), "5.3.3");
    let ns = cluster.namesrv_addr();
    let brokers = cluster.broker_addrs();
    assert_eq!(brokers.len(), 1);
    assert_eq!(brokers[0].0, "broker-a");
    let body = cluster_info(&ns).expect("cluster info");
    assert!(body.contains("brokerAddrTable"), "{body}");
    assert!(body.contains(&format!("\"{}\"", brokers[0].1)), "{body}");
    assert!(body.contains("DefaultCluster"), "{body}");
    assert!(cluster.log_dir().join("broker-a.log").is_file());
    assert!(cluster.log_dir().join("namesrv-0.log").is_file());

    // Graceful stop: the broker leaves the route table.
    let t = Instant::now();
    cluster.stop_broker("broker-a").expect("stop");
    eprintln!("stop_broker took {:.1}s", t.elapsed().as_secs_f64());
    assert!(!cluster.is_broker_running("broker-a"));
    assert!(eventually(Duration::from_secs(15), || {
        cluster_info(&ns)
            .map(|b| !b.contains(&brokers[0].1))
            .unwrap_or(false)
    }));

    let t = Instant::now();
    cluster.start_broker("broker-a").expect("restart");
    eprintln!("start_broker took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(cluster.broker_addrs(), brokers, "same ports after restart");
    assert!(all_registered(&ns, &brokers).expect("probe"));

    // Crash and recover from the same store.
    let t = Instant::now();
    cluster.kill_broker("broker-a").expect("kill");
    eprintln!("kill_broker took {:.1}s", t.elapsed().as_secs_f64());
    cluster
        .start_broker("broker-a")
        .expect("restart after crash");
    assert!(all_registered(&ns, &brokers).expect("probe"));
    assert!(cluster.start_broker("broker-a").is_err(), "already running");
    assert!(cluster.stop_broker("nope").is_err());

    let t = Instant::now();
    let name = cluster.add_broker().expect("add broker");
    eprintln!("add_broker took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(name, "broker-b");
    assert!(all_registered(&ns, &cluster.broker_addrs()).expect("probe"));

    let run_dir = cluster.run_dir().to_path_buf();
    eprintln!("run dir {}: {}", run_dir.display(), disk_use(&run_dir));
    assert!(
        processes_mentioning(&run_dir).len() >= 6,
        "3 JVMs + 3 watchdogs"
    );
    let t = Instant::now();
    cluster.shutdown();
    eprintln!("shutdown took {:.1}s", t.elapsed().as_secs_f64());
    cluster.shutdown(); // idempotent
    let left = processes_mentioning(&run_dir);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(run_dir.join("logs").is_dir(), "logs are kept");
}
