//! Typed custom headers: each header struct converts to and from string `extFields`.
//!
//! Java builds `extFields` by reflection: field name → `value.toString()`, null fields
//! omitted. Here each header is declared with `command_header!`, naming the wire key of
//! every field. Plain field types are required on decode (Java's `@CFNotNull`);
//! `Option<T>` fields are optional.

use super::command::write_binary_entry;
use super::ext::{ExtFields, ExtText};
use super::DecodeError;

/// A header that travels as `extFields`.
pub trait CommandHeader: Sized {
    /// Writes every present field into `ext`.
    fn write_to(&self, ext: &mut ExtFields);
    /// Reads the header, failing when a required field is missing or malformed.
    fn read_from(ext: &ExtFields) -> Result<Self, DecodeError>;
}

/// A header that can be written as `extFields`: every [`CommandHeader`], and the borrowed
/// twins `command_header!` declares for hot requests (written without copying strings).
pub trait WriteHeader {
    /// Writes every present field into `ext`.
    fn write_header(&self, ext: &mut ExtFields);

    /// Appends every present field to `buf` as binary `extFields` entries, in the order
    /// [`write_header`](WriteHeader::write_header) inserts them. The borrowed twins write
    /// straight from their fields; others go through an [`ExtFields`].
    fn write_binary_ext(&self, buf: &mut Vec<u8>) {
        let mut ext = ExtFields::new();
        self.write_header(&mut ext);
        for (k, v) in ext.iter_bytes() {
            write_binary_entry(buf, k, v);
        }
    }

    /// The most bytes [`write_binary_ext`](WriteHeader::write_binary_ext) writes, when
    /// known cheaply (0 otherwise): room to reserve.
    fn binary_ext_len_hint(&self) -> usize {
        0
    }
}

// The borrowed read side (`ReadHeaderRef`, `ExtValueRef`, the owned twin of a `/` header)
// serves `RemotingCommandRef`, which only the internals' users decode with (benches, fuzz
// targets, examples): the library reads responses owned and writes requests borrowed.

/// A header with borrowed fields read from a borrowed frame
/// ([`RemotingCommandRef`](super::RemotingCommandRef)): the twins `command_header!`
/// declares, whose strings are slices of the frame.
#[cfg(any(test, feature = "unstable-internals"))]
pub trait ReadHeaderRef<'a>: Sized {
    /// Reads the header from the fields; when a key repeats, the last value counts.
    fn read_fields<I: Iterator<Item = (&'a str, &'a str)>>(fields: I) -> Result<Self, DecodeError>;
}

/// A borrowed header field type, parsed from the field's text without allocating.
#[cfg(any(test, feature = "unstable-internals"))]
pub trait ExtValueRef<'a>: Sized {
    /// Parses the field `key`; `raw` is `None` when it is absent.
    fn from_ext_ref(raw: Option<&'a str>, key: &str) -> Result<Self, DecodeError>;
}

#[cfg(any(test, feature = "unstable-internals"))]
impl<'a> ExtValueRef<'a> for &'a str {
    fn from_ext_ref(raw: Option<&'a str>, key: &str) -> Result<Self, DecodeError> {
        required(raw, key)
    }
}

#[cfg(any(test, feature = "unstable-internals"))]
impl<'a> ExtValueRef<'a> for Option<&'a str> {
    fn from_ext_ref(raw: Option<&'a str>, _: &str) -> Result<Self, DecodeError> {
        Ok(raw)
    }
}

#[cfg(any(test, feature = "unstable-internals"))]
macro_rules! ext_value_ref {
    ($($t:ty),*) => {$(
        impl<'a> ExtValueRef<'a> for $t {
            #[inline]
            fn from_ext_ref(raw: Option<&'a str>, key: &str) -> Result<Self, DecodeError> {
                ExtValue::from_ext(raw, key)
            }
        }
    )*};
}
#[cfg(any(test, feature = "unstable-internals"))]
ext_value_ref!(i32, i64, bool, Option<i32>, Option<i64>, Option<bool>);

impl<T: CommandHeader> WriteHeader for T {
    fn write_header(&self, ext: &mut ExtFields) {
        self.write_to(ext);
    }
}

/// A value that can be written as one `extFields` entry.
pub trait ToExt {
    /// The text form, or `None` to omit the field.
    fn to_ext(&self) -> Option<ExtText<'_>>;
}

