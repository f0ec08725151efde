//! C programs written against the rocketmq-client-cpp 2.x headers alone (`examples/*.c`,
//! including only `include/C*.h` under their original names), compiled with the system C
//! compiler against this package's `librocketmq.so` and run against one real RocketMQ
//! cluster: `producer.c` sends every way, `push_consumer.c` reads every acknowledged
//! message back (counted by id), `pull_consumer.c` reads them again queue by queue,
//! `transaction.c` commits, rolls back and answers checks, and `safety.c` checks what crashed the original (NULL
//! arguments, destroy twice, destroy after shutdown, shutdown and destroy with a listener
//! running, destroying a lent message). The same programs run under Valgrind (no error,
//! no definite leak) and built with AddressSanitizer.

#[path = "../../tests/common/java.rs"]
#[allow(dead_code)]
mod java;
mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use java::lines_after;
use support::{
    acked, check, create_topic, lib_dir, namesrv, position_by_probes, profile_dir, run,
    start_group_at_first_offsets, stdout, unique, Watched,
};

/// Compiles `examples/<name>.c` (with AddressSanitizer when `asan`), once per variant and
/// test binary: tests run at once, and a second `cc` writing the file another test is
/// starting makes that start fail ("text file busy").
fn program(name: &str, asan: bool) -> PathBuf {
    static BUILT: Mutex<Vec<(String, bool, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, p)) = built.iter().find(|(n, a, _)| n == name && *a == asan) {
        return p.clone();
    }
    let p = compile(name, asan);
    built.push((name.to_string(), asan, p.clone()));
    p
}

