//! The crate's decoders against frames captured from real Apache RocketMQ servers
//! (`tests/data/<version>/*.bin`, written by `tools/src/bin/capture_frames.rs`; each file is
//! one whole frame, 4-byte length prefix included).
//!
//! The expected values below were fixed at capture time: broker ports, opaques and offsets
//! are what those runs produced, and the message topics, tags and bodies are the ones the
//! example sends.
//!
//! Header encoding of the servers' responses, as captured:
//! - 5.3.3 answers everything with a JSON header, even the GET_MAX_OFFSET request that we
//!   sent with a ROCKETMQ (binary) header.
//! - 4.9.7 answers in the request's encoding: JSON to JSON requests, and ROCKETMQ to the
//!   ROCKETMQ-encoded GET_MAX_OFFSET.
//!
//! Both name servers still write fastjson's bare integer map keys (`{0:"127.0.0.1:p"}`)
//! when the route request carries version 0 and no `acceptStandardJsonOnly`, and always in
//! the cluster info; version 409 gets standard JSON (`{"0":...}`).

use rocketmq_blocking::message::{decode_messages, property, sys_flag, DecodeOptions, MessageExt};
use rocketmq_blocking::protocol::header::{
    OffsetResponseHeader, PullMessageResponseHeader, SendMessageResponseHeader,
};
use rocketmq_blocking::protocol::{
    decode_cluster_info, decode_route, frame_len, ClusterInfo, LanguageCode, RemotingCommand,
    RequestCode, ResponseCode, SerializeType, TopicRouteData, DEFAULT_MAX_FRAME,
};

/// Every captured file of one server version.
struct Captured {
    version: &'static str,
    /// The server's `version` field (Java `MQVersion` ordinal).
    server_version: i32,
    broker_addr: &'static str,
    /// Header encoding of the answer to the ROCKETMQ-encoded GET_MAX_OFFSET.
    max_offset_answer: SerializeType,
    route_v409: &'static [u8],
    route_v0: &'static [u8],
    cluster_info: &'static [u8],
    route_unknown_topic: &'static [u8],
    max_offset_request: &'static [u8],
    max_offset_response: &'static [u8],
    send_response: &'static [u8],
    heart_beat_response: &'static [u8],
    pull_response: &'static [u8],
    view_response: &'static [u8],
}

macro_rules! captured {
    ($v:literal, $($field:ident: $val:expr),* $(,)?) => {
        Captured {
            version: $v,
            $($field: $val,)*
            route_v409: include_bytes!(concat!("data/", $v, "/route_tbw102_v409.bin")),
            route_v0: include_bytes!(concat!("data/", $v, "/route_tbw102_v0.bin")),
            cluster_info: include_bytes!(concat!("data/", $v, "/cluster_info.bin")),
            route_unknown_topic: include_bytes!(concat!("data/", $v, "/route_unknown_topic.bin")),
            max_offset_request: include_bytes!(concat!("data/", $v, "/get_max_offset_request_rocketmq.bin")),
            max_offset_response: include_bytes!(concat!("data/", $v, "/get_max_offset_response.bin")),
            send_response: include_bytes!(concat!("data/", $v, "/send_message_v2_response.bin")),
            heart_beat_response: include_bytes!(concat!("data/", $v, "/heart_beat_response.bin")),
            pull_response: include_bytes!(concat!("data/", $v, "/pull_message_response.bin")),
            view_response: include_bytes!(concat!("data/", $v, "/view_message_response.bin")),
        }
    };
}

fn servers() -> [Captured; 2] {
    [
        captured!("4.9.7",
            server_version: 407,
            broker_addr: "127.0.0.1:30141",
            max_offset_answer: SerializeType::RocketMq,
        ),
        captured!("5.3.3",
            server_version: 479,
            broker_addr: "127.0.0.1:29017",
            max_offset_answer: SerializeType::Json,
        ),
    ]
}

const TOPIC: &str = "CaptureTopic";

/// Decodes a whole frame: the length prefix must match the rest exactly.
fn decode(frame: &[u8]) -> RemotingCommand {
    let len = frame_len(frame, DEFAULT_MAX_FRAME)
        .expect("a valid length prefix")
        .expect("a complete prefix");
    assert_eq!(
        len,
        frame.len() - 4,
        "the prefix counts the rest of the frame"
    );
    RemotingCommand::decode(&frame[4..]).expect("the frame decodes")
}

