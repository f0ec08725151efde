//! Messages and their wire encodings.
//!
//! This module owns what a message *is* and how it looks in bytes: [`Message`] (what a
//! producer sends), [`MessageExt`] (what the broker stored and a consumer receives),
//! [`MessageQueue`], the property names ([`property`]), the `sysFlag` bits ([`sys_flag`]),
//! the codec of the stored record, batch and property formats, zlib body compression,
//! and the two message ids: the client's `UNIQ_KEY` ([`uniq`]) and the broker's
//! offsetMsgId.
//!
//! Invariant: nothing here does I/O, and no input bytes make a decoder panic or allocate
//! more than the input (plus a capped, caller-chosen amount for decompressed bodies).

mod codec;
mod properties;
pub mod property;
pub mod uniq;

#[cfg(test)]
use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;

pub(crate) use codec::{batch_len_with, decode_messages_shared, encode_batch_into};
pub use codec::{
    create_offset_msg_id, decode_messages, decode_messages_lenient, decode_offset_msg_id,
    properties_to_string, CompressionType, DecodeOptions, SkippedRecord, DEFAULT_MAX_BODY_LEN,
};
// What only the internals' users (the `rmq` tool, benches, fuzz targets) and the unit tests
// call.
#[cfg(any(test, feature = "unstable-internals"))]
pub use codec::{
    compress, decode_batch, decompress, encode_batch, encode_message_ext, string_to_properties,
    Decoded, DEFAULT_COMPRESS_LEVEL, DEFAULT_MAX_TOTAL_BODY_LEN, MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
};
use properties::Properties;
// The queue is a protocol value (admin and route bodies carry it); re-exported here, where
// users of the internals have always found it.
pub use crate::protocol::MessageQueue;

/// Bits of a stored message's `sysFlag` (Java `MessageSysFlag`).
#[allow(dead_code, reason = "Java's table of bits, whole")]
pub mod sys_flag {
    /// The stored body is compressed.
    pub const COMPRESSED: i32 = 0x1;
    /// `MULTI_TAGS_FLAG`.
    pub const MULTI_TAGS: i32 = 0x2;
    /// Mask of the transaction type (`getTransactionValue`).
    pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
    /// Not a transactional message.
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    /// A transactional half message.
    pub const TRANSACTION_PREPARED: i32 = 0x4;
    /// A committed transactional message.
    pub const TRANSACTION_COMMIT: i32 = 0x8;
    /// A rolled-back transactional message.
    pub const TRANSACTION_ROLLBACK: i32 = 0xC;
    /// The born host is IPv6.
    pub const BORNHOST_V6: i32 = 0x10;
    /// The store host is IPv6.
    pub const STOREHOST_V6: i32 = 0x20;
    /// `NEED_UNWRAP_FLAG` (broker internal).
    pub const NEED_UNWRAP: i32 = 0x40;
    /// `INNER_BATCH_FLAG`.
    pub const INNER_BATCH: i32 = 0x80;
    /// Mask of the compression type (`COMPRESSION_TYPE_COMPARATOR`); 0 means zlib too.
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
    /// LZ4 frame compression (not supported by this crate).
    pub const COMPRESSION_LZ4: i32 = 0x100;
    /// Zstandard compression (not supported by this crate).
    pub const COMPRESSION_ZSTD: i32 = 0x200;
    /// zlib compression (RFC 1950).
    pub const COMPRESSION_ZLIB: i32 = 0x300;
}

/// How far in the past a timer message's delivery time may be: a little is a clock's
/// skew or a late send (the broker delivers it at once), more is a mistake (seconds given
/// for milliseconds) and the send refuses it.
pub const TIMER_PAST_TOLERANCE: Duration = Duration::from_secs(600);

/// A message to send (Java `Message`).
///
/// Properties are a small sorted map; their order is not significant on the wire.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    topic: Topic,
    flag: i32,
    properties: Properties,
    body: Body,
    transaction_id: Option<String>,
}

