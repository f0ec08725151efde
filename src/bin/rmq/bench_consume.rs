//! `rmq bench consume`: drains a topic from its first offset with a push consumer (in the
//! spirit of the Java benchmark `Consumer`) or a lite pull consumer (a `poll` loop).
//!
//! Messages are told apart by (broker, queue, offset): the run stops when `--count`
//! distinct ones have arrived, and deliveries of an offset already seen are counted as
//! duplicates. The latency of a message is end to end: the consumer's clock when the
//! listener (or `poll`) gets it minus the producer's `bornTimestamp` (so producer and
//! consumer clocks must agree, and a backlog produced earlier shows its age). Progress goes
//! to stderr once a second; stdout gets a human line, then a JSON line.
//!
//! Two spans are reported. `elapsedMs`, `tps` and `cpuSeconds` count from the consumer's
//! start, as the peer contract's `Consume.java` does (route, rebalance and the first pull
//! included). `drainMs`, `drainTps`, `drainCpuSeconds` and `cpuUsPerMsg` count from the
//! first message to the last counted one: the drain alone, which is what the floor
//! (`benches/floor.rs`) measures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::value_parser;
use crossbeam_channel::{bounded, Receiver, Sender};
use parking_lot::Mutex;
use rocketmq_blocking::client::validators::check_topic;
use rocketmq_blocking::MessageExt;
use rocketmq_blocking::{ConsumeFromWhere, LitePullConsumer};

use crate::stats::{self, round, Counting, CpuSeconds, CpuTime, Latency, Progress, Recorder};
use crate::{namesrv, parse_seconds, push_consumer, CliResult, HeaderEncoding};

/// Longest single `poll` of the lite pull loop, so that the count is checked often.
const POLL_SLICE: Duration = Duration::from_millis(500);

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Topic to consume.
    #[arg(long)]
    topic: String,
    /// Consumer group; a new group starts at the first offset.
    #[arg(long)]
    group: String,
    /// Consume threads of the push consumer (Java `consumeThreadMin` and `consumeThreadMax`).
    #[arg(long, default_value_t = 20, value_parser = value_parser!(u32).range(1..=1000))]
    threads: u32,
    /// Stop after this many distinct messages; fewer by the timeout is a failure.
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Seconds to run at most (counted from the consumer's start).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    timeout: Duration,
    /// Orderly listener (one thread per queue at a time).
    #[arg(long)]
    orderly: bool,
    /// A lite pull consumer (Java `DefaultLitePullConsumer`, subscribed, default options)
    /// polled by one thread, instead of a push consumer.
    #[arg(long, conflicts_with_all = ["orderly", "threads"])]
    lite_pull: bool,
    /// Request header encoding (the Java benchmark tools use rocketmq).
    #[arg(long, value_enum, default_value_t = HeaderEncoding::Rocketmq)]
    serialize: HeaderEncoding,
}

