//! POP consumption (RocketMQ 5.x): the headers of POP_MESSAGE, ACK_MESSAGE and
//! CHANGE_MESSAGE_INVISIBLETIME, the offset summaries a pop response carries
//! (`startOffsetInfo`, `msgOffsetInfo`), and the receipt every popped message needs for its
//! ack (Java `ExtraInfoUtil`, the `POP_CK` property).
//!
//! A receipt is Java's "extra info": eight fields separated by spaces,
//! `ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset`,
//! where `retry` is 0 for the topic itself, 1 or 2 for the group's pop retry topic (V1
//! `%RETRY%group_topic`, V2 `%RETRY%group+topic`). Everything here is parsed from the
//! broker's text without panicking: a malformed field is a [`DecodeError`].

use std::collections::HashMap;

use super::DecodeError;

crate::command_header! {
    /// POP_MESSAGE (200050) request (Java `PopMessageRequestHeader`).
    pub struct PopMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        /// -1: every readable queue of the topic on that broker (and the retry topic).
        pub queue_id: i32 => "queueId",
        /// At most 32 (the broker refuses more).
        pub max_msg_nums: i32 => "maxMsgNums",
        /// ms the popped messages stay invisible to other pops.
        pub invisible_time: i64 => "invisibleTime",
        /// ms the broker may hold the request when nothing is there (long polling).
        pub poll_time: i64 => "pollTime",
        /// ms since the epoch: the broker answers POLLING_TIMEOUT when
        /// `now - bornTime - pollTime` is over 500 ms.
        pub born_time: i64 => "bornTime",
        /// Start of a group without an offset: 0 the first message, 1 the last
        /// (Java `ConsumeInitMode`).
        pub init_mode: i32 => "initMode",
        pub exp_type: Option<String> => "expType",
        pub exp: Option<String> => "exp",
        pub order: Option<bool> => "order",
        pub attempt_id: Option<String> => "attemptId",
        pub broker_name: Option<String> => "bname",
    }
}

crate::command_header! {
    /// POP_MESSAGE response (Java `PopMessageResponseHeader`).
    pub struct PopMessageResponseHeader {
        /// ms since the epoch.
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
        pub rest_num: i64 => "restNum",
        /// `retry queueId startOffset` per queue, `;`-separated.
        pub start_offset_info: Option<String> => "startOffsetInfo",
        /// `retry queueId offset,offset,...` per queue, `;`-separated.
        pub msg_offset_info: Option<String> => "msgOffsetInfo",
        pub order_count_info: Option<String> => "orderCountInfo",
    }
}

crate::command_header! {
    /// ACK_MESSAGE (200051) request (Java `AckMessageRequestHeader`).
    pub struct AckMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        /// The topic the message was popped from (the retry topic for a retried one).
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        /// The receipt.
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
        pub broker_name: Option<String> => "bname",
    }
}

crate::command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME (200053) request (Java `ChangeInvisibleTimeRequestHeader`).
    pub struct ChangeInvisibleTimeRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
        /// ms from now.
        pub invisible_time: i64 => "invisibleTime",
        pub broker_name: Option<String> => "bname",
    }
}

crate::command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response.
    pub struct ChangeInvisibleTimeResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
    }
}

crate::command_header! {
    /// NOTIFICATION (200054) request (Java `NotificationRequestHeader`): long polling
    /// that answers whether the group has messages to pop, without popping them.
    pub struct NotificationRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        /// -1: every readable queue of the topic on that broker (and the retry topic).
        pub queue_id: i32 => "queueId",
        /// ms the broker may hold the request when there is nothing.
        pub poll_time: i64 => "pollTime",
        /// ms since the epoch; the broker's wait ends at `bornTime + pollTime`.
        pub born_time: i64 => "bornTime",
        pub order: Option<bool> => "order",
        pub attempt_id: Option<String> => "attemptId",
        pub broker_name: Option<String> => "bname",
    }
}

