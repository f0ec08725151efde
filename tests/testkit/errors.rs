//! Failures come back as errors with context, and leave no JVM behind.

use std::time::Duration;

use crate::common::{init_logging, processes_mentioning};
use rocketmq_blocking::testkit::{Cluster, TestkitError};

#[test]
fn broker_that_exits_early_is_reported_with_its_log() {
    init_logging();
    let err = Cluster::builder()
        .broker_config("namesrvAddr", "not-an-address")
        .start()
        .expect_err("start must fail");
    eprintln!("{err}");
    match &err {
        TestkitError::JvmExited {
            process,
            log_dir,
            log_tail,
            ..
        } => {
            assert_eq!(process, "broker-a");
            assert!(log_tail.contains("not-an-address"), "{log_tail}");
            let run_dir = log_dir.parent().expect("run dir");
            assert!(processes_mentioning(run_dir).is_empty());
        }
        other => panic!("expected JvmExited, got {other}"),
    }
}

#[test]
fn readiness_check_that_never_passes_times_out() {
    init_logging();
    let err = Cluster::builder()
        .brokers(0)
        .readiness_check(Box::new(|ns, brokers| {
            assert!(brokers.is_empty());
            Err(format!("{ns} says no"))
        }))
        // Boot may be slow on a loaded machine; only the readiness phase is bounded tightly.
        .start_timeout(Duration::from_secs(120))
        .readiness_timeout(Duration::from_secs(3))
        .start()
        .expect_err("start must time out");
    eprintln!("{err}");
    match &err {
        TestkitError::Timeout { what, log_tail, .. } => {
            assert!(what.contains("readiness check"), "{what}");
            assert!(log_tail.contains("says no"), "{log_tail}");
        }
        other => panic!("expected Timeout, got {other}"),
    }
}
