//! The push consumer following the broker's assignment and request mode
//! (`client_rebalance(false)`, Java 5.3 `setClientRebalance(false)`) against the real
//! broker: an operator switches a group to POP with the official `mqadmin setConsumeMode`,
//! and the consumers pop, ack, hand failed messages back, renew slow ones, share the group
//! with a Java 5.3.3 POP consumer, survive a SIGKILLed member, and go back to pulling when
//! switched back. On 4.x (`RMQ_TEST_VERSION=4.9.7`) the same consumer keeps pulling.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    Admin, ClientOptions, ConsumeConcurrentlyContext, ConsumeFromWhere, ConsumeStatus, ErrorKind,
    Message, MessageExt, MessageRequestMode, PushConsumer, PushConsumerBuilder, RequestContext,
    RequestHook,
};

use crate::cluster;
use crate::consumer::{producer, wait_for};

fn broker_4x() -> bool {
    cluster::cluster().lock().version().starts_with('4')
}

fn admin() -> Admin {
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .expect("admin")
}

/// `mqadmin setConsumeMode` on the test broker.
fn set_mode(topic: &str, group: &str, mode: &str, share: u32) {
    let addr = cluster::cluster().lock().broker_addrs()[0].1.clone();
    let out = crate::admin_tool::mqadmin(&[
        "setConsumeMode",
        "-b",
        &addr,
        "-t",
        topic,
        "-g",
        group,
        "-m",
        mode,
        "-q",
        &share.to_string(),
    ]);
    println!(
        "mqadmin setConsumeMode -m {mode} -q {share}: {}",
        out.trim()
    );
}

/// A push consumer that follows the broker, with a short invisible time.
fn pop_consumer(group: &str, topic: &str, invisible: Duration) -> PushConsumerBuilder {
    crate::consumer::consumer(group, topic)
        .client_rebalance(false)
        .pop_invisible_time(invisible)
}

fn send(topic: &str, bodies: &[String]) {
    let p = producer();
    for b in bodies {
        p.send(&Message::new(topic, b.as_bytes().to_vec())).unwrap();
    }
    p.shutdown();
}

fn bodies(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn body(m: &MessageExt) -> String {
    String::from_utf8_lossy(m.body()).into_owned()
}

/// Every delivery: (consumer, body, reconsume times, when).
type Log = Arc<Mutex<Vec<(usize, String, u32, Instant)>>>;

fn distinct(log: &Log) -> HashSet<String> {
    log.lock().unwrap().iter().map(|e| e.1.clone()).collect()
}

fn deliveries(log: &Log) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for e in log.lock().unwrap().iter() {
        *n.entry(e.1.clone()).or_default() += 1;
    }
    n
}

/// A listener for consumer `i` that logs every delivery, then asks `each` how the
/// message went (any `ReconsumeLater` fails the batch).
fn recorder(
    i: usize,
    log: &Log,
    each: impl Fn(&MessageExt) -> ConsumeStatus + Send + Sync + 'static,
) -> impl Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeStatus + Send + Sync + 'static
{
    let log = log.clone();
    move |msgs, _| {
        let mut status = ConsumeStatus::Success;
        for m in msgs {
            log.lock()
                .unwrap()
                .push((i, body(m), m.reconsume_times(), Instant::now()));
            if each(m) == ConsumeStatus::ReconsumeLater {
                status = ConsumeStatus::ReconsumeLater;
            }
        }
        status
    }
}

