//! Captures raw response frames from a real name server and broker, for the data-driven
//! codec tests in `tests/captured.rs`.
//!
//! Requests are encoded with this crate's codec but written over a plain blocking
//! `std::net::TcpStream`, and each answer is saved byte for byte (the 4-byte length
//! prefix included) as `<out>/<version>/<name>.bin`, so the tests decode exactly what the
//! server wrote, with nothing of our remoting layer in between.
//!
//! ```sh
//! cargo run -p rocketmq-blocking-tools --bin capture_frames                     # starts RocketMQ 5.3.3
//! cargo run -p rocketmq-blocking-tools --bin capture_frames -- --version 4.9.7  # starts RocketMQ 4.9.7
//! NAMESRV_ADDR=127.0.0.1:9876 cargo run -p rocketmq-blocking-tools --bin capture_frames -- --version 5.3.3
//! ```
//!
//! With `NAMESRV_ADDR` set, that cluster is used and `--version` only names the output
//! directory. Options: `--version V` (default 5.3.3), `--out DIR` (default the main
//! crate's `tests/data`).

use std::error::Error;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rocketmq_blocking::message::{
    decode_messages, decode_offset_msg_id, properties_to_string, property, DecodeOptions,
};
use rocketmq_blocking::protocol::header::{
    GetRouteInfoRequestHeader, PullMessageRequestHeader, QueueOffsetRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, ViewMessageRequestHeader,
};
use rocketmq_blocking::protocol::heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, SubscriptionData,
};
use rocketmq_blocking::protocol::{
    decode_cluster_info, ClusterInfo, RemotingCommand, RequestCode, SerializeType,
    DEFAULT_MAX_FRAME,
};
use rocketmq_blocking::testkit::{Cluster, DEFAULT_VERSION};
use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::TopicConfig;
use rocketmq_blocking::{Message, Producer};

// Fixed names and bodies: `tests/captured.rs` checks the frames against these.
const TOPIC: &str = "CaptureTopic";
const PRODUCER_GROUP: &str = "capture_producer";
const CONSUMER_GROUP: &str = "capture_consumer";
const RAW_BODY: &str = "sent with a raw SEND_MESSAGE_V2";
/// Longer than the producer's 4096-byte threshold and repetitive, so it is stored
/// zlib-compressed and stays small.
const COMPRESSIBLE_UNIT: &str = "compress me please; ";
const COMPRESSIBLE_REPEAT: usize = 300;

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut version = DEFAULT_VERSION.to_string();
    let mut out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--version", Some(v)) => version = v,
            ("--out", Some(d)) => out = PathBuf::from(d),
            _ => {
                return Err(
                    format!("usage: capture_frames [--version V] [--out DIR] (bad {a:?})").into(),
                )
            }
        }
    }
    // Keep the cluster alive until the end of main when we started it.
    let (namesrv, _cluster) = match std::env::var("NAMESRV_ADDR") {
        Ok(a) if !a.trim().is_empty() => (a, None),
        _ => {
            eprintln!("starting RocketMQ {version}...");
            let c = Cluster::builder().version(&version).start()?;
            (c.namesrv_addr(), Some(c))
        }
    };
    let dir = out.join(&version);
    std::fs::create_dir_all(&dir)?;
    let first_namesrv = namesrv
        .split(';')
        .next()
        .unwrap_or(&namesrv)
        .trim()
        .to_string();
    let mut cap = Capture { dir };

    // --- name server ------------------------------------------------------------
    let mut ns = Conn::open(&first_namesrv)?;
    let route = |version: i32| {
        let header = GetRouteInfoRequestHeader {
            topic: "TBW102".into(),
            accept_standard_json_only: None,
        };
        let mut r =
            RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
        r.version = version;
        r
    };
    // Version ≥ 401 gets standard JSON; version 0 without `acceptStandardJsonOnly` is what
    // an old client sends, and gets fastjson's bare integer keys if the server still does that.
    cap.save("route_tbw102_v409", &ns.call(&route(409))?)?;
    cap.save("route_tbw102_v0", &ns.call(&route(0))?)?;
    let cluster_frame = ns.call(&RemotingCommand::request(
        RequestCode::GET_BROKER_CLUSTER_INFO,
    ))?;
    cap.save("cluster_info", &cluster_frame)?;
    let header = GetRouteInfoRequestHeader {
        topic: "NoSuchTopicForCapture".into(),
        accept_standard_json_only: Some(true),
    };
    let unknown =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    cap.save("route_unknown_topic", &ns.call(&unknown)?)?;

    let info: ClusterInfo = decode_cluster_info(&decode(&cluster_frame)?.body)?;
    let broker = info
        .broker_addr_table
        .values()
        .find_map(|b| b.master_addr().map(str::to_string))
        .ok_or("the cluster info lists no master broker")?;

    // --- broker -----------------------------------------------------------------
    Admin::builder()
        .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr(&namesrv))
        .start()?
        .create_topic(&TopicConfig::new(TOPIC, 1))?;
    let mut br = Conn::open(&broker)?;

    let header = QueueOffsetRequestHeader {
        topic: TOPIC.into(),
        queue_id: 0,
        broker_name: None,
    };
    let mut max_offset = RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header);
    max_offset.serialize_type = SerializeType::RocketMq;
    cap.save("get_max_offset_request_rocketmq", &max_offset.to_frame())?;
    cap.save("get_max_offset_response", &br.call(&max_offset)?)?;

    let props = [(property::WAIT, "true"), (property::TAGS, "raw")];
    let header = SendMessageRequestHeaderV2 {
        producer_group: PRODUCER_GROUP.into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        properties: Some(properties_to_string(props)),
        reconsume_times: Some(0),
        unit_mode: false,
        max_reconsume_times: None,
        batch: false,
        broker_name: None,
    };
    let send = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(RAW_BODY.as_bytes().to_vec());
    let send_frame = br.call(&send)?;
    cap.save("send_message_v2_response", &send_frame)?;
    let sent: SendMessageResponseHeader = decode(&send_frame)?.decode_header()?;

    // Three more through the crate's producer: tag + key, a user property, compressed.
    let producer = Producer::builder(PRODUCER_GROUP)
        .client_options(ClientOptions::new().namesrv_addr(&namesrv))
        .start()?;
    let mut with_prop = Message::new(TOPIC, "hello 2").with_tags("TagB");
    with_prop.put_user_property("color", "blue")?;
    for m in [
        Message::new(TOPIC, "hello 1")
            .with_tags("TagA")
            .with_keys(["key-1"]),
        with_prop,
        Message::new(TOPIC, COMPRESSIBLE_UNIT.repeat(COMPRESSIBLE_REPEAT)).with_tags("TagZ"),
    ] {
        producer.send(&m)?;
    }
    producer.shutdown();

    // The broker pulls only for a group it knows, with a subscription from a heartbeat.
    let heartbeat = HeartbeatData {
        client_id: "127.0.0.1@capture_frames".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: CONSUMER_GROUP.into(),
            consume_type: ConsumeType::ConsumeActively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: vec![SubscriptionData {
                class_filter_mode: false,
                topic: TOPIC.into(),
                sub_string: "*".into(),
                tags_set: Default::default(),
                code_set: Default::default(),
                sub_version: now_millis(),
                expression_type: "TAG".into(),
            }],
            unit_mode: false,
        }],
        producer_data_set: vec![],
    };
    let hb = RemotingCommand::request(RequestCode::HEART_BEAT)
        .with_body(serde_json::to_vec(&heartbeat)?);
    cap.save("heart_beat_response", &br.call(&hb)?)?;

    let header = PullMessageRequestHeader {
        consumer_group: CONSUMER_GROUP.into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: 0, // no commit, no suspend: answer at once
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: None,
        sub_version: 0,
        expression_type: None,
        broker_name: None,
    };
    let pull = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
    cap.save("pull_message_response", &br.call(&pull)?)?;

    let (_, offset) = decode_offset_msg_id(&sent.msg_id)?;
    let view = RemotingCommand::request_with_header(
        RequestCode::VIEW_MESSAGE_BY_ID,
        &ViewMessageRequestHeader { offset },
    );
    cap.save("view_message_response", &br.call(&view)?)?;

    eprintln!("frames written to {}", cap.dir.display());
    Ok(())
}