pub(crate) fn run(namesrv_arg: &Option<String>, args: ConsumeArgs) -> CliResult {
    check_topic(&args.topic)?;
    let addr = namesrv(namesrv_arg)?;
    let recorder = Arc::new(Recorder::new()?);
    let (done_tx, done) = bounded(1);
    let begin = Instant::now();
    let deadline = begin + args.timeout;
    let tally = Arc::new(Tally::new(args.count, recorder.clone(), begin, done_tx));
    let (mode, threads) = match (args.lite_pull, args.orderly) {
        (true, _) => ("lite-pull", 1),
        (false, true) => ("orderly", args.threads as usize),
        (false, false) => ("concurrently", args.threads as usize),
    };
    let announce = || {
        eprintln!(
            "rmq: bench consume topic={} group={} threads={threads} mode={mode}",
            args.topic, args.group
        );
        Progress::start(recorder.clone(), Counting::Consumed)
    };
    let (cpu, rss) = if args.lite_pull {
        let consumer = LitePullConsumer::builder(&args.group)
            .client_options(crate::client_options(&addr, args.serialize.into()))
            .consume_from_where(ConsumeFromWhere::FirstOffset)
            .subscribe(&args.topic, "*")
            .start()?;
        let progress = announce()?;
        let polled = poll_until_done(&consumer, &tally, &done, deadline);
        stop(progress, || consumer.shutdown(), polled)?
    } else {
        let listener = {
            let tally = tally.clone();
            move |msgs: &[MessageExt], _: &_| tally.record(msgs)
        };
        let consumer = push_consumer(
            crate::client_options(&addr, args.serialize.into()),
            &args.group,
            args.orderly,
            listener,
        )
        .subscribe(&args.topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .consume_thread_min(threads)
        .consume_thread_max(threads)
        .start()?;
        let progress = announce()?;
        // Either the count arrives or the time is up; both end the run.
        let _ = done.recv_deadline(deadline);
        stop(progress, || consumer.shutdown(), Ok(()))?
    };

    // After the shutdown every listener has returned, so the recorder is complete.
    let messages = recorder.acked();
    let elapsed = match tally.last_us.load(Ordering::Relaxed) {
        0 => args.timeout,
        us => Duration::from_micros(us),
    };
    // The drain alone: from the first message (its batch included) to the last counted.
    let (drain, drain_cpu) = match tally.first.get() {
        Some((first, first_cpu)) if tally.last_us.load(Ordering::Relaxed) > 0 => (
            Some(elapsed.saturating_sub(*first)),
            cpu.as_ref()
                .zip(first_cpu.as_ref())
                .map(|(end, at)| end.since(at)),
        ),
        _ => (None, None),
    };
    let summary = Summary {
        mode: mode.to_string(),
        topic: args.topic,
        group: args.group,
        threads,
        messages,
        deliveries: tally.deliveries.load(Ordering::Relaxed),
        duplicates: tally.duplicates.load(Ordering::Relaxed),
        elapsed_ms: round(elapsed.as_secs_f64() * 1000.0, 1),
        tps: round(messages as f64 / elapsed.as_secs_f64().max(1e-9), 1),
        latency_ms: recorder.latency_ms(),
        cpu_seconds: cpu.map(CpuSeconds::from),
        drain_ms: drain.map(|d| round(d.as_secs_f64() * 1000.0, 1)),
        drain_tps: drain.map(|d| round(messages as f64 / d.as_secs_f64().max(1e-9), 1)),
        cpu_us_per_msg: drain_cpu
            .as_ref()
            .map(|c| round(c.total() * 1e6 / messages.max(1) as f64, 2)),
        drain_cpu_seconds: drain_cpu.map(CpuSeconds::from),
        peak_rss_kib: rss,
        first_message_ms: recorder
            .first_ack()
            .map(|d| round(d.as_secs_f64() * 1000.0, 1)),
        first_message_epoch_us: recorder.first_ack_epoch_us(),
    };
    println!("{}", summary.human());
    println!("{}", serde_json::to_string(&summary)?);
    match args.count {
        Some(n) if messages < n => Err(format!(
            "only {messages} of {n} messages arrived within {:?}",
            args.timeout
        )
        .into()),
        _ => Ok(()),
    }
}

/// Ends a run: stops the progress line, measures this process (before the shutdown, so the
/// figures describe the consuming, not the goodbye), then shuts the consumer down and
/// passes on how the run went.
fn stop(
    progress: Progress,
    shutdown: impl FnOnce(),
    outcome: rocketmq_blocking::Result<()>,
) -> Result<(Option<CpuTime>, Option<u64>), rocketmq_blocking::Error> {
    drop(progress);
    let measured = (stats::cpu_time(), stats::peak_rss_kib());
    shutdown();
    outcome.map(|()| measured)
}

/// The lite pull loop: polls and records until the count is reached or `deadline` passes.
fn poll_until_done(
    consumer: &LitePullConsumer,
    tally: &Tally,
    done: &Receiver<()>,
    deadline: Instant,
) -> rocketmq_blocking::Result<()> {
    while done.try_recv().is_err() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        tally.record(&consumer.poll_timeout(left.min(POLL_SLICE))?);
    }
    Ok(())
}

/// What the listener shares with the main thread.
struct Tally {
    count: Option<u64>,
    /// Offsets delivered so far, and how many distinct ones.
    seen: Mutex<Seen>,
    /// Every message handed to the listener (or returned by `poll`).
    deliveries: AtomicU64,
    /// Deliveries of an offset delivered before.
    duplicates: AtomicU64,
    recorder: Arc<Recorder>,
    begin: Instant,
    /// When the last counted message arrived, in µs since `begin`.
    last_us: AtomicU64,
    /// When the first message arrived, and the process's CPU time then.
    first: std::sync::OnceLock<(Duration, Option<CpuTime>)>,
    /// Signalled once, by the listener that gets distinct message number `count`.
    done: Sender<()>,
}

impl Tally {
    fn new(count: Option<u64>, recorder: Arc<Recorder>, begin: Instant, done: Sender<()>) -> Self {
        Tally {
            count,
            seen: Mutex::new(Seen::default()),
            deliveries: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            recorder,
            begin,
            last_us: AtomicU64::new(0),
            first: std::sync::OnceLock::new(),
            done,
        }
    }

