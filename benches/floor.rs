//! The floor (issue 30): the least work that sends the same messages over the same
//! protocol on this machine, as a measuring stick for `rmq bench`. It is not a client:
//! one SEND_MESSAGE_V2 frame (1 KiB body, `ROCKETMQ` header) is encoded once per
//! connection and written again and again with only its opaque changed, on a plain
//! blocking `TcpStream` to the topic's broker, and each response is read, decoded and
//! matched by opaque. No pools, no futures, no routing, no retries.
//!
//! ```sh
//! cargo bench --bench floor --features cli -- sync1 sync64   # NAMESRV_ADDR, or a local cluster
//! ```
//!
//! Workloads: `sync1` (ping-pong on one connection), `sync8` and `sync64` (that many
//! threads, each ping-pong on a connection of its own), `batch64` (the same with one
//! SEND_BATCH_MESSAGE of `FLOOR_BATCH` (16) messages per call, encoded once; `FLOOR_COUNT`
//! counts messages), `async` (one connection, one
//! thread writing while fewer than 1,024 requests are unanswered, one reading; `rmq bench
//! produce --mode async` keeps the same window), `drain` (the topic's 8 queues filled
//! with `FLOOR_COUNT` messages, unmeasured, then pulled back, 32 per PULL_MESSAGE, one
//! queue after another on one connection (the filling, by the client's producer in
//! batches of 32, is not measured), each message decoded as a client must before
//! it can hand it to a user: every field of the store layout, the topic and the
//! properties as strings, the properties split into key/value pairs, the body copied into
//! a buffer of its own and the offset message id computed as Java's `MessageDecoder`
//! does; `rmq bench consume --topic <the printed topic>` drains the same messages) and
//! `drain-sizes` (the same pulls, each message only stepped over by its size: the first
//! drain floor of issue 30, kept for reference). The drains fill the topic once and each
//! drains all of it; they are measured from the first PULL_MESSAGE, so connecting and
//! filling are not counted. `FLOOR_COUNT` sets the measured messages per workload (default
//! 10,000 for one sender, 100,000 otherwise), after a warm-up of half as many (the drains
//! have none). Each prints one JSON line of the shape `rmq bench` prints: TPS, latency
//! p50/p99 in ms, the process's CPU µs per message, peak RSS.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rocketmq_blocking::message::{decode_messages, DecodeOptions};
use rocketmq_blocking::protocol::header::{
    PullMessageRequestHeader, SendMessageRequestHeaderV2Ref,
};
use rocketmq_blocking::protocol::{
    RemotingCommand, RemotingCommandRef, RequestCode, SerializeType,
};
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{Admin, ClientOptions, Message, MessageQueue, Producer, TopicConfig};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Where the opaque sits in a `ROCKETMQ` request frame: after the frame length (4), the
/// header length and type (4), the code (2), the language (1) and the version (2).
const OPAQUE_AT: usize = 13;

fn main() -> Result<()> {
    // `cargo bench` passes `--bench`; anything else names a workload.
    let mut workloads: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if workloads.is_empty() {
        workloads = vec!["sync1".into(), "sync8".into(), "sync64".into()];
    }
    let (namesrv, _cluster) = match std::env::var("NAMESRV_ADDR") {
        Ok(a) if !a.trim().is_empty() => (a, None),
        _ => {
            let c = Cluster::builder().start()?;
            (c.namesrv_addr(), Some(c))
        }
    };
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&namesrv))
        .start()?;
    let topic = format!("FloorBench_{}", std::process::id());
    admin.create_topic(&TopicConfig::new(&topic, 8))?;
    // The name server learns of a new topic from the broker's next registration.
    let deadline = Instant::now() + Duration::from_secs(30);
    let route = loop {
        match admin.topic_route(&topic) {
            Ok(r) if !r.broker_datas.is_empty() => break r,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Ok(_) => return Err("the topic has no broker".into()),
            Err(e) => return Err(e.into()),
        }
    };
    let broker = route
        .broker_datas
        .first()
        .ok_or("the topic has no broker")?;
    let addr = broker
        .master_addr()
        .ok_or("the broker has no master")?
        .to_string();
    let broker_name = broker.broker_name.clone();
    let mut filled = false;
    for w in &workloads {
        if w == "drain" || w == "drain-sizes" {
            let count = std::env::var("FLOOR_COUNT")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(100_000);
            if !std::mem::replace(&mut filled, true) {
                fill(&namesrv, &topic, &broker_name, count)?;
            }
            run_drain(w, &addr, &topic, &broker_name, w == "drain")?;
            continue;
        }
        if w == "async" {
            let count = std::env::var("FLOOR_COUNT")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(100_000);
            run_async(&addr, &topic, &broker_name, count)?;
            continue;
        }
        // `syncN`: one message per call; `batchN`: `FLOOR_BATCH` (16) per call.
        let (threads, batch) = match (w.strip_prefix("sync"), w.strip_prefix("batch")) {
            (Some(n), _) => (n.parse().ok(), 1),
            (_, Some(n)) => (n.parse().ok(), floor_batch()),
            _ => (None, 1),
        };
        let threads: usize = threads.filter(|&t| t > 0).ok_or_else(|| {
            format!(
                "unknown workload {w}: sync1, sync8, sync64, batch64, async, drain, drain-sizes"
            )
        })?;
        let count: usize = std::env::var("FLOOR_COUNT")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(if threads == 1 { 10_000 } else { 100_000 });
        run(w, &addr, &topic, &broker_name, threads, batch, count)?;
    }
    Ok(())
}

