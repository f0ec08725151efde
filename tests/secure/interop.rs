//! Java ↔ Rust with ACL on the same cluster: the official Java client signing with
//! `AclClientRPCHook` (`java/AclInterop.java`, compiled here with `javac` against the
//! distribution's jars) produces for a Rust consumer, and consumes what a Rust producer
//! sent. Both sign as the same account.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::acl::{await_all, producer, push, recording, send_all};
use crate::env::*;
use crate::java::{lines_after, JavaProgram};

const MESSAGES: usize = 10;
/// A Java client run that takes longer than this is killed and fails the test.
const JAVA_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the Java program and returns the ids it printed after `prefix`.
fn run_java(env: &Env, args: &[&str], prefix: &str) -> Vec<String> {
    let program = JavaProgram::compile(
        &env.version,
        "tests/secure/java/AclInterop.java",
        "AclInterop",
    );
    lines_after(&program.run(&[], args, JAVA_TIMEOUT), prefix)
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
