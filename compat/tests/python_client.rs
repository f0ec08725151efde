//! The drop-in proof on code no one here wrote: the official `rocketmq-client-python`
//! 2.0.0 from PyPI, installed unmodified into a venv under `target/compat-python/`, loads
//! this package's `librocketmq.so` (found through `LD_LIBRARY_PATH` by its own
//! `ctypes.util.find_library("rocketmq")`) and, against one real RocketMQ cluster
//! (testkit): its producer sends to the official Java consumer, the Java producer's messages
//! reach its push consumer, its orderly producer keeps each sharding key on one queue in
//! order for its orderly consumer, and its transaction producer commits, rolls back and
//! answers the broker's checks. The driver is `python/drive_client.py`; the Java side
//! `tests/common/java/PythonInterop.java` of the workspace (shared with the Python
//! package's exchange test).
//!
//! The package comes from PyPI (`pip install rocketmq-client-python==2.0.0`, once per
//! target directory); set `RMQ_PY_CLIENT_SDIST` to a downloaded sdist to install offline.

#[path = "../../tests/common/java.rs"]
#[allow(dead_code)]
mod java;
mod support;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use java::{lines_after, wait_or_kill, JavaProgram};
use support::{
    check, create_topic, lib_dir, namesrv, position_by_probes, profile_dir,
    start_group_at_first_offsets, unique, venv, Watched,
};

fn java() -> JavaProgram {
    JavaProgram::compile(
        &support::version(),
        "../tests/common/java/PythonInterop.java",
        "PythonInterop",
    )
}

/// The driver in mode `args[0]`, on the venv's Python with our library on the path.
fn driver(args: &[&str]) -> Command {
    let mut cmd = Command::new(venv().join("bin").join("python"));
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/drive_client.py"))
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.spawn().expect("the driver runs")
}

/// Runs the driver to its end (killed past `limit`), asserts exit 0 and that the library
/// it loaded is ours; returns its standard output.
fn run_driver(args: &[&str], limit: Duration) -> String {
    finish(spawn(&mut driver(args)), limit, args[0])
}

fn finish(child: Child, limit: Duration, what: &str) -> String {
    checked(wait_or_kill(child, limit), what)
}

/// Asserts the driver exited 0 and loaded our library; returns its standard output.
fn checked(out: Output, what: &str) -> String {
    check(&format!("drive_client.py {what}"), &out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        lines_after(&stdout, "LIB "),
        vec!["librocketmq.so".to_string()],
        "the package located a library by name, through LD_LIBRARY_PATH"
    );
    assert_eq!(
        lines_after(&stdout, "MAPPED "),
        vec![lib_dir().join("librocketmq.so").display().to_string()],
        "the library loaded is this package's"
    );
    stdout
}

