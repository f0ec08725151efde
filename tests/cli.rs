//! The `rmq` binary end to end, against one real RocketMQ cluster shared by this test
//! binary. Every test uses its own topic. `reliability` SIGKILLs consumer processes.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{Message, Producer};
use serde_json::Value;

#[path = "cli/admin.rs"]
mod admin;
#[path = "cli/mqadmin.rs"]
mod mqadmin;
#[path = "cli/reliability.rs"]
mod reliability;
#[path = "cli/request.rs"]
mod request;

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        // The machines these tests run on are shared and often overloaded; a broker that
        // waits longer than 200 ms (the default) to get to a send answers SYSTEM_BUSY,
        // which async sends do not retry. These tests are about the CLI, not about
        // broker flow control, so give it more room.
        Cluster::builder()
            .broker_config("waitTimeMillsInSendQueue", "5000")
            .start()
            .unwrap_or_else(|e| panic!("could not start the test cluster: {e}"))
    })
}

fn namesrv() -> String {
    cluster().namesrv_addr()
}

fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Runs `rmq` with `NAMESRV_ADDR` pointing at the test cluster.
fn rmq(args: &[&str]) -> Output {
    rmq_logging(args, None)
}

/// `rmq` with `RUST_LOG` set to `log`, if given (the log goes to stderr).
fn rmq_logging(args: &[&str], log: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmq"));
    cmd.args(args)
        .env("NAMESRV_ADDR", namesrv())
        .env_remove("RUST_LOG")
        .env_remove("ROCKETMQ_SERIALIZE_TYPE");
    if let Some(log) = log {
        cmd.env("RUST_LOG", log);
    }
    cmd.output().expect("run rmq")
}

