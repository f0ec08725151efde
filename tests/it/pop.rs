//! POP consumption with the `SimpleConsumer` against the real broker: on 5.x, receive and
//! ack round trips, acked messages never back, unacked ones back after their invisible
//! time, `change_invisible_duration` moving that time both ways; on 4.x
//! (`RMQ_TEST_VERSION=4.9.7`), the typed "not supported by this broker" error.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rocketmq_blocking::{ConsumeFromWhere, ErrorKind, Message, ReceivedMessage, SimpleConsumer};

use crate::cluster;
use crate::consumer::producer;

fn broker_4x() -> bool {
    std::env::var("RMQ_TEST_VERSION").is_ok_and(|v| v.starts_with("4."))
}

fn simple(group: &str, topic: &str) -> SimpleConsumer {
    SimpleConsumer::builder(group)
        .client_options(cluster::options())
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .await_duration(Duration::from_secs(1))
        .start()
        .expect("simple consumer")
}

fn send(topic: &str, n: usize, prefix: &str) -> Vec<String> {
    let p = producer();
    let bodies: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for b in &bodies {
        p.send(&Message::new(topic, b.as_bytes().to_vec())).unwrap();
    }
    p.shutdown();
    bodies
}

fn body(m: &ReceivedMessage) -> String {
    String::from_utf8_lossy(m.message().body()).into_owned()
}

/// Receives until `until` says stop or `timeout` passes; every message is passed to `each`.
fn receive_for(
    c: &SimpleConsumer,
    timeout: Duration,
    invisible: Duration,
    mut each: impl FnMut(ReceivedMessage) -> bool,
) {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        for m in c.receive(32, invisible).expect("receive") {
            if each(m) {
                return;
            }
        }
    }
}

#[test]
fn pop_on_a_4x_broker_is_a_typed_not_supported_error() {
    if !broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_4x", 2);
    send(&topic, 1, "x");
    let c = simple(&cluster::unique("pop_4x_g"), &topic);
    let e = c.receive(1, Duration::from_secs(10)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!(e.response_code().map(|c| c.0), Some(3), "{e}");
    assert!(
        e.to_string().contains("not supported by this broker"),
        "{e}"
    );
    // The assignment query of the push consumer's POP mode too.
    let instance = cluster::instance(&cluster::unique("pop_4x_i"));
    let addr = cluster::cluster().lock().broker_addrs()[0].1.clone();
    let e = instance
        .api()
        .query_assignment(
            &addr,
            &topic,
            "g",
            instance.client_id(),
            "AVG",
            rocketmq_blocking::MessageModel::Clustering,
            Duration::from_secs(10),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}

#[test]
fn pop_receive_ack_round_trip_and_acked_messages_never_come_back() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_rt", 2);
    let sent = send(&topic, 40, "rt");
    let c = simple(&cluster::unique("pop_rt_g"), &topic);
    let invisible = Duration::from_secs(5);
    let mut seen: HashMap<String, usize> = HashMap::new();
    receive_for(&c, Duration::from_secs(60), invisible, |m| {
        assert_eq!(m.message().topic(), topic);
        assert_eq!(m.receipt_handle().split(' ').count(), 8);
        c.ack(&m).expect("ack");
        *seen.entry(body(&m)).or_default() += 1;
        seen.len() == sent.len()
    });
    let lost: Vec<&String> = sent.iter().filter(|b| !seen.contains_key(*b)).collect();
    assert!(lost.is_empty(), "lost {lost:?}");
    // Past the invisible time and the broker's revive scan: nothing comes back.
    let mut again = Vec::new();
    receive_for(&c, invisible * 3, invisible, |m| {
        again.push(body(&m));
        false
    });
    let dups: usize = seen.values().map(|n| n - 1).sum();
    println!(
        "pop round trip: sent {}, received {}, lost 0, duplicated {dups}, back after ack {}",
        sent.len(),
        seen.len(),
        again.len()
    );
    assert!(again.is_empty(), "acked messages came back: {again:?}");
}

#[test]
fn pop_unacked_messages_come_back_after_the_invisible_time() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_back", 1);
    send(&topic, 3, "back");
    let c = simple(&cluster::unique("pop_back_g"), &topic);
    let invisible = Duration::from_secs(5);
    let mut first: HashMap<String, Instant> = HashMap::new();
    receive_for(&c, Duration::from_secs(60), invisible, |m| {
        first.insert(body(&m), Instant::now());
        first.len() == 3
    });
    assert_eq!(first.len(), 3);
    let mut back: HashMap<String, Duration> = HashMap::new();
    receive_for(&c, Duration::from_secs(60), invisible, |m| {
        let b = body(&m);
        back.entry(b.clone()).or_insert(first[&b].elapsed());
        assert!(m.message().reconsume_times() >= 1, "a second delivery");
        c.ack(&m).expect("ack of the second delivery");
        back.len() == 3
    });
    println!("pop: unacked messages back after {back:?} (invisible {invisible:?})");
    assert_eq!(back.len(), 3, "came back: {back:?}");
    for (b, after) in &back {
        // The broker's timer has 1 s precision.
        assert!(
            *after >= invisible - Duration::from_secs(1),
            "{b} back early: {after:?}"
        );
    }
}

