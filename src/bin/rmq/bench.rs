//! `rmq bench produce`: a load generator in the spirit of the Java benchmark `Producer`.
//!
//! As in Java: one producer shared by every sending thread, a random alphanumeric body
//! built once, no compression, ROCKETMQ binary headers by default, sync mode with many
//! threads (64) and async mode with one thread. Unlike Java, async sends are bounded by
//! an in-flight window rather than by polling the executor's queue, latencies go into an
//! HDR histogram (microseconds), and the run ends with one summary on stdout: a human
//! line, then a JSON line. An optional warm-up (`--warmup N`) is sent by the same threads
//! first and kept out of the figures of the measured phase.

use std::sync::Arc;
use std::thread::Scope;
use std::time::{Duration, Instant};

use clap::{value_parser, ValueEnum};
use parking_lot::{Condvar, Mutex};
use rocketmq_blocking::client::validators::check_send_topic;
use rocketmq_blocking::remoting::{Permit, Semaphore};
use rocketmq_blocking::ProducerOptions;
use rocketmq_blocking::TopicConfig;
use rocketmq_blocking::{Message, Producer, SendResult};

use crate::stats::{self, round, Counting, CpuSeconds, CpuTime, Latency, Progress, Recorder};
use crate::{
    check_queues, namesrv, parse_seconds, start_producer, CliResult, HeaderEncoding, Mode,
};

/// How long a run without `--count` or `--duration` lasts.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Room for the batch encoding's per-message header (Java `MessageBatch.encode`).
const BATCH_OVERHEAD_PER_MESSAGE: usize = 256;

#[derive(clap::Args)]
pub(crate) struct ProduceArgs {
    /// Topic to send to.
    #[arg(long)]
    topic: String,
    /// Sending threads [default: 64 in sync and oneway mode, 1 in async mode].
    #[arg(long, value_parser = value_parser!(u32).range(1..=4096))]
    threads: Option<u32>,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024, value_parser = value_parser!(u32).range(1..=4 * 1024 * 1024))]
    size: u32,
    /// Messages to send in total, split evenly across the threads.
    #[arg(long, conflicts_with = "duration", value_parser = value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Seconds to run [default: 10 unless --count is given].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Messages sent first, by the same producer, threads and window (split like --count);
    /// the measured phase starts once all are answered, and its TPS, latency and CPU leave
    /// them out.
    #[arg(long, value_name = "MESSAGES", default_value_t = 0)]
    warmup: u64,
    /// Send mode.
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    mode: Mode,
    /// Messages per SEND_BATCH_MESSAGE call (sync mode only); counts stay in messages.
    #[arg(long, default_value_t = 1, value_parser = value_parser!(u32).range(1..=4096))]
    batch: u32,
    /// Async sends in flight at most.
    #[arg(long, default_value_t = 1024, value_parser = value_parser!(u32).range(1..=65535))]
    inflight: u32,
    /// Producer group.
    #[arg(long, default_value = "rmq_bench_producer")]
    group: String,
    /// Request header encoding (the Java benchmark tools use rocketmq).
    #[arg(long, value_enum, default_value_t = HeaderEncoding::Rocketmq)]
    serialize: HeaderEncoding,
    /// Create (or update) the topic on every master broker first.
    #[arg(long)]
    create_topic: bool,
    /// Read and write queues per broker for --create-topic.
    #[arg(long, default_value_t = 8, requires = "create_topic")]
    queues: u32,
    /// Gather the threads' single sends into batches (Java 5 `setAutoBatch`; sync and
    /// async mode), with Java's batch delay and size unless given.
    #[arg(long)]
    auto_batch: bool,
    /// Longest wait for an auto-batch to fill, in ms (Java `batchMaxDelayMs`, 10).
    #[arg(long, requires = "auto_batch", value_parser = value_parser!(u64).range(1..=30_000))]
    batch_max_delay_ms: Option<u64>,
}

