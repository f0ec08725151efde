//! Micro-benchmarks of the codec hot paths (`cargo bench --bench codec`).
//!
//! - `frame/encode/{json,rocketmq}`: `RemotingCommand::to_frame` of a SEND_MESSAGE_V2
//!   request with a 1 KiB body, in each header encoding.
//! - `frame/decode/{json,rocketmq}`: `frame_len` + `RemotingCommand::decode` of that frame.
//! - `frame/decode_borrowed/{json,rocketmq}`: `frame_len` + `RemotingCommandRef::decode`
//!   (keys, values and body borrowed from the frame).
//! - `send_v2/header_to_ext`: a request built from the SEND_MESSAGE_V2 header (the
//!   producer's borrowed `SendMessageRequestHeaderV2Ref`) into `extFields`.
//! - `send_v2/header_from_ext`: the typed `SendMessageRequestHeaderV2` read from them.
//! - `send_v2/encode_direct/{json,rocketmq}`: `RemotingCommand::encode_request`, the frame
//!   written straight from the typed header (no `extFields` with the ROCKETMQ header).
//! - `send_v2/round_trip/{json,rocketmq}`: the target, one whole SEND_MESSAGE_V2
//!   frame per iteration: build the typed header as the producer does (strings borrowed),
//!   encode the frame straight from it into a new buffer, measure it, decode it borrowed
//!   and parse the typed borrowed `SendMessageRequestHeaderV2Ref` from it. Target:
//!   ≥ 2.5 M/s per core (≤ 400 ns) with the ROCKETMQ header.
//! - `send_v2/round_trip_owned/{json,rocketmq}`: the same through the owned forms, for
//!   comparison (the header into `extFields`, the body copied into the command, the owned
//!   decode and the owned typed header: the round trip before the borrowed path).
//! - `batch/encode_32x1k`: `encode_batch` of 32 messages of 1 KiB (Java `MessageBatch.encode`).
//! - `pull/decode_32x1k`: `decode_messages` of a pull body holding 32 stored 1 KiB messages,
//!   built with `encode_message_ext` (the broker's stored layout); throughput is per message.
//! - `pull/process_32x1k`: that body as a found PULL_MESSAGE response processed as the
//!   consumer does (`fuzzing::pull_response`: shared body windows, tag filter, MIN/MAX_OFFSET
//!   added), the body's copy into the response included.

use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rocketmq_blocking::message::{
    decode_messages, encode_batch, encode_message_ext, DecodeOptions, Message, MessageExt,
};
use rocketmq_blocking::protocol::header::{
    SendMessageRequestHeaderV2, SendMessageRequestHeaderV2Ref,
};
use rocketmq_blocking::protocol::{
    frame_len, next_opaque, RemotingCommand, RemotingCommandRef, RequestCode, SerializeType,
    DEFAULT_MAX_FRAME,
};

const BODY_LEN: usize = 1024;
const BATCH: usize = 32;

/// What the producer keeps per message and per producer, from which each attempt builds
/// its header (see `producer/send.rs`).
struct SendInputs {
    group: String,
    topic: String,
    default_topic: String,
    properties: String,
    broker_name: String,
    body: Vec<u8>,
}

impl SendInputs {
    fn new() -> Self {
        SendInputs {
            group: "bench_producer_group".into(),
            topic: "BenchTopic".into(),
            default_topic: "TBW102".into(),
            // WAIT, TAGS and a UNIQ_KEY, in the producer's order.
            properties: "TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F000001A5F418B4AAC2\
                         5C1B29C40000"
                .into(),
            broker_name: "broker-a".into(),
            body: vec![b'x'; BODY_LEN],
        }
    }

    /// The header as the producer builds it for each attempt: borrowing its strings.
    fn header(&self) -> SendMessageRequestHeaderV2Ref<'_> {
        SendMessageRequestHeaderV2Ref {
            producer_group: &self.group,
            topic: &self.topic,
            default_topic: &self.default_topic,
            default_topic_queue_nums: 4,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_718_000_000_123,
            flag: 0,
            properties: Some(&self.properties),
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: None,
            batch: false,
            broker_name: Some(&self.broker_name),
        }
    }

    fn command(&self, ty: SerializeType) -> RemotingCommand {
        let mut cmd =
            RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &self.header())
                .with_body(self.body.clone());
        cmd.serialize_type = ty;
        cmd
    }
}

/// The frame after its length prefix, which must measure it whole.
fn measured(frame: &[u8]) -> &[u8] {
    let n = frame_len(frame, DEFAULT_MAX_FRAME)
        .ok()
        .flatten()
        .filter(|&n| frame.len() == n + 4);
    assert!(n.is_some(), "the bench frame is whole");
    &frame[4..]
}

fn decode_frame(frame: &[u8]) -> RemotingCommand {
    match RemotingCommand::decode(measured(frame)) {
        Ok(cmd) => cmd,
        Err(e) => panic!("the bench frame decodes: {e}"),
    }
}

fn decode_borrowed(frame: &[u8]) -> RemotingCommandRef<'_> {
    match RemotingCommandRef::decode(measured(frame)) {
        Ok(cmd) => cmd,
        Err(e) => panic!("the bench frame decodes: {e}"),
    }
}