crate::command_header! {
    /// NOTIFICATION response (Java `NotificationResponseHeader`).
    pub struct NotificationResponseHeader {
        pub has_msg: bool => "hasMsg",
        pub polling_full: Option<bool> => "pollingFull",
    }
}

/// The ack handle of one popped message (Java `ExtraInfoUtil`'s eight fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// First queue offset of the pop's check point.
    pub ck_queue_offset: i64,
    /// ms since the epoch.
    pub pop_time: i64,
    /// ms.
    pub invisible_time: i64,
    pub revive_qid: i32,
    /// 0, 1 (pop retry topic V1) or 2 (V2), as the broker wrote it.
    pub retry: u8,
    pub broker_name: String,
    pub queue_id: i32,
    pub queue_offset: i64,
}

/// Longest receipt accepted: eight numbers and a broker name.
const MAX_EXTRA_INFO_LEN: usize = 1024;

impl ExtraInfo {
    /// Parses a receipt; fewer or more than eight fields, or a field that is not a number
    /// where one belongs, is an error.
    pub fn parse(s: &str) -> Result<ExtraInfo, DecodeError> {
        if s.len() > MAX_EXTRA_INFO_LEN {
            return Err(DecodeError::new(format!(
                "receipt of {} bytes, more than {MAX_EXTRA_INFO_LEN}",
                s.len()
            )));
        }
        let f: Vec<&str> = s.split(' ').collect();
        if f.len() != 8 {
            return Err(DecodeError::new(format!(
                "receipt {s:?} has {} fields, not 8",
                f.len()
            )));
        }
        let retry = match f[4] {
            "0" => 0,
            "1" => 1,
            "2" => 2,
            other => {
                return Err(DecodeError::new(format!(
                    "receipt {s:?}: retry mark {other:?} is not 0, 1 or 2"
                )))
            }
        };
        if f[5].is_empty() {
            return Err(DecodeError::new(format!("receipt {s:?} names no broker")));
        }
        Ok(ExtraInfo {
            ck_queue_offset: num(f[0], "ckQueueOffset", s)?,
            pop_time: num(f[1], "popTime", s)?,
            invisible_time: num(f[2], "invisibleTime", s)?,
            revive_qid: num(f[3], "reviveQid", s)?,
            retry,
            broker_name: f[5].to_string(),
            queue_id: num(f[6], "queueId", s)?,
            queue_offset: num(f[7], "queueOffset", s)?,
        })
    }

    /// The receipt text, as the broker expects it back.
    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )
    }

    /// The topic to ack in (Java `ExtraInfoUtil.getRealTopic`): `topic` itself, or the
    /// group's pop retry topic the message came from.
    pub fn real_topic(&self, topic: &str, group: &str) -> String {
        match self.retry {
            1 => format!("%RETRY%{group}_{topic}"),
            2 => format!("%RETRY%{group}+{topic}"),
            _ => topic.to_string(),
        }
    }
}

fn num<T: std::str::FromStr>(field: &str, what: &str, whole: &str) -> Result<T, DecodeError> {
    field.parse().map_err(|_| {
        DecodeError::new(format!(
            "receipt {whole:?}: {what} {field:?} is not a number"
        ))
    })
}

/// The retry mark of a topic a message was popped from (Java `ExtraInfoUtil.getRetry`).
pub fn retry_mark(topic: &str) -> u8 {
    match topic.strip_prefix("%RETRY%") {
        Some(rest) if rest.contains('+') => 2,
        Some(_) => 1,
        None => 0,
    }
}

/// Most queues one pop response may describe (it pops from one topic's queues and its
/// retry topic's; brokers cap queues per topic far below this).
const MAX_INFO_ENTRIES: usize = 65_536;

