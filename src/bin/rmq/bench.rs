//! `rmq bench produce`: a load generator in the spirit of the Java benchmark `Producer`.
//!
//! As in Java: one producer shared by every sending thread, a random alphanumeric body
//! built once, no compression, ROCKETMQ binary headers by default, sync mode with many
//! threads (64) and async mode with one thread. Unlike Java, async sends are bounded by
//! an in-flight window rather than by polling the executor's queue, latencies go into an
//! HDR histogram (microseconds), and the run ends with one summary on stdout: a human
//! line, then a JSON line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{value_parser, ValueEnum};
use rocketmq_blocking::admin::Admin;
use rocketmq_blocking::client::validators::check_send_topic;
use rocketmq_blocking::client::TopicConfig;
use rocketmq_blocking::producer::ProducerOptions;
use rocketmq_blocking::remoting::{Permit, Semaphore};
use rocketmq_blocking::{Message, Producer, SendResult};

use crate::stats::{self, round, Counting, CpuSeconds, Latency, Progress, Recorder};
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
    queues: i32,
}

/// What every sending thread shares.
struct Run<'a> {
    producer: &'a Producer,
    message: Message,
    batch: usize,
    mode: Mode,
    until: Option<Instant>,
    recorder: Arc<Recorder>,
    window: Semaphore,
    send_timeout: Duration,
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
    let addr = namesrv(namesrv_arg)?;
    let threads = args
        .threads
        .map_or(if args.mode == Mode::Async { 1 } else { 64 }, |t| {
            t as usize
        });

    if args.create_topic {
        let brokers =
            Admin::new(&addr)?.create_topic(&TopicConfig::new(&args.topic, args.queues))?;
        eprintln!(
            "rmq: topic {} created on {}",
            args.topic,
            brokers.join(", ")
        );
    }
    // No compression, as in the Java benchmark: the threshold is above the body size.
    let producer = start_producer(&addr, &args.group, args.serialize.into(), |b| {
        b.compress_msg_body_over_howmuch(size.saturating_add(1))
    })?;
    let inflight = match args.mode {
        Mode::Async => format!(" inflight={}", args.inflight),
        _ => String::new(),
    };
    eprintln!(
        "rmq: bench produce topic={} mode={} threads={threads} size={size} batch={batch}{inflight} serialize={}",
        args.topic,
        name_of(args.mode),
        name_of(args.serialize),
    );

    let recorder = Arc::new(Recorder::new()?);
    let shares = match args.count {
        Some(n) => split(n, threads).into_iter().map(Some).collect(),
        None => vec![None; threads],
    };
    let message = Message::new(&args.topic, random_alphanumeric(size));
    let begin = Instant::now();
    let run = Run {
        producer: &producer,
        message,
        batch,
        mode: args.mode,
        until: match args.count {
            Some(_) => None,
            None => Some(begin + args.duration.unwrap_or(DEFAULT_DURATION)),
        },
        recorder: recorder.clone(),
        window: Semaphore::new(args.inflight as usize),
        send_timeout: producer.options().send_msg_timeout,
    };
    let progress = Progress::start(recorder.clone(), Counting::Sent)?;
    std::thread::scope(|s| -> Result<(), String> {
        for (i, share) in shares.into_iter().enumerate() {
            let run = &run;
            std::thread::Builder::new()
                .name(format!("rmq-bench-{i}"))
                .spawn_scoped(s, move || match run.mode {
                    Mode::Async => run.send_async(share),
                    Mode::Sync | Mode::Oneway => run.send_blocking(share),
                })
                .map_err(|e| format!("cannot start sending thread {i}: {e}"))?;
        }
        Ok(())
    })?;
    if args.mode == Mode::Async {
        run.wait_for_callbacks(args.inflight as usize);
    }
    let elapsed = begin.elapsed();
    drop(progress);
    // Measured before shutdown so the figures describe the sending, not the goodbye.
    let cpu = stats::cpu_time();
    let rss = stats::peak_rss_kib();
    producer.shutdown();

    let summary = Summary {
        mode: name_of(args.mode),
        topic: args.topic,
        threads,
        size,
        batch,
        inflight: (args.mode == Mode::Async).then_some(args.inflight),
        serialize: name_of(args.serialize),
        messages: recorder.acked(),
        failures: recorder.failures(),
        elapsed_ms: round(elapsed.as_secs_f64() * 1000.0, 1),
        tps: round(recorder.acked() as f64 / elapsed.as_secs_f64().max(1e-9), 1),
        latency_ms: recorder.latency_ms(),
        cpu_seconds: cpu.map(CpuSeconds::from),
        peak_rss_kib: rss,
        first_ack_ms: recorder
            .first_ack()
            .map(|d| round(d.as_secs_f64() * 1000.0, 1)),
        first_ack_epoch_us: recorder.first_ack_epoch_us(),
    };
    println!("{}", summary.human());
    println!("{}", serde_json::to_string(&summary)?);
    let failures = summary.failures;
    if failures > 0 {
        let why = recorder.first_error().unwrap_or("no result in time");
        return Err(format!("{failures} messages failed; first error: {why}").into());
    }
    Ok(())
}