/// Messages per SEND_BATCH_MESSAGE in the `batchN` workloads (`FLOOR_BATCH`, default 16,
/// as `benches/compare-java.sh`'s batch row).
fn floor_batch() -> usize {
    std::env::var("FLOOR_BATCH")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&b| b > 0)
        .unwrap_or(16)
}

/// Requests in flight at most in the `async` workload.
const WINDOW: usize = 1024;

/// The `async` workload: a warm-up of `count / 2`, then `count` measured messages on one
/// connection, one thread writing as long as fewer than [`WINDOW`] are unanswered and one
/// reading the responses.
fn run_async(addr: &str, topic: &str, broker_name: &str, count: usize) -> Result<()> {
    let mut conn = Sender::connect(addr, topic, broker_name, 0)?;
    conn.pipeline(count / 2, None)?;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut lat = vec![0u32; count];
    conn.pipeline(count, Some(&mut lat))?;
    report(
        "async",
        1,
        1,
        t0.elapsed(),
        cpu_seconds().zip(cpu0).map(|(b, a)| b - a),
        lat,
    )
}

/// Messages asked for per PULL_MESSAGE in the `drain` workload (the Java default).
const PULL_BATCH: i32 = 32;

/// Queues of the drain topic, each filled with an eighth of the messages.
const QUEUES: usize = 8;

