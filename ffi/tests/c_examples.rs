//! The C examples in `ffi/examples/`, compiled with the system C compiler against the
//! library this package builds and run against one real RocketMQ cluster (testkit):
//! they send every way, consume with a push and a lite pull consumer, and every message
//! the broker acknowledged must be read back, counted by message id. The same programs
//! then run under Valgrind: no definite leak, no invalid access, including a consumer
//! freed while its listener is in flight. (The Python package no longer goes through
//! this library: `python/tests/pytest_suite.rs` builds and tests its wheel.)

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_blocking::testkit::Cluster;

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();
static NAMESRV: OnceLock<String> = OnceLock::new();
static BUILT: Mutex<Option<HashMap<&'static str, PathBuf>>> = Mutex::new(None);

fn namesrv() -> &'static str {
    NAMESRV.get_or_init(|| {
        let c = CLUSTER.get_or_init(|| {
            // The workspace's target directory (the test runs in ffi/, where the
            // launcher's default `./target` would be a second jar cache).
            let work_dir = profile_dir()
                .parent()
                .expect("target")
                .join("rocketmq-testkit");
            let mut b = Cluster::builder()
                .work_dir(work_dir)
                .brokers(1)
                .broker_config("waitTimeMillsInSendQueue", "5000")
                // Transaction checks within seconds for transaction.c (defaults: a
                // 6 s timeout, rounds of 30-60 s, op records every 3 s on 5.x).
                .broker_config("transactionCheckInterval", "1000")
                .broker_config("transactionTimeOut", "2000")
                .broker_config("transactionOpBatchInterval", "200")
                .broker_config("osPageCacheBusyTimeOutMills", "5000");
            if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
                b = b.version(&v);
            }
            Mutex::new(
                b.start()
                    .unwrap_or_else(|e| panic!("starting the cluster: {e}")),
            )
        });
        c.lock().unwrap_or_else(|e| e.into_inner()).namesrv_addr()
    })
}

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// `target/debug` (or the profile's directory): the test binary lives in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// The directory holding `librocketmq_blocking.so`. `cargo build` puts it in the
/// profile's directory; `cargo test` alone does not build a library without an rlib, so
/// then it is built here, once, into a target directory of its own (the outer cargo
/// holds the lock of the shared one while tests run).
fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| with_soname_link(find_or_build_lib_dir()))
        .clone()
}

/// Links the library's soname (`librocketmq_blocking.so.0.<minor>`, set by `build.rs`) to
/// the file cargo built, as `ffi/install.sh` does in a prefix: a program linked with
/// `-lrocketmq_blocking` asks the loader for the soname.
fn with_soname_link(dir: PathBuf) -> PathBuf {
    let soname = format!(
        "librocketmq_blocking.so.{}.{}",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR")
    );
    let link = dir.join(&soname);
    if std::fs::symlink_metadata(&link).is_err() {
        // Another test binary may make it at the same moment.
        let _ = std::os::unix::fs::symlink("librocketmq_blocking.so", &link);
    }
    assert!(link.exists(), "no {soname} in {}", dir.display());
    dir
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The latest modification time of a file under `dir`.
fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                newest = newest.max(modified(&path));
            }
        }
    }
    newest
}

