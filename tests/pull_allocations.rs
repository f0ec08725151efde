//! Allocations per pulled message (issue 30): a PULL_MESSAGE response of 32 stored 1 KiB
//! messages, with the properties a Java producer and a 5.x broker write, processed as a
//! consumer does (`fuzzing::pull_response`: decode, tag filter, MIN/MAX_OFFSET added),
//! counted by a global allocator that counts every call (`stats_alloc`; the test is
//! alone in its binary, so the calls are the decoding's).
//!
//! The budget is what the decoding must allocate for every field a user can read: the
//! properties' buffer and index (2 a message), plus the pull's own (the response header,
//! the shared body buffer, the message vector: 16 for the 32). The body is a window into
//! the response, the topic and broker name shared per pull, the offset message id made
//! when read. Before issue 30 this was 143 for the 32, 4.47 a message (a topic string
//! each, an empty broker name each).

use std::alloc::System;

use rocketmq_blocking::fuzzing::pull_response;
use rocketmq_blocking::MessageQueue;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations (and reallocations) made while `f` runs.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let region = Region::new(ALLOCATOR);
    let out = f();
    let change = region.change();
    (out, (change.allocations + change.reallocations) as u64)
}

const TOPIC: &str = "PullAllocTopic";

/// A stored message in the broker's layout (magic code V1, IPv4 hosts).
fn stored(queue_offset: i64, body: &[u8], properties: &str) -> Vec<u8> {
    let mut r = Vec::new();
    let total = 4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + 8
        + 8
        + 8
        + 4
        + 8
        + 4
        + body.len()
        + 1
        + TOPIC.len()
        + 2
        + properties.len();
    r.extend_from_slice(&(total as i32).to_be_bytes());
    r.extend_from_slice(&0xDAA3_20A7_u32.to_be_bytes()); // magic code V1
    r.extend_from_slice(&0i32.to_be_bytes()); // body CRC (not checked by the consumer)
    r.extend_from_slice(&3i32.to_be_bytes()); // queue id
    r.extend_from_slice(&0i32.to_be_bytes()); // flag
    r.extend_from_slice(&queue_offset.to_be_bytes());
    r.extend_from_slice(&(queue_offset * 1200).to_be_bytes()); // commit log offset
    r.extend_from_slice(&0i32.to_be_bytes()); // sys flag
    r.extend_from_slice(&1_796_000_000_000i64.to_be_bytes()); // born
    r.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0xC3, 0x50]); // born host :50000
    r.extend_from_slice(&1_796_000_000_001i64.to_be_bytes()); // stored
    r.extend_from_slice(&[127, 0, 0, 1, 0, 0, 0x2A, 0x03]); // store host :10755
    r.extend_from_slice(&0i32.to_be_bytes()); // reconsume times
    r.extend_from_slice(&0i64.to_be_bytes()); // prepared transaction offset
    r.extend_from_slice(&(body.len() as i32).to_be_bytes());
    r.extend_from_slice(body);
    r.push(TOPIC.len() as u8);
    r.extend_from_slice(TOPIC.as_bytes());
    r.extend_from_slice(&(properties.len() as i16).to_be_bytes());
    r.extend_from_slice(properties.as_bytes());
    assert_eq!(r.len(), total);
    r
}

/// 32 stored messages from offset 100, as a pull response's body.
fn records() -> Vec<u8> {
    let body = vec![b'x'; 1024];
    (100..132)
        .flat_map(|o| {
            // What a Java 5.x producer sends and a 5.x broker adds, in its order.
            let props = format!(
                "TAGS\u{1}TagA\u{2}KEYS\u{1}key-{o}\u{2}UNIQ_KEY\u{1}7F00000140E2733FFC2814D8683A{o:04X}\u{2}\
                 WAIT\u{1}true\u{2}MSG_REGION\u{1}DefaultRegion\u{2}CLUSTER\u{1}DefaultCluster\u{2}TRACE_ON\u{1}true\u{2}"
            );
            stored(o, &body, &props)
        })
        .collect()
}

#[test]
fn a_pulled_message_costs_at_most_two_and_a_half_allocations() {
    let mq = MessageQueue::new(TOPIC, "broker-a", 3);
    // Once for anything made on first use.
    let _ = pull_response(&mq, records(), 132);
    let input = records();
    // The response's header and body are made inside: counted, as the I/O thread makes
    // them per pull.
    let (msgs, n) = allocations(|| pull_response(&mq, input, 132));
    let msgs = msgs.expect("the response decodes");
    assert_eq!(msgs.len(), 32);
    // Every field a user reads is there.
    let m = &msgs[5];
    assert_eq!((m.topic(), m.queue_id(), m.queue_offset()), (TOPIC, 3, 105));
    assert_eq!(m.broker_name(), "broker-a");
    assert_eq!(m.body(), &[b'x'; 1024][..]);
    assert_eq!(m.tags(), Some("TagA"));
    assert_eq!(m.keys().collect::<Vec<_>>(), ["key-105"]);
    assert_eq!(m.property("MAX_OFFSET"), Some("132"));
    assert_eq!(m.msg_id(), "7F00000140E2733FFC2814D8683A0069");
    assert_eq!(m.offset_msg_id(), "7F00000100002A03000000000001EC30");
    assert_eq!(m.born_host().port(), 50000);
    let per_message = n as f64 / 32.0;
    eprintln!("{n} allocations for 32 pulled messages: {per_message:.2} per message");
    assert!(
        per_message <= 2.5,
        "{n} allocations for 32 messages ({per_message:.2} each)"
    );
}