/// The first word of each line after `prefix`.
fn ids(stdout: &str, prefix: &str) -> Vec<String> {
    lines_after(stdout, prefix)
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn fields(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn python_client_producer_sends_to_the_java_consumer() {
    let ns = namesrv();
    let topic = unique("PyToJava");
    create_topic(&topic, 4);
    let out = run_driver(&["produce", &ns, &topic, "10"], Duration::from_secs(120));
    let sent = ids(&out, "SENT ");
    assert_eq!(sent.len(), 10, "{out}");
    // The oneway message is the 11th the consumer must see.
    let got = java().run(
        &[],
        &["consume", &ns, &topic, &unique("java_from_py"), "11"],
        Duration::from_secs(150),
    );
    let got_lines = lines_after(&got, "GOT ");
    let by_id: HashMap<&str, Vec<&str>> = got_lines
        .iter()
        .map(|l| (fields(l)[0], fields(l)))
        .collect();
    for (i, id) in sent.iter().enumerate() {
        let f = by_id
            .get(id.as_str())
            .unwrap_or_else(|| panic!("the Java consumer did not get {id}:\n{got}"));
        assert_eq!(
            &f[1..],
            &[
                "TagPy",
                &format!("key-{i}"),
                "python",
                &format!("python-{i}")
            ],
            "tags, keys, body and property of {id}"
        );
    }
    assert!(
        got_lines.iter().any(|l| l.contains("python-oneway-10")),
        "the oneway message: {got}"
    );
}

#[test]
fn java_producer_messages_reach_the_python_push_consumer() {
    let ns = namesrv();
    let topic = unique("JavaToPy");
    create_topic(&topic, 4);
    let sent_out = java().run(
        &[],
        &["produce", &ns, &topic, "10"],
        Duration::from_secs(90),
    );
    let sent: HashSet<String> = ids(&sent_out, "SENT ").into_iter().collect();
    assert_eq!(sent.len(), 10, "{sent_out}");
    let group = unique("py_from_java");
    start_group_at_first_offsets(&topic, &group);
    let out = run_driver(
        &["consume", &ns, &topic, &group, "10", "0", "90"],
        Duration::from_secs(120),
    );
    let got = lines_after(&out, "GOT ");
    let got_ids: HashSet<String> = ids(&out, "GOT ").into_iter().collect();
    assert_eq!(got_ids, sent, "{out}");
    for l in &got {
        let f = fields(l);
        // id, queue id, tags, keys, body, property, topic, queue offset
        assert_eq!(f[2], "TagJava", "{l}");
        assert_eq!(f[3].strip_prefix("key-"), f[4].strip_prefix("java-"), "{l}");
        assert_eq!(f[5], "java", "{l}");
        assert_eq!(f[6], topic, "{l}");
        assert!(
            f[1].parse::<i32>().is_ok_and(|q| (0..4).contains(&q)),
            "{l}"
        );
        assert!(f[7].parse::<i64>().is_ok_and(|o| o >= 0), "{l}");
    }
    assert!(out.contains("DONE 10"), "{out}");
}

#[test]
fn python_orderly_producer_keeps_each_sharding_key_in_order_for_the_orderly_consumer() {
    let ns = namesrv();
    let topic = unique("PyOrderly");
    create_topic(&topic, 4);
    let out = run_driver(
        &["orderly", &ns, &topic, "24", "3"],
        Duration::from_secs(120),
    );
    assert_eq!(ids(&out, "SENT ").len(), 24, "{out}");
    let group = unique("py_orderly");
    start_group_at_first_offsets(&topic, &group);
    let got_out = run_driver(
        &["consume", &ns, &topic, &group, "24", "1", "90"],
        Duration::from_secs(120),
    );
    let got = lines_after(&got_out, "GOT ");
    assert_eq!(got.len(), 24, "{got_out}");
    // body "order-<k>-<i>" (key k = i % 3): one queue per key, indices in send order.
    let mut queue_of: HashMap<String, String> = HashMap::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    for l in &got {
        let f = fields(l);
        let (key, index) = f[4].rsplit_once('-').expect("order-<k>-<i>");
        let index: i64 = index.parse().expect("index");
        let q = queue_of.entry(key.to_string()).or_insert(f[1].to_string());
        assert_eq!(q, f[1], "key {key} on two queues: {got_out}");
        let prev = last.insert(key.to_string(), index).unwrap_or(-1);
        assert!(prev < index, "key {key}: {index} after {prev}: {got_out}");
    }
    assert_eq!(queue_of.len(), 3);
}

#[test]
fn python_transaction_producer_commits_rolls_back_and_answers_checks() {
    let ns = namesrv();
    let topic = unique("PyTx");
    create_topic(&topic, 4);
    let out = run_driver(&["transaction", &ns, &topic, "6"], Duration::from_secs(120));
    let sent = lines_after(&out, "SENT ");
    assert_eq!(sent.len(), 6, "{out}");
    // The local transaction saw the message's id (UNIQ_KEY) and body.
    let local = ids(&out, "LOCAL ");
    let sent_ids = ids(&out, "SENT ");
    assert_eq!(local, sent_ids, "{out}");
    assert!(out.contains("CHECKED 2 of 2"), "{out}");
    let state = |s: &str| -> HashSet<String> {
        sent.iter()
            .filter(|l| l.ends_with(s))
            .map(|l| fields(l)[0].to_string())
            .collect()
    };
    let visible: HashSet<String> = state("COMMIT").union(&state("UNKNOWN")).cloned().collect();
    assert_eq!(visible.len(), 4);
    let group = unique("py_tx");
    start_group_at_first_offsets(&topic, &group);
    let got_out = run_driver(
        &["consume", &ns, &topic, &group, "4", "0", "90"],
        Duration::from_secs(120),
    );
    let got: HashSet<String> = ids(&got_out, "GOT ").into_iter().collect();
    assert_eq!(
        got, visible,
        "committed and checked-then-committed: {got_out}"
    );
    assert!(got.is_disjoint(&state("ROLLBACK")));
}

#[test]
fn python_client_failures_raise_the_packages_exceptions_with_our_error_text() {
    let ns = namesrv();
    let topic = unique("PyErrors");
    create_topic(&topic, 2);
    let mut cmd = driver(&["errors", &ns, &topic]);
    cmd.env_remove("NAMESRV_ADDR");
    let out = finish(spawn(&mut cmd), Duration::from_secs(120), "errors");
    let raised = lines_after(&out, "RAISED ");
    assert_eq!(raised.len(), 5, "{out}");
    assert!(
        raised[0].starts_with("ProducerSendSyncFailed the producer is not started"),
        "{out}"
    );
    assert!(raised[1].starts_with("ProducerStartFailed "), "{out}");
    assert!(
        raised[2].starts_with("PushConsumerStartFailed no message callback"),
        "{out}"
    );
    assert!(
        raised[3].contains("send timeout -5 is not positive"),
        "{out}"
    );
    assert!(raised[4].contains("UNIQ_KEY"), "{out}");
    assert_eq!(
        ids(&out, "SENT ").len(),
        1,
        "the producer works after the errors: {out}"
    );
}

#[test]
fn python_push_consumer_filters_by_tag() {
    let ns = namesrv();
    let topic = unique("PyTags");
    create_topic(&topic, 4);
    // TagPy from Python, TagJava from Java, on one topic.
    let py = run_driver(&["produce", &ns, &topic, "6"], Duration::from_secs(120));
    let java_out = java().run(&[], &["produce", &ns, &topic, "6"], Duration::from_secs(90));
    let java_ids: HashSet<String> = ids(&java_out, "SENT ").into_iter().collect();
    assert_eq!(ids(&py, "SENT ").len(), 6);
    // Subscribed to TagJava only: every Java message and no Python one.
    let group = unique("py_tags");
    start_group_at_first_offsets(&topic, &group);
    let out = run_driver(
        &["consume", &ns, &topic, &group, "6", "0", "90", "TagJava"],
        Duration::from_secs(120),
    );
    let got: HashSet<String> = ids(&out, "GOT ").into_iter().collect();
    assert_eq!(got, java_ids, "{out}");
    assert!(
        lines_after(&out, "GOT ")
            .iter()
            .all(|l| fields(l)[2] == "TagJava"),
        "{out}"
    );
}

/// The ACL admin of the ACL cluster (5.x: a `Super` user).
const ACL_ADMIN: (&str, &str) = ("compat_acl_admin", "C0mpatAclS3cretQx7");

#[test]
fn python_client_with_session_credentials_talks_to_a_cluster_enforcing_acl() {
    let mut b = rocketmq_blocking::testkit::Cluster::builder()
        .work_dir(
            profile_dir()
                .parent()
                .expect("target")
                .join("rocketmq-testkit"),
        )
        .brokers(1)
        .acl_account(rocketmq_blocking::testkit::AclAccount::admin(
            ACL_ADMIN.0,
            ACL_ADMIN.1,
        ));
    if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
        b = b.version(&v);
    }
    let cluster = b
        .start()
        .unwrap_or_else(|e| panic!("starting the ACL cluster: {e}"));
    let ns = cluster.namesrv_addr();
    let topic = unique("PyAcl");
    let options = rocketmq_blocking::ClientOptions::new()
        .namesrv_addr(ns.clone())
        .credentials(rocketmq_blocking::Credentials::new(
            ACL_ADMIN.0,
            ACL_ADMIN.1,
        ));
    let admin = rocketmq_blocking::Admin::builder()
        .client_options(options.clone())
        .start()
        .expect("admin starts");
    admin
        .create_topic(&rocketmq_blocking::TopicConfig::new(&topic, 2))
        .expect("topic created");
    // Without credentials the broker refuses the send (5.x NO_PERMISSION, 4.x a
    // SYSTEM_ERROR naming its AclException).
    let out = wait_or_kill(
        spawn(&mut driver(&["produce", &ns, &topic, "1"])),
        Duration::from_secs(120),
    );
    assert!(
        !out.status.success(),
        "a send without credentials was accepted"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ProducerSendSyncFailed")
            && (err.contains("NO_PERMISSION") || err.contains("AclException")),
        "{err}"
    );
    // With them (SetProducerSessionCredentials, SetPushConsumerSessionCredentials).
    let with = |args: &[&str]| {
        let mut cmd = driver(args);
        cmd.env("RMQ_ACCESS_KEY", ACL_ADMIN.0)
            .env("RMQ_SECRET_KEY", ACL_ADMIN.1);
        finish(spawn(&mut cmd), Duration::from_secs(120), args[0])
    };
    let sent: HashSet<String> = ids(&with(&["produce", &ns, &topic, "5"]), "SENT ")
        .into_iter()
        .collect();
    assert_eq!(sent.len(), 5);
    let group = unique("py_acl");
    support::start_group_at_first_offsets_with(options, &topic, &group);
    let out = with(&["consume", &ns, &topic, &group, "6", "0", "90"]);
    let got: HashSet<String> = ids(&out, "GOT ").into_iter().collect();
    assert!(sent.is_subset(&got), "{out}");
}

/// A broadcasting consumer of the driver (`RMQ_MODEL=broadcasting`) under instance name
/// `instance`, its local offsets under `offsets`, until it got `count` messages.
fn broadcasting(topic: &str, group: &str, instance: &str, offsets: &Path, count: usize) -> Command {
    let mut cmd = driver(&[
        "consume",
        &namesrv(),
        topic,
        group,
        &count.to_string(),
        "0",
        "150",
    ]);
    cmd.env("RMQ_MODEL", "broadcasting")
        .env("RMQ_INSTANCE", instance)
        .env("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", offsets);
    cmd
}

/// The driver's Python producer: `count` acknowledged sends and one oneway; returns the
/// acknowledged ids and the oneway's body.
fn python_sends(topic: &str, count: usize) -> (HashSet<String>, String) {
    let out = run_driver(
        &["produce", &namesrv(), topic, &count.to_string()],
        Duration::from_secs(120),
    );
    let sent: HashSet<String> = ids(&out, "SENT ").into_iter().collect();
    assert_eq!(sent.len(), count, "{out}");
    (sent, format!("python-oneway-{count}"))
}

/// (ids, bodies) of the GOT lines.
fn received(out: &str) -> (Vec<String>, Vec<String>) {
    lines_after(out, "GOT ")
        .iter()
        .map(|l| {
            let f = fields(l);
            (f[0].to_string(), f.get(4).unwrap_or(&"").to_string())
        })
        .unzip()
}

#[test]
fn python_broadcasting_consumers_of_one_group_each_get_every_message() {
    let topic = unique("PyBcast");
    create_topic(&topic, 4);
    let group = unique("py_bcast");
    let offsets = std::env::temp_dir().join(unique("py_bcast_offsets"));
    // 10 acknowledged sends and the oneway: 11 messages for each consumer.
    let a = Watched::spawn(
        &mut broadcasting(&topic, &group, "bcast_a", &offsets, 11),
        "broadcasting consumer a",
    );
    let b = Watched::spawn(
        &mut broadcasting(&topic, &group, "bcast_b", &offsets, 11),
        "broadcasting consumer b",
    );
    position_by_probes(&topic, &[&a, &b]);
    let (sent, oneway) = python_sends(&topic, 10);
    for (name, c) in [("a", a), ("b", b)] {
        let out = checked(c.finish(Duration::from_secs(180)), name);
        let (got, bodies) = received(&out);
        let distinct: HashSet<String> = got.iter().cloned().collect();
        assert_eq!(got.len(), 11, "consumer {name}: {out}");
        assert!(
            distinct.is_superset(&sent),
            "consumer {name} missed one: {out}"
        );
        assert!(
            bodies.contains(&oneway),
            "consumer {name}: the oneway: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&offsets);
}

/// As the original (and Java): broadcasting keeps offsets in a local file, under the
/// client id (IP @ instance name), not on the broker. A consumer restarted with the same
/// instance name resumes from it: it gets what was sent while it was down and nothing
/// it had consumed before.
#[test]
fn python_broadcasting_consumer_restarted_resumes_from_its_local_offsets() {
    let topic = unique("PyBcastRestart");
    create_topic(&topic, 4);
    let group = unique("py_bcast_restart");
    let offsets = std::env::temp_dir().join(unique("py_bcast_restart_offsets"));
    let first = Watched::spawn(
        &mut broadcasting(&topic, &group, "bcast_restart", &offsets, 5),
        "first life",
    );
    position_by_probes(&topic, &[&first]);
    let (sent_before, _) = python_sends(&topic, 4);
    let out = checked(first.finish(Duration::from_secs(180)), "first life");
    let (got_before, _) = received(&out);
    assert!(
        got_before
            .iter()
            .cloned()
            .collect::<HashSet<_>>()
            .is_superset(&sent_before),
        "{out}"
    );
    // <dir>/<client id>/<group>/offsets.json, written at shutdown.
    let files: Vec<PathBuf> = std::fs::read_dir(&offsets)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().join(&group).join("offsets.json"))
                .filter(|p| p.exists())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        files.len(),
        1,
        "one offsets file under {}",
        offsets.display()
    );
    let text = std::fs::read_to_string(&files[0]).expect("offsets file");
    assert!(text.contains(&topic), "{text}");

    // Sent while no consumer runs: a consumer starting without an offset would begin at
    // each queue's end and never see these.
    let (sent_down, oneway_down) = python_sends(&topic, 3);
    let out = finish(
        spawn(&mut broadcasting(
            &topic,
            &group,
            "bcast_restart",
            &offsets,
            4,
        )),
        Duration::from_secs(180),
        "second life",
    );
    let (got, bodies) = received(&out);
    let got: HashSet<String> = got.into_iter().collect();
    assert!(
        got.is_superset(&sent_down),
        "missed one sent while down: {out}"
    );
    assert!(bodies.contains(&oneway_down), "{out}");
    assert_eq!(got.len(), 4, "nothing consumed before came again: {out}");
    assert!(got.is_disjoint(&got_before.into_iter().collect()), "{out}");
    let _ = std::fs::remove_dir_all(&offsets);
}

/// rocketmq-client-python 2.0.0's `PushConsumer.subscribe` wraps the listener: on an
/// exception it returns `RECONSUME_LATER` from an `except` block, but its `finally`
/// raises the exception again, so ctypes prints it ("Exception ignored on calling ctypes
/// callback function") and hands the library no return value at all. The message must
/// come again (through the retry topic), the process keep running and consuming.
#[test]
fn python_listener_that_raises_gets_the_message_redelivered() {
    let topic = unique("PyRaise");
    create_topic(&topic, 4);
    let group = unique("py_raise");
    start_group_at_first_offsets(&topic, &group);
    let mut cmd = driver(&["consume", &namesrv(), &topic, &group, "7", "0", "150"]);
    // One message a callback call: with a batch, the first failure sends the rest of it
    // back too (as the original: its callback is called per message, the first failure
    // fails the batch), and a message behind failures again and again waits for ever
    // longer retry delays.
    cmd.env("RMQ_RAISE", "1").env("RMQ_BATCH", "1");
    let consumer = spawn(&mut cmd);
    // The group's offsets are stored at 0: no probes needed.
    let (sent, oneway) = python_sends(&topic, 6);
    let out = wait_or_kill(consumer, Duration::from_secs(180));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let out = checked(out, "consume (raising)");
    let raised: Vec<String> = ids(&out, "RAISED ");
    let (got, bodies) = received(&out);
    assert_eq!(got.len(), 7, "{out}");
    assert!(bodies.contains(&oneway), "{out}");
    let got_set: HashSet<String> = got.iter().cloned().collect();
    assert!(got_set.is_superset(&sent), "{out}");
    for id in &got {
        assert_eq!(
            raised.iter().filter(|r| *r == id).count(),
            1,
            "{id}: raised once, then delivered again: {out}"
        );
    }
    for l in lines_after(&out, "GOT ") {
        let times: u32 = fields(&l)[8].parse().expect("reconsume times");
        assert!(times >= 1, "a redelivery counts its attempts: {l}");
    }
    assert!(
        err.contains("RuntimeError: listener failure for"),
        "ctypes printed the exception: {err}"
    );
}
