//! `rmq bench scale <experiment>`: how the client's costs grow (issue 15).
//!
//! Each experiment varies one thing (time, topics, clients, message size, queues) and
//! prints JSON lines on stdout, one per sample or point, each with `experiment` and `kind`;
//! `benches/scaling.sh` runs them and `benches/scaling_report.py` plots them against their
//! stated expectations. Every figure comes from what Linux reports about this process:
//! `VmRSS` and `Threads` from `/proc/self/status`, user + system CPU from `/proc/self/stat`,
//! and bytes through read/write syscalls (`rchar`, `wchar`) from `/proc/self/io`, so the
//! library needs no counters of its own. Progress goes to stderr.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{value_parser, Subcommand};
use rocketmq_blocking::protocol::{RequestCode, SerializeType};
use rocketmq_blocking::{ConsumeFromWhere, LitePullConsumer, Message, Producer};
use rocketmq_blocking::{PushConsumer, TopicConfig};
use serde_json::{json, Value};

use crate::stats::{self, round};
use crate::{namesrv, parse_seconds, push_consumer, start_producer, CliResult};
use rocketmq_blocking::ClientOptions;

/// Every client of these experiments uses the library's default header encoding.
const ENCODING: SerializeType = SerializeType::Json;

/// The run's client options (credentials, TLS) on `addr`, with [`ENCODING`].
fn options(addr: &str) -> ClientOptions {
    crate::client_options(addr, ENCODING)
}

#[derive(Subcommand)]
pub(crate) enum Experiment {
    /// One process under a steady mixed load: RSS, threads, CPU and counts every interval.
    Soak(SoakArgs),
    /// Idle cost (CPU, bytes) of route refresh and heartbeats for N topics.
    Topics(TopicsArgs),
    /// Threads and RSS per extra producer and push consumer on one client instance.
    Clients(ClientsArgs),
    /// Sync send throughput and CPU per MB against message size, compression off and on.
    Size(SizeArgs),
    /// RSS and CPU per message of a push consumer draining a backlog over Q queues.
    Queues(QueuesArgs),
}

pub(crate) fn run(namesrv_arg: &Option<String>, experiment: Experiment) -> CliResult {
    let addr = namesrv(namesrv_arg)?;
    match experiment {
        Experiment::Soak(a) => soak(&addr, a),
        Experiment::Topics(a) => topics(&addr, a),
        Experiment::Clients(a) => clients(&addr, a),
        Experiment::Size(a) => size(&addr, a),
        Experiment::Queues(a) => queues(&addr, a),
    }
}

// --- readings ------------------------------------------------------------------

/// One look at this process.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    at: Option<Instant>,
    rss_kib: u64,
    threads: u64,
    cpu_s: f64,
    rchar: u64,
    wchar: u64,
}

impl Reading {
    fn now() -> Reading {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        Reading {
            at: Some(Instant::now()),
            rss_kib: field(&status, "VmRSS:").unwrap_or(0),
            threads: field(&status, "Threads:").unwrap_or(0),
            cpu_s: stats::cpu_time().map_or(0.0, |c| c.total()),
            rchar: field(&io, "rchar:").unwrap_or(0),
            wchar: field(&io, "wchar:").unwrap_or(0),
        }
    }

    fn seconds_since(&self, earlier: &Reading) -> f64 {
        match (self.at, earlier.at) {
            (Some(a), Some(b)) => a.saturating_duration_since(b).as_secs_f64(),
            _ => 0.0,
        }
    }
}

