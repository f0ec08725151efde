//! `rmq`: a command-line tool over rocketmq-blocking.
//!
//! The name-server address comes from `-n` or `NAMESRV_ADDR`, as the Java tools read it;
//! credentials for clusters that enforce ACL from `--access-key`/`--secret-key` or
//! `RMQ_ACCESS_KEY`/`RMQ_SECRET_KEY` (every subcommand signs with them), and TLS from the
//! global `--tls*` flags. Errors are one line on stderr and a non-zero exit.

mod admin;
mod bench;
mod bench_consume;
mod cluster;
mod consume;
mod consume_stats;
mod request;
mod scale;
mod send;
mod stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::ProducerBuilder;
use rocketmq_blocking::TlsConfig;
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
    #[command(flatten)]
    tls: TlsArgs,
    #[command(subcommand)]
    command: Command,
}

/// TLS to name servers and brokers (global: before or after the subcommand). Explicit
/// ids keep them apart from the subcommands' own arguments (`send --key` is a message key).
#[derive(clap::Args, Debug, Default, PartialEq, Eq)]
struct TlsArgs {
    /// Use TLS, verifying servers against the system's roots (implied by the other
    /// `--tls-*` flags).
    #[arg(long = "tls", id = "tls_on", global = true)]
    on: bool,
    /// Trust the CA certificates in this PEM file instead of the system's roots.
    #[arg(long = "tls-ca", id = "tls_ca", value_name = "PEM", global = true)]
    ca: Option<PathBuf>,
    /// Client certificate chain (PEM) for servers that require one; needs --tls-key.
    #[arg(
        long = "tls-cert",
        id = "tls_cert",
        value_name = "PEM",
        global = true,
        requires = "tls_key"
    )]
    cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(
        long = "tls-key",
        id = "tls_key",
        value_name = "PEM",
        global = true,
        requires = "tls_cert"
    )]
    key: Option<PathBuf>,
    /// Verify the certificate chain only, not that it names the server's address (what
    /// the Java client does).
    #[arg(long = "tls-chain-only", id = "tls_chain_only", global = true)]
    chain_only: bool,
    /// Accept ANY server certificate (Java's TLS test mode): encrypted, not authenticated.
    #[arg(
        long = "tls-insecure",
        id = "tls_insecure",
        global = true,
        conflicts_with = "tls_ca"
    )]
    insecure: bool,
}

impl TlsArgs {
    fn config(&self) -> Option<TlsConfig> {
        let wanted = self.on || self.ca.is_some() || self.cert.is_some() || self.insecure;
        if !wanted {
            return None;
        }
        let mut tls = if self.insecure {
            TlsConfig::danger_accept_any_server_certificate()
        } else {
            TlsConfig::new()
        };
        if let Some(ca) = &self.ca {
            tls = tls.ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            tls = tls.client_cert(cert, key);
        }
        Some(tls.verify_server_name(!self.chain_only))
    }
}

/// The TLS settings of this run, from the global flags; set once in `main` before any
/// command runs, read by every client the commands build.
static TLS: OnceLock<Option<TlsConfig>> = OnceLock::new();

fn tls() -> Option<TlsConfig> {
    TLS.get().cloned().flatten()
}

/// Client options on the given name servers with the run's encoding, credentials and TLS
/// settings: every client the commands build starts from these.
pub(crate) fn client_options(namesrv: &str, encoding: SerializeType) -> ClientOptions {
    let mut options = ClientOptions::new()
        .namesrv_addr(namesrv)
        .serialize_type(encoding);
    if let Some(c) = credentials() {
        options = options.credentials(c);
    }
    if let Some(t) = tls() {
        options = options.tls(t);
    }
    options
}

