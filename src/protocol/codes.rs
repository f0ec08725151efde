//! Wire codes as open enums: a code the broker adds later is a value, not a decode failure.

use std::fmt;

/// Defines `pub struct $name(pub $int)` with named constants and a `Debug` that prints
/// the constant's name, or the bare number for values we do not know.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident($int:ty) { $($(#[$cmeta:meta])* $konst:ident = $val:expr,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub $int);

        // Java's table, whole: `name` and `Debug` read every value, not every constant is sent.
        #[allow(dead_code, reason = "a table of Java's codes")]
        impl $name {
            $($(#[$cmeta])*
            #[doc = concat!("`", stringify!($konst), "` (", stringify!($val), ").")]
            pub const $konst: $name = $name($val);)*

            /// The constant's name, if this value has one.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($konst)),)*
                    _ => None,
                }
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}", self.0),
                }
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self { $name(v) }
        }
    };
}

open_enum! {
    /// A request code (Java `RequestCode`).
    RequestCode(i32) {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        GET_ALL_TOPIC_CONFIG = 21,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        GET_CONSUMER_STATUS_FROM_CLIENT = 221,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223,
        GET_TOPICS_BY_CLUSTER = 224,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        GET_CONSUMER_RUNNING_INFO = 307,
        QUERY_CORRECTION_OFFSET = 308,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        SEND_BATCH_MESSAGE = 320,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        /// 5.x: the broker assigns a POP group's queues.
        QUERY_ASSIGNMENT = 400,
        /// 5.x: PULL or POP for a group and topic.
        SET_MESSAGE_REQUEST_MODE = 401,
        /// 5.x.
        POP_MESSAGE = 200050,
        /// 5.x.
        ACK_MESSAGE = 200051,
        /// 5.x.
        PEEK_MESSAGE = 200052,
        /// 5.x.
        CHANGE_MESSAGE_INVISIBLETIME = 200053,
        /// 5.x.
        NOTIFICATION = 200054,
        /// 5.x.
        BATCH_ACK_MESSAGE = 200151,
    }
}

open_enum! {
    /// A response code (Java `ResponseCode` / `RemotingSysResponseCode`).
    ResponseCode(i32) {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        /// 5.x: too many pops wait at the broker.
        POLLING_FULL = 209,
        /// 5.x: a pop's long poll ended with nothing.
        POLLING_TIMEOUT = 210,
        FLOW_CONTROL = 215,
        /// 5.x: the broker is shutting down; send elsewhere.
        GO_AWAY = 1500,
    }
}

open_enum! {
    /// The sender's language (Java `LanguageCode`), one byte in the binary header.
    LanguageCode(u8) {
        JAVA = 0,
        CPP = 1,
        DOTNET = 2,
        PYTHON = 3,
        DELPHI = 4,
        ERLANG = 5,
        RUBY = 6,
        OTHER = 7,
        HTTP = 8,
        GO = 9,
        PHP = 10,
        OMS = 11,
        RUST = 12,
        NODE_JS = 13,
    }
}

impl LanguageCode {
    /// Parses the enum name the JSON header carries; unknown names map to `OTHER`.
    pub fn from_name(name: &str) -> LanguageCode {
        (0u8..=13)
            .map(LanguageCode)
            .find(|c| c.name() == Some(name))
            .unwrap_or(LanguageCode::OTHER)
    }
}

/// Header encoding of one frame (Java `SerializeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// fastjson-compatible JSON header (Java's default).
    #[default]
    Json,
    /// The compact `ROCKETMQ` binary header (what the Java benchmark tools use).
    RocketMq,
}

impl SerializeType {
    /// The byte stored in the top 8 bits of the header mark.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The type for a header-mark byte, if known.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// Java's `SerializeType` name, as the JSON header spells it.
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }

    /// Reads `ROCKETMQ_SERIALIZE_TYPE` (`JSON` or `ROCKETMQ`) as the Java client does; JSON otherwise.
    pub fn from_env() -> Self {
        match std::env::var("ROCKETMQ_SERIALIZE_TYPE").as_deref() {
            Ok("ROCKETMQ") => SerializeType::RocketMq,
            _ => SerializeType::Json,
        }
    }
}

/// What a topic allows on a broker (Java `PermName`): a set of permission bits, on the
/// wire the integer `perm` (6 = [`READ`](Perm::READ) | [`WRITE`](Perm::WRITE)).
///
/// Bits this client does not name are kept, so a value read from a broker is written back
/// unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Perm(i32);

impl Perm {
    /// Java `PERM_PRIORITY` (8).
    pub const PRIORITY: Perm = Perm(8);
    /// Consumers may read (Java `PERM_READ`, 4).
    pub const READ: Perm = Perm(4);
    /// Producers may write (Java `PERM_WRITE`, 2).
    pub const WRITE: Perm = Perm(2);
    /// Inherited (Java `PERM_INHERIT`, 1).
    pub const INHERIT: Perm = Perm(1);
    /// Read and write, what a new topic gets (Java `TopicConfig`'s default, 6).
    pub const READ_WRITE: Perm = Perm(6);