/// The first number after `name` on its line of a `/proc` key-value file.
fn field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Bytes sent and received over this process's TCP sockets (`ss -tinp`, the kernel's
/// `tcp_info`): `/proc/self/io` counts the `writev` of the I/O thread but not its `recv`.
/// Sockets closed meanwhile are not counted.
fn socket_bytes() -> (u64, u64) {
    let Ok(out) = std::process::Command::new("ss").args(["-tinpH"]).output() else {
        return (0, 0);
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let me = format!("pid={},", std::process::id());
    let (mut sent, mut received) = (0, 0);
    let mut ours = false;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) {
            ours = line.contains(&me);
            continue;
        }
        if ours {
            for word in line.split_ascii_whitespace() {
                if let Some(n) = word.strip_prefix("bytes_acked:") {
                    sent += n.parse::<u64>().unwrap_or(0);
                } else if let Some(n) = word.strip_prefix("bytes_received:") {
                    received += n.parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    (sent, received)
}

/// Threads of this process whose name starts with `prefix` (`/proc/self/task/*/comm`).
fn threads_named(prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count() as u64
}

/// Descriptors this process has open (`/proc/self/fd`; the listing's own included).
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Prints one JSON line on stdout, at once (the driver may be reading a long soak).
fn emit(experiment: &str, kind: &str, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        map.insert("experiment".into(), experiment.into());
        map.insert("kind".into(), kind.into());
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fields}");
    let _ = out.flush();
}

fn create_topic(addr: &str, topic: &str, queues: u32) -> Result<(), rocketmq_blocking::Error> {
    crate::admin(addr)?.create_topic(&TopicConfig::new(topic, queues))?;
    Ok(())
}

/// A unique suffix for names of one run.
fn stamp() -> u64 {
    stats::epoch_us() / 1000
}

/// Sleeps until `until`, in slices, returning early (false) once `stop` is set.
fn sleep_until(until: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
}

/// Calls `send` about `rate` times a second until `stop` is set; a thread that falls
/// behind by more than a second skips ahead rather than bursting.
fn paced(rate: f64, stop: &AtomicBool, mut send: impl FnMut()) {
    let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        send();
        next += period;
        let now = Instant::now();
        if next > now {
            if !sleep_until(next, stop) {
                return;
            }
        } else if now - next > Duration::from_secs(1) {
            next = now;
        }
    }
}

// --- soak ----------------------------------------------------------------------

#[derive(clap::Args)]
pub(crate) struct SoakArgs {
    /// Seconds to run.
    #[arg(long, value_name = "SECONDS", default_value = "1800", value_parser = parse_seconds)]
    duration: Duration,
    /// Seconds between samples.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    interval: Duration,
    /// Sync sends per second, shared by the sync threads.
    #[arg(long, default_value_t = 1000, value_parser = value_parser!(u32).range(1..))]
    rate: u32,
    /// Sync sending threads.
    #[arg(long, default_value_t = 4, value_parser = value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Async sends per second, from one more thread.
    #[arg(long, default_value_t = 200)]
    async_rate: u32,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024, value_parser = value_parser!(u32).range(1..=65536))]
    size: u32,
}

/// What the soak's threads count.
#[derive(Default)]
struct SoakCounts {
    sent: AtomicU64,
    async_sent: AtomicU64,
    failed: AtomicU64,
    push: AtomicU64,
    lite: AtomicU64,
    poll_errors: AtomicU64,
}

/// The instance name the soak's three clients share.
const SOAK_INSTANCE: &str = "rmq-scale-soak";

