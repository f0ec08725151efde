//! Java ↔ Rust with ACL on the same cluster: the official Java client signing with
//! `AclClientRPCHook` (`java/AclInterop.java`, compiled here with `javac` against the
//! distribution's jars) produces for a Rust consumer, and consumes what a Rust producer
//! sent. Both sign as the same account.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::acl::{await_all, producer, push, recording, send_all};
use crate::env::*;

const MESSAGES: usize = 10;
/// A Java client run that takes longer than this is killed and fails the test.
const JAVA_TIMEOUT: Duration = Duration::from_secs(180);

/// The child's output once it exits; killed (and the test failed) past `timeout`.
fn wait_or_kill(mut child: Child, timeout: Duration) -> Output {
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        while !d.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !d.load(Ordering::SeqCst) {
            // The child is ours; its pid is not reused before we reap it below.
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            return true;
        }
        false
    });
    let _ = child.stdin.take();
    let out = child.wait_with_output().expect("waiting for java");
    done.store(true, Ordering::SeqCst);
    let killed = watchdog.join().unwrap_or(false);
    assert!(
        !killed,
        "the Java client ran longer than {timeout:?} and was killed"
    );
    out
}

/// The compiled class directory and the classpath for `version`.
fn java(version: &str) -> (PathBuf, OsString) {
    static BUILT: OnceLock<parking_lot::Mutex<Vec<String>>> = OnceLock::new();
    let lib = rocketmq_blocking::testkit::fetch_jars(version)
        .expect("the RocketMQ jars")
        .join("lib");
    let classes = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("acl-interop")
        .join(version);
    let mut cp = OsString::from(&classes);
    cp.push(":");
    cp.push(lib.join("*"));
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock();
    if !built.iter().any(|v| v == version) {
        std::fs::create_dir_all(&classes).expect("the class directory");
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/secure/java/AclInterop.java"
        );
        let out = Command::new("javac")
            .arg("-nowarn")
            .arg("-cp")
            .arg(lib.join("*"))
            .arg("-d")
            .arg(&classes)
            .arg(source)
            .output()
            .expect("javac runs (a JDK is a prerequisite of the tests)");
        assert!(
            out.status.success(),
            "javac failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        built.push(version.to_string());
    }
    (classes, cp)
}

/// Runs the Java program and returns the ids it printed after `prefix`.
fn run_java(env: &Env, args: &[&str], prefix: &str) -> Vec<String> {
    let (classes, cp) = java(&env.version);
    let home = classes.join("home");
    let child = Command::new("java")
        .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData"])
        .arg({
            let mut s = OsString::from("-Duser.home=");
            s.push(&home);
            s
        })
        .arg("-cp")
        .arg(&cp)
        .arg("AclInterop")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java runs");
    let out = wait_or_kill(child, JAVA_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Java client failed ({}): {}\n{}",
        out.status,
        stdout
            .lines()
            .filter(|l| !l.contains("|-INFO"))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|s| s.trim().to_string())
        .collect()
}

fn a_java_producer_with_acl_feeds_a_rust_consumer(env: &Env) {
    let started = Instant::now();
    let (c, seen) = recording(push(env, G_JAVA_TO_RUST, T_JAVA_TO_RUST, credentials(APP)));
    let n = MESSAGES.to_string();
    let group = unique("acl_java_pg");
    let sent: HashSet<String> = run_java(
        env,
        &[
            "produce",
            &env.namesrv,
            T_JAVA_TO_RUST,
            &group,
            APP.0,
            APP.1,
            &n,
        ],
        "SENT ",
    )
    .into_iter()
    .collect();
    assert_eq!(
        sent.len(),
        MESSAGES,
        "the Java producer sent {}",
        sent.len()
    );
    let (lost, dups) = await_all(&sent, &seen);
    c.shutdown();
    eprintln!(
        "{} Java producer -> Rust consumer: {MESSAGES} sent, lost {lost}, duplicates {dups} ({:.1}s)",
        env.version,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0);
}

fn a_rust_producer_with_acl_feeds_a_java_consumer(env: &Env) {
    let started = Instant::now();
    let p = producer(env, Some(credentials(APP)));
    let sent = send_all(&p, T_RUST_TO_JAVA, MESSAGES);
    p.shutdown();
    let n = MESSAGES.to_string();
    let got = run_java(
        env,
        &[
            "consume",
            &env.namesrv,
            T_RUST_TO_JAVA,
            G_RUST_TO_JAVA,
            APP.0,
            APP.1,
            &n,
            "90",
        ],
        "GOT ",
    );
    let (lost, dups) = compare(&sent, &got);
    eprintln!(
        "{} Rust producer -> Java consumer: {MESSAGES} sent, lost {lost}, duplicates {dups} ({:.1}s)",
        env.version,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(lost, 0);
}

on_both_lines!(
    a_java_producer_with_acl_feeds_a_rust_consumer,
    a_rust_producer_with_acl_feeds_a_java_consumer,
);