#[test]
fn pop_change_invisible_duration_extends_and_shortens_it() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_chg", 1);
    send(&topic, 2, "chg");
    let c = simple(&cluster::unique("pop_chg_g"), &topic);
    let mut got = Vec::new();
    receive_for(&c, Duration::from_secs(60), Duration::from_secs(60), |m| {
        got.push(m);
        got.len() == 2
    });
    assert_eq!(got.len(), 2);
    let mut shorter = got.pop().unwrap();
    let mut longer = got.pop().unwrap();
    let start = Instant::now();
    // From 60 s to 5 s; and one that would be back now in 60 s, kept for 20 s more first
    // shortened to 5 s then extended to 20 s.
    let old = shorter.receipt_handle();
    c.change_invisible_duration(&mut shorter, Duration::from_secs(5))
        .unwrap();
    assert_ne!(old, shorter.receipt_handle(), "a new receipt");
    c.change_invisible_duration(&mut longer, Duration::from_secs(5))
        .unwrap();
    c.change_invisible_duration(&mut longer, Duration::from_secs(20))
        .unwrap();
    let (sb, lb) = (body(&shorter), body(&longer));
    let mut back: HashMap<String, Duration> = HashMap::new();
    receive_for(&c, Duration::from_secs(60), Duration::from_secs(60), |m| {
        back.entry(body(&m)).or_insert(start.elapsed());
        c.ack(&m).unwrap();
        back.len() == 2
    });
    println!(
        "pop change invisible: shortened back after {:?}, extended back after {:?}",
        back.get(&sb),
        back.get(&lb)
    );
    let s = back[&sb];
    let l = back[&lb];
    assert!(s < Duration::from_secs(30), "shortened to 5 s: {s:?}");
    assert!(l >= Duration::from_secs(19), "extended to 20 s: {l:?}");
    assert!(
        l < Duration::from_secs(50),
        "extended to 20 s, not 60: {l:?}"
    );
}

#[test]
fn pop_an_ack_after_change_invisible_duration_uses_the_new_receipt() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_chg_ack", 1);
    send(&topic, 1, "chgack");
    let c = simple(&cluster::unique("pop_chg_ack_g"), &topic);
    let mut got = None;
    receive_for(&c, Duration::from_secs(60), Duration::from_secs(5), |m| {
        got = Some(m);
        true
    });
    let mut m = got.expect("a message");
    c.change_invisible_duration(&mut m, Duration::from_secs(5))
        .unwrap();
    c.ack(&m).unwrap();
    let mut again = Vec::new();
    receive_for(&c, Duration::from_secs(15), Duration::from_secs(5), |m| {
        again.push(body(&m));
        false
    });
    assert!(
        again.is_empty(),
        "acked after a change, came back: {again:?}"
    );
}

