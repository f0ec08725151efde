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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ops = [
        "owned/rocketmq",
        "owned/json",
        "borrowed/rocketmq",
        "borrowed/json",
    ];
    let (Some(op), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok())) else {
        eprintln!("usage: codec_count OP N; OP one of {ops:?}");
        std::process::exit(2);
    };
    let body = vec![b'x'; 1024];
    for _ in 0..n {
        match op.as_str() {
            "owned/rocketmq" => owned_round_trip(SerializeType::RocketMq, black_box(&body)),
            "owned/json" => owned_round_trip(SerializeType::Json, black_box(&body)),
            "borrowed/rocketmq" => round_trip(SerializeType::RocketMq, black_box(&body)),
            "borrowed/json" => round_trip(SerializeType::Json, black_box(&body)),
            _ => {
                eprintln!("unknown OP {op}; one of {ops:?}");
                std::process::exit(2);
            }
        }
    }
}
