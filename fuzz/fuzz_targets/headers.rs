//! Typed custom headers read from a command's `extFields`: the response headers of sends,
//! pulls, offset and message queries, a broker's CHECK_TRANSACTION_STATE, the borrowed
//! SEND_MESSAGE_V2 header against its owned twin, and a pushed reply message
//! (PUSH_REPLY_MESSAGE_TO_CLIENT: fields from the header, body maybe compressed).
//!
//! Input: `key=value` lines, then an empty line and the body. The frame target covers how
//! the fields come off the wire; this one reaches the field parsers directly.
//!
//! Besides "never panics": a header read and written back reads the same, the borrowed
//! and owned decoders agree, a send's offsetMsgId that decodes encodes back to itself,
//! and a reply keeps its topic and the body cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::fuzzing;
use rocketmq_blocking::message::{create_offset_msg_id, decode_offset_msg_id};
use rocketmq_blocking::protocol::header::{
    OffsetResponseHeader, PullMessageResponseHeader, QueryMessageResponseHeader, ReadHeaderRef,
    SendMessageRequestHeaderV2, SendMessageRequestHeaderV2Ref, SendMessageResponseHeader,
};
use rocketmq_blocking::protocol::transaction::CheckTransactionStateRequestHeader;
use rocketmq_blocking::protocol::{
    CommandHeader, ExtFields, RemotingCommand, RequestCode, WriteHeader,
};

const MAX_BODY: usize = 1 << 20;

fn round_trip<H: CommandHeader + PartialEq + std::fmt::Debug>(ext: &ExtFields) {
    let Ok(h) = H::read_from(ext) else {
        return;
    };
    let mut again = ExtFields::new();
    h.write_to(&mut again);
    assert_eq!(H::read_from(&again).as_ref(), Ok(&h));
}

fn written(h: &impl WriteHeader) -> Vec<(String, String)> {
    let mut ext = ExtFields::new();
    h.write_header(&mut ext);
    ext.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let pairs: Vec<(&str, &str)> = head.split('\n').filter_map(|l| l.split_once('=')).collect();
    let mut ext = ExtFields::new();
    for (k, v) in &pairs {
        ext.insert(k, v);
    }

    round_trip::<SendMessageResponseHeader>(&ext);
    if let Ok(h) = SendMessageResponseHeader::read_from(&ext) {
        // A transaction's END_TRANSACTION takes the commit log offset from this id.
        if let Ok((host, offset)) = decode_offset_msg_id(&h.msg_id) {
            assert!(create_offset_msg_id(host, offset).eq_ignore_ascii_case(&h.msg_id));
        }
    }
    round_trip::<PullMessageResponseHeader>(&ext);
    round_trip::<OffsetResponseHeader>(&ext);
    round_trip::<QueryMessageResponseHeader>(&ext);
    round_trip::<CheckTransactionStateRequestHeader>(&ext);
    round_trip::<SendMessageRequestHeaderV2>(&ext);

    // A repeated key: the last value counts for both.
    let owned = SendMessageRequestHeaderV2::read_from(&ext);
    let borrowed = SendMessageRequestHeaderV2Ref::read_fields(pairs.iter().copied());
    match (&owned, &borrowed) {
        (Ok(o), Ok(b)) => assert_eq!(written(o), written(b)),
        (Err(_), Err(_)) => {}
        _ => panic!("owned {owned:?} but borrowed {borrowed:?}"),
    }

    let mut req = RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT);
    req.ext_fields = ext;
    req.body = body.to_vec();
    if let Ok(reply) = fuzzing::reply_message(&req, MAX_BODY) {
        assert_eq!(Some(reply.topic()), req.ext_fields.get("topic"));
        assert!(reply.body().len() <= MAX_BODY.max(body.len()));
    }
});