struct Capture {
    dir: PathBuf,
}

impl Capture {
    /// Writes the frame and prints what our decoders make of it.
    fn save(&mut self, name: &str, frame: &[u8]) -> Res<()> {
        let path = self.dir.join(format!("{name}.bin"));
        std::fs::write(&path, frame)?;
        let cmd = decode(frame)?;
        let mut what = format!(
            "{name}: {} bytes, {:?} header, code {}, remark {:?}",
            frame.len(),
            cmd.serialize_type,
            cmd.code,
            cmd.remark.as_deref().unwrap_or("")
        );
        if name.starts_with("pull") || name.starts_with("view") {
            if let Ok(msgs) = decode_messages(&cmd.body, DecodeOptions::new()) {
                what.push_str(&format!(", {} messages", msgs.len()));
            }
        }
        println!("{what}");
        Ok(())
    }
}

/// Decodes a whole frame (length prefix included).
fn decode(frame: &[u8]) -> Res<RemotingCommand> {
    let rest = frame
        .get(4..)
        .ok_or("frame shorter than its length prefix")?;
    Ok(RemotingCommand::decode(rest)?)
}

/// One blocking connection that sends a request and reads frames until its response.
struct Conn {
    stream: TcpStream,
    addr: String,
}

impl Conn {
    fn open(addr: &str) -> Res<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            addr: addr.to_string(),
        })
    }

    /// Sends `request` and returns the raw frame of its response.
    fn call(&mut self, request: &RemotingCommand) -> Res<Vec<u8>> {
        self.stream.write_all(&request.to_frame())?;
        loop {
            let frame = self.read_frame()?;
            let cmd = decode(&frame)?;
            if cmd.is_response() && cmd.opaque == request.opaque {
                return Ok(frame);
            }
            // Anything else (a broker-initiated request) is not what we wait for.
            eprintln!(
                "{}: skipping frame with code {} opaque {}",
                self.addr, cmd.code, cmd.opaque
            );
        }
    }

    fn read_frame(&mut self) -> Res<Vec<u8>> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let len = i32::from_be_bytes(prefix);
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| (4..=DEFAULT_MAX_FRAME).contains(&n))
            .ok_or_else(|| format!("{}: bad frame length {len}", self.addr))?;
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&prefix);
        self.stream.read_exact(&mut frame[4..])?;
        Ok(frame)
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