/// Parses `startOffsetInfo`/`msgOffsetInfo`-shaped text: `;`-separated entries of three
/// space-separated fields `retry queueId value`, keyed `retry@queueId`; a repeated key is
/// an error, as in Java.
fn parse_info<T>(
    text: &str,
    what: &str,
    mut value: impl FnMut(&str) -> Result<T, DecodeError>,
) -> Result<HashMap<String, T>, DecodeError> {
    let mut map = HashMap::new();
    if text.is_empty() {
        return Ok(map);
    }
    for (i, entry) in text.split(';').enumerate() {
        if i >= MAX_INFO_ENTRIES {
            return Err(DecodeError::new(format!(
                "{what}: more than {MAX_INFO_ENTRIES} queues"
            )));
        }
        let f: Vec<&str> = entry.split(' ').collect();
        if f.len() != 3 {
            return Err(DecodeError::new(format!(
                "{what}: entry {entry:?} has not 3 fields"
            )));
        }
        let key = format!("{}@{}", f[0], f[1]);
        let v = value(f[2])?;
        if map.insert(key, v).is_some() {
            return Err(DecodeError::new(format!(
                "{what}: queue {} {} twice",
                f[0], f[1]
            )));
        }
    }
    Ok(map)
}

/// What a pop response says about its messages' offsets, and the receipts built from it
/// (Java `MQClientAPIImpl.processPopResponse`).
#[derive(Debug)]
pub struct PopOffsets {
    pop_time: i64,
    invisible_time: i64,
    revive_qid: i32,
    /// `retry@queueId` → check point start offset (absent from brokers before 5.0.3).
    start: Option<HashMap<String, i64>>,
    /// `retry@queueId` → queue offsets of the popped messages, in response order.
    msg: HashMap<String, Vec<i64>>,
    /// How many messages of each `retry@queueId` were given receipts so far.
    seen: HashMap<String, usize>,
    /// Without `startOffsetInfo`: the first message's offset per topic and queue.
    first: HashMap<(String, i32), i64>,
}

impl PopOffsets {
    /// Reads the summaries of a POP_MESSAGE response header.
    pub fn new(h: &PopMessageResponseHeader) -> Result<PopOffsets, DecodeError> {
        let start = match h.start_offset_info.as_deref() {
            None | Some("") => None,
            Some(t) => Some(parse_info(t, "startOffsetInfo", |v| {
                v.parse::<i64>().map_err(|_| {
                    DecodeError::new(format!("startOffsetInfo: {v:?} is not an offset"))
                })
            })?),
        };
        let msg = parse_info(
            h.msg_offset_info.as_deref().unwrap_or(""),
            "msgOffsetInfo",
            |v| {
                v.split(',')
                    .map(|o| {
                        o.parse::<i64>().map_err(|_| {
                            DecodeError::new(format!("msgOffsetInfo: {o:?} is not an offset"))
                        })
                    })
                    .collect::<Result<Vec<i64>, DecodeError>>()
            },
        )?;
        Ok(PopOffsets {
            pop_time: h.pop_time,
            invisible_time: h.invisible_time,
            revive_qid: h.revive_qid,
            start,
            msg,
            seen: HashMap::new(),
            first: HashMap::new(),
        })
    }

