//! Headers of the transactional-message requests: END_TRANSACTION (client → broker) and
//! CHECK_TRANSACTION_STATE (broker → client). Java `EndTransactionRequestHeader` and
//! `CheckTransactionStateRequestHeader`; `topic` is 5.x (4.9 brokers ignore it), `bname`
//! is Java's `RpcRequestHeader` field.

crate::command_header! {
    /// END_TRANSACTION (37) request, sent oneway.
    pub struct EndTransactionRequestHeader {
        /// The message's topic (5.x, for ACL).
        pub topic: Option<String> => "topic",
        pub producer_group: String => "producerGroup",
        /// Queue offset of the half message.
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        /// Commit log offset of the half message.
        pub commit_log_offset: i64 => "commitLogOffset",
        /// `sys_flag::TRANSACTION_COMMIT`, `TRANSACTION_ROLLBACK` or `TRANSACTION_NOT_TYPE`.
        pub commit_or_rollback: i32 => "commitOrRollback",
        /// Whether this answers a CHECK_TRANSACTION_STATE.
        pub from_transaction_check: bool => "fromTransactionCheck",
        /// The client-side id (`UNIQ_KEY`).
        pub msg_id: String => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub broker_name: Option<String> => "bname",
    }
}

crate::command_header! {
    /// CHECK_TRANSACTION_STATE (39) request from a broker; the body is the half message.
    pub struct CheckTransactionStateRequestHeader {
        /// 5.x only.
        pub topic: Option<String> => "topic",
        pub tran_state_table_offset: i64 => "tranStateTableOffset",
        pub commit_log_offset: i64 => "commitLogOffset",
        pub msg_id: Option<String> => "msgId",
        pub transaction_id: Option<String> => "transactionId",
        pub offset_msg_id: Option<String> => "offsetMsgId",
        pub broker_name: Option<String> => "bname",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CommandHeader, ExtFields};

    #[test]
    fn a_check_header_as_a_4_9_broker_sends_it_reads_without_the_5_x_fields() {
        let mut ext = ExtFields::new();
        for (k, v) in [
            ("tranStateTableOffset", "7"),
            ("commitLogOffset", "1234"),
            ("msgId", "7F0000010001"),
            ("transactionId", "AC11000100002A9F0000000000000001"),
        ] {
            ext.insert(k, v);
        }
        let h = CheckTransactionStateRequestHeader::read_from(&ext).unwrap();
        assert_eq!((h.tran_state_table_offset, h.commit_log_offset), (7, 1234));
        assert_eq!(h.topic, None);
        assert_eq!(
            h.transaction_id.as_deref(),
            Some("AC11000100002A9F0000000000000001")
        );
        // The offsets are @CFNotNull in Java: a check without them is an error, not a zero.
        let mut ext = ExtFields::new();
        ext.insert("commitLogOffset", "1");
        assert!(CheckTransactionStateRequestHeader::read_from(&ext).is_err());
    }

    #[test]
    fn an_end_header_carries_every_java_field() {
        let h = EndTransactionRequestHeader {
            topic: Some("T".into()),
            producer_group: "pg".into(),
            tran_state_table_offset: 3,
            commit_log_offset: 99,
            commit_or_rollback: crate::message::sys_flag::TRANSACTION_COMMIT,
            from_transaction_check: false,
            msg_id: "ID".into(),
            transaction_id: Some("ID".into()),
            broker_name: Some("broker-a".into()),
        };
        let mut ext = ExtFields::new();
        h.write_to(&mut ext);
        for (k, v) in [
            ("topic", "T"),
            ("producerGroup", "pg"),
            ("tranStateTableOffset", "3"),
            ("commitLogOffset", "99"),
            ("commitOrRollback", "8"),
            ("fromTransactionCheck", "false"),
            ("msgId", "ID"),
            ("transactionId", "ID"),
            ("bname", "broker-a"),
        ] {
            assert_eq!(ext.get(k), Some(v), "{k}");
        }
        assert_eq!(EndTransactionRequestHeader::read_from(&ext).unwrap(), h);
    }
}