const ENCODINGS: [(&str, SerializeType); 2] = [
    ("json", SerializeType::Json),
    ("rocketmq", SerializeType::RocketMq),
];

fn frame(c: &mut Criterion) {
    let inputs = SendInputs::new();
    let mut g = c.benchmark_group("frame");
    g.throughput(Throughput::Elements(1));
    for (name, ty) in ENCODINGS {
        let cmd = inputs.command(ty);
        g.bench_function(format!("encode/{name}"), |b| {
            b.iter(|| black_box(black_box(&cmd).to_frame()))
        });
        let frame = cmd.to_frame();
        g.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| black_box(decode_frame(black_box(&frame))))
        });
        g.bench_function(format!("decode_borrowed/{name}"), |b| {
            b.iter(|| black_box(decode_borrowed(black_box(&frame))).code)
        });
    }
    g.finish();
}

fn send_v2(c: &mut Criterion) {
    let inputs = SendInputs::new();
    let mut g = c.benchmark_group("send_v2");
    g.throughput(Throughput::Elements(1));
    let header = inputs.header();
    g.bench_function("header_to_ext", |b| {
        b.iter(|| {
            RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, black_box(&header))
        })
    });
    let cmd = inputs.command(SerializeType::RocketMq);
    g.bench_function("header_from_ext", |b| {
        b.iter(|| {
            black_box(&cmd)
                .decode_header::<SendMessageRequestHeaderV2>()
                .ok()
        })
    });
    for (name, ty) in ENCODINGS {
        g.bench_function(format!("encode_direct/{name}"), |b| {
            b.iter(|| {
                let mut frame = Vec::new();
                let header = inputs.header();
                RemotingCommand::encode_request(
                    RequestCode::SEND_MESSAGE_V2,
                    black_box(&header),
                    7,
                    0,
                    &inputs.body,
                    ty,
                    &mut frame,
                );
                black_box(frame)
            })
        });
        g.bench_function(format!("round_trip/{name}"), |b| {
            b.iter(|| {
                let mut frame = Vec::new();
                RemotingCommand::encode_request(
                    RequestCode::SEND_MESSAGE_V2,
                    &inputs.header(),
                    next_opaque(),
                    0,
                    &inputs.body,
                    ty,
                    &mut frame,
                );
                let back = decode_borrowed(&frame);
                let h = back.decode_header::<SendMessageRequestHeaderV2Ref<'_>>();
                assert!(h.as_ref().is_ok_and(|h| h.queue_id == 3));
                black_box((&h, back.body.len()));
            })
        });
        g.bench_function(format!("round_trip_owned/{name}"), |b| {
            b.iter(|| {
                let frame = inputs.command(ty).to_frame();
                let back = decode_frame(&frame);
                let h = back.decode_header::<SendMessageRequestHeaderV2>();
                assert!(h.is_ok());
                black_box((h, back))
            })
        });
    }
    g.finish();
}

fn messages(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| {
            let mut m = Message::new("BenchTopic", vec![b'x'; BODY_LEN])
                .with_tags("TagA")
                .with_keys([format!("key-{i}")]);
            // As long as the UNIQ_KEY the producer adds (a reserved name here).
            let added = m.put_user_property("uniq", format!("7F000001A5F418B4AAC25C1B29C4{i:04X}"));
            assert!(added.is_ok());
            m
        })
        .collect()
}

fn batch(c: &mut Criterion) {
    let msgs = messages(BATCH);
    let mut g = c.benchmark_group("batch");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("encode_32x1k", |b| {
        b.iter(|| black_box(encode_batch(black_box(&msgs)).ok()))
    });
    g.finish();
}

fn pull(c: &mut Criterion) {
    let store: SocketAddr = ([10, 0, 0, 7], 10911).into();
    let born: SocketAddr = ([10, 0, 0, 9], 53122).into();
    let mut body = Vec::new();
    for (i, message) in messages(BATCH).into_iter().enumerate() {
        let mut ext = MessageExt::default();
        ext.set_stored(message, "", 3, 1000 + i as i64, 1 << 30 | (i as i64 * 1200));
        ext.set_hosts((born, 1_718_000_000_000), (store, 1_718_000_000_002));
        match encode_message_ext(&ext) {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(e) => panic!("the bench message encodes: {e}"),
        }
    }
    let mut g = c.benchmark_group("pull");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("decode_32x1k", |b| {
        b.iter(|| {
            let v = decode_messages(black_box(&body), DecodeOptions::new());
            assert!(v.as_ref().is_ok_and(|v| v.len() == BATCH));
            black_box(v)
        })
    });
    // The consumer's whole processing of the response (decode into windows of the shared
    // body, tag filter, MIN/MAX_OFFSET added), the body's copy into the response included.
    let mq = rocketmq_blocking::MessageQueue::new("BenchTopic", "broker-a", 3);
    g.bench_function("process_32x1k", |b| {
        b.iter(|| {
            let v = rocketmq_blocking::fuzzing::pull_response(&mq, black_box(&body).clone(), 1032);
            assert!(v.as_ref().is_ok_and(|v| v.len() == BATCH));
            black_box(v)
        })
    });
    g.finish();
}

criterion_group!(benches, frame, send_v2, batch, pull);
criterion_main!(benches);
