//! Latency fault tolerance (Java `MQFaultStrategy`, `LatencyFaultToleranceImpl`): a broker
//! that answered slowly or failed is avoided for a while. Off unless
//! `latency_fault_tolerance` is set, as in Java.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::TopicPublishInfo;
use crate::message::MessageQueue;

/// Java 4.9.x thresholds: a send that took at least `LATENCY_MAX[i]` ms makes its broker
/// unavailable for `NOT_AVAILABLE_DURATION[i]` ms.
pub const LATENCY_MAX: [u64; 7] = [50, 100, 550, 1000, 2000, 3000, 15000];
/// See [`LATENCY_MAX`].
pub const NOT_AVAILABLE_DURATION: [u64; 7] = [0, 0, 30000, 60000, 120000, 180000, 600000];

#[derive(Debug, Clone)]
struct FaultItem {
    current_latency: u64,
    start: Instant,
}

/// Per-broker fault items plus the selection strategy.
///
/// `items` and `which_item_worst` are each taken alone, never nested.
#[derive(Debug)]
pub struct FaultStrategy {
    enabled: bool,
    items: Mutex<HashMap<String, FaultItem>>,
    which_item_worst: Mutex<usize>,
    latency_max: Vec<u64>,
    not_available: Vec<u64>,
}

impl FaultStrategy {
    /// A strategy; inert unless `enabled`.
    pub fn new(enabled: bool) -> Self {
        FaultStrategy {
            enabled,
            items: Mutex::new(HashMap::new()),
            which_item_worst: Mutex::new(0),
            latency_max: LATENCY_MAX.to_vec(),
            not_available: NOT_AVAILABLE_DURATION.to_vec(),
        }
    }

    /// Picks a queue (Java `selectOneMessageQueue(tpInfo, lastBrokerName)`).
    pub fn select(
        &self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
    ) -> Option<MessageQueue> {
        if !self.enabled {
            return info.select_one_avoiding(last_broker).cloned();
        }
        let n = info.message_queues.len();
        if n == 0 {
            return None;
        }
        for _ in 0..n {
            let i = crate::client::next_send_index() % n;
            let mq = &info.message_queues[i];
            if self.is_available(&mq.broker_name) {
                return Some(mq.clone());
            }
        }
        if let Some(broker) = self.pick_one_at_least() {
            let write_queues = info.write_queue_nums_of(&broker).unwrap_or(0);
            if write_queues > 0 {
                // Below `write_queues`, which came from Java's `int`.
                let q = (crate::client::next_send_index() % write_queues as usize) as i32;
                return Some(MessageQueue::new(&*info.message_queues[0].topic, broker, q));
            }
            self.items.lock().remove(&broker);
        }
        info.select_one_avoiding(last_broker).cloned()
    }

    /// Records a send's latency (Java `updateFaultItem`); `isolation` marks a failure,
    /// counted as 30 s.
    pub fn update(&self, broker: &str, latency: Duration, isolation: bool) {
        if !self.enabled {
            return;
        }
        let latency_ms = if isolation {
            30_000
        } else {
            latency.as_millis() as u64
        };
        let pause = self.not_available_duration(latency_ms);
        self.items.lock().insert(
            broker.to_string(),
            FaultItem {
                current_latency: latency_ms,
                start: Instant::now() + Duration::from_millis(pause),
            },
        );
    }

    fn not_available_duration(&self, latency_ms: u64) -> u64 {
        (0..self.latency_max.len())
            .rev()
            .find(|&i| latency_ms >= self.latency_max[i])
            .map_or(0, |i| self.not_available[i])
    }

    /// Whether `broker` may be used now.
    pub fn is_available(&self, broker: &str) -> bool {
        self.items
            .lock()
            .get(broker)
            .is_none_or(|i| Instant::now() >= i.start)
    }

    /// Among the known brokers, one of the better half (Java `pickOneAtLeast`).
    fn pick_one_at_least(&self) -> Option<String> {
        let now = Instant::now();
        let mut items: Vec<(String, FaultItem)> = self
            .items
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if items.is_empty() {
            return None;
        }
        items.sort_by(|(_, a), (_, b)| {
            let avail = |x: &FaultItem| now >= x.start;
            avail(b)
                .cmp(&avail(a))
                .then(a.current_latency.cmp(&b.current_latency))
                .then(a.start.cmp(&b.start))
        });
        let half = items.len() / 2;
        if half == 0 {
            return Some(items.swap_remove(0).0);
        }
        let mut worst = self.which_item_worst.lock();
        let i = *worst % half;
        *worst = worst.wrapping_add(1);
        Some(items.swap_remove(i).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{BrokerData, QueueData, TopicRouteData};

    fn info() -> TopicPublishInfo {
        let route = TopicRouteData {
            broker_datas: ["a", "b"]
                .iter()
                .map(|n| BrokerData {
                    cluster: "c".into(),
                    broker_name: n.to_string(),
                    broker_addrs: [(0, format!("{n}:1"))].into_iter().collect(),
                })
                .collect(),
            queue_datas: ["a", "b"]
                .iter()
                .map(|n| QueueData {
                    broker_name: n.to_string(),
                    read_queue_nums: 2,
                    write_queue_nums: 2,
                    perm: crate::protocol::Perm::READ_WRITE,
                    topic_sys_flag: 0,
                })
                .collect(),
            ..Default::default()
        };
        crate::client::to_publish_info("T", &route)
    }

    #[test]
    fn durations_follow_the_java_table() {
        let f = FaultStrategy::new(true);
        assert_eq!(f.not_available_duration(10), 0);
        assert_eq!(f.not_available_duration(549), 0);
        assert_eq!(f.not_available_duration(550), 30000);
        assert_eq!(f.not_available_duration(30000), 600000);
    }

    #[test]
    fn a_failed_broker_is_avoided_while_enabled() {
        let f = FaultStrategy::new(true);
        let info = info();
        f.update("a", Duration::from_millis(5), true);
        assert!(!f.is_available("a"));
        for _ in 0..20 {
            assert_eq!(&*f.select(&info, None).unwrap().broker_name, "b");
        }
        f.update("a", Duration::from_millis(5), false);
        assert!(f.is_available("a"));
    }

    #[test]
    fn disabled_strategy_ignores_faults() {
        let f = FaultStrategy::new(false);
        f.update("a", Duration::from_secs(10), true);
        assert!(f.is_available("a"));
        let info = info();
        let brokers: std::collections::HashSet<_> = (0..10)
            .map(|_| f.select(&info, None).unwrap().broker_name)
            .collect();
        assert_eq!(brokers.len(), 2);
    }

    #[test]
    fn when_every_broker_is_isolated_one_is_still_picked() {
        let f = FaultStrategy::new(true);
        f.update("a", Duration::ZERO, true);
        f.update("b", Duration::ZERO, true);
        assert!(f.select(&info(), None).is_some());
    }
}