/// One response frame: the generic checks, and the command for the specific ones.
fn check(
    c: &Captured,
    name: &str,
    frame: &[u8],
    code: ResponseCode,
    ty: SerializeType,
) -> RemotingCommand {
    let cmd = decode(frame);
    let at = format!("{} {name}", c.version);
    assert!(cmd.is_response(), "{at}");
    assert!(!cmd.is_oneway(), "{at}");
    assert_eq!(cmd.response_code(), code, "{at}: {:?}", cmd.remark);
    assert_eq!(cmd.serialize_type, ty, "{at}");
    assert_eq!(cmd.language, LanguageCode::JAVA, "{at}");
    assert_eq!(cmd.version, c.server_version, "{at}");
    cmd
}

#[test]
fn every_captured_response_decodes_with_its_code_and_encoding() {
    use ResponseCode as R;
    use SerializeType::Json;
    for c in servers() {
        check(&c, "route v409", c.route_v409, R::SUCCESS, Json);
        check(&c, "route v0", c.route_v0, R::SUCCESS, Json);
        check(&c, "cluster info", c.cluster_info, R::SUCCESS, Json);
        check(
            &c,
            "unknown topic",
            c.route_unknown_topic,
            R::TOPIC_NOT_EXIST,
            Json,
        );
        check(
            &c,
            "max offset",
            c.max_offset_response,
            R::SUCCESS,
            c.max_offset_answer,
        );
        check(&c, "send", c.send_response, R::SUCCESS, Json);
        check(&c, "heartbeat", c.heart_beat_response, R::SUCCESS, Json);
        check(&c, "pull", c.pull_response, R::SUCCESS, Json);
        check(&c, "view", c.view_response, R::SUCCESS, Json);
    }
}

#[test]
fn frames_cut_inside_their_header_are_errors_not_panics() {
    for c in servers() {
        for frame in [c.route_v0, c.max_offset_response, c.pull_response] {
            for cut in [5, 8, 20, frame.len() / 2] {
                // Shorter than its declared header: an error. (A cut inside the body
                // leaves a valid shorter body; the length prefix is what guards that.)
                let body = &frame[4..cut];
                let header_len =
                    u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]) & 0x00FF_FFFF;
                if body.len() < 4 + header_len as usize {
                    assert!(
                        RemotingCommand::decode(body).is_err(),
                        "{} cut at {cut}",
                        c.version
                    );
                }
            }
        }
    }
}

#[test]
fn routes_in_both_json_forms_decode_to_the_same_route() {
    for c in servers() {
        let standard = decode(c.route_v409).body;
        let fastjson = decode(c.route_v0).body;
        // The raw bodies really differ in the way that matters.
        let quoted = format!("{{\"0\":\"{}\"}}", c.broker_addr);
        let bare = format!("{{0:\"{}\"}}", c.broker_addr);
        assert!(
            String::from_utf8_lossy(&standard).contains(&quoted),
            "{}",
            c.version
        );
        assert!(
            String::from_utf8_lossy(&fastjson).contains(&bare),
            "{}",
            c.version
        );

        let a: TopicRouteData = decode_route(&standard).unwrap();
        let b: TopicRouteData = decode_route(&fastjson).unwrap();
        assert_eq!(a, b, "{}", c.version);
        assert_eq!(a.broker_datas.len(), 1);
        let bd = &a.broker_datas[0];
        assert_eq!(bd.broker_name, "broker-a");
        assert_eq!(bd.cluster, "DefaultCluster");
        let addr = bd.master_addr().unwrap();
        assert_eq!(addr, c.broker_addr);
        let (host, port) = addr.split_once(':').unwrap();
        assert_eq!(host, "127.0.0.1");
        assert!(port.parse::<u16>().is_ok_and(|p| p > 0));
        // TBW102 as the broker registers it: 8 queues, read + write + inherit.
        let qd = &a.queue_datas[0];
        assert_eq!(
            (qd.read_queue_nums, qd.write_queue_nums, qd.perm.bits()),
            (8, 8, 7)
        );
    }
}