/// Eight push consumers of one group on a 2-queue topic, switched to POP by the operator:
/// all receive; nothing sent is lost; an acked message never comes again; a message whose
/// listener failed comes again after Java's first POP delay (10 s) with its reconsume
/// times counted.
#[test]
fn pop_push_eight_consumers_on_two_queues_ack_and_retry_by_pop() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_push8", 2);
    let group = cluster::unique("pop_push8_g");
    set_mode(&topic, &group, "POP", 1);
    let log: Log = Arc::default();
    let consumers: Vec<PushConsumer> = (0..8)
        .map(|i| {
            pop_consumer(&group, &topic, Duration::from_secs(10))
                .listener(recorder(i, &log, |m| {
                    std::thread::sleep(Duration::from_millis(20));
                    if body(m).starts_with("fail") && m.reconsume_times() == 0 {
                        ConsumeStatus::ReconsumeLater
                    } else {
                        ConsumeStatus::Success
                    }
                }))
                .start()
                .unwrap()
        })
        .collect();
    wait_for("every consumer to pop", Duration::from_secs(60), || {
        consumers.iter().all(|c| !c.assigned_queues().is_empty())
    });
    let ok = bodies("ok", 400);
    let failing = bodies("fail", 4);
    send(&topic, &ok);
    send(&topic, &failing);
    let sent_at = Instant::now();
    wait_for(
        "every message, and the failed ones again",
        Duration::from_secs(120),
        || {
            let n = deliveries(&log);
            ok.iter().all(|b| n.contains_key(b)) && failing.iter().all(|b| n.get(b) >= Some(&2))
        },
    );
    // Past the invisible time and the broker's revive scan: nothing acked comes back.
    std::thread::sleep(Duration::from_secs(15));
    let n = deliveries(&log);
    let log = log.lock().unwrap().clone();
    let mut per_consumer = [0usize; 8];
    for e in &log {
        per_consumer[e.0] += 1;
    }
    let dup_ok: usize = ok.iter().map(|b| n[b] - 1).sum();
    let extra_failed: usize = failing.iter().map(|b| n[b] - 2).sum();
    let retried_after: Vec<Duration> = log
        .iter()
        .filter(|e| e.1.starts_with("fail") && e.2 >= 1)
        .map(|e| e.3 - sent_at)
        .collect();
    println!(
        "pop push, 8 consumers on 2 queues: sent {}, delivered {}, lost 0, acked delivered again {dup_ok}, \
         failed delivered more than twice {extra_failed}, per consumer {per_consumer:?}, retries after {retried_after:?}",
        ok.len() + failing.len(),
        log.len()
    );
    assert!(
        per_consumer.iter().all(|&k| k > 0),
        "a consumer got nothing: {per_consumer:?}"
    );
    assert_eq!(dup_ok, 0, "acked messages came again");
    for e in log.iter().filter(|e| e.1.starts_with("fail") && e.2 >= 1) {
        assert!(
            e.3 - sent_at >= Duration::from_secs(9),
            "{} back after {:?}, before the 10 s delay",
            e.1,
            e.3 - sent_at
        );
    }
}

/// A listener that runs three times the invisible time keeps its message: the consumer
/// renews it, so neither consumer of the group gets it again, and it is acked after.
#[test]
fn pop_push_a_slow_listener_keeps_its_message_by_renewal() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_slow", 1);
    let group = cluster::unique("pop_slow_g");
    set_mode(&topic, &group, "POP", 0);
    let invisible = Duration::from_secs(5);
    let log: Log = Arc::default();
    let consumers: Vec<PushConsumer> = (0..2)
        .map(|i| {
            pop_consumer(&group, &topic, invisible)
                .listener(recorder(i, &log, move |m| {
                    if body(m) == "slow" {
                        std::thread::sleep(invisible * 3);
                    }
                    ConsumeStatus::Success
                }))
                .start()
                .unwrap()
        })
        .collect();
    wait_for("both consumers to pop", Duration::from_secs(60), || {
        consumers.iter().all(|c| !c.assigned_queues().is_empty())
    });
    send(&topic, &["slow".to_string()]);
    wait_for("the slow message", Duration::from_secs(60), || {
        distinct(&log).contains("slow")
    });
    // The listener's 15 s, then longer than the invisible time and the revive scan.
    std::thread::sleep(invisible * 3 + Duration::from_secs(12));
    let n = deliveries(&log);
    println!("pop push slow listener: delivered {:?}", n);
    assert_eq!(
        n.get("slow"),
        Some(&1),
        "delivered again while running or after"
    );
}

