//! The bodies of the requests a broker relays to a consumer for the admin tool (Java
//! `ClientRemotingProcessor`): running info (GET_CONSUMER_RUNNING_INFO), offsets
//! (GET_CONSUMER_STATUS_FROM_CLIENT), an offset reset (RESET_CONSUMER_CLIENT_OFFSET) and
//! a direct consumption (CONSUME_MESSAGE_DIRECTLY).
//!
//! fastjson writes and reads maps keyed by a `MessageQueue` with the key as an object
//! (`{{"brokerName":..}:..}`), which serde cannot; [`json::object_key_map`] writes them and
//! [`json::from_slice`] reads them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::heartbeat::SubscriptionData;
use super::json;
use super::DecodeError;
use crate::protocol::MessageQueue;

/// Property keys the admin tool reads from [`ConsumerRunningInfo::properties`].
pub mod prop {
    /// Name-server addresses.
    pub const NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
    /// Consume threads.
    pub const THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
    /// `true` for an orderly listener.
    pub const CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
    /// `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
    pub const CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
    /// The client's version code.
    pub const CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";
    /// When the consumer started, in ms since the epoch.
    pub const CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";
}

/// One held queue as the admin tool shows it (Java `ProcessQueueInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessQueueInfo {
    /// The offset the store holds for the queue.
    pub commit_offset: i64,
    pub cached_msg_min_offset: i64,
    pub cached_msg_max_offset: i64,
    pub cached_msg_count: i32,
    #[serde(rename = "cachedMsgSizeInMiB")]
    pub cached_msg_size_in_mib: i32,
    pub transaction_msg_min_offset: i64,
    pub transaction_msg_max_offset: i64,
    pub transaction_msg_count: i32,
    pub locked: bool,
    pub try_unlock_times: i64,
    pub last_lock_timestamp: i64,
    /// Java's spelling.
    pub droped: bool,
    pub last_pull_timestamp: i64,
    pub last_consume_timestamp: i64,
}

/// One queue a broker assigned in POP mode as the admin tool shows it (Java
/// `PopProcessQueueInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopProcessQueueInfo {
    /// Messages popped and not yet acked or handed back.
    pub wait_ack_count: i32,
    /// Java's spelling.
    pub droped: bool,
    pub last_pop_timestamp: i64,
}

/// Consumption figures of one topic (Java `ConsumeStatus`): per-second rates and mean
/// times in ms over the last minute.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeStatus {
    #[serde(rename = "pullRT")]
    pub pull_rt: f64,
    #[serde(rename = "pullTPS")]
    pub pull_tps: f64,
    #[serde(rename = "consumeRT")]
    pub consume_rt: f64,
    #[serde(rename = "consumeOKTPS")]
    pub consume_ok_tps: f64,
    #[serde(rename = "consumeFailedTPS")]
    pub consume_failed_tps: f64,
    /// Failed messages in the last hour.
    pub consume_failed_msgs: i64,
}

/// What GET_CONSUMER_RUNNING_INFO answers (Java `ConsumerRunningInfo`).
#[derive(Debug, Clone, Default)]
pub struct ConsumerRunningInfo {
    /// Settings and the `PROP_*` keys of [`prop`].
    pub properties: BTreeMap<String, String>,
    pub subscriptions: Vec<SubscriptionData>,
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// The queues popped (Java `mqPopTable`).
    pub mq_pop_table: BTreeMap<MessageQueue, PopProcessQueueInfo>,
    /// Topic → figures.
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// Java sends its thread dump here when asked; this client lists its threads.
    pub jstack: Option<String>,
}

impl ConsumerRunningInfo {
    /// The body as fastjson writes it.
    pub fn encode(&self) -> Result<Vec<u8>, DecodeError> {
        let err = |e: serde_json::Error| DecodeError::new(format!("encoding running info: {e}"));
        let mut s = String::from("{\"properties\":");
        s.push_str(&serde_json::to_string(&self.properties).map_err(err)?);
        s.push_str(",\"subscriptionSet\":");
        s.push_str(&serde_json::to_string(&self.subscriptions).map_err(err)?);
        s.push_str(",\"mqTable\":");
        json::object_key_map(&mut s, self.mq_table.iter()).map_err(err)?;
        s.push_str(",\"mqPopTable\":");
        json::object_key_map(&mut s, self.mq_pop_table.iter()).map_err(err)?;
        s.push_str(",\"statusTable\":");
        s.push_str(&serde_json::to_string(&self.status_table).map_err(err)?);
        s.push_str(",\"userConsumerInfo\":{}");
        if let Some(j) = &self.jstack {
            s.push_str(",\"jstack\":");
            s.push_str(&serde_json::to_string(j).map_err(err)?);
        }
        s.push('}');
        Ok(s.into_bytes())
    }
}

