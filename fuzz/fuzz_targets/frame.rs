//! Remoting frames: `frame_len` on the stream prefix, then `RemotingCommand::decode` on
//! the frame it measured (and on the raw input, to reach the header decoders directly),
//! and the borrowed `RemotingCommandRef::decode`, which must agree with it and whose
//! typed SEND_MESSAGE_V2 header must parse or fail without panicking.
//! Any panic is a bug: these bytes come from the network.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::protocol::header::SendMessageRequestHeaderV2Ref;
use rocketmq_blocking::protocol::{
    frame_len, RemotingCommand, RemotingCommandRef, DEFAULT_MAX_FRAME,
};

fn check(frame: &[u8]) {
    let owned = RemotingCommand::decode(frame);
    let borrowed = RemotingCommandRef::decode(frame);
    match (&owned, &borrowed) {
        (Ok(o), Ok(b)) => {
            assert_eq!(&b.to_owned(), o);
            let _ = b.decode_header::<SendMessageRequestHeaderV2Ref<'_>>();
        }
        (Err(_), Err(_)) => {}
        _ => panic!("owned {owned:?} but borrowed {borrowed:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(n)) = frame_len(data, DEFAULT_MAX_FRAME) {
        if let Some(frame) = data.get(4..4 + n) {
            check(frame);
        }
    }
    check(data);
});