impl Run<'_> {
    /// Whether a thread with `left` messages to go should stop.
    fn done(&self, left: Option<u64>) -> bool {
        left == Some(0) || self.until.is_some_and(|t| Instant::now() >= t)
    }

    /// Sync and oneway sends: one call at a time per thread.
    fn send_blocking(&self, mut left: Option<u64>) {
        let batch: Vec<Message> = if self.batch > 1 {
            vec![self.message.clone(); self.batch]
        } else {
            Vec::new()
        };
        while !self.done(left) {
            let n = left.map_or(self.batch, |l| l.min(self.batch as u64) as usize);
            let started = Instant::now();
            let result = match self.mode {
                Mode::Oneway => self.producer.send_oneway(&self.message),
                _ if self.batch > 1 => self.producer.send_batch(&batch[..n]).map(drop),
                _ => self.producer.send(&self.message).map(drop),
            };
            match result {
                Ok(()) => self.recorder.ok(n as u64, started.elapsed()),
                Err(e) => self.recorder.failed(n as u64, &e),
            }
            if let Some(l) = left.as_mut() {
                *l -= n as u64;
            }
        }
    }

    /// Async sends, at most `--inflight` outstanding across all threads.
    fn send_async(&self, mut left: Option<u64>) {
        while !self.done(left) {
            if let Some(l) = left.as_mut() {
                *l -= 1;
            }
            // Every send completes within its timeout, so waiting twice that is generous.
            let Some(permit) = self
                .window
                .acquire_until(Instant::now() + self.send_timeout * 2)
            else {
                self.recorder
                    .failed(1, &"no in-flight async send completed in time");
                continue;
            };
            let pending = Pending {
                recorder: self.recorder.clone(),
                started: Instant::now(),
                _permit: permit,
                finished: false,
            };
            let queued = self
                .producer
                .send_async(self.message.clone(), move |r| pending.finish(r));
            if let Err(e) = queued {
                // The callback was dropped unrun, and its drop counted the failure.
                self.recorder.note_error(&e);
            }
        }
    }

    /// Takes back every window permit: then every callback has run.
    fn wait_for_callbacks(&self, inflight: usize) {
        let deadline = Instant::now() + self.send_timeout + Duration::from_secs(5);
        let mut held = Vec::with_capacity(inflight);
        while held.len() < inflight {
            match self.window.acquire_until(deadline) {
                Some(p) => held.push(p),
                None => {
                    let missing = inflight - held.len();
                    self.recorder.failed(
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
    serialize: String,
    /// Acknowledged messages (queued ones in oneway mode).
    messages: u64,
    failures: u64,
    elapsed_ms: f64,
    tps: f64,
    latency_ms: Latency,
    cpu_seconds: Option<CpuSeconds>,
    #[serde(rename = "peakRssKiB")]
    peak_rss_kib: Option<u64>,
    first_ack_ms: Option<f64>,
    /// The wall clock at the first acknowledgement (µs since the Unix epoch).
    first_ack_epoch_us: Option<u64>,
}

impl Summary {
    fn human(&self) -> String {
        let what = if self.mode == "oneway" {
            "queued (oneway: no acks)"
        } else {
            "acked"
        };
        let l = &self.latency_ms;
        let cpu = stats::human_cpu(self.cpu_seconds.as_ref());
        let rss = stats::human_rss(self.peak_rss_kib);
        let first = self
            .first_ack_ms
            .map_or("-".into(), |ms| format!("{ms:.0} ms"));
        format!(
            "{} messages {what}, {} failed in {:.2} s: {:.0} msg/s; latency ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3}; cpu {cpu}; peak RSS {rss}; first ack {first} after start",
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
fn random_alphanumeric(len: usize) -> Vec<u8> {
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
