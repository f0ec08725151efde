//! The `rust-async` side of benches/compare-java.sh: the produce and consume workloads of
//! benches/java (Bench.java, Consume.java) written on the async Rust client
//! `rocketmq-client-rust` 1.0.0 (tokio), following the peer contract of issue 15.
//!
//! The client is set up the way its README shows: a `RuntimeOwner` (a multi-thread tokio
//! runtime with one worker per CPU, the default), a no-op telemetry handle (so the client's
//! `tracing` output goes nowhere: no subscriber is installed) and one shared `ClientRuntime`.
//! Every workload runs inside `RuntimeOwner::block_on`. A push consumer's runtime has its
//! metadata-io blocking lane (where the client runs the listener) sized to the consume threads
//! (`runtime_for_listener`; README, "Found on 5.3.3").
//!
//!     rust-async-bench produce -n NAMESRV -t TOPIC -w THREADS -s SIZE -q COUNT -W WARMUP \
//!                              -i INFLIGHT [-y true] [-b BATCH] [-o true]
//!     rust-async-bench consume -n NAMESRV -t TOPIC -g GROUP -m push|litepull -w THREADS \
//!                              -q COUNT -T TIMEOUT_S
//!
//! The last stdout line is the contract's JSON object. Exit status: 0 if everything asked for
//! was acknowledged (produce) or consumed (consume), 1 if not, 2 on a usage error, 3 with an
//! `unsupported` JSON line for a capability the client lacks.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultLitePullConsumer,
    DefaultMQProducer, DefaultMQPushConsumer, MQPushConsumer, MessageListenerConcurrently,
    SendResult, SendStatus,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_observability::TelemetryRuntimeGuard;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use tokio::sync::{Barrier, Notify, Semaphore};

const CLIENT: &str = "rust-async";
/// The crate version pinned in Cargo.toml (`=1.0.0`).
const CLIENT_VERSION: &str = "1.0.0";
/// How long a client or runtime shutdown may take before the program gives up on it.
const SHUTDOWN_BUDGET: Duration = Duration::from_secs(15);
/// Async mode: how long to wait for the last callbacks (Bench.java waits 120 s too).
const CALLBACK_WAIT: Duration = Duration::from_secs(120);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((c, rest)) if c == "produce" || c == "consume" => (c.clone(), rest.to_vec()),
        _ => return usage("expected `produce` or `consume` as the first argument"),
    };
    let options = match parse_options(&rest) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let run = if command == "produce" {
        ProduceArgs::parse(&options).map(Command::Produce)
    } else {
        ConsumeArgs::parse(&options).map(Command::Consume)
    };
    let command = match run {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let listener_threads = match &command {
        Command::Consume(a) if a.mode == ConsumeMode::Push => Some(a.threads),
        _ => None,
    };
    match with_client_runtime(listener_threads, |client_runtime| async move {
        match command {
            Command::Produce(a) => produce(client_runtime, a).await,
            Command::Consume(a) => consume(client_runtime, a).await,
        }
    }) {
        Ok(outcome) => {
            println!("{}", outcome.json);
            let _ = std::io::stdout().flush();
            ExitCode::from(outcome.status)
        }
        Err(e) => {
            eprintln!("rust-async-bench: {e}");
            ExitCode::from(1)
        }
    }
}

enum Command {
    Produce(ProduceArgs),
    Consume(ConsumeArgs),
}

/// The JSON line to print last and the exit status.
struct Outcome {
    json: String,
    status: u8,
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("rust-async-bench: {problem}");
    eprintln!(
        "usage: rust-async-bench produce -n namesrv -q count [-W warmup] [-t topic] [-w threads] [-s size] \
         [-y true] [-i inflight] [-b batch (sync only)] [-o true (oneway)]\n       \
         rust-async-bench consume -n namesrv -g group -q count [-t topic] [-m push|litepull] [-w threads] \
         [-T timeout-seconds]"
    );
    ExitCode::from(2)
}

/// "-x value" pairs, as Bench.options: every option takes a value.
fn parse_options(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut options = HashMap::new();
    let mut i = 0;
    while i < args.len() {
        let key = &args[i];
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("missing value for {key}"))?;
        if !key.starts_with('-') {
            return Err(format!("unexpected argument {key}"));
        }
        options.insert(key.clone(), value.clone());
        i += 2;
    }
    Ok(options)
}

fn take<T: std::str::FromStr>(
    o: &HashMap<String, String>,
    key: &str,
    default: T,
) -> Result<T, String> {
    match o.get(key) {
        Some(v) => v.parse().map_err(|_| format!("bad value for {key}: {v}")),
        None => Ok(default),
    }
}

