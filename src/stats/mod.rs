//! Client statistics (issue 28): the counters every client keeps while it runs, and the
//! snapshots `Producer::stats`, `PushConsumer::stats` and `LitePullConsumer::stats` return.
//!
//! This module owns the recording side (`SendCounters`, `ConsumeCounters`,
//! `ClientCounters`, the atomic latency histogram) and the public snapshot types. The hot
//! paths only add to atomics of a per-topic entry found under a read lock; everything that
//! needs more (cache depths, offsets, pool size) is read when a snapshot is taken. With
//! the `metrics` feature, a snapshot can also be written through the `metrics` facade
//! (`metrics.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::error::{Error, ErrorKind};
use crate::protocol::MessageQueue;

#[cfg(feature = "metrics")]
mod metrics;

// --- per-topic maps -------------------------------------------------------------------

/// FNV-1a: the per-topic maps are looked up on every send with a short key the
/// application chose, where SipHash's flood resistance buys nothing and costs about half
/// of what recording a send does.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type TopicMap<T> = RwLock<HashMap<String, Arc<T>, std::hash::BuildHasherDefault<Fnv>>>;

/// Runs `f` on `topic`'s entry of `map`, made on first use; under the read lock, which
/// the common case takes alone.
fn with_topic<T: Default, R>(map: &TopicMap<T>, topic: &str, f: impl FnOnce(&T) -> R) -> R {
    if let Some(t) = map.read().get(topic) {
        return f(t);
    }
    let t = map.write().entry(topic.to_string()).or_default().clone();
    f(&t)
}

// --- latency histogram ------------------------------------------------------------------

/// Values below this (µs) have a bucket each; above, four buckets per power of two (a
/// bucket is at most 25% wider than its lower bound).
const LINEAR: u64 = 4;
/// Powers of two covered: 2^40 µs is about 12 days; longer latencies land in the last bucket.
const MAX_EXP: u32 = 40;
const BUCKETS: usize = (LINEAR as usize) + ((MAX_EXP as usize) - 1) * 4;

fn bucket_of(us: u64) -> usize {
    if us < LINEAR {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // ≥ 2
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (us >> (exp - 2)) & 3;
    (LINEAR as usize + (exp as usize - 2) * 4 + sub as usize).min(BUCKETS - 1)
}

/// The largest value (µs) that falls in bucket `i`.
fn bucket_upper(i: usize) -> u64 {
    if (i as u64) < LINEAR {
        return i as u64;
    }
    let j = i - LINEAR as usize;
    let exp = (j / 4) as u32 + 2;
    let sub = (j % 4) as u64;
    ((5 + sub) << (exp - 2)) - 1
}

/// A latency histogram of atomics: recording is one bucket increment plus the count, sum
/// and maximum, with no lock.
pub(crate) struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub(crate) fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        // Read first: the maximum rarely changes, so most records do not write its line.
        if us > self.max_us.load(Ordering::Relaxed) {
            self.max_us.fetch_max(us, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        LatencyHistogram {
            // The count of the buckets read, so that quantiles and count agree even when
            // records land while the snapshot is taken.
            count: buckets.iter().sum(),
            sum_us: self.sum_us.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
            buckets,
        }
    }
}

/// A snapshot of a latency histogram: log-scale buckets (at most 25% wide), with the
/// count, sum and maximum exact.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum_us: u64,
    max_us: u64,
}

impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count)
            .field("p50", &self.p50())
            .field("p90", &self.p90())
            .field("p99", &self.p99())
            .field("max", &self.max())
            .finish()
    }
}

impl LatencyHistogram {
    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum of every latency recorded.
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_us)
    }

    /// The mean, or zero when nothing was recorded.
    pub fn mean(&self) -> Duration {
        match self.count {
            0 => Duration::ZERO,
            n => Duration::from_micros(self.sum_us / n),
        }
    }

    /// The largest latency recorded (exact).
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// The latency below which a fraction `q` (0.0 to 1.0) of the records fall: the upper
    /// bound of the bucket holding it, never above the maximum. Zero when empty.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        // The rank of the record sought, 1-based.
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_micros(bucket_upper(i).min(self.max_us));
            }
        }
        self.max()
    }

    /// How many records were at most `limit`, to the bucket: records in a bucket that
    /// straddles `limit` are left out (a bucket is at most 25% wide). For exporting the
    /// histogram with other bucket bounds (RocketMQ's `le_1_ms`, `le_5_ms`, ...).
    pub fn count_at_most(&self, limit: Duration) -> u64 {
        let limit = u64::try_from(limit.as_micros()).unwrap_or(u64::MAX);
        self.buckets
            .iter()
            .enumerate()
            .take_while(|(i, _)| bucket_upper(*i) <= limit)
            .map(|(_, n)| n)
            .sum()
    }

    /// The median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The 90th percentile.
    pub fn p90(&self) -> Duration {
        self.quantile(0.9)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
}