#[derive(Subcommand)]
enum Command {
    /// A local RocketMQ cluster from the released jars (name server + broker JVMs).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Print the route of a topic as JSON.
    #[command(visible_alias = "topicRoute")]
    Route(TopicArg),
    /// Topic administration.
    Topic {
        #[command(subcommand)]
        action: TopicAction,
    },
    /// Send messages; prints one JSON line per acknowledged message and a summary line.
    #[command(visible_alias = "sendMessage")]
    Send(send::SendArgs),
    /// Consume with a push consumer; prints one JSON line per message and a summary line.
    Consume(consume::ConsumeArgs),
    /// Send requests and wait for their replies (request-reply); one JSON line per reply.
    Request(request::RequestArgs),
    /// Look messages up: by id, by key, by unique key.
    Message {
        #[command(subcommand)]
        action: admin::MessageAction,
    },
    /// Consumer groups: progress (lag per queue), listing.
    Group {
        #[command(subcommand)]
        action: admin::GroupAction,
    },
    /// A group's offsets.
    Offset {
        #[command(subcommand)]
        action: admin::OffsetAction,
    },
    /// Load generators.
    Bench {
        #[command(subcommand)]
        action: BenchAction,
    },
    /// The brokers of every cluster (or of one), one line per broker (mqadmin clusterList).
    #[command(name = "clusterList")]
    ClusterList(admin::ClusterListArgs),
    /// Each queue's min and max offset and last store time (mqadmin topicStatus).
    #[command(name = "topicStatus")]
    TopicStatus(admin::TopicStatusArgs),
    /// A consumer group's online consumers, one line per broker and client: id, address,
    /// language, version, and the group's subscriptions and settings (mqadmin
    /// consumerConnection).
    #[command(name = "consumerConnection")]
    ConsumerConnection(admin::ConsumerConnectionArgs),
    /// The clients connected under a producer group, from the brokers of a topic (mqadmin
    /// producerConnection).
    #[command(name = "producerConnection")]
    ProducerConnection(admin::ProducerConnectionArgs),
    /// Create or update a subscription group (mqadmin updateSubGroup).
    #[command(name = "updateSubGroup")]
    UpdateSubGroup(admin::SubGroupArgs),
    /// Create a topic on every master broker, a cluster's masters or one broker (= `rmq
    /// topic create`).
    #[command(name = "updateTopic")]
    UpdateTopic(CreateTopicArgs),
    /// Print every topic the name server knows, one line each (= `rmq topic list`).
    #[command(name = "topicList")]
    TopicList,
    /// Delete a topic on every master broker and name server (= `rmq topic delete`).
    #[command(name = "deleteTopic")]
    DeleteTopic(DeleteTopicArgs),
    /// Print one message by its offset message id, or with -t by its msgId (= `rmq message
    /// show`).
    #[command(name = "queryMsgById")]
    QueryMsgById(admin::ShowArgs),
    /// Print one message by the id its producer gave it, the msgId `send` prints (= `rmq
    /// message show -i ID -t TOPIC`).
    #[command(name = "queryMsgByUniqueKey")]
    QueryMsgByUniqueKey(admin::UniqueKeyArgs),
    /// Print the messages of a topic with a key (= `rmq message query`).
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(admin::QueryArgs),
    /// A consumer group's lag per queue, then the total (= `rmq group progress`).
    #[command(name = "consumerProgress")]
    ConsumerProgress(admin::ProgressArgs),
    /// Move a group's offsets in a topic to a time (= `rmq offset reset`).
    #[command(name = "resetOffsetByTime")]
    ResetOffsetByTime(admin::ResetArgs),
}

/// A topic: mqadmin's `-t`, or (for older scripts) the first positional argument.
#[derive(clap::Args, Debug)]
pub(crate) struct TopicArg {
    /// The topic.
    #[arg(
        short = 't',
        long = "topic",
        value_name = "TOPIC",
        required_unless_present = "topic_pos",
        conflicts_with = "topic_pos"
    )]
    topic: Option<String>,
    /// The topic, positionally (the older form of `-t`).
    #[arg(id = "topic_pos", value_name = "TOPIC", hide = true)]
    topic_pos: Option<String>,
}

impl TopicArg {
    /// The topic given; clap requires one of the two forms.
    pub(crate) fn name(&self) -> &str {
        self.topic
            .as_deref()
            .or(self.topic_pos.as_deref())
            .unwrap_or_default()
    }
}