#[test]
fn pop_simple_consumer_refuses_bad_arguments_before_sending() {
    let topic = cluster::unique("pop_args");
    assert_eq!(
        SimpleConsumer::builder(cluster::unique("pop_args_g"))
            .client_options(cluster::options())
            .start()
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument,
        "no subscription"
    );
    let e = SimpleConsumer::builder(cluster::unique("pop_args_g"))
        .client_options(cluster::options())
        .subscribe(&topic, "*")
        .await_duration(Duration::from_secs(2 * 3600))
        .start()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let c = SimpleConsumer::builder(cluster::unique("pop_args_g"))
        .client_options(cluster::options())
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    for (max, inv) in [
        (0, Duration::from_secs(10)),
        (33, Duration::from_secs(10)),
        (1, Duration::from_secs(4)),
        (1, Duration::from_secs(13 * 3600)),
    ] {
        let e = c.receive(max, inv).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{max} {inv:?}: {e}");
    }
    c.shutdown();
    let e = c.receive(1, Duration::from_secs(10)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State);
}

/// The request mode an operator sets with the official tool (`mqadmin setConsumeMode`)
/// is what QUERY_ASSIGNMENT answers a member of the group, and SET_MESSAGE_REQUEST_MODE
/// sent by this client switches it back (what the push consumer with
/// `client_rebalance(false)` follows: see `pop_push.rs`).
#[test]
fn pop_mode_set_with_mqadmin_set_consume_mode_shows_in_the_query_assignment() {
    use rocketmq_blocking::protocol::pop::MessageRequestMode;
    use rocketmq_blocking::MessageModel;
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_mode", 2);
    let group = cluster::unique("pop_mode_g");
    let name = cluster::unique("pop_mode_i");
    let instance = cluster::instance(&name);
    // A member of the group, so the broker allocates it queues.
    let _member = SimpleConsumer::builder(&group)
        .client_options(cluster::options().instance_name(&name))
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    let addr = cluster::cluster().lock().broker_addrs()[0].1.clone();
    let t = Duration::from_secs(10);
    let api = instance.api();
    let modes = |api: &rocketmq_blocking::client::MQClientAPI| {
        let a = api
            .query_assignment(
                &addr,
                &topic,
                &group,
                instance.client_id(),
                "AVG",
                MessageModel::Clustering,
                t,
            )
            .unwrap()
            .expect("an assignment");
        let mut m: Vec<(i32, MessageRequestMode)> =
            a.iter().map(|a| (a.queue.queue_id(), a.mode)).collect();
        m.sort_by_key(|(q, _)| *q);
        m
    };
    use MessageRequestMode::{Pop, Pull};
    assert_eq!(
        modes(api),
        vec![(0, Pull), (1, Pull)],
        "the broker's default"
    );
    let out = crate::admin_tool::mqadmin(&[
        "setConsumeMode",
        "-b",
        &addr,
        "-t",
        &topic,
        "-g",
        &group,
        "-m",
        "POP",
        "-q",
        "2",
    ]);
    println!("mqadmin setConsumeMode: {}", out.trim());
    // One member and popShareQueueNum 2 >= members - 1: the broker hands every member
    // the whole topic, as queue -1 (Java `QueryAssignmentProcessor.allocate4Pop`).
    assert_eq!(modes(api), vec![(-1, Pop)], "after mqadmin: {out}");
    api.set_message_request_mode(&addr, &topic, &group, Pull, 0, t)
        .unwrap();
    assert_eq!(
        modes(api),
        vec![(0, Pull), (1, Pull)],
        "set back to PULL by us"
    );
}