/// A value that can be one `extFields` entry, both ways.
pub trait ExtValue: ToExt + Sized {
    /// Parses the field `key`; `raw` is `None` when it is absent.
    fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError>;
}

fn required<'a>(raw: Option<&'a str>, key: &str) -> Result<&'a str, DecodeError> {
    raw.ok_or_else(|| DecodeError::new(format!("required header field `{key}` is missing")))
}

impl ToExt for String {
    fn to_ext(&self) -> Option<ExtText<'_>> {
        Some(ExtText::Str(self))
    }
}

impl ToExt for &str {
    fn to_ext(&self) -> Option<ExtText<'_>> {
        Some(ExtText::Str(self))
    }
}

impl ExtValue for String {
    fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError> {
        required(raw, key).map(str::to_string)
    }
}

impl ToExt for crate::util::ShortText {
    fn to_ext(&self) -> Option<ExtText<'_>> {
        Some(ExtText::Str(self))
    }
}

impl ExtValue for crate::util::ShortText {
    fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError> {
        required(raw, key).map(crate::util::ShortText::new)
    }
}

/// An optional sign and 1 to 18 ASCII digits (which cannot overflow an i64); `None` for
/// anything else.
#[inline]
fn plain_int(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some(if negative { -n } else { n })
}

macro_rules! ext_number {
    ($($t:ty),*) => {$(
        impl ToExt for $t {
            fn to_ext(&self) -> Option<ExtText<'_>> {
                Some(ExtText::Int(i64::from(*self)))
            }
        }

        impl ExtValue for $t {
            fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError> {
                let s = required(raw, key)?;
                match plain_int(s.as_bytes()).and_then(|n| <$t>::try_from(n).ok()) {
                    Some(n) => Ok(n),
                    // Spaces, overflow and garbage: the library parser decides.
                    None => s.trim().parse().map_err(|_| {
                        DecodeError::new(format!("header field `{key}` is not a number: {s:?}"))
                    }),
                }
            }
        }
    )*};
}
ext_number!(i32, i64);

impl ToExt for bool {
    fn to_ext(&self) -> Option<ExtText<'_>> {
        Some(ExtText::Bool(*self))
    }
}

impl ExtValue for bool {
    /// `Boolean.parseBoolean`: "true" in any case is true, anything else false.
    fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError> {
        Ok(required(raw, key)?.eq_ignore_ascii_case("true"))
    }
}

impl<T: ToExt> ToExt for Option<T> {
    fn to_ext(&self) -> Option<ExtText<'_>> {
        self.as_ref().and_then(T::to_ext)
    }
}

impl<T: ExtValue> ExtValue for Option<T> {
    fn from_ext(raw: Option<&str>, key: &str) -> Result<Self, DecodeError> {
        match raw {
            None => Ok(None),
            Some(_) => T::from_ext(raw, key).map(Some),
        }
    }
}