fn compile(name: &str, asan: bool) -> PathBuf {
    let dir = profile_dir().parent().expect("target").join("compat-c");
    std::fs::create_dir_all(&dir).expect("the program directory");
    let out_path = dir.join(if asan {
        format!("{name}-asan")
    } else {
        name.to_string()
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let mut cc = Command::new("cc");
    cc.args(["-Wall", "-Wextra", "-Werror", "-std=c11", "-g"])
        .arg("-D_POSIX_C_SOURCE=200809L")
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("examples").join(format!("{name}.c")))
        .arg("-o")
        .arg(&out_path)
        .arg("-L")
        .arg(&lib)
        .args(["-lrocketmq", "-lpthread"])
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    if asan {
        cc.args(["-fsanitize=address", "-fno-omit-frame-pointer"]);
    }
    let out = cc
        .output()
        .expect("cc runs (a C compiler is a test prerequisite)");
    check(&format!("cc {name}.c"), &out);
    out_path
}

fn got(consumed: &str) -> HashSet<String> {
    lines_after(consumed, "GOT ")
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Produces `count` of each kind with `producer`, consumes them with `consumer` (plain
/// commands, or wrapped in Valgrind) and checks every acknowledged id came back.
fn round_trip(wrap: &dyn Fn(&Path, &str) -> Command, asan: bool, count: usize, limit: Duration) {
    let ns = namesrv();
    let topic = unique("CCompat");
    create_topic(&topic, 4);
    let out = run(
        wrap(&program("producer", asan), "producer").args([&ns, &topic, &count.to_string()]),
        limit,
    );
    check("producer", &out);
    let produced = stdout(&out);
    let ids = acked(&produced);
    // sync, SendAsync, SendMessageAsync, orderly, orderly async, sharding key, and a
    // batch of 3.
    assert_eq!(ids.len(), 6 * count + 3, "{produced}");
    assert!(produced.contains("VERSION rocketmq-blocking"), "{produced}");
    // +2: the oneway messages.
    let expected = (ids.len() + 2).to_string();
    let group = unique("c_compat");
    start_group_at_first_offsets(&topic, &group);
    let out = run(
        wrap(&program("push_consumer", asan), "push_consumer")
            .args([&ns, &topic, &group, &expected, "120"]),
        limit,
    );
    check("push_consumer", &out);
    let consumed = stdout(&out);
    let seen = got(&consumed);
    assert!(ids.is_subset(&seen), "missing {:?}", ids.difference(&seen));
    assert!(consumed.contains("c-oneway-0"), "{consumed}");
    assert!(consumed.contains("c-oneway-orderly-0"), "{consumed}");
    assert!(
        lines_after(&consumed, "GOT ")
            .iter()
            .all(|l| l.split_whitespace().nth(2) == Some("TagC")),
        "{consumed}"
    );
    // The pull consumer reads every queue from 0 to its end: the same messages.
    let out = run(
        wrap(&program("pull_consumer", asan), "pull_consumer").args([
            &ns,
            &topic,
            &unique("c_compat_pull"),
        ]),
        limit,
    );
    check("pull_consumer", &out);
    let pulled_out = stdout(&out);
    let pulled = got(&pulled_out);
    assert!(
        ids.is_subset(&pulled),
        "missing {:?}",
        ids.difference(&pulled)
    );
    assert_eq!(
        lines_after(&pulled_out, "GOT ").len(),
        ids.len() + 2,
        "{pulled_out}"
    );
    assert!(pulled_out.contains("QUEUES 4"), "{pulled_out}");
}

fn safety(wrap: &dyn Fn(&Path, &str) -> Command, asan: bool, limit: Duration) {
    let ns = namesrv();
    let topic = unique("CSafety");
    create_topic(&topic, 2);
    let out = run(
        wrap(&program("safety", asan), "safety").args([&ns, &topic, &unique("c_safety")]),
        limit,
    );
    check("safety", &out);
    assert!(stdout(&out).contains("SAFE OK"));
}

/// `transaction.c`: commit, rollback and unknown (checked, then committed); a push
/// consumer then gets exactly the committed and checked messages.
fn transactions(wrap: &dyn Fn(&Path, &str) -> Command, asan: bool, limit: Duration) {
    let ns = namesrv();
    let topic = unique("CTx");
    create_topic(&topic, 2);
    let out = run(
        wrap(&program("transaction", asan), "transaction").args([&ns, &topic, "6"]),
        limit,
    );
    check("transaction", &out);
    let sent_out = stdout(&out);
    let sent = lines_after(&sent_out, "SENT ");
    assert_eq!(sent.len(), 6, "{sent_out}");
    let by_state = |s: &str| -> HashSet<String> {
        sent.iter()
            .filter(|l| l.ends_with(s))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let checked: HashSet<String> = lines_after(&sent_out, "CHECK ").into_iter().collect();
    assert_eq!(checked, by_state("UNKNOWN"), "{sent_out}");
    let visible: HashSet<String> = by_state("COMMIT").union(&checked).cloned().collect();
    let group = unique("c_tx");
    start_group_at_first_offsets(&topic, &group);
    let out = run(
        wrap(&program("push_consumer", asan), "push_consumer")
            .args([&ns, &topic, &group, "4", "120"]),
        limit,
    );
    check("push_consumer", &out);
    assert_eq!(got(&stdout(&out)), visible, "{}", stdout(&out));
}

fn plain(p: &Path, _: &str) -> Command {
    Command::new(p)
}

#[test]
fn c_programs_of_the_2x_api_send_every_way_and_consume_everything() {
    round_trip(&plain, false, 5, Duration::from_secs(180));
}

#[test]
fn c_transaction_producer_commits_rolls_back_and_answers_checks() {
    transactions(&plain, false, Duration::from_secs(180));
}

#[test]
fn c_safety_null_double_destroy_and_shutdown_with_a_listener_running() {
    safety(&plain, false, Duration::from_secs(240));
}

/// Valgrind around `program`: exit 1 on any error or definite leak; the report in
/// `target/compat-c/valgrind-<name>-<pid>.log`.
fn valgrind(p: &Path, name: &str) -> Command {
    let log = profile_dir()
        .parent()
        .expect("target")
        .join("compat-c")
        .join(format!("valgrind-{name}-%p.log"));
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--show-leak-kinds=definite",
        "--num-callers=30",
    ])
    .arg(format!("--log-file={}", log.display()))
    .arg(p);
    cmd
}

fn have_valgrind() -> bool {
    let have = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have,
        "valgrind is not installed (.ci/run installs it: apt-get install -y valgrind)"
    );
    have
}

#[test]
fn c_programs_under_valgrind_have_no_errors_and_leak_nothing() {
    have_valgrind();
    // Few messages: everything runs some 20-50 times slower under Valgrind.
    round_trip(&valgrind, false, 2, Duration::from_secs(600));
    safety(&valgrind, false, Duration::from_secs(600));
    transactions(&valgrind, false, Duration::from_secs(600));
}

fn asan(p: &Path, _: &str) -> Command {
    let mut cmd = Command::new(p);
    // The Rust library is not instrumented: ASan checks the C side's accesses to what the
    // library returns (strings, results, lent messages) and leaks of the whole process.
    cmd.env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=1");
    cmd
}

#[test]
fn c_programs_with_address_sanitizer_touch_no_bad_memory() {
    round_trip(&asan, true, 3, Duration::from_secs(180));
    safety(&asan, true, Duration::from_secs(240));
    transactions(&asan, true, Duration::from_secs(180));
}

/// The functions the headers declare (`ROCKETMQCLIENT_API <type> <Name>(`).
fn declared() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("include/").flatten() {
        let text = std::fs::read_to_string(entry.path()).expect("a header");
        // A declaration may wrap after its return type (`CPullResult\nPull(`).
        let flat = text.replace('\n', " ");
        for decl in flat.split("ROCKETMQCLIENT_API ").skip(1) {
            let head = decl.split('(').next().unwrap_or_default();
            if let Some(name) = head.split([' ', '*']).next_back() {
                if !name.is_empty() && !name.starts_with('_') {
                    names.push(name.to_string());
                }
            }
        }
    }
    names.sort();
    names
}