/// Eight simple consumers of one group on a 2-queue topic: every one gets messages (POP
/// lets a group run more consumers than queues), nothing is lost, duplicates counted.
/// Then one consumer takes messages and is dropped without acking (as a killed one
/// would): the others get them after the invisible time.
#[test]
fn pop_eight_simple_consumers_on_a_two_queue_topic_all_receive_and_lose_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_eight", 2);
    let group = cluster::unique("pop_eight_g");
    let consumers: Vec<Arc<SimpleConsumer>> =
        (0..8).map(|_| Arc::new(simple(&group, &topic))).collect();
    let n = 400;
    let got: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = consumers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (c, got, stop) = (c.clone(), got.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for m in c.receive(2, Duration::from_secs(20)).expect("receive") {
                        got.lock().unwrap().push((i, body(&m)));
                        c.ack(&m).expect("ack");
                        // A consumer that works on its messages for a while.
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect();
    let sent = send(&topic, n, "eight");
    let end = Instant::now() + Duration::from_secs(120);
    let distinct = |got: &[(usize, String)]| {
        got.iter()
            .map(|(_, b)| b.clone())
            .collect::<std::collections::HashSet<_>>()
    };
    while Instant::now() < end && distinct(&got.lock().unwrap()).len() < n {
        std::thread::sleep(Duration::from_millis(200));
    }
    // A little longer, to count late duplicates.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let got = got.lock().unwrap().clone();
    let seen = distinct(&got);
    let lost: Vec<&String> = sent.iter().filter(|b| !seen.contains(*b)).collect();
    let mut per_consumer = [0usize; 8];
    for (i, _) in &got {
        per_consumer[*i] += 1;
    }
    println!(
        "pop, 8 consumers on 2 queues: sent {n}, received {} ({} distinct), lost {}, duplicated {}, per consumer {per_consumer:?}",
        got.len(),
        seen.len(),
        lost.len(),
        got.len() - seen.len()
    );
    assert!(lost.is_empty(), "lost {lost:?}");
    assert!(
        per_consumer.iter().all(|&k| k > 0),
        "a consumer got nothing: {per_consumer:?}"
    );

    // One consumer takes messages and goes away without acking them.
    let more = send(&topic, 6, "orphan");
    let mut taken = Vec::new();
    {
        let gone = simple(&group, &topic);
        receive_for(
            &gone,
            Duration::from_secs(60),
            Duration::from_secs(5),
            |m| {
                taken.push(body(&m));
                taken.len() == more.len()
            },
        );
        gone.shutdown();
    }
    assert_eq!(taken.len(), more.len());
    let mut back = std::collections::HashSet::new();
    receive_for(
        &consumers[0],
        Duration::from_secs(60),
        Duration::from_secs(20),
        |m| {
            consumers[0].ack(&m).unwrap();
            back.insert(body(&m));
            back.len() == more.len()
        },
    );
    println!(
        "pop: {} messages taken by a consumer that left unacked, {} redelivered to another",
        taken.len(),
        back.len()
    );
    assert_eq!(back.len(), more.len(), "redelivered: {back:?}");
}

/// What a child process (a Java consumer, a test helper) printed: "GOT <body>" lines, and
/// whether it printed "STARTED"; read on the returned thread until the child's end.
pub(crate) fn read_got_lines(
    stdout: impl std::io::Read + Send + 'static,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{BufRead, BufReader};
    let got: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let started: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
    let (g, st) = (got.clone(), started.clone());
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "STARTED" {
                st.store(true, std::sync::atomic::Ordering::SeqCst);
            } else if let Some(b) = line.strip_prefix("GOT ") {
                g.lock().unwrap().push(b.to_string());
            }
        }
    });
    (got, started, reader)
}

/// `tests/it/java/PopInterop.java`: a Java 5.3.3 push consumer with client rebalance off
/// (in POP mode once the group is switched), running 45 s and printing what it consumed.
pub(crate) struct JavaPopConsumer {
    child: std::process::Child,
    pub(crate) got: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: std::thread::JoinHandle<()>,
}

