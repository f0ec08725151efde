//! `rmq bench consume`: drains a topic with a push consumer from its first offset, in the
//! spirit of the Java benchmark `Consumer`.
//!
//! The latency of a message is end to end: the consumer's clock when the listener gets it
//! minus the producer's `bornTimestamp` (so producer and consumer clocks must agree, and a
//! backlog produced earlier shows its age). Progress goes to stderr once a second; stdout
//! gets a human line, then a JSON line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::value_parser;
use crossbeam_channel::{bounded, Sender};
use rocketmq_blocking::client::validators::check_topic;
use rocketmq_blocking::consumer::ConsumeFromWhere;
use rocketmq_blocking::{MessageExt, MessageQueue};

use crate::stats::{self, round, Counting, CpuSeconds, Latency, Progress, Recorder};
use crate::{namesrv, parse_seconds, push_consumer, CliResult, HeaderEncoding};

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Topic to consume.
    #[arg(long)]
    topic: String,
    /// Consumer group; a new group starts at the first offset.
    #[arg(long)]
    group: String,
    /// Consume threads (Java `consumeThreadMin` and `consumeThreadMax`).
    #[arg(long, default_value_t = 20, value_parser = value_parser!(u32).range(1..=1000))]
    threads: u32,
    /// Stop after this many messages; fewer by the timeout is a failure.
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Seconds to run at most (counted from the consumer's start).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    timeout: Duration,
    /// Orderly listener (one thread per queue at a time).
    #[arg(long)]
    orderly: bool,
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
    let tally = Arc::new(Tally {
        count: args.count,
        seen: AtomicU64::new(0),
        recorder: recorder.clone(),
        begin,
        last_us: AtomicU64::new(0),
        done: done_tx,
    });
    let listener = {
        let tally = tally.clone();
        move |msgs: &[MessageExt], _: &MessageQueue| tally.record(msgs)
    };
    let threads = args.threads as usize;
    let consumer = push_consumer(
        &addr,
        &args.group,
        args.serialize.into(),
        args.orderly,
        listener,
    )
    .subscribe(&args.topic, "*")
    .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
    .consume_thread_min(threads)
    .consume_thread_max(threads)
    .start()?;
    let mode = if args.orderly {
        "orderly"
    } else {
        "concurrently"
    };
    eprintln!(
        "rmq: bench consume topic={} group={} threads={threads} mode={mode}",
        args.topic, args.group
    );
    let progress = Progress::start(recorder.clone(), Counting::Consumed)?;
    // Either the count arrives or the time is up; both end the run.
    let _ = done.recv_deadline(begin + args.timeout);
    drop(progress);
    // Measured before shutdown so the figures describe the consuming, not the goodbye.
    let cpu = stats::cpu_time();
    let rss = stats::peak_rss_kib();
    consumer.shutdown();

    // After the shutdown every listener has returned, so the recorder is complete.
    let messages = recorder.acked();
    let elapsed = match tally.last_us.load(Ordering::Relaxed) {
        0 => args.timeout,
        us => Duration::from_micros(us),
    };
    let summary = Summary {
        mode: mode.to_string(),
        topic: args.topic,
        group: args.group,
        threads,
        messages,
        elapsed_ms: round(elapsed.as_secs_f64() * 1000.0, 1),
        tps: round(messages as f64 / elapsed.as_secs_f64().max(1e-9), 1),
        latency_ms: recorder.latency_ms(),
        cpu_seconds: cpu.map(CpuSeconds::from),
        peak_rss_kib: rss,
        first_message_ms: recorder
            .first_ack()
            .map(|d| round(d.as_secs_f64() * 1000.0, 1)),
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

/// What the listener shares with the main thread.
struct Tally {
    count: Option<u64>,
    /// Messages delivered so far, counted or not.
    seen: AtomicU64,
    recorder: Arc<Recorder>,
    begin: Instant,
    /// When the last counted message arrived, in µs since `begin`.
    last_us: AtomicU64,
    /// Signalled once, by the listener that gets message number `count`.
    done: Sender<()>,
}

impl Tally {
    /// The listener. Messages beyond the count are acknowledged but not recorded: the
    /// run is over and the consumer about to shut down.
    fn record(&self, msgs: &[MessageExt]) -> bool {
        for m in msgs {
            let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
            if self.count.is_some_and(|c| n > c) {
                continue;
            }
            self.recorder.ok(1, end_to_end(m.born_timestamp));
            let at = u64::try_from(self.begin.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.last_us.fetch_max(at.max(1), Ordering::Relaxed);
            if Some(n) == self.count {
                let _ = self.done.try_send(());
            }
        }
        true
    }
}

/// Now minus a `bornTimestamp` (ms since the epoch); zero if the producer's clock is ahead.
fn end_to_end(born_ms: i64) -> Duration {
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let us = now_us.saturating_sub(born_ms.saturating_mul(1000));
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// The final report; the JSON line is this struct, in this field order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    mode: String,
    topic: String,
    group: String,
    threads: usize,
    messages: u64,
    /// From the consumer's start to the last counted message (or the timeout if none came).
    elapsed_ms: f64,
    tps: f64,
    /// End to end: consumer's now minus `bornTimestamp`.
    latency_ms: Latency,
    cpu_seconds: Option<CpuSeconds>,
    #[serde(rename = "peakRssKiB")]
    peak_rss_kib: Option<u64>,
    /// From process start to the first message.
    first_message_ms: Option<f64>,
}

impl Summary {
    fn human(&self) -> String {
        let l = &self.latency_ms;
        let first = self
            .first_message_ms
            .map_or("-".into(), |ms| format!("{ms:.0} ms"));
        format!(
            "{} messages consumed in {:.2} s: {:.0} msg/s; end-to-end latency ms p50 {:.3} p99 {:.3} max {:.3}; cpu {}; peak RSS {}; first message {first} after start",
            self.messages,
            self.elapsed_ms / 1000.0,
            self.tps,
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
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let d = end_to_end(now_ms - 1500);
        assert!(
            d >= Duration::from_millis(1500) && d < Duration::from_secs(60),
            "{d:?}"
        );
        assert_eq!(end_to_end(now_ms + 60_000), Duration::ZERO);
        assert!(end_to_end(i64::MIN) > Duration::ZERO);
    }

    #[test]
    fn only_the_count_is_recorded_and_done_is_signalled_once() {
        let (done, signalled) = bounded(1);
        let tally = Tally {
            count: Some(3),
            seen: AtomicU64::new(0),
            recorder: Arc::new(Recorder::new().unwrap()),
            begin: Instant::now(),
            last_us: AtomicU64::new(0),
            done,
        };
        let msgs = vec![MessageExt::default(); 5];
        assert!(tally.record(&msgs[..2]));
        assert!(signalled.try_recv().is_err());
        assert!(tally.record(&msgs[2..]));
        assert_eq!(tally.recorder.acked(), 3);
        assert!(signalled.try_recv().is_ok());
        assert!(tally.last_us.load(Ordering::Relaxed) > 0);
    }
}