fn find_or_build_lib_dir() -> PathBuf {
    {
        let profile = profile_dir();
        // A library older than a source file was built from older sources (`cargo test`
        // rebuilt the tests but not the cdylib): then build a fresh one instead.
        let lib = profile.join("librocketmq_blocking.so");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let newest = [root.join("src"), root.join("ffi/src")]
            .iter()
            .filter_map(|d| newest_mtime(d))
            .max();
        if let (Some(lib_time), Some(src_time)) = (modified(&lib), newest) {
            if lib_time >= src_time {
                return profile;
            }
        }
        let target = profile.parent().expect("target").join("ffi-lib");
        eprintln!("building librocketmq_blocking.so into {}", target.display());
        let status = Command::new(env!("CARGO"))
            .args(["build", "--locked", "-p", "rocketmq-blocking-ffi", "--lib"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .status()
            .expect("running cargo");
        assert!(
            status.success(),
            "cargo build -p rocketmq-blocking-ffi failed"
        );
        let dir = target.join("debug");
        assert!(
            dir.join("librocketmq_blocking.so").exists(),
            "no library in {}",
            dir.display()
        );
        dir
    }
}

/// The C block of `docs/c.md` ("From C", linked from the README), written to `hello.c`.
fn readme_example() -> PathBuf {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/c.md"))
            .expect("docs/c.md");
    let section = readme.split("# From C").nth(1).expect("a From C section");
    let code = section
        .split("```c\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a ```c block");
    let dir = profile_dir().join("ffi-examples");
    std::fs::create_dir_all(&dir).expect("output directory");
    let path = dir.join("hello.c");
    std::fs::write(&path, code).expect("writing hello.c");
    path
}

/// Compiles `ffi/examples/<name>.c` once per run against `librocketmq_blocking.so`.
fn example(name: &'static str) -> PathBuf {
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let lib_dir = lib_dir();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = lib_dir.join("ffi-examples");
    std::fs::create_dir_all(&out_dir).expect("output directory");
    let exe = out_dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-D_POSIX_C_SOURCE=200809L",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-g",
            "-pthread",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(if name == "hello" {
            readme_example()
        } else {
            crate_dir.join("examples").join(format!("{name}.c"))
        })
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib_dir)
        .arg("-lrocketmq_blocking")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(status.success(), "compiling {name}.c failed");
    built.insert(name, exe.clone());
    exe
}

/// Runs a program with `NAMESRV_ADDR` set, killed after `limit`.
fn run(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .env("NAMESRV_ADDR", namesrv())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the example");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + limit;
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = waiter.join().expect("waiter").expect("output");
    eprintln!("--- {:?}\n{}", cmd, String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The ids after `prefix` ("ack " or "msg ") on each line.
fn ids(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| rest.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// Every acknowledged id is among the received ones; returns (received, duplicates).
fn check_read_back(what: &str, acked: &[String], received: &[String]) -> (usize, usize) {
    let set: HashSet<&String> = received.iter().collect();
    let lost: Vec<&String> = acked.iter().filter(|id| !set.contains(id)).collect();
    let dups = received.len() - set.len();
    eprintln!(
        "{what}: acked {} received {} lost {} duplicates {dups}",
        acked.len(),
        received.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{what}: {} acknowledged messages never arrived: {lost:?}",
        lost.len()
    );
    (received.len(), dups)
}

/// The JSON of a program's `stats <json>` line (`rmq_*_stats_json`).
fn stats(text: &str) -> serde_json::Value {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("stats "))
        .unwrap_or_else(|| panic!("no stats line in {text}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("stats JSON {line}: {e}"))
}

/// A counter of every topic of a stats JSON, summed.
fn over_topics(stats: &serde_json::Value, field: &str) -> u64 {
    let topics = stats["topics"].as_object().expect("a topics object");
    topics.values().filter_map(|t| t[field].as_u64()).sum()
}

fn produce(topic: &str, count: usize) -> Vec<String> {
    produce_with(topic, count, &[])
}

/// `produce` with the examples' switches in `env` (`RMQ_EXAMPLE_AUTO_BATCH`,
/// `RMQ_EXAMPLE_SERIALIZE`).
fn produce_with(topic: &str, count: usize, env: &[(&str, &str)]) -> Vec<String> {
    let mut cmd = Command::new(example("produce"));
    cmd.arg(topic).arg(count.to_string());
    cmd.envs(env.iter().copied());
    let out = run(&mut cmd, Duration::from_secs(600));
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "produce failed: {}\n{text}",
        out.status
    );
    assert!(text.contains("null check ok"), "{text}");
    // The selector picked 7 % 4 queues.
    assert!(text.contains("selector queue 3"), "{text}");
    let acked = ids(&text, "ack ");
    // count sync + count async + async with a selector + selector + to a queue + a
    // batch of three.
    assert_eq!(acked.len(), 2 * count + 6, "{text}");
    assert!(
        text.contains(&format!("summary acked={} oneway=1", 2 * count + 6)),
        "{text}"
    );
    // Every message, the one-way one included, went through the send hook and counts
    // in the stats as sent (a batch as its three messages).
    let sent = 2 * count + 7;
    assert!(
        text.contains(&format!(
            "hooks before={sent} after_ok={sent} after_failed=0"
        )),
        "{text}"
    );
    let s = stats(&text);
    assert_eq!(over_topics(&s, "messages_sent"), sent as u64, "{s}");
    assert_eq!(over_topics(&s, "failed"), 0, "{s}");
    let t = s["topics"].as_object().and_then(|t| t.values().next());
    let latency = t.map(|t| &t["send_latency"]).expect("a topic");
    assert!(latency["count"].as_u64() >= Some(1), "{s}");
    assert!(
        latency["max_us"].as_u64() >= latency["p50_us"].as_u64(),
        "{s}"
    );
    assert_eq!(s["async_in_flight"], 0, "{s}");
    assert!(s["client"]["connections"].as_u64() >= Some(1), "{s}");
    acked
}

#[test]
fn the_readme_c_example_works_as_written() {
    let out = run(
        &mut Command::new(example("hello")),
        Duration::from_secs(120),
    );
    let text = stdout(&out);
    assert!(out.status.success(), "hello failed: {}\n{text}", out.status);
    let id = text.strip_prefix("sent ").map(str::trim).unwrap_or("");
    assert_eq!(id.len(), 32, "a message id in {text:?}");
}

/// With auto-batching on, every send of the C producer still gets its own result (one
/// message id each, all distinct), and a consumer reads every acknowledged message back.
#[test]
fn a_c_producer_with_auto_batch_gets_its_own_result_per_send_and_every_message_arrives() {
    let topic = unique("CAutoBatch");
    let acked = produce_with(&topic, 20, &[("RMQ_EXAMPLE_AUTO_BATCH", "1")]);
    let distinct: HashSet<&String> = acked.iter().collect();
    assert_eq!(distinct.len(), acked.len(), "{acked:?}");
    // A send's own id, not a batch's (the explicit batch of three prints its first).
    assert!(acked.iter().all(|id| id.len() == 32), "{acked:?}");
    let push = run(
        Command::new(example("consume")).args([
            &topic,
            &unique("c_ab_push"),
            &acked.len().to_string(),
            "tags=TagA",
        ]),
        Duration::from_secs(300),
    );
    assert!(push.status.success(), "consume failed:\n{}", stdout(&push));
    check_read_back("auto-batch push", &acked, &ids(&stdout(&push), "msg "));
}

#[test]
fn c_programs_send_every_way_and_read_back_every_acknowledged_message() {
    let topic = unique("CTopic");
    let acked = produce(&topic, 5);

    let push = run(
        Command::new(example("consume")).args([
            &topic,
            &unique("c_push"),
            &acked.len().to_string(),
            "tags=TagA",
        ]),
        Duration::from_secs(300),
    );
    assert!(push.status.success(), "consume failed:\n{}", stdout(&push));
    check_read_back("push", &acked, &ids(&stdout(&push), "msg "));
    let held: usize = stdout(&push)
        .lines()
        .find_map(|l| l.strip_prefix("assigned_queues="))
        .and_then(|n| n.trim().parse().ok())
        .expect("an assigned_queues line");
    assert!(held >= 1, "{}", stdout(&push));
    // The consume hook saw the traceparent the producer's send hook added, and the
    // stats count what the listener acknowledged.
    let traced: usize = stdout(&push)
        .lines()
        .find_map(|l| l.strip_prefix("traced="))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a traced= line");
    assert!(traced >= acked.len(), "{}", stdout(&push));
    assert!(stdout(&push).contains("hook_success="), "{}", stdout(&push));
    let s = stats(&stdout(&push));
    assert!(
        s["topics"][&topic]["consumed_ok"].as_u64() >= Some(acked.len() as u64),
        "{s}"
    );
    assert!(
        s["topics"][&topic]["pulled"].as_u64() >= Some(acked.len() as u64),
        "{s}"
    );
    // The topic's four queues (the group's retry topic has its own).
    let of_topic = s["queues"]
        .as_array()
        .map(|qs| qs.iter().filter(|q| q["topic"] == topic.as_str()).count());
    assert_eq!(of_topic, Some(4), "{s}");

    let orderly = run(
        Command::new(example("consume")).args([
            &topic,
            &unique("c_orderly"),
            &acked.len().to_string(),
            "tags=TagA",
            "orderly",
        ]),
        Duration::from_secs(300),
    );
    assert!(
        orderly.status.success(),
        "orderly consume failed:\n{}",
        stdout(&orderly)
    );
    check_read_back("orderly", &acked, &ids(&stdout(&orderly), "msg "));

    let lite = run(
        Command::new(example("lite_pull")).args([
            &topic,
            &unique("c_lite"),
            &acked.len().to_string(),
            "tag=TagA",
        ]),
        Duration::from_secs(300),
    );
    assert!(
        lite.status.success(),
        "lite_pull failed:\n{}",
        stdout(&lite)
    );
    check_read_back("lite pull", &acked, &ids(&stdout(&lite), "msg "));
    let s = stats(&stdout(&lite));
    assert!(
        s["topics"][&topic]["consumed_ok"].as_u64() >= Some(acked.len() as u64),
        "{s}"
    );

    // Assigned queues, sought to their beginning, one paused and resumed; the committed
    // offsets add up to what was read.
    let assigned = run(
        Command::new(example("lite_pull")).args([
            &topic,
            &unique("c_assign"),
            &acked.len().to_string(),
            "tag=TagA",
            "assign",
        ]),
        Duration::from_secs(300),
    );
    let text = stdout(&assigned);
    assert!(
        assigned.status.success(),
        "lite_pull assign failed:\n{text}"
    );
    assert!(text.contains("assigned 4 queues"), "{text}");
    assert!(
        text.contains("assignment 4 queues offset_for_time_0=0"),
        "{text}"
    );
    assert!(text.contains("tags_match=1"), "{text}");
    let received = ids(&text, "msg ");
    check_read_back("lite pull assign", &acked, &received);
    let committed: i64 = text
        .lines()
        .filter_map(|l| l.strip_prefix("committed "))
        .filter_map(|l| l.split("offset=").nth(1))
        .map(|o| o.trim().parse::<i64>().expect("offset"))
        .sum();
    assert_eq!(committed, received.len() as i64, "{text}");

    // Freed while a (slow) listener call is in flight: the free waits for it, and no
    // call starts afterwards.
    let slow = run(
        Command::new(example("consume")).args([&topic, &unique("c_slow"), "1", "slow"]),
        Duration::from_secs(300),
    );
    let text = stdout(&slow);
    assert!(slow.status.success(), "slow consume failed:\n{text}");
    assert!(
        text.contains("in_flight_at_free=") && !text.contains("in_flight_at_free=0 "),
        "{text}"
    );
    assert!(
        text.contains("in_flight_after_free=0 calls_after_free=0"),
        "{text}"
    );
}

/// Runs a command under Valgrind and checks its report: exit 0, no error, no definite
/// leak. Returns the program's stdout.
fn under_valgrind(args: &[&str], name: &'static str, log: &Path) -> String {
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--show-leak-kinds=definite",
        "--num-callers=30",
    ])
    .arg(format!("--log-file={}", log.display()))
    .arg(example(name))
    .args(args);
    let out = run(&mut cmd, Duration::from_secs(900));
    let report = std::fs::read_to_string(log).unwrap_or_default();
    let summary: Vec<&str> = report
        .lines()
        .filter(|l| {
            l.contains("ERROR SUMMARY")
                || l.contains("definitely lost")
                || l.contains("in use at exit")
        })
        .collect();
    eprintln!("valgrind {name} {args:?}: {summary:?}");
    assert!(
        out.status.success(),
        "{name} under valgrind exited {}:\n{report}\n{}",
        out.status,
        stdout(&out)
    );
    assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
    assert!(
        report.contains("definitely lost: 0 bytes")
            || report.contains("All heap blocks were freed"),
        "{report}"
    );
    stdout(&out)
}

#[test]
fn c_programs_under_valgrind_leak_nothing_and_touch_no_freed_memory() {
    let have = Command::new("valgrind")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        have,
        "valgrind is not installed (.ci/run installs it: apt-get install -y valgrind)"
    );
    let topic = unique("CValgrind");
    let dir = profile_dir().join("ffi-examples");
    std::fs::create_dir_all(&dir).expect("log directory");

    // Few messages: everything runs some 20-50 times slower under Valgrind.
    let text = under_valgrind(&[&topic, "2"], "produce", &dir.join("valgrind-produce.log"));
    let acked = ids(&text, "ack ");
    assert_eq!(acked.len(), 10, "{text}");

    let expect = acked.len().to_string();
    let push = under_valgrind(
        &[&topic, &unique("vg_push"), &expect, "tags=TagA"],
        "consume",
        &dir.join("valgrind-consume.log"),
    );
    check_read_back("push under valgrind", &acked, &ids(&push, "msg "));

    let lite = under_valgrind(
        &[&topic, &unique("vg_lite"), &expect, "tag=TagA"],
        "lite_pull",
        &dir.join("valgrind-lite.log"),
    );
    check_read_back("lite pull under valgrind", &acked, &ids(&lite, "msg "));

    // POP: received lists, receipts changed under their lock, acks (on 4.x, the
    // RMQ_UNSUPPORTED path).
    let pop = under_valgrind(
        &[&topic, &unique("vg_pop"), &expect],
        "simple",
        &dir.join("valgrind-simple.log"),
    );
    if !pop.contains("unsupported response_code=3") {
        check_read_back("pop under valgrind", &acked, &ids(&pop, "msg "));
    }

    let slow = under_valgrind(
        &[&topic, &unique("vg_slow"), "1", "slow"],
        "consume",
        &dir.join("valgrind-slow.log"),
    );
    assert!(
        slow.contains("in_flight_after_free=0 calls_after_free=0"),
        "{slow}"
    );
    assert!(!slow.contains("in_flight_at_free=0 "), "{slow}");

    // Every admin query, with the lists, stats and messages it hands out.
    let admin = under_valgrind(
        &[&unique("CValgrindAdmin"), &unique("vg_admin")],
        "admin",
        &dir.join("valgrind-admin.log"),
    );
    assert!(admin.contains("summary ok=1"), "{admin}");

    // A transaction producer whose check callback runs on the crate's check threads.
    let tx = under_valgrind(
        &[&unique("CValgrindTx"), "3"],
        "transaction",
        &dir.join("valgrind-transaction.log"),
    );
    assert!(
        tx.contains("summary executed=3 unknown=1 checked=1"),
        "{tx}"
    );
}

#[test]
fn a_c_transaction_producer_commits_rolls_back_and_answers_the_broker_check() {
    let topic = unique("CTxTopic");
    let out = run(
        Command::new(example("transaction")).args([&topic, "6"]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "transaction failed: {}\n{text}",
        out.status
    );
    let sent: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("sent "))
        .filter_map(|l| l.split_once(' '))
        .map(|(id, st)| (id.to_string(), st.to_string()))
        .collect();
    assert_eq!(sent.len(), 6, "{text}");
    let of = |state: &str| -> Vec<String> {
        sent.iter()
            .filter(|(_, s)| s == state)
            .map(|(id, _)| id.clone())
            .collect()
    };
    let (committed, rolled_back, unknown) = (of("commit"), of("rollback"), of("unknown"));
    assert_eq!(
        (committed.len(), rolled_back.len(), unknown.len()),
        (2, 2, 2),
        "{text}"
    );
    let checked: HashSet<String> = ids(&text, "checked ").into_iter().collect();
    assert_eq!(checked, unknown.iter().cloned().collect(), "{text}");

    // What a consumer sees: the committed and the checked ones, never the rolled back.
    let want: Vec<String> = committed.iter().chain(&unknown).cloned().collect();
    let consumed = run(
        Command::new(example("consume")).args([&topic, &unique("c_tx_g"), "4"]),
        Duration::from_secs(300),
    );
    let seen = ids(&stdout(&consumed), "msg ");
    let (n, dups) = check_read_back("transaction", &want, &seen);
    assert_eq!((n, dups), (4, 0), "{}", stdout(&consumed));
    assert!(
        seen.iter().all(|id| !rolled_back.contains(id)),
        "a rolled-back message came"
    );
}

/// The client options' namespace reaches the wire: what a plain C producer sends to
/// `ns%Topic` a C consumer with the namespace `ns` reads as `Topic`.
/// `rmq_client_options_serialize_type(RMQ_SERIALIZE_ROCKETMQ)`: a producer and a lite
/// pull consumer whose requests carry the binary headers send and read back everything.
#[test]
fn c_clients_with_binary_request_headers_send_and_read_back_every_message() {
    let topic = unique("CBinary");
    let binary = [("RMQ_EXAMPLE_SERIALIZE", "rocketmq")];
    let acked = produce_with(&topic, 3, &binary);
    let out = run(
        Command::new(example("lite_pull"))
            .args([
                topic.as_str(),
                &unique("c_binary"),
                &acked.len().to_string(),
                "tag=TagA",
            ])
            .envs(binary),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "lite_pull with binary headers failed:\n{text}"
    );
    check_read_back("binary headers", &acked, &ids(&text, "msg "));
}

#[test]
fn a_c_consumer_with_a_namespace_in_its_client_options_reads_the_namespaced_topic() {
    let ns = unique("cns");
    let topic = unique("CNsTopic");
    let acked = produce(&format!("{ns}%{topic}"), 2);
    let out = run(
        Command::new(example("lite_pull")).args([
            topic.as_str(),
            &unique("c_ns"),
            &acked.len().to_string(),
            &format!("ns={ns}"),
            // The acknowledged sends carry TagA; the producer's oneway message does not
            // and would otherwise count towards the expected number.
            "tag=TagA",
        ]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "lite_pull with a namespace failed:\n{text}"
    );
    let (received, _) = check_read_back("namespaced lite pull", &acked, &ids(&text, "msg "));
    let shown: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("msg "))
        .filter_map(|l| l.rsplit_once(" topic="))
        .map(|(_, t)| t)
        .collect();
    assert_eq!(shown.len(), received, "{text}");
    assert!(shown.iter().all(|t| *t == topic), "topics shown: {shown:?}");
}

#[test]
fn a_c_requester_gets_the_replies_of_a_c_responder_sync_and_async_and_a_sent_back_request_comes_again(
) {
    let topic = unique("CRequestTopic");
    let out = run(
        Command::new(example("request")).args([&topic, "3"]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "request failed: {}\n{text}",
        out.status
    );
    let replies: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("reply "))
        .collect();
    assert_eq!(
        replies,
        ["re:request 0", "re:request 1", "re:request 2"],
        "{text}"
    );
    let async_replies: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("async reply "))
        .collect();
    assert_eq!(
        async_replies,
        ["re:async 0", "re:async 1", "re:async 2"],
        "{text}"
    );
    assert!(
        text.contains("summary replies=3 async_replies=3 answered=6 sent_back=1"),
        "{text}"
    );
}

