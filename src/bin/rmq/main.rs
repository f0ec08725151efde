//! `rmq`: a command-line tool over rocketmq-blocking.
//!
//! The name-server address comes from `-n` or `NAMESRV_ADDR`, as the Java tools read it;
//! credentials for clusters that enforce ACL from `--access-key`/`--secret-key` or
//! `RMQ_ACCESS_KEY`/`RMQ_SECRET_KEY` (every subcommand signs with them). Errors are one
//! line on stderr and a non-zero exit.

mod bench;
mod bench_consume;
mod cluster;
mod consume;
mod send;
mod stats;

use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::ProducerBuilder;
use rocketmq_blocking::TopicConfig;
use rocketmq_blocking::{Admin, Credentials};
use rocketmq_blocking::{ConsumeOrderlyStatus, ConsumeStatus, PushConsumer, PushConsumerBuilder};
use rocketmq_blocking::{MessageExt, MessageQueue, Producer};

#[derive(Parser)]
#[command(
    name = "rmq",
    version,
    about = "Apache RocketMQ from the command line (rocketmq-blocking)"
)]
struct Cli {
    /// Name-server addresses, `;`-separated.
    #[arg(short = 'n', long = "namesrv", env = "NAMESRV_ADDR", global = true)]
    namesrv: Option<String>,
    /// Access key for clusters that enforce ACL (5.x: the user name); needs --secret-key.
    #[arg(long, env = "RMQ_ACCESS_KEY", global = true)]
    access_key: Option<String>,
    /// Secret key for clusters that enforce ACL (5.x: the password). Prefer the
    /// environment variable: a flag shows in the process list.
    #[arg(long, env = "RMQ_SECRET_KEY", hide_env_values = true, global = true)]
    secret_key: Option<String>,
    /// Security token, signed and sent with the keys.
    #[arg(
        long,
        env = "RMQ_SECURITY_TOKEN",
        hide_env_values = true,
        global = true
    )]
    security_token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A local RocketMQ cluster from the released jars (name server + broker JVMs).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Print the route of a topic as JSON.
    Route { topic: String },
    /// Topic administration.
    Topic {
        #[command(subcommand)]
        action: TopicAction,
    },
    /// Send messages; prints one JSON line per acknowledged message and a summary line.
    Send(send::SendArgs),
    /// Consume with a push consumer; prints one JSON line per message and a summary line.
    Consume(consume::ConsumeArgs),
    /// Load generators.
    Bench {
        #[command(subcommand)]
        action: BenchAction,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Start a cluster in the background and print `NAMESRV_ADDR=...`.
    Start {
        /// RocketMQ version (Maven Central release).
        #[arg(long, default_value = rocketmq_blocking::testkit::DEFAULT_VERSION)]
        version: String,
        /// Number of brokers.
        #[arg(long, default_value_t = 1)]
        brokers: usize,
        /// Number of name servers.
        #[arg(long, default_value_t = 1)]
        namesrvs: usize,
    },
    /// Stop the background cluster.
    Stop,
    /// Download the RocketMQ jars of a version into the cache (what `start` does first).
    Fetch {
        #[arg(long, default_value = rocketmq_blocking::testkit::DEFAULT_VERSION)]
        version: String,
    },
    /// Show whether a cluster runs and its brokers.
    Status,
    /// Hold a cluster in the foreground until asked to stop (used by `start`).
    #[command(hide = true)]
    Run {
        #[arg(long)]
        version: String,
        #[arg(long)]
        brokers: usize,
        #[arg(long)]
        namesrvs: usize,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic on every master broker.
    Create {
        topic: String,
        /// Read and write queues per broker.
        #[arg(long, default_value_t = 8)]
        queues: u32,
    },
}

#[derive(Subcommand)]
enum BenchAction {
    /// Send as fast as possible and report throughput, latency, CPU and memory.
    Produce(bench::ProduceArgs),
    /// Consume a topic from its first offset and report throughput, end-to-end latency,
    /// CPU and memory.
    Consume(bench_consume::ConsumeArgs),
}

/// How messages are sent (Java: `send`, `send(msg, callback)`, `sendOneway`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Wait for each acknowledgement.
    Sync,
    /// Keep many sends in flight; results arrive on callbacks.
    Async,
    /// Fire and forget: no acknowledgement exists.
    Oneway,
}

/// Header encoding of requests (Java `rocketmq.serialize.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum HeaderEncoding {
    /// fastjson-style JSON headers (the Java client's default).
    Json,
    /// The compact `ROCKETMQ` binary headers (what the Java benchmark tools use).
    Rocketmq,
}

impl From<HeaderEncoding> for SerializeType {
    fn from(e: HeaderEncoding) -> Self {
        match e {
            HeaderEncoding::Json => SerializeType::Json,
            HeaderEncoding::Rocketmq => SerializeType::RocketMq,
        }
    }
}

