//! Consumer processes SIGKILLed: `rmq consume` processes of one group are killed and
//! started while messages flow, and every acknowledged send must be in the union of what
//! they printed (a line is flushed before its message is acknowledged, so a kill can only
//! repeat messages, never drop one from the output).
//!
//! Sizes scale with `RMQ_RELIABILITY_SCALE` (default 1, the reduced size CI runs); the
//! full-size run for RELIABILITY.md is
//! `RMQ_RELIABILITY_SCALE=10 cargo test --test cli reliability -- --nocapture --test-threads 1`.
//! Each test prints a small table of its figures.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::reliability_scale as scale;
use rocketmq_blocking::{Admin, Message, MessageQueue, Producer};
use serde_json::Value;

use super::{cluster, created_topic, namesrv, one_heavy_test_at_a_time, unique};
use rocketmq_blocking::ClientOptions;

/// Nothing new printed by any process for this long ends the wait for the rest.
const STALL: Duration = Duration::from_secs(60);

/// One printed message: its id and where it was stored.
#[derive(Clone, Debug)]
struct Printed {
    msg_id: String,
    queue: i32,
    offset: i64,
}

/// An `rmq consume` process whose stdout lines are collected as they come.
struct ConsumerProcess {
    name: String,
    child: Child,
    printed: Arc<Mutex<Vec<Printed>>>,
    /// While set, its stdout is not read (a slow reader: the pipe fills up).
    stalled: Arc<AtomicBool>,
    stdout: Option<JoinHandle<Option<Value>>>,
    stderr: Option<JoinHandle<String>>,
}

