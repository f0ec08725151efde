//! End-to-end benchmark: produce and consume workloads against a real RocketMQ cluster,
//! reported as one table of messages, TPS and latency percentiles.
//!
//! ```sh
//! cargo bench --bench e2e                # every workload
//! cargo bench --bench e2e -- sync batch  # sync-1t, sync-64t and batch-16x1KiB
//! cargo bench --bench e2e -- --list      # the workload names
//! ```
//!
//! A filter selects the workloads that have a word (`-`-separated) starting with it, so
//! `sync` picks `sync-1t` and `sync-64t` but not `async-w1024`; `--skip F` leaves out what
//! `F` selects. Other flags (cargo passes `--bench` to every `harness = false` target) are
//! ignored. Without `--bench`, as `cargo test --benches` runs it, no cluster is touched:
//! only the filter and the summary parsing are checked.
//!
//! The cluster is the one at `NAMESRV_ADDR` when set, else a name server and a broker
//! started by the testkit (its default heaps: 256 MiB and 512 MiB) and stopped when the
//! run ends, failures included. Each run creates its own topic with 8 queues and its own
//! groups, so other traffic on a shared cluster is not counted.
//!
//! Every workload is one run of the `rmq` binary (`rmq bench produce`, `rmq bench
//! consume`), whose JSON summary line is parsed here. That keeps a single load generator
//! for the command line and this bench, and gives each workload a fresh process.
//!
//! Sizes: `E2E_COUNT` messages of 1 KiB per produce workload (default 20000); `sync-1t`,
//! bound by round trips, sends a tenth of that. An unreported warm-up of 2000 messages
//! comes first. The consume workload drains everything in the topic (when run alone, it
//! first fills the topic). The exit status is non-zero when a workload did not send or
//! consume every message, or the broker did not store every message sent.

use std::error::Error;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::TopicConfig;
use serde_json::Value;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const DEFAULT_COUNT: u64 = 20_000;
const QUEUES: u32 = 8;
const BODY_BYTES: &str = "1024";
const CONSUME: &str = "consume";
/// Messages sent before the workloads, to warm up the servers.
const WARMUP: u64 = 2000;
/// How long the broker may take to make what it acknowledged visible in the queues.
const STORE_WAIT: Duration = Duration::from_secs(5);

/// One `rmq bench produce` run.
struct Produce {
    name: &'static str,
    args: &'static [&'static str],
    /// The workload sends `E2E_COUNT / divisor` messages.
    divisor: u64,
}

const PRODUCE: [Produce; 5] = [
    produce("sync-1t", &["--mode", "sync", "--threads", "1"], 10),
    produce("sync-64t", &["--mode", "sync", "--threads", "64"], 1),
    produce("async-w1024", &["--mode", "async", "--inflight", "1024"], 1),
    produce("oneway-64t", &["--mode", "oneway", "--threads", "64"], 1),
    produce(
        "batch-16x1KiB",
        &["--mode", "sync", "--threads", "64", "--batch", "16"],
        1,
    ),
];

const fn produce(name: &'static str, args: &'static [&'static str], divisor: u64) -> Produce {
    Produce {
        name,
        args,
        divisor,
    }
}

/// The command line as cargo and libtest users write it.
#[derive(Default)]
struct Args {
    bench: bool,
    list: bool,
    filters: Vec<String>,
    skip: Vec<String>,
}

impl Args {
    fn parse(args: impl IntoIterator<Item = String>) -> Args {
        let mut parsed = Args::default();
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--bench" => parsed.bench = true,
                "--list" => parsed.list = true,
                "--skip" => parsed.skip.extend(args.next()),
                _ if a.starts_with('-') => {}
                _ => parsed.filters.push(a),
            }
        }
        parsed
    }

    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| name.split('-').any(|word| word.starts_with(f.as_str()));
        (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skip.iter().any(hit)
    }
}

