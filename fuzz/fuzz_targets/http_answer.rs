//! The HTTP name-server address server's answer (Java `TopAddressing`), as
//! `MQClientInstance::fetch_name_server_addr` reads it: status line, header end, and for
//! a 200 the body's first line split into name-server addresses. The client reads at most
//! 64 KiB of it.
//!
//! Besides "never panics": every address is a trimmed, non-empty piece of that line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::fuzzing;

fuzz_target!(|data: &[u8]| {
    let Ok((status, addrs)) = fuzzing::name_server_answer(data) else {
        return;
    };
    if status != 200 {
        assert!(addrs.is_empty());
    }
    for a in &addrs {
        assert!(!a.is_empty());
        assert_eq!(a.trim(), a);
        assert!(!a.contains([';', '\r', '\n']), "{a:?}");
    }
});