/// Declares a header struct and its [`CommandHeader`] impl.
///
/// The second form, `pub struct Name / NameRef<'a> { pub field: Owned | Borrowed => "key" }`,
/// also declares `NameRef<'a>`, a [`WriteHeader`] with borrowed fields for requests sent
/// often enough that copying their strings into the header first shows.
///
/// ```
/// use rocketmq_blocking::command_header;
/// use rocketmq_blocking::protocol::{CommandHeader, ExtFields};
///
/// command_header! {
///     /// A request header.
///     pub struct ExampleHeader {
///         pub topic: String => "topic",
///         pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
///     }
/// }
///
/// let mut ext = ExtFields::new();
/// ExampleHeader { topic: "T".into(), accept_standard_json_only: None }.write_to(&mut ext);
/// assert_eq!(ext.get("topic"), Some("T"));
/// assert_eq!(ExampleHeader::read_from(&ext).unwrap().topic, "T");
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! command_header {
    ($(#[$meta:meta])* pub struct $name:ident / $ref_name:ident<$lt:lifetime> {
        $($(#[$fmeta:meta])* pub $field:ident : $ty:ty | $ref_ty:ty => $key:literal),* $(,)?
    }) => {
        #[cfg(any(test, feature = "unstable-internals"))]
        $crate::command_header! {
            $(#[$meta])*
            pub struct $name {
                $($(#[$fmeta])* pub $field: $ty => $key,)*
            }
        }

        #[doc = concat!("[`", stringify!($name), "`] with borrowed fields, to write, and to \
            read from a borrowed frame (`RemotingCommandRef`).")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $ref_name<$lt> {
            $(#[doc = concat!("Wire key `", $key, "`.")]
            pub $field: $ref_ty,)*
        }

        impl<$lt> $crate::protocol::WriteHeader for $ref_name<$lt> {
            fn write_header(&self, ext: &mut $crate::protocol::ExtFields) {
                ext.write_fields(&[$(($key, $crate::protocol::ToExt::to_ext(&self.$field))),*]);
            }
            #[inline]
            fn write_binary_ext(&self, buf: &mut Vec<u8>) {
                $(if let Some(v) = $crate::protocol::ToExt::to_ext(&self.$field) {
                    $crate::protocol::write_binary_text(buf, $key, v);
                })*
            }
            fn binary_ext_len_hint(&self) -> usize {
                0 $(+ 6 + $key.len()
                    + $crate::protocol::ToExt::to_ext(&self.$field)
                        .map_or(0, |v| v.max_len()))*
            }
        }

        #[cfg(any(test, feature = "unstable-internals"))]
        impl<$lt> $crate::protocol::header::ReadHeaderRef<$lt> for $ref_name<$lt> {
            fn read_fields<I: Iterator<Item = (&$lt str, &$lt str)>>(
                fields: I,
            ) -> Result<Self, $crate::protocol::DecodeError> {
                // One pass; a repeated key overwrites, as Java's HashMap does.
                $(let mut $field: Option<&$lt str> = None;)*
                for (k, v) in fields {
                    match k {
                        $($key => $field = Some(v),)*
                        _ => {}
                    }
                }
                Ok($ref_name {
                    $($field: $crate::protocol::header::ExtValueRef::from_ext_ref(
                        $field, $key,
                    )?,)*
                })
            }
        }
    };
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$fmeta:meta])* pub $field:ident : $ty:ty => $key:literal),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $($(#[$fmeta])*
            #[doc = concat!("Wire key `", $key, "`.")]
            pub $field: $ty,)*
        }

        impl $crate::protocol::CommandHeader for $name {
            fn write_to(&self, ext: &mut $crate::protocol::ExtFields) {
                ext.write_fields(&[$(($key, $crate::protocol::ToExt::to_ext(&self.$field))),*]);
            }
            fn read_from(
                ext: &$crate::protocol::ExtFields,
            ) -> Result<Self, $crate::protocol::DecodeError> {
                // One pass over the fields (keys are unique in a set) instead of a
                // lookup per struct field.
                $(let mut $field: Option<&str> = None;)*
                for (k, v) in ext.iter() {
                    match k {
                        $($key => $field = Some(v),)*
                        _ => {
                            let _ = v;
                        }
                    }
                }
                Ok($name {
                    $($field: $crate::protocol::ExtValue::from_ext($field, $key)?,)*
                })
            }
        }
    };
}

/// A header with no fields.
impl CommandHeader for () {
    fn write_to(&self, _: &mut ExtFields) {}
    fn read_from(_: &ExtFields) -> Result<Self, DecodeError> {
        Ok(())
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105) request.
    pub struct GetRouteInfoRequestHeader {
        pub topic: String => "topic",
        /// Asks name servers ≥ 4.9.4 for quoted map keys whatever our version.
        pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17) request, sent to each master broker.
    pub struct CreateTopicRequestHeader {
        pub topic: String => "topic",
        pub default_topic: String => "defaultTopic",
        pub read_queue_nums: i32 => "readQueueNums",
        pub write_queue_nums: i32 => "writeQueueNums",
        pub perm: i32 => "perm",
        pub topic_filter_type: String => "topicFilterType",
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        pub order: bool => "order",
    }
}

command_header! {
    /// SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) request: Java
    /// `SendMessageRequestHeaderV2`, whose one-letter keys save bytes on every send.
    pub struct SendMessageRequestHeaderV2 / SendMessageRequestHeaderV2Ref<'a> {
        /// producerGroup
        pub producer_group: String | &'a str => "a",
        /// topic
        pub topic: String | &'a str => "b",
        /// defaultTopic (TBW102)
        pub default_topic: String | &'a str => "c",
        /// defaultTopicQueueNums
        pub default_topic_queue_nums: i32 | i32 => "d",
        /// queueId
        pub queue_id: i32 | i32 => "e",
        /// sysFlag
        pub sys_flag: i32 | i32 => "f",
        /// bornTimestamp (ms)
        pub born_timestamp: i64 | i64 => "g",
        /// flag
        pub flag: i32 | i32 => "h",
        /// properties string
        pub properties: Option<String> | Option<&'a str> => "i",
        /// reconsumeTimes
        pub reconsume_times: Option<i32> | Option<i32> => "j",
        /// unitMode (always sent)
        pub unit_mode: bool | bool => "k",
        /// maxReconsumeTimes
        pub max_reconsume_times: Option<i32> | Option<i32> => "l",
        /// batch (always sent)
        pub batch: bool | bool => "m",
        /// brokerName (4.9.5+)
        pub broker_name: Option<String> | Option<&'a str> => "n",
    }
}