fn check_known(o: &HashMap<String, String>, known: &[&str]) -> Result<(), String> {
    match o.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown option {k}")),
        None => Ok(()),
    }
}

fn namesrv(o: &HashMap<String, String>) -> Result<String, String> {
    o.get("-n")
        .cloned()
        .or_else(|| std::env::var("NAMESRV_ADDR").ok())
        .ok_or_else(|| "-n namesrv (or NAMESRV_ADDR) is required".to_string())
}

/// How many consume requests the push consumer's scheduler holds: at most 4,096 (`CONSUME_SCHEDULER_CAPACITY`,
/// consume_message_concurrently_service.rs:85).
const CONSUME_SCHEDULER_CAPACITY: usize = 4096;

/// The runtime for a push consumer with `threads` consume threads: the default profile, with
/// the metadata-io blocking lane (where the client runs every listener call) given one slot
/// per consume thread and a queue as deep as the consume scheduler. With the default lane
/// (2 x CPUs slots, 8 x CPUs queued; 4 and 16 here) listener calls are refused under a
/// backlog and the client sends those messages back for a delayed retry (README, "Found on
/// 5.3.3").
fn runtime_for_listener(threads: usize) -> Result<RuntimeConfig, Box<dyn std::error::Error>> {
    let mut config = RuntimeConfig::default();
    let lane = &mut config.blocking_lane_policies.metadata_io;
    lane.max_concurrency = lane.max_concurrency.max(threads);
    lane.max_queue_depth = lane.max_queue_depth.max(CONSUME_SCHEDULER_CAPACITY);
    // The lanes share the global blocking limit, which caps each lane's concurrency: room for
    // the listener slots and the other lanes' defaults on top.
    let global = config.max_blocking_threads.max(threads + 16);
    Ok(config.with_max_blocking_threads(global)?)
}

/// Builds the client runtime as the README does, runs `work` on it, then shuts the client
/// runtime and the owner down (reporting, not failing, an unclean shutdown). With
/// `listener_threads` (a push consumer) the runtime comes from [`runtime_for_listener`]
/// unless RUST_ASYNC_BENCH_DEFAULT_RUNTIME is set (to reproduce the default's failure).
fn with_client_runtime<F, Fut>(
    listener_threads: Option<usize>,
    work: F,
) -> Result<Outcome, Box<dyn std::error::Error>>
where
    F: FnOnce(Arc<ClientRuntime>) -> Fut,
    Fut: Future<Output = ClientResult<Outcome>>,
{
    let owner = match listener_threads {
        Some(threads) if std::env::var_os("RUST_ASYNC_BENCH_DEFAULT_RUNTIME").is_none() => {
            RuntimeOwner::plan(runtime_for_listener(threads)?)?.build()?
        }
        _ => RuntimeOwner::new()?,
    };
    let telemetry = TelemetryRuntimeGuard::noop();
    let client_runtime = ClientRuntime::try_new(
        owner.root_context().component("rust-async-bench"),
        ClientRuntimeConfig::default(),
        telemetry.handle(),
    )?;
    let result = owner.block_on(async {
        let result = work(Arc::clone(&client_runtime)).await;
        match tokio::time::timeout(SHUTDOWN_BUDGET, client_runtime.shutdown()).await {
            Ok(report) if !report.is_healthy() => {
                eprintln!("client runtime shutdown not clean: {}", report.to_json())
            }
            Ok(_) => {}
            Err(_) => eprintln!("client runtime shutdown took over {SHUTDOWN_BUDGET:?}"),
        }
        result
    });
    match owner.shutdown_runtime_blocking_with_timeout(SHUTDOWN_BUDGET) {
        Ok(report) if !report.is_healthy() => {
            eprintln!("runtime shutdown not clean: {}", report.to_json())
        }
        Ok(_) => {}
        Err(e) => eprintln!("runtime shutdown: {e}"),
    }
    Ok(result?)
}

// ---------------------------------------------------------------------------------------------
// produce

#[derive(Clone, Copy, PartialEq, Eq)]
enum SendMode {
    Sync,
    Async,
    Oneway,
}

impl SendMode {
    fn name(self) -> &'static str {
        match self {
            SendMode::Sync => "sync",
            SendMode::Async => "async",
            SendMode::Oneway => "oneway",
        }
    }
}

struct ProduceArgs {
    namesrv: String,
    topic: String,
    threads: usize,
    size: usize,
    count: u64,
    warmup: u64,
    inflight: usize,
    batch: usize,
    mode: SendMode,
}

