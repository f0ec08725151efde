//! What a route means to producers and consumers: the publish info (writable queues in
//! send order) and the subscribe set (readable queues). Java: `TopicPublishInfo`,
//! `MQClientInstance.topicRouteData2TopicPublishInfo` / `topicRouteData2TopicSubscribeInfo`.

use std::cell::Cell;
use std::collections::HashSet;

use crate::message::MessageQueue;
use crate::protocol::TopicRouteData;
use crate::util;

thread_local! {
    /// Java `ThreadLocalIndex`: each sending thread walks the queues from a random start.
    static SEND_INDEX: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The next per-thread queue index (Java `ThreadLocalIndex.incrementAndGet`) (non-negative, like `index & 0x7FFFFFFF`).
pub fn next_send_index() -> usize {
    SEND_INDEX.with(|c| {
        let next = match c.get() {
            Some(i) => i.wrapping_add(1),
            None => util::random_u64() as u32,
        };
        c.set(Some(next));
        (next & 0x7FFF_FFFF) as usize
    })
}

/// Writable queues of a topic, in the order producers pick them.
#[derive(Debug, Clone, Default)]
pub struct TopicPublishInfo {
    /// The route came with `orderTopicConf`.
    pub order_topic: bool,
    /// The name server knew the topic (false for the TBW102 fallback placeholder).
    pub have_topic_router_info: bool,
    /// Queues in selection order.
    pub message_queues: Vec<MessageQueue>,
    /// The route this was built from.
    pub route: TopicRouteData,
}

impl TopicPublishInfo {
    /// Whether there is at least one queue to send to (Java `ok()`).
    pub fn ok(&self) -> bool {
        !self.message_queues.is_empty()
    }

    /// The next queue in round-robin order for this thread.
    pub fn select_one(&self) -> Option<&MessageQueue> {
        if self.message_queues.is_empty() {
            return None;
        }
        let i = next_send_index() % self.message_queues.len();
        self.message_queues.get(i)
    }

    /// On a retry: the next queue on a broker other than `last_broker`, if there is one
    /// (Java `selectOneMessageQueue(lastBrokerName)`).
    pub fn select_one_avoiding(&self, last_broker: Option<&str>) -> Option<&MessageQueue> {
        let Some(last) = last_broker else {
            return self.select_one();
        };
        let n = self.message_queues.len();
        for _ in 0..n {
            let i = next_send_index() % n;
            let mq = &self.message_queues[i];
            if &*mq.broker_name != last {
                return Some(mq);
            }
        }
        self.select_one()
    }

    /// Write queue count of `broker` in the route (Java `getQueueIdByBroker`).
    pub fn write_queue_nums_of(&self, broker: &str) -> Option<u32> {
        self.route
            .queue_datas
            .iter()
            .find(|q| q.broker_name == broker)
            .map(|q| q.write_queue_nums)
    }
}

pub use crate::protocol::MAX_QUEUES_PER_BROKER;

/// `0..n` queue ids (Java's `int` ids), with `n` capped at [`MAX_QUEUES_PER_BROKER`].
fn queue_ids(topic: &str, broker: &str, n: u32) -> std::ops::Range<i32> {
    if n > MAX_QUEUES_PER_BROKER {
        log::warn!(
            "route of {topic}: broker {broker} claims {n} queues; using the first {MAX_QUEUES_PER_BROKER}"
        );
    }
    // The cap fits an `i32`.
    0..i32::try_from(n.min(MAX_QUEUES_PER_BROKER)).unwrap_or(0)
}

/// Java `topicRouteData2TopicPublishInfo`. Routes from the wire were checked by
/// [`decode_route`](crate::protocol::decode_route); each broker's count is cut here too.
pub fn to_publish_info(topic: &str, route: &TopicRouteData) -> TopicPublishInfo {
    let mut info = TopicPublishInfo {
        route: route.clone(),
        ..TopicPublishInfo::default()
    };
    if route
        .order_topic_conf
        .as_deref()
        .is_some_and(|c| !c.is_empty())
    {
        for (broker, n) in route.order_topic_entries() {
            for q in queue_ids(topic, broker, n) {
                info.message_queues
                    .push(MessageQueue::new(topic, broker, q));
            }
        }
        info.order_topic = true;
        return info;
    }
    let mut qds = route.queue_datas.clone();
    qds.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    for qd in qds.iter().filter(|q| q.perm.is_writeable()) {
        let has_master = route
            .broker_datas
            .iter()
            .any(|b| b.broker_name == qd.broker_name && b.master_addr().is_some());
        if !has_master {
            continue;
        }
        for q in queue_ids(topic, &qd.broker_name, qd.write_queue_nums) {
            info.message_queues
                .push(MessageQueue::new(topic, &qd.broker_name, q));
        }
    }
    info
}

/// Java `topicRouteData2TopicSubscribeInfo`.
pub fn to_subscribe_info(topic: &str, route: &TopicRouteData) -> HashSet<MessageQueue> {
    route
        .queue_datas
        .iter()
        .filter(|q| q.perm.is_readable())
        .flat_map(|qd| {
            queue_ids(topic, &qd.broker_name, qd.read_queue_nums)
                .map(move |q| MessageQueue::new(topic, &qd.broker_name, q))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{BrokerData, Perm, QueueData};

    fn route() -> TopicRouteData {
        let bd = |n: &str, master: bool| BrokerData {
            cluster: "c".into(),
            broker_name: n.into(),
            broker_addrs: if master {
                [(0, format!("{n}:1"))].into_iter().collect()
            } else {
                [(1, format!("{n}:2"))].into_iter().collect()
            },
        };
        let qd = |n: &str, w: u32, p: i32| QueueData {
            broker_name: n.into(),
            read_queue_nums: 4,
            write_queue_nums: w,
            perm: Perm::from_bits(p),
            topic_sys_flag: 0,
        };
        TopicRouteData {
            broker_datas: vec![bd("b", true), bd("a", true), bd("s", false)],
            queue_datas: vec![qd("b", 2, 6), qd("a", 3, 6), qd("s", 2, 6), qd("r", 2, 4)],
            ..Default::default()
        }
    }

    #[test]
    fn a_route_claiming_two_billion_queues_is_capped_not_allocated() {
        let mut r = route();
        for qd in &mut r.queue_datas {
            qd.read_queue_nums = u32::MAX;
            qd.write_queue_nums = u32::MAX;
        }
        let publish = to_publish_info("T", &r);
        // Brokers a and b are writable with a master.
        assert_eq!(
            publish.message_queues.len(),
            2 * MAX_QUEUES_PER_BROKER as usize
        );
        let subscribe = to_subscribe_info("T", &r);
        // All four are readable (perm 6 = read + write, 4 = read).
        assert_eq!(subscribe.len(), 4 * MAX_QUEUES_PER_BROKER as usize);
        r.order_topic_conf = Some(format!("a:{}", i32::MAX));
        assert_eq!(
            to_publish_info("T", &r).message_queues.len(),
            MAX_QUEUES_PER_BROKER as usize
        );
    }

    #[test]
    fn publish_info_has_writable_queues_of_brokers_with_a_master_sorted_by_broker() {
        let info = to_publish_info("T", &route());
        let got: Vec<(String, i32)> = info
            .message_queues
            .iter()
            .map(|m| (m.broker_name.to_string(), m.queue_id))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), 0),
                ("a".into(), 1),
                ("a".into(), 2),
                ("b".into(), 0),
                ("b".into(), 1)
            ]
        );
        assert!(!info.order_topic);
        assert_eq!(info.write_queue_nums_of("a"), Some(3));
        assert_eq!(info.write_queue_nums_of("z"), None);
    }

    #[test]
    fn order_topic_conf_wins() {
        let mut r = route();
        r.order_topic_conf = Some("x:2;y:1".into());
        let info = to_publish_info("T", &r);
        assert!(info.order_topic);
        assert_eq!(info.message_queues.len(), 3);
        assert_eq!(&*info.message_queues[2].broker_name, "y");
    }

    #[test]
    fn subscribe_info_has_every_readable_queue() {
        let s = to_subscribe_info("T", &route());
        assert_eq!(s.len(), 16, "a, b, s and read-only r: 4 each");
    }

    #[test]
    fn retries_avoid_the_last_broker_and_rotation_covers_all_queues() {
        let info = to_publish_info("T", &route());
        for _ in 0..20 {
            assert_eq!(
                &*info.select_one_avoiding(Some("a")).unwrap().broker_name,
                "b"
            );
        }
        let mut seen = HashSet::new();
        for _ in 0..5 {
            seen.insert(info.select_one().unwrap().clone());
        }
        assert_eq!(seen.len(), 5, "five consecutive picks visit five queues");
    }
}