// --- per client instance ------------------------------------------------------------------

/// Counters of a client instance (Java `MQClientInstance`), shared by every producer and
/// consumer with the same client id.
#[derive(Default)]
pub(crate) struct ClientCounters {
    pub(crate) heartbeats: AtomicU64,
    pub(crate) route_refreshes: AtomicU64,
    pub(crate) rebalances: AtomicU64,
    /// Panics of request hooks (the instance's remoting client runs them).
    pub(crate) hook_panics: Arc<AtomicU64>,
}

impl ClientCounters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Figures of the client instance a producer or consumer runs on (Java
/// `MQClientInstance`): every client with the same client id shares them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// The client id.
    pub client_id: String,
    /// Connections open now (name servers and brokers).
    pub connections: u64,
    /// Connections established since the start, the first ones included.
    pub connects: u64,
    /// Connections established again to an address connected to before.
    pub reconnects: u64,
    /// Heartbeat rounds sent to the brokers.
    pub heartbeats: u64,
    /// Routes fetched from a name server.
    pub route_refreshes: u64,
    /// Rebalance rounds (each covers every consumer of the instance).
    pub rebalances: u64,
    /// Request hooks that panicked (caught; the request went on).
    pub request_hook_panics: u64,
}

impl ClientCounters {
    pub(crate) fn snapshot(&self, client_id: String, conn: ConnectionCounts) -> ClientStats {
        ClientStats {
            client_id,
            connections: conn.open,
            connects: conn.connects,
            reconnects: conn.reconnects,
            heartbeats: self.heartbeats.load(Ordering::Relaxed),
            route_refreshes: self.route_refreshes.load(Ordering::Relaxed),
            rebalances: self.rebalances.load(Ordering::Relaxed),
            request_hook_panics: self.hook_panics.load(Ordering::Relaxed),
        }
    }
}

/// What the remoting client knows of its connections.
#[derive(Clone, Copy, Default)]
pub(crate) struct ConnectionCounts {
    pub(crate) open: u64,
    pub(crate) connects: u64,
    pub(crate) reconnects: u64,
}

// --- producer -----------------------------------------------------------------------------

#[derive(Default)]
struct TopicSend {
    messages: AtomicU64,
    bytes: AtomicU64,
    /// Failed messages by `ErrorKind::index`.
    failed: [AtomicU64; ErrorKind::ALL.len()],
    latency: Histogram,
}

/// A producer's send counters, per topic (without namespace).
#[derive(Default)]
pub(crate) struct SendCounters {
    /// Entries are added, never removed: a topic sent to once keeps its counters.
    topics: TopicMap<TopicSend>,
    pub(crate) async_in_flight: AtomicU64,
    pub(crate) hook_panics: AtomicU64,
}

impl SendCounters {
    /// A send of `messages` messages (`bytes` of bodies) to `topic` ended after `took`.
    pub(crate) fn record<T>(
        &self,
        topic: &str,
        messages: u64,
        bytes: u64,
        result: &Result<T, Error>,
        took: Duration,
    ) {
        with_topic(&self.topics, topic, |t| match result {
            Ok(_) => {
                t.messages.fetch_add(messages, Ordering::Relaxed);
                t.bytes.fetch_add(bytes, Ordering::Relaxed);
                t.latency.record(took);
            }
            Err(e) => {
                t.failed[e.kind().index()].fetch_add(messages, Ordering::Relaxed);
            }
        })
    }

    /// A send of `messages` messages to `topic` failed with `e`.
    pub(crate) fn failed(&self, topic: &str, messages: u64, e: &Error) {
        with_topic(&self.topics, topic, |t| {
            t.failed[e.kind().index()].fetch_add(messages, Ordering::Relaxed)
        });
    }

    pub(crate) fn snapshot(&self, group: &str, client: ClientStats) -> ProducerStats {
        let topics = self
            .topics
            .read()
            .iter()
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect::<Vec<_>>();
        ProducerStats {
            topics: topics
                .into_iter()
                .map(|(name, t)| {
                    let failed_by_kind: Vec<(ErrorKind, u64)> = ErrorKind::ALL
                        .iter()
                        .zip(t.failed.iter())
                        .map(|(k, n)| (*k, n.load(Ordering::Relaxed)))
                        .filter(|(_, n)| *n > 0)
                        .collect();
                    let failed = t.failed.iter().map(|n| n.load(Ordering::Relaxed)).sum();
                    let stats = TopicSendStats {
                        messages_sent: t.messages.load(Ordering::Relaxed),
                        bytes_sent: t.bytes.load(Ordering::Relaxed),
                        failed,
                        failed_by_kind,
                        send_latency: t.latency.snapshot(),
                    };
                    (name, stats)
                })
                .collect(),
            group: group.to_string(),
            async_in_flight: self.async_in_flight.load(Ordering::Relaxed),
            hook_panics: self.hook_panics.load(Ordering::Relaxed),
            client,
        }
    }
}