    /// The receipt of the next message of the response, in order: `topic` as the message
    /// carries it, its `POP_CK` property if the broker set one (then that is the receipt),
    /// its queue and offset.
    pub fn receipt(
        &mut self,
        topic: &str,
        pop_ck: Option<&str>,
        broker_name: &str,
        queue_id: i32,
        queue_offset: i64,
    ) -> Result<ExtraInfo, DecodeError> {
        if let Some(ck) = pop_ck {
            return ExtraInfo::parse(ck);
        }
        let retry = retry_mark(topic);
        let (ck_queue_offset, msg_offset) = match &self.start {
            None => {
                let first = *self
                    .first
                    .entry((topic.to_string(), queue_id))
                    .or_insert(queue_offset);
                (first, queue_offset)
            }
            Some(start) => {
                let key = format!("{retry}@{queue_id}");
                let ck = *start.get(&key).ok_or_else(|| {
                    DecodeError::new(format!("pop response: no start offset of queue {key}"))
                })?;
                let index = self.seen.entry(key.clone()).or_insert(0);
                let offset = self
                    .msg
                    .get(&key)
                    .and_then(|v| v.get(*index))
                    .copied()
                    .ok_or_else(|| {
                        DecodeError::new(format!(
                            "pop response: more messages of queue {key} than offsets"
                        ))
                    })?;
                *index += 1;
                if offset != queue_offset {
                    log::warn!(
                        "pop response: queue {key}: offset {offset} listed, the message says {queue_offset}"
                    );
                }
                (ck, offset)
            }
        };
        Ok(ExtraInfo {
            ck_queue_offset,
            pop_time: self.pop_time,
            invisible_time: self.invisible_time,
            revive_qid: self.revive_qid,
            retry,
            broker_name: broker_name.to_string(),
            queue_id,
            queue_offset: msg_offset,
        })
    }
}

/// Widest span between a check point's first offset and an acked offset that goes into
/// a batch ack's bit set (128 KiB of bits); a receipt beyond it is acked on its own.
const MAX_BATCH_ACK_SPAN: i64 = 1 << 20;

/// One check point's acks in a BATCH_ACK_MESSAGE (200151) body (Java `BatchAck`, written
/// with its short JSON names): the receipts of one pop that share retry mark, queue, first
/// offset and pop time, their offsets as bits from `start_offset`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchAck {
    #[serde(rename = "c")]
    pub consumer_group: String,
    /// The topic subscribed, not the retry topic: the broker adds `retry` to it.
    #[serde(rename = "t")]
    pub topic: String,
    /// `"0"`, `"1"` or `"2"`, as in the receipt.
    #[serde(rename = "r")]
    pub retry: String,
    #[serde(rename = "so")]
    pub start_offset: i64,
    #[serde(rename = "q")]
    pub queue_id: i32,
    #[serde(rename = "rq")]
    pub revive_queue_id: i32,
    #[serde(rename = "pt")]
    pub pop_time: i64,
    #[serde(rename = "it")]
    pub invisible_time: i64,
    /// Java `BitSet.toByteArray()` (bit `i` is byte `i / 8`, bit `i % 8`; no trailing
    /// zero bytes) in base64, as fastjson writes a `byte[]`.
    #[serde(rename = "b", serialize_with = "base64_bytes")]
    pub bit_set: Vec<u8>,
}

fn base64_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine as _;
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

impl BatchAck {
    fn set(&mut self, bit: usize) {
        let byte = bit / 8;
        if self.bit_set.len() <= byte {
            self.bit_set.resize(byte + 1, 0);
        }
        self.bit_set[byte] |= 1 << (bit % 8);
    }
}

/// BATCH_ACK_MESSAGE request body (Java `BatchAckMessageRequestBody`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchAckMessageRequestBody {
    pub broker_name: String,
    pub acks: Vec<BatchAck>,
}