impl ProduceArgs {
    fn parse(o: &HashMap<String, String>) -> Result<Self, String> {
        check_known(
            o,
            &["-n", "-t", "-w", "-s", "-q", "-W", "-y", "-o", "-i", "-b"],
        )?;
        let is_async: bool = take(o, "-y", false)?;
        let oneway: bool = take(o, "-o", false)?;
        let batch: usize = take(o, "-b", 1)?;
        let count: u64 = take(o, "-q", 0)?;
        let mut threads: usize = take(o, "-w", 64)?;
        let inflight: usize = take(o, "-i", 1024)?;
        if count == 0
            || batch == 0
            || threads == 0
            || inflight == 0
            || ((is_async || oneway) && batch > 1)
            || (is_async && oneway)
        {
            return Err(
                "need -q > 0, -w/-i/-b > 0, -b only with sync sends, not both -y and -o".into(),
            );
        }
        if is_async {
            // As Bench.java: async is one sending task with a window of -i sends.
            threads = 1;
        }
        Ok(ProduceArgs {
            namesrv: namesrv(o)?,
            topic: o
                .get("-t")
                .cloned()
                .unwrap_or_else(|| "BenchmarkTest".into()),
            threads,
            size: take(o, "-s", 128)?,
            count,
            warmup: take(o, "-W", 0)?,
            inflight,
            batch,
            mode: if is_async {
                SendMode::Async
            } else if oneway {
                SendMode::Oneway
            } else {
                SendMode::Sync
            },
        })
    }
}

/// One phase's results (the warm-up's or the measured one's), shared by the senders.
#[derive(Default)]
struct Phase {
    /// Latency of every acknowledged call, nanoseconds.
    latencies: Mutex<Vec<u64>>,
    acked: AtomicU64,
    send_failed: AtomicU64,
    response_failed: AtomicU64,
}

impl Phase {
    fn ok(&self, n: u64, nanos: u64, first_ack_us: &AtomicU64) {
        let _ =
            first_ack_us.compare_exchange(0, epoch_micros(), Ordering::AcqRel, Ordering::Acquire);
        self.acked.fetch_add(n, Ordering::AcqRel);
        lock(&self.latencies).push(nanos);
    }

    fn failures(&self) -> u64 {
        self.send_failed.load(Ordering::Acquire) + self.response_failed.load(Ordering::Acquire)
    }
}

/// What every sender needs: the producer, the body, where the results go.
struct Shared {
    producer: DefaultMQProducer,
    topic: String,
    body: Bytes,
    batch: usize,
    mode: SendMode,
    first_ack_us: AtomicU64,
}

impl Shared {
    fn message(&self) -> Message {
        // Shares the one body (Bench.java shares its byte array); no tags, no keys.
        Message::builder()
            .topic(self.topic.as_str())
            .body(self.body.clone())
            .build_unchecked()
    }

    /// `quantity` sends, one call at a time (sync, batch or oneway).
    async fn send_sequentially(&self, quantity: u64, phase: &Phase) {
        let mut left = quantity;
        while left > 0 {
            let n = left.min(self.batch as u64);
            left -= n;
            let t0 = Instant::now();
            let status = match self.mode {
                SendMode::Oneway => self
                    .producer
                    .send_oneway(self.message())
                    .await
                    .map(|()| None),
                _ if self.batch > 1 => {
                    let msgs: Vec<Message> = (0..n).map(|_| self.message()).collect();
                    self.producer
                        .send_batch(msgs)
                        .await
                        .map(|r| Some(r.send_status))
                }
                _ => self
                    .producer
                    .send(self.message())
                    .await
                    .map(|r| r.map(|r| r.send_status)),
            };
            let nanos = elapsed_nanos(t0);
            match status {
                // A oneway call that returns counts as acknowledged (there is no ack).
                Ok(None) if self.mode == SendMode::Oneway => phase.ok(n, nanos, &self.first_ack_us),
                Ok(Some(SendStatus::SendOk)) => phase.ok(n, nanos, &self.first_ack_us),
                Ok(Some(_)) => {
                    phase.response_failed.fetch_add(n, Ordering::AcqRel);
                }
                Ok(None) => {
                    // A sync send that returned no result: not acknowledged.
                    phase.send_failed.fetch_add(n, Ordering::AcqRel);
                }
                Err(e) => {
                    note_error("send", &e);
                    phase.send_failed.fetch_add(n, Ordering::AcqRel);
                }
            }
        }
    }