/// Not a test on its own: the child process of
/// `pop_push_a_killed_consumer_process_loses_nothing`, a push consumer in POP mode whose
/// listener holds every message and never returns.
#[test]
#[ignore]
fn pop_push_child_consumer_process() {
    let (Ok(namesrv), Ok(topic), Ok(group)) = (
        std::env::var("POP_CHILD_NAMESRV"),
        std::env::var("POP_CHILD_TOPIC"),
        std::env::var("POP_CHILD_GROUP"),
    ) else {
        return;
    };
    let _ = env_logger::builder().try_init();
    let _c = PushConsumer::builder(&group)
        .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr(namesrv))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .client_rebalance(false)
        .pop_invisible_time(Duration::from_secs(5))
        .listener(|msgs, _| {
            for m in msgs {
                println!("GOT {}", body(m));
            }
            std::thread::sleep(Duration::from_secs(3600));
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    println!("STARTED");
    std::thread::sleep(Duration::from_secs(3600));
}

/// Kills the child process however the test ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A consumer in another process is SIGKILLed while its listener holds messages: the
/// group's other consumer gets them after their invisible time; nothing is lost.
#[test]
fn pop_push_a_killed_consumer_process_loses_nothing() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_kill", 2);
    let group = cluster::unique("pop_kill_g");
    set_mode(&topic, &group, "POP", 0);
    let sent = bodies("kill", 30);
    send(&topic, &sent);
    let mut child = KillOnDrop(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "pop_push::pop_push_child_consumer_process",
                "--ignored",
                "--nocapture",
            ])
            .env("POP_CHILD_NAMESRV", cluster::namesrv())
            .env("POP_CHILD_TOPIC", &topic)
            .env("POP_CHILD_GROUP", &group)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (child_got, _, reader) = crate::pop::read_got_lines(child.0.stdout.take().unwrap());
    // Its listener holds the first; the rest of what it popped waits for a consume
    // thread (renewed meanwhile).
    wait_for(
        "the child to hold messages",
        Duration::from_secs(60),
        || !child_got.lock().unwrap().is_empty(),
    );
    // SIGKILL: no shutdown, no ack, no unregistration.
    child.0.kill().unwrap();
    let killed_at = Instant::now();
    child.0.wait().unwrap();
    reader.join().unwrap();
    let held = child_got.lock().unwrap().clone();
    let log: Log = Arc::default();
    let _ours = pop_consumer(&group, &topic, Duration::from_secs(5))
        .listener(recorder(0, &log, |_| ConsumeStatus::Success))
        .start()
        .unwrap();
    wait_for("every message", Duration::from_secs(120), || {
        let d = distinct(&log);
        sent.iter().all(|b| d.contains(b))
    });
    let log = log.lock().unwrap().clone();
    let back_after: Vec<Duration> = log
        .iter()
        .filter(|e| held.contains(&e.1))
        .map(|e| e.3 - killed_at)
        .collect();
    let n = deliveries(&Arc::new(Mutex::new(log.clone())));
    let dups: usize = n.values().map(|k| k - 1).sum();
    println!(
        "pop push, killed consumer: sent {}, the killed one held {}, the other got {} ({} distinct), \
         lost 0, duplicated {dups}; held ones back after {back_after:?}",
        sent.len(),
        held.len(),
        log.len(),
        n.len()
    );
    for b in &held {
        let e = log.iter().find(|e| &e.1 == b).unwrap();
        assert!(e.2 >= 1, "{b} came back as a first delivery");
    }
}

