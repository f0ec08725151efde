//! `rmq cluster`: a local RocketMQ cluster held by a background `rmq cluster run` process.
//!
//! The holder writes its state (pid, name-server address) to a file and stops when a stop
//! file appears, so `start`, `status` and `stop` are separate short-lived commands.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::{Cluster, TlsOptions};

use crate::{CliResult, ClusterAction};
use rocketmq_blocking::ClientOptions;

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

/// `rmq cluster start --tls-mode`: how the cluster's servers take TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TlsMode {
    /// TLS only (`tls.server.mode=enforcing`).
    Enforcing,
    /// TLS and plain connections both (`tls.server.mode=permissive`).
    Permissive,
}

impl TlsMode {
    fn name(self) -> &'static str {
        match self {
            TlsMode::Enforcing => "enforcing",
            TlsMode::Permissive => "permissive",
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    pid: u32,
    namesrv_addr: String,
    version: String,
    log_dir: String,
    /// With TLS: the flags a client needs (`--tls-ca ... --tls-cert ... --tls-key ...`).
    #[serde(default)]
    tls_flags: Option<Vec<String>>,
}

/// The client flags of a TLS cluster, printed for the user and kept in the state.
fn tls_flags(cluster: &Cluster) -> Option<Vec<String>> {
    let files = cluster.tls_files()?;
    let p = |path: &std::path::Path| path.display().to_string();
    Some(vec![
        "--tls-ca".into(),
        p(&files.ca_cert),
        "--tls-cert".into(),
        p(&files.client_cert),
        "--tls-key".into(),
        p(&files.client_key),
    ])
}

fn read_state() -> Option<State> {
    let text = std::fs::read_to_string(state_file()).ok()?;
    let state: State = serde_json::from_str(&text).ok()?;
    // A holder that died (killed, machine rebooted) leaves a stale file behind.
    std::path::Path::new(&format!("/proc/{}", state.pid))
        .exists()
        .then_some(state)
}

pub(crate) fn run(action: ClusterAction) -> CliResult {
    match action {
        ClusterAction::Start {
            version,
            brokers,
            namesrvs,
            tls_mode,
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
            let mut command = std::process::Command::new(std::env::current_exe()?);
            command
                .args(["cluster", "run", "--version", &version])
                .args(["--brokers", &brokers.to_string()])
                .args(["--namesrvs", &namesrvs.to_string()]);
            if let Some(mode) = tls_mode {
                command.args(["--tls-mode", mode.name()]);
            }
            let mut child = command
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
                    if let Some(flags) = &s.tls_flags {
                        eprintln!("rmq: TLS clients need: {}", flags.join(" "));
                    }
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
            tls_mode,
        } => {
            let mut builder = Cluster::builder()
                .version(&version)
                .brokers(brokers)
                .name_servers(namesrvs);
            builder = match tls_mode {
                Some(TlsMode::Enforcing) => builder.tls(TlsOptions::enforcing()),
                Some(TlsMode::Permissive) => builder.tls(TlsOptions::permissive()),
                None => builder,
            };
            let mut cluster = builder.start()?;
            let state = State {
                pid: std::process::id(),
                namesrv_addr: cluster.namesrv_addr(),
                version,
                log_dir: cluster.log_dir().display().to_string(),
                tls_flags: tls_flags(&cluster),
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
            // A TLS cluster is asked with its own client certificate unless flags say else.
            let admin = match (crate::tls(), &s.tls_flags) {
                (None, Some(flags)) if flags.len() == 6 => rocketmq_blocking::Admin::builder()
                    .client_options(
                        ClientOptions::new().namesrv_addr(&s.namesrv_addr).tls(
                            rocketmq_blocking::TlsConfig::new()
                                .ca_file(&flags[1])
                                .client_cert(&flags[3], &flags[5]),
                        ),
                    )
                    .start()?,
                _ => crate::admin(&s.namesrv_addr)?,
            };
            let info = admin.cluster_info()?;
            let brokers: std::collections::BTreeMap<_, _> = info
                .broker_addr_table
                .iter()
                .map(|(n, b)| (n.clone(), b.broker_addrs.clone()))
                .collect();
            println!(
                "{}",
                serde_json::json!({
                    "namesrvAddr": s.namesrv_addr, "pid": s.pid, "version": s.version,
                    "logDir": s.log_dir, "brokers": brokers, "tlsFlags": s.tls_flags,
                })
            );
            Ok(())
        }
    }
}