impl JavaPopConsumer {
    /// Compiles and starts it in `group` on `topic`; returns once it has started.
    pub(crate) fn start(topic: &str, group: &str) -> JavaPopConsumer {
        let version = cluster::cluster().lock().version().to_string();
        let java = crate::java::JavaProgram::compile(
            &version,
            "tests/it/java/PopInterop.java",
            "PopInterop",
        );
        let mut child = java
            .command(&[], &[cluster::namesrv(), topic, group, "45"])
            .spawn()
            .expect("java runs");
        let (got, started, reader) = read_got_lines(child.stdout.take().expect("piped"));
        crate::consumer::wait_for("the Java consumer", Duration::from_secs(60), || {
            started.load(std::sync::atomic::Ordering::SeqCst)
        });
        JavaPopConsumer { child, got, reader }
    }

    /// Waits for its end (killed after 2 min) and checks it succeeded.
    pub(crate) fn finish(self) {
        let out = crate::java::wait_or_kill(self.child, Duration::from_secs(120));
        self.reader.join().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A Java 5.3.3 push consumer, which consumes by POP once an operator switched the group
/// with `mqadmin setConsumeMode -m POP`, and a Rust simple consumer in the same group
/// share the work: both get messages, none is lost, duplicates counted.
#[test]
fn pop_a_java_pop_consumer_and_a_rust_simple_consumer_share_one_group() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_java", 2);
    let group = cluster::unique("pop_java_g");
    let addr = cluster::cluster().lock().broker_addrs()[0].1.clone();
    crate::admin_tool::mqadmin(&[
        "setConsumeMode",
        "-b",
        &addr,
        "-t",
        &topic,
        "-g",
        &group,
        "-m",
        "POP",
        "-q",
        "2",
    ]);
    let java = JavaPopConsumer::start(&topic, &group);
    let java_got = java.got.clone();
    let ours = simple(&group, &topic);
    let sent = send(&topic, 200, "java");
    let mut rust_got: Vec<String> = Vec::new();
    let end = Instant::now() + Duration::from_secs(35);
    let all = |r: &[String], j: &[String]| {
        let s: std::collections::HashSet<&String> = r.iter().chain(j.iter()).collect();
        s.len()
    };
    while Instant::now() < end && all(&rust_got, &java_got.lock().unwrap()) < sent.len() {
        for m in ours.receive(4, Duration::from_secs(30)).unwrap() {
            rust_got.push(body(&m));
            ours.ack(&m).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    java.finish();
    let java_got = java_got.lock().unwrap().clone();
    let seen: std::collections::HashSet<&String> = rust_got.iter().chain(java_got.iter()).collect();
    let lost: Vec<&String> = sent.iter().filter(|b| !seen.contains(b)).collect();
    let dups = rust_got.len() + java_got.len() - seen.len();
    println!(
        "pop, Java and Rust in one group: sent {}, Java got {}, Rust got {}, lost {}, duplicated {dups}",
        sent.len(),
        java_got.len(),
        rust_got.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "lost {lost:?}");
    assert!(!java_got.is_empty(), "the Java consumer got nothing");
    assert!(!rust_got.is_empty(), "the Rust consumer got nothing");
}

/// `ack_batch` acks the messages of many receives with BATCH_ACK_MESSAGE requests, one
/// per receive's check point at most and no ACK_MESSAGE; none comes back.
#[test]
fn pop_ack_batch_acks_with_batch_requests_and_nothing_comes_back() {
    use crate::pop_push::{CodeCounts, ACK_MESSAGE, BATCH_ACK_MESSAGE};
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_abatch", 2);
    let sent = send(&topic, 40, "ab");
    let name = cluster::unique("pop_abatch_i");
    let counts = std::sync::Arc::new(CodeCounts::default());
    // Held: the consumer shares it (same client id) rather than making its own.
    let instance = cluster::instance(&name);
    instance.remoting().register_rpc_hook(counts.clone());
    let c = SimpleConsumer::builder(cluster::unique("pop_abatch_g"))
        .client_options(cluster::options().instance_name(&name))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .await_duration(Duration::from_secs(1))
        .start()
        .unwrap();
    let invisible = Duration::from_secs(5);
    let mut got: Vec<ReceivedMessage> = Vec::new();
    receive_for(&c, Duration::from_secs(60), Duration::from_secs(30), |m| {
        got.push(m);
        got.len() == sent.len()
    });
    assert_eq!(got.len(), sent.len());
    c.ack_batch(&got).expect("ack_batch");
    c.ack_batch(&[]).expect("nothing to ack");
    let (acks, batch_acks) = (counts.sent(ACK_MESSAGE), counts.sent(BATCH_ACK_MESSAGE));
    let mut again = Vec::new();
    receive_for(&c, invisible * 3, invisible, |m| {
        again.push(body(&m));
        false
    });
    println!(
        "pop ack_batch: {} messages, ACK_MESSAGE {acks}, BATCH_ACK_MESSAGE {batch_acks}, back after {}",
        got.len(),
        again.len()
    );
    assert_eq!(acks, 0);
    assert!((1..=2).contains(&batch_acks), "{batch_acks} batch acks");
    assert!(again.is_empty(), "acked messages came back: {again:?}");
}

/// `wait_for_messages` (NOTIFICATION) answers false after its timeout when there is
/// nothing, true soon after a message is sent while it waits, and takes nothing: the
/// message is then received.
#[test]
fn pop_wait_for_messages_is_false_after_the_timeout_and_true_when_one_arrives() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_notify", 2);
    let c = simple(&cluster::unique("pop_notify_g"), &topic);
    let t0 = Instant::now();
    assert!(!c.wait_for_messages(Duration::from_secs(2)).unwrap());
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(8),
        "no message: answered after {waited:?}"
    );
    assert!(!c.wait_for_messages(Duration::ZERO).unwrap());
    let t = topic.clone();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        send(&t, 1, "n");
    });
    let t0 = Instant::now();
    assert!(c.wait_for_messages(Duration::from_secs(30)).unwrap());
    let woke = t0.elapsed();
    sender.join().unwrap();
    println!("pop wait_for_messages: false after {waited:?}, true after {woke:?}");
    assert!(woke < Duration::from_secs(10), "true only after {woke:?}");
    assert!(
        c.wait_for_messages(Duration::ZERO).unwrap(),
        "a message is there"
    );
    let mut got = Vec::new();
    receive_for(&c, Duration::from_secs(30), Duration::from_secs(10), |m| {
        got.push(body(&m));
        true
    });
    assert_eq!(got, vec!["n-0".to_string()]);
    let e = c.wait_for_messages(Duration::from_secs(3601)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// On 4.x, BATCH_ACK_MESSAGE and NOTIFICATION are typed "not supported" errors.
#[test]
fn pop_batch_ack_and_notification_on_a_4x_broker_are_not_supported() {
    use rocketmq_blocking::protocol::pop::{BatchAckMessageRequestBody, ExtraInfo};
    if !broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_4x_n", 1);
    let c = simple(&cluster::unique("pop_4x_n_g"), &topic);
    let e = c.wait_for_messages(Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let instance = cluster::instance(&cluster::unique("pop_4x_n_i"));
    let addr = cluster::cluster().lock().broker_addrs()[0].1.clone();
    let receipt = ExtraInfo::parse("0 1700000000000 60000 0 0 broker-a 0 0").unwrap();
    let receipts = [receipt];
    let (body, _) = BatchAckMessageRequestBody::new("g", &topic, &receipts);
    let e = instance
        .api()
        .batch_ack_message(&addr, &body, Duration::from_secs(10))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("not supported by this broker"),
        "{e}"
    );
}
