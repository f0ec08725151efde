//! Loops codec operations for instruction counting (`valgrind --tool=callgrind`):
//! `cargo build --release -p rocketmq-blocking-tools --bin codec_count`, then
//! `valgrind --tool=callgrind target/release/codec_count OP N` for N and 2N
//! iterations; the difference divided by N is the cost of one operation, setup excluded.
//! OP is one of the names listed by running it without arguments.

use std::hint::black_box;

use rocketmq_blocking::protocol::header::{
    SendMessageRequestHeaderV2, SendMessageRequestHeaderV2Ref,
};
use rocketmq_blocking::protocol::{
    frame_len, RemotingCommand, RemotingCommandRef, RequestCode, SerializeType, DEFAULT_MAX_FRAME,
};

const PROPERTIES: &str =
    "TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F000001A5F418B4AAC25C1B29C40000";

fn header(body_topic: &str) -> SendMessageRequestHeaderV2Ref<'_> {
    SendMessageRequestHeaderV2Ref {
        producer_group: "bench_producer_group",
        topic: body_topic,
        default_topic: "TBW102",
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_718_000_000_123,
        flag: 0,
        properties: Some(PROPERTIES),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: Some("broker-a"),
    }
}

fn owned_round_trip(ty: SerializeType, body: &[u8]) {
    let mut cmd =
        RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header("BenchTopic"))
            .with_body(body.to_vec());
    cmd.serialize_type = ty;
    let frame = cmd.to_frame();
    let n = frame_len(&frame, DEFAULT_MAX_FRAME).ok().flatten();
    assert_eq!(n, Some(frame.len() - 4));
    let back = RemotingCommand::decode(&frame[4..]);
    let h = back
        .as_ref()
        .map(|c| c.decode_header::<SendMessageRequestHeaderV2>());
    assert!(matches!(h, Ok(Ok(_))));
    black_box((&h, &back));
}

/// `send_v2/round_trip` of the codec bench: encoded straight from the typed header,
/// decoded borrowed, the typed borrowed header parsed.
fn round_trip(ty: SerializeType, body: &[u8]) {
    let mut frame = Vec::new();
    RemotingCommand::encode_request(
        RequestCode::SEND_MESSAGE_V2,
        &header("BenchTopic"),
        7,
        0,
        body,
        ty,
        &mut frame,
    );
    let n = frame_len(&frame, DEFAULT_MAX_FRAME).ok().flatten();
    assert_eq!(n, Some(frame.len() - 4));
    let back = RemotingCommandRef::decode(&frame[4..]);
    let h = back
        .as_ref()
        .map(|c| c.decode_header::<SendMessageRequestHeaderV2Ref<'_>>());
    assert!(matches!(h, Ok(Ok(_))));
    black_box(&h);
}

/// 32 stored messages of 1 KiB (tags, keys, WAIT) from queue offset 100, as a broker
/// returns them to PULL_MESSAGE.
fn pull_body() -> Vec<u8> {
    use rocketmq_blocking::message::encode_message_ext;
    use rocketmq_blocking::{Message, MessageExt};
    let host = |port| std::net::SocketAddr::from(([127, 0, 0, 1], port));
    (100..132)
        .flat_map(|offset| {
            let mut m = MessageExt::default();
            let msg = Message::new("PullCountTopic", vec![b'x'; 1024])
                .with_tags("TagA")
                .with_keys([format!("key-{offset}")]);
            m.set_stored(msg, "broker-a", 3, offset, offset * 1200);
            m.set_hosts(
                (host(50000), 1_796_000_000_000),
                (host(10911), 1_796_000_000_001),
            );
            encode_message_ext(&m).unwrap_or_default()
        })
        .collect()
}

/// One PULL_MESSAGE response processed as a consumer does (decode, tag filter, the
/// offsets added); the response's body is a copy of `body` made here, as the I/O thread
/// makes one per response.
fn pull(body: &[u8]) {
    let mq = rocketmq_blocking::MessageQueue::new("PullCountTopic", "broker-a", 3);
    let msgs = rocketmq_blocking::fuzzing::pull_response(&mq, body.to_vec(), 132);
    assert!(msgs.is_ok_and(|m| m.len() == 32));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ops = [
        "owned/rocketmq",
        "owned/json",
        "borrowed/rocketmq",
        "borrowed/json",
        "pull/32x1k",
    ];
    let (Some(op), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok())) else {
        eprintln!("usage: codec_count OP N; OP one of {ops:?}");
        std::process::exit(2);
    };
    let body = vec![b'x'; 1024];
    let pulled = pull_body();
    for _ in 0..n {
        match op.as_str() {
            "owned/rocketmq" => owned_round_trip(SerializeType::RocketMq, black_box(&body)),
            "owned/json" => owned_round_trip(SerializeType::Json, black_box(&body)),
            "borrowed/rocketmq" => round_trip(SerializeType::RocketMq, black_box(&body)),
            "borrowed/json" => round_trip(SerializeType::Json, black_box(&body)),
            "pull/32x1k" => pull(black_box(&pulled)),
            _ => {
                eprintln!("unknown OP {op}; one of {ops:?}");
                std::process::exit(2);
            }
        }
    }
}