fn main() -> ExitCode {
    // Taken first so that "time to first ack" counts from (nearly) process start.
    stats::mark_process_start();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help and --version
        Err(e) => {
            // clap's usage errors span several lines; scripts and tests expect one.
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            eprintln!("rmq: {}", line.join(" ").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq: {e}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// The credentials every client of this run signs with (set once, from the arguments).
static CREDENTIALS: OnceLock<Option<Credentials>> = OnceLock::new();

fn credentials() -> Option<Credentials> {
    CREDENTIALS.get().cloned().flatten()
}

/// Both keys or neither; a token only with them.
fn credentials_of(cli: &Cli) -> Result<Option<Credentials>, String> {
    let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    match (nonempty(&cli.access_key), nonempty(&cli.secret_key)) {
        (Some(ak), Some(sk)) => {
            let c = Credentials::new(ak, sk);
            Ok(Some(match nonempty(&cli.security_token) {
                Some(token) => c.with_security_token(token),
                None => c,
            }))
        }
        (None, None) if nonempty(&cli.security_token).is_none() => Ok(None),
        (None, None) => Err("--security-token needs --access-key and --secret-key".into()),
        (Some(_), None) => Err("--access-key needs --secret-key (or RMQ_SECRET_KEY)".into()),
        (None, Some(_)) => Err("--secret-key needs --access-key (or RMQ_ACCESS_KEY)".into()),
    }
}

/// An admin client on the given name servers, signing with the run's credentials; it
/// connects on first use.
fn admin(namesrv: &str) -> Result<Admin, rocketmq_blocking::Error> {
    let builder = Admin::builder().namesrv_addr(namesrv);
    match credentials() {
        Some(c) => builder.credentials(c),
        None => builder,
    }
    .build()
}

fn run(cli: Cli) -> CliResult {
    let _ = CREDENTIALS.set(credentials_of(&cli)?);
    match cli.command {
        Command::Cluster { action } => cluster::run(action),
        Command::Route { topic } => {
            let admin = admin(&namesrv(&cli.namesrv)?)?;
            let route = admin.topic_route(&topic)?;
            println!("{}", serde_json::to_string_pretty(&route)?);
            Ok(())
        }
        Command::Topic {
            action: TopicAction::Create { topic, queues },
        } => {
            check_queues(queues)?;
            let admin = admin(&namesrv(&cli.namesrv)?)?;
            let brokers = admin.create_topic(&TopicConfig::new(&topic, queues))?;
            println!(
                "{}",
                serde_json::json!({"topic": topic, "queues": queues, "brokers": brokers})
            );
            Ok(())
        }
        Command::Send(args) => send::run(&cli.namesrv, args),
        Command::Consume(args) => consume::run(&cli.namesrv, args),
        Command::Bench {
            action: BenchAction::Produce(args),
        } => bench::produce(&cli.namesrv, args),
        Command::Bench {
            action: BenchAction::Consume(args),
        } => bench_consume::run(&cli.namesrv, args),
    }
}

fn namesrv(arg: &Option<String>) -> Result<String, String> {
    arg.clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| "no name server: pass -n HOST:PORT or set NAMESRV_ADDR".to_string())
}

/// Seconds as a positive, finite `Duration` of at most a year (`1`, `0.5`).
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("expected seconds, got {s:?}"))?;
    if !(secs > 0.0 && secs <= 31_536_000.0) {
        return Err(format!("must be positive and at most a year, not {s}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn check_queues(queues: u32) -> Result<(), String> {
    if (1..=1024).contains(&queues) {
        Ok(())
    } else {
        Err(format!("--queues must be between 1 and 1024, not {queues}"))
    }
}

/// A started producer of `group` on the given name servers; `tune` adjusts the options.
fn start_producer(
    namesrv: &str,
    group: &str,
    encoding: SerializeType,
    tune: impl FnOnce(ProducerBuilder) -> ProducerBuilder,
) -> Result<Producer, rocketmq_blocking::Error> {
    let mut builder = Producer::builder(group)
        .namesrv_addr(namesrv)
        .serialize_type(encoding);
    if let Some(c) = credentials() {
        builder = builder.credentials(c);
    }
    tune(builder).start()
}

/// A push consumer builder for `group` on the given name servers with `listener`
/// registered as a concurrent or an orderly listener. The listener answers whether the
/// messages were consumed; `false` means "not now" (Java `RECONSUME_LATER` or
/// `SUSPEND_CURRENT_QUEUE_A_MOMENT`).
fn push_consumer(
    namesrv: &str,
    group: &str,
    encoding: SerializeType,
    orderly: bool,
    listener: impl Fn(&[MessageExt], &MessageQueue) -> bool + Send + Sync + 'static,
) -> PushConsumerBuilder {
    let mut builder = PushConsumer::builder(group)
        .namesrv_addr(namesrv)
        .serialize_type(encoding);
    if let Some(c) = credentials() {
        builder = builder.credentials(c);
    }
    if orderly {
        builder.orderly_listener(move |msgs, ctx| {
            if listener(msgs, ctx.message_queue()) {
                ConsumeOrderlyStatus::Success
            } else {
                ConsumeOrderlyStatus::Suspend
            }
        })
    } else {
        builder.listener(move |msgs, ctx| {
            if listener(msgs, ctx.message_queue()) {
                ConsumeStatus::Success
            } else {
                ConsumeStatus::ReconsumeLater
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_and_may_be_fractional() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        for bad in ["0", "-1", "x", "NaN", "inf", "1e9"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
