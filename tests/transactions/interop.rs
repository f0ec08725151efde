//! The official Java client on the other end: a Java `TransactionMQProducer` (commit
//! some, roll back some) read by a Rust consumer, and a Rust `TransactionProducer` (by
//! the local transaction and by the check) read by a Java push consumer
//! (`java/TransactionInterop.java`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_blocking::LocalTransactionState;

use crate::java::{lines_after, JavaProgram};
use crate::*;

/// A Java client run that takes longer than this is killed and fails the test.
const JAVA_TIMEOUT: Duration = Duration::from_secs(240);

fn java() -> JavaProgram {
    JavaProgram::compile(
        &version(),
        "tests/transactions/java/TransactionInterop.java",
        "TransactionInterop",
    )
}

#[test]
fn a_java_transaction_producer_is_read_by_a_rust_consumer_committed_only() {
    let t = topic("tx_java_to_rust", 4);
    let n = 10 * scale();
    let started = Instant::now();
    let out = java().run(
        &[],
        &[
            "produce",
            &namesrv(),
            &t,
            &unique("tx_java_pg"),
            &n.to_string(),
        ],
        JAVA_TIMEOUT,
    );
    let committed: HashSet<String> = lines_after(&out, "COMMIT ").into_iter().collect();
    let rolled_back: HashSet<String> = lines_after(&out, "ROLLBACK ").into_iter().collect();
    assert_eq!(committed.len() + rolled_back.len(), n, "{out}");
    let c = count(&t, &committed, &rolled_back, Duration::from_secs(60));
    eprintln!(
        "{} Java TransactionMQProducer -> Rust consumer: {} committed, {} delivered, {} duplicates; {} rolled back, {} delivered ({:.1}s)",
        version(),
        committed.len(),
        c.delivered,
        c.duplicates,
        rolled_back.len(),
        c.leaked.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(c.missing, 0, "{c:?}");
    assert!(c.leaked.is_empty(), "{c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
}

#[test]
fn a_rust_transaction_producer_is_read_by_a_java_consumer_committed_only() {
    let t = topic("tx_rust_to_java", 4);
    let checks = Arc::new(Checks::default());
    let p = producer_builder(&unique("tx_rust_pg"), ByProperties(checks.clone()))
        .start()
        .unwrap();
    let n = 12 * scale();
    let (mut committed, mut rolled_back) = (HashSet::new(), HashSet::new());
    for i in 0..n {
        // Commit and roll back in the local transaction, and both through the check.
        let (local, check) = match i % 4 {
            0 => ("commit", "unknown"),
            1 => ("rollback", "unknown"),
            2 => ("unknown", "commit"),
            _ => ("unknown", "rollback"),
        };
        let r = p
            .send_in_transaction(&message(&t, i, local, check), &())
            .unwrap();
        let id = r.send_result().msg_id().to_string();
        if local == "commit" || check == "commit" {
            committed.insert(id);
        } else {
            rolled_back.insert(id);
        }
        if r.local_transaction_state() == LocalTransactionState::Unknown {
            assert!(matches!(i % 4, 2 | 3));
        }
    }
    assert_eq!(
        checks.executed.lock().len(),
        n,
        "every local transaction ran"
    );
    let started = Instant::now();
    let got = lines_after(
        &java().run(
            &[],
            &[
                "consume",
                &namesrv(),
                &t,
                &unique("tx_java_cg"),
                &committed.len().to_string(),
                "120",
                "5",
            ],
            JAVA_TIMEOUT,
        ),
        "GOT ",
    );
    p.shutdown();
    let seen: HashSet<&String> = got.iter().collect();
    let missing = committed.iter().filter(|id| !seen.contains(id)).count();
    let leaked = rolled_back.iter().filter(|id| seen.contains(id)).count();
    let duplicates = got.len() - seen.len();
    eprintln!(
        "{} Rust TransactionProducer -> Java consumer: {} committed, {} missing, {duplicates} duplicates; {} rolled back, {leaked} delivered; {} checks ({:.1}s)",
        version(),
        committed.len(),
        missing,
        rolled_back.len(),
        checks.total(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(missing, 0);
    assert_eq!(leaked, 0);
    assert_eq!(duplicates, 0);
}