/// `rmq topic create` / `rmq updateTopic`.
#[derive(clap::Args)]
struct CreateTopicArgs {
    #[command(flatten)]
    topic: TopicArg,
    /// Read and write queues per broker (mqadmin `-w`; `-r` is taken as the same number).
    #[arg(long, short = 'w', short_alias = 'r', default_value_t = 8)]
    queues: u32,
    /// Only on the master brokers of this cluster (default: every master broker).
    #[arg(short = 'c', long, conflicts_with = "broker")]
    cluster: Option<String>,
    /// Only on the broker at this address (`host:port`); prints that address as the broker.
    #[arg(short = 'b', long, value_name = "ADDR")]
    broker: Option<String>,
}

/// `rmq topic delete` / `rmq deleteTopic`.
#[derive(clap::Args)]
struct DeleteTopicArgs {
    #[command(flatten)]
    topic: TopicArg,
    /// A cluster that must exist (mqadmin's `-c`). The topic is deleted from every master
    /// broker and name server all the same: rmq has no per-cluster delete.
    #[arg(short = 'c', long)]
    cluster: Option<String>,
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
        /// Start name servers and brokers with TLS, certificates generated for the run
        /// (the paths are printed for `--tls-ca`, `--tls-cert`, `--tls-key`).
        #[arg(long = "tls-mode", id = "tls_mode", value_enum)]
        tls_mode: Option<cluster::TlsMode>,
    },
    /// Stop the background cluster.
    Stop,
    /// Download the RocketMQ jars of a version into the cache (what `start` does first).
    Fetch {
        /// RocketMQ version (Maven Central release).
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
        #[arg(long = "tls-mode", id = "tls_mode", value_enum)]
        tls_mode: Option<cluster::TlsMode>,
    },
}

#[derive(Subcommand)]
enum TopicAction {
    /// Create a topic on every master broker (mqadmin updateTopic).
    Create(CreateTopicArgs),
    /// Print every topic the name server knows, one line each (mqadmin topicList).
    List,
    /// Delete a topic on every master broker and name server (mqadmin deleteTopic).
    Delete(DeleteTopicArgs),
}