    /// `quantity` callback sends with at most `window`'s permits outstanding; returns when
    /// every callback ran (or after CALLBACK_WAIT).
    async fn send_windowed(
        self: &Arc<Self>,
        quantity: u64,
        window: &Arc<Semaphore>,
        phase: &Arc<Phase>,
    ) {
        let pending = Arc::new(AtomicU64::new(quantity));
        let all_done = Arc::new(Notify::new());
        for _ in 0..quantity {
            let Ok(permit) = Arc::clone(window).acquire_owned().await else {
                break;
            };
            // Released by the callback: the closure is `Fn`, so the permit is returned by
            // hand, once, guarded by `called`.
            permit.forget();
            let called = Arc::new(AtomicBool::new(false));
            let t0 = Instant::now();
            let (me, ph, win, pend, done) = (
                Arc::clone(self),
                Arc::clone(phase),
                Arc::clone(window),
                Arc::clone(&pending),
                Arc::clone(&all_done),
            );
            let called_in = Arc::clone(&called);
            let callback = move |result: Option<&SendResult>, error: Option<&ClientError>| {
                if called_in.swap(true, Ordering::AcqRel) {
                    return;
                }
                match (result, error) {
                    (Some(r), _) if r.send_status == SendStatus::SendOk => {
                        ph.ok(1, elapsed_nanos(t0), &me.first_ack_us)
                    }
                    (Some(_), _) => {
                        ph.response_failed.fetch_add(1, Ordering::AcqRel);
                    }
                    (None, e) => {
                        if let Some(e) = e {
                            note_error("async send", e);
                        }
                        ph.send_failed.fetch_add(1, Ordering::AcqRel);
                    }
                }
                win.add_permits(1);
                if pend.fetch_sub(1, Ordering::AcqRel) == 1 {
                    done.notify_one();
                }
            };
            if let Err(e) = self
                .producer
                .send_with_callback(self.message(), callback)
                .await
            {
                // The call failed before handing the send over: no callback will come.
                if !called.swap(true, Ordering::AcqRel) {
                    note_error("async send", &e);
                    phase.send_failed.fetch_add(1, Ordering::AcqRel);
                    window.add_permits(1);
                    if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                        all_done.notify_one();
                    }
                }
            }
        }
        if pending.load(Ordering::Acquire) > 0
            && tokio::time::timeout(CALLBACK_WAIT, all_done.notified())
                .await
                .is_err()
        {
            eprintln!(
                "async callbacks missing after {CALLBACK_WAIT:?}: {}",
                pending.load(Ordering::Acquire)
            );
        }
    }
}

/// Where the measured phase began.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    cpu: Option<f64>,
    warmup: Duration,
}

impl Mark {
    fn now(begin: Instant) -> Mark {
        let at = Instant::now();
        Mark {
            at,
            cpu: process_cpu_seconds(),
            warmup: at - begin,
        }
    }
}

