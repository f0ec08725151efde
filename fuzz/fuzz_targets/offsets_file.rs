//! A broadcasting consumer's offsets file (`LocalFileOffsetStore`, Java's
//! `offsets.json`): written by this client or by Java's (pretty-printed, object map keys),
//! and read back at start, so a damaged or foreign file is input like any other.
//!
//! Besides "never panics": what the store writes for the offsets it read (the same
//! `{"offsetTable":{{queue}:offset}}` layout) reads back as the same offsets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::fuzzing;
use rocketmq_blocking::protocol::json;

fuzz_target!(|data: &[u8]| {
    let Ok(Some(offsets)) = fuzzing::offsets_file(data) else {
        return;
    };
    let mut text = String::from("{\"offsetTable\":");
    json::object_key_map(&mut text, offsets.iter()).expect("queues and offsets encode");
    text.push('}');
    let back = fuzzing::offsets_file(text.as_bytes()).expect("our own file reads back");
    assert_eq!(back, Some(offsets));
});