fn soak(addr: &str, a: SoakArgs) -> CliResult {
    let topic = format!("ScaleSoak-{}", stamp());
    create_topic(addr, &topic, 8)?;
    eprintln!(
        "rmq: scale soak topic={topic} duration={:?} sync={}/s from {} threads async={}/s",
        a.duration, a.rate, a.threads, a.async_rate
    );
    let counts = Arc::new(SoakCounts::default());
    let stop = AtomicBool::new(false);
    // One instance name: all three share one client instance (left to the default, each
    // client would get its own, `pid#nanos`, as in Java 5.x).
    let options = options(addr).instance_name(SOAK_INSTANCE);
    let producer = start_producer(options.clone(), "rmq_scale_soak_producer", |b| b)?;
    let push = {
        let counts = counts.clone();
        push_consumer(
            options.clone(),
            "rmq_scale_soak_push",
            false,
            move |m, _| {
                counts.push.fetch_add(m.len() as u64, Ordering::Relaxed);
                true
            },
        )
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .start()?
    };
    let lite = LitePullConsumer::builder("rmq_scale_soak_lite")
        .client_options(options)
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .subscribe(&topic, "*")
        .start()?;
    let body = crate::bench::random_alphanumeric(a.size as usize);
    let message = Message::new(&topic, body);
    let begin = Reading::now();
    std::thread::scope(|s| {
        for _ in 0..a.threads {
            s.spawn(|| {
                paced(f64::from(a.rate) / f64::from(a.threads), &stop, || {
                    match producer.send(&message) {
                        Ok(_) => counts.sent.fetch_add(1, Ordering::Relaxed),
                        Err(_) => counts.failed.fetch_add(1, Ordering::Relaxed),
                    };
                })
            });
        }
        if a.async_rate > 0 {
            s.spawn(|| {
                paced(f64::from(a.async_rate), &stop, || {
                    let c = counts.clone();
                    let queued = producer.send_async(message.clone(), move |r| {
                        match r {
                            Ok(_) => c.async_sent.fetch_add(1, Ordering::Relaxed),
                            Err(_) => c.failed.fetch_add(1, Ordering::Relaxed),
                        };
                    });
                    if queued.is_err() {
                        counts.failed.fetch_add(1, Ordering::Relaxed);
                    }
                })
            });
        }
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match lite.poll_timeout(Duration::from_millis(500)) {
                    Ok(msgs) => counts.lite.fetch_add(msgs.len() as u64, Ordering::Relaxed),
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(100));
                        counts.poll_errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        });
        let end = begin.at.unwrap_or_else(Instant::now) + a.duration;
        let mut next = Instant::now();
        loop {
            let r = Reading::now();
            let c = &counts;
            emit(
                "soak",
                "sample",
                json!({
                    "t_s": round(r.seconds_since(&begin), 1),
                    "rss_kib": r.rss_kib,
                    "threads": r.threads,
                    "io_threads": threads_named("rmq-io"),
                    // The push consumer's pool starts workers on demand (up to
                    // consume_thread_max): told apart from the client's fixed threads.
                    "consume_threads": threads_named("rmq-consume"),
                    "fds": open_descriptors(),
                    "cpu_s": round(r.cpu_s - begin.cpu_s, 2),
                    "sent": c.sent.load(Ordering::Relaxed),
                    "async_sent": c.async_sent.load(Ordering::Relaxed),
                    "failed": c.failed.load(Ordering::Relaxed),
                    "push_consumed": c.push.load(Ordering::Relaxed),
                    "lite_consumed": c.lite.load(Ordering::Relaxed),
                    "poll_errors": c.poll_errors.load(Ordering::Relaxed),
                }),
            );
            if Instant::now() >= end {
                break;
            }
            next += a.interval;
            std::thread::sleep(next.min(end).saturating_duration_since(Instant::now()));
        }
        stop.store(true, Ordering::Relaxed);
    });
    lite.shutdown();
    push.shutdown();
    producer.shutdown();
    Ok(())
}

// --- topics ----------------------------------------------------------------------

#[derive(clap::Args)]
pub(crate) struct TopicsArgs {
    /// Topics the producer sends to and the push consumer subscribes to.
    #[arg(long, value_parser = value_parser!(u32).range(1..=100_000))]
    topics: u32,
    /// Topic names are PREFIX-0 .. PREFIX-(N-1), created (one queue each) when missing.
    #[arg(long, default_value = "ScaleTopic")]
    prefix: String,
    /// Seconds of the idle window that is measured.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    window: Duration,
    /// Route refresh and heartbeat interval (seconds).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_seconds)]
    interval: Duration,
    /// Heartbeat interval when it should differ from --interval (seconds).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    heartbeat: Option<Duration>,
}