async fn produce(client_runtime: Arc<ClientRuntime>, a: ProduceArgs) -> ClientResult<Outcome> {
    println!(
        "topic: {} threadCount: {} messageSize: {} messageQuantity: {} warmup: {} asyncEnable: {} onewayEnable: {} \
         batchSize: {} clientVersion: {CLIENT_VERSION}",
        a.topic,
        a.threads,
        a.size,
        a.count,
        a.warmup,
        a.mode == SendMode::Async,
        a.mode == SendMode::Oneway,
        a.batch
    );
    let mut config = ClientConfig::new();
    config.set_instance_name(epoch_millis().to_string().into());
    let mut producer = DefaultMQProducer::builder(client_runtime)
        .client_config(config)
        .producer_group("benchmark_producer")
        .name_server_addr(a.namesrv.as_str())
        // No compression: the threshold is never reached.
        .compress_msg_body_over_howmuch(i32::MAX as u32)
        .build();
    producer.start().await?;

    let shared = Arc::new(Shared {
        producer: producer.clone(),
        topic: a.topic.clone(),
        body: random_alphanumeric(a.size),
        batch: a.batch,
        mode: a.mode,
        first_ack_us: AtomicU64::new(0),
    });
    let warm = Arc::new(Phase::default());
    let measured = Arc::new(Phase::default());
    let begin = Instant::now();

    let mark = if a.mode == SendMode::Async {
        let window = Arc::new(Semaphore::new(a.inflight));
        if a.warmup > 0 {
            shared.send_windowed(a.warmup, &window, &warm).await;
        }
        let mark = Mark::now(begin);
        shared.send_windowed(a.count, &window, &measured).await;
        mark
    } else {
        // THREADS tasks, each awaiting one call at a time. After the warm-up every task
        // meets the main task at `warmed`; the main task takes the readings, then lets
        // them go on at `go`.
        let warmed = Arc::new(Barrier::new(a.threads + 1));
        let go = Arc::new(Barrier::new(a.threads + 1));
        let mut tasks = Vec::with_capacity(a.threads);
        for w in 0..a.threads {
            let share = |total: u64| {
                total / a.threads as u64 + if w == 0 { total % a.threads as u64 } else { 0 }
            };
            let (mine, mine_warm) = (share(a.count), share(a.warmup));
            let (s, wp, mp, wd, g) = (
                Arc::clone(&shared),
                Arc::clone(&warm),
                Arc::clone(&measured),
                Arc::clone(&warmed),
                Arc::clone(&go),
            );
            let warming = a.warmup > 0;
            tasks.push(tokio::spawn(async move {
                if warming {
                    s.send_sequentially(mine_warm, &wp).await;
                    wd.wait().await;
                    g.wait().await;
                }
                s.send_sequentially(mine, &mp).await;
            }));
        }
        let mark = if a.warmup > 0 {
            warmed.wait().await;
            let mark = Mark::now(begin);
            go.wait().await;
            mark
        } else {
            Mark::now(begin)
        };
        for t in tasks {
            if let Err(e) = t.await {
                eprintln!("sender task failed: {e}");
            }
        }
        mark
    };
    let end = Instant::now();
    let cpu_end = process_cpu_seconds();
    let first_ack_us = shared.first_ack_us.load(Ordering::Acquire);
    drop(shared);
    match tokio::time::timeout(SHUTDOWN_BUDGET, producer.shutdown()).await {
        Ok(()) => {}
        Err(_) => eprintln!("producer shutdown took over {SHUTDOWN_BUDGET:?}"),
    }

    let elapsed_ms = (end - mark.at).as_secs_f64() * 1e3;
    let n = measured.acked.load(Ordering::Acquire);
    let mut lat = std::mem::take(&mut *lock(&measured.latencies));
    lat.sort_unstable();
    let calls = lat.len();
    let sum: f64 = lat.iter().map(|&l| l as f64).sum();
    let avg = if calls == 0 {
        0.0
    } else {
        sum / calls as f64 / 1e6
    };
    let (p50, p99) = (percentile(&lat, 0.50), percentile(&lat, 0.99));
    let max = lat.last().map_or(0.0, |&l| l as f64 / 1e6);
    let tps = n as f64 / (elapsed_ms / 1e3).max(1e-9);
    let warm_acked = warm.acked.load(Ordering::Acquire);
    println!(
        "[Complete] Send Total: {n} Send TPS: {:.0} Max RT(ms): {:.0} Average RT(ms): {avg:7.3} Send Failed: {} \
         Response Failed: {} | p50(ms): {p50:.3} p99(ms): {p99:.3} max(ms): {max:.3} elapsed(ms): {elapsed_ms:.0} \
         warm-up: {warm_acked} acked, {} failed",
        tps,
        max,
        measured.send_failed.load(Ordering::Acquire),
        measured.response_failed.load(Ordering::Acquire),
        warm.failures()
    );
    let warm_json = if a.warmup == 0 {
        String::new()
    } else {
        format!(
            "\"warmup\":{{\"messages\":{warm_acked},\"failures\":{},\"elapsedMs\":{:.1}}},",
            warm.failures(),
            mark.warmup.as_secs_f64() * 1e3
        )
    };
    let measured_cpu = match (mark.cpu, cpu_end) {
        (Some(s), Some(e)) => Some(e - s),
        _ => None,
    };
    let json = format!(
        "{{\"client\":\"{CLIENT}\",\"clientVersion\":\"{CLIENT_VERSION}\",\"mode\":\"{}\",\"threads\":{},\"size\":{},\
         \"batch\":{},{warm_json}\"messages\":{n},\"failures\":{},\"elapsedMs\":{elapsed_ms:.3},\"tps\":{tps:.1},\
         \"latencyMs\":{{\"p50\":{p50:.3},\"p99\":{p99:.3},\"max\":{max:.3},\"calls\":{calls}}},\
         \"measuredCpuSeconds\":{},\"cpuUsPerMsg\":{},\"cpuSeconds\":{},\"firstAckEpochUs\":{}}}",
        a.mode.name(),
        a.threads,
        a.size,
        a.batch,
        measured.failures(),
        measured_cpu.map_or("null".into(), |c| format!("{{\"total\":{c:.2}}}")),
        match measured_cpu {
            Some(c) if n > 0 => format!("{:.1}", c * 1e6 / n as f64),
            _ => "null".into(),
        },
        cpu_end.map_or("null".into(), |c| format!("{{\"total\":{c:.2}}}")),
        if first_ack_us == 0 { "null".into() } else { first_ack_us.to_string() },
    );
    let status = if n == a.count && warm_acked == a.warmup {
        0
    } else {
        1
    };
    Ok(Outcome { json, status })
}

