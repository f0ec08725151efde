//! Name and message checks done before anything is sent (Java `Validators`,
//! `TopicValidator`). Failures are `InvalidArgument` errors that say what was wrong.

use crate::error::{Error, Result};

/// Longest topic name (Java `TOPIC_MAX_LENGTH`).
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Longest group name (Java `CHARACTER_MAX_LENGTH`).
pub const GROUP_MAX_LENGTH: usize = 255;
/// The topic brokers use as the template for auto-created topics.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Producer group reserved by Java.
pub const DEFAULT_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";
/// Consumer group reserved by Java.
pub const DEFAULT_CONSUMER_GROUP: &str = "DEFAULT_CONSUMER";
/// The group of every client instance's internal producer.
pub const CLIENT_INNER_PRODUCER_GROUP: &str = "CLIENT_INNER_PRODUCER";
/// Prefix of a group's retry topic (Java `MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a group's dead-letter topic (Java `MixAll.DLQ_GROUP_TOPIC_PREFIX`).
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";

/// The retry topic of `group` (Java `MixAll.getRetryTopic`).
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// Whether `topic` is a retry topic.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// Topics no client may send to (Java `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
pub const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];

/// Characters allowed in topics and groups: `^[%|a-zA-Z0-9_-]+$`.
fn is_legal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')
}

/// Checks a topic name.
pub fn check_topic(topic: &str) -> Result<()> {
    if topic.trim().is_empty() {
        return Err(Error::invalid_argument("the topic is blank"));
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return Err(Error::invalid_argument(format!(
            "the topic is longer than {TOPIC_MAX_LENGTH} characters: {topic:?}"
        )));
    }
    if let Some(c) = topic.chars().find(|c| !is_legal_char(*c)) {
        return Err(Error::invalid_argument(format!(
            "the topic {topic:?} contains the illegal character {c:?}; allowed: ^[%|a-zA-Z0-9_-]+$"
        )));
    }
    Ok(())
}

/// Checks a topic a message is sent to: a legal name that is not a system-internal topic.
pub fn check_send_topic(topic: &str) -> Result<()> {
    check_topic(topic)?;
    if NOT_ALLOWED_SEND_TOPICS.contains(&topic) {
        return Err(Error::invalid_argument(format!(
            "sending to the system topic {topic:?} is not allowed"
        )));
    }
    Ok(())
}

/// Checks a group name.
pub fn check_group(group: &str) -> Result<()> {
    if group.trim().is_empty() {
        return Err(Error::invalid_argument("the group is blank"));
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Err(Error::invalid_argument(format!(
            "the group is longer than {GROUP_MAX_LENGTH} characters"
        )));
    }
    if let Some(c) = group.chars().find(|c| !is_legal_char(*c)) {
        return Err(Error::invalid_argument(format!(
            "the group {group:?} contains the illegal character {c:?}; allowed: ^[%|a-zA-Z0-9_-]+$"
        )));
    }
    Ok(())
}

/// Checks a message body against the size limit (on the uncompressed body, like Java).
pub fn check_body(len: usize, max_message_size: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::invalid_argument("the message body is empty"));
    }
    if len > max_message_size {
        return Err(Error::invalid_argument(format!(
            "the message body is {len} bytes, more than the maximum {max_message_size}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_rules() {
        for ok in ["T", "Topic_1-a", "%RETRY%g", "a|b", &"x".repeat(127)] {
            assert!(check_topic(ok).is_ok(), "{ok}");
        }
        for bad in ["", "  ", "a b", "a.b", "tópico", &"x".repeat(128)] {
            let e = check_topic(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        }
        assert!(check_send_topic("SCHEDULE_TOPIC_XXXX").is_err());
        assert!(check_send_topic("TBW102").is_ok());
    }

    #[test]
    fn group_rules() {
        assert!(check_group("g-1_%|").is_ok());
        assert!(check_group(&"g".repeat(255)).is_ok());
        assert!(check_group(&"g".repeat(256)).is_err());
        assert!(check_group("a/b").is_err());
        assert!(check_group("").is_err());
    }

    #[test]
    fn body_rules() {
        assert!(check_body(0, 10).is_err());
        assert!(check_body(10, 10).is_ok());
        let e = check_body(11, 10).unwrap_err();
        assert!(e.to_string().contains("11 bytes"), "{e}");
    }
}