impl BatchAckMessageRequestBody {
    /// The body acking `receipts` of `topic` (as subscribed) for `group`, all of one
    /// broker, merged as Java `MQClientAPIImpl.batchAckMessageAsync` does (by retry mark,
    /// queue, check point offset and pop time). Receipts that cannot go in (of another
    /// broker than the first, or an offset before its check point or too far past it)
    /// come back to be acked one by one.
    pub fn new<'a>(
        group: &str,
        topic: &str,
        receipts: &'a [ExtraInfo],
    ) -> (BatchAckMessageRequestBody, Vec<&'a ExtraInfo>) {
        let broker_name = receipts
            .first()
            .map(|r| r.broker_name.clone())
            .unwrap_or_default();
        let mut acks: Vec<BatchAck> = Vec::new();
        let mut alone = Vec::new();
        for r in receipts {
            let span = r.queue_offset.checked_sub(r.ck_queue_offset);
            let bit = match span {
                Some(d) if r.broker_name == broker_name && (0..MAX_BATCH_ACK_SPAN).contains(&d) => {
                    // Below 2^20: fits.
                    d as usize
                }
                _ => {
                    alone.push(r);
                    continue;
                }
            };
            let i = match acks.iter().position(|a| {
                a.retry.as_bytes() == [b'0' + r.retry]
                    && a.queue_id == r.queue_id
                    && a.start_offset == r.ck_queue_offset
                    && a.pop_time == r.pop_time
            }) {
                Some(i) => i,
                None => {
                    acks.push(BatchAck {
                        consumer_group: group.to_string(),
                        topic: topic.to_string(),
                        retry: r.retry.to_string(),
                        start_offset: r.ck_queue_offset,
                        queue_id: r.queue_id,
                        revive_queue_id: r.revive_qid,
                        pop_time: r.pop_time,
                        invisible_time: r.invisible_time,
                        bit_set: Vec::new(),
                    });
                    acks.len() - 1
                }
            };
            acks[i].set(bit);
        }
        (BatchAckMessageRequestBody { broker_name, acks }, alone)
    }
}

/// How a group consumes a topic's queue (Java `MessageRequestMode`): set per topic and
/// group on the broker (`mqadmin setConsumeMode`), read back with QUERY_ASSIGNMENT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MessageRequestMode {
    /// Pulls with offsets, queues shared out among the group (default).
    #[default]
    Pull,
    /// POP: the broker hands out messages; up to `popShareQueueNum + 1` consumers share
    /// a queue.
    Pop,
}

impl MessageRequestMode {
    /// Java's constant name.
    pub fn wire(self) -> &'static str {
        match self {
            MessageRequestMode::Pull => "PULL",
            MessageRequestMode::Pop => "POP",
        }
    }
}

/// QUERY_ASSIGNMENT (400) request body (Java `QueryAssignmentRequestBody`).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAssignmentRequestBody<'a> {
    pub topic: &'a str,
    pub consumer_group: &'a str,
    pub client_id: &'a str,
    /// Java `AllocateMessageQueueStrategy.getName()` (`AVG`, ...).
    pub strategy_name: &'a str,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: &'a str,
}

/// SET_MESSAGE_REQUEST_MODE (401) request body (Java `SetMessageRequestModeRequestBody`).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetMessageRequestModeRequestBody<'a> {
    pub topic: &'a str,
    pub consumer_group: &'a str,
    /// `PULL` or `POP`.
    pub mode: &'a str,
    pub pop_share_queue_num: i32,
}