/// What every sending thread shares.
struct Run<'a> {
    producer: &'a Producer,
    message: Message,
    batch: usize,
    mode: Mode,
    /// The warm-up's results, kept apart from the measured phase's.
    warm: Arc<Recorder>,
    recorder: Arc<Recorder>,
    window: Semaphore,
    inflight: usize,
    send_timeout: Duration,
    /// Where the sending threads wait between the warm-up and the measured phase.
    gate: Gate,
}

/// Where the measured phase began.
struct Mark {
    at: Instant,
    cpu: Option<CpuTime>,
    /// How long the warm-up took, when there was one.
    warm_up: Option<Duration>,
}

impl Mark {
    fn now(warm_up: Option<Duration>) -> Mark {
        Mark {
            at: Instant::now(),
            cpu: stats::cpu_time(),
            warm_up,
        }
    }
}

pub(crate) fn produce(namesrv_arg: &Option<String>, args: ProduceArgs) -> CliResult {
    check_send_topic(&args.topic)?;
    let size = args.size as usize;
    let batch = args.batch as usize;
    if batch > 1 && args.mode != Mode::Sync {
        return Err(
            "--batch works in sync mode only (the producer has no async or oneway batch send)"
                .into(),
        );
    }
    let max = ProducerOptions::default().max_message_size;
    if batch > 1 && batch * (size + BATCH_OVERHEAD_PER_MESSAGE) > max {
        return Err(format!(
            "a batch of {batch} × {size} bytes would exceed the {max}-byte message limit"
        )
        .into());
    }
    if args.create_topic {
        check_queues(args.queues)?;
    }
    if args.auto_batch && (batch > 1 || args.mode == Mode::Oneway) {
        return Err(
            "--auto-batch batches single sync or async sends (not --batch, not oneway)".into(),
        );
    }
    let addr = namesrv(namesrv_arg)?;
    let threads = args
        .threads
        .map_or(if args.mode == Mode::Async { 1 } else { 64 }, |t| {
            t as usize
        });

    if args.create_topic {
        let brokers =
            crate::admin(&addr)?.create_topic(&TopicConfig::new(&args.topic, args.queues))?;
        eprintln!(
            "rmq: topic {} created on {}",
            args.topic,
            brokers.join(", ")
        );
    }
    // No compression, as in the Java benchmark: the threshold is above the body size.
    let producer = start_producer(
        crate::client_options(&addr, args.serialize.into()),
        &args.group,
        |b| {
            let b = b
                .compress_over(size.saturating_add(1))
                .auto_batch(args.auto_batch);
            match args.batch_max_delay_ms {
                Some(ms) => b.batch_max_delay(Duration::from_millis(ms)),
                None => b,
            }
        },
    )?;
    let inflight = match args.mode {
        Mode::Async => format!(" inflight={}", args.inflight),
        _ => String::new(),
    };
    eprintln!(
        "rmq: bench produce topic={} mode={} threads={threads} size={size} batch={batch}{inflight} auto_batch={} serialize={}",
        args.topic,
        name_of(args.mode),
        args.auto_batch,
        name_of(args.serialize),
    );

    let shares = match args.count {
        Some(n) => split(n, threads).into_iter().map(Some).collect(),
        None => vec![None; threads],
    };
    // Every thread passes the gate, even one whose warm-up share is 0.
    let warm_shares = (args.warmup > 0).then(|| split(args.warmup, threads));
    let duration = args
        .count
        .is_none()
        .then(|| args.duration.unwrap_or(DEFAULT_DURATION));
    let run = Run {
        producer: &producer,
        message: Message::new(&args.topic, random_alphanumeric(size)),
        batch,
        mode: args.mode,
        warm: Arc::new(Recorder::new()?),
        recorder: Arc::new(Recorder::new()?),
        window: Semaphore::new(args.inflight as usize),
        inflight: args.inflight as usize,
        send_timeout: producer.options().send_timeout,
        gate: Gate::default(),
    };
    let (mark, progress) = std::thread::scope(|s| {
        let started = run.start(s, warm_shares, shares, duration);
        if started.is_err() {
            run.gate.abandon();
        }
        started
    })?;
    if args.mode == Mode::Async {
        run.wait_for_callbacks(&run.recorder);
    }
    let elapsed = mark.at.elapsed();
    drop(progress);
    // Measured before shutdown so the figures describe the sending, not the goodbye.
    let cpu = stats::cpu_time();
    let rss = stats::peak_rss_kib();
    let client = ClientFigures::of(&producer.stats(), &args.topic);
    producer.shutdown();

    let (warm, recorder) = (&run.warm, &run.recorder);
    let measured_cpu = cpu.zip(mark.cpu).map(|(end, begin)| end.since(&begin));
    let first_ack = warm.first_ack().or(recorder.first_ack());

    let summary = Summary {
        mode: name_of(args.mode),
        topic: args.topic,
        threads,
        size,
        batch,
        inflight: (args.mode == Mode::Async).then_some(args.inflight),
        auto_batch: args.auto_batch,
        serialize: name_of(args.serialize),
        warmup: mark.warm_up.map(|d| WarmUp {
            messages: warm.acked(),
            failures: warm.failures(),
            elapsed_ms: round(d.as_secs_f64() * 1000.0, 1),
        }),
        messages: recorder.acked(),
        failures: recorder.failures(),
        elapsed_ms: round(elapsed.as_secs_f64() * 1000.0, 1),
        tps: round(recorder.acked() as f64 / elapsed.as_secs_f64().max(1e-9), 1),
        latency_ms: recorder.latency_ms(),
        measured_cpu_seconds: measured_cpu.map(CpuSeconds::from),
        cpu_us_per_msg: measured_cpu
            .filter(|_| recorder.acked() > 0)
            .map(|c| round(c.total() * 1e6 / recorder.acked() as f64, 2)),
        cpu_seconds: cpu.map(CpuSeconds::from),
        peak_rss_kib: rss,
        first_ack_ms: first_ack.map(|d| round(d.as_secs_f64() * 1000.0, 1)),
        first_ack_epoch_us: warm.first_ack_epoch_us().or(recorder.first_ack_epoch_us()),
        client,
    };
    println!("{}", summary.human());
    println!("{}", serde_json::to_string(&summary)?);
    let failures = recorder.failures() + warm.failures();
    if failures > 0 {
        let why = warm
            .first_error()
            .or(recorder.first_error())
            .unwrap_or("no result in time");
        let in_warm_up = match warm.failures() {
            0 => String::new(),
            n => format!(" ({n} in the warm-up)"),
        };
        return Err(format!("{failures} messages failed{in_warm_up}; first error: {why}").into());
    }
    Ok(())
}