/// One line of the table.
struct Row {
    name: String,
    messages: u64,
    elapsed_ms: f64,
    tps: f64,
    /// p50, p90, p99 and max in milliseconds.
    latency_ms: [f64; 4],
    /// Why the workload counts as failed.
    problem: Option<String>,
}

impl Row {
    /// The row of an `rmq bench` JSON summary line.
    fn from_summary(name: &str, line: &str) -> BenchResult<Row> {
        let v: Value = serde_json::from_str(line)?;
        let number = |field: &Value, what: &str| {
            field
                .as_f64()
                .ok_or_else(|| format!("no number {what} in {line}"))
        };
        let lat = &v["latencyMs"];
        let mut latency_ms = [0.0; 4];
        for (slot, q) in latency_ms.iter_mut().zip(["p50", "p90", "p99", "max"]) {
            *slot = number(&lat[q], q)?;
        }
        Ok(Row {
            name: name.to_string(),
            messages: v["messages"]
                .as_u64()
                .ok_or_else(|| format!("no messages in {line}"))?,
            elapsed_ms: number(&v["elapsedMs"], "elapsedMs")?,
            tps: number(&v["tps"], "tps")?,
            latency_ms,
            problem: None,
        })
    }

    /// A workload that produced no summary at all.
    fn failed(name: &str, problem: String) -> Row {
        Row {
            name: name.to_string(),
            messages: 0,
            elapsed_ms: 0.0,
            tps: 0.0,
            latency_ms: [0.0; 4],
            problem: Some(problem),
        }
    }
}

/// Every workload, in the order they run.
fn workloads() -> impl Iterator<Item = &'static str> {
    PRODUCE.iter().map(|p| p.name).chain([CONSUME])
}