/// Fills the topic's 8 queues with `count` messages of 1 KiB for the drains (not
/// measured): with the client's producer, in batches of 32, each batch tried again while
/// the broker refuses it (a busy broker answers SYSTEM_BUSY).
fn fill(namesrv: &str, topic: &str, broker_name: &str, count: usize) -> Result<()> {
    let producer = Producer::builder("floor_fill_group")
        .client_options(ClientOptions::new().namesrv_addr(namesrv))
        .start()?;
    let batch: Vec<Message> = (0..PULL_BATCH)
        .map(|_| Message::new(topic, vec![b'x'; 1024]))
        .collect();
    for q in 0..QUEUES {
        let mq = MessageQueue::new(topic, broker_name, q as i32);
        let mut left = count / QUEUES;
        while left > 0 {
            let n = left.min(batch.len());
            let mut tries = 0;
            while let Err(e) = producer.send_batch_to_queue(&batch[..n], &mq) {
                tries += 1;
                if tries == 50 {
                    return Err(e.into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            left -= n;
        }
    }
    producer.shutdown();
    Ok(())
}

/// The `drain` (with `decode`) and `drain-sizes` workloads: pulls the filled topic back
/// queue after queue; prints the topic so that `rmq bench consume` can drain the same
/// messages.
fn run_drain(name: &str, addr: &str, topic: &str, broker_name: &str, decode: bool) -> Result<()> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let (mut frame, mut response) = (Vec::new(), Vec::with_capacity(64 * 1024));
    let mut opaque = 0;
    let mut got = 0;
    let mut check = 0u64;
    for q in 0..QUEUES {
        let mut offset = 0i64;
        loop {
            let header = PullMessageRequestHeader {
                consumer_group: "floor_drain_group".into(),
                topic: topic.into(),
                queue_id: q as i32,
                queue_offset: offset,
                max_msg_nums: PULL_BATCH,
                sys_flag: 4, // the subscription is in the request
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some("*".into()),
                sub_version: 0,
                expression_type: Some("TAG".into()),
                broker_name: Some(broker_name.into()),
            };
            opaque += 1;
            frame.clear();
            RemotingCommand::encode_request(
                RequestCode::PULL_MESSAGE,
                &header,
                opaque,
                0,
                &[],
                SerializeType::RocketMq,
                &mut frame,
            );
            stream.write_all(&frame)?;
            let mut len = [0u8; 4];
            stream.read_exact(&mut len)?;
            let len = u32::from_be_bytes(len) as usize;
            if len > 16 << 20 {
                return Err(format!("a response frame of {len} bytes").into());
            }
            response.resize(len, 0);
            stream.read_exact(&mut response)?;
            let r = RemotingCommandRef::decode(&response)?;
            if r.code != 0 {
                break; // PULL_NOT_FOUND: the queue is drained
            }
            let n = if decode {
                let msgs = decode_stored(r.body)?;
                if got == 0 {
                    same_as_the_client(r.body, &msgs)?;
                }
                // What a user reads of each; keeps the decoding from being optimised away.
                check = msgs.iter().fold(check, |c, m| {
                    c.wrapping_add(m.queue_offset as u64)
                        .wrapping_add(m.body.len() as u64)
                        .wrapping_add(m.msg_id.len() as u64)
                        .wrapping_add(m.properties.len() as u64)
                });
                msgs.len() as i64
            } else {
                // Each stored message starts with its total size.
                let (mut at, mut n) = (0usize, 0i64);
                while at + 4 <= r.body.len() {
                    let size = u32::from_be_bytes([
                        r.body[at],
                        r.body[at + 1],
                        r.body[at + 2],
                        r.body[at + 3],
                    ]);
                    at += (size as usize).max(4);
                    n += 1;
                }
                n
            };
            offset += n;
            got += n as usize;
        }
    }
    let elapsed = t0.elapsed();
    let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    eprintln!("{name} topic {topic} (check {check:x})");
    println!(
        "{{\"workload\":\"{name}\",\"topic\":\"{topic}\",\"messages\":{got},\"elapsedMs\":{:.1},\"tps\":{:.1},\"cpuUsPerMsg\":{},\"peakRssKiB\":{}}}",
        elapsed.as_secs_f64() * 1000.0,
        got as f64 / elapsed.as_secs_f64().max(1e-9),
        cpu.map_or("null".into(), |c| format!("{:.2}", c * 1e6 / got.max(1) as f64)),
        peak_rss_kib().map_or("null".into(), |k| k.to_string()),
    );
    Ok(())
}

/// A stored message decoded as a client hands it to a user (Java 4.9 `MessageDecoder.decode`
/// with the body read and `MessageClientExt`'s fields): what the `drain` floor does per
/// message, and no more.
#[allow(dead_code)] // the fields are what a user reads; the drain reads a few
struct Decoded {
    store_size: i32,
    body_crc: i32,
    queue_id: i32,
    flag: i32,
    queue_offset: i64,
    commit_log_offset: i64,
    sys_flag: i32,
    born_timestamp: i64,
    born_host: std::net::SocketAddr,
    store_timestamp: i64,
    store_host: std::net::SocketAddr,
    reconsume_times: i32,
    prepared_transaction_offset: i64,
    topic: String,
    properties: Vec<(String, String)>,
    body: Vec<u8>,
    /// The offset message id: store host (ip, port as 4 bytes) and commit log offset
    /// in uppercase hex, as Java's `MessageDecoder.createMessageId`.
    msg_id: String,
}

/// Decodes every stored message of a pull body (the broker's layout: magic code V1 with a
/// 1-byte topic length, or V2 with 2; IPv4 or IPv6 hosts by sysFlag bits 0x10 and 0x20).
/// No CRC check and no decompression, as neither the bench's bodies nor Java's default
/// decode need them.
fn decode_stored(body: &[u8]) -> Result<Vec<Decoded>> {
    let mut out = Vec::with_capacity(32);
    let mut at = 0;
    while at < body.len() {
        let size = i32::from_be_bytes(take(body, &mut at, 4)?.try_into()?);
        let rec = take(body, &mut at, (size as usize).saturating_sub(4))?;
        // A cursor over this record.
        let mut p = 0;
        let int =
            |p: &mut usize| -> Result<i32> { Ok(i32::from_be_bytes(take(rec, p, 4)?.try_into()?)) };
        let long =
            |p: &mut usize| -> Result<i64> { Ok(i64::from_be_bytes(take(rec, p, 8)?.try_into()?)) };
        let magic = int(&mut p)?;
        let v2 = match magic as u32 {
            0xDAA3_20A7 => false,
            0xDAA3_20AB => true,
            m => return Err(format!("magic code {m:#x}").into()),
        };
        let body_crc = int(&mut p)?;
        let queue_id = int(&mut p)?;
        let flag = int(&mut p)?;
        let queue_offset = long(&mut p)?;
        let commit_log_offset = long(&mut p)?;
        let sys_flag = int(&mut p)?;
        let born_timestamp = long(&mut p)?;
        let (born_host, _) = host(rec, &mut p, sys_flag & 0x10 != 0)?;
        let store_timestamp = long(&mut p)?;
        let (store_host, store_host_bytes) = host(rec, &mut p, sys_flag & 0x20 != 0)?;
        let reconsume_times = int(&mut p)?;
        let prepared_transaction_offset = long(&mut p)?;
        let body_len = int(&mut p)?;
        let body = take(rec, &mut p, body_len.max(0) as usize)?.to_vec();
        let topic_len = if v2 {
            i16::from_be_bytes(take(rec, &mut p, 2)?.try_into()?) as usize
        } else {
            take(rec, &mut p, 1)?[0] as usize
        };
        let topic = String::from_utf8_lossy(take(rec, &mut p, topic_len)?).into_owned();
        let props_len = i16::from_be_bytes(take(rec, &mut p, 2)?.try_into()?).max(0) as usize;
        let props = String::from_utf8_lossy(take(rec, &mut p, props_len)?);
        let properties = props
            .split('\u{2}')
            .filter_map(|kv| kv.split_once('\u{1}'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut msg_id = String::with_capacity(2 * (store_host_bytes.len() + 8));
        for b in store_host_bytes
            .iter()
            .chain(&commit_log_offset.to_be_bytes())
        {
            for nibble in [b >> 4, b & 0xF] {
                msg_id.push(char::from(b"0123456789ABCDEF"[nibble as usize]));
            }
        }
        out.push(Decoded {
            store_size: size,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            topic,
            properties,
            body,
            msg_id,
        });
    }
    Ok(out)
}

/// Checks the floor's decoding of the first pull against the client's (once per drain).
fn same_as_the_client(body: &[u8], msgs: &[Decoded]) -> Result<()> {
    let theirs = decode_messages(body, DecodeOptions::new())?;
    let same = theirs.len() == msgs.len()
        && theirs.iter().zip(msgs).all(|(t, m)| {
            t.queue_offset() == m.queue_offset
                && t.commit_log_offset() == m.commit_log_offset
                && t.store_host() == m.store_host
                && t.born_host() == m.born_host
                && t.topic() == m.topic
                && t.body() == m.body.as_slice()
                && t.offset_msg_id() == m.msg_id
                && {
                    // The client keeps properties sorted by key, a key once (the broker
                    // may store one twice: WAIT); the wire has them in order.
                    let mut ours: Vec<(&str, &str)> = m
                        .properties
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    ours.sort_unstable();
                    ours.dedup_by_key(|(k, _)| *k);
                    let mut client: Vec<(&str, &str)> = t.properties().collect();
                    client.sort_unstable();
                    ours == client
                }
        });
    if same {
        Ok(())
    } else {
        Err("the floor decodes the first pull differently from the client".into())
    }
}

/// `n` bytes of `buf` at `*at`, moving `*at` past them.
fn take<'a>(buf: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8]> {
    let s = buf
        .get(*at..at.saturating_add(n))
        .ok_or("a stored message is cut short")?;
    *at += n;
    Ok(s)
}

/// A stored host (4 or 16 address bytes, then the port as 4) and its bytes as the
/// message id writes them.
fn host<'a>(rec: &'a [u8], p: &mut usize, v6: bool) -> Result<(std::net::SocketAddr, &'a [u8])> {
    let raw = take(rec, p, if v6 { 20 } else { 8 })?;
    let (ip, port) = raw.split_at(raw.len() - 4);
    let ip: std::net::IpAddr = if v6 {
        <[u8; 16]>::try_from(ip)?.into()
    } else {
        <[u8; 4]>::try_from(ip)?.into()
    };
    let port = i32::from_be_bytes(port.try_into()?) as u16;
    Ok((std::net::SocketAddr::new(ip, port), raw))
}

/// One workload: a warm-up of `count / 2`, then `count` measured messages, split across
/// `threads` connections.
fn run(
    name: &str,
    addr: &str,
    topic: &str,
    broker_name: &str,
    threads: usize,
    batch: usize,
    count: usize,
) -> Result<()> {
    // Calls per thread: `count` messages in all, `batch` a call.
    let per = (count / threads / batch).max(1);
    let mut conns = (0..threads)
        .map(|i| Sender::connect_batch(addr, topic, broker_name, i, batch))
        .collect::<Result<Vec<_>>>()?;
    std::thread::scope(|s| -> Result<()> {
        for c in conns.iter_mut() {
            s.spawn(move || c.send_n(per / 2, false));
        }
        Ok(())
    })?;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let lat: Vec<Vec<u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter_mut()
            .map(|c| s.spawn(move || c.send_n(per, true)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a sender panicked".into())))
            .collect::<Result<Vec<_>>>()
    })?;
    let elapsed = t0.elapsed();
    let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    report(
        name,
        threads,
        batch,
        elapsed,
        cpu,
        lat.into_iter().flatten().collect(),
    )
}

/// Prints a workload's JSON line from its calls' latencies (µs), `batch` messages a call,
/// and the CPU it took.
fn report(
    name: &str,
    threads: usize,
    batch: usize,
    elapsed: Duration,
    cpu: Option<f64>,
    mut all: Vec<u32>,
) -> Result<()> {
    all.sort_unstable();
    let calls = all.len();
    let n = calls * batch;
    let pct = |q: f64| {
        all.get(((calls as f64 * q) as usize).min(calls.saturating_sub(1)))
            .copied()
    };
    let ms = |us: Option<u32>| us.map_or(0.0, |u| u as f64 / 1000.0);
    println!(
        "{{\"workload\":\"{name}\",\"threads\":{threads},\"messages\":{n},\"elapsedMs\":{:.1},\"tps\":{:.1},\"latencyMs\":{{\"p50\":{:.3},\"p99\":{:.3}}},\"cpuUsPerMsg\":{},\"peakRssKiB\":{}}}",
        elapsed.as_secs_f64() * 1000.0,
        n as f64 / elapsed.as_secs_f64().max(1e-9),
        ms(pct(0.5)),
        ms(pct(0.99)),
        cpu.map_or("null".into(), |c| format!("{:.2}", c * 1e6 / n.max(1) as f64)),
        peak_rss_kib().map_or("null".into(), |k| k.to_string()),
    );
    Ok(())
}

/// A SEND_BATCH_MESSAGE body of `n` 1 KiB messages in the layout of Java's
/// `MessageDecoder.encodeMessages`: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, the body
/// and the properties, each with its length.
fn batch_body(n: usize) -> Vec<u8> {
    let body = [b'x'; 1024];
    let props = "WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F0000010FA018B4AAC2279E5D800000\u{2}";
    let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + props.len();
    let mut out = Vec::with_capacity(n * total);
    for _ in 0..n {
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&[0; 8]); // magic code and body CRC
        out.extend_from_slice(&0i32.to_be_bytes()); // flag
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&(props.len() as i16).to_be_bytes());
        out.extend_from_slice(props.as_bytes());
    }
    out
}

