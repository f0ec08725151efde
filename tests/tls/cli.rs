//! The `rmq` tool against the enforcing cluster: the global `--tls-*` flags work with
//! every kind of command, and without them the tool says what is wrong.

use std::process::{Command, Output};

use crate::cluster::{self, namesrv, unique};

fn rmq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rmq"))
        .args(args)
        .env("NAMESRV_ADDR", namesrv())
        .env_remove("RUST_LOG")
        .output()
        .expect("run rmq")
}

fn tls_flags() -> Vec<String> {
    let files = cluster::cluster().tls_files().unwrap();
    [
        ("--tls-ca", &files.ca_cert),
        ("--tls-cert", &files.client_cert),
        ("--tls-key", &files.client_key),
    ]
    .iter()
    .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
    .collect()
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn the_rmq_tool_creates_sends_and_consumes_over_tls_with_the_global_flags() {
    let topic = unique("tlscli");
    let flags = tls_flags();
    let with = |args: &[&str]| {
        // Flags after the subcommand: they are global.
        let mut v: Vec<&str> = args.to_vec();
        v.extend(flags.iter().map(String::as_str));
        rmq(&v)
    };
    let out = with(&["topic", "create", &topic, "--queues", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = with(&["send", &topic, "--body", "over tls", "--count", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Vec<String> = json_lines(&out)
        .iter()
        .filter_map(|l| l["msgId"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    let group = unique("tlsclig");
    let out = with(&[
        "consume",
        &topic,
        "--group",
        &group,
        "--from",
        "first",
        "--count",
        "3",
        "--timeout",
        "60",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<String> = json_lines(&out)
        .iter()
        .filter_map(|l| l["msgId"].as_str().map(str::to_string))
        .collect();
    got.sort();
    let mut sent = sent;
    sent.sort();
    assert_eq!(got, sent);

    // Without the flags: a non-zero exit and a line that says why.
    let out = rmq(&["route", &topic]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("requires TLS"), "{err}");
}
