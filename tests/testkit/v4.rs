//! The 4.x line. 4.9.8's server artifacts were never published to Maven Central
//! (rocketmq-namesrv/-broker stop at 4.9.7), so 4.9.7 is the 4.x release we run, and
//! asking for 4.9.8 must fail with a Maven error that says so.

use std::time::Instant;

use crate::common::{all_registered, cluster_info, init_logging};
use rocketmq_blocking::testkit::{Cluster, TestkitError};

#[test]
fn cluster_4_9_7_starts() {
    init_logging();
    let t = Instant::now();
    let mut cluster = Cluster::builder()
        .version("4.9.7")
        .start()
        .unwrap_or_else(|e| panic!("start: {e}"));
    eprintln!("4.9.7 start took {:.1}s", t.elapsed().as_secs_f64());
    assert_eq!(cluster.version(), "4.9.7");
    let body = cluster_info(&cluster.namesrv_addr()).expect("cluster info");
    assert!(body.contains("brokerAddrTable"), "{body}");
    assert!(all_registered(&cluster.namesrv_addr(), &cluster.broker_addrs()).expect("probe"));
    // 4.9.x exits without $ROCKETMQ_HOME/conf/logback_broker.xml; ours sends its log here.
    let log = std::fs::read_to_string(cluster.log_dir().join("broker-a.log")).expect("log");
    assert!(log.contains("boot success"));

    cluster.stop_broker("broker-a").expect("stop");
    cluster.start_broker("broker-a").expect("restart");
    assert!(all_registered(&cluster.namesrv_addr(), &cluster.broker_addrs()).expect("probe"));
}

#[test]
fn unpublished_version_is_a_maven_error() {
    init_logging();
    match Cluster::builder().version("4.9.8").start() {
        Err(e @ TestkitError::Maven { .. }) => {
            let text = e.to_string();
            assert!(text.contains("4.9.8") && text.contains("hint"), "{text}");
        }
        Err(e) => panic!("expected a Maven error, got {e}"),
        Ok(_) => panic!("4.9.8 unexpectedly started"),
    }
}