/// Requests sent, by request code: an RPC hook on the client instance (the library keeps
/// no such counters).
#[derive(Default)]
struct RequestCounts(std::sync::Mutex<std::collections::BTreeMap<i32, u64>>);

impl RequestCounts {
    fn snapshot(&self) -> std::collections::BTreeMap<i32, u64> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

impl rocketmq_blocking::remoting::RpcHook for RequestCounts {
    fn before_request(&self, _: &str, request: &mut rocketmq_blocking::protocol::RemotingCommand) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(request.request_code().0).or_default() += 1;
        }
    }
}

/// Topics per UPDATE_AND_CREATE_TOPIC_LIST request.
const CREATE_BATCH: usize = 500;

/// UPDATE_AND_CREATE_TOPIC_LIST (18, RocketMQ 5.x): creates `topics`, one read and write
/// queue each, on one broker with one request (Java `CreateTopicListRequestBody`).
fn create_topic_list(
    admin: &rocketmq_blocking::Admin,
    broker: &str,
    topics: &[&String],
) -> Result<(), Box<dyn std::error::Error>> {
    use rocketmq_blocking::protocol::RemotingCommand;
    let configs: Vec<Value> = topics
        .iter()
        .map(|t| {
            json!({"topicName": t, "readQueueNums": 1, "writeQueueNums": 1,
                   "perm": rocketmq_blocking::Perm::READ_WRITE.bits(),
                   "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false})
        })
        .collect();
    let body = serde_json::to_vec(&json!({ "topicConfigList": configs }))?;
    let request = RemotingCommand::request(RequestCode(18)).with_body(body);
    let response = admin
        .api()
        .remoting()
        .invoke_sync(broker, request, Duration::from_secs(60))?;
    if response.code != 0 {
        return Err(format!(
            "response code {}: {}",
            response.code,
            response.remark.unwrap_or_default()
        )
        .into());
    }
    Ok(())
}

fn topics(addr: &str, a: TopicsArgs) -> CliResult {
    let heartbeat = a.heartbeat.unwrap_or(a.interval);
    let names: Vec<String> = (0..a.topics).map(|i| format!("{}-{i}", a.prefix)).collect();
    let admin = crate::admin(addr)?;
    let existing: std::collections::HashSet<String> = admin.topic_list()?.into_iter().collect();
    let missing: Vec<&String> = names.iter().filter(|t| !existing.contains(*t)).collect();
    let created = Instant::now();
    let mut failures = 0u64;
    // One UPDATE_AND_CREATE_TOPIC costs the 5.x broker ~0.2 s (it is synchronized and
    // registers with the name server each time), so topics go in lists (5.x
    // UPDATE_AND_CREATE_TOPIC_LIST) of `CREATE_BATCH`.
    let masters = admin.master_addrs()?;
    for part in missing.chunks(CREATE_BATCH) {
        for broker in masters.values() {
            if let Err(e) = create_topic_list(&admin, broker, part) {
                eprintln!("rmq: creating {} topics on {broker}: {e}", part.len());
                failures += part.len() as u64;
            }
        }
    }
    if let Some(last) = missing.last() {
        admin.wait_for_route(last, masters.len(), Duration::from_secs(60))?;
    }
    let create_s = created.elapsed().as_secs_f64();
    emit(
        "topics",
        "create",
        json!({"topics": a.topics, "created": missing.len(), "failed": failures,
               "seconds": round(create_s, 2),
               "ms_per_topic": round(create_s * 1000.0 / missing.len().max(1) as f64, 2)}),
    );
    drop(admin);

    let setup = Instant::now();
    let received = Arc::new(AtomicU64::new(0));
    let options = options(addr)
        .instance_name("rmq-scale-topics")
        .poll_name_server_interval(a.interval)
        .heartbeat_interval(heartbeat);
    let producer = start_producer(options.clone(), "rmq_scale_topics_producer", |b| b)?;
    // The consumer shares the producer's instance: one counter sees all they send.
    let requests = Arc::new(RequestCounts::default());
    if let Some(instance) = producer.client_instance() {
        instance.remoting().register_rpc_hook(requests.clone());
    }
    let mut builder = {
        let received = received.clone();
        push_consumer(options, "rmq_scale_topics_push", false, move |m, _| {
            received.fetch_add(m.len() as u64, Ordering::Relaxed);
            true
        })
    }
    .consume_from_where(ConsumeFromWhere::FirstOffset)
    .consume_thread_min(4)
    .consume_thread_max(4);
    for t in &names {
        builder = builder.subscribe(t.as_str(), "*");
    }
    let consumer = builder.start()?;
    let mut send_failures = 0u64;
    for t in &names {
        let message = Message::new(t.as_str(), &b"x"[..]);
        // A busy broker may refuse a send; three tries each.
        if !(0..3).any(|_| producer.send(&message).is_ok()) {
            send_failures += 1;
        }
    }
    let expected = u64::from(a.topics) - send_failures;
    // Wait for the messages (each topic has at least one), then let the first rounds pass.
    let deadline = Instant::now() + Duration::from_secs(60) + a.interval * a.topics / 100;
    while received.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(a.interval * 3);
    let setup_s = setup.elapsed().as_secs_f64();

    eprintln!("rmq: scale topics: idle window begins");
    let (sent0, received0) = socket_bytes();
    let requests0 = requests.snapshot();
    let before = Reading::now();
    std::thread::sleep(a.window);
    let after = Reading::now();
    let requests1 = requests.snapshot();
    let (sent1, received1) = socket_bytes();
    eprintln!("rmq: scale topics: idle window ends");
    let (tcp_out, tcp_in) = (
        sent1.saturating_sub(sent0),
        received1.saturating_sub(received0),
    );
    let secs = after.seconds_since(&before).max(1e-9);
    let rounds = secs / a.interval.as_secs_f64();
    let cpu = after.cpu_s - before.cpu_s;
    let (read, written) = (after.rchar - before.rchar, after.wchar - before.wchar);
    let per_s = |code: RequestCode| {
        let n = requests1.get(&code.0).copied().unwrap_or(0)
            - requests0.get(&code.0).copied().unwrap_or(0);
        n as f64 / secs
    };
    let by_code: serde_json::Map<String, Value> = requests1
        .iter()
        .map(|(code, n)| {
            let n = n - requests0.get(code).copied().unwrap_or(0);
            (code.to_string(), round(n as f64 / secs, 1).into())
        })
        .collect();
    emit(
        "topics",
        "idle",
        json!({
            "topics": a.topics,
            "interval_s": a.interval.as_secs_f64(),
            "heartbeat_s": heartbeat.as_secs_f64(),
            "window_s": round(secs, 2),
            "setup_s": round(setup_s, 2),
            "send_failures": send_failures,
            "received": received.load(Ordering::Relaxed),
            "cpu_s": round(cpu, 3),
            "cpu_ms_per_s": round(cpu * 1000.0 / secs, 3),
            "cpu_ms_per_round": round(cpu * 1000.0 / rounds, 3),
            "read_bytes_per_s": round(read as f64 / secs, 0),
            "written_bytes_per_s": round(written as f64 / secs, 0),
            "read_bytes_per_round": round(read as f64 / rounds, 0),
            "written_bytes_per_round": round(written as f64 / rounds, 0),
            "tcp_sent_bytes_per_s": round(tcp_out as f64 / secs, 0),
            "tcp_received_bytes_per_s": round(tcp_in as f64 / secs, 0),
            "tcp_sent_bytes_per_round": round(tcp_out as f64 / rounds, 0),
            "tcp_received_bytes_per_round": round(tcp_in as f64 / rounds, 0),
            "rss_kib": after.rss_kib,
            "threads": after.threads,
            // Rounds that really ran: one round queries every topic once. A round slower
            // than the interval makes fewer rounds than `1 / interval_s` a second.
            "route_rounds_per_s": round(per_s(RequestCode::GET_ROUTEINFO_BY_TOPIC) / f64::from(a.topics), 2),
            "heartbeats_per_s": round(per_s(RequestCode::HEART_BEAT), 2),
            "requests_per_s": by_code,
        }),
    );
    consumer.shutdown();
    producer.shutdown();
    Ok(())
}

// --- clients -----------------------------------------------------------------------

#[derive(clap::Args)]
pub(crate) struct ClientsArgs {
    /// Producers and push consumers (each) to reach, step by step.
    #[arg(long, default_value = "1,10,100", value_delimiter = ',', value_parser = value_parser!(u64).range(1..))]
    counts: Vec<u64>,
    /// Give every client its own client instance (the default instance name, as in Java
    /// 5.x) instead of one shared instance.
    #[arg(long)]
    separate_instances: bool,
    /// Seconds to let each step settle before it is read.
    #[arg(long, value_name = "SECONDS", default_value = "3", value_parser = parse_seconds)]
    settle: Duration,
}

fn clients(addr: &str, a: ClientsArgs) -> CliResult {
    // None: the default instance name, which becomes `pid#nanos`, one per client.
    let instance = (!a.separate_instances).then_some("rmq-scale-clients");
    let options_of = |instance: Option<&str>| match instance {
        Some(name) => options(addr).instance_name(name),
        None => options(addr),
    };
    let topic = format!("ScaleClients-{}", stamp());
    create_topic(addr, &topic, 8)?;
    let run = stamp();
    let base = Reading::now();
    let row = |producers: usize, consumers: usize, r: &Reading| {
        emit(
            "clients",
            "step",
            json!({"instances": if a.separate_instances { "separate" } else { "shared" },
                   "producers": producers, "consumers": consumers, "rss_kib": r.rss_kib,
                   "threads": r.threads, "consume_threads": threads_named("rmq-consume"),
                   "io_threads": threads_named("rmq-io"), "cpu_s": round(r.cpu_s - base.cpu_s, 2)}),
        );
    };
    row(0, 0, &base);
    let mut producers: Vec<Producer> = Vec::new();
    let mut consumers: Vec<PushConsumer> = Vec::new();
    for &target in &a.counts {
        let target = target as usize;
        while producers.len() < target {
            let group = format!("rmq_scale_p_{run}_{}", producers.len());
            producers.push(start_producer(options_of(instance), &group, |b| b)?);
        }
        std::thread::sleep(a.settle);
        row(producers.len(), consumers.len(), &Reading::now());
        while consumers.len() < target {
            let group = format!("rmq_scale_c_{run}_{}", consumers.len());
            let c = push_consumer(options_of(instance), &group, false, |_, _| true)
                .subscribe(&topic, "*")
                .start()?;
            consumers.push(c);
        }
        std::thread::sleep(a.settle);
        row(producers.len(), consumers.len(), &Reading::now());
    }
    for c in &consumers {
        c.shutdown();
    }
    for p in &producers {
        p.shutdown();
    }
    Ok(())
}

// --- size ---------------------------------------------------------------------------

/// 4 MiB (the broker's default `maxMessageSize`) less room for the properties.
const LARGEST_BODY: u64 = 4 * 1024 * 1024 - 1024;

#[derive(clap::Args)]
pub(crate) struct SizeArgs {
    /// Body sizes in bytes.
    #[arg(long, default_value = "128,1024,16384,262144,1048576,4193280", value_delimiter = ',', value_parser = value_parser!(u64).range(1..))]
    sizes: Vec<u64>,
    /// Sync sending threads.
    #[arg(long, default_value_t = 8, value_parser = value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Seconds per (size, compression) point.
    #[arg(long, value_name = "SECONDS", default_value = "8", value_parser = parse_seconds)]
    duration: Duration,
}

fn size(addr: &str, a: SizeArgs) -> CliResult {
    if let Some(s) = a.sizes.iter().find(|s| **s > LARGEST_BODY) {
        return Err(format!("size {s} is over the largest body, {LARGEST_BODY}").into());
    }
    let topic = format!("ScaleSize-{}", stamp());
    create_topic(addr, &topic, 8)?;
    let options = options(addr).instance_name("rmq-scale-size");
    let plain = start_producer(options.clone(), "rmq_scale_size_plain", |b| {
        b.compress_over(usize::MAX)
    })?;
    // The default threshold: bodies over 4 KiB are zlib-compressed.
    let zipped = start_producer(options, "rmq_scale_size_zlib", |b| b)?;
    for &size in &a.sizes {
        let message = Message::new(&topic, crate::bench::random_alphanumeric(size as usize));
        for (compression, producer) in [("off", &plain), ("on", &zipped)] {
            let sent = AtomicU64::new(0);
            let failed = AtomicU64::new(0);
            let before = Reading::now();
            let until = Instant::now() + a.duration;
            std::thread::scope(|s| {
                for _ in 0..a.threads {
                    s.spawn(|| {
                        while Instant::now() < until {
                            match producer.send(&message) {
                                Ok(_) => sent.fetch_add(1, Ordering::Relaxed),
                                Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                            };
                        }
                    });
                }
            });
            let after = Reading::now();
            let secs = after.seconds_since(&before).max(1e-9);
            let n = sent.load(Ordering::Relaxed);
            let mb = (n * size) as f64 / 1e6;
            let cpu = after.cpu_s - before.cpu_s;
            emit(
                "size",
                "point",
                json!({
                    "size": size, "compression": compression, "threads": a.threads,
                    "messages": n, "failed": failed.load(Ordering::Relaxed),
                    "seconds": round(secs, 2),
                    "msgs_per_s": round(n as f64 / secs, 1),
                    "mb_per_s": round(mb / secs, 2),
                    "cpu_s": round(cpu, 3),
                    "cpu_ms_per_mb": (mb > 0.0).then(|| round(cpu * 1000.0 / mb, 3)),
                    "written_per_body_byte": (mb > 0.0)
                        .then(|| round((after.wchar - before.wchar) as f64 / (mb * 1e6), 4)),
                    "rss_kib": after.rss_kib,
                }),
            );
            eprintln!("rmq: scale size {size} compression {compression}: {n} sent");
        }
    }
    plain.shutdown();
    zipped.shutdown();
    Ok(())
}

// --- queues ---------------------------------------------------------------------------

#[derive(clap::Args)]
pub(crate) struct QueuesArgs {
    /// Queues of the topic, all assigned to the one consumer.
    #[arg(long, value_parser = value_parser!(u32).range(1..=1024))]
    queues: u32,
    /// Messages in the backlog.
    #[arg(long, default_value_t = 50_000, value_parser = value_parser!(u64).range(1..))]
    backlog: u64,
    /// Body size in bytes.
    #[arg(long, default_value_t = 1024, value_parser = value_parser!(u32).range(1..=65536))]
    size: u32,
    /// Seconds the drain may take at most.
    #[arg(long, value_name = "SECONDS", default_value = "180", value_parser = parse_seconds)]
    timeout: Duration,
}

fn queues(addr: &str, a: QueuesArgs) -> CliResult {
    let topic = format!("ScaleQueues-{}-{}", a.queues, stamp());
    create_topic(addr, &topic, a.queues)?;
    eprintln!("rmq: scale queues: backlog of {} into {topic}", a.backlog);
    let produced = produce_backlog(addr, &topic, a.backlog, a.size as usize)?;
    let received = Arc::new(AtomicU64::new(0));
    let before = Reading::now();
    let consumer = {
        let received = received.clone();
        push_consumer(
            options(addr),
            &format!("rmq_scale_q_{}", stamp()),
            false,
            move |m, _| {
                received.fetch_add(m.len() as u64, Ordering::Relaxed);
                true
            },
        )
    }
    .subscribe(&topic, "*")
    .consume_from_where(ConsumeFromWhere::FirstOffset)
    .start()?;
    let deadline = Instant::now() + a.timeout;
    let mut peak = before.rss_kib;
    let mut peak_threads = before.threads;
    while received.load(Ordering::Relaxed) < produced && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        let r = Reading::now();
        peak = peak.max(r.rss_kib);
        peak_threads = peak_threads.max(r.threads);
    }
    let after = Reading::now();
    consumer.shutdown();
    let n = received.load(Ordering::Relaxed);
    let cpu = after.cpu_s - before.cpu_s;
    // What the pull thresholds allow in memory: 1,000 messages or 100 MiB per queue.
    let cached_bound = a.queues as u64 * 1000.min(a.backlog.div_ceil(a.queues as u64));
    emit(
        "queues",
        "drain",
        json!({
            "queues": a.queues, "backlog": produced, "size": a.size,
            "consumed": n, "seconds": round(after.seconds_since(&before), 2),
            "rss_before_kib": before.rss_kib, "peak_rss_kib": peak,
            "rss_growth_kib": peak.saturating_sub(before.rss_kib),
            "bound_kib": cached_bound * u64::from(a.size) / 1024,
            "peak_threads": peak_threads,
            "cpu_s": round(cpu, 3),
            "cpu_us_per_msg": (n > 0).then(|| round(cpu * 1e6 / n as f64, 2)),
        }),
    );
    if n < produced {
        return Err(format!(
            "only {n} of {produced} messages arrived within {:?}",
            a.timeout
        )
        .into());
    }
    Ok(())
}

/// Sends `count` messages async (at most 1,024 in flight) from a producer of its own
/// client instance, shut down before the drain. Returns how many were acknowledged.
fn produce_backlog(
    addr: &str,
    topic: &str,
    count: u64,
    size: usize,
) -> Result<u64, Box<dyn std::error::Error>> {
    let producer = start_producer(
        options(addr).instance_name("scale-backlog"),
        "rmq_scale_backlog",
        |b| b,
    )?;
    let message = Message::new(topic, crate::bench::random_alphanumeric(size));
    let window = Arc::new(rocketmq_blocking::remoting::Semaphore::new(1024));
    let acked = Arc::new(AtomicU64::new(0));
    for _ in 0..count {
        let Some(permit) = window.acquire_until(Instant::now() + Duration::from_secs(10)) else {
            return Err("no async send of the backlog completed in 10 s".into());
        };
        let acked = acked.clone();
        let queued = producer.send_async(message.clone(), move |r| {
            if r.is_ok() {
                acked.fetch_add(1, Ordering::Relaxed);
            }
            drop(permit);
        });
        if let Err(e) = queued {
            return Err(format!("backlog: {e}").into());
        }
    }
    // Every callback has run once every permit is back.
    let mut held = Vec::new();
    while held.len() < 1024 {
        match window.acquire_until(Instant::now() + Duration::from_secs(10)) {
            Some(p) => held.push(p),
            None => break,
        }
    }
    producer.shutdown();
    Ok(acked.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_by_name() {
        let status = "Name:\trmq\nVmRSS:\t   12345 kB\nThreads:\t7\n";
        assert_eq!(field(status, "VmRSS:"), Some(12345));
        assert_eq!(field(status, "Threads:"), Some(7));
        assert_eq!(field(status, "VmHWM:"), None);
        assert_eq!(field("rchar: 99\nwchar: 5\n", "wchar:"), Some(5));
    }

    #[test]
    fn readings_of_this_process_are_plausible() {
        let r = Reading::now();
        assert!(r.rss_kib > 0 && r.threads >= 1, "{r:?}");
    }
}
