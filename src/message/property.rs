//! Names of the system properties (Java `MessageConst`, 4.9.8).
//!
//! Each constant is named after its wire value; the doc line gives the Java constant.
//! [`is_reserved`] is Java's `STRING_HASH_SET`: the names `put_user_property` refuses.

/// Message keys joined by [`KEY_SEPARATOR`] (`PROPERTY_KEYS`).
pub const KEYS: &str = "KEYS";
/// The tag (`PROPERTY_TAGS`).
pub const TAGS: &str = "TAGS";
/// Whether the broker should answer only after the store succeeded (`PROPERTY_WAIT_STORE_MSG_OK`).
pub const WAIT: &str = "WAIT";
/// Delay level, 1-based (`PROPERTY_DELAY_TIME_LEVEL`).
pub const DELAY: &str = "DELAY";
/// Original topic of a retried message (`PROPERTY_RETRY_TOPIC`).
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
/// Topic a delayed or half message will be delivered to (`PROPERTY_REAL_TOPIC`).
pub const REAL_TOPIC: &str = "REAL_TOPIC";
/// Queue id a delayed or half message will be delivered to (`PROPERTY_REAL_QUEUE_ID`).
pub const REAL_QID: &str = "REAL_QID";
/// `"true"` on a transactional half message (`PROPERTY_TRANSACTION_PREPARED`).
pub const TRAN_MSG: &str = "TRAN_MSG";
/// Producer group of a transactional message (`PROPERTY_PRODUCER_GROUP`).
pub const PGROUP: &str = "PGROUP";
/// Smallest offset of the queue, added by the consumer after a pull (`PROPERTY_MIN_OFFSET`).
pub const MIN_OFFSET: &str = "MIN_OFFSET";
/// Largest offset of the queue, added by the consumer after a pull (`PROPERTY_MAX_OFFSET`).
pub const MAX_OFFSET: &str = "MAX_OFFSET";
/// `PROPERTY_BUYER_ID`.
pub const BUYER_ID: &str = "BUYER_ID";
/// Message id of the original message of a retry (`PROPERTY_ORIGIN_MESSAGE_ID`).
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// `PROPERTY_TRANSFER_FLAG`.
pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
/// `PROPERTY_CORRECTION_FLAG`.
pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
/// `PROPERTY_MQ2_FLAG`.
pub const MQ2_FLAG: &str = "MQ2_FLAG";
/// Times a message was consumed again (`PROPERTY_RECONSUME_TIME`).
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
/// Region of the message (`PROPERTY_MSG_REGION`).
pub const MSG_REGION: &str = "MSG_REGION";
/// Whether message tracing is on (`PROPERTY_TRACE_SWITCH`).
pub const TRACE_ON: &str = "TRACE_ON";
/// The client-side message id (`PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`); see [`super::uniq`].
pub const UNIQ_KEY: &str = "UNIQ_KEY";
/// Deliver at this time, ms since the Unix epoch, by a 5.x broker's timer
/// (`PROPERTY_TIMER_DELIVER_MS`; 4.x brokers ignore it).
pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
/// Deliver this many seconds after the broker stores it (`PROPERTY_TIMER_DELAY_SEC`, 5.x).
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
/// Deliver this many ms after the broker stores it (`PROPERTY_TIMER_DELAY_MS`, 5.x).
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// The receipt of a popped message, when the broker wrote it (`PROPERTY_POP_CK`, 5.x).
pub const POP_CK: &str = "POP_CK";
/// Retries before a message goes to the dead-letter queue (`PROPERTY_MAX_RECONSUME_TIMES`).
pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
/// When the consumer started consuming, in ms (`PROPERTY_CONSUME_START_TIMESTAMP`).
pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
/// `PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET` (broker internal).
#[allow(dead_code, reason = "Java's table of names, whole")]
pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// `PROPERTY_TRANSACTION_CHECK_TIMES` (broker internal).
#[allow(dead_code, reason = "Java's table of names, whole")]
pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
/// `PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS`.
#[allow(dead_code, reason = "Java's table of names, whole")]
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Namespace of the sender (`PROPERTY_INSTANCE_ID`).
pub const INSTANCE_ID: &str = "INSTANCE_ID";
/// Request-reply correlation id (`PROPERTY_CORRELATION_ID`).
pub const CORRELATION_ID: &str = "CORRELATION_ID";
/// Client id a reply goes to (`PROPERTY_MESSAGE_REPLY_TO_CLIENT`).
pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
/// Request time-to-live in ms (`PROPERTY_MESSAGE_TTL`).
pub const TTL: &str = "TTL";
/// When a reply arrived (`PROPERTY_REPLY_MESSAGE_ARRIVE_TIME`).
pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
/// When a reply was pushed (`PROPERTY_PUSH_REPLY_TIME`).
pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
/// Cluster of the storing broker, added by the broker (`PROPERTY_CLUSTER`).
pub const CLUSTER: &str = "CLUSTER";
/// `"reply"` on a reply message (`PROPERTY_MESSAGE_TYPE`).
pub const MSG_TYPE: &str = "MSG_TYPE";
/// `PROPERTY_INNER_MULTI_DISPATCH` (broker internal).
#[allow(dead_code, reason = "Java's table of names, whole")]
pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
/// `PROPERTY_INNER_MULTI_QUEUE_OFFSET` (broker internal).
pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
/// The transaction id a transactional send reports; a user property in 4.9.8.
pub const TRANSACTION_ID: &str = "__transactionId__";
/// Timed delivery time checked by send hooks only; a user property in 4.9.8.
#[allow(dead_code, reason = "Java's table of names, whole")]
pub const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";

