//! The JSON bodies of the admin requests `Admin` sends (Java `MQClientAPIImpl` for
//! `DefaultMQAdminExt`): a group's consume stats (GET_CONSUME_STATS), the name server's
//! topic list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), a broker's subscription groups
//! (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and the group written by
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
//!
//! Every decoder takes a body the remoting layer has already bounded by its frame limit,
//! reads it with the tolerant fastjson reader and fails with a [`DecodeError`], never a
//! panic; numbers a broker should never send (negative counts) are clamped, not trusted.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::json;
use super::DecodeError;
use crate::protocol::MessageQueue;
use crate::util::time_from_millis;

/// Where a group stands in one queue (Java `OffsetWrapper`, a line of `consumerProgress`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueProgress {
    /// The queue.
    pub queue: MessageQueue,
    /// The queue's max offset: where the next message will be stored.
    pub broker_offset: i64,
    /// The group's committed offset in the queue (0 when it has none).
    pub consumer_offset: i64,
    /// The offset pulled up to (5.x brokers; 0 from 4.x).
    pub pull_offset: i64,
    /// Store time of the last consumed message, if the group consumed any.
    pub last_timestamp: Option<SystemTime>,
}

impl QueueProgress {
    /// Messages stored but not yet consumed by the group (`brokerOffset - consumerOffset`,
    /// never below 0).
    pub fn lag(&self) -> u64 {
        u64::try_from(self.broker_offset.saturating_sub(self.consumer_offset)).unwrap_or(0)
    }
}

/// A consumer group's progress over its queues (Java `ConsumeStats`), merged from every
/// broker that knows the group.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ConsumeStats {
    /// Per queue, sorted by topic, broker name and queue id.
    pub queues: BTreeMap<MessageQueue, QueueProgress>,
    /// Messages the group consumed per second, summed over the brokers.
    pub consume_tps: f64,
}

impl ConsumeStats {
    /// Sum of every queue's [`lag`](QueueProgress::lag) (Java `computeTotalDiff`).
    pub fn total_diff(&self) -> u64 {
        self.queues
            .values()
            .map(QueueProgress::lag)
            .fold(0u64, u64::saturating_add)
    }

    /// Adds another broker's stats (Java `putAll` and a sum of the TPS).
    pub(crate) fn merge(&mut self, other: ConsumeStats) {
        self.queues.extend(other.queues);
        self.consume_tps += other.consume_tps;
    }
}

/// GET_CONSUME_STATS's answer.
pub fn decode_consume_stats(body: &[u8]) -> Result<ConsumeStats, DecodeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wrapper {
        #[serde(default)]
        broker_offset: i64,
        #[serde(default)]
        consumer_offset: i64,
        #[serde(default)]
        pull_offset: i64,
        #[serde(default)]
        last_timestamp: i64,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        offset_table: HashMap<String, Wrapper>,
        #[serde(default)]
        consume_tps: f64,
    }
    let b: Body = json::from_slice(body)?;
    let mut queues = BTreeMap::new();
    for (k, w) in b.offset_table {
        let queue: MessageQueue = json::parse_queue_key(&k)?;
        queues.insert(
            queue.clone(),
            QueueProgress {
                queue,
                broker_offset: w.broker_offset,
                consumer_offset: w.consumer_offset,
                pull_offset: w.pull_offset,
                last_timestamp: (w.last_timestamp > 0).then(|| time_from_millis(w.last_timestamp)),
            },
        );
    }
    let consume_tps = if b.consume_tps.is_finite() && b.consume_tps >= 0.0 {
        b.consume_tps
    } else {
        0.0
    };
    Ok(ConsumeStats {
        queues,
        consume_tps,
    })
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER's answer (Java `TopicList`): the names, sorted.
pub fn decode_topic_list(body: &[u8]) -> Result<Vec<String>, DecodeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        topic_list: Vec<String>,
    }
    let b: Body = json::from_slice(body)?;
    let mut topics = b.topic_list;
    topics.sort_unstable();
    topics.dedup();
    Ok(topics)
}