command_header! {
    /// SEND_MESSAGE / SEND_MESSAGE_V2 response.
    #[cfg_attr(
        not(feature = "unstable-internals"),
        allow(dead_code, reason = "the send path reads these keys in its own pass, with the region")
    )]
    pub struct SendMessageResponseHeader {
        /// offsetMsgId
        pub msg_id: String => "msgId",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub transaction_id: Option<String> => "transactionId",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33) request.
    pub struct ViewMessageRequestHeader {
        /// Commit log offset.
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// PULL_MESSAGE (11) request.
    pub struct PullMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub sys_flag: i32 => "sysFlag",
        pub commit_offset: i64 => "commitOffset",
        pub suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        pub subscription: Option<String> => "subscription",
        pub sub_version: i64 => "subVersion",
        pub expression_type: Option<String> => "expressionType",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// PULL_MESSAGE response.
    pub struct PullMessageResponseHeader {
        pub suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        pub next_begin_offset: i64 => "nextBeginOffset",
        pub min_offset: i64 => "minOffset",
        pub max_offset: i64 => "maxOffset",
    }
}

command_header! {
    /// GET_MAX_OFFSET (30) / GET_MIN_OFFSET (31) request.
    pub struct QueueOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// Responses that carry one `offset`.
    pub struct OffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// GET_EARLIEST_MSG_STORETIME (32) response: the store time of a queue's first message,
    /// ms since the epoch (-1 for an empty queue).
    pub struct EarliestMsgStoreTimeResponseHeader {
        pub timestamp: i64 => "timestamp",
    }
}

