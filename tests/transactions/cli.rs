//! `rmq send --transaction commit|rollback|check` end to end: the lines it prints, and
//! what a consumer reading from the first offset finds afterwards.

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::*;

/// Runs `rmq send` for `topic` with `args`; returns the JSON lines it printed.
fn rmq_send(topic: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_rmq"))
        .args(["send", topic, "--body", "from the cli"])
        .args(args)
        .env("NAMESRV_ADDR", namesrv())
        .env_remove("RUST_LOG")
        .env_remove("ROCKETMQ_SERIALIZE_TYPE")
        .output()
        .expect("run rmq");
    assert!(
        out.status.success(),
        "rmq send {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn ids(lines: &[Value], key: &str, value: &str) -> HashSet<String> {
    lines
        .iter()
        .filter(|l| l[key] == value)
        .map(|l| l["msgId"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn rmq_send_transaction_commits_rolls_back_and_commits_on_the_check() {
    let t = topic("tx_cli", 2);
    let group = unique("tx_cli_pg");
    let g = ["--group", group.as_str(), "--count", "2"];
    let commit = rmq_send(&t, &[&["--transaction", "commit"][..], &g].concat());
    let rollback = rmq_send(&t, &[&["--transaction", "rollback"][..], &g].concat());
    let check = rmq_send(
        &t,
        &[&["--transaction", "check", "--check-timeout", "60"][..], &g].concat(),
    );
    let committed = ids(&commit, "localTransactionState", "COMMIT_MESSAGE");
    let rolled_back = ids(&rollback, "localTransactionState", "ROLLBACK_MESSAGE");
    let unknown = ids(&check, "localTransactionState", "UNKNOW");
    let checked: HashSet<String> = check
        .iter()
        .filter(|l| l["checked"] == true && l["state"] == "COMMIT_MESSAGE")
        .map(|l| l["msgId"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        (committed.len(), rolled_back.len(), unknown.len()),
        (2, 2, 2)
    );
    assert_eq!(checked, unknown, "{check:?}");
    for lines in [&commit, &rollback, &check] {
        let summary = lines.last().unwrap();
        assert_eq!(
            (summary["sent"].as_u64(), summary["failed"].as_u64()),
            (Some(2), Some(0))
        );
    }
    let want: HashSet<String> = committed.union(&unknown).cloned().collect();
    let c = count(&t, &want, &rolled_back, Duration::from_secs(60));
    eprintln!(
        "{} rmq send --transaction: {} committed (2 by the check), {} delivered, {} duplicates; {} rolled back, {} delivered",
        version(),
        want.len(),
        c.delivered,
        c.duplicates,
        rolled_back.len(),
        c.leaked.len()
    );
    assert_eq!(c.missing, 0, "{c:?}");
    assert!(c.leaked.is_empty(), "{c:?}");
    assert_eq!(c.duplicates, 0, "{c:?}");
}