/// A body: owned, or a window into a pull response that the messages decoded from it
/// share, which saves a copy and an allocation per pulled message.
#[derive(Clone)]
enum Body {
    Owned(Vec<u8>),
    Shared {
        buf: Arc<Vec<u8>>,
        range: Range<usize>,
    },
}

impl Body {
    fn as_slice(&self) -> &[u8] {
        match self {
            Body::Owned(v) => v,
            // The decoder only makes ranges inside `buf`.
            Body::Shared { buf, range } => buf.get(range.clone()).unwrap_or_default(),
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Body::Owned(v) => v,
            Body::Shared { .. } => self.as_slice().to_vec(),
        }
    }
}

/// A topic: owned, or shared by the messages decoded from one pull response (they all
/// have the same one), which saves an allocation per pulled message.
#[derive(Clone)]
enum Topic {
    Owned(String),
    Shared(Arc<str>),
}

impl Topic {
    fn as_str(&self) -> &str {
        match self {
            Topic::Owned(s) => s,
            Topic::Shared(s) => s,
        }
    }
}

impl PartialEq for Topic {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Topic {}

impl fmt::Debug for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Body {}

impl Message {
    /// A message for `topic` with `body`; like Java's constructors it sets `WAIT=true`.
    pub fn new(topic: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        let mut m = Message::empty(topic.into(), body.into());
        m.set_wait_store_msg_ok(true);
        m
    }

    /// A message without any property (what a decoder starts from).
    pub(crate) fn empty(topic: String, body: Vec<u8>) -> Self {
        Message {
            topic: Topic::Owned(topic),
            flag: 0,
            properties: Properties::default(),
            body: Body::Owned(body),
            transaction_id: None,
        }
    }

    /// A decoded message with the topic its pull response's messages share.
    pub(crate) fn decoded(topic: Arc<str>, body: Vec<u8>) -> Self {
        let mut m = Message::empty(String::new(), body);
        m.topic = Topic::Shared(topic);
        m
    }

    /// A decoded message whose body is `range` of a shared pull response.
    pub(crate) fn with_shared_body(
        topic: Arc<str>,
        buf: Arc<Vec<u8>>,
        range: Range<usize>,
    ) -> Self {
        let mut m = Message::decoded(topic, Vec::new());
        m.body = Body::Shared { buf, range };
        m
    }

    /// Sets the tag (builder style).
    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.set_tags(tags);
        self
    }