/// A consumer group's settings on a broker (Java `SubscriptionGroupConfig`).
/// [`SubscriptionGroupConfig::new`] gives Java's defaults; change the fields you need.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriptionGroupConfig {
    /// The group.
    pub group_name: String,
    /// Whether the group may consume (default true).
    pub consume_enable: bool,
    /// Whether a new group may start from the first offset (default true).
    pub consume_from_min_enable: bool,
    /// Whether the group may consume in broadcasting mode (default true).
    pub consume_broadcast_enable: bool,
    /// Whether the group consumes orderly (5.x; default false; 4.x brokers ignore it).
    pub consume_message_orderly: bool,
    /// Queues of the group's retry topic (default 1).
    pub retry_queue_nums: u32,
    /// Reconsume attempts before the dead-letter queue (default 16).
    pub retry_max_times: u32,
    /// The broker id to pull from (default 0, the master).
    pub broker_id: u64,
    /// The broker id to pull from when the group is slow (default 1).
    pub which_broker_when_consume_slowly: u64,
    /// Whether the broker tells the group's consumers when the group changes (default true).
    pub notify_consumer_ids_changed_enable: bool,
    /// The group's system flag (default 0).
    pub group_sys_flag: i32,
    /// Java `consumeTimeoutMinute` (default 15 min; sent in whole minutes, rounded up).
    pub consume_timeout: Duration,
}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: impl Into<String>) -> Self {
        SubscriptionGroupConfig {
            group_name: group_name.into(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout: Duration::from_secs(15 * 60),
        }
    }

    /// The body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as fastjson reads it.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, DecodeError> {
        serde_json::to_vec(&self.to_wire())
            .map_err(|e| DecodeError::new(format!("encoding a group: {e}")))
    }

    fn to_wire(&self) -> GroupWire {
        let minutes = self.consume_timeout.as_secs().div_ceil(60);
        GroupWire {
            group_name: self.group_name.clone(),
            consume_enable: self.consume_enable,
            consume_from_min_enable: self.consume_from_min_enable,
            consume_broadcast_enable: self.consume_broadcast_enable,
            consume_message_orderly: self.consume_message_orderly,
            retry_queue_nums: clamp_i32(u64::from(self.retry_queue_nums)),
            retry_max_times: clamp_i32(u64::from(self.retry_max_times)),
            broker_id: i64::try_from(self.broker_id).unwrap_or(i64::MAX),
            which_broker_when_consume_slowly: i64::try_from(self.which_broker_when_consume_slowly)
                .unwrap_or(i64::MAX),
            notify_consumer_ids_changed_enable: self.notify_consumer_ids_changed_enable,
            group_sys_flag: self.group_sys_flag,
            consume_timeout_minute: clamp_i32(minutes),
        }
    }

    fn from_wire(w: GroupWire) -> Self {
        let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
        SubscriptionGroupConfig {
            group_name: w.group_name,
            consume_enable: w.consume_enable,
            consume_from_min_enable: w.consume_from_min_enable,
            consume_broadcast_enable: w.consume_broadcast_enable,
            consume_message_orderly: w.consume_message_orderly,
            retry_queue_nums: u32::try_from(w.retry_queue_nums).unwrap_or(0),
            retry_max_times: u32::try_from(w.retry_max_times).unwrap_or(0),
            broker_id: unsigned(w.broker_id),
            which_broker_when_consume_slowly: unsigned(w.which_broker_when_consume_slowly),
            notify_consumer_ids_changed_enable: w.notify_consumer_ids_changed_enable,
            group_sys_flag: w.group_sys_flag,
            consume_timeout: Duration::from_secs(
                unsigned(i64::from(w.consume_timeout_minute)) * 60,
            ),
        }
    }
}

fn clamp_i32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The group as fastjson writes and reads it; a field a broker leaves out keeps Java's default.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GroupWire {
    group_name: String,
    consume_enable: bool,
    consume_from_min_enable: bool,
    consume_broadcast_enable: bool,
    consume_message_orderly: bool,
    retry_queue_nums: i32,
    retry_max_times: i32,
    broker_id: i64,
    which_broker_when_consume_slowly: i64,
    notify_consumer_ids_changed_enable: bool,
    group_sys_flag: i32,
    consume_timeout_minute: i32,
}

