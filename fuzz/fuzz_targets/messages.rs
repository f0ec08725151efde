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
};

fuzz_target!(|data: &[u8]| {
    // Small caps keep a zlib bomb from eating the fuzzer's memory budget.
    let opts = DecodeOptions::new()
        .check_crc(true)
        .max_body_len(1 << 20)
        .max_total_body_len(8 << 20);
    let lenient = decode_messages_lenient(data, opts);
    let skipped: usize = lenient.skipped.iter().map(|s| s.len).sum();
    let decoded: usize = lenient.messages.iter().map(|m| m.store_size as usize).sum();
    assert_eq!(skipped + decoded, data.len());
    let Ok(messages) = decode_messages(data, opts) else {
        assert!(!lenient.skipped.is_empty());
        return;
    };
    assert!(lenient.skipped.is_empty());
    assert_eq!(messages, lenient.messages);
    let consumed: usize = messages.iter().map(|m| m.store_size as usize).sum();
    assert_eq!(consumed, data.len());
    for m in &messages {
        // Properties or topics that grew past i16 by UTF-8 replacement cannot be re-encoded.
        let Ok(bytes) = encode_message_ext(m) else {
            continue;
        };
        let again = decode_messages(&bytes, opts).expect("re-encoded message decodes");
        assert_eq!(again.len(), 1);
        let mut expected = m.clone();
        expected.store_size = again[0].store_size;
        expected.body_crc = again[0].body_crc;
        if m.sys_flag & sys_flag::COMPRESSED != 0 {
            // The encoder compresses with zlib whatever type an (empty) body claimed.
            expected.sys_flag = again[0].sys_flag;
        }
        assert_eq!(again[0], expected);
    }
});
