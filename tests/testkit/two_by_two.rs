//! 5.3.3 with two name servers and two brokers, readiness decided by a custom check
//! that asks every name server for the cluster info (as the main crate's client will).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::common::{all_registered, cluster_info, init_logging};
use rocketmq_blocking::testkit::Cluster;

#[test]
fn two_namesrvs_two_brokers_with_custom_readiness() {
    init_logging();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let t = Instant::now();
    let cluster = Cluster::builder()
        .name_servers(2)
        .brokers(2)
        .broker_config("enablePropertyFilter", "true")
        .readiness_check(Box::new(move |ns, brokers| {
            seen.fetch_add(1, Ordering::Relaxed);
            // Called only after every port accepts connections.
            for addr in ns.split(';') {
                cluster_info(addr)?;
            }
            all_registered(ns, brokers)
        }))
        .start()
        .unwrap_or_else(|e| panic!("start: {e}"));
    eprintln!("2x2 start took {:.1}s", t.elapsed().as_secs_f64());
    assert!(calls.load(Ordering::Relaxed) >= 1);

    let addrs = cluster.namesrv_addrs();
    assert_eq!(addrs.len(), 2);
    assert_eq!(cluster.namesrv_addr(), addrs.join(";"));
    let brokers = cluster.broker_addrs();
    let names: Vec<&str> = brokers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["broker-a", "broker-b"]);
    for ns in &addrs {
        let body = cluster_info(ns).expect("cluster info");
        for (name, addr) in &brokers {
            assert!(body.contains(name) && body.contains(addr), "{ns}: {body}");
        }
    }
    let conf = std::fs::read_to_string(cluster.run_dir().join("broker-b/broker.conf"))
        .expect("broker.conf");
    assert!(conf.contains("enablePropertyFilter=true"), "{conf}");
    assert!(conf.contains(&format!("namesrvAddr={}", cluster.namesrv_addr())));
}