    /// No permission (0).
    pub const fn empty() -> Perm {
        Perm(0)
    }

    /// The permissions of the wire's integer, every bit kept.
    pub const fn from_bits(bits: i32) -> Perm {
        Perm(bits)
    }

    /// The wire's integer.
    pub const fn bits(self) -> i32 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Perm) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets' bits.
    pub const fn union(self, other: Perm) -> Perm {
        Perm(self.0 | other.0)
    }

    /// Java `PermName.isReadable`.
    pub const fn is_readable(self) -> bool {
        self.contains(Perm::READ)
    }

    /// Java `PermName.isWriteable`.
    pub const fn is_writeable(self) -> bool {
        self.contains(Perm::WRITE)
    }

    /// Java `PermName.isInherited`.
    pub const fn is_inherited(self) -> bool {
        self.contains(Perm::INHERIT)
    }
}

impl std::ops::BitOr for Perm {
    type Output = Perm;
    fn bitor(self, other: Perm) -> Perm {
        self.union(other)
    }
}

impl std::ops::BitOrAssign for Perm {
    fn bitor_assign(&mut self, other: Perm) {
        *self = self.union(other);
    }
}

/// `Perm(READ | WRITE)`; bits without a name print as a number.
impl fmt::Debug for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named = [
            (Perm::PRIORITY, "PRIORITY"),
            (Perm::READ, "READ"),
            (Perm::WRITE, "WRITE"),
            (Perm::INHERIT, "INHERIT"),
        ];
        let mut rest = self.0;
        let mut parts = Vec::new();
        for (p, name) in named {
            if self.contains(p) {
                parts.push(name.to_string());
                rest &= !p.0;
            }
        }
        if rest != 0 || parts.is_empty() {
            parts.push(format!("{rest:#x}"));
        }
        write!(f, "Perm({})", parts.join(" | "))
    }
}

/// Java `PermName.perm2String`: `RW-`, `R--`, `-WX`, ...
impl fmt::Display for Perm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flag = |on: bool, c: char| if on { c } else { '-' };
        write!(
            f,
            "{}{}{}",
            flag(self.is_readable(), 'R'),
            flag(self.is_writeable(), 'W'),
            flag(self.is_inherited(), 'X')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_codes_are_values_and_print_as_numbers() {
        assert_eq!(format!("{:?}", RequestCode(105)), "GET_ROUTEINFO_BY_TOPIC");
        assert_eq!(format!("{:?}", RequestCode(200050)), "POP_MESSAGE");
        assert_eq!(format!("{:?}", RequestCode(299_999)), "299999");
        assert_eq!(format!("{:?}", ResponseCode(17)), "TOPIC_NOT_EXIST");
        assert_eq!(ResponseCode(9999).name(), None);
    }

    #[test]
    fn perm_keeps_javas_values_and_every_bit() {
        assert_eq!(Perm::WRITE.bits(), 2);
        assert_eq!(Perm::READ.bits(), 4);
        assert_eq!(Perm::INHERIT.bits(), 1);
        assert_eq!(Perm::PRIORITY.bits(), 8);
        assert_eq!(Perm::READ | Perm::WRITE, Perm::READ_WRITE);
        assert_eq!(Perm::READ_WRITE.bits(), 6);
        for bits in [0, 1, 2, 4, 6, 7, 8, 14, 0x30, -1] {
            assert_eq!(Perm::from_bits(bits).bits(), bits);
        }
        let p = Perm::from_bits(6);
        assert!(p.is_readable() && p.is_writeable() && !p.is_inherited());
        assert!(Perm::from_bits(4).is_readable() && !Perm::from_bits(4).is_writeable());
        assert!(Perm::from_bits(3).is_writeable() && Perm::from_bits(3).is_inherited());
        let mut q = Perm::empty();
        q |= Perm::WRITE;
        assert_eq!(q, Perm::WRITE);
        assert_eq!(format!("{:?}", Perm::READ_WRITE), "Perm(READ | WRITE)");
        assert_eq!(format!("{:?}", Perm::from_bits(0x14)), "Perm(READ | 0x10)");
        assert_eq!(format!("{:?}", Perm::empty()), "Perm(0x0)");
        assert_eq!(Perm::READ_WRITE.to_string(), "RW-");
        assert_eq!(Perm::from_bits(5).to_string(), "R-X");
    }

    #[test]
    fn language_names_round_trip() {
        assert_eq!(LanguageCode::from_name("RUST"), LanguageCode::RUST);
        assert_eq!(LanguageCode::from_name("JAVA"), LanguageCode::JAVA);
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::OTHER);
        assert_eq!(LanguageCode::RUST.0, 12);
    }
}