// ---------------------------------------------------------------------------------------------
// consume

#[derive(Clone, Copy, PartialEq, Eq)]
enum ConsumeMode {
    Push,
    LitePull,
}

struct ConsumeArgs {
    namesrv: String,
    topic: String,
    group: String,
    mode: ConsumeMode,
    threads: usize,
    count: u64,
    timeout: Duration,
}

impl ConsumeArgs {
    fn parse(o: &HashMap<String, String>) -> Result<Self, String> {
        check_known(o, &["-n", "-t", "-g", "-m", "-w", "-q", "-T"])?;
        let mode = match o.get("-m").map(String::as_str).unwrap_or("push") {
            "push" => ConsumeMode::Push,
            "litepull" => ConsumeMode::LitePull,
            other => return Err(format!("unknown mode {other}")),
        };
        let count: u64 = take(o, "-q", 0)?;
        let mut threads: usize = take(o, "-w", 20)?;
        let group = o.get("-g").cloned().ok_or("-g group is required")?;
        if count == 0 || !(1..=1000).contains(&threads) {
            return Err("need -q > 0 and -w in 1..=1000".into());
        }
        if mode == ConsumeMode::LitePull {
            // As Consume.java: one poll loop.
            threads = 1;
        }
        Ok(ConsumeArgs {
            namesrv: namesrv(o)?,
            topic: o
                .get("-t")
                .cloned()
                .unwrap_or_else(|| "BenchmarkTest".into()),
            group,
            mode,
            threads,
            count,
            timeout: Duration::from_secs(take(o, "-T", 60)?),
        })
    }
}

/// Offsets of one queue as a bitmap over the range seen so far (as Consume.java's OffsetSet).
#[derive(Default)]
struct OffsetSet {
    base: i64,
    words: Vec<u64>,
    /// Distinct offsets added (for the progress lines).
    count: u64,
}

impl OffsetSet {
    /// Adds the offset; false if it was there already.
    fn add(&mut self, offset: i64) -> bool {
        let word = offset.div_euclid(64);
        if self.words.is_empty() {
            self.base = word;
            self.words = vec![0; 16];
        } else if word < self.base {
            // Consume tasks finish out of order: an earlier offset may come later.
            let grow = (self.base - word) as usize;
            let mut w = vec![0; grow];
            w.extend_from_slice(&self.words);
            self.words = w;
            self.base = word;
        }
        let i = (word - self.base) as usize;
        if i >= self.words.len() {
            let len = (i + 1).max(self.words.len() * 2);
            self.words.resize(len, 0);
        }
        let bit = 1u64 << offset.rem_euclid(64);
        let fresh = self.words[i] & bit == 0;
        self.words[i] |= bit;
        self.count += u64::from(fresh);
        fresh
    }
}

#[derive(Default)]
struct TallyState {
    seen: HashMap<(String, i32), OffsetSet>,
    distinct: u64,
    deliveries: u64,
    duplicates: u64,
    /// Deliveries with a reconsume count above zero: copies the client sent back to the
    /// group's retry topic and got again (keyed by the retry queue, not the original).
    redelivered: u64,
    /// Listener calls (push) or non-empty polls (lite pull), and the OS threads they ran on.
    calls: u64,
    threads: std::collections::HashSet<std::thread::ThreadId>,
    first_us: u64,
    last: Option<Instant>,
}

/// What the listener (or the poll loop) shares with the main task.
struct Tally {
    count: u64,
    state: Mutex<TallyState>,
    done: Notify,
}

impl Tally {
    fn new(count: u64) -> Tally {
        Tally {
            count,
            state: Mutex::new(TallyState::default()),
            done: Notify::new(),
        }
    }