    /// Sets the keys (builder style).
    pub fn with_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.set_keys(keys);
        self
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        self.topic.as_str()
    }

    /// Sets the topic.
    pub fn set_topic(&mut self, topic: impl Into<String>) {
        self.topic = Topic::Owned(topic.into());
    }

    /// The user flag, stored by the broker untouched.
    pub fn flag(&self) -> i32 {
        self.flag
    }

    /// Sets the user flag.
    pub fn set_flag(&mut self, flag: i32) {
        self.flag = flag;
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        self.body.as_slice()
    }

    /// Replaces the body.
    pub fn set_body(&mut self, body: impl Into<Vec<u8>>) {
        self.body = Body::Owned(body.into());
    }

    /// Takes the body out of the message (a copy for a pulled message, whose body is
    /// shared with the others of its pull).
    pub fn into_body(self) -> Vec<u8> {
        self.body.into_vec()
    }

    /// Takes the body out, leaving the message's empty: what [`into_body`](Self::into_body)
    /// gives, without consuming the message.
    pub(crate) fn take_body(&mut self) -> Vec<u8> {
        std::mem::replace(&mut self.body, Body::Owned(Vec::new())).into_vec()
    }

    /// The tag, if set.
    pub fn tags(&self) -> Option<&str> {
        self.property(property::TAGS)
    }

    /// Sets the tag; an empty tag removes it (Java's constructors skip empty tags too).
    pub fn set_tags(&mut self, tags: impl Into<String>) {
        let tags = tags.into();
        if tags.is_empty() {
            self.remove_property(property::TAGS);
        } else {
            self.put_property(property::TAGS, tags);
        }
    }

    /// The keys: the `KEYS` property split on spaces.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.property(property::KEYS)
            .into_iter()
            .flat_map(|k| k.split(property::KEY_SEPARATOR))
            .filter(|k| !k.is_empty())
    }

    /// Sets the keys, joined by a space; no keys removes the property.
    pub fn set_keys<I, S>(&mut self, keys: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut joined = String::new();
        for k in keys {
            if !joined.is_empty() {
                joined.push_str(property::KEY_SEPARATOR);
            }
            joined.push_str(k.as_ref());
        }
        if joined.is_empty() {
            self.remove_property(property::KEYS);
        } else {
            self.put_property(property::KEYS, joined);
        }
    }

    /// The delay level, if one is set (`None` also for level 0 or a value that is not a
    /// number, which Java would reject).
    #[doc(alias = "getDelayTimeLevel")]
    pub fn delay_time_level(&self) -> Option<u32> {
        self.property(property::DELAY)
            .and_then(|v| v.parse().ok())
            .filter(|&l| l > 0)
    }

    /// Delivers the message after a delay: level 1 is the first entry of the broker's
    /// `messageDelayLevel` list (by default 1 s, 5 s, 10 s, 30 s, 1 min, 2 min, ... 2 h for
    /// level 18). Level 0 removes the delay.
    #[doc(alias = "setDelayTimeLevel")]
    pub fn set_delay_time_level(&mut self, level: u32) {
        if level == 0 {
            self.remove_property(property::DELAY);
        } else {
            self.put_property(property::DELAY, level.to_string());
        }
    }

    /// Delivers the message at `at` rather than at once: a timer message of a 5.x broker
    /// (Java 5 `setDeliverTimeMs`), to the second (the broker's `timerPrecisionMs`, 1 s,
    /// may bring it up to that much early). Replaces a delivery delay set before. A 4.x
    /// broker ignores it and delivers at once. A send refuses a time more than 10 minutes
    /// in the past (a unit mistake, not a clock's skew) and a
    /// timer with a delay level; the broker refuses one beyond its `timerMaxDelaySec`
    /// (3 days by default) with a `Response` error.
    #[doc(alias = "setDeliverTimeMs")]
    pub fn set_deliver_time(&mut self, at: SystemTime) {
        let ms = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis().min(i64::MAX as u128) as i64);
        self.remove_property(property::TIMER_DELAY_SEC);
        self.remove_property(property::TIMER_DELAY_MS);
        self.put_property(property::TIMER_DELIVER_MS, ms.to_string());
    }

    /// [`set_deliver_time`](Self::set_deliver_time) in builder style.
    pub fn with_deliver_time(mut self, at: SystemTime) -> Self {
        self.set_deliver_time(at);
        self
    }

    /// Delivers the message `delay` after the broker stores it: a timer message of a 5.x
    /// broker (Java 5 `setDelayTimeSec`, or `setDelayTimeMs` for a delay that is not whole
    /// seconds). Replaces a delivery time set before. As with
    /// [`set_deliver_time`](Self::set_deliver_time), a 4.x broker delivers at once.
    #[doc(alias = "setDelayTimeSec")]
    #[doc(alias = "setDelayTimeMs")]
    pub fn set_delivery_delay(&mut self, delay: Duration) {
        self.remove_property(property::TIMER_DELIVER_MS);
        self.remove_property(property::TIMER_DELAY_SEC);
        self.remove_property(property::TIMER_DELAY_MS);
        if delay.subsec_millis() == 0 {
            self.put_property(property::TIMER_DELAY_SEC, delay.as_secs().to_string());
        } else {
            let ms = delay.as_millis().min(i64::MAX as u128);
            self.put_property(property::TIMER_DELAY_MS, ms.to_string());
        }
    }

    /// [`set_delivery_delay`](Self::set_delivery_delay) in builder style.
    pub fn with_delivery_delay(mut self, delay: Duration) -> Self {
        self.set_delivery_delay(delay);
        self
    }

    /// Removes a delivery time or delay: the message is delivered at once.
    pub fn clear_timer(&mut self) {
        self.remove_property(property::TIMER_DELIVER_MS);
        self.remove_property(property::TIMER_DELAY_SEC);
        self.remove_property(property::TIMER_DELAY_MS);
    }

    /// When a timer message is to be delivered, if one was set with
    /// [`set_deliver_time`](Self::set_deliver_time) (`None` for a delay, or a value that is
    /// not a number).
    pub fn deliver_time(&self) -> Option<SystemTime> {
        let ms: u64 = self.property(property::TIMER_DELIVER_MS)?.parse().ok()?;
        Some(UNIX_EPOCH + Duration::from_millis(ms))
    }

    /// The delivery delay of a timer message, if one was set with
    /// [`set_delivery_delay`](Self::set_delivery_delay).
    pub fn delivery_delay(&self) -> Option<Duration> {
        if let Some(s) = self.property(property::TIMER_DELAY_SEC) {
            return s.parse().ok().map(Duration::from_secs);
        }
        let ms: u64 = self.property(property::TIMER_DELAY_MS)?.parse().ok()?;
        Some(Duration::from_millis(ms))
    }

    /// Checks a timer message before it is sent: a delivery time or delay that is not a
    /// number, a time more than `TIMER_PAST_TOLERANCE` in the past, or a timer together
    /// with a delay level (the broker would silently drop the timer) is an
    /// `InvalidArgument` error.
    pub(crate) fn check_timer(&self, now: impl FnOnce() -> SystemTime) -> crate::Result<()> {
        const TIMER: [&str; 3] = [
            property::TIMER_DELIVER_MS,
            property::TIMER_DELAY_SEC,
            property::TIMER_DELAY_MS,
        ];
        let bad = |what: String| Err(crate::Error::invalid_argument(what));
        // The send path: no allocation, and the clock is read only for a delivery time.
        let mut first = None;
        for (k, v) in TIMER
            .iter()
            .filter_map(|&k| self.property(k).map(|v| (k, v)))
        {
            if v.parse::<u64>().is_err() {
                return bad(format!("{k} is {v:?}, not a number of its unit"));
            }
            first.get_or_insert(k);
        }
        let Some(first) = first else {
            return Ok(());
        };
        if let Some(level) = self.delay_time_level() {
            return bad(format!(
                "a timer message ({first}) cannot also have delay level {level}: the broker \
                 would deliver it by the level and drop the timer"
            ));
        }
        if let Some(at) = self.deliver_time() {
            let now = now();
            if at + TIMER_PAST_TOLERANCE < now {
                let ago = now.duration_since(at).unwrap_or_default();
                return bad(format!(
                    "the delivery time is {ago:?} in the past (more than {TIMER_PAST_TOLERANCE:?}: \
                     milliseconds since the epoch expected)"
                ));
            }
        }
        Ok(())
    }

    /// Whether the broker answers only after the store succeeded; true when absent.
    pub fn wait_store_msg_ok(&self) -> bool {
        // Java `Boolean.parseBoolean`: only "true", in any case, is true.
        self.property(property::WAIT)
            .is_none_or(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Sets `WAIT`.
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.put_property(property::WAIT, if wait { "true" } else { "false" });
    }

    /// The buyer id, if set.
    pub fn buyer_id(&self) -> Option<&str> {
        self.property(property::BUYER_ID)
    }

    /// Sets the buyer id.
    pub fn set_buyer_id(&mut self, buyer_id: impl Into<String>) {
        self.put_property(property::BUYER_ID, buyer_id.into());
    }

    /// Sets `INSTANCE_ID` (the namespace).
    pub fn set_instance_id(&mut self, instance_id: impl Into<String>) {
        self.put_property(property::INSTANCE_ID, instance_id.into());
    }

    /// The transaction id (not sent; set by a transactional send and on received half messages).
    pub fn transaction_id(&self) -> Option<&str> {
        self.transaction_id.as_deref()
    }

    /// Sets the transaction id.
    pub fn set_transaction_id(&mut self, id: Option<String>) {
        self.transaction_id = id;
    }

    /// Sets a user property.
    ///
    /// Fails with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a
    /// name the system reserves (`UNIQ_KEY`, `TAGS`, `KEYS`, ...) and for a blank name or value,
    /// as Java's `putUserProperty` does.
    pub fn put_user_property(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), Error> {
        let name = name.into();
        let value = value.into();
        if property::is_reserved(&name) {
            return Err(Error::invalid_argument(format!(
                "the property {name} is used by the system"
            )));
        }
        if name.trim().is_empty() || value.trim().is_empty() {
            return Err(Error::invalid_argument(
                "the name or value of a property must not be blank",
            ));
        }
        self.put_property(name, value);
        Ok(())
    }

    /// The value of a property, system or user.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name)
    }

    /// All properties, sorted by name. The iterator borrows and clones cheaply (the
    /// producer measures the property string with a clone before writing it).
    pub fn properties(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone {
        self.properties.iter()
    }

    /// Sets any property, reserved names included (for the producer and the decoders).
    pub(crate) fn put_property(&mut self, name: impl AsRef<str>, value: impl AsRef<str>) {
        self.properties.insert(name.as_ref(), value.as_ref());
    }

    /// Removes a property, returning its value.
    pub(crate) fn remove_property(&mut self, name: &str) -> Option<String> {
        self.properties.remove(name)
    }

    /// Replaces all properties.
    #[cfg(test)]
    pub(crate) fn set_properties(&mut self, properties: BTreeMap<String, String>) {
        self.properties = properties.into();
    }

    /// Replaces all properties with those of a property string (decoders).
    pub(crate) fn set_properties_wire(&mut self, wire: &str) {
        self.properties = Properties::parse(wire);
    }

    #[cfg(test)]
    pub(crate) fn properties_map(&self) -> BTreeMap<String, String> {
        self.properties()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

/// Prints the body as its length: bodies can be megabytes.
impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("topic", &self.topic)
            .field("flag", &self.flag)
            .field("properties", &self.properties)
            .field("body_len", &self.body().len())
            .field("transaction_id", &self.transaction_id)
            .finish()
    }
}