impl Run<'_> {
    /// Starts the sending threads and, when there is a warm-up, waits for it to finish (every
    /// thread's share acknowledged or failed) before it lets them on to the measured phase.
    /// Returns where the measured phase began and its progress line; the threads go on
    /// sending in `s`.
    fn start<'scope>(
        &'scope self,
        s: &'scope Scope<'scope, '_>,
        warm_shares: Option<Vec<u64>>,
        shares: Vec<Option<u64>>,
        duration: Option<Duration>,
    ) -> Result<(Mark, Progress), String> {
        let Some(warm_shares) = warm_shares else {
            let mark = Mark::now(None);
            let progress = Progress::start(self.recorder.clone(), Counting::Sent)?;
            let until = duration.map(|d| mark.at + d);
            self.spawn(s, shares.into_iter().map(|share| (None, share)), until)?;
            return Ok((mark, progress));
        };
        let threads = shares.len();
        let begin = Instant::now();
        let warming = Progress::start(self.warm.clone(), Counting::WarmUp)?;
        self.spawn(s, warm_shares.into_iter().map(Some).zip(shares), None)?;
        self.gate.wait_for(threads);
        if self.mode == Mode::Async {
            self.wait_for_callbacks(&self.warm);
        }
        drop(warming);
        let mark = Mark::now(Some(begin.elapsed()));
        let progress = Progress::start(self.recorder.clone(), Counting::Sent)?;
        self.gate.open(duration.map(|d| mark.at + d));
        Ok((mark, progress))
    }

    /// One sending thread per (warm-up share, measured share).
    fn spawn<'scope>(
        &'scope self,
        s: &'scope Scope<'scope, '_>,
        shares: impl Iterator<Item = (Option<u64>, Option<u64>)>,
        until: Option<Instant>,
    ) -> Result<(), String> {
        for (i, (warm, share)) in shares.enumerate() {
            std::thread::Builder::new()
                .name(format!("rmq-bench-{i}"))
                .spawn_scoped(s, move || self.sender(warm, share, until))
                .map_err(|e| format!("cannot start sending thread {i}: {e}"))?;
        }
        Ok(())
    }

    /// A sending thread: its warm-up share when there is a warm-up, then, once the gate
    /// opens, its share of the measured phase.
    fn sender(&self, warm: Option<u64>, share: Option<u64>, until: Option<Instant>) {
        let until = match warm {
            None => until,
            Some(n) => {
                {
                    let _arrival = self.gate.arrival();
                    self.send(Some(n), &self.warm, None);
                }
                match self.gate.wait_open() {
                    GateState::Open { until } => until,
                    _ => return,
                }
            }
        };
        self.send(share, &self.recorder, until);
    }

    fn send(&self, left: Option<u64>, recorder: &Arc<Recorder>, until: Option<Instant>) {
        match self.mode {
            Mode::Async => self.send_async(left, recorder, until),
            Mode::Sync | Mode::Oneway => self.send_blocking(left, recorder, until),
        }
    }

    /// Sync and oneway sends: one call at a time per thread.
    fn send_blocking(&self, mut left: Option<u64>, recorder: &Recorder, until: Option<Instant>) {
        let batch: Vec<Message> = if self.batch > 1 {
            vec![self.message.clone(); self.batch]
        } else {
            Vec::new()
        };
        while !done(left, until) {
            let n = left.map_or(self.batch, |l| l.min(self.batch as u64) as usize);
            let started = Instant::now();
            let result = match self.mode {
                Mode::Oneway => self.producer.send_oneway(&self.message),
                _ if self.batch > 1 => self.producer.send_batch(&batch[..n]).map(drop),
                _ => self.producer.send(&self.message).map(drop),
            };
            match result {
                Ok(()) => recorder.ok(n as u64, started.elapsed()),
                Err(e) => recorder.failed(n as u64, &e),
            }
            if let Some(l) = left.as_mut() {
                *l -= n as u64;
            }
        }
    }

    /// Async sends, at most `--inflight` outstanding across all threads.
    fn send_async(&self, mut left: Option<u64>, recorder: &Arc<Recorder>, until: Option<Instant>) {
        while !done(left, until) {
            if let Some(l) = left.as_mut() {
                *l -= 1;
            }
            // Every send completes within its timeout, so waiting twice that is generous.
            let Some(permit) = self
                .window
                .acquire_until(Instant::now() + self.send_timeout * 2)
            else {
                recorder.failed(1, &"no in-flight async send completed in time");
                continue;
            };
            let pending = Pending {
                recorder: recorder.clone(),
                started: Instant::now(),
                _permit: permit,
                finished: false,
            };
            let queued = self
                .producer
                .send_async(self.message.clone(), move |r| pending.finish(r));
            if let Err(e) = queued {
                // The callback was dropped unrun, and its drop counted the failure.
                recorder.note_error(&e);
            }
        }
    }

    /// Takes back every window permit (and gives them back): then every callback has run.
    fn wait_for_callbacks(&self, recorder: &Recorder) {
        let deadline = Instant::now() + self.send_timeout + Duration::from_secs(5);
        let mut held = Vec::with_capacity(self.inflight);
        while held.len() < self.inflight {
            match self.window.acquire_until(deadline) {
                Some(p) => held.push(p),
                None => {
                    let missing = self.inflight - held.len();
                    recorder.failed(
                        missing as u64,
                        &format!(
                            "{missing} async sends got no callback within {:?}",
                            self.send_timeout
                        ),
                    );
                    return;
                }
            }
        }
    }
}