    /// Messages beyond the count are acknowledged but not counted: the run is over.
    fn record<'a>(&self, msgs: impl IntoIterator<Item = &'a MessageExt>) {
        let mut s = lock(&self.state);
        let mut any = false;
        for m in msgs {
            any = true;
            s.deliveries += 1;
            if m.reconsume_times() > 0 {
                s.redelivered += 1;
            }
            let fresh = s
                .seen
                .entry((m.broker_name().to_string(), m.queue_id()))
                .or_default()
                .add(m.queue_offset());
            if !fresh {
                s.duplicates += 1;
                if debug_duplicates() && s.duplicates <= 20 {
                    eprintln!(
                        "duplicate: {}:{} offset {} commitlog {} msgId {} reconsume {} topic {}",
                        m.broker_name(),
                        m.queue_id(),
                        m.queue_offset(),
                        m.commit_log_offset(),
                        m.msg_id(),
                        m.reconsume_times(),
                        m.topic()
                    );
                }
                continue;
            }
            s.distinct += 1;
            if s.distinct > self.count {
                continue;
            }
            if s.first_us == 0 {
                s.first_us = epoch_micros();
            }
            s.last = Some(Instant::now());
            if s.distinct == self.count {
                self.done.notify_one();
            }
        }
        if any {
            s.calls += 1;
            s.threads.insert(std::thread::current().id());
        }
    }

    /// One stderr line: distinct messages so far, the rate since the last line, the
    /// deliveries per listener call (or poll), the threads seen and the count per queue.
    fn report(&self, begin: Instant, previous: &mut (Instant, u64, u64)) {
        let s = lock(&self.state);
        let now = Instant::now();
        let secs = (now - previous.0).as_secs_f64().max(1e-9);
        let rate = (s.distinct - previous.1) as f64 / secs;
        let calls = s.calls - previous.2;
        let per_call = s.deliveries as f64 / s.calls.max(1) as f64;
        let mut queues: Vec<_> = s.seen.iter().map(|(q, set)| (q, set.count)).collect();
        queues.sort();
        let queues: Vec<String> = queues
            .iter()
            .map(|((b, q), n)| format!("{b}:{q}={n}"))
            .collect();
        eprintln!(
            "progress t={:.1}s distinct={} rate={rate:.0}/s calls={} (+{calls}) msgs/call={per_call:.1} \
             threads={} duplicates={} redelivered={} queues [{}]",
            (now - begin).as_secs_f64(),
            s.distinct,
            s.calls,
            s.threads.len(),
            s.duplicates,
            s.redelivered,
            queues.join(" ")
        );
        *previous = (now, s.distinct, s.calls);
    }
}

/// RUST_ASYNC_BENCH_DEBUG_DUPS set: the first duplicates are printed to stderr.
fn debug_duplicates() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RUST_ASYNC_BENCH_DEBUG_DUPS").is_some())
}