#[test]
fn every_function_the_headers_declare_is_exported_by_librocketmq() {
    let names = declared();
    // The 105 functions of the 2.2.0 headers.
    assert_eq!(names.len(), 105, "{names:?}");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("librocketmq.so"))
        .output()
        .expect("nm runs (binutils)");
    check("nm -D", &out);
    let exported: HashSet<String> = stdout(&out)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect();
    let missing: Vec<&String> = names.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
}

/// `SetPushConsumerMessageModel(BROADCASTING)`: two consumers of one group each get every
/// message `producer.c` sends (every send function), not half each.
#[test]
fn c_broadcasting_consumers_of_one_group_each_get_every_message() {
    let ns = namesrv();
    let topic = unique("CBcast");
    create_topic(&topic, 4);
    let group = unique("c_bcast");
    let offsets = std::env::temp_dir().join(unique("c_bcast_offsets"));
    let count = 3;
    // What producer.c sends for `count` (see round_trip): acknowledged ones and 2 oneway.
    let expected = (6 * count + 3 + 2).to_string();
    let consumer = |instance: &str| {
        let mut cmd = plain(&program("push_consumer", false), "push_consumer");
        cmd.args([&ns, &topic, &group, &expected, "150", "broadcasting"])
            .env("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", &offsets)
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        Watched::spawn(&mut cmd, instance)
    };
    let (a, b) = (
        consumer("broadcasting consumer a"),
        consumer("broadcasting consumer b"),
    );
    position_by_probes(&topic, &[&a, &b]);
    let out = run(
        plain(&program("producer", false), "producer").args([&ns, &topic, &count.to_string()]),
        Duration::from_secs(120),
    );
    check("producer", &out);
    let ids = acked(&stdout(&out));
    assert_eq!(ids.len(), 6 * count + 3, "{}", stdout(&out));
    for (name, c) in [("a", a), ("b", b)] {
        let out = c.finish(Duration::from_secs(180));
        check(&format!("broadcasting consumer {name}"), &out);
        let seen = got(&stdout(&out));
        assert!(
            seen.is_superset(&ids),
            "consumer {name} missed {:?}",
            ids.difference(&seen).collect::<Vec<_>>()
        );
    }
    let _ = std::fs::remove_dir_all(&offsets);
}