fn main() -> ExitCode {
    let args = Args::parse(std::env::args().skip(1));
    if args.list {
        for name in workloads().filter(|n| args.selects(n)) {
            println!("{name}: benchmark");
        }
        return ExitCode::SUCCESS;
    }
    if !args.bench {
        return match self_check() {
            Ok(()) => {
                println!("e2e: checks passed; the workloads run under `cargo bench`");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("e2e: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("e2e: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the selected workloads; `Ok(false)` when one of them fell short.
fn run(args: &Args) -> BenchResult<bool> {
    let count = match std::env::var("E2E_COUNT") {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("E2E_COUNT must be a positive integer, not {s:?}"))?,
        Err(_) => DEFAULT_COUNT,
    };
    let produce: Vec<&Produce> = PRODUCE.iter().filter(|p| args.selects(p.name)).collect();
    let consume = args.selects(CONSUME);
    if produce.is_empty() && !consume {
        println!("e2e: no workload matches {:?}", args.filters);
        return Ok(true);
    }

    // Dropped when `run` returns, on errors too: that stops a cluster started here.
    let (namesrv, cluster) = connect()?;
    let run_id = format!("{}_{}", std::process::id(), millis_since_epoch());
    let topic = format!("E2EBench_{run_id}");
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&namesrv))
        .start()?;
    admin.create_topic(&TopicConfig::new(&topic, QUEUES))?;
    eprintln!("e2e: topic {topic} ({QUEUES} queues), {count} messages per workload");

    let ctx = Ctx {
        namesrv: &namesrv,
        topic: &topic,
        run_id: &run_id,
    };
    let mut rows = Vec::new();
    // A fresh broker and name server run their first requests interpreted by the JVM, slowly
    // enough that the first workload's numbers would be about them (and 64 threads racing
    // for the first route can run out their 3 s send timeout): warm them up, unreported.
    let warmup = ctx.produce("warm-up", &["--mode", "async"], WARMUP.min(count));
    if let Some(p) = warmup.problem {
        return Err(format!("the warm-up failed: {p}").into());
    }
    // Messages in the topic so far: each workload must add what it reports as sent.
    let mut stored = wait_stored(&admin, &topic, warmup.messages)?;
    for p in &produce {
        let mut row = ctx.produce(p.name, p.args, (count / p.divisor).max(1));
        let now = wait_stored(&admin, &topic, stored + row.messages)?;
        // Oneway sends have no acknowledgement, and a busy broker drops them silently.
        let arrived = now.saturating_sub(stored);
        if arrived != row.messages {
            let stored_note = format!("the broker stored {arrived}");
            row.problem = Some(match row.problem.take() {
                Some(p) => format!("{p}; {stored_note}"),
                None => format!("{stored_note} of them"),
            });
        }
        stored = now;
        rows.push(row);
    }
    if consume {
        if produce.is_empty() {
            // Alone, the drain needs something to drain; the fill is not reported.
            let fill = ctx.produce("fill", &["--mode", "async"], count);
            if let Some(p) = fill.problem {
                return Err(format!("filling the topic failed: {p}").into());
            }
            stored = wait_stored(&admin, &topic, stored + fill.messages)?;
        }
        rows.push(match stored {
            0 => Row::failed(CONSUME, "nothing to consume".into()),
            n => ctx.consume(n),
        });
    }
    drop(admin);
    if cluster.is_some() {
        eprintln!("e2e: stopping the local cluster");
    }
    drop(cluster);

    print_table(&rows);
    let mut ok = true;
    for (name, problem) in rows
        .iter()
        .filter_map(|r| Some((&r.name, r.problem.as_ref()?)))
    {
        eprintln!("e2e: {name} FAILED: {problem}");
        ok = false;
    }
    Ok(ok)
}

/// The name server to use and, when started here, the cluster that owns it.
fn connect() -> BenchResult<(String, Option<Cluster>)> {
    if let Ok(addr) = std::env::var("NAMESRV_ADDR") {
        if !addr.trim().is_empty() {
            eprintln!("e2e: using the cluster at NAMESRV_ADDR={addr}");
            return Ok((addr.trim().to_string(), None));
        }
    }
    eprintln!("e2e: NAMESRV_ADDR is not set: starting a local name server and broker");
    let started = Instant::now();
    // The broker sheds sends that waited over 200 ms in its queue (SYSTEM_BUSY, not retried)
    // and those beyond 10000 queued; oneway sends it drops silently. On a small machine 64
    // senders get there, and oneway, which has no back-pressure, always does: the run would
    // fail instead of measuring. Queueing time still shows in the latencies.
    let cluster = Cluster::builder()
        .broker_config("waitTimeMillsInSendQueue", "5000")
        .broker_config("osPageCacheBusyTimeOutMills", "5000")
        .broker_config("sendThreadPoolQueueCapacity", "100000")
        .start()?;
    eprintln!(
        "e2e: RocketMQ {} up in {:.1} s at {}",
        cluster.version(),
        started.elapsed().as_secs_f64(),
        cluster.namesrv_addr()
    );
    Ok((cluster.namesrv_addr(), Some(cluster)))
}

/// What every `rmq` run of this bench shares.
struct Ctx<'a> {
    namesrv: &'a str,
    topic: &'a str,
    run_id: &'a str,
}

impl Ctx<'_> {
    fn produce(&self, name: &str, mode_args: &[&str], count: u64) -> Row {
        let group = format!("e2e_producer_{}", self.run_id);
        let count_s = count.to_string();
        let mut args = vec!["bench", "produce", "--topic", self.topic, "--group", &group];
        args.extend(["--size", BODY_BYTES, "--count", &count_s]);
        args.extend(mode_args);
        self.rmq(name, &args, count, "sent")
    }

    /// Drains `count` messages with a new push consumer group from the first offset.
    fn consume(&self, count: u64) -> Row {
        let group = format!("e2e_consumer_{}", self.run_id);
        let count_s = count.to_string();
        // A minute for the rebalance and slow machines, plus 2000 messages a second.
        let timeout = (60 + count / 2000).to_string();
        let mut args = vec!["bench", "consume", "--topic", self.topic, "--group", &group];
        args.extend(["--count", &count_s, "--timeout", &timeout]);
        self.rmq(CONSUME, &args, count, "consumed")
    }

    /// Runs `rmq` (its progress lines pass through to stderr) and reads its summary; the
    /// row is failed unless `rmq` succeeded with `expected` messages `done`.
    fn rmq(&self, name: &str, args: &[&str], expected: u64, done: &str) -> Row {
        eprintln!("e2e: {name}: rmq {}", args.join(" "));
        let output = Command::new(env!("CARGO_BIN_EXE_rmq"))
            .args(["-n", self.namesrv])
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let output = match output {
            Ok(o) => o,
            Err(e) => return Row::failed(name, format!("cannot run rmq: {e}")),
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        let summary = stdout.lines().rev().find(|l| l.starts_with('{'));
        let status = output.status;
        let mut row = match summary.map(|line| Row::from_summary(name, line)) {
            Some(Ok(row)) => row,
            Some(Err(e)) => {
                return Row::failed(name, format!("unreadable summary ({status}): {e}"))
            }
            None => return Row::failed(name, format!("no summary from rmq ({status})")),
        };
        if row.messages != expected {
            row.problem = Some(format!("{} of {expected} messages {done}", row.messages));
        } else if !status.success() {
            row.problem = Some(format!("rmq exited with {status}"));
        }
        row
    }
}

/// The topic's message count once it reaches `expected`, or after [`STORE_WAIT`].
fn wait_stored(admin: &Admin, topic: &str, expected: u64) -> BenchResult<u64> {
    let deadline = Instant::now() + STORE_WAIT;
    loop {
        let stored = u64::try_from(admin.total_max_offset(topic)?).unwrap_or(0);
        if stored >= expected || Instant::now() >= deadline {
            return Ok(stored);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<14} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9}  status",
        "workload", "messages", "secs", "TPS", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    for r in rows {
        let [p50, p90, p99, max] = r.latency_ms;
        println!(
            "{:<14} {:>9} {:>8.2} {:>10.0} {:>9.3} {:>9.3} {:>9.3} {:>9.3}  {}",
            r.name,
            r.messages,
            r.elapsed_ms / 1000.0,
            r.tps,
            p50,
            p90,
            p99,
            max,
            if r.problem.is_some() { "FAILED" } else { "ok" }
        );
    }
    println!("latency: per send call (a batch is one call; oneway: until queued for writing);");
    println!("consume: end to end from bornTimestamp, so it includes the age of the backlog");
}

fn millis_since_epoch() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// What `cargo test --benches` checks: filters and summary parsing, without a cluster.
fn self_check() -> BenchResult<()> {
    let args = |a: &[&str]| Args::parse(a.iter().map(|s| s.to_string()));
    let picked = |a: &Args| -> Vec<&str> { workloads().filter(|n| a.selects(n)).collect() };
    let all: Vec<&str> = workloads().collect();
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--bench"], &all),
        (&["--bench", "sync"], &["sync-1t", "sync-64t"]),
        (
            &["--bench", "--nocapture", "64", "cons"],
            &["sync-64t", "oneway-64t", "consume"],
        ),
        (
            &["--bench", "--skip", "sync", "--skip", "batch"],
            &["async-w1024", "oneway-64t", "consume"],
        ),
        (&["--bench", "nothing"], &[]),
    ];
    for (argv, want) in cases {
        let got = picked(&args(argv));
        if got != want {
            return Err(format!("{argv:?} selected {got:?}, not {want:?}").into());
        }
    }
    let line = r#"{"mode":"sync","messages":2000,"failures":0,"elapsedMs":1250.5,"tps":1599.4,
        "latencyMs":{"p50":0.5,"p90":0.8,"p99":1.5,"p999":2.0,"max":9.25,"mean":0.6,"calls":2000}}"#;
    let row = Row::from_summary("sync-1t", line)?;
    if (row.messages, row.tps, row.latency_ms) != (2000, 1599.4, [0.5, 0.8, 1.5, 9.25]) {
        return Err("the sample summary was misread".into());
    }
    if Row::from_summary("x", r#"{"messages":1}"#).is_ok() {
        return Err("a summary without figures was accepted".into());
    }
    Ok(())
}