/// A message as the broker stored it (Java `MessageExt` with `MessageClientExt`'s ids).
///
/// Every field of the stored record is here, plus the broker name the consumer pulled it
/// from. The message itself (topic, properties, body) is [`MessageExt::message`]; the
/// common parts of it have shortcuts here. `Debug` prints the body's length, not the body.
#[derive(Debug, Clone)]
pub struct MessageExt {
    /// Topic, flag, properties and (decompressed) body.
    pub(crate) message: Message,
    /// The broker group the message was pulled from; not part of the record (empty if unknown).
    pub(crate) broker_name: Arc<str>,
    /// Queue id.
    pub(crate) queue_id: i32,
    /// Length of the whole stored record (`TOTALSIZE`).
    pub(crate) store_size: i32,
    /// Logical offset in the consume queue.
    pub(crate) queue_offset: i64,
    /// The [`sys_flag`] bits.
    pub(crate) sys_flag: i32,
    /// When the producer created the message, in ms since the epoch.
    pub(crate) born_timestamp: i64,
    /// The producer's address.
    pub(crate) born_host: SocketAddr,
    /// When the broker stored the message, in ms since the epoch.
    pub(crate) store_timestamp: i64,
    /// The storing broker's address.
    pub(crate) store_host: SocketAddr,
    /// The broker's message id, from store host and commit log offset ([`create_offset_msg_id`]),
    /// made when first asked for: most consumers never read it, and it is a string per message.
    pub(crate) offset_msg_id: OnceLock<String>,
    /// Physical offset in the commit log.
    pub(crate) commit_log_offset: i64,
    /// `crc32(stored body) & 0x7FFFFFFF`.
    pub(crate) body_crc: i32,
    /// How often the message was consumed again.
    pub(crate) reconsume_times: i32,
    /// Commit log offset of the half message, for transactional messages.
    pub(crate) prepared_transaction_offset: i64,
}

