//! Message lookups by key (Java `MQAdminImpl.queryMessage`): what to ask every broker of a
//! topic, and which of the answers are kept. A broker's index is a hash of `topic#key`, so
//! it may return messages whose key only collides; Java filters them on the client and so
//! does [`keep_matching`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::validators::check_topic;
use crate::error::{Error, Result};
use crate::message::uniq::nearly_time_from_id;
use crate::message::MessageExt;
use crate::util::{millis_since_epoch, time_from_millis};

/// What [`Admin::query_messages`](crate::Admin::query_messages) looks for: messages of a
/// topic by key (`Message::with_keys`) or by unique key (the message id a producer gave
/// it, Java `UNIQ_KEY`), stored within a time range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageQuery {
    pub(crate) topic: String,
    pub(crate) key: String,
    pub(crate) unique: bool,
    pub(crate) max: u32,
    pub(crate) begin: SystemTime,
    pub(crate) end: Option<SystemTime>,
}

impl MessageQuery {
    /// Messages of `topic` with the key `key`; at most 64 from each broker (Java's
    /// `queryMsgByKey` default), stored at any time.
    pub fn by_key(topic: impl Into<String>, key: impl Into<String>) -> Self {
        MessageQuery {
            topic: topic.into(),
            key: key.into(),
            unique: false,
            max: 64,
            begin: UNIX_EPOCH,
            end: None,
        }
    }

    /// The message of `topic` whose unique key (message id) is `id`. As Java
    /// `queryMessageByUniqKey`, it looks from a second before the time the id was made
    /// (an id carries it) on, and the brokers ignore the maximum.
    pub fn by_unique_key(topic: impl Into<String>, id: impl Into<String>) -> Self {
        let id = id.into();
        let begin = nearly_time_from_id(&id)
            .map_or(UNIX_EPOCH, |ms| time_from_millis(ms.saturating_sub(1000)));
        MessageQuery {
            topic: topic.into(),
            key: id,
            unique: true,
            max: 32,
            begin,
            end: None,
        }
    }

    /// At most `max` messages from each broker (1 or more).
    pub fn max(mut self, max: u32) -> Self {
        self.max = max;
        self
    }

    /// Only messages stored at `begin` or later.
    pub fn begin(mut self, begin: SystemTime) -> Self {
        self.begin = begin;
        self
    }

    /// Only messages stored at `end` or earlier (default: no end).
    pub fn end(mut self, end: SystemTime) -> Self {
        self.end = Some(end);
        self
    }

    /// Only messages stored within `window` after `begin`.
    pub fn within(self, begin: SystemTime, window: Duration) -> Self {
        let end = begin.checked_add(window).unwrap_or(begin);
        self.begin(begin).end(end)
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The key or unique key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the key is a unique key.
    pub fn is_unique_key(&self) -> bool {
        self.unique
    }

    /// The checks [`Admin::query_messages`](crate::Admin::query_messages) makes before
    /// it sends anything: an `InvalidArgument` error for a bad topic name, a blank key,
    /// a maximum of 0 or a range that ends before it begins.
    pub fn check(&self) -> Result<()> {
        check_topic(&self.topic)?;
        if self.key.trim().is_empty() {
            return Err(Error::invalid_argument("the query key is blank"));
        }
        if self.max == 0 {
            return Err(Error::invalid_argument(
                "the query maximum must be at least 1",
            ));
        }
        if self.end.is_some_and(|end| end < self.begin) {
            return Err(Error::invalid_argument(
                "the query range ends before it begins",
            ));
        }
        Ok(())
    }

    /// `(maxNum, beginTimestamp, endTimestamp)` as the header carries them.
    pub(crate) fn wire_range(&self) -> (i32, i64, i64) {
        (
            i32::try_from(self.max).unwrap_or(i32::MAX),
            millis_since_epoch(self.begin),
            self.end.map_or(i64::MAX, millis_since_epoch),
        )
    }
}

/// What a message query found (Java `QueryResult`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct QueryResult {
    /// When the newest of the brokers' indexes was last updated (a message stored after
    /// it may not be found yet).
    pub index_last_update: Option<SystemTime>,
    /// The messages, in the order the brokers answered.
    pub messages: Vec<MessageExt>,
}

/// Java's client-side filter: for a key, messages of the topic that carry the key; for a
/// unique key, the one message with that id stored first (a retry stores it again).
pub(crate) fn keep_matching(query: &MessageQuery, found: Vec<MessageExt>) -> Vec<MessageExt> {
    if query.unique {
        let first = found
            .into_iter()
            .filter(|m| m.msg_id() == query.key)
            .min_by_key(MessageExt::store_timestamp);
        return first.into_iter().collect();
    }
    found
        .into_iter()
        .filter(|m| m.topic() == query.topic && m.keys().any(|k| k == query.key))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{property, uniq::create_uniq_id, Message};

    fn stored(topic: &str, keys: &[&str], uniq: &str, store_ms: i64) -> MessageExt {
        let mut message = Message::new(topic, "b").with_keys(keys.iter().copied());
        if !uniq.is_empty() {
            message.put_property(property::UNIQ_KEY, uniq);
        }
        MessageExt {
            message,
            store_timestamp: store_ms,
            ..MessageExt::default()
        }
    }

    #[test]
    fn a_key_query_keeps_messages_of_the_topic_that_carry_the_key() {
        let q = MessageQuery::by_key("T", "k1");
        let found = vec![
            stored("T", &["k1", "k2"], "", 1),
            stored("T", &["k10"], "", 2), // a hash collision
            stored("U", &["k1"], "", 3),  // another topic's index entry
            stored("T", &["k2", "k1"], "", 4),
        ];
        let kept = keep_matching(&q, found);
        let times: Vec<SystemTime> = kept.iter().map(MessageExt::store_timestamp).collect();
        assert_eq!(times, [time_from_millis(1), time_from_millis(4)]);
    }

    #[test]
    fn a_unique_key_query_keeps_the_first_stored_copy_only() {
        let q = MessageQuery::by_unique_key("T", "ID1");
        let found = vec![
            stored("T", &[], "ID1", 9),
            stored("T", &[], "ID2", 1),
            stored("T", &[], "ID1", 5),
        ];
        let kept = keep_matching(&q, found);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].store_timestamp(), time_from_millis(5));
    }

    #[test]
    fn queries_no_broker_should_get_are_invalid_arguments() {
        let now = SystemTime::now();
        for bad in [
            MessageQuery::by_key("T", " "),
            MessageQuery::by_key("bad topic", "k"),
            MessageQuery::by_key("T", "k").max(0),
            MessageQuery::by_key("T", "k")
                .begin(now)
                .end(now - Duration::from_secs(1)),
        ] {
            let e = bad.check().unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad:?}");
        }
        let q =
            MessageQuery::by_key("T", "k").within(time_from_millis(1000), Duration::from_secs(1));
        assert!(q.check().is_ok());
        assert_eq!(q.wire_range(), (64, 1000, 2000));
        assert_eq!(
            MessageQuery::by_key("T", "k").wire_range(),
            (64, 0, i64::MAX)
        );
    }

    #[test]
    fn a_unique_key_query_starts_a_second_before_the_id_was_made() {
        let id = create_uniq_id();
        let made = nearly_time_from_id(&id).unwrap();
        let q = MessageQuery::by_unique_key("T", &id);
        assert_eq!(q.wire_range().1, made - 1000);
        // Not an id this client can read: from the beginning.
        assert_eq!(MessageQuery::by_unique_key("T", "xyz").wire_range().1, 0);
    }
}