/// One queue of a QUERY_ASSIGNMENT answer and how to consume it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageQueueAssignment {
    pub queue: super::MessageQueue,
    pub mode: MessageRequestMode,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssignmentWire {
    message_queue: super::QueueWire,
    #[serde(default)]
    mode: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryAssignmentResponseWire {
    #[serde(default)]
    message_queue_assignments: Option<Vec<AssignmentWire>>,
}

/// Decodes a QUERY_ASSIGNMENT answer (fastjson, through [`super::json`]); a mode other
/// than `PULL` or `POP` is an error, a missing one `PULL` (Java's default). A missing or
/// null set is `None`: the broker could not allocate (unknown topic or strategy, no
/// consumer list), and Java keeps its current queues then; an empty set means no queue.
pub fn decode_query_assignment(
    body: &[u8],
) -> Result<Option<Vec<MessageQueueAssignment>>, DecodeError> {
    let r: QueryAssignmentResponseWire = super::json::from_slice(body)?;
    let Some(set) = r.message_queue_assignments else {
        return Ok(None);
    };
    set.into_iter()
        .map(|a| {
            let mode = match a.mode.as_deref() {
                None | Some("PULL") => MessageRequestMode::Pull,
                Some("POP") => MessageRequestMode::Pop,
                Some(other) => {
                    return Err(DecodeError::new(format!(
                        "assignment: unknown request mode {other:?}"
                    )))
                }
            };
            Ok(MessageQueueAssignment {
                queue: a.message_queue.into(),
                mode,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CommandHeader, ExtFields, RemotingCommand};

    #[test]
    fn pop_query_assignment_answers_decode_or_are_errors() {
        // As the 5.3.3 broker writes it (fastjson: a set, unquoted field order).
        let body = br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","queueId":1,"topic":"T"},"mode":"POP"},{"messageQueue":{"brokerName":"broker-a","queueId":0,"topic":"T"},"mode":"PULL","attachments":{}}]}"#;
        let a = decode_query_assignment(body).unwrap().unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].queue.queue_id(), 1);
        assert_eq!(a[0].mode, MessageRequestMode::Pop);
        assert_eq!(a[1].mode, MessageRequestMode::Pull);
        assert_eq!(decode_query_assignment(b"{}").unwrap(), None);
        let null = br#"{"messageQueueAssignments":null}"#;
        assert_eq!(decode_query_assignment(null).unwrap(), None);
        let empty = br#"{"messageQueueAssignments":[]}"#;
        assert_eq!(decode_query_assignment(empty).unwrap(), Some(vec![]));
        let no_mode = br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":0,"topic":"T"}}]}"#;
        assert_eq!(
            decode_query_assignment(no_mode).unwrap().unwrap()[0].mode,
            MessageRequestMode::Pull
        );
        for bad in [
            &br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":0,"topic":"T"},"mode":"PUSH"}]}"#[..],
            br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","topic":"T"}}]}"#,
            br#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":"x","topic":"T"}}]}"#,
            br#"{"messageQueueAssignments":7}"#,
            b"",
            b"{",
            &[b'['; 10_000][..],
        ] {
            assert!(decode_query_assignment(bad).is_err(), "{:?}", String::from_utf8_lossy(&bad[..bad.len().min(80)]));
        }
    }

    #[test]
    fn pop_batch_ack_body_merges_receipts_by_check_point_as_java_writes_it() {
        let r = |ck: i64, retry: u8, broker: &str, offset: i64| ExtraInfo {
            ck_queue_offset: ck,
            pop_time: 1_700_000_000_000,
            invisible_time: 60_000,
            revive_qid: 3,
            retry,
            broker_name: broker.to_string(),
            queue_id: 1,
            queue_offset: offset,
        };
        let receipts = [
            r(100, 0, "b", 100),
            r(100, 0, "b", 109),
            r(7, 1, "b", 7),
            r(100, 0, "b", 102),
            r(100, 0, "other", 100),
            r(100, 0, "b", 99),
            r(0, 0, "b", 1 << 20),
        ];
        let (body, alone) = BatchAckMessageRequestBody::new("g", "t", &receipts);
        assert_eq!(
            alone,
            vec![&receipts[4], &receipts[5], &receipts[6]],
            "another broker, before the check point, too far past it"
        );
        // Bits 0, 2 and 9: Java `BitSet.toByteArray()` [5, 2], base64 by fastjson.
        let want = serde_json::json!({"brokerName": "b", "acks": [
            {"c": "g", "t": "t", "r": "0", "so": 100, "q": 1, "rq": 3,
             "pt": 1_700_000_000_000_i64, "it": 60_000, "b": "BQI="},
            {"c": "g", "t": "t", "r": "1", "so": 7, "q": 1, "rq": 3,
             "pt": 1_700_000_000_000_i64, "it": 60_000, "b": "AQ=="},
        ]});
        assert_eq!(serde_json::to_value(&body).unwrap(), want);
        let (empty, none) = BatchAckMessageRequestBody::new("g", "t", &[]);
        assert!(empty.acks.is_empty() && none.is_empty());
    }

    #[test]
    fn pop_assignment_request_bodies_write_java_field_names() {
        let q = serde_json::to_string(&QueryAssignmentRequestBody {
            topic: "T",
            consumer_group: "G",
            client_id: "c",
            strategy_name: "AVG",
            message_model: "CLUSTERING",
        })
        .unwrap();
        assert_eq!(
            q,
            r#"{"topic":"T","consumerGroup":"G","clientId":"c","strategyName":"AVG","messageModel":"CLUSTERING"}"#
        );
        let m = serde_json::to_string(&SetMessageRequestModeRequestBody {
            topic: "T",
            consumer_group: "G",
            mode: MessageRequestMode::Pop.wire(),
            pop_share_queue_num: 2,
        })
        .unwrap();
        assert_eq!(
            m,
            r#"{"topic":"T","consumerGroup":"G","mode":"POP","popShareQueueNum":2}"#
        );
    }

    fn check_receipt(s: &str, ok: bool) {
        let r = ExtraInfo::parse(s);
        assert_eq!(r.is_ok(), ok, "{s:?}: {r:?}");
        if let Ok(e) = r {
            assert_eq!(e.encode(), s, "round trip");
        }
    }

    #[test]
    fn pop_receipts_parse_and_round_trip_or_are_errors() {
        check_receipt("12 1718000000123 30000 3 0 broker-a 1 14", true);
        check_receipt("0 1 2 3 2 b 0 0", true);
        check_receipt("-1 1 2 3 1 b -1 5", true);
        check_receipt("", false);
        check_receipt("12 1718000000123 30000 3 0 broker-a 1", false);
        check_receipt("12 1718000000123 30000 3 0 broker-a 1 14 9", false);
        check_receipt("12 1718000000123 30000 3 7 broker-a 1 14", false);
        check_receipt("x 1718000000123 30000 3 0 broker-a 1 14", false);
        check_receipt("12 1718000000123 30000 3 0  1 14", false);
        check_receipt("12 1718000000123 30000 99999999999 0 b 1 14", false);
        check_receipt(&"9".repeat(5000), false);
        check_receipt("12\u{0} 1 1 1 0 b 1 1", false);
    }

    #[test]
    fn pop_receipt_real_topic_follows_the_retry_mark() {
        let mut e = ExtraInfo::parse("0 1 2 3 0 b 0 0").unwrap();
        assert_eq!(e.real_topic("T", "G"), "T");
        e.retry = 1;
        assert_eq!(e.real_topic("T", "G"), "%RETRY%G_T");
        e.retry = 2;
        assert_eq!(e.real_topic("T", "G"), "%RETRY%G+T");
        assert_eq!(retry_mark("T"), 0);
        assert_eq!(retry_mark("%RETRY%G_T"), 1);
        assert_eq!(retry_mark("%RETRY%G+T"), 2);
    }

    /// A POP_MESSAGE response header as the 5.3.3 broker writes it (JSON header bytes).
    fn response(ext: &[(&str, &str)]) -> RemotingCommand {
        let fields: Vec<String> = ext
            .iter()
            .map(|(k, v)| format!("\"{k}\":\"{v}\""))
            .collect();
        let header = format!(
            "{{\"code\":0,\"extFields\":{{{}}},\"flag\":1,\"language\":\"JAVA\",\"opaque\":7,\"serializeTypeCurrentRPC\":\"JSON\",\"version\":475}}",
            fields.join(",")
        );
        let mut frame = Vec::new();
        let total = 4 + header.len();
        frame.extend_from_slice(&(total as u32).to_be_bytes());
        frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
        frame.extend_from_slice(header.as_bytes());
        RemotingCommand::decode(&frame[4..]).expect("frame")
    }

    #[test]
    fn pop_response_header_from_bytes_gives_each_message_its_receipt() {
        let cmd = response(&[
            ("popTime", "1718000000123"),
            ("invisibleTime", "30000"),
            ("reviveQid", "5"),
            ("restNum", "0"),
            ("startOffsetInfo", "0 1 10;1 0 3"),
            ("msgOffsetInfo", "0 1 10,12;1 0 4"),
        ]);
        let h: PopMessageResponseHeader = cmd.decode_header().unwrap();
        assert_eq!(h.revive_qid, 5);
        let mut o = PopOffsets::new(&h).unwrap();
        let a = o.receipt("T", None, "b", 1, 10).unwrap();
        assert_eq!(a.encode(), "10 1718000000123 30000 5 0 b 1 10");
        let b = o.receipt("T", None, "b", 1, 12).unwrap();
        assert_eq!(b.encode(), "10 1718000000123 30000 5 0 b 1 12");
        let r = o.receipt("%RETRY%G_T", None, "b", 0, 4).unwrap();
        assert_eq!(r.encode(), "3 1718000000123 30000 5 1 b 0 4");
        // A third message of queue 1 has no listed offset.
        assert!(o.receipt("T", None, "b", 1, 13).is_err());
        // A queue the summary does not name.
        assert!(o.receipt("T", None, "b", 7, 0).is_err());
        // A POP_CK the broker set wins.
        let ck = o.receipt("T", Some("1 2 3 4 0 c 5 6"), "b", 9, 9).unwrap();
        assert_eq!(ck.broker_name, "c");
    }

    #[test]
    fn pop_response_without_start_offsets_uses_the_first_offset_per_queue() {
        let h = PopMessageResponseHeader {
            pop_time: 5,
            invisible_time: 6,
            revive_qid: 7,
            ..Default::default()
        };
        let mut o = PopOffsets::new(&h).unwrap();
        assert_eq!(
            o.receipt("T", None, "b", 0, 3).unwrap().encode(),
            "3 5 6 7 0 b 0 3"
        );
        assert_eq!(
            o.receipt("T", None, "b", 0, 4).unwrap().encode(),
            "3 5 6 7 0 b 0 4"
        );
    }

    #[test]
    fn pop_response_hostile_offset_summaries_are_errors() {
        for (start, msg) in [
            ("0 1", "0 1 1"),
            ("0 1 x", "0 1 1"),
            ("0 1 1;0 1 2", "0 1 1"),
            ("0 1 1", "0 1 1,,2"),
            ("0 1 1", "0 1 99999999999999999999"),
            ("0 1 1", "0 1 1;0 1 1"),
            (";", "0 1 1"),
        ] {
            let h = PopMessageResponseHeader {
                start_offset_info: Some(start.into()),
                msg_offset_info: Some(msg.into()),
                ..Default::default()
            };
            assert!(PopOffsets::new(&h).is_err(), "{start:?} {msg:?}");
        }
        let many = vec!["0 1 1"; MAX_INFO_ENTRIES + 1].join(";");
        let h = PopMessageResponseHeader {
            msg_offset_info: Some(many),
            ..Default::default()
        };
        assert!(PopOffsets::new(&h).is_err());
    }

    #[test]
    fn pop_request_headers_write_java_keys() {
        let mut ext = ExtFields::new();
        PopMessageRequestHeader {
            consumer_group: "G".into(),
            topic: "T".into(),
            queue_id: -1,
            max_msg_nums: 32,
            invisible_time: 30_000,
            poll_time: 5_000,
            born_time: 1,
            init_mode: 0,
            exp_type: Some("TAG".into()),
            exp: Some("*".into()),
            order: Some(false),
            attempt_id: None,
            broker_name: Some("b".into()),
        }
        .write_to(&mut ext);
        for (k, v) in [
            ("consumerGroup", "G"),
            ("queueId", "-1"),
            ("maxMsgNums", "32"),
            ("invisibleTime", "30000"),
            ("pollTime", "5000"),
            ("initMode", "0"),
            ("expType", "TAG"),
            ("order", "false"),
            ("bname", "b"),
        ] {
            assert_eq!(ext.get(k), Some(v), "{k}");
        }
        assert_eq!(ext.get("attemptId"), None);
    }
}