impl Default for GroupWire {
    fn default() -> Self {
        SubscriptionGroupConfig::new("").to_wire()
    }
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer (Java `SubscriptionGroupWrapper`): the
/// broker's groups by name. A group whose entry names no group takes its table key.
pub fn decode_subscription_groups(
    body: &[u8],
) -> Result<BTreeMap<String, SubscriptionGroupConfig>, DecodeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        subscription_group_table: HashMap<String, GroupWire>,
    }
    let b: Body = json::from_slice(body)?;
    Ok(b.subscription_group_table
        .into_iter()
        .map(|(name, mut w)| {
            if w.group_name.is_empty() {
                w.group_name.clone_from(&name);
            }
            (name, SubscriptionGroupConfig::from_wire(w))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shaped as a 4.9.7 broker writes it: object keys, `lastTimestamp` only when consumed.
    const STATS: &[u8] = br#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000000,"pullOffset":0},{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}"#;

    #[test]
    fn consume_stats_are_read_per_queue_with_their_lag() {
        let s = decode_consume_stats(STATS).unwrap();
        assert_eq!(s.consume_tps, 1.5);
        let q1 = &s.queues[&MessageQueue::new("T", "broker-a", 1)];
        assert_eq!((q1.broker_offset, q1.consumer_offset, q1.lag()), (10, 4, 6));
        assert_eq!(q1.last_timestamp, Some(time_from_millis(1_700_000_000_000)));
        let q0 = &s.queues[&MessageQueue::new("T", "broker-a", 0)];
        assert_eq!((q0.lag(), q0.last_timestamp), (3, None));
        assert_eq!(s.total_diff(), 9);
        let queue_ids: Vec<i32> = s.queues.keys().map(MessageQueue::queue_id).collect();
        assert_eq!(queue_ids, [0, 1]);
    }

    #[test]
    fn hostile_consume_stats_are_errors_or_clamped_never_panics() {
        let check_err = |body: &[u8]| assert!(decode_consume_stats(body).is_err(), "{body:?}");
        check_err(b"");
        check_err(b"\x00\xff");
        check_err(br#"{"offsetTable":{{"topic":1}:{}}}"#);
        check_err(
            br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":"x"}}}"#,
        );
        check_err(&[b'['; 100_000]);
        // A consumer offset past the broker's, a negative TPS: no lag, no TPS.
        let s = decode_consume_stats(br#"{"consumeTps":-3,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":1,"consumerOffset":9223372036854775807}}}"#).unwrap();
        assert_eq!((s.total_diff(), s.consume_tps), (0, 0.0));
        let s = decode_consume_stats(br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":9223372036854775807,"consumerOffset":-9223372036854775808}}}"#).unwrap();
        assert_eq!(s.total_diff(), i64::MAX as u64);
    }

    #[test]
    fn the_topic_list_is_sorted_and_unique() {
        let body = br#"{"topicList":["b","TBW102","a","b"],"brokerAddr":null}"#;
        assert_eq!(decode_topic_list(body).unwrap(), ["TBW102", "a", "b"]);
        assert_eq!(decode_topic_list(b"{}").unwrap(), Vec::<String>::new());
        assert!(decode_topic_list(br#"{"topicList":[1]}"#).is_err());
        assert!(decode_topic_list(b"{\"topicList\":[\"a\"").is_err());
    }

    #[test]
    fn subscription_groups_keep_java_defaults_for_what_a_broker_leaves_out() {
        // 5.3.3 fields (a retry policy, attributes) are ignored; 4.x has fewer fields.
        let body = br#"{"dataVersion":{"counter":3,"timestamp":1},"subscriptionGroupTable":{"g1":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"consumeFromMinEnable":true,"groupName":"g1","groupRetryPolicy":{"type":"CUSTOMIZED"},"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1,"attributes":{}},"g2":{"retryMaxTimes":-1}}}"#;
        let groups = decode_subscription_groups(body).unwrap();
        let g1 = &groups["g1"];
        assert!(!g1.consume_enable);
        assert_eq!(g1.retry_max_times, 3);
        assert_eq!(g1.consume_timeout, Duration::from_secs(900));
        let g2 = &groups["g2"];
        assert_eq!(g2.group_name, "g2");
        assert_eq!(g2.retry_max_times, 0, "a negative count is clamped");
        assert!(g2.consume_enable && g2.notify_consumer_ids_changed_enable);
        assert!(decode_subscription_groups(br#"{"subscriptionGroupTable":[]}"#).is_err());
        assert!(decode_subscription_groups(b"nonsense").is_err());
    }

    #[test]
    fn a_new_group_is_written_with_java_defaults_and_names() {
        let mut g = SubscriptionGroupConfig::new("g");
        g.consume_timeout = Duration::from_secs(61);
        let v: serde_json::Value = serde_json::from_slice(&g.encode().unwrap()).unwrap();
        assert_eq!(v["groupName"], "g");
        assert_eq!(v["consumeEnable"], true);
        assert_eq!(v["retryQueueNums"], 1);
        assert_eq!(v["retryMaxTimes"], 16);
        assert_eq!(v["brokerId"], 0);
        assert_eq!(v["whichBrokerWhenConsumeSlowly"], 1);
        assert_eq!(v["notifyConsumerIdsChangedEnable"], true);
        assert_eq!(v["consumeTimeoutMinute"], 2, "rounded up");
        // And it reads back as it was.
        let table = format!(
            "{{\"subscriptionGroupTable\":{{\"g\":{}}}}}",
            String::from_utf8(g.encode().unwrap()).unwrap()
        );
        let mut back = decode_subscription_groups(table.as_bytes()).unwrap();
        let back = back.remove("g").unwrap();
        assert_eq!(back.consume_timeout, Duration::from_secs(120));
        assert_eq!(back.retry_max_times, g.retry_max_times);
    }
}