    /// The listener. Messages beyond the count are acknowledged but not recorded: the
    /// run is over and the consumer about to shut down. A batch is one clock reading and
    /// one lock of each kind, so the bench's own cost per message stays small beside the
    /// client's (its drain figures are the process's CPU).
    fn record(&self, msgs: &[MessageExt]) -> bool {
        if msgs.is_empty() {
            return true;
        }
        let since_begin = self.begin.elapsed();
        self.first.get_or_init(|| (since_begin, stats::cpu_time()));
        let now = std::time::SystemTime::now();
        let mut latencies = Vec::with_capacity(msgs.len());
        let mut reached = false;
        {
            let mut seen = self.seen.lock();
            for m in msgs {
                let Some(n) = seen.first_delivery(m) else {
                    self.duplicates.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                if self.count.is_some_and(|c| n > c) {
                    continue;
                }
                latencies.push(end_to_end(now, m.born_timestamp()));
                reached |= Some(n) == self.count;
            }
        }
        self.deliveries
            .fetch_add(msgs.len() as u64, Ordering::Relaxed);
        if !latencies.is_empty() {
            self.recorder.ok_each(&latencies);
            let at = u64::try_from(since_begin.as_micros()).unwrap_or(u64::MAX);
            self.last_us.fetch_max(at.max(1), Ordering::Relaxed);
        }
        if reached {
            let _ = self.done.try_send(());
        }
        true
    }
}

/// The offsets delivered, per broker and queue.
#[derive(Default)]
struct Seen {
    queues: HashMap<String, HashMap<i32, OffsetSet>>,
    distinct: u64,
}

impl Seen {
    /// The number of distinct messages so far if `m` is one more; `None` for a duplicate.
    fn first_delivery(&mut self, m: &MessageExt) -> Option<u64> {
        if !self.queues.contains_key(m.broker_name()) {
            self.queues
                .insert(m.broker_name().to_string(), HashMap::new());
        }
        let queue = self
            .queues
            .get_mut(m.broker_name())?
            .entry(m.queue_id())
            .or_default();
        if !queue.insert(m.queue_offset()) {
            return None;
        }
        self.distinct += 1;
        Some(self.distinct)
    }
}

/// A set of queue offsets as a bitmap over the range seen so far: a queue's offsets are
/// dense, so a million of them take 125 KiB (a hash set would take tens of MiB and show in
/// the peak RSS this benchmark reports).
#[derive(Default)]
struct OffsetSet {
    /// `offset / 64` of the first word.
    base: i64,
    words: Vec<u64>,
}

impl OffsetSet {
    /// Adds `offset`; false if it was there already.
    fn insert(&mut self, offset: i64) -> bool {
        let word = offset.div_euclid(64);
        if self.words.is_empty() {
            self.base = word;
        } else if word < self.base {
            // Consume threads finish out of order: an earlier offset may come later.
            let grow = usize::try_from(self.base - word).unwrap_or(usize::MAX);
            self.words.splice(0..0, std::iter::repeat_n(0, grow));
            self.base = word;
        }
        let i = usize::try_from(word - self.base).unwrap_or(usize::MAX);
        if i >= self.words.len() {
            self.words.resize(i + 1, 0);
        }
        let bit = 1u64 << offset.rem_euclid(64);
        let new = self.words[i] & bit == 0;
        self.words[i] |= bit;
        new
    }
}

/// `now` minus a message's born time; zero if the producer's clock is ahead.
fn end_to_end(now: std::time::SystemTime, born: std::time::SystemTime) -> Duration {
    now.duration_since(born).unwrap_or(Duration::ZERO)
}

/// The final report; the JSON line is this struct, in this field order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    mode: String,
    topic: String,
    group: String,
    /// Consume threads (push) or polling threads (lite pull).
    threads: usize,
    /// Distinct messages counted (by broker, queue and offset).
    messages: u64,
    /// Messages handed to the application, duplicates and any beyond the count included.
    deliveries: u64,
    /// Deliveries of an offset delivered before.
    duplicates: u64,
    /// From the consumer's start to the last counted message (or the timeout if none came).
    elapsed_ms: f64,
    tps: f64,
    /// End to end: consumer's now minus `bornTimestamp`.
    latency_ms: Latency,
    /// The process's CPU from its start to the end of the run (before the shutdown).
    cpu_seconds: Option<CpuSeconds>,
    /// From the first message to the last counted one.
    drain_ms: Option<f64>,
    /// Messages over `drain_ms`.
    drain_tps: Option<f64>,
    /// The process's CPU over `drain_ms`, per message.
    cpu_us_per_msg: Option<f64>,
    /// The process's CPU over `drain_ms`.
    drain_cpu_seconds: Option<CpuSeconds>,
    #[serde(rename = "peakRssKiB")]
    peak_rss_kib: Option<u64>,
    /// From process start to the first message.
    first_message_ms: Option<f64>,
    /// The wall clock at the first message (µs since the Unix epoch).
    first_message_epoch_us: Option<u64>,
}

