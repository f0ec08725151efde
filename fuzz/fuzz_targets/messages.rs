//! Pull bodies: `decode_messages` and `decode_messages_lenient` with decompression and CRC
//! checks on.
//!
//! Besides "never panics", a body that decodes must be consumed whole, the lenient decoder
//! must account for every byte (decoded or skipped) and agree with the strict one when that
//! one succeeds, and every message our encoder can re-encode must decode to itself again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::message::{
    decode_messages, decode_messages_lenient, encode_message_ext, sys_flag, DecodeOptions,
    MessageExt,
};

fuzz_target!(|data: &[u8]| {
    // Small caps keep a zlib bomb from eating the fuzzer's memory budget.
    let opts = DecodeOptions::new()
        .check_crc(true)
        .max_body_len(1 << 20)
        .max_total_body_len(8 << 20);
    let lenient = decode_messages_lenient(data, opts);
    let skipped: usize = lenient.skipped.iter().map(|s| s.len).sum();
    let decoded: usize = lenient
        .messages
        .iter()
        .map(|m| m.store_size() as usize)
        .sum();
    assert_eq!(skipped + decoded, data.len());
    let Ok(messages) = decode_messages(data, opts) else {
        assert!(!lenient.skipped.is_empty());
        return;
    };
    assert!(lenient.skipped.is_empty());
    assert_eq!(messages, lenient.messages);
    let consumed: usize = messages.iter().map(|m| m.store_size() as usize).sum();
    assert_eq!(consumed, data.len());
    for m in &messages {
        // Properties or topics that grew past i16 by UTF-8 replacement cannot be re-encoded.
        let Ok(bytes) = encode_message_ext(m) else {
            continue;
        };
        let again = decode_messages(&bytes, opts).expect("re-encoded message decodes");
        assert_eq!(again.len(), 1);
        let again = &again[0];
        // The record is written anew (its size and CRC); everything else comes back.
        assert_eq!(again.message(), m.message());
        assert_eq!(stored(again), stored(m));
        if m.sys_flag() & sys_flag::COMPRESSED == 0 {
            // The encoder compresses with zlib whatever type an (empty) body claimed.
            assert_eq!(again.sys_flag(), m.sys_flag());
        }
        // Encoding what it decoded writes the same record again.
        assert_eq!(encode_message_ext(again).ok().as_deref(), Some(&bytes[..]));
    }
});

/// The stored record's fields other than the message, size, CRC and flags.
fn stored(m: &MessageExt) -> impl PartialEq + std::fmt::Debug {
    (
        m.queue_id(),
        m.queue_offset(),
        m.commit_log_offset(),
        m.born_timestamp(),
        m.born_host(),
        m.store_timestamp(),
        m.store_host(),
        m.reconsume_times(),
    )
}