/// The admin queries from C against the cluster: what a producer stored and a consumer
/// read is what the offsets, the consume stats and the lookups by offset id, unique key
/// and key report; a deleted topic leaves the topic list.
#[test]
fn a_c_admin_sees_the_offsets_progress_and_messages_of_a_topic_then_deletes_it() {
    let out = run(
        Command::new(example("admin")).args([&unique("CAdminTopic"), &unique("c_admin")]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(out.status.success(), "admin failed: {}\n{text}", out.status);
    for line in [
        "consumed=3",
        "topic_listed=1",
        "cluster_json=1",
        "queues=4 stored=3 total_max_offset=3 offset_at_0_is_min=1",
        "consume_stats queues=4 total_diff=0 committed=3",
        "reset_queues=4 diff_after_reset=3",
        "viewed=3 by_unique_key=3",
        "by_key=3 by_other_key=0",
        "deleted_on=1 listed_after_delete=0",
        "summary ok=1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

/// Issue 29 from C: a lite pull consumer subscribed while running reads an async batch;
/// the admin's connections and topic stats JSON show it and the topic; a commit of given
/// offsets is read back; an unsubscribe drops the queues; the readable queues are listed.
#[test]
fn a_c_lite_pull_consumer_subscribes_while_running_commits_given_offsets_and_unsubscribes() {
    let topic = unique("CFollowTopic");
    let group = unique("c_follow");
    let out = run(
        Command::new(example("lite_follow")).args([&topic, &group]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "lite_follow failed: {}\n{text}",
        out.status
    );
    for line in [
        "batch_async ok",
        "subscribed received=4",
        "held=4 committed_sum=4 earliest_found=1",
        "negative_commit=RMQ_INVALID_ARGUMENT",
        "after_unsubscribe assignment=0",
        "fetched=4",
        "summary ok=1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    let json = |label: &str| -> serde_json::Value {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} in\n{text}"));
        serde_json::from_str(line).expect("JSON")
    };
    let conns = json("connections ");
    assert_eq!(conns["connections"][0]["language"], "RUST", "{conns}");
    assert_eq!(conns["consumeType"], "CONSUME_ACTIVELY", "{conns}");
    assert_eq!(conns["subscriptions"][topic.as_str()], "*", "{conns}");
    let stats = json("topic_stats ");
    let queues = stats["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 4, "{stats}");
    let stored: i64 = queues.iter().filter_map(|q| q["maxOffset"].as_i64()).sum();
    assert_eq!(stored, 4, "{stats}");
}

/// The simple consumer from C: every acknowledged message received by POP and acked, a
/// receipt changed by `rmq_simple_consumer_change_invisible_duration`, nothing back after
/// the acks; on a 4.x cluster (`RMQ_TEST_VERSION=4.9.7`), `RMQ_UNSUPPORTED` with the
/// broker's code 3.
#[test]
fn a_c_simple_consumer_pops_acks_and_changes_invisible_time() {
    let topic = unique("CPopTopic");
    let acked = produce(&topic, 3);
    let out = run(
        Command::new(example("simple")).args([
            topic.as_str(),
            &unique("c_pop"),
            &acked.len().to_string(),
        ]),
        Duration::from_secs(300),
    );
    let text = stdout(&out);
    assert!(out.status.success(), "simple failed:\n{text}");
    if std::env::var("RMQ_TEST_VERSION").is_ok_and(|v| v.starts_with("4.")) {
        assert!(text.contains("unsupported response_code=3"), "{text}");
        return;
    }
    let (received, dups) = check_read_back("pop", &acked, &ids(&text, "msg "));
    eprintln!("C pop: received {received}, duplicated {dups}");
    assert!(text.contains("receipt_changed=1"), "{text}");
    assert!(text.contains("has_messages=1"), "{text}");
    assert!(text.contains("back_after_ack=0"), "{text}");
}