/// A Java 5.3.3 push consumer in POP mode and ours in one group share the work.
#[test]
fn pop_push_a_java_pop_push_consumer_and_ours_share_one_group() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_pjava", 2);
    let group = cluster::unique("pop_pjava_g");
    set_mode(&topic, &group, "POP", 2);
    let java = crate::pop::JavaPopConsumer::start(&topic, &group);
    let java_got = java.got.clone();
    let log: Log = Arc::default();
    let ours = pop_consumer(&group, &topic, Duration::from_secs(20))
        .pop_batch_nums(4)
        .listener(recorder(0, &log, |_| {
            std::thread::sleep(Duration::from_millis(20));
            ConsumeStatus::Success
        }))
        .start()
        .unwrap();
    wait_for("our consumer to pop", Duration::from_secs(60), || {
        !ours.assigned_queues().is_empty()
    });
    // The Java consumer takes its assignment on its own rebalance rounds (20 s): one
    // message at a time until it consumes one, so that both pop the main batch.
    let p = producer();
    let mut warm = Vec::new();
    wait_for("the Java consumer to pop", Duration::from_secs(60), || {
        let b = format!("warm-{}", warm.len());
        p.send(&Message::new(&topic, b.as_bytes().to_vec()))
            .unwrap();
        warm.push(b);
        std::thread::sleep(Duration::from_millis(200));
        !java_got.lock().unwrap().is_empty()
    });
    p.shutdown();
    let (rust_warm, java_warm) = (log.lock().unwrap().len(), java_got.lock().unwrap().len());
    let mut sent = bodies("pjava", 200);
    send(&topic, &sent);
    sent.extend(warm);
    let all = || {
        let mut s = distinct(&log);
        s.extend(java_got.lock().unwrap().iter().cloned());
        s
    };
    wait_for("every message", Duration::from_secs(40), || {
        sent.iter().all(|b| all().contains(b))
    });
    java.finish();
    let rust_n = log.lock().unwrap().len();
    let java_n = java_got.lock().unwrap().len();
    let dups = rust_n + java_n - all().len();
    println!(
        "pop push, Java and Rust push consumers in one group: sent {} ({} to warm up), Java got {java_n} ({java_warm} while warming up), \
         Rust got {rust_n} ({rust_warm} while warming up), lost 0, duplicated {dups}",
        sent.len(),
        sent.len() - 200
    );
    assert!(
        java_n > java_warm,
        "the Java consumer got none of the batch"
    );
    assert!(rust_n > rust_warm, "our consumer got none of the batch");
}

/// POP, then the operator switches the group back to PULL: the consumers take pull
/// queues on their next rebalance and consumption goes on; nothing is lost.
#[test]
fn pop_push_switched_back_to_pull_goes_on_by_pull() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_back_pull", 2);
    let group = cluster::unique("pop_back_pull_g");
    set_mode(&topic, &group, "POP", 0);
    let log: Log = Arc::default();
    let consumers: Vec<PushConsumer> = (0..2)
        .map(|i| {
            pop_consumer(&group, &topic, Duration::from_secs(10))
                .listener(recorder(i, &log, |_| ConsumeStatus::Success))
                .start()
                .unwrap()
        })
        .collect();
    let popping = |c: &PushConsumer| c.assigned_queues().iter().any(|q| q.queue_id() == -1);
    wait_for("both to pop", Duration::from_secs(60), || {
        consumers.iter().all(popping)
    });
    let first = bodies("before", 100);
    send(&topic, &first);
    wait_for(
        "the messages sent in POP mode",
        Duration::from_secs(60),
        || {
            let d = distinct(&log);
            first.iter().all(|b| d.contains(b))
        },
    );
    // Back with our Admin this time (SET_MESSAGE_REQUEST_MODE on every master, as
    // `mqadmin setConsumeMode -c` sends it).
    let brokers = admin()
        .set_message_request_mode(&topic, &group, MessageRequestMode::Pull, 0)
        .unwrap();
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    // Sent while the switch is on its way.
    let middle = bodies("middle", 50);
    send(&topic, &middle);
    let pulling = |c: &PushConsumer| {
        let q = c.assigned_queues();
        !q.is_empty() && q.iter().all(|q| q.queue_id() >= 0)
    };
    wait_for("both to pull", Duration::from_secs(60), || {
        consumers.iter().all(pulling)
    });
    let pulled_before: usize = consumers
        .iter()
        .map(|c| {
            let q = c.assigned_queues();
            q.iter().filter(|q| q.topic() == topic).count()
        })
        .sum();
    let last = bodies("after", 100);
    send(&topic, &last);
    let all: Vec<String> = first.iter().chain(&middle).chain(&last).cloned().collect();
    wait_for("every message", Duration::from_secs(90), || {
        let d = distinct(&log);
        all.iter().all(|b| d.contains(b))
    });
    let n = deliveries(&log);
    let dups: usize = n.values().map(|k| k - 1).sum();
    println!(
        "pop push switched back to PULL: sent {}, delivered {}, lost 0, duplicated {dups}, pull queues {pulled_before}",
        all.len(),
        log.lock().unwrap().len()
    );
    assert_eq!(
        pulled_before, 2,
        "two pull queues between the two consumers"
    );
}