fn stdout_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn created_topic(queues: u32) -> String {
    let topic = unique("cli");
    let out = rmq(&["topic", "create", &topic, "--queues", &queues.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    topic
}

/// Messages stored in `topic`, polled until it reaches `want` or 10 s pass.
fn stored(topic: &str, want: i64) -> i64 {
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = admin.total_max_offset(topic).expect("max offsets");
        if n >= want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn topic_create_then_route_prints_the_route_as_json() {
    let topic = unique("cli_route");
    let out = rmq(&["topic", "create", &topic, "--queues", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let created = &stdout_lines(&out)[0];
    assert_eq!(created["topic"], topic.as_str());
    assert_eq!(created["brokers"], serde_json::json!(["broker-a"]));

    let out = rmq(&["route", &topic]);
    assert!(out.status.success(), "{}", stderr(&out));
    let route: Value = serde_json::from_slice(&out.stdout).expect("route is JSON");
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 4);
    let broker = &cluster().broker_addrs()[0].1;
    assert_eq!(route["brokerDatas"][0]["brokerAddrs"]["0"], broker.as_str());
}

#[test]
fn send_count_three_prints_three_acks_and_a_summary() {
    let topic = created_topic(2);
    let out = rmq(&[
        "send", &topic, "--body", "hi", "--tag", "T", "--key", "k", "--prop", "a=b", "--count", "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 4, "{lines:?}");
    for ack in &lines[..3] {
        assert_eq!(ack["status"], "SEND_OK");
        assert_eq!(ack["broker"], "broker-a");
        assert_eq!(ack["msgId"].as_str().map(str::len), Some(32));
        assert!(ack["offsetMsgId"].is_string());
        assert!(ack["queue"].as_i64().is_some_and(|q| (0..2).contains(&q)));
        assert!(ack["queueOffset"].is_i64());
    }
    assert_eq!(lines[3]["sent"], 3);
    assert_eq!(lines[3]["failed"], 0);
    assert!(lines[3]["elapsedMs"].is_u64());
    assert_eq!(stored(&topic, 3), 3);
}

#[test]
fn async_and_oneway_sends_all_arrive() {
    let topic = created_topic(2);
    let out = rmq(&[
        "send", &topic, "--body", "a", "--count", "5", "--mode", "async",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 6);
    assert!(lines[..5].iter().all(|l| l["status"] == "SEND_OK"));
    assert_eq!(lines[5]["sent"], 5);

    let out = rmq(&[
        "send", &topic, "--body", "o", "--count", "4", "--mode", "oneway",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 5);
    assert!(lines[..4]
        .iter()
        .all(|l| l["queued"] == true && l["msgId"].is_string()));
    assert_eq!(stored(&topic, 9), 9);
}

#[test]
fn send_to_an_invalid_topic_fails_with_one_line_on_stderr() {
    let out = rmq(&["send", "no spaces allowed", "--body", "x"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("rmq: ") && err.contains("illegal character"),
        "{err}"
    );
}

#[test]
fn bad_input_sends_nothing() {
    let topic = created_topic(1);
    let cases: &[&[&str]] = &[
        &["--body", "x", "--prop", "novalue"],
        &["--body", "x", "--prop", "KEYS=reserved"],
        &[],
        &["--body-file", "/nonexistent/rmq-cli-test-body"],
        &["--body", "x", "--count", "0"],
    ];
    for extra in cases {
        let mut args = vec!["send", topic.as_str()];
        args.extend_from_slice(extra);
        let out = rmq(&args);
        assert!(!out.status.success(), "{extra:?}");
        assert!(out.stdout.is_empty(), "{extra:?}");
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{extra:?}: {}",
            stderr(&out)
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(stored(&topic, 0), 0);
}

/// Benchmarks and the reliability scenarios run one at a time: each one alone can
/// saturate a small machine. The guard is held for the whole test.
fn one_heavy_test_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn bench(args: &[&str]) -> Value {
    bench_of("produce", args)
}

/// Runs `rmq bench KIND ARGS` and returns its JSON summary.
fn bench_of(kind: &str, args: &[&str]) -> Value {
    let _one = one_heavy_test_at_a_time();
    let mut all = vec!["bench", kind];
    all.extend_from_slice(args);
    let out = rmq(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = text.lines().last().expect("a summary line");
    let summary: Value = serde_json::from_str(last).expect("the last line is JSON");
    assert!(
        text.lines().count() == 2 && text.contains("msg/s"),
        "a human line comes first: {text}"
    );
    // Progress lines come once a second; a run just past 1 s may end before the first tick
    // is printed on a loaded machine, so only a clearly longer run must show one.
    assert!(stderr(&out).contains("msg/s") || summary["elapsedMs"].as_f64() < Some(2500.0));
    summary
}

fn check_summary(s: &Value, messages: u64) {
    assert_eq!(s["messages"], messages, "{s}");
    assert_eq!(s["failures"], 0, "{s}");
    assert!(s["tps"].as_f64().is_some_and(|t| t > 0.0), "{s}");
    let lat = &s["latencyMs"];
    let quantiles = ["p50", "p90", "p99", "p999", "max"];
    for q in quantiles {
        assert!(lat[q].as_f64().is_some_and(|v| v > 0.0), "{q}: {s}");
    }
    for pair in quantiles.windows(2) {
        assert!(lat[pair[0]].as_f64() <= lat[pair[1]].as_f64(), "{s}");
    }
    let cpu = s["cpuSeconds"]["total"].as_f64();
    assert!(cpu.is_some_and(|c| c >= 0.0), "{s}");
    // The measured phase is part of the process; its CPU per message follows from its total
    // (rounded to 10 ms) within that rounding.
    let measured = s["measuredCpuSeconds"]["total"].as_f64();
    assert!(measured.is_some_and(|m| m >= 0.0) && measured <= cpu, "{s}");
    let per_msg = s["cpuUsPerMsg"].as_f64().expect("cpuUsPerMsg");
    let from_total = measured.unwrap_or_default() * 1e6 / messages as f64;
    assert!(
        (per_msg - from_total).abs() <= 0.005e6 / messages as f64 + 0.1,
        "{s}"
    );
    assert!(s["peakRssKiB"].as_u64().is_some_and(|k| k > 1000), "{s}");
    assert!(s["firstAckMs"].as_f64().is_some_and(|ms| ms > 0.0), "{s}");
    assert!(recent_epoch_us(&s["firstAckEpochUs"]), "{s}");
}

#[test]
fn bench_produce_sync_with_four_threads() {
    let topic = created_topic(4);
    let s = bench(&["--topic", &topic, "--count", "2000", "--threads", "4"]);
    check_summary(&s, 2000);
    assert_eq!(s["mode"], "sync");
    assert_eq!(s["threads"], 4);
    // Without --warmup everything is measured, as before warm-ups existed.
    assert!(s.get("warmup").is_none(), "{s}");
    assert_eq!(s["latencyMs"]["calls"], 2000);
    // The stats snapshot of the producer saw every acknowledged send, with latencies.
    assert_eq!(s["client"]["messagesSent"], 2000, "{s}");
    assert!(
        s["client"]["sendP99Ms"].as_f64().is_some_and(|ms| ms > 0.0),
        "{s}"
    );
    assert_eq!(stored(&topic, 2000), 2000);
}

#[test]
fn bench_produce_auto_batch_answers_every_send_of_many_threads() {
    let topic = created_topic(4);
    let s = bench(&[
        "--topic",
        &topic,
        "--count",
        "3000",
        "--threads",
        "32",
        "--auto-batch",
        "--batch-max-delay-ms",
        "20",
    ]);
    check_summary(&s, 3000);
    assert_eq!(s["autoBatch"], true, "{s}");
    // One call and one answer per message, batched or not.
    assert_eq!(s["latencyMs"]["calls"], 3000, "{s}");
    assert_eq!(s["client"]["messagesSent"], 3000, "{s}");
    assert_eq!(stored(&topic, 3000), 3000);
    // Not with explicit batches or oneway sends.
    let out = rmq(&[
        "bench",
        "produce",
        "--topic",
        &topic,
        "--auto-batch",
        "--batch",
        "4",
    ]);
    assert!(!out.status.success() && stderr(&out).contains("--auto-batch"));
}

/// Runs `rmq bench produce --warmup WARMUP ARGS` to a new topic and checks that the warm-up
/// was sent and answered, and left out of the measured figures; returns the summary.
fn bench_with_warmup(warmup: u64, args: &[&str]) -> Value {
    let topic = created_topic(4);
    let warmup_arg = warmup.to_string();
    let mut all = vec!["--topic", &topic, "--warmup", &warmup_arg];
    all.extend_from_slice(args);
    let s = bench(&all);
    let measured = s["messages"].as_u64().expect("messages");
    check_summary(&s, measured);
    let w = &s["warmup"];
    assert_eq!(w["messages"], warmup, "{s}");
    assert_eq!(w["failures"], 0, "{s}");
    assert!(w["elapsedMs"].as_f64().is_some_and(|ms| ms > 0.0), "{s}");
    // One call per message, and only the measured ones are timed; the topic gets both.
    assert_eq!(s["latencyMs"]["calls"], measured, "{s}");
    // The producer's own stats counted the same sends, warm-up included.
    assert_eq!(s["client"]["messagesSent"], warmup + measured, "{s}");
    assert_eq!(s["client"]["failed"], 0, "{s}");
    let total = (warmup + measured) as i64;
    assert_eq!(stored(&topic, total), total);
    s
}

#[test]
fn bench_produce_warmup_is_sent_first_and_left_out_of_the_measured_figures() {
    let s = bench_with_warmup(600, &["--count", "900", "--threads", "3"]);
    assert_eq!(s["messages"], 900, "{s}");
    // Async: the warm-up's callbacks count in the warm-up, never in the measured phase.
    let s = bench_with_warmup(
        500,
        &["--mode", "async", "--count", "800", "--inflight", "64"],
    );
    assert_eq!(s["messages"], 800, "{s}");
    // With --duration the clock starts after the warm-up: the measured phase gets it all.
    let s = bench_with_warmup(300, &["--duration", "1", "--threads", "2"]);
    assert!(
        s["elapsedMs"].as_f64().is_some_and(|ms| ms >= 1000.0),
        "{s}"
    );
}

#[test]
fn bench_produce_async() {
    let topic = created_topic(4);
    let s = bench(&["--topic", &topic, "--mode", "async", "--count", "2000"]);
    check_summary(&s, 2000);
    assert_eq!(s["mode"], "async");
    assert_eq!(s["threads"], 1);
    assert_eq!(stored(&topic, 2000), 2000);
}

#[test]
fn bench_produce_batches_count_messages_and_can_create_the_topic() {
    let topic = unique("cli_batch");
    let s = bench(&[
        "--topic",
        &topic,
        "--create-topic",
        "--queues",
        "2",
        "--batch",
        "16",
        "--count",
        "500",
        "--threads",
        "2",
        "--serialize",
        "json",
    ]);
    check_summary(&s, 500);
    // 250 per thread: 15 full batches and one of 10 each.
    assert_eq!(s["latencyMs"]["calls"], 32);
    assert_eq!(stored(&topic, 500), 500);
}

/// Sends `messages` (body, tag) to `topic` in-process and returns their msgIds.
fn send_all(topic: &str, messages: &[(&[u8], &str)]) -> Vec<String> {
    let producer = Producer::builder(unique("cli_test_producer"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("producer");
    let ids = messages
        .iter()
        .map(|(body, tag)| {
            let msg = Message::new(topic, body.to_vec()).with_tags(*tag);
            producer.send(&msg).expect("send").msg_id().to_string()
        })
        .collect();
    producer.shutdown();
    ids
}

/// Sends `n` messages with bodies `m0`, `m1`, ... and tag `T`; returns their msgIds.
fn send_numbered(topic: &str, n: usize) -> Vec<String> {
    let bodies: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let sent: Vec<(&[u8], &str)> = bodies.iter().map(|b| (b.as_bytes(), "T")).collect();
    send_all(topic, &sent)
}

/// Runs `rmq consume`; returns the message lines and checks the summary line.
fn consume(args: &[&str]) -> Vec<Value> {
    consume_with_log(args, None).0
}

/// [`consume`], with what `rmq consume` logged on stderr (warnings, and the consumer's
/// debug lines: queues taken and dropped, commits), for the messages of later assertions.
fn consume_logged(args: &[&str]) -> (Vec<Value>, String) {
    consume_with_log(args, Some("warn,rocketmq_blocking::consumer=debug"))
}

fn consume_with_log(args: &[&str], log: Option<&str>) -> (Vec<Value>, String) {
    let mut all = vec!["consume"];
    all.extend_from_slice(args);
    let out = rmq_logging(&all, log);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut lines = stdout_lines(&out);
    let summary = lines.pop().expect("a summary line");
    assert_eq!(
        summary,
        serde_json::json!({"consumed": lines.len()}),
        "{lines:?}"
    );
    (lines, stderr(&out))
}

/// `rmq consume TOPIC --group GROUP` with the whitespace-separated `extra` arguments.
fn consume_in(topic: &str, group: &str, extra: &str) -> Vec<Value> {
    let mut args = vec![topic, "--group", group];
    args.extend(extra.split_whitespace());
    consume(&args)
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

#[test]
fn consume_count_five_from_first_prints_the_five_messages_sent() {
    let topic = created_topic(2);
    let sent: Vec<(&[u8], &str)> = vec![
        (b"one", "TagA"),
        (b"two", "TagA"),
        ("drei \u{1F980}".as_bytes(), "TagA"),
        (b"four", "TagA"),
        (&[0xff, 0xfe, 0x00, 0x01], "TagA"),
    ];
    let ids = send_all(&topic, &sent);
    let group = unique("cli_consume");
    let lines = consume(&[
        &topic,
        "--group",
        &group,
        "--count",
        "5",
        "--from",
        "first",
        "--timeout",
        "60",
    ]);
    assert_eq!(lines.len(), 5, "{lines:?}");
    let got_ids: Vec<&str> = lines.iter().map(|l| l["msgId"].as_str().unwrap()).collect();
    assert_eq!(
        sorted(got_ids),
        sorted(ids.iter().map(String::as_str).collect())
    );
    let mut bodies = Vec::new();
    for l in &lines {
        assert_eq!(l["topic"], topic.as_str());
        assert_eq!(l["tags"], "TagA");
        assert_eq!(l["queue"]["broker"], "broker-a");
        assert!(l["queue"]["queueId"]
            .as_i64()
            .is_some_and(|q| (0..2).contains(&q)));
        assert!(l["queueOffset"].is_i64());
        assert_eq!(l["reconsumeTimes"], 0);
        assert_eq!(l["properties"]["UNIQ_KEY"], l["msgId"]);
        bodies.push(match l["bodyEncoding"].as_str() {
            None => l["body"].as_str().unwrap().to_string(),
            Some(enc) => format!("{enc}:{}", l["body"].as_str().unwrap()),
        });
    }
    assert_eq!(
        sorted(bodies),
        sorted(vec![
            "one".to_string(),
            "two".into(),
            "drei \u{1F980}".into(),
            "four".into(),
            "base64://4AAQ==".into(),
        ])
    );
}

#[test]
fn consume_expr_receives_only_the_tags_asked_for() {
    let topic = created_topic(2);
    let a: &[u8] = b"a";
    let b: &[u8] = b"b";
    send_all(
        &topic,
        &[
            (a, "TagA"),
            (b, "TagB"),
            (a, "TagA"),
            (b, "TagB"),
            (a, "TagA"),
            (b, "TagC"),
        ],
    );
    let group = unique("cli_consume_tag");
    // One more than there are: it runs to the timeout, time for a wrong tag to show up.
    let lines = consume(&[
        &topic,
        "--group",
        &group,
        "--expr",
        "TagA",
        "--from",
        "first",
        "--count",
        "4",
        "--timeout",
        "10",
    ]);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l["tags"] == "TagA" && l["body"] == "a"),
        "{lines:?}"
    );
}

#[test]
fn consume_times_out_on_an_empty_topic_with_consumed_zero() {
    let topic = created_topic(1);
    let group = unique("cli_consume_empty");
    let started = Instant::now();
    let out = rmq(&["consume", &topic, "--group", &group, "--timeout", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_lines(&out), [serde_json::json!({"consumed": 0})]);
    assert!(started.elapsed() >= Duration::from_secs(2));
}

#[test]
fn consume_stats_prints_the_consumer_figures_once_a_second_on_stderr() {
    let topic = created_topic(1);
    send_numbered(&topic, 6);
    for mode in ["", "--lite-pull"] {
        let group = unique("stats_g");
        // Half a second per message: three seconds of consumption, so several reports.
        let mut args = vec!["consume", &topic, "--group", &group, "--from", "first"];
        args.extend(["--count", "6", "--delay", "0.5", "--stats"]);
        args.extend(mode.split_whitespace());
        let out = rmq(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(
            stdout_lines(&out).len(),
            7,
            "six messages and the summary on stdout"
        );
        let reports: Vec<Value> = stderr(&out)
            .lines()
            .filter(|l| l.starts_with("{\"stats\""))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(reports.len() >= 2, "{mode}: {}", stderr(&out));
        let consumed: Vec<u64> = reports
            .iter()
            .map(|r| r["stats"]["consumed"].as_u64().unwrap())
            .collect();
        assert!(consumed.windows(2).all(|w| w[0] <= w[1]), "{consumed:?}");
        assert!(*consumed.last().unwrap() > 0, "{mode}: {consumed:?}");
        assert!(reports
            .iter()
            .all(|r| r["stats"]["pulled"].as_u64() >= Some(1)));
    }
}

#[test]
fn consume_stops_at_the_count_and_leaves_the_rest_to_the_group() {
    let topic = created_topic(2);
    let ids = send_numbered(&topic, 10);
    let group = unique("cli_consume_rest");
    let first = consume(&[&topic, "--group", &group, "--count", "3", "--from", "first"]);
    assert_eq!(first.len(), 3);
    // Held-back messages were not acknowledged (at least once: some may come again).
    let rest = consume(&[&topic, "--group", &group, "--timeout", "8"]);
    let mut seen: Vec<&str> = first
        .iter()
        .chain(&rest)
        .map(|l| l["msgId"].as_str().unwrap())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, sorted(ids.iter().map(String::as_str).collect()));
    assert!(rest.iter().all(|l| l["reconsumeTimes"] == 0), "{rest:?}");
}

#[test]
fn consume_rejects_bad_arguments() {
    for args in [
        &["consume", "T"][..], // no group
        &["consume", "T", "--group", "g", "--expr", "a", "--sql", "b"],
        &["consume", "T", "--group", "g", "--count", "0"],
        &["consume", "T", "--group", "g", "--from", "middle"],
        &["consume", "bad topic", "--group", "g", "--timeout", "1"],
        &["consume", "T", "--group", "g", "--lite-pull", "--orderly"],
        &[
            "consume",
            "T",
            "--group",
            "g",
            "--lite-pull",
            "--sql",
            "a > 1",
        ],
        &["consume", "T", "--group", "g", "--delay", "0"],
        &["consume", "T", "--group", "g", "--delay", "soon"],
    ] {
        let out = rmq(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            stderr(&out).lines().count(),
            1,
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn consume_lite_pull_stops_at_the_count_and_leaves_exactly_the_rest_to_the_group() {
    let topic = created_topic(2);
    let ids = send_numbered(&topic, 12);
    let group = unique("cli_consume_lite");
    let first = consume_in(
        &topic,
        &group,
        "--lite-pull --count 5 --from first --timeout 60",
    );
    assert_eq!(first.len(), 5, "{first:?}");
    // The count fell inside a polled batch: the queue was moved back to the first message
    // not printed before the commit, so the rest comes next time, and nothing printed.
    let rest = consume_in(&topic, &group, "--lite-pull --count 7 --timeout 60");
    let all: Vec<&str> = first
        .iter()
        .chain(&rest)
        .map(|l| l["msgId"].as_str().unwrap())
        .collect();
    assert_eq!(
        sorted(all),
        sorted(ids.iter().map(String::as_str).collect()),
        "each message exactly once"
    );
    assert!(first
        .iter()
        .chain(&rest)
        .all(|l| l["topic"] == topic.as_str() && l["queue"]["broker"] == "broker-a"));
}

#[test]
fn consume_timing_out_in_the_middle_of_a_backlog_leaves_the_rest_to_the_group() {
    let topic = created_topic(4);
    // Sync sends: on a broker that has just started, a thousand async sends in flight
    // can time out.
    let s = bench(&["--topic", &topic, "--count", "3000", "--threads", "4"]);
    check_summary(&s, 3000);
    let group = unique("cli_consume_backlog");
    // The timeout falls while listeners are busy: shutdown runs while the main thread
    // goes on printing, and the process ends soon after the timeout.
    let started = Instant::now();
    let first = consume(&[
        &topic,
        "--group",
        &group,
        "--from",
        "first",
        "--timeout",
        "2",
    ]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "shutdown took {took:?}");
    let rest = consume_in(&topic, &group, "--timeout 10");
    let mut ids: Vec<&str> = first
        .iter()
        .chain(&rest)
        .map(|l| l["msgId"].as_str().unwrap())
        .collect();
    let lines = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        3000,
        "first {}, rest {}",
        first.len(),
        rest.len()
    );
    eprintln!(
        "consume: {} then {} of 3000 in {took:?}, {} duplicates",
        first.len(),
        rest.len(),
        lines - ids.len()
    );
}

#[test]
fn consume_lite_pull_times_out_on_an_empty_topic_with_consumed_zero() {
    let topic = created_topic(1);
    let group = unique("cli_consume_lite_empty");
    let started = Instant::now();
    let out = rmq(&[
        "consume",
        &topic,
        "--group",
        &group,
        "--lite-pull",
        "--timeout",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_lines(&out), [serde_json::json!({"consumed": 0})]);
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert!(stderr(&out).contains("lite pull"), "{}", stderr(&out));
}

/// Sends 1000 messages with `rmq bench produce` to a new topic of 4 queues, drains them
/// with `rmq bench consume EXTRA` and checks and returns its summary.
fn bench_consume_of_a_fresh_backlog(extra: &[&str]) -> Value {
    let topic = created_topic(4);
    let s = bench(&["--topic", &topic, "--mode", "async", "--count", "1000"]);
    check_summary(&s, 1000);
    let group = unique("cli_bench_consume");
    let mut args = vec![
        "--topic",
        &topic,
        "--group",
        &group,
        "--count",
        "1000",
        "--timeout",
        "60",
    ];
    args.extend_from_slice(extra);
    let s = bench_of("consume", &args);
    assert_eq!(s["messages"], 1000, "{s}");
    // A new group on a quiet topic: every offset once (deliveries may exceed the count by
    // messages already pulled when the count was reached).
    assert_eq!(s["duplicates"], 0, "{s}");
    assert!(s["deliveries"].as_u64() >= Some(1000), "{s}");
    assert!(s["tps"].as_f64().is_some_and(|t| t > 0.0), "{s}");
    let lat = &s["latencyMs"];
    assert!(lat["p50"].as_f64() <= lat["max"].as_f64(), "{s}");
    assert_eq!(lat["calls"], 1000, "{s}");
    assert!(s["peakRssKiB"].as_u64().is_some_and(|k| k > 1000), "{s}");
    assert!(
        s["firstMessageMs"].as_f64().is_some_and(|ms| ms > 0.0),
        "{s}"
    );
    assert!(recent_epoch_us(&s["firstMessageEpochUs"]), "{s}");
    // The drain alone (first message to last) is within the run from the consumer's start
    // and excludes the start, which comes before the first message.
    let (drain, run) = (s["drainMs"].as_f64(), s["elapsedMs"].as_f64());
    assert!(drain.is_some() && drain <= run, "{s}");
    assert!(s["drainTps"].as_f64() >= s["tps"].as_f64(), "{s}");
    assert!(s["cpuUsPerMsg"].as_f64().is_some_and(|us| us >= 0.0), "{s}");
    assert!(
        s["drainCpuSeconds"]["total"].as_f64() <= s["cpuSeconds"]["total"].as_f64(),
        "{s}"
    );
    s
}

/// Whether `v` is a wall-clock time in µs since the epoch within the last minute.
fn recent_epoch_us(v: &Value) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as u64;
    v.as_u64()
        .is_some_and(|us| us <= now && us > now - 60_000_000)
}

#[test]
fn bench_consume_drains_what_bench_produce_sent() {
    let s = bench_consume_of_a_fresh_backlog(&[]);
    assert_eq!(s["mode"], "concurrently", "{s}");
    assert_eq!(s["threads"], 20, "{s}");
}

#[test]
fn bench_consume_lite_pull_drains_what_bench_produce_sent() {
    let s = bench_consume_of_a_fresh_backlog(&["--lite-pull"]);
    assert_eq!(s["mode"], "lite-pull", "{s}");
    assert_eq!(s["threads"], 1, "{s}");
}

#[test]
fn bench_consume_lite_pull_takes_no_push_options() {
    for extra in [&["--orderly"][..], &["--threads", "4"]] {
        let mut args = vec![
            "bench",
            "consume",
            "--topic",
            "T",
            "--group",
            "g",
            "--lite-pull",
        ];
        args.extend_from_slice(extra);
        let out = rmq(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(out.stdout.is_empty(), "{extra:?}");
        let err = stderr(&out);
        assert!(
            err.lines().count() == 1 && err.contains("cannot be used with"),
            "{extra:?}: {err}"
        );
    }
}