/// One connection with its pre-encoded frame and a reusable response buffer.
struct Sender {
    stream: TcpStream,
    frame: Vec<u8>,
    response: Vec<u8>,
    next: i32,
}

impl Sender {
    fn connect(addr: &str, topic: &str, broker_name: &str, index: usize) -> Result<Sender> {
        Sender::connect_batch(addr, topic, broker_name, index, 1)
    }

    /// A connection whose frame is one SEND_MESSAGE_V2 (`batch` 1) or a SEND_BATCH_MESSAGE
    /// of `batch` messages, each with the properties a producer gives a batched message
    /// (WAIT and a fixed UNIQ_KEY of the usual length).
    fn connect_batch(
        addr: &str,
        topic: &str,
        broker_name: &str,
        index: usize,
        batch: usize,
    ) -> Result<Sender> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let (code, body) = if batch > 1 {
            (RequestCode::SEND_BATCH_MESSAGE, batch_body(batch))
        } else {
            (RequestCode::SEND_MESSAGE_V2, vec![b'x'; 1024])
        };
        let header = SendMessageRequestHeaderV2Ref {
            producer_group: "floor_bench_group",
            topic,
            default_topic: "TBW102",
            default_topic_queue_nums: 4,
            queue_id: (index % 8) as i32,
            sys_flag: 0,
            born_timestamp: 1_718_000_000_000,
            flag: 0,
            properties: Some("WAIT\u{1}true\u{2}"),
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: None,
            batch: batch > 1,
            broker_name: Some(broker_name),
        };
        let mut frame = Vec::new();
        let marker = 0x7A7B_7C7D;
        RemotingCommand::encode_request(
            code,
            &header,
            marker,
            0,
            &body,
            SerializeType::RocketMq,
            &mut frame,
        );
        if frame.get(OPAQUE_AT..OPAQUE_AT + 4) != Some(&marker.to_be_bytes()[..]) {
            return Err("the opaque is not where the ROCKETMQ layout puts it".into());
        }
        Ok(Sender {
            stream,
            frame,
            response: Vec::with_capacity(4096),
            next: (index as i32) << 24,
        })
    }

    /// Sends `n` messages with up to [`WINDOW`] unanswered: this thread writes, a scoped
    /// one reads and matches; each latency in µs goes to `lat` (indexed by sequence).
    fn pipeline(&mut self, n: usize, lat: Option<&mut [u32]>) -> Result<()> {
        use std::sync::atomic::{AtomicU64, Ordering};
        let (slots, freed) = crossbeam_channel::bounded::<()>(WINDOW);
        let sent_at: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let t0 = Instant::now();
        let first = self.next.wrapping_add(1);
        let mut reader = self.stream.try_clone()?;
        let sent_at = &sent_at;
        std::thread::scope(|s| -> Result<()> {
            let read = s.spawn(move || -> Result<Vec<(usize, u32)>> {
                let mut got = Vec::with_capacity(n);
                let mut response = Vec::with_capacity(4096);
                for _ in 0..n {
                    let mut len = [0u8; 4];
                    reader.read_exact(&mut len)?;
                    let len = u32::from_be_bytes(len) as usize;
                    if len > 1 << 20 {
                        return Err(format!("a response frame of {len} bytes").into());
                    }
                    response.resize(len, 0);
                    reader.read_exact(&mut response)?;
                    let r = RemotingCommandRef::decode(&response)?;
                    let seq = r.opaque.wrapping_sub(first) as usize;
                    if r.code != 0 || seq >= n {
                        return Err(format!("response opaque {} code {}", r.opaque, r.code).into());
                    }
                    let now = t0.elapsed().as_micros() as u64;
                    let at = sent_at[seq].load(Ordering::Acquire);
                    got.push((seq, now.saturating_sub(at).min(u32::MAX as u64) as u32));
                    let _ = freed.recv();
                }
                Ok(got)
            });
            for at in sent_at {
                if slots.send(()).is_err() {
                    break; // the reader failed; its error is reported below
                }
                self.next = self.next.wrapping_add(1);
                let opaque = self.next;
                self.frame[OPAQUE_AT..OPAQUE_AT + 4].copy_from_slice(&opaque.to_be_bytes());
                at.store(t0.elapsed().as_micros() as u64, Ordering::Release);
                self.stream.write_all(&self.frame)?;
            }
            let got = read.join().map_err(|_| "the reader panicked")??;
            if let Some(lat) = lat {
                for (seq, us) in got {
                    lat[seq] = us;
                }
            }
            Ok(())
        })
    }

    /// Sends `n` messages one at a time; the latency of each in µs when `record`.
    fn send_n(&mut self, n: usize, record: bool) -> Result<Vec<u32>> {
        let mut lat = Vec::with_capacity(if record { n } else { 0 });
        for _ in 0..n {
            self.next = self.next.wrapping_add(1);
            let opaque = self.next;
            self.frame[OPAQUE_AT..OPAQUE_AT + 4].copy_from_slice(&opaque.to_be_bytes());
            let t = Instant::now();
            self.stream.write_all(&self.frame)?;
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len)?;
            let len = u32::from_be_bytes(len) as usize;
            if len > 1 << 20 {
                return Err(format!("a response frame of {len} bytes").into());
            }
            self.response.resize(len, 0);
            self.stream.read_exact(&mut self.response)?;
            let r = RemotingCommandRef::decode(&self.response)?;
            if r.opaque != opaque || r.code != 0 {
                return Err(
                    format!("response opaque {} code {} to {opaque}", r.opaque, r.code).into(),
                );
            }
            if record {
                lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
        }
        Ok(lat)
    }
}

/// User + system CPU seconds of this process (`/proc/self/stat`).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) start after its closing paren.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Peak resident memory (`VmHWM` of `/proc/self/status`).
fn peak_rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