/// A producer's figures ([`Producer::stats`](crate::Producer::stats)). Counters are
/// monotonic from the producer's creation.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ProducerStats {
    /// The producer group (with namespace).
    pub group: String,
    /// Per topic (without namespace).
    pub topics: BTreeMap<String, TopicSendStats>,
    /// Async sends queued whose callback has not run yet.
    pub async_in_flight: u64,
    /// Send hooks that panicked (caught; the send went on).
    pub hook_panics: u64,
    /// The client instance's figures.
    pub client: ClientStats,
}

/// Sends to one topic. A batch counts its messages; a oneway send counts as sent once
/// written. A send that is retried counts once, with its final outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicSendStats {
    /// Messages the broker acknowledged (any [`SendStatus`](crate::SendStatus)).
    pub messages_sent: u64,
    /// Body bytes of those messages, before compression.
    pub bytes_sent: u64,
    /// Messages whose send failed.
    pub failed: u64,
    /// `failed` by the error's kind; kinds with no failure are left out.
    pub failed_by_kind: Vec<(ErrorKind, u64)>,
    /// The latency of acknowledged sends, retries included, from the call to the result.
    pub send_latency: LatencyHistogram,
}

impl TopicSendStats {
    /// Failed messages of `kind`.
    pub fn failed_of(&self, kind: ErrorKind) -> u64 {
        self.failed_by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }
}

// --- consumer -----------------------------------------------------------------------------

#[derive(Default)]
struct TopicConsume {
    pulled: AtomicU64,
    pulled_bytes: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    latency: Histogram,
}

/// A consumer's counters, per topic (without namespace).
#[derive(Default)]
pub(crate) struct ConsumeCounters {
    topics: TopicMap<TopicConsume>,
    pub(crate) hook_panics: AtomicU64,
}

impl ConsumeCounters {
    /// A pull of `topic` brought `messages` messages with `bytes` of bodies.
    pub(crate) fn pulled(&self, topic: &str, messages: u64, bytes: u64) {
        with_topic(&self.topics, topic, |t| {
            t.pulled.fetch_add(messages, Ordering::Relaxed);
            t.pulled_bytes.fetch_add(bytes, Ordering::Relaxed);
        })
    }

    /// A listener call (or a lite pull batch) on `topic` took `took`: `ok` messages
    /// acknowledged, `failed` not.
    pub(crate) fn consumed(&self, topic: &str, ok: u64, failed: u64, took: Option<Duration>) {
        with_topic(&self.topics, topic, |t| {
            t.ok.fetch_add(ok, Ordering::Relaxed);
            t.failed.fetch_add(failed, Ordering::Relaxed);
            if let Some(took) = took {
                t.latency.record(took);
            }
        })
    }

    pub(crate) fn snapshot(
        &self,
        group: &str,
        queues: Vec<QueueStats>,
        pool: (usize, usize),
        client: ClientStats,
    ) -> ConsumerStats {
        let topics = self
            .topics
            .read()
            .iter()
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect::<Vec<_>>();
        ConsumerStats {
            topics: topics
                .into_iter()
                .map(|(name, t)| {
                    let stats = TopicConsumeStats {
                        pulled: t.pulled.load(Ordering::Relaxed),
                        pulled_bytes: t.pulled_bytes.load(Ordering::Relaxed),
                        consumed_ok: t.ok.load(Ordering::Relaxed),
                        consumed_failed: t.failed.load(Ordering::Relaxed),
                        consume_latency: t.latency.snapshot(),
                    };
                    (name, stats)
                })
                .collect(),
            group: group.to_string(),
            queues,
            pool_size: pool.0,
            pool_busy: pool.1,
            hook_panics: self.hook_panics.load(Ordering::Relaxed),
            client,
        }
    }
}

/// A consumer's figures ([`PushConsumer::stats`](crate::PushConsumer::stats),
/// [`LitePullConsumer::stats`](crate::LitePullConsumer::stats)). Counters are monotonic
/// from the consumer's creation; `queues` are the queues held now.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// The consumer group (with namespace).
    pub group: String,
    /// Per topic (without namespace; retry topics under their own name).
    pub topics: BTreeMap<String, TopicConsumeStats>,
    /// The queues this consumer holds now, with their cache and progress.
    pub queues: Vec<QueueStats>,
    /// The consume pool's core size (push consumers; zero for lite pull).
    pub pool_size: usize,
    /// Consume threads running a listener now (push consumers; zero for lite pull).
    pub pool_busy: usize,
    /// Consume hooks that panicked (caught; consumption went on).
    pub hook_panics: u64,
    /// The client instance's figures.
    pub client: ClientStats,
}