/// How often the consumer prints a progress line to stderr (RUST_ASYNC_BENCH_PROGRESS_MS,
/// default 5000; 0 turns them off).
fn progress_interval() -> Option<Duration> {
    let ms = std::env::var("RUST_ASYNC_BENCH_PROGRESS_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000u64);
    (ms > 0).then(|| Duration::from_millis(ms))
}

struct CountingListener(Arc<Tally>);

impl MessageListenerConcurrently for CountingListener {
    fn consume_message(
        &self,
        messages: &[&MessageExt],
        _context: &ConsumeConcurrentlyContext,
    ) -> ClientResult<ConsumeConcurrentlyStatus> {
        self.0.record(messages.iter().copied());
        Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
    }
}

async fn consume(client_runtime: Arc<ClientRuntime>, a: ConsumeArgs) -> ClientResult<Outcome> {
    println!(
        "topic: {} group: {} mode: {} threadCount: {} count: {} clientVersion: {CLIENT_VERSION}",
        a.topic,
        a.group,
        if a.mode == ConsumeMode::Push {
            "push"
        } else {
            "litepull"
        },
        a.threads,
        a.count
    );
    let tally = Arc::new(Tally::new(a.count));
    let begin = Instant::now();
    let deadline = begin + a.timeout;
    let progress = progress_interval().map(|every| {
        let tally = Arc::clone(&tally);
        tokio::spawn(async move {
            let mut previous = (begin, 0, 0);
            let mut tick = tokio::time::interval_at((begin + every).into(), every);
            loop {
                tick.tick().await;
                tally.report(begin, &mut previous);
            }
        })
    });
    match a.mode {
        ConsumeMode::Push => {
            let mut consumer = DefaultMQPushConsumer::builder(client_runtime)
                .consumer_group(a.group.as_str())
                .name_server_addr(a.namesrv.as_str())
                .consume_thread_min(a.threads as u32)
                .consume_thread_max(a.threads as u32)
                .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
                .build();
            let started: ClientResult<()> = async {
                consumer.subscribe(a.topic.as_str(), "*").await?;
                consumer
                    .register_message_listener_concurrently(CountingListener(Arc::clone(&tally)));
                consumer.start().await
            }
            .await;
            if started.is_ok() {
                let _ = tokio::time::timeout_at(deadline.into(), tally.done.notified()).await;
            }
            if tokio::time::timeout(SHUTDOWN_BUDGET, consumer.shutdown())
                .await
                .is_err()
            {
                eprintln!("push consumer shutdown took over {SHUTDOWN_BUDGET:?}");
            }
            started?;
        }
        ConsumeMode::LitePull => {
            let consumer = DefaultLitePullConsumer::builder(client_runtime)
                .consumer_group(a.group.as_str())
                .name_server_addr(a.namesrv.as_str())
                .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
                .build()?;
            let started: ClientResult<()> = async {
                consumer
                    .subscribe_with_expression(a.topic.as_str(), "*")
                    .await?;
                consumer.start().await
            }
            .await;
            if started.is_ok() {
                while lock(&tally.state).distinct < a.count {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    // At most half a second per poll, so that the count is checked often.
                    let wait = (left.as_millis() as u64).clamp(1, 500);
                    let msgs = consumer.poll_with_timeout(wait).await;
                    tally.record(msgs.iter());
                }
            }
            if tokio::time::timeout(SHUTDOWN_BUDGET, consumer.shutdown())
                .await
                .is_err()
            {
                eprintln!("lite pull consumer shutdown took over {SHUTDOWN_BUDGET:?}");
            }
            started?;
        }
    }

    if let Some(p) = progress {
        p.abort();
    }
    tally.report(begin, &mut (begin, 0, 0));
    let s = lock(&tally.state);
    let messages = s.distinct.min(a.count);
    let elapsed_ms = match s.last {
        Some(last) => (last - begin).as_secs_f64() * 1e3,
        None => a.timeout.as_secs_f64() * 1e3,
    };
    let tps = messages as f64 / (elapsed_ms / 1e3).max(1e-9);
    let mode = if a.mode == ConsumeMode::Push {
        "concurrently"
    } else {
        "lite-pull"
    };
    println!(
        "{messages} messages consumed ({} duplicates, {} redelivered from the retry topic) in {:.2} s: {tps:.0} msg/s",
        s.duplicates,
        s.redelivered,
        elapsed_ms / 1e3
    );
    let json = format!(
        "{{\"client\":\"{CLIENT}\",\"clientVersion\":\"{CLIENT_VERSION}\",\"mode\":\"{mode}\",\"topic\":\"{}\",\
         \"group\":\"{}\",\"threads\":{},\"messages\":{messages},\"deliveries\":{},\"duplicates\":{},\
         \"redelivered\":{},\"elapsedMs\":{elapsed_ms:.1},\"tps\":{tps:.1},\"firstMessageEpochUs\":{}}}",
        json_escape(&a.topic),
        json_escape(&a.group),
        a.threads,
        s.deliveries,
        s.duplicates,
        s.redelivered,
        if s.first_us == 0 { "null".into() } else { s.first_us.to_string() },
    );
    Ok(Outcome {
        json,
        status: if messages == a.count { 0 } else { 1 },
    })
}

// ---------------------------------------------------------------------------------------------
// helpers

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The first few send errors go to stderr; the rest are only counted.
fn note_error(what: &str, e: &ClientError) {
    static SHOWN: AtomicU64 = AtomicU64::new(0);
    if SHOWN.fetch_add(1, Ordering::Relaxed) < 10 {
        eprintln!("{what} failed: {e}");
    }
}

fn elapsed_nanos(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Nearest-rank percentile of sorted nanoseconds, in milliseconds.
fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e6
}

fn epoch_since() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The wall clock in microseconds since the epoch, as the harness subtracts it.
fn epoch_micros() -> u64 {
    u64::try_from(epoch_since().as_micros()).unwrap_or(u64::MAX)
}

fn epoch_millis() -> u128 {
    epoch_since().as_millis()
}

/// User + system CPU of the whole process so far, seconds (getrusage(RUSAGE_SELF)).
fn process_cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is given, which points
    // to a zeroed, properly aligned `rusage` that lives for the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: the call succeeded, so the struct is initialised (it was zeroed before anyway).
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// A random alphanumeric body built once (xorshift seeded from the clock: the bytes only
/// need to be incompressible-looking, not secret).
fn random_alphanumeric(size: usize) -> Bytes {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = (epoch_since().as_nanos() as u64) | 1;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize]
        })
        .collect::<Vec<u8>>()
        .into()
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}