/// Counts QUERY_ASSIGNMENT requests.
struct CountQueries(Arc<AtomicUsize>);

impl RequestHook for CountQueries {
    fn before_request(&self, request: &mut RequestContext<'_>) {
        if request.code() == 400 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A consumer that follows the broker consumes by pull when the broker says PULL (5.x,
/// the default mode) and when it cannot say anything (4.x: QUERY_ASSIGNMENT is not
/// supported, asked once and then allocated on the client).
#[test]
fn pop_push_following_the_broker_pulls_in_pull_mode_and_on_4x() {
    let topic = cluster::topic("pop_follow", 2);
    let group = cluster::unique("pop_follow_g");
    let queries = Arc::new(AtomicUsize::new(0));
    let log: Log = Arc::default();
    let c = pop_consumer(&group, &topic, Duration::from_secs(10))
        .request_hook(Arc::new(CountQueries(queries.clone())))
        .listener(recorder(0, &log, |_| ConsumeStatus::Success))
        .start()
        .unwrap();
    let sent = bodies("follow", 40);
    send(&topic, &sent);
    wait_for("every message", Duration::from_secs(60), || {
        let d = distinct(&log);
        sent.iter().all(|b| d.contains(b))
    });
    let queues = c.assigned_queues();
    assert!(
        queues
            .iter()
            .filter(|q| !q.topic().starts_with('%'))
            .count()
            == 2
            && queues.iter().all(|q| q.queue_id() >= 0),
        "pulled queues: {queues:?}"
    );
    if broker_4x() {
        // Nor can an admin switch a 4.x broker's group.
        let e = admin()
            .set_message_request_mode(&topic, &group, MessageRequestMode::Pop, 0)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        // A periodic round (20 s) after the first: still the one refused query.
        std::thread::sleep(Duration::from_secs(22));
        assert_eq!(
            queries.load(Ordering::SeqCst),
            1,
            "asked a 4.x broker again"
        );
    } else {
        assert!(
            queries.load(Ordering::SeqCst) >= 1,
            "the broker was not asked"
        );
    }
    println!(
        "pop push following the broker ({}): {} messages by pull, {} QUERY_ASSIGNMENT",
        cluster::cluster().lock().version(),
        sent.len(),
        queries.load(Ordering::SeqCst)
    );
}

/// Counts requests by code as sent, and the responses waited for synchronously.
#[derive(Default)]
pub(crate) struct CodeCounts {
    sent: Mutex<HashMap<i32, usize>>,
    waited: Mutex<HashMap<i32, usize>>,
}

impl CodeCounts {
    pub(crate) fn sent(&self, code: i32) -> usize {
        self.sent.lock().unwrap().get(&code).copied().unwrap_or(0)
    }

    pub(crate) fn waited(&self, code: i32) -> usize {
        self.waited.lock().unwrap().get(&code).copied().unwrap_or(0)
    }
}

impl RequestHook for CodeCounts {
    fn before_request(&self, request: &mut RequestContext<'_>) {
        *self.sent.lock().unwrap().entry(request.code()).or_default() += 1;
    }

    fn after_response(&self, response: &rocketmq_blocking::ResponseContext<'_>) {
        *self
            .waited
            .lock()
            .unwrap()
            .entry(response.request_code())
            .or_default() += 1;
    }
}

/// The same counts for a client instance's remoting client (what the simple consumer
/// uses; it takes no hook of its own).
impl rocketmq_blocking::remoting::RpcHook for CodeCounts {
    fn before_request(&self, _: &str, request: &mut rocketmq_blocking::protocol::RemotingCommand) {
        *self
            .sent
            .lock()
            .unwrap()
            .entry(request.request_code().0)
            .or_default() += 1;
    }
}

pub(crate) const ACK_MESSAGE: i32 = 200051;
pub(crate) const CHANGE_INVISIBLE_TIME: i32 = 200053;
pub(crate) const BATCH_ACK_MESSAGE: i32 = 200151;

/// With `pop_batch_ack`, the 32 messages of a pop, each in its own listener call, are
/// acked with BATCH_ACK_MESSAGE requests (one per pop) and no ACK_MESSAGE; none comes
/// back after the invisible time.
#[test]
fn pop_push_batch_ack_acks_a_pop_with_one_request_and_nothing_comes_back() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_bback", 1);
    let group = cluster::unique("pop_bback_g");
    set_mode(&topic, &group, "POP", 0);
    let sent = bodies("bback", 64);
    send(&topic, &sent);
    let counts = Arc::new(CodeCounts::default());
    let invisible = Duration::from_secs(5);
    let log: Log = Arc::default();
    let c = pop_consumer(&group, &topic, invisible)
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .pop_batch_ack(true)
        .request_hook(counts.clone())
        .listener(recorder(0, &log, |_| ConsumeStatus::Success))
        .start()
        .unwrap();
    wait_for("every message", Duration::from_secs(60), || {
        let d = distinct(&log);
        sent.iter().all(|b| d.contains(b))
    });
    // Past the invisible time and the broker's revive scan.
    std::thread::sleep(invisible * 2 + Duration::from_secs(10));
    let n = deliveries(&log);
    let again: usize = n.values().map(|k| k - 1).sum();
    let (acks, batch_acks) = (counts.sent(ACK_MESSAGE), counts.sent(BATCH_ACK_MESSAGE));
    println!(
        "pop push batch ack: {} messages, delivered again {again}, ACK_MESSAGE {acks}, \
         BATCH_ACK_MESSAGE {batch_acks}, POP_MESSAGE {}",
        sent.len(),
        counts.sent(200050)
    );
    drop(c);
    assert_eq!(acks, 0, "single acks sent");
    assert!(
        (1..sent.len() / 2).contains(&batch_acks),
        "{batch_acks} batch acks for {} messages",
        sent.len()
    );
    assert_eq!(again, 0, "acked messages came back: {n:?}");
}

/// A slow listener's renewals are sent without waiting for their answers (none is a
/// synchronous request, so a slow broker cannot hold up the client timer), and the new
/// receipts they bring are the ones acked: four messages in one listener call that runs
/// three invisible times are each delivered once and never again.
#[test]
fn pop_push_renewals_are_sent_without_waiting_and_their_receipts_are_acked() {
    if broker_4x() {
        return;
    }
    let topic = cluster::topic("pop_renew", 1);
    let group = cluster::unique("pop_renew_g");
    set_mode(&topic, &group, "POP", 0);
    let sent = bodies("renew", 4);
    send(&topic, &sent);
    let counts = Arc::new(CodeCounts::default());
    let invisible = Duration::from_secs(5);
    let log: Log = Arc::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let first = calls.clone();
    let c = pop_consumer(&group, &topic, invisible)
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .consume_message_batch_max_size(4)
        .request_hook(counts.clone())
        .listener(recorder(0, &log, move |_| {
            if first.fetch_add(1, Ordering::SeqCst) == 0 {
                std::thread::sleep(invisible * 3);
            }
            ConsumeStatus::Success
        }))
        .start()
        .unwrap();
    wait_for("every message", Duration::from_secs(60), || {
        let d = distinct(&log);
        sent.iter().all(|b| d.contains(b))
    });
    // The listener's 15 s, then past the invisible time and the revive scan.
    std::thread::sleep(invisible * 3 + Duration::from_secs(12));
    let n = deliveries(&log);
    let again: usize = n.values().map(|k| k - 1).sum();
    let (renewals, waited) = (
        counts.sent(CHANGE_INVISIBLE_TIME),
        counts.waited(CHANGE_INVISIBLE_TIME),
    );
    println!(
        "pop push renewals: {renewals} CHANGE_MESSAGE_INVISIBLETIME, {waited} waited for, \
         delivered again {again}"
    );
    drop(c);
    assert!(renewals >= 4, "only {renewals} renewals");
    assert_eq!(waited, 0, "renewals waited for synchronously");
    assert_eq!(again, 0, "delivered again: {n:?}");
}
