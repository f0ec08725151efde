//! `rmq consume --stats`: one line a second on stderr with the consumer's figures
//! (`ConsumerStats`), so stdout keeps only message lines. The line is a JSON object:
//! counters since the start, the consume rate over the last second, the cache, the lag,
//! the listener's p99 and the consume pool.

use std::io::Write;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use rocketmq_blocking::ConsumerStats;

const EVERY: Duration = Duration::from_secs(1);

/// The reporting thread (`rmq-stats`); stopped and joined on drop.
pub(crate) struct Reporter {
    // Declared above the handle: dropping it first wakes the thread.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Reporter {
    /// Prints a line every second from `read`, a snapshot of the consumer.
    pub(crate) fn start(
        read: impl Fn() -> ConsumerStats + Send + 'static,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("rmq-stats".into())
            .spawn(move || {
                let mut prev = (Instant::now(), read());
                // Anything but a timeout (the sender dropped) ends the reports.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
                    let now = (Instant::now(), read());
                    let secs = now.0.duration_since(prev.0).as_secs_f64();
                    let line = render(&prev.1, &now.1, secs);
                    // stderr is unbuffered; a broken one only loses the report.
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                    prev = now;
                }
            })?;
        Ok(Reporter {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The line for the figures `now`, `secs` after `prev`.
pub(crate) fn render(prev: &ConsumerStats, now: &ConsumerStats, secs: f64) -> String {
    let sum = |s: &ConsumerStats, f: fn(&rocketmq_blocking::TopicConsumeStats) -> u64| -> u64 {
        s.topics.values().map(f).sum()
    };
    let consumed = sum(now, |t| t.consumed_ok);
    let rate = consumed.saturating_sub(sum(prev, |t| t.consumed_ok)) as f64 / secs.max(1e-3);
    let p99 = now
        .topics
        .values()
        .map(|t| t.consume_latency.p99())
        .max()
        .unwrap_or_default();
    serde_json::json!({
        "stats": {
            "pulled": sum(now, |t| t.pulled),
            "consumed": consumed,
            "failed": sum(now, |t| t.consumed_failed),
            "consumedPerSec": (rate * 10.0).round() / 10.0,
            "cached": now.cached_messages(),
            "cachedBytes": now.cached_bytes(),
            "lag": now.lag(),
            "p99Ms": p99.as_secs_f64() * 1000.0,
            "poolSize": now.pool_size,
            "poolBusy": now.pool_busy,
            "connections": now.client.connections,
            "reconnects": now.client.reconnects,
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_consumer_reports_zeros() {
        let s = ConsumerStats::default();
        let line: serde_json::Value = serde_json::from_str(&render(&s, &s, 1.0)).unwrap();
        assert_eq!(line["stats"]["consumed"], 0);
        assert_eq!(line["stats"]["consumedPerSec"], 0.0);
        assert_eq!(line["stats"]["lag"], 0);
    }
}