/// GET_CONSUMER_STATUS_FROM_CLIENT's answer (Java `GetConsumerStatusBody`): the offsets
/// the consumer holds for a topic.
pub fn encode_consumer_status(
    offsets: &BTreeMap<MessageQueue, i64>,
) -> Result<Vec<u8>, DecodeError> {
    let mut s = String::from("{\"messageQueueTable\":");
    json::object_key_map(&mut s, offsets.iter())
        .map_err(|e| DecodeError::new(format!("encoding consumer status: {e}")))?;
    s.push_str(",\"consumerTable\":{}}");
    Ok(s.into_bytes())
}

/// The offsets of RESET_CONSUMER_CLIENT_OFFSET's body (Java `ResetOffsetBody`).
pub fn decode_reset_offsets(body: &[u8]) -> Result<HashMap<MessageQueue, i64>, DecodeError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        offset_table: HashMap<String, i64>,
    }
    let b: Body = json::from_slice(body)?;
    b.offset_table
        .into_iter()
        .map(|(k, v)| Ok((json::parse_queue_key(&k)?, v)))
        .collect()
}

/// The outcome of a direct consumption (Java `CMResult`, without the values only Java's
/// transactional listeners give).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CmResult {
    #[serde(rename = "CR_SUCCESS")]
    Success,
    #[serde(rename = "CR_LATER")]
    Later,
    #[serde(rename = "CR_THROW_EXCEPTION")]
    ThrowException,
}

/// CONSUME_MESSAGE_DIRECTLY's answer (Java `ConsumeMessageDirectlyResult`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumeMessageDirectlyResult {
    /// Whether the listener is orderly.
    pub order: bool,
    pub auto_commit: bool,
    pub consume_result: CmResult,
    pub remark: String,
    pub spent_time_mills: i64,
}

impl ConsumeMessageDirectlyResult {
    /// The body as fastjson writes it.
    pub fn encode(&self) -> Result<Vec<u8>, DecodeError> {
        serde_json::to_vec(self).map_err(|e| DecodeError::new(format!("encoding result: {e}")))
    }
}

/// The distinct topics of `subs`, for the status table.
pub fn topics_of(subs: &[SubscriptionData]) -> BTreeSet<String> {
    subs.iter().map(|s| s.topic.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_info_is_written_with_object_keys_as_fastjson_does() {
        let mut info = ConsumerRunningInfo::default();
        info.properties
            .insert(prop::CONSUME_TYPE.into(), "CONSUME_PASSIVELY".into());
        info.mq_table.insert(
            MessageQueue::new("T", "b", 1),
            ProcessQueueInfo {
                commit_offset: 7,
                ..Default::default()
            },
        );
        let body = String::from_utf8(info.encode().unwrap()).unwrap();
        assert!(
            body.contains(
                r#""mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"commitOffset":7,"#
            ),
            "{body}"
        );
        assert!(body.contains(r#""cachedMsgSizeInMiB":0"#), "{body}");
        assert!(body.contains(r#""droped":false"#), "{body}");
        // Our own reader takes it back, as the admin tool's fastjson does.
        let back = json::normalize(body.as_bytes()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&back).unwrap();
        assert_eq!(v["properties"]["PROP_CONSUME_TYPE"], "CONSUME_PASSIVELY");
    }

    #[test]
    fn reset_offsets_are_read_from_object_keys() {
        let body = br#"{"offsetTable":{{"brokerName":"broker-a","queueId":3,"topic":"T"}:42,{"brokerName":"broker-a","queueId":0,"topic":"T"}:0}}"#;
        let m = decode_reset_offsets(body).unwrap();
        assert_eq!(m.get(&MessageQueue::new("T", "broker-a", 3)), Some(&42));
        assert_eq!(m.get(&MessageQueue::new("T", "broker-a", 0)), Some(&0));
        assert!(decode_reset_offsets(b"{\"offsetTable\":{{\"topic\":1}:2}}").is_err());
        assert!(decode_reset_offsets(b"\x00garbage").is_err());
    }

    #[test]
    fn a_direct_result_uses_java_names() {
        let r = ConsumeMessageDirectlyResult {
            order: false,
            auto_commit: true,
            consume_result: CmResult::ThrowException,
            remark: "boom".into(),
            spent_time_mills: 3,
        };
        let s = String::from_utf8(r.encode().unwrap()).unwrap();
        assert_eq!(
            s,
            r#"{"order":false,"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","remark":"boom","spentTimeMills":3}"#
        );
    }
}
