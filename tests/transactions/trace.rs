//! The trace of a traced transactional producer: beside each half message's `Pub`, an
//! `EndTransaction` record of how it ended, from the local transaction and from a check,
//! in the fields and order of Java's `TraceDataEncoder`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::*;

/// The `EndTransaction` records in `trace_topic`, each as its fields, read from the first
/// offset until `done` holds of them or `timeout` passes.
fn end_transaction_records(
    trace_topic: &str,
    timeout: Duration,
    done: impl Fn(&[Vec<String>]) -> bool,
) -> Vec<Vec<String>> {
    let c = counting::reader_from_the_start(&namesrv(), trace_topic);
    let mut records = Vec::new();
    let deadline = Instant::now() + timeout;
    while !done(&records) && Instant::now() < deadline {
        for m in c.poll_timeout(Duration::from_millis(500)).unwrap() {
            let body = String::from_utf8_lossy(m.body()).into_owned();
            records.extend(
                body.split('\u{2}')
                    .filter(|r| r.starts_with("EndTransaction\u{1}"))
                    .map(|r| r.split('\u{1}').map(str::to_string).collect::<Vec<_>>()),
            );
        }
    }
    c.shutdown();
    records
}

#[test]
fn a_traced_transaction_producer_records_how_each_transaction_ended() {
    let t = topic("tx_traced", 1);
    let trace_topic = topic("tx_trace", 1);
    let group = unique("tx_traced_pg");
    let checks = Arc::new(Checks::default());
    let p = plain_builder(&group)
        .trace_topic(&trace_topic)
        .transactional(ByProperties(checks.clone()))
        .start()
        .unwrap();
    let send = |i, local, check| {
        let r = p
            .send_in_transaction(&message(&t, i, local, check), &())
            .unwrap();
        r.send_result().msg_id().to_string()
    };
    let committed = send(0, "commit", "commit");
    let rolled_back = send(1, "rollback", "commit");
    let checked = send(2, "unknown", "commit");
    assert!(
        eventually(Duration::from_secs(60), || checks.count(&checked) > 0),
        "the broker never checked {checked}"
    );
    let ids: HashSet<&str> = [&committed, &rolled_back, &checked]
        .into_iter()
        .map(String::as_str)
        .collect();
    // (msg id, state, from the check) of each record of these messages.
    let ends = |records: &[Vec<String>]| -> HashSet<(String, String, String)> {
        records
            .iter()
            .filter(|r| r.len() > 12 && ids.contains(r[5].as_str()))
            .map(|r| (r[5].clone(), r[11].clone(), r[12].clone()))
            .collect()
    };
    let want: HashSet<(String, String, String)> = [
        (&committed, "COMMIT_MESSAGE", "false"),
        (&rolled_back, "ROLLBACK_MESSAGE", "false"),
        (&checked, "UNKNOW", "false"),
        (&checked, "COMMIT_MESSAGE", "true"),
    ]
    .into_iter()
    .map(|(id, state, check)| (id.clone(), state.to_string(), check.to_string()))
    .collect();
    let records = end_transaction_records(&trace_topic, Duration::from_secs(60), |r| {
        want.is_subset(&ends(r))
    });
    p.shutdown();
    let got = ends(&records);
    assert!(want.is_subset(&got), "want {want:?}, got {got:?}");
    for r in records.iter().filter(|r| ids.contains(r[5].as_str())) {
        // Java's 13 fields: type, time, region, group, topic, msg id, tags, keys, store
        // host, message type (2, Trans_msg_Commit), transaction id, state, from check.
        assert_eq!(r.len(), 13, "{r:?}");
        assert_eq!(
            (r[3].as_str(), r[4].as_str()),
            (group.as_str(), t.as_str()),
            "{r:?}"
        );
        assert_eq!(r[9], "2", "{r:?}");
        assert_eq!(
            r[10], r[5],
            "the transaction id is the message's UNIQ_KEY: {r:?}"
        );
        assert!(r[1].parse::<i64>().is_ok() && r[8].contains(':'), "{r:?}");
    }
    assert_eq!(
        checks.count(&committed) + checks.count(&rolled_back),
        0,
        "ended transactions were checked"
    );
}