impl ConsumerProcess {
    fn start(name: &str, args: &[&str]) -> ConsumerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rmq"))
            .arg("consume")
            .args(args)
            .env("NAMESRV_ADDR", namesrv())
            .env_remove("RUST_LOG")
            .env_remove("ROCKETMQ_SERIALIZE_TYPE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rmq consume");
        let printed = Arc::new(Mutex::new(Vec::new()));
        let stalled = Arc::new(AtomicBool::new(false));
        let out = child.stdout.take().expect("piped stdout");
        let stdout = {
            let (printed, stalled) = (printed.clone(), stalled.clone());
            std::thread::spawn(move || collect_lines(out, &printed, &stalled))
        };
        let mut err = child.stderr.take().expect("piped stderr");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        ConsumerProcess {
            name: name.to_string(),
            child,
            printed,
            stalled,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    fn count(&self) -> usize {
        self.printed.lock().unwrap().len()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL; returns everything it printed (what was in the pipe when it died is
    /// read after).
    fn kill(mut self) -> Vec<Printed> {
        let _ = self.child.kill(); // SIGKILL on Unix
        let _ = self.child.wait();
        self.stalled.store(false, Ordering::SeqCst);
        self.finish();
        std::mem::take(&mut *self.printed.lock().unwrap())
    }

    /// Waits for the reader threads (the pipes close with the process); returns the
    /// summary line, if the process printed one.
    fn finish(&mut self) -> Option<Value> {
        let summary = self.stdout.take().and_then(|h| h.join().ok()).flatten();
        let err = self.stderr.take().and_then(|h| h.join().ok());
        if let Some(err) = err.filter(|e| e.lines().any(|l| !l.starts_with("rmq: consuming"))) {
            eprintln!("{} stderr:\n{err}", self.name);
        }
        summary
    }
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads message lines into `printed` until the pipe closes; returns the summary line.
fn collect_lines(
    out: impl Read,
    printed: &Mutex<Vec<Printed>>,
    stalled: &AtomicBool,
) -> Option<Value> {
    let mut summary = None;
    for line in BufReader::new(out).lines() {
        while stalled.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let Ok(line) = line else { break };
        // A process killed in the middle of a write may leave a partial last line; that
        // message was not acknowledged (its flush had not returned).
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match v["msgId"].as_str() {
            Some(id) => printed.lock().unwrap().push(Printed {
                msg_id: id.to_string(),
                queue: v["queue"]["queueId"].as_i64().unwrap_or(-1) as i32,
                offset: v["queueOffset"].as_i64().unwrap_or(-1),
            }),
            None => summary = Some(v),
        }
    }
    summary
}

/// Waits until the broker lists exactly `n` consumers in `group`.
fn wait_for_members(group: &str, n: usize) {
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin");
    let broker = &cluster().broker_addrs()[0].1;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ids = admin
            .api()
            .get_consumer_id_list(broker, group, Duration::from_secs(3))
            .unwrap_or_default();
        if ids.len() == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{group} has {} consumers, not {n}: {ids:?}",
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the sending threads share with the test.
struct Sends {
    acked: Mutex<HashSet<String>>,
    failed: AtomicUsize,
    /// Messages with an index below this may be sent; the others wait for it to grow.
    allowed: AtomicUsize,
}

impl Sends {
    fn new(allowed: usize) -> Arc<Sends> {
        Arc::new(Sends {
            acked: Mutex::new(HashSet::new()),
            failed: AtomicUsize::new(0),
            allowed: AtomicUsize::new(allowed),
        })
    }

    /// Sends that have an answer, acknowledged or failed.
    fn done(&self) -> usize {
        self.acked.lock().unwrap().len() + self.failed.load(Ordering::Relaxed)
    }
}

/// Sends `n` messages from `threads` threads, as far as `sends.allowed` lets them.
fn send_in_background(topic: &str, n: usize, threads: usize, sends: Arc<Sends>) -> JoinHandle<()> {
    let producer = Producer::builder(unique("cli_rel_producer"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("producer");
    let topic = topic.to_string();
    std::thread::spawn(move || {
        std::thread::scope(|s| {
            for t in 0..threads {
                let (producer, topic, sends) = (&producer, &topic, &sends);
                s.spawn(move || {
                    for i in (t..n).step_by(threads) {
                        while i >= sends.allowed.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        let msg = Message::new(topic.as_str(), format!("m{i}").into_bytes());
                        match producer.send(&msg) {
                            Ok(r) => {
                                sends.acked.lock().unwrap().insert(r.msg_id().to_string());
                            }
                            Err(_) => {
                                sends.failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        producer.shutdown();
    })
}

/// Waits until the processes together printed every id of `want`, or nothing new came
/// for `STALL`; returns the ids printed.
fn wait_until_all_printed(
    want: &HashSet<String>,
    procs: &[&ConsumerProcess],
    dead: &[Printed],
) -> HashSet<String> {
    let mut last_progress = (0, Instant::now());
    loop {
        let mut seen: HashSet<String> = dead.iter().map(|p| p.msg_id.clone()).collect();
        let mut lines = dead.len();
        for p in procs {
            let printed = p.printed.lock().unwrap();
            lines += printed.len();
            seen.extend(printed.iter().map(|p| p.msg_id.clone()));
        }
        if want.iter().all(|id| seen.contains(id)) {
            return seen;
        }
        if lines > last_progress.0 {
            last_progress = (lines, Instant::now());
        }
        if last_progress.1.elapsed() > STALL {
            eprintln!("no progress for {STALL:?}: some acknowledged messages never printed");
            return seen;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `check` says done; it also returns a measure of progress, and `STALL`
/// without progress fails the test (sizes scale, so no fixed deadline fits).
fn wait_while_progressing(what: &str, mut check: impl FnMut() -> (bool, usize)) {
    let mut last = (0, Instant::now());
    loop {
        let (done, progress) = check();
        if done {
            return;
        }
        if progress > last.0 {
            last = (progress, Instant::now());
        }
        assert!(
            last.1.elapsed() < STALL,
            "{what} made no progress for {STALL:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many of `printed` are repeats (lines beyond the first of each id).
fn duplicates<'a>(printed: impl IntoIterator<Item = &'a Printed>) -> usize {
    let mut seen = HashSet::new();
    printed
        .into_iter()
        .filter(|p| !seen.insert(p.msg_id.as_str()))
        .count()
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[test]
fn reliability_a_group_of_consumer_processes_loses_nothing_when_one_is_sigkilled() {
    let _one = one_heavy_test_at_a_time();
    let n = 20_000 * scale();
    let topic = created_topic(8);
    let group = unique("cli_rel_group");
    let args = ["--group", group.as_str(), "--from", "first"];
    let started = Instant::now();
    let mut procs: Vec<ConsumerProcess> = (1..=3)
        .map(|i| {
            ConsumerProcess::start(
                &format!("consumer {i}"),
                &[&[topic.as_str()][..], &args].concat(),
            )
        })
        .collect();
    wait_for_members(&group, 3);

    // The last third waits until the added process is in the group.
    let sends = Sends::new(2 * n / 3);
    let sender = send_in_background(&topic, n, 16, sends.clone());
    let sent = || sends.done();

    // Kill one process a third of the way, once it has printed some of its share.
    wait_while_progressing("sends and consumer 2", || {
        let progress = sent() + procs[1].count();
        (sent() >= n / 3 && procs[1].count() >= n / 30, progress)
    });
    // Its stdout is read slowly for a while before the kill: the pipe fills up, and
    // whatever it acknowledges meanwhile must already be in the pipe.
    let victim = procs.remove(1);
    victim.stalled.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(2));
    let victim_pid = victim.pid();
    let killed = victim.kill();
    let killed_at = sent();
    // A new process two thirds of the way; the rest is sent once it is in the group.
    wait_while_progressing("sends", || (sent() >= 2 * n / 3, sent()));
    let added_at = sent();
    procs.push(ConsumerProcess::start(
        "consumer 4",
        &[&[topic.as_str()][..], &args].concat(),
    ));
    wait_for_members(&group, 3);
    sends.allowed.store(n, Ordering::SeqCst);
    sender.join().expect("sender");
    let sending = started.elapsed();
    let acked = std::mem::take(&mut *sends.acked.lock().unwrap());
    let failed = sends.failed.load(Ordering::Relaxed);

    let alive: Vec<&ConsumerProcess> = procs.iter().collect();
    let seen = wait_until_all_printed(&acked, &alive, &killed);
    let elapsed = started.elapsed();
    // Everything is out; the survivors are killed too (what they printed is kept).
    let outputs: Vec<(String, Vec<Printed>)> =
        std::iter::once(("consumer 2 (killed)".to_string(), killed))
            .chain(procs.into_iter().map(|p| (p.name.clone(), p.kill())))
            .collect();
    let all: Vec<&Printed> = outputs.iter().flat_map(|(_, p)| p).collect();
    let lost = acked.iter().filter(|id| !seen.contains(*id)).count();
    let dups = duplicates(all.iter().copied());
    let unacked = seen.iter().filter(|id| !acked.contains(*id)).count();

    eprintln!(
        "reliability: consumer group of rmq consume processes, one SIGKILLed (pid \
         {victim_pid}, its stdout unread for 2 s before) after {killed_at} sends, one added \
         after {added_at}"
    );
    eprintln!("| process | printed |");
    eprintln!("|---|---|");
    for (name, p) in &outputs {
        eprintln!("| {name} | {} |", p.len());
    }
    eprintln!(
        "| sent / acked / failed | {n} / {} / {failed} |",
        acked.len()
    );
    eprintln!("| lost | {lost} |");
    eprintln!(
        "| duplicates | {dups} ({:.2} % of acked) |",
        percent(dups, acked.len())
    );
    eprintln!("| printed but not acked | {unacked} |");
    eprintln!(
        "| seconds | {:.1} (sends done at {:.1}) |",
        elapsed.as_secs_f64(),
        sending.as_secs_f64()
    );

    assert_eq!(lost, 0, "acknowledged messages no process printed");
    assert_eq!(acked.len() + failed, n);
    let (killed_lines, added_lines) = (outputs[0].1.len(), outputs[3].1.len());
    assert!(
        killed_lines > 0,
        "the killed process consumed before it died"
    );
    assert!(
        added_lines > 0,
        "the added process took queues and consumed"
    );
}

#[test]
fn reliability_a_lite_pull_process_killed_in_a_batch_repeats_only_what_it_had_not_committed() {
    let _one = one_heavy_test_at_a_time();
    let n = 10_000 * scale();
    // Printed by the first life before the kill: with 10 ms per message that is about
    // 6 s, past one auto-commit (every 5 s), and always inside a batch of up to 10.
    let first_life = 600;
    let topic = created_topic(8);
    let group = unique("cli_rel_lite");
    let sends = Sends::new(n);
    send_in_background(&topic, n, 4, sends.clone())
        .join()
        .expect("sender");
    let acked = std::mem::take(&mut *sends.acked.lock().unwrap());
    let started = Instant::now();

    let common = [
        topic.as_str(),
        "--group",
        group.as_str(),
        "--from",
        "first",
        "--lite-pull",
    ];
    let first = ConsumerProcess::start("first life", &[&common[..], &["--delay", "0.01"]].concat());
    wait_while_progressing("the first life", || {
        (first.count() >= first_life, first.count())
    });
    let before = first.kill();
    // Offsets the first life committed, read once the broker has closed its connection
    // (anything it sent before dying has been handled then).
    wait_for_members(&group, 0);
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin");
    let broker = &cluster().broker_addrs()[0].1;
    let committed: HashMap<i32, Option<i64>> = (0..8)
        .map(|q| {
            let mq = MessageQueue::new(topic.as_str(), "broker-a", q);
            let off = admin
                .api()
                .query_consumer_offset(broker, &group, &mq, Duration::from_secs(5))
                .expect("query the committed offset");
            (q, off)
        })
        .collect();
    // What must come again: every message printed at or after its queue's committed
    // offset (a queue without a commit starts from its first offset).
    let must_repeat: HashSet<&str> = before
        .iter()
        .filter(|p| committed[&p.queue].is_none_or(|c| p.offset >= c))
        .map(|p| p.msg_id.as_str())
        .collect();

    let second = ConsumerProcess::start("second life", &common);
    let seen = wait_until_all_printed(&acked, &[&second], &before);
    let elapsed = started.elapsed();
    let after = second.kill();
    let first_ids: HashSet<&str> = before.iter().map(|p| p.msg_id.as_str()).collect();
    let repeated: HashSet<&str> = after
        .iter()
        .map(|p| p.msg_id.as_str())
        .filter(|id| first_ids.contains(id))
        .collect();
    let lost = acked.iter().filter(|id| !seen.contains(*id)).count();
    let dups = duplicates(before.iter().chain(&after));
    let commits = committed.values().filter(|c| c.is_some()).count();

    eprintln!("reliability: lite pull rmq consume SIGKILLed in a batch, restarted in the group");
    eprintln!("| | |");
    eprintln!("|---|---|");
    eprintln!("| acked sends | {} |", acked.len());
    eprintln!("| printed by the first life | {} |", before.len());
    eprintln!("| queues with a commit at the kill | {commits} of 8 |");
    eprintln!("| printed by the second life | {} |", after.len());
    eprintln!("| lost | {lost} |");
    eprintln!(
        "| duplicates | {dups} ({:.2} % of acked; {} printed since the last commit) |",
        percent(dups, acked.len()),
        must_repeat.len()
    );
    eprintln!("| seconds | {:.1} |", elapsed.as_secs_f64());

    assert_eq!(lost, 0, "acknowledged messages no life printed");
    // Exactly what was printed since the last commit comes again: never less (that would
    // be an offset committed before its batch was processed), never more.
    assert_eq!(repeated, must_repeat);
    assert_eq!(dups, must_repeat.len(), "each comes again once");
    assert!(
        !must_repeat.is_empty(),
        "killed inside a batch: its printed messages were not committed"
    );
}