#[test]
fn cluster_info_with_bare_integer_keys_names_the_default_cluster() {
    for c in servers() {
        let body = decode(c.cluster_info).body;
        let info: ClusterInfo = decode_cluster_info(&body).unwrap();
        assert_eq!(info.cluster_addr_table["DefaultCluster"], ["broker-a"]);
        let bd = &info.broker_addr_table["broker-a"];
        assert_eq!(bd.master_addr(), Some(c.broker_addr), "{}", c.version);
        assert_eq!(bd.cluster, "DefaultCluster");
    }
}

#[test]
fn an_unknown_topic_is_code_17_with_the_topic_in_the_remark() {
    for c in servers() {
        let cmd = decode(c.route_unknown_topic);
        assert_eq!(cmd.code, 17);
        assert!(cmd.body.is_empty());
        let remark = cmd.remark.unwrap_or_default();
        assert!(remark.contains("NoSuchTopicForCapture"), "{remark}");
    }
}

#[test]
fn our_binary_header_request_round_trips_byte_for_byte() {
    for c in servers() {
        let cmd = RemotingCommand::decode(&c.max_offset_request[4..]).unwrap();
        assert_eq!(cmd.serialize_type, SerializeType::RocketMq);
        assert_eq!(cmd.request_code(), RequestCode::GET_MAX_OFFSET);
        assert_eq!(cmd.ext_fields.get("topic"), Some(TOPIC));
        assert_eq!(cmd.ext_fields.get("queueId"), Some("0"));
        assert_eq!(cmd.to_frame(), c.max_offset_request, "{}", c.version);
    }
}

#[test]
fn max_offset_answers_carry_the_offset_in_either_encoding() {
    for c in servers() {
        let cmd = decode(c.max_offset_response);
        let request = RemotingCommand::decode(&c.max_offset_request[4..]).unwrap();
        assert_eq!(cmd.opaque, request.opaque, "{}", c.version);
        let h: OffsetResponseHeader = cmd.decode_header().unwrap();
        assert_eq!(h.offset, 0);
    }
}

/// The raw SEND_MESSAGE_V2 went first into the fresh topic: offset 0 everywhere.
#[test]
fn send_response_header_decodes() {
    for c in servers() {
        let cmd = decode(c.send_response);
        let h: SendMessageResponseHeader = cmd.decode_header().unwrap();
        assert_eq!(h.queue_id, 0);
        assert_eq!(h.queue_offset, 0);
        let (_, port) = c.broker_addr.split_once(':').unwrap();
        let port: u16 = port.parse().unwrap();
        // offsetMsgId = store host 127.0.0.1, port, commit log offset 0.
        assert_eq!(
            h.msg_id,
            format!("7F000001{port:08X}{:016X}", 0),
            "{}",
            c.version
        );
        assert_eq!(
            cmd.ext_fields.get(property::MSG_REGION),
            Some("DefaultRegion")
        );
        assert_eq!(cmd.ext_fields.get(property::TRACE_ON), Some("true"));
        // 5.x makes up a UNIQ_KEY for a message that has none and returns it here.
        assert_eq!(
            h.transaction_id.as_deref(),
            raw_uniq_key(&c),
            "{}",
            c.version
        );
    }
}

/// The UNIQ_KEY the 5.3.3 broker gave the raw message (4.9.7 gives none).
fn raw_uniq_key(c: &Captured) -> Option<&'static str> {
    (c.version == "5.3.3").then_some("FD00000000000000000000000000000225DA5FFD2B2791F87DD10000")
}

#[test]
fn heartbeat_answers_are_plain_success() {
    for c in servers() {
        let cmd = decode(c.heart_beat_response);
        assert!(cmd.body.is_empty());
        let v2 = cmd.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2");
        assert_eq!(
            v2,
            (c.version == "5.3.3").then_some("true"),
            "{}",
            c.version
        );
    }
}

/// What the example sent, in queue order.
struct Sent {
    body: Vec<u8>,
    tags: &'static str,
    keys: &'static [&'static str],
    user_prop: Option<(&'static str, &'static str)>,
    compressed: bool,
}