/// Separator of the keys in [`KEYS`] (Java `MessageConst.KEY_SEPARATOR`).
pub const KEY_SEPARATOR: &str = " ";

/// Whether `name` is reserved for the system (Java `MessageConst.STRING_HASH_SET`).
///
/// The set is Java's exactly: a few system names (`TRAN_PREPARED_QUEUE_OFFSET`,
/// `TRANSACTION_CHECK_TIMES`, `CHECK_IMMUNITY_TIME_IN_SECONDS`, `INNER_MULTI_DISPATCH`)
/// are missing from it there, so a user may set them here too.
pub fn is_reserved(name: &str) -> bool {
    matches!(
        name,
        TRACE_ON
            | MSG_REGION
            | KEYS
            | TAGS
            | WAIT
            | DELAY
            | RETRY_TOPIC
            | REAL_TOPIC
            | REAL_QID
            | TRAN_MSG
            | PGROUP
            | MIN_OFFSET
            | MAX_OFFSET
            | BUYER_ID
            | ORIGIN_MESSAGE_ID
            | TRANSFER_FLAG
            | CORRECTION_FLAG
            | MQ2_FLAG
            | RECONSUME_TIME
            | UNIQ_KEY
            | MAX_RECONSUME_TIMES
            | CONSUME_START_TIME
            | INSTANCE_ID
            | CORRELATION_ID
            | REPLY_TO_CLIENT
            | TTL
            | ARRIVE_TIME
            | PUSH_REPLY_TIME
            | CLUSTER
            | MSG_TYPE
            | INNER_MULTI_QUEUE_OFFSET
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_set_is_javas_string_hash_set() {
        // 31 names in 4.9.8.
        let all = [
            KEYS,
            TAGS,
            WAIT,
            DELAY,
            RETRY_TOPIC,
            REAL_TOPIC,
            REAL_QID,
            TRAN_MSG,
            PGROUP,
            MIN_OFFSET,
            MAX_OFFSET,
            BUYER_ID,
            ORIGIN_MESSAGE_ID,
            TRANSFER_FLAG,
            CORRECTION_FLAG,
            MQ2_FLAG,
            RECONSUME_TIME,
            MSG_REGION,
            TRACE_ON,
            UNIQ_KEY,
            MAX_RECONSUME_TIMES,
            CONSUME_START_TIME,
            TRAN_PREPARED_QUEUE_OFFSET,
            TRANSACTION_CHECK_TIMES,
            CHECK_IMMUNITY_TIME_IN_SECONDS,
            INSTANCE_ID,
            CORRELATION_ID,
            REPLY_TO_CLIENT,
            TTL,
            ARRIVE_TIME,
            PUSH_REPLY_TIME,
            CLUSTER,
            MSG_TYPE,
            INNER_MULTI_DISPATCH,
            INNER_MULTI_QUEUE_OFFSET,
            TRANSACTION_ID,
            START_DELIVER_TIME,
        ];
        assert_eq!(all.iter().filter(|n| is_reserved(n)).count(), 31);
        for not in [
            TRAN_PREPARED_QUEUE_OFFSET,
            TRANSACTION_CHECK_TIMES,
            CHECK_IMMUNITY_TIME_IN_SECONDS,
            INNER_MULTI_DISPATCH,
            TRANSACTION_ID,
            START_DELIVER_TIME,
            "keys",
            "",
        ] {
            assert!(!is_reserved(not), "{not}");
        }
    }
}