/// Whether a thread with `left` messages to go, or a deadline of `until`, should stop.
fn done(left: Option<u64>, until: Option<Instant>) -> bool {
    left == Some(0) || until.is_some_and(|t| Instant::now() >= t)
}

/// The boundary between the warm-up and the measured phase. Each sending thread arrives
/// after its warm-up share and waits; the main thread waits for all of them, takes its
/// readings and opens the gate with the measured phase's deadline, or abandons it (a
/// thread could not be started), which sends every thread home.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    /// Signalled on every arrival (the main thread waits).
    arrived: Condvar,
    /// Signalled when the gate opens or is abandoned (the sending threads wait).
    opened: Condvar,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum GateState {
    Closed { arrived: usize },
    Open { until: Option<Instant> },
    Abandoned,
}

impl Default for GateState {
    fn default() -> Self {
        GateState::Closed { arrived: 0 }
    }
}

impl Gate {
    /// Counts the calling thread as arrived when dropped, so that one that panics while
    /// warming up does not leave the main thread waiting for it.
    fn arrival(&self) -> Arrival<'_> {
        Arrival(self)
    }

    /// Blocks until the gate is opened or abandoned and returns which.
    fn wait_open(&self) -> GateState {
        let mut state = self.state.lock();
        while matches!(*state, GateState::Closed { .. }) {
            self.opened.wait(&mut state);
        }
        *state
    }

    /// Blocks until `threads` threads have arrived.
    fn wait_for(&self, threads: usize) {
        let mut state = self.state.lock();
        while matches!(*state, GateState::Closed { arrived } if arrived < threads) {
            self.arrived.wait(&mut state);
        }
    }

    fn open(&self, until: Option<Instant>) {
        self.release(GateState::Open { until });
    }

    fn abandon(&self) {
        self.release(GateState::Abandoned);
    }

    fn release(&self, to: GateState) {
        *self.state.lock() = to;
        self.opened.notify_all();
    }
}