fn sent() -> [Sent; 4] {
    [
        Sent {
            body: b"sent with a raw SEND_MESSAGE_V2".to_vec(),
            tags: "raw",
            keys: &[],
            user_prop: None,
            compressed: false,
        },
        Sent {
            body: b"hello 1".to_vec(),
            tags: "TagA",
            keys: &["key-1"],
            user_prop: None,
            compressed: false,
        },
        Sent {
            body: b"hello 2".to_vec(),
            tags: "TagB",
            keys: &[],
            user_prop: Some(("color", "blue")),
            compressed: false,
        },
        Sent {
            body: "compress me please; ".repeat(300).into_bytes(),
            tags: "TagZ",
            keys: &[],
            user_prop: None,
            compressed: true,
        },
    ]
}

fn check_message(c: &Captured, m: &MessageExt, want: &Sent, queue_offset: i64) {
    let at = format!("{} message {queue_offset}", c.version);
    assert_eq!(m.message().topic(), TOPIC, "{at}");
    assert_eq!(m.message().body(), want.body, "{at}");
    assert_eq!(m.message().tags(), Some(want.tags), "{at}");
    assert_eq!(m.message().keys().collect::<Vec<_>>(), want.keys, "{at}");
    if let Some((k, v)) = want.user_prop {
        assert_eq!(m.message().property(k), Some(v), "{at}");
    }
    assert_eq!(m.queue_id(), 0, "{at}");
    assert_eq!(m.queue_offset(), queue_offset, "{at}");
    assert_eq!(
        m.sys_flag() & sys_flag::COMPRESSED != 0,
        want.compressed,
        "{at}"
    );
    assert_eq!(m.store_host().to_string(), c.broker_addr, "{at}");
    // Everything connected over loopback.
    assert!(m.born_host().ip().is_loopback(), "{at}: {}", m.born_host());
    assert!(
        m.store_timestamp() >= m.born_timestamp() - std::time::Duration::from_secs(1),
        "{at}"
    );
    assert_eq!(m.reconsume_times(), 0, "{at}");
    // Our producer always sets a UNIQ_KEY; the raw send had none.
    let uniq = m.message().property(property::UNIQ_KEY);
    if queue_offset == 0 {
        assert_eq!(uniq, raw_uniq_key(c), "{at}");
    } else {
        assert_eq!(uniq.map(str::len), Some(32), "{at}");
    }
}

#[test]
fn pulled_messages_match_what_was_sent_including_the_compressed_one() {
    for c in servers() {
        let cmd = decode(c.pull_response);
        assert_eq!(cmd.remark.as_deref(), Some("FOUND"));
        let h: PullMessageResponseHeader = cmd.decode_header().unwrap();
        assert_eq!(h.suggest_which_broker_id, 0);
        assert_eq!((h.min_offset, h.next_begin_offset, h.max_offset), (0, 4, 4));

        let opts = DecodeOptions::new().check_crc(true);
        let msgs = decode_messages(&cmd.body, opts).unwrap();
        assert_eq!(msgs.len(), 4, "{}", c.version);
        for (i, (m, want)) in msgs.iter().zip(sent()).enumerate() {
            check_message(&c, m, &want, i as i64);
        }
        // Records follow each other in the commit log, in queue order.
        assert_eq!(msgs[0].commit_log_offset(), 0);
        for w in msgs.windows(2) {
            assert_eq!(
                w[1].commit_log_offset(),
                w[0].commit_log_offset() + i64::from(w[0].store_size())
            );
        }
        let send: SendMessageResponseHeader = decode(c.send_response).decode_header().unwrap();
        assert_eq!(msgs[0].offset_msg_id(), send.msg_id);
        // The compressed body travels compressed: the record is far smaller than the text.
        assert!(msgs[3].store_size() < 1000, "{}", msgs[3].store_size());
        assert!(
            decode_messages(&cmd.body, DecodeOptions::new().decompress(false)).unwrap()[3]
                .message()
                .body()
                .len()
                < 200
        );
    }
}

#[test]
fn view_by_id_returns_the_raw_message() {
    for c in servers() {
        let cmd = decode(c.view_response);
        let msgs = decode_messages(&cmd.body, DecodeOptions::new().check_crc(true)).unwrap();
        assert_eq!(msgs.len(), 1);
        check_message(&c, &msgs[0], &sent()[0], 0);
        let pulled = decode_messages(&decode(c.pull_response).body, DecodeOptions::new()).unwrap();
        assert_eq!(msgs[0], pulled[0], "{}", c.version);
    }
}
