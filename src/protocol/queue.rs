//! `MessageQueue`: one queue of a topic on one broker.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One queue of a topic on one broker (Java `MessageQueue`).
///
/// Ordered by topic, broker name, then queue id, as Java's `compareTo`. Strings compare by
/// bytes, which equals Java's UTF-16 comparison for every name RocketMQ accepts (ASCII).
/// It has no serde impls (they would make Java's field names public API): the bodies that
/// carry queues (`LOCK_BATCH_MQ`, offset tables, `offsets.json` keys) are written and read
/// in Java's form by the crate itself.
// Crate-internal: `QueueRef` and `QueueWire` below are that JSON form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageQueue {
    // Shared text: a queue is cloned into every consume task, offset update and pull
    // request, so a clone is two reference counts rather than two allocations.
    pub(crate) topic: Arc<str>,
    pub(crate) broker_name: Arc<str>,
    pub(crate) queue_id: i32,
}

impl MessageQueue {
    /// A queue of `topic` on `broker_name`.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            topic: Arc::from(topic.into()),
            broker_name: Arc::from(broker_name.into()),
            queue_id,
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The broker group holding the queue.
    pub fn broker_name(&self) -> &str {
        &self.broker_name
    }

    /// The queue's index on that broker.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }
}

/// A queue as Java writes it: `{"brokerName":..,"queueId":..,"topic":..}`.
pub(crate) struct QueueRef<'a>(pub(crate) &'a MessageQueue);

/// Field order follows fastjson's sorted output, not the declaration (which sets `Ord`).
impl Serialize for QueueRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("MessageQueue", 3)?;
        st.serialize_field("brokerName", &self.0.broker_name)?;
        st.serialize_field("queueId", &self.0.queue_id)?;
        st.serialize_field("topic", &self.0.topic)?;
        st.end()
    }
}

/// A queue read from Java's JSON.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueueWire {
    topic: Arc<str>,
    broker_name: Arc<str>,
    queue_id: i32,
}

impl From<QueueWire> for MessageQueue {
    fn from(w: QueueWire) -> Self {
        MessageQueue {
            topic: w.topic,
            broker_name: w.broker_name,
            queue_id: w.queue_id,
        }
    }
}

/// Java's `toString`, which consistent-hash allocation hashes: keep it byte-exact.
impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_javas_to_string() {
        let q = MessageQueue::new("TopicTest", "broker-a", 3);
        assert_eq!(
            q.to_string(),
            "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"
        );
    }

    #[test]
    fn order_is_topic_then_broker_then_queue_id() {
        let mut v = [
            MessageQueue::new("b", "a", 0),
            MessageQueue::new("a", "b", 1),
            MessageQueue::new("a", "b", 0),
            MessageQueue::new("a", "B", 9),
            MessageQueue::new("a", "a", -1),
        ];
        v.sort();
        let got: Vec<String> = v
            .iter()
            .map(|q| format!("{}/{}/{}", q.topic, q.broker_name, q.queue_id))
            .collect();
        assert_eq!(got, ["a/B/9", "a/a/-1", "a/b/0", "a/b/1", "b/a/0"]);
    }

    #[test]
    fn json_uses_javas_field_names() {
        let q = MessageQueue::new("T", "broker-a", 2);
        let s = serde_json::to_string(&QueueRef(&q)).unwrap();
        // fastjson sorts properties: this is what Java writes and reads.
        assert_eq!(s, r#"{"brokerName":"broker-a","queueId":2,"topic":"T"}"#);
        let back: QueueWire = serde_json::from_str(&s).unwrap();
        assert_eq!(MessageQueue::from(back), q);
    }
}
