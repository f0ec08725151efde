//! Per-topic consumption figures for the admin tool's `consumerStatus` (Java
//! `ConsumerStatsManager`): pulls and consumed messages with their times, as rates over
//! the time since the previous reading (or since the consumer started).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::protocol::consumer_admin::ConsumeStatus;

#[derive(Default, Clone, Copy)]
struct Counts {
    pulls: u64,
    pull_time: Duration,
    ok: u64,
    failed: u64,
    consume_time: Duration,
    consume_batches: u64,
}

struct Topic {
    now: Counts,
    /// The counts at the previous reading, and when that was.
    read: Counts,
    read_at: Instant,
}

/// Counters per topic; one lock taken per pull and per consumed batch.
#[derive(Default)]
pub(crate) struct ConsumeStats {
    topics: Mutex<HashMap<String, Topic>>,
}

impl ConsumeStats {
    fn with(&self, topic: &str, f: impl FnOnce(&mut Counts)) {
        let mut t = self.topics.lock();
        if let Some(e) = t.get_mut(topic) {
            return f(&mut e.now);
        }
        let mut e = Topic {
            now: Counts::default(),
            read: Counts::default(),
            read_at: Instant::now(),
        };
        f(&mut e.now);
        t.insert(topic.to_string(), e);
    }

    /// A pull of `topic` answered after `took`.
    pub(crate) fn pulled(&self, topic: &str, took: Duration) {
        self.with(topic, |c| {
            c.pulls += 1;
            c.pull_time += took;
        });
    }

    /// A batch of `topic` consumed in `took`: `ok` messages acknowledged, `failed` not.
    pub(crate) fn consumed(&self, topic: &str, ok: usize, failed: usize, took: Duration) {
        self.with(topic, |c| {
            c.ok += ok as u64;
            c.failed += failed as u64;
            c.consume_time += took;
            c.consume_batches += 1;
        });
    }

    /// The figures of `topic` since the previous reading, which this one replaces.
    pub(crate) fn read(&self, topic: &str) -> ConsumeStatus {
        let mut t = self.topics.lock();
        let Some(e) = t.get_mut(topic) else {
            return ConsumeStatus::default();
        };
        let secs = e.read_at.elapsed().as_secs_f64().max(1e-3);
        let (a, b) = (e.now, e.read);
        let per_sec = |n: u64, m: u64| n.saturating_sub(m) as f64 / secs;
        let mean_ms = |d: Duration, prev: Duration, n: u64, m: u64| {
            let n = n.saturating_sub(m);
            if n == 0 {
                0.0
            } else {
                d.saturating_sub(prev).as_secs_f64() * 1000.0 / n as f64
            }
        };
        let status = ConsumeStatus {
            pull_rt: mean_ms(a.pull_time, b.pull_time, a.pulls, b.pulls),
            pull_tps: per_sec(a.pulls, b.pulls),
            consume_rt: mean_ms(
                a.consume_time,
                b.consume_time,
                a.consume_batches,
                b.consume_batches,
            ),
            consume_ok_tps: per_sec(a.ok, b.ok),
            consume_failed_tps: per_sec(a.failed, b.failed),
            consume_failed_msgs: i64::try_from(a.failed).unwrap_or(i64::MAX),
        };
        e.read = a;
        e.read_at = Instant::now();
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_rates_since_the_previous_reading() {
        let s = ConsumeStats::default();
        assert_eq!(s.read("T"), ConsumeStatus::default());
        s.pulled("T", Duration::from_millis(4));
        s.pulled("T", Duration::from_millis(6));
        s.consumed("T", 9, 1, Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(100));
        let first = s.read("T");
        assert!((first.pull_rt - 5.0).abs() < 1e-6, "{first:?}");
        assert!(
            first.consume_ok_tps > 0.0 && first.consume_ok_tps <= 90.0,
            "{first:?}"
        );
        assert!((first.consume_rt - 20.0).abs() < 1e-6, "{first:?}");
        assert_eq!(first.consume_failed_msgs, 1);
        // Nothing happened since: rates drop to zero, the failure count stays.
        let second = s.read("T");
        assert_eq!(second.consume_ok_tps, 0.0);
        assert_eq!(second.pull_rt, 0.0);
        assert_eq!(second.consume_failed_msgs, 1);
    }
}