impl ConsumerStats {
    /// Messages cached (pulled, not yet consumed) over every queue.
    pub fn cached_messages(&self) -> u64 {
        self.queues.iter().map(|q| q.cached_messages).sum()
    }

    /// Body bytes cached over every queue.
    pub fn cached_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.cached_bytes).sum()
    }

    /// The sum of the queues' lags, over the queues whose lag is known.
    pub fn lag(&self) -> u64 {
        self.queues.iter().filter_map(|q| q.lag).sum()
    }
}

/// Consumption of one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicConsumeStats {
    /// Messages pulled from the brokers.
    pub pulled: u64,
    /// Body bytes of those messages.
    pub pulled_bytes: u64,
    /// Messages the listener acknowledged (lite pull: messages `poll` returned).
    pub consumed_ok: u64,
    /// Messages the listener did not acknowledge (to be consumed again), panics included.
    pub consumed_failed: u64,
    /// The time of each listener call (push consumers; empty for lite pull).
    pub consume_latency: LatencyHistogram,
}

/// One queue a consumer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue (topic without namespace).
    pub queue: MessageQueue,
    /// Messages pulled and not yet consumed.
    pub cached_messages: u64,
    /// Their body bytes.
    pub cached_bytes: u64,
    /// The offset the consumer will commit (the next to consume), when it has one.
    pub consumed_offset: Option<i64>,
    /// The broker's max offset minus `consumed_offset`, as of the last pull that
    /// returned messages; `None` before one did.
    pub lag: Option<u64>,
}

impl QueueStats {
    pub(crate) fn new(
        queue: MessageQueue,
        cached: (u64, u64),
        consumed_offset: Option<i64>,
        broker_max_offset: Option<i64>,
    ) -> Self {
        let lag = match (broker_max_offset, consumed_offset) {
            (Some(max), Some(c)) => Some(u64::try_from(max - c).unwrap_or(0)),
            _ => None,
        };
        QueueStats {
            queue,
            cached_messages: cached.0,
            cached_bytes: cached.1,
            consumed_offset,
            lag,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_histogram_buckets_cover_every_value_in_order() {
        let mut prev = 0;
        for i in 0..BUCKETS {
            let upper = bucket_upper(i);
            assert!(i == 0 || upper > prev, "bucket {i}: {upper} after {prev}");
            assert_eq!(bucket_of(upper), i, "upper bound of bucket {i}");
            if i + 1 < BUCKETS {
                assert_eq!(bucket_of(upper + 1), i + 1, "after bucket {i}");
            }
            prev = upper;
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn stats_histogram_quantiles_are_within_a_bucket_of_the_truth() {
        let h = Histogram::default();
        for ms in 1..=1000u64 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 1000);
        assert_eq!(s.max(), Duration::from_millis(1000));
        assert_eq!(s.mean(), Duration::from_micros(500_500));
        for (q, truth) in [(0.5, 500.0), (0.9, 900.0), (0.99, 990.0)] {
            let got = s.quantile(q).as_secs_f64() * 1000.0;
            assert!(got >= truth && got <= truth * 1.25, "q{q}: {got} ms");
        }
        assert_eq!(s.quantile(1.0), s.max());
        assert_eq!(LatencyHistogram::default().p99(), Duration::ZERO);
    }

    #[test]
    fn stats_send_counters_split_acknowledged_and_failed_by_kind() {
        let c = SendCounters::default();
        let took = Duration::from_millis(3);
        c.record("T", 1, 10, &Ok::<(), Error>(()), took);
        c.record("T", 4, 40, &Ok::<(), Error>(()), took);
        c.record::<()>(
            "T",
            2,
            20,
            &Err(Error::timeout(crate::TimeoutPhase::Response, took)),
            took,
        );
        c.record::<()>("U", 1, 5, &Err(Error::invalid_argument("x")), took);
        let s = c.snapshot("G", ClientStats::default());
        let t = &s.topics["T"];
        assert_eq!((t.messages_sent, t.bytes_sent, t.failed), (5, 50, 2));
        assert_eq!(t.failed_of(ErrorKind::Timeout), 2);
        assert_eq!(t.send_latency.count(), 2);
        assert_eq!(
            s.topics["U"].failed_by_kind,
            vec![(ErrorKind::InvalidArgument, 1)]
        );
    }

    #[test]
    fn stats_queue_lag_needs_both_offsets() {
        let mq = MessageQueue::new("T", "b", 0);
        assert_eq!(
            QueueStats::new(mq.clone(), (0, 0), Some(5), Some(9)).lag,
            Some(4)
        );
        assert_eq!(QueueStats::new(mq.clone(), (0, 0), None, Some(9)).lag, None);
        assert_eq!(QueueStats::new(mq, (0, 0), Some(9), Some(5)).lag, Some(0));
    }
}