impl Default for MessageExt {
    fn default() -> Self {
        let unspecified = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        MessageExt {
            message: Message::empty(String::new(), Vec::new()),
            broker_name: Arc::from(""),
            queue_id: 0,
            store_size: 0,
            queue_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: unspecified,
            store_timestamp: 0,
            store_host: unspecified,
            offset_msg_id: OnceLock::from(String::new()),
            commit_log_offset: 0,
            body_crc: 0,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
        }
    }
}

/// Field by field, the offsetMsgId by value whether or not it was made yet.
impl PartialEq for MessageExt {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
            && self.broker_name == other.broker_name
            && self.queue_id == other.queue_id
            && self.store_size == other.store_size
            && self.queue_offset == other.queue_offset
            && self.sys_flag == other.sys_flag
            && self.born_timestamp == other.born_timestamp
            && self.born_host == other.born_host
            && self.store_timestamp == other.store_timestamp
            && self.store_host == other.store_host
            && self.commit_log_offset == other.commit_log_offset
            && self.body_crc == other.body_crc
            && self.reconsume_times == other.reconsume_times
            && self.prepared_transaction_offset == other.prepared_transaction_offset
            && self.offset_msg_id() == other.offset_msg_id()
    }
}

impl Eq for MessageExt {}

impl MessageExt {
    /// A received message rebuilt from values copied out of one, for a binding that keeps
    /// its own copy (the Python package): what
    /// [`PushConsumer::send_message_back`](crate::PushConsumer::send_message_back) needs.
    /// `queue` is where it was consumed, `properties` all of them, the system's included
    /// (as [`properties`](Self::properties) gives them), `store_host` and
    /// `commit_log_offset` where the broker keeps it. The times, the born host and the
    /// flag are left zero.
    pub fn rebuilt<'a>(
        queue: &MessageQueue,
        queue_offset: i64,
        body: Vec<u8>,
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
        store_host: SocketAddr,
        commit_log_offset: i64,
        reconsume_times: u32,
    ) -> Self {
        let mut message = Message::empty(queue.topic().to_string(), body);
        for (k, v) in properties {
            message.put_property(k, v);
        }
        MessageExt {
            message,
            broker_name: Arc::from(queue.broker_name()),
            queue_id: queue.queue_id(),
            queue_offset,
            store_host,
            offset_msg_id: OnceLock::new(),
            commit_log_offset,
            reconsume_times: i32::try_from(reconsume_times).unwrap_or(i32::MAX),
            ..MessageExt::default()
        }
    }

    /// The message id a user sees: `UNIQ_KEY` if present, else the offsetMsgId
    /// (Java `MessageClientExt.getMsgId`).
    #[doc(alias = "getMsgId")]
    pub fn msg_id(&self) -> &str {
        self.message
            .property(property::UNIQ_KEY)
            .unwrap_or_else(|| self.offset_msg_id())
    }

    /// The message: topic, flag, properties, body.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The message, taken out.
    pub fn into_message(self) -> Message {
        self.message
    }

    /// The topic (without namespace for consumers that set one).
    pub fn topic(&self) -> &str {
        self.message.topic()
    }

    /// The body (decompressed).
    pub fn body(&self) -> &[u8] {
        self.message.body()
    }

    /// The tag, if set.
    pub fn tags(&self) -> Option<&str> {
        self.message.tags()
    }

    /// The keys.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.message.keys()
    }

    /// The value of a property.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.message.property(name)
    }

    /// Every property, system ones included, sorted by name.
    pub fn properties(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.message.properties()
    }

    /// The user flag.
    pub fn flag(&self) -> i32 {
        self.message.flag()
    }

    /// The broker group the message was pulled from (empty if unknown).
    pub fn broker_name(&self) -> &str {
        &self.broker_name
    }

    /// The queue's index on that broker.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// The queue the message was pulled from.
    pub fn message_queue(&self) -> MessageQueue {
        MessageQueue::new(self.topic(), &*self.broker_name, self.queue_id)
    }

    /// Logical offset in the consume queue.
    pub fn queue_offset(&self) -> i64 {
        self.queue_offset
    }

    /// Physical offset in the broker's commit log.
    pub fn commit_log_offset(&self) -> i64 {
        self.commit_log_offset
    }

    /// The broker's message id: store host and commit log offset (Java `offsetMsgId`).
    pub fn offset_msg_id(&self) -> &str {
        self.offset_msg_id
            .get_or_init(|| create_offset_msg_id(self.store_host, self.commit_log_offset))
    }

    /// Length of the whole stored record in bytes (Java `storeSize`).
    pub fn store_size(&self) -> u32 {
        u32::try_from(self.store_size).unwrap_or(0)
    }

    /// When the producer created the message.
    pub fn born_timestamp(&self) -> SystemTime {
        crate::util::time_from_millis(self.born_timestamp)
    }

    /// The producer's address.
    pub fn born_host(&self) -> SocketAddr {
        self.born_host
    }

    /// When the broker stored the message.
    pub fn store_timestamp(&self) -> SystemTime {
        crate::util::time_from_millis(self.store_timestamp)
    }

    /// The storing broker's address.
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }

    /// `crc32(stored body) & 0x7FFFFFFF`, as the broker computed it.
    pub fn body_crc(&self) -> u32 {
        self.body_crc as u32
    }

    /// How many times the message was delivered again after failed consumption.
    pub fn reconsume_times(&self) -> u32 {
        u32::try_from(self.reconsume_times).unwrap_or(0)
    }

    /// The stored record's system flag bits (compression, transaction type, ...).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn sys_flag(&self) -> i32 {
        self.sys_flag
    }

    /// Setters for benches and codec tests that build stored records by hand.
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn set_stored(
        &mut self,
        message: Message,
        broker_name: &str,
        queue_id: i32,
        queue_offset: i64,
        commit_log_offset: i64,
    ) {
        self.message = message;
        self.broker_name = Arc::from(broker_name);
        self.queue_id = queue_id;
        self.queue_offset = queue_offset;
        self.commit_log_offset = commit_log_offset;
    }

    /// Born and store host and time (ms) for benches and codec tests.
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn set_hosts(&mut self, born: (SocketAddr, i64), store: (SocketAddr, i64)) {
        (self.born_host, self.born_timestamp) = born;
        (self.store_host, self.store_timestamp) = store;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_rebuilt_message_ext_keeps_what_a_send_back_needs() {
        let host: SocketAddr = "10.1.2.3:10911".parse().unwrap();
        let q = MessageQueue::new("T", "broker-b", 3);
        let m = MessageExt::rebuilt(
            &q,
            7,
            b"hi".to_vec(),
            [(property::UNIQ_KEY, "ABC"), (property::TAGS, "t")],
            host,
            4096,
            2,
        );
        assert_eq!(m.msg_id(), "ABC");
        assert_eq!(m.tags(), Some("t"));
        assert_eq!(m.message_queue(), q);
        assert_eq!((m.queue_offset(), m.commit_log_offset()), (7, 4096));
        assert_eq!(m.store_host(), host);
        assert_eq!(m.reconsume_times(), 2);
        assert_eq!(m.body(), b"hi");
        assert_eq!(m.offset_msg_id(), create_offset_msg_id(host, 4096));
        assert_eq!(
            m.property(property::WAIT),
            None,
            "only the properties given"
        );
    }

    #[test]
    fn new_message_waits_for_the_store_like_java() {
        let m = Message::new("T", b"x".to_vec());
        assert_eq!(m.property(property::WAIT), Some("true"));
        assert!(m.wait_store_msg_ok());
        let mut m = m;
        m.set_wait_store_msg_ok(false);
        assert!(!m.wait_store_msg_ok());
        m.remove_property(property::WAIT);
        assert!(m.wait_store_msg_ok(), "absent means true");
    }

    #[test]
    fn timer_setters_write_javas_properties_and_replace_each_other() {
        let at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let mut m = Message::new("T", Vec::new()).with_deliver_time(at);
        assert_eq!(
            m.property(property::TIMER_DELIVER_MS),
            Some("1700000000123")
        );
        assert_eq!(m.deliver_time(), Some(at));
        m.set_delivery_delay(Duration::from_secs(5));
        assert_eq!(m.property(property::TIMER_DELIVER_MS), None);
        assert_eq!(m.property(property::TIMER_DELAY_SEC), Some("5"));
        m.set_delivery_delay(Duration::from_millis(1500));
        assert_eq!(m.property(property::TIMER_DELAY_SEC), None);
        assert_eq!(m.property(property::TIMER_DELAY_MS), Some("1500"));
        assert_eq!(m.delivery_delay(), Some(Duration::from_millis(1500)));
        m.clear_timer();
        assert_eq!((m.deliver_time(), m.delivery_delay()), (None, None));
    }

    #[test]
    fn a_timer_that_cannot_be_meant_is_refused_before_the_send() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ok = |m: &Message| m.check_timer(|| now);
        let refused = |m: &Message, says: &str| {
            let e = m.check_timer(|| now).expect_err(says);
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains(says), "{e}");
        };
        let m = Message::new("T", Vec::new());
        assert!(ok(&m).is_ok(), "no timer");
        assert!(ok(&m.clone().with_deliver_time(now + Duration::from_secs(5))).is_ok());
        // A little in the past is a late send: the broker delivers it at once.
        assert!(ok(&m.clone().with_deliver_time(now - Duration::from_secs(30))).is_ok());
        // Seconds given where milliseconds are meant: 1970.
        let mut seconds = m.clone();
        seconds.put_property(property::TIMER_DELIVER_MS, "1700000005");
        refused(&seconds, "in the past");
        let mut both = m.clone().with_delivery_delay(Duration::from_secs(5));
        both.set_delay_time_level(3);
        refused(&both, "delay level 3");
        let mut garbage = m.clone();
        garbage.put_property(property::TIMER_DELAY_SEC, "soon");
        refused(&garbage, "not a number");
    }

    #[test]
    fn keys_are_joined_and_split_on_spaces() {
        let m = Message::new("T", Vec::new()).with_keys(["a", "b c"]);
        assert_eq!(m.property(property::KEYS), Some("a b c"));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        let m = m.with_keys(Vec::<String>::new());
        assert_eq!(m.property(property::KEYS), None);
        assert_eq!(m.keys().count(), 0);
    }

    #[test]
    fn tags_and_delay_level() {
        let mut m = Message::new("T", Vec::new()).with_tags("TagA");
        assert_eq!(m.tags(), Some("TagA"));
        m.set_tags("");
        assert_eq!(m.tags(), None);
        assert_eq!(m.delay_time_level(), None);
        m.set_delay_time_level(3);
        assert_eq!(m.property(property::DELAY), Some("3"));
        assert_eq!(m.delay_time_level(), Some(3));
        m.set_delay_time_level(0);
        assert_eq!(m.property(property::DELAY), None);
    }

    #[test]
    fn user_properties_reject_reserved_and_blank_names() {
        let mut m = Message::new("T", Vec::new());
        for (k, v) in [
            ("UNIQ_KEY", "x"),
            ("TAGS", "x"),
            (" ", "x"),
            ("k", " \t"),
            ("", "v"),
        ] {
            let e = m.put_user_property(k, v).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{k:?}={v:?}");
        }
        m.put_user_property("color", "red").unwrap();
        m.put_user_property(property::TRANSACTION_ID, "t").unwrap();
        assert_eq!(m.property("color"), Some("red"));
        let names: Vec<_> = m.properties().map(|(k, _)| k).collect();
        assert_eq!(names, ["WAIT", "__transactionId__", "color"]);
    }

    #[test]
    fn msg_id_prefers_uniq_key() {
        let mut e = MessageExt {
            offset_msg_id: OnceLock::from("OFFSET".to_string()),
            ..MessageExt::default()
        };
        assert_eq!(e.msg_id(), "OFFSET");
        e.message.put_property(property::UNIQ_KEY, "UNIQ");
        assert_eq!(e.msg_id(), "UNIQ");
    }

    #[test]
    fn debug_prints_the_body_length_only() {
        let m = Message::new("T", vec![7u8; 1000]);
        let s = format!("{m:?}");
        assert!(s.contains("body_len: 1000"), "{s}");
        assert!(!s.contains("7, 7"), "{s}");
    }
}