command_header! {
    /// QUERY_CONSUMER_OFFSET (14) request.
    pub struct QueryConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15) request.
    pub struct UpdateConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub commit_offset: i64 => "commitOffset",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38) request.
    pub struct GetConsumerListByGroupRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29) request.
    pub struct SearchOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub timestamp: i64 => "timestamp",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK (36) request.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Commit log offset of the message.
        pub offset: i64 => "offset",
        pub group: String => "group",
        /// 0: the broker picks 3 + reconsumeTimes; < 0: straight to the DLQ.
        pub delay_level: i32 => "delayLevel",
        pub origin_msg_id: Option<String> => "originMsgId",
        pub origin_topic: Option<String> => "originTopic",
        pub unit_mode: bool => "unitMode",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// UNREGISTER_CLIENT (35) request.
    pub struct UnregisterClientRequestHeader {
        pub client_id: String => "clientID",
        pub producer_group: Option<String> => "producerGroup",
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

command_header! {
    /// QUERY_MESSAGE (12) request: a key (or a unique key, with the `_UNIQUE_KEY_QUERY`
    /// ext field) looked up in a broker's index within a store-time range.
    pub struct QueryMessageRequestHeader {
        pub topic: String => "topic",
        pub key: String => "key",
        pub max_num: i32 => "maxNum",
        /// ms since the epoch.
        pub begin_timestamp: i64 => "beginTimestamp",
        /// ms since the epoch.
        pub end_timestamp: i64 => "endTimestamp",
    }
}

command_header! {
    /// QUERY_MESSAGE response.
    pub struct QueryMessageResponseHeader {
        pub index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        pub index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215) request.
    pub struct DeleteTopicRequestHeader {
        pub topic: String => "topic",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216) request; 5.x name servers may scope it to a cluster.
    pub struct DeleteTopicFromNamesrvRequestHeader {
        pub topic: String => "topic",
        pub cluster_name: Option<String> => "clusterName",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208) request; without a topic, every topic of the group.
    pub struct GetConsumeStatsRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: Option<String> => "topic",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222) request (Java `ResetOffsetRequestHeader`):
    /// `timestamp` -1 means each queue's max offset.
    pub struct ResetOffsetRequestHeader {
        pub topic: String => "topic",
        pub group: String => "group",
        pub timestamp: i64 => "timestamp",
        /// Java's field is `isForce`, and reflection keeps the name.
        pub is_force: bool => "isForce",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    command_header! {
        pub struct Sample {
            pub name: String => "name",
            pub count: i32 => "count",
            pub offset: i64 => "offset",
            pub flag: bool => "flag",
            pub maybe: Option<i64> => "maybe",
        }
    }

    command_header! {
        pub struct NoFields {}
    }

    #[test]
    fn a_header_without_fields_writes_nothing() {
        let mut ext = ExtFields::new();
        NoFields {}.write_to(&mut ext);
        assert!(ext.is_empty());
        ext.insert("other", "x");
        assert_eq!(NoFields::read_from(&ext), Ok(NoFields {}));
    }

    #[test]
    fn the_borrowed_send_header_writes_what_the_owned_one_does() {
        let owned = SendMessageRequestHeaderV2 {
            producer_group: "g".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_718_000_000_123,
            flag: -1,
            properties: Some("WAIT\u{1}true".into()),
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: None,
            batch: true,
            broker_name: Some("broker-a".into()),
        };
        let borrowed = SendMessageRequestHeaderV2Ref {
            producer_group: &owned.producer_group,
            topic: &owned.topic,
            default_topic: &owned.default_topic,
            default_topic_queue_nums: owned.default_topic_queue_nums,
            queue_id: owned.queue_id,
            sys_flag: owned.sys_flag,
            born_timestamp: owned.born_timestamp,
            flag: owned.flag,
            properties: owned.properties.as_deref(),
            reconsume_times: owned.reconsume_times,
            unit_mode: owned.unit_mode,
            max_reconsume_times: owned.max_reconsume_times,
            batch: owned.batch,
            broker_name: owned.broker_name.as_deref(),
        };
        let (mut a, mut b) = (ExtFields::new(), ExtFields::new());
        owned.write_to(&mut a);
        borrowed.write_header(&mut b);
        assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
        assert_eq!(a.len(), 13, "maxReconsumeTimes is absent");
        assert_eq!(SendMessageRequestHeaderV2::read_from(&b), Ok(owned));
    }

    #[test]
    fn header_round_trips_through_ext_fields() {
        let h = Sample {
            name: "n".into(),
            count: -3,
            offset: 1 << 40,
            flag: true,
            maybe: None,
        };
        let mut ext = ExtFields::new();
        h.write_to(&mut ext);
        assert_eq!(ext.get("offset"), Some("1099511627776"));
        assert_eq!(ext.get("flag"), Some("true"));
        assert_eq!(ext.get("maybe"), None, "None is omitted");
        assert_eq!(Sample::read_from(&ext).unwrap(), h);
    }

    #[test]
    fn missing_required_field_is_an_error_naming_it() {
        let mut ext = ExtFields::new();
        ext.insert("name", "n");
        ext.insert("count", "1");
        ext.insert("flag", "false");
        let err = Sample::read_from(&ext).unwrap_err();
        assert!(err.to_string().contains("`offset`"), "{err}");
    }

    #[test]
    fn numbers_parse_like_the_library_parser() {
        for s in [
            "0",
            "-0",
            "+7",
            "42",
            " 42 ",
            "-2147483648",
            "2147483647",
            "2147483648",
            "-2147483649",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "123456789012345678",
            "1234567890123456789",
            "",
            "-",
            "+",
            "1a",
            "--1",
            "1.0",
            "\u{3000}5",
        ] {
            let raw = Some(s);
            let want32 = s.trim().parse::<i32>().ok();
            let want64 = s.trim().parse::<i64>().ok();
            assert_eq!(i32::from_ext(raw, "k").ok(), want32, "{s:?}");
            assert_eq!(i64::from_ext(raw, "k").ok(), want64, "{s:?}");
        }
    }

    #[test]
    fn malformed_numbers_and_java_booleans() {
        let mut ext = ExtFields::new();
        ext.insert("name", "n");
        ext.insert("count", "x");
        ext.insert("offset", "1");
        ext.insert("flag", "TRUE");
        assert!(Sample::read_from(&ext).is_err());
        ext.insert("count", "2");
        let h = Sample::read_from(&ext).unwrap();
        assert!(h.flag, "parseBoolean is case-insensitive");
        ext.insert("flag", "yes");
        assert!(!Sample::read_from(&ext).unwrap().flag);
    }
}