struct Arrival<'a>(&'a Gate);

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if let GateState::Closed { arrived } = &mut *self.0.state.lock() {
            *arrived += 1;
        }
        self.0.arrived.notify_all();
    }
}

/// The final report; the JSON line is this struct, in this field order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    mode: String,
    topic: String,
    threads: usize,
    size: usize,
    batch: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    inflight: Option<u32>,
    /// Whether the producer auto-batched the single sends (`--auto-batch`).
    auto_batch: bool,
    serialize: String,
    /// The warm-up, when there was one; nothing below counts it except `cpuSeconds`,
    /// `peakRssKiB` and the first acknowledgement.
    #[serde(skip_serializing_if = "Option::is_none")]
    warmup: Option<WarmUp>,
    /// Acknowledged messages (queued ones in oneway mode).
    messages: u64,
    failures: u64,
    elapsed_ms: f64,
    tps: f64,
    latency_ms: Latency,
    /// CPU used from the start to the end of the measured phase.
    measured_cpu_seconds: Option<CpuSeconds>,
    /// The same per acknowledged message, in microseconds.
    cpu_us_per_msg: Option<f64>,
    /// CPU used by the process up to the end of the sending (producer start and warm-up
    /// included).
    cpu_seconds: Option<CpuSeconds>,
    #[serde(rename = "peakRssKiB")]
    peak_rss_kib: Option<u64>,
    first_ack_ms: Option<f64>,
    /// The wall clock at the first acknowledgement (µs since the Unix epoch).
    first_ack_epoch_us: Option<u64>,
    /// What the producer's own counters (`Producer::stats`) say of the whole run, warm-up
    /// included: the figures an application sees of the same sends.
    client: ClientFigures,
}

/// The producer's counters for the bench topic.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ClientFigures {
    messages_sent: u64,
    failed: u64,
    send_p50_ms: f64,
    send_p99_ms: f64,
    send_max_ms: f64,
}

