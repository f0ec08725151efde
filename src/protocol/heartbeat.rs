//! HEART_BEAT body and the consumer/subscription descriptions it carries
//! (Java `HeartbeatData`, `ProducerData`, `ConsumerData`, `SubscriptionData`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// How a consumer gets messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConsumeType {
    /// Pull and lite-pull consumers.
    ConsumeActively,
    /// Push consumers.
    ConsumePassively,
}

/// Clustering (queues shared out) or broadcasting (every consumer gets everything).
// Public: heartbeats write its Java name (`CLUSTERING`, `BROADCASTING`) through
// `message_model_wire`, so it needs no serde impl of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MessageModel {
    /// Each consumer of the group gets every message.
    Broadcasting,
    /// The group's consumers share the queues (default).
    #[default]
    Clustering,
}

/// Where a group without a stored offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(clippy::enum_variant_names)] // Java's constant names, as heartbeats carry them
pub enum ConsumeFromWhere {
    /// From the end of the queue (default).
    #[default]
    ConsumeFromLastOffset,
    /// Deprecated Java variant, treated as last offset.
    ConsumeFromLastOffsetAndFromMinWhenBootFirst,
    /// Deprecated Java variant, treated as last offset.
    ConsumeFromMinOffset,
    /// Deprecated Java variant, treated as last offset.
    ConsumeFromMaxOffset,
    /// From the first stored message.
    ConsumeFromFirstOffset,
    /// From the consumer's timestamp.
    ConsumeFromTimestamp,
}

/// A producer group in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    /// Group name.
    pub group_name: String,
}

/// One subscription (Java `SubscriptionData`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    /// Always false (class filters are gone).
    #[serde(default)]
    pub class_filter_mode: bool,
    /// Topic.
    pub topic: String,
    /// `*`, `TagA || TagB`, or an SQL92 expression.
    pub sub_string: String,
    /// Tags of a TAG expression.
    #[serde(default)]
    pub tags_set: BTreeSet<String>,
    /// Java `String.hashCode()` of each tag.
    #[serde(default)]
    pub code_set: BTreeSet<i32>,
    /// Version (ms timestamp); pulls must not carry a newer one than the heartbeat.
    #[serde(default)]
    pub sub_version: i64,
    /// `TAG` or `SQL92`.
    #[serde(default = "tag_type")]
    pub expression_type: String,
}

fn tag_type() -> String {
    "TAG".to_string()
}

/// A consumer group in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    /// Group name.
    pub group_name: String,
    /// Push or pull.
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    #[serde(with = "message_model_wire")]
    pub message_model: MessageModel,
    /// Start position for a group without offsets.
    pub consume_from_where: ConsumeFromWhere,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    #[serde(default)]
    pub unit_mode: bool,
}

/// HEART_BEAT body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatData {
    /// Client id.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Consumer groups of this client instance.
    #[serde(rename = "consumerDataSet")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Producer groups of this client instance.
    #[serde(rename = "producerDataSet")]
    pub producer_data_set: Vec<ProducerData>,
}

/// [`MessageModel`] as Java's enum constant.
mod message_model_wire {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::MessageModel;

    pub(super) fn serialize<S: Serializer>(m: &MessageModel, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match m {
            MessageModel::Broadcasting => "BROADCASTING",
            MessageModel::Clustering => "CLUSTERING",
        })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MessageModel, D::Error> {
        match <std::borrow::Cow<'de, str>>::deserialize(d)?.as_ref() {
            "BROADCASTING" => Ok(MessageModel::Broadcasting),
            "CLUSTERING" => Ok(MessageModel::Clustering),
            other => Err(serde::de::Error::unknown_variant(
                other,
                &["BROADCASTING", "CLUSTERING"],
            )),
        }
    }
}

/// Java `String.hashCode()`: 31-polynomial over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_json_uses_java_names() {
        let hb = HeartbeatData {
            client_id: "1.2.3.4@x".into(),
            consumer_data_set: vec![ConsumerData {
                group_name: "g".into(),
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                subscription_data_set: vec![],
                unit_mode: false,
            }],
            producer_data_set: vec![ProducerData {
                group_name: "p".into(),
            }],
        };
        let s = serde_json::to_string(&hb).unwrap();
        assert!(s.contains(r#""clientID":"1.2.3.4@x""#), "{s}");
        assert!(s.contains(r#""consumeType":"CONSUME_PASSIVELY""#), "{s}");
        assert!(
            s.contains(r#""consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET""#),
            "{s}"
        );
        assert!(s.contains(r#""messageModel":"CLUSTERING""#), "{s}");
        assert!(
            s.contains(r#""producerDataSet":[{"groupName":"p"}]"#),
            "{s}"
        );
    }

    #[test]
    fn java_hash_code() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("TagA"), 2598919);
        assert_eq!(java_string_hash("hello world"), 1794106052);
        assert_eq!(java_string_hash("é"), 233);
    }
}
