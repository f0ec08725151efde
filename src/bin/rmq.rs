//! `rmq`: a command-line tool over rocketmq-blocking.
//!
//! The name-server address comes from `-n` or `NAMESRV_ADDR`, as the Java tools read it.
//! Errors are one line on stderr and a non-zero exit.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use rocketmq_blocking::admin::Admin;
use rocketmq_blocking::client::TopicConfig;
use rocketmq_blocking::testkit::Cluster;

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
        queues: i32,
    },
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmq: {e}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Cluster { action } => cluster(action),
        Command::Route { topic } => {
            let admin = Admin::new(&namesrv(&cli.namesrv)?)?;
            let route = admin.topic_route(&topic)?;
            println!("{}", serde_json::to_string_pretty(&route)?);
            Ok(())
        }
        Command::Topic {
            action: TopicAction::Create { topic, queues },
        } => {
            if !(1..=1024).contains(&queues) {
                return Err(format!("--queues must be between 1 and 1024, not {queues}").into());
            }
            let admin = Admin::new(&namesrv(&cli.namesrv)?)?;
            let brokers = admin.create_topic(&TopicConfig::new(&topic, queues))?;
            println!(
                "{}",
                serde_json::json!({"topic": topic, "queues": queues, "brokers": brokers})
            );
            Ok(())
        }
    }
}

fn namesrv(arg: &Option<String>) -> Result<String, String> {
    arg.clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| "no name server: pass -n HOST:PORT or set NAMESRV_ADDR".to_string())
}

// --- the background cluster ---------------------------------------------------------

/// Where the background cluster keeps its state (`RMQ_CLUSTER_STATE_DIR` overrides).
fn state_dir() -> PathBuf {
    std::env::var_os("RMQ_CLUSTER_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("rmq-blocking-cluster"))
}

fn state_file() -> PathBuf {
    state_dir().join("cluster.json")
}

fn stop_file() -> PathBuf {
    state_dir().join("stop")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    pid: u32,
    namesrv_addr: String,
    version: String,
    log_dir: String,
}

fn read_state() -> Option<State> {
    let text = std::fs::read_to_string(state_file()).ok()?;
    let state: State = serde_json::from_str(&text).ok()?;
    // A holder that died (killed, machine rebooted) leaves a stale file behind.
    std::path::Path::new(&format!("/proc/{}", state.pid))
        .exists()
        .then_some(state)
}

fn cluster(action: ClusterAction) -> CliResult {
    match action {
        ClusterAction::Start {
            version,
            brokers,
            namesrvs,
        } => {
            if let Some(s) = read_state() {
                println!("NAMESRV_ADDR={}", s.namesrv_addr);
                eprintln!("rmq: a cluster is already running (pid {})", s.pid);
                return Ok(());
            }
            std::fs::create_dir_all(state_dir())?;
            let _ = std::fs::remove_file(state_file());
            let _ = std::fs::remove_file(stop_file());
            let log = std::fs::File::create(state_dir().join("holder.log"))?;
            let mut child = std::process::Command::new(std::env::current_exe()?)
                .args(["cluster", "run", "--version", &version])
                .args(["--brokers", &brokers.to_string()])
                .args(["--namesrvs", &namesrvs.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?;
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                if let Some(s) = read_state() {
                    println!("NAMESRV_ADDR={}", s.namesrv_addr);
                    eprintln!(
                        "rmq: cluster running (RocketMQ {}, logs in {})",
                        s.version, s.log_dir
                    );
                    return Ok(());
                }
                if let Some(status) = child.try_wait()? {
                    let log =
                        std::fs::read_to_string(state_dir().join("holder.log")).unwrap_or_default();
                    return Err(format!("the cluster did not start ({status}):\n{log}").into());
                }
                if Instant::now() > deadline {
                    return Err("the cluster did not start within 300 s".into());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        ClusterAction::Run {
            version,
            brokers,
            namesrvs,
        } => {
            let mut cluster = Cluster::builder()
                .version(&version)
                .brokers(brokers)
                .name_servers(namesrvs)
                .start()?;
            let state = State {
                pid: std::process::id(),
                namesrv_addr: cluster.namesrv_addr(),
                version,
                log_dir: cluster.log_dir().display().to_string(),
            };
            let tmp = state_file().with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec(&state)?)?;
            std::fs::rename(&tmp, state_file())?;
            while !stop_file().exists() {
                std::thread::sleep(Duration::from_millis(200));
            }
            cluster.shutdown();
            let _ = std::fs::remove_file(state_file());
            let _ = std::fs::remove_file(stop_file());
            Ok(())
        }
        ClusterAction::Fetch { version } => {
            let dir = rocketmq_blocking::testkit::fetch_jars(&version)?;
            eprintln!("rmq: RocketMQ {version} jars in {}", dir.display());
            Ok(())
        }
        ClusterAction::Stop => {
            let Some(s) = read_state() else {
                return Err("no cluster is running".into());
            };
            std::fs::write(stop_file(), b"stop")?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while std::path::Path::new(&format!("/proc/{}", s.pid)).exists() {
                if Instant::now() > deadline {
                    return Err(format!(
                        "the cluster holder (pid {}) did not stop within 60 s",
                        s.pid
                    )
                    .into());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("rmq: cluster stopped");
            Ok(())
        }
        ClusterAction::Status => {
            let Some(s) = read_state() else {
                return Err("no cluster is running".into());
            };
            let info = Admin::new(&s.namesrv_addr)?.cluster_info()?;
            let brokers: std::collections::BTreeMap<_, _> = info
                .broker_addr_table
                .iter()
                .map(|(n, b)| (n.clone(), b.broker_addrs.clone()))
                .collect();
            println!(
                "{}",
                serde_json::json!({
                    "namesrvAddr": s.namesrv_addr, "pid": s.pid, "version": s.version,
                    "logDir": s.log_dir, "brokers": brokers,
                })
            );
            Ok(())
        }
    }
}