impl ClientFigures {
    fn of(stats: &rocketmq_blocking::ProducerStats, topic: &str) -> ClientFigures {
        let ms = |d: std::time::Duration| round(d.as_secs_f64() * 1000.0, 3);
        match stats.topics.get(topic) {
            Some(t) => ClientFigures {
                messages_sent: t.messages_sent,
                failed: t.failed,
                send_p50_ms: ms(t.send_latency.p50()),
                send_p99_ms: ms(t.send_latency.p99()),
                send_max_ms: ms(t.send_latency.max()),
            },
            None => ClientFigures {
                messages_sent: 0,
                failed: 0,
                send_p50_ms: 0.0,
                send_p99_ms: 0.0,
                send_max_ms: 0.0,
            },
        }
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WarmUp {
    /// Acknowledged messages.
    messages: u64,
    failures: u64,
    elapsed_ms: f64,
}

impl Summary {
    fn human(&self) -> String {
        let what = if self.mode == "oneway" {
            "queued (oneway: no acks)"
        } else {
            "acked"
        };
        let l = &self.latency_ms;
        let warm_up = self.warmup.as_ref().map_or(String::new(), |w| {
            format!(
                "warm-up: {} {what}, {} failed in {:.2} s; then ",
                w.messages,
                w.failures,
                w.elapsed_ms / 1000.0
            )
        });
        let cpu = stats::human_cpu(self.measured_cpu_seconds.as_ref());
        let per_msg = self
            .cpu_us_per_msg
            .map_or("?".into(), |us| format!("{us:.1}"));
        let total = self
            .cpu_seconds
            .map_or("?".into(), |c| format!("{:.2}", c.total));
        let rss = stats::human_rss(self.peak_rss_kib);
        let first = self
            .first_ack_ms
            .map_or("-".into(), |ms| format!("{ms:.0} ms"));
        format!(
            "{warm_up}{} messages {what}, {} failed in {:.2} s: {:.0} msg/s; latency ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}; cpu {cpu}, {per_msg} µs/msg ({total} s since start); peak RSS {rss}; first ack {first} after start",
            self.messages,
            self.failures,
            self.elapsed_ms / 1000.0,
            self.tps,
            l.p50,
            l.p99,
            l.p999,
            l.max,
        )
    }
}

/// One async send in flight. Its drop returns the window slot, and counts a failure if the
/// producer dropped the callback without running it (as it does when `send_async` fails).
struct Pending {
    recorder: Arc<Recorder>,
    started: Instant,
    _permit: Permit,
    finished: bool,
}

impl Pending {
    fn finish(mut self, result: rocketmq_blocking::Result<SendResult>) {
        self.finished = true;
        // Recorded before the permit is released, so that a drained window means every
        // result is in the recorder.
        match result {
            Ok(_) => self.recorder.ok(1, self.started.elapsed()),
            Err(e) => self.recorder.failed(1, &e),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.finished {
            self.recorder.count_failed(1);
        }
    }
}

/// `total` split over `parts` as evenly as possible, the first ones taking the remainder.
fn split(total: u64, parts: usize) -> Vec<u64> {
    let parts_u64 = parts as u64;
    (0..parts_u64)
        .map(|i| total / parts_u64 + u64::from(i < total % parts_u64))
        .collect()
}

/// A body of random ASCII letters and digits, built once (as the Java benchmark does) so
/// that sending measures the client, not the generator.
pub(crate) fn random_alphanumeric(len: usize) -> Vec<u8> {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // xorshift64: plenty for filler bytes; the seed only has to be non-zero.
    let mut x = (nanos ^ u64::from(std::process::id()) << 32) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            CHARS[(x % CHARS.len() as u64) as usize]
        })
        .collect()
}

fn name_of(v: impl ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_split_evenly_with_the_remainder_first() {
        assert_eq!(split(10, 4), [3, 3, 2, 2]);
        assert_eq!(split(2, 4), [1, 1, 0, 0]);
        assert_eq!(split(8, 1), [8]);
        assert_eq!(split(200_000, 64).iter().sum::<u64>(), 200_000);
    }

    #[test]
    fn bodies_are_alphanumeric_and_of_the_asked_size() {
        let b = random_alphanumeric(4096);
        assert_eq!(b.len(), 4096);
        assert!(b.iter().all(u8::is_ascii_alphanumeric));
        assert!(b.iter().collect::<std::collections::HashSet<_>>().len() > 50);
    }
}