impl Summary {
    fn human(&self) -> String {
        let l = &self.latency_ms;
        let first = self
            .first_message_ms
            .map_or("-".into(), |ms| format!("{ms:.0} ms"));
        format!(
            "{} messages consumed ({} duplicates) in {:.2} s: {:.0} msg/s ({}); end-to-end latency ms p50 {:.3} p99 {:.3} max {:.3}; cpu {}; peak RSS {}; first message {first} after start",
            self.messages,
            self.duplicates,
            self.elapsed_ms / 1000.0,
            self.tps,
            match (self.drain_ms, self.drain_tps, self.cpu_us_per_msg) {
                (Some(ms), Some(tps), cpu) => format!(
                    "from the first message {:.2} s, {tps:.0} msg/s, cpu {} µs/msg",
                    ms / 1000.0,
                    cpu.map_or("?".into(), |c| format!("{c:.2}"))
                ),
                _ => "no message".into(),
            },
            l.p50,
            l.p99,
            l.max,
            stats::human_cpu(self.cpu_seconds.as_ref()),
            stats::human_rss(self.peak_rss_kib),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_to_end_latency_is_never_negative() {
        let now = std::time::SystemTime::now();
        let d = end_to_end(now, now - Duration::from_millis(1500));
        assert_eq!(d, Duration::from_millis(1500));
        assert_eq!(
            end_to_end(now, now + Duration::from_secs(60)),
            Duration::ZERO
        );
        assert!(end_to_end(now, std::time::UNIX_EPOCH) > Duration::ZERO);
    }

    /// A message of queue `queue_id` on broker-a at `offset`.
    fn at(queue_id: i32, offset: i64) -> MessageExt {
        let mut m = MessageExt::default();
        m.set_stored(
            rocketmq_blocking::Message::new("T", ""),
            "broker-a",
            queue_id,
            offset,
            0,
        );
        m
    }

    /// A tally that stops at 3, and the receiver of its done signal.
    fn tally_of_three() -> (Tally, Receiver<()>) {
        let (done, signalled) = bounded(1);
        let recorder = Arc::new(Recorder::new().unwrap());
        (
            Tally::new(Some(3), recorder, Instant::now(), done),
            signalled,
        )
    }

    #[test]
    fn only_the_count_is_recorded_and_done_is_signalled_once() {
        let (tally, signalled) = tally_of_three();
        let msgs: Vec<MessageExt> = (0..5).map(|o| at(0, o)).collect();
        assert!(tally.record(&msgs[..2]));
        assert!(signalled.try_recv().is_err());
        assert!(tally.record(&msgs[2..]));
        assert_eq!(tally.recorder.acked(), 3);
        assert!(signalled.try_recv().is_ok());
        assert!(tally.last_us.load(Ordering::Relaxed) > 0);
        let (first, _) = tally.first.get().expect("the first message is noted");
        assert!(first.as_micros() as u64 <= tally.last_us.load(Ordering::Relaxed));
        assert_eq!(tally.deliveries.load(Ordering::Relaxed), 5);
        assert_eq!(tally.duplicates.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_redelivered_offset_is_a_duplicate_and_does_not_count() {
        let (tally, signalled) = tally_of_three();
        // Same offset on another queue or broker is another message.
        let mut other_broker = at(0, 7);
        let msg = other_broker.message().clone();
        other_broker.set_stored(msg, "broker-b", 0, 7, 0);
        assert!(tally.record(&[at(0, 7), at(0, 7), at(1, 7)]));
        assert_eq!(tally.recorder.acked(), 2);
        assert!(signalled.try_recv().is_err());
        assert!(tally.record(&[other_broker]));
        assert_eq!(tally.recorder.acked(), 3);
        assert!(signalled.try_recv().is_ok());
        assert_eq!(tally.deliveries.load(Ordering::Relaxed), 4);
        assert_eq!(tally.duplicates.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn offset_sets_grow_both_ways_and_stay_small() {
        let mut set = OffsetSet::default();
        assert!(set.insert(1000));
        assert!(!set.insert(1000));
        // Earlier offsets arrive late with concurrent consume threads.
        assert!(set.insert(3));
        assert!(set.insert(0));
        assert!(set.insert(1_000_063));
        for o in [0, 3, 1000, 1_000_063] {
            assert!(!set.insert(o), "{o}");
        }
        assert!(set.insert(64) && set.insert(63) && set.insert(1001));
        assert_eq!(set.base, 0);
        assert_eq!(set.words.len(), 1_000_063 / 64 + 1);
    }
}