#[derive(Subcommand)]
enum BenchAction {
    /// Send as fast as possible and report throughput, latency, CPU and memory.
    Produce(bench::ProduceArgs),
    /// Consume a topic from its first offset and report throughput, end-to-end latency,
    /// CPU and memory.
    Consume(bench_consume::ConsumeArgs),
    /// How the client's costs grow: soak, topics, clients, size, queues (JSON lines).
    Scale {
        #[command(subcommand)]
        experiment: scale::Experiment,
    },
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
        Ok(cli) => {
            let _ = TLS.set(cli.tls.config());
            cli
        }
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
            // One line, even when a broker's remark spans several; the causes follow the
            // message (`Display` leaves them to `source`).
            let mut text = e.to_string();
            let mut cause = e.source();
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            eprintln!("rmq: {}", line.join(" "));
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

/// An admin client on the given name servers, with the run's credentials and TLS.
fn admin(namesrv: &str) -> Result<Admin, rocketmq_blocking::Error> {
    Admin::builder()
        .client_options(client_options(namesrv, SerializeType::from_env()))
        .start()
}

fn run(cli: Cli) -> CliResult {
    let _ = CREDENTIALS.set(credentials_of(&cli)?);
    match cli.command {
        Command::Cluster { action } => cluster::run(action),
        Command::Route(topic) => {
            let admin = admin(&namesrv(&cli.namesrv)?)?;
            let route = admin.topic_route(topic.name())?;
            let json = rocketmq_blocking::protocol::route_to_json(&route);
            println!("{}", serde_json::to_string_pretty(&json)?);
            Ok(())
        }
        Command::Topic {
            action: TopicAction::Create(args),
        }
        | Command::UpdateTopic(args) => create_topic(&admin(&namesrv(&cli.namesrv)?)?, &args),
        Command::Topic {
            action: TopicAction::List,
        }
        | Command::TopicList => admin::topic_list(&admin(&namesrv(&cli.namesrv)?)?),
        Command::Topic {
            action: TopicAction::Delete(args),
        }
        | Command::DeleteTopic(args) => {
            let admin = admin(&namesrv(&cli.namesrv)?)?;
            if let Some(c) = &args.cluster {
                admin::cluster_masters(&admin, c)?;
            }
            admin::topic_delete(&admin, args.topic.name())
        }
        Command::ClusterList(args) => admin::cluster_list(&admin(&namesrv(&cli.namesrv)?)?, args),
        Command::TopicStatus(args) => admin::topic_status(&admin(&namesrv(&cli.namesrv)?)?, args),
        Command::ConsumerConnection(args) => {
            admin::consumer_connection(&admin(&namesrv(&cli.namesrv)?)?, args)
        }
        Command::ProducerConnection(args) => {
            admin::producer_connection(&admin(&namesrv(&cli.namesrv)?)?, args)
        }
        Command::UpdateSubGroup(args) => {
            admin::update_sub_group(&admin(&namesrv(&cli.namesrv)?)?, args)
        }
        Command::QueryMsgById(args) => admin::message(
            &admin(&namesrv(&cli.namesrv)?)?,
            admin::MessageAction::Show(args),
        ),
        Command::QueryMsgByUniqueKey(args) => admin::message(
            &admin(&namesrv(&cli.namesrv)?)?,
            admin::MessageAction::Show(args.into()),
        ),
        Command::QueryMsgByKey(args) => admin::message(
            &admin(&namesrv(&cli.namesrv)?)?,
            admin::MessageAction::Query(args),
        ),
        Command::ConsumerProgress(args) => admin::group(
            &admin(&namesrv(&cli.namesrv)?)?,
            admin::GroupAction::Progress(args),
        ),
        Command::ResetOffsetByTime(args) => admin::offset(
            &admin(&namesrv(&cli.namesrv)?)?,
            admin::OffsetAction::Reset(args),
        ),
        Command::Message { action } => admin::message(&admin(&namesrv(&cli.namesrv)?)?, action),
        Command::Group { action } => admin::group(&admin(&namesrv(&cli.namesrv)?)?, action),
        Command::Offset { action } => admin::offset(&admin(&namesrv(&cli.namesrv)?)?, action),
        Command::Send(args) => send::run(&cli.namesrv, args),
        Command::Request(args) => request::run(&cli.namesrv, args),
        Command::Consume(args) => consume::run(&cli.namesrv, args),
        Command::Bench {
            action: BenchAction::Produce(args),
        } => bench::produce(&cli.namesrv, args),
        Command::Bench {
            action: BenchAction::Consume(args),
        } => bench_consume::run(&cli.namesrv, args),
        Command::Bench {
            action: BenchAction::Scale { experiment },
        } => scale::run(&cli.namesrv, experiment),
    }
}

/// `rmq topic create` / `rmq updateTopic`: on every master, on a cluster's masters, or on
/// one broker; one JSON line naming where.
fn create_topic(admin: &Admin, args: &CreateTopicArgs) -> CliResult {
    check_queues(args.queues)?;
    let topic = args.topic.name();
    let config = TopicConfig::new(topic, args.queues);
    let brokers = match (&args.cluster, &args.broker) {
        (_, Some(addr)) => {
            admin.create_topic_on(addr, &config)?;
            vec![addr.clone()]
        }
        (Some(cluster), None) => {
            let masters = admin::cluster_masters(admin, cluster)?;
            for addr in masters.values() {
                admin.create_topic_on(addr, &config)?;
            }
            admin.wait_for_route(topic, masters.len(), Duration::from_secs(10))?;
            masters.into_keys().collect()
        }
        (None, None) => admin.create_topic(&config)?,
    };
    println!(
        "{}",
        serde_json::json!({"topic": topic, "queues": args.queues, "brokers": brokers})
    );
    Ok(())
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

/// A started producer of `group` with `options`; `tune` adjusts the producer's own.
fn start_producer(
    options: ClientOptions,
    group: &str,
    tune: impl FnOnce(ProducerBuilder) -> ProducerBuilder,
) -> Result<Producer, rocketmq_blocking::Error> {
    tune(Producer::builder(group).client_options(options)).start()
}

/// A push consumer builder for `group` with `options` and `listener`
/// registered as a concurrent or an orderly listener. The listener answers whether the
/// messages were consumed; `false` means "not now" (Java `RECONSUME_LATER` or
/// `SUSPEND_CURRENT_QUEUE_A_MOMENT`).
fn push_consumer(
    options: ClientOptions,
    group: &str,
    orderly: bool,
    listener: impl Fn(&[MessageExt], &MessageQueue) -> bool + Send + Sync + 'static,
) -> PushConsumerBuilder {
    let builder = PushConsumer::builder(group).client_options(options);
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
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        // Catches clashing ids, long names and broken `requires`/`conflicts_with`.
        Cli::command().debug_assert();
    }

    /// Every subcommand, parsed with every TLS flag before and after it.
    #[test]
    fn every_subcommand_takes_the_global_tls_flags() {
        let subcommands: &[&[&str]] = &[
            &["route", "T"],
            &["topic", "create", "T", "--queues", "2"],
            &["topic", "list"],
            &["topic", "delete", "T"],
            &["message", "show", "0A0000010000000000000000000000FF"],
            &[
                "message", "query", "--topic", "T", "--key", "k", "--max", "3",
            ],
            &["message", "query", "--topic", "T", "--unique-key", "u"],
            &["group", "progress", "g", "--topic", "T"],
            &["group", "list"],
            &[
                "offset",
                "reset",
                "--group",
                "g",
                "--topic",
                "T",
                "--to-latest",
            ],
            &["send", "T", "--body", "b", "--key", "k1", "--tag", "A"],
            &["consume", "T", "--group", "g", "--count", "1"],
            &["bench", "produce", "--topic", "T", "--count", "10"],
            &[
                "bench", "consume", "--topic", "T", "--group", "g", "--count", "1",
            ],
            &["cluster", "start", "--tls-mode", "enforcing"],
            &["cluster", "status"],
            &["cluster", "stop"],
            &["cluster", "fetch"],
        ];
        let flags = [
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "c.key",
            "--tls-chain-only",
        ];
        let expected = TlsArgs {
            on: false,
            ca: Some("ca.pem".into()),
            cert: Some("c.pem".into()),
            key: Some("c.key".into()),
            chain_only: true,
            insecure: false,
        };
        for sub in subcommands {
            for before in [true, false] {
                let mut argv = vec!["rmq", "-n", "127.0.0.1:9876"];
                if before {
                    argv.extend(flags);
                    argv.extend(*sub);
                } else {
                    argv.extend(*sub);
                    argv.extend(flags);
                }
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                assert_eq!(cli.tls, expected, "{argv:?}");
                assert!(cli.tls.config().is_some());
            }
            let mut argv = vec!["rmq", "--tls-insecure"];
            argv.extend(*sub);
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let tls = cli.tls.config().expect("TLS on");
            assert!(tls.accepts_any_server_certificate());
        }
        // `send --key` stays the message key.
        let cli = Cli::try_parse_from(["rmq", "send", "T", "--body", "b", "--key", "k1"]).unwrap();
        assert_eq!(cli.tls, TlsArgs::default());
        assert!(cli.tls.config().is_none());
        let Command::Send(args) = cli.command else {
            panic!("not send")
        };
        assert_eq!(args.keys, vec!["k1".to_string()]);
    }

    #[test]
    fn tls_flags_that_cannot_go_together_are_usage_errors() {
        for bad in [
            &["rmq", "--tls-cert", "c.pem", "route", "T"][..],
            &["rmq", "--tls-key", "c.key", "route", "T"],
            &["rmq", "--tls-insecure", "--tls-ca", "ca.pem", "route", "T"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
        let cli = Cli::try_parse_from(["rmq", "--tls", "route", "T"]).unwrap();
        assert!(!cli.tls.config().unwrap().accepts_any_server_certificate());
    }

    #[test]
    fn admin_commands_take_exactly_one_target_and_key() {
        let base = ["rmq", "offset", "reset", "--group", "g", "--topic", "T"];
        for bad in [
            &[][..],
            &["--to-earliest", "--to-latest"],
            &["--timestamp", "1", "--to-latest"],
            &["--timestamp", "-5"],
        ] {
            let argv: Vec<&str> = base.iter().chain(bad).copied().collect();
            assert!(Cli::try_parse_from(&argv).is_err(), "{argv:?}");
        }
        let query = ["rmq", "message", "query", "--topic", "T"];
        for bad in [
            &[][..],
            &["--key", "k", "--unique-key", "u"],
            &["--key", "k", "--max", "0"],
            &["--key", "k", "--begin", "x"],
        ] {
            let argv: Vec<&str> = query.iter().chain(bad).copied().collect();
            assert!(Cli::try_parse_from(&argv).is_err(), "{argv:?}");
        }
        assert!(Cli::try_parse_from(["rmq", "topic", "delete"]).is_err());
        assert!(Cli::try_parse_from(["rmq", "group", "progress"]).is_err());
    }

    /// Every argument a user can see explains itself in `--help`.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(
                    arg.get_action(),
                    clap::ArgAction::Help | clap::ArgAction::Version
                );
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "rmq", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    /// mqadmin's command names and short flags, and the old positional forms, parse.
    #[test]
    fn mqadmin_names_and_short_flags_parse() {
        let forms: &[&[&str]] = &[
            &["clusterList"],
            &["clusterList", "-c", "DefaultCluster"],
            &["topicStatus", "-t", "T"],
            &["consumerConnection", "-g", "g"],
            &["consumerConnection", "-g", "g", "-b", "127.0.0.1:10911"],
            &["producerConnection", "-g", "g", "-t", "T"],
            &[
                "updateSubGroup",
                "-g",
                "g",
                "-c",
                "DefaultCluster",
                "-r",
                "3",
                "-q",
                "1",
                "-s",
                "true",
                "-m",
                "false",
                "-d",
                "false",
                "-o",
                "true",
                "-i",
                "0",
                "-w",
                "1",
                "-a",
                "true",
            ],
            &["updateSubGroup", "-g", "g", "-b", "127.0.0.1:10911"],
            &["topicRoute", "-t", "T"],
            &["route", "-t", "T"],
            &["route", "T"],
            &["updateTopic", "-t", "T", "-c", "DefaultCluster", "-w", "4"],
            &["updateTopic", "-t", "T", "-b", "127.0.0.1:10911", "-r", "4"],
            &["topic", "create", "-t", "T", "--queues", "2"],
            &["topic", "create", "T"],
            &["topicList"],
            &["deleteTopic", "-t", "T", "-c", "DefaultCluster"],
            &["topic", "delete", "-t", "T"],
            &["topic", "delete", "T"],
            &["queryMsgById", "-i", "0A0000010000000000000000000000FF"],
            &["message", "show", "-i", "0A0000010000000000000000000000FF"],
            &["queryMsgByUniqueKey", "-i", "ID", "-t", "T"],
            &[
                "queryMsgByKey",
                "-t",
                "T",
                "-k",
                "k",
                "-b",
                "1",
                "-e",
                "2",
                "-m",
                "3",
            ],
            &["consumerProgress", "-g", "g", "-t", "T"],
            &["group", "progress", "-g", "g"],
            &["group", "progress", "g"],
            &["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "0"],
            &["resetOffsetByTime", "-g", "g", "-t", "T", "-s", "now"],
            &["offset", "reset", "-g", "g", "-t", "T", "--to-latest"],
            &["sendMessage", "-t", "T", "-p", "b", "-k", "k", "-c", "TagA"],
            &["send", "-t", "T", "--body", "b"],
            &["consume", "-t", "T", "-g", "g", "--count", "1"],
        ];
        for form in forms {
            let argv: Vec<&str> = ["rmq"].iter().chain(*form).copied().collect();
            Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
        // One topic: the flag or the old positional, not both; and one target at most.
        for bad in [
            &["rmq", "route", "-t", "T", "U"][..],
            &["rmq", "send", "-t", "T", "U", "--body", "b"],
            &["rmq", "topicStatus"],
            &["rmq", "updateSubGroup", "-g", "g", "-c", "C", "-b", "a:1"],
            &["rmq", "resetOffsetByTime", "-g", "g", "-t", "T", "-s", "x"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn seconds_are_positive_and_may_be_fractional() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        for bad in ["0", "-1", "x", "NaN", "inf", "1e9"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
