//! Remoting frames: `frame_len` on the stream prefix, then `RemotingCommand::decode` on
//! the frame it measured (and on the raw input, to reach the header decoders directly).
//! Any panic is a bug: these bytes come from the network.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::protocol::{frame_len, RemotingCommand, DEFAULT_MAX_FRAME};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(n)) = frame_len(data, DEFAULT_MAX_FRAME) {
        if let Some(frame) = data.get(4..4 + n) {
            let _ = RemotingCommand::decode(frame);
        }
    }
    let _ = RemotingCommand::decode(data);
});
