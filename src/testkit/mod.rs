//! Test support: launches a real Apache RocketMQ cluster (name servers, master brokers,
//! their slaves, or 5.x controller-mode groups with the controller embedded in the name
//! servers) on loopback from the released jars on Maven Central.
//!
//! This module owns everything about those JVMs: fetching the jars of a version once
//! into a shared cache (`<work_dir>/dist/<version>`), a fresh run directory per cluster
//! (`<work_dir>/runs/<pid>-<millis>-<n>`: configs, stores, logs, `ROCKETMQ_HOME`,
//! `user.home`, `java.io.tmpdir`), free-port selection, readiness, stopping and
//! restarting brokers, and making sure no JVM outlives the test process (see
//! `process.rs`: each JVM runs under a watchdog shell). Run directories of dead processes
//! are removed at the next start; the jar cache is kept.
//!
//! Broker nodes are named after their group: `broker-a` is the first node of group
//! `broker-a` (its master, unless a controller decided otherwise), `broker-a-1` the second
//! (the slave with `brokerId` 1), and so on. Every per-broker call ([`Cluster::kill_broker`],
//! [`Cluster::start_broker`], ...) takes a node name.
//!
//! ```no_run
//! use rocketmq_blocking::testkit::Cluster;
//!
//! let cluster = Cluster::builder().brokers(2).start()?;
//! println!("name servers: {}", cluster.namesrv_addr());
//! # Ok::<(), rocketmq_blocking::testkit::TestkitError>(())
//! ```
#![forbid(unsafe_code)]

mod acl;
mod config;
mod dist;
mod error;
pub mod fault_peer;
mod logs;
mod ports;
mod process;
pub mod proxy;
mod readiness;
mod remoting;
mod tls;

pub use acl::{AclAccount, AclPerm};
pub use error::TestkitError;
pub use tls::{TlsFiles, TlsOptions};

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::info;

use node::{Node, Role};
use process::{JvmProcess, JvmSpec};
use proxy::TcpProxy;
use readiness::Launch;
use work_dir::{absolute, default_work_dir, remove_stale_runs};

/// Downloads the jars of `version` into the default cache if they are not there yet
/// (what the first `start` would do), returning the cache directory.
pub fn fetch_jars(version: &str) -> Result<PathBuf, TestkitError> {
    let work_dir = absolute(default_work_dir());
    dist::ensure(&work_dir, version)?;
    Ok(work_dir.join("dist").join(version))
}

/// The size factor of fault and reliability tests: `RMQ_RELIABILITY_SCALE` when it is a
/// positive integer, else 1 (the reduced size `cargo test` runs; 10 is the full size).
pub fn reliability_scale() -> usize {
    std::env::var("RMQ_RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(1)
}

/// Decides readiness instead of the default check (every broker registered at every name
/// server, asked through this crate's client): called with the name server
/// address list (`"127.0.0.1:p1;127.0.0.1:p2"`) and the brokers expected to be up
/// (`(name, "127.0.0.1:port")`), repeatedly, once every JVM's port accepts connections,
/// until it returns `Ok(true)` or the start timeout passes. An `Err` is retried too; the
/// last one is reported in the timeout error.
pub type ReadinessCheck =
    Box<dyn Fn(&str, &[(String, String)]) -> Result<bool, String> + Send + Sync>;

/// One broker node as [`Cluster::broker_nodes`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerNode {
    /// The node's name, for [`Cluster::kill_broker`] and the other per-broker calls.
    pub name: String,
    /// Its `brokerName` (the group it belongs to).
    pub broker_name: String,
    /// 0 for a group's first node, else the slave's `brokerId` (in controller mode the
    /// controllers assign the ids; this is only the node's place in its group).
    pub broker_id: u64,
    /// `"127.0.0.1:port"`.
    pub addr: String,
    /// Its HA port, `"127.0.0.1:port"`.
    pub ha_addr: String,
    /// Whether its JVM is running.
    pub running: bool,
}

/// The RocketMQ release started unless another is asked for.
pub const DEFAULT_VERSION: &str = "5.3.3";
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);
/// SIGTERM lets RocketMQ run its shutdown hook; after this it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
const LOG_TAIL_LINES: usize = 30;
/// Starts retried with new ports when a JVM lost a port race with another process.
const PORT_ATTEMPTS: usize = 3;
/// Brokers bind 127.0.0.1; with proxies they advertise this address, where only their
/// proxy listens (Linux routes all of 127.0.0.0/8 to the loopback interface).
const PROXY_HOST: [u8; 4] = [127, 0, 0, 2];

static RUN_SEQ: AtomicUsize = AtomicUsize::new(0);

/// Configures and starts a [`Cluster`].
pub struct ClusterBuilder {
    version: String,
    name_servers: usize,
    brokers: usize,
    slaves: usize,
    controllers: usize,
    broker_config: Vec<(String, String)>,
    work_dir: Option<PathBuf>,
    readiness: Option<ReadinessCheck>,
    start_timeout: Duration,
    readiness_timeout: Option<Duration>,
    acl: Vec<AclAccount>,
    tls: Option<TlsOptions>,
    broker_proxies: bool,
}

impl std::fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("version", &self.version)
            .field("name_servers", &self.name_servers)
            .field("brokers", &self.brokers)
            .field("slaves", &self.slaves)
            .field("controllers", &self.controllers)
            .field("broker_config", &self.broker_config)
            .field("work_dir", &self.work_dir)
            .field("readiness", &self.readiness.as_ref().map(|_| "custom"))
            .field("start_timeout", &self.start_timeout)
            .field("acl", &self.acl)
            .field("tls", &self.tls)
            .field("broker_proxies", &self.broker_proxies)
            .finish_non_exhaustive()
    }
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            version: DEFAULT_VERSION.to_string(),
            name_servers: 1,
            brokers: 1,
            slaves: 0,
            controllers: 0,
            broker_config: Vec::new(),
            work_dir: None,
            readiness: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            readiness_timeout: None,
            acl: Vec::new(),
            tls: None,
            broker_proxies: false,
        }
    }
}

impl ClusterBuilder {
    /// RocketMQ release to run (default `5.3.3`). Its `rocketmq-namesrv` and
    /// `rocketmq-broker` artifacts must be on Maven Central.
    pub fn version(mut self, v: &str) -> Self {
        self.version = v.to_string();
        self
    }

    /// Number of name servers (default 1).
    pub fn name_servers(mut self, n: usize) -> Self {
        self.name_servers = n;
        self
    }

    /// Number of master brokers, named `broker-a`, `broker-b`, ... in cluster
    /// `DefaultCluster` (default 1).
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n;
        self
    }

    /// Slaves per master (default 0): `broker-a-1` ... `broker-a-<n>`, with the master's
    /// `brokerName`, `brokerId` 1 ... n, `brokerRole=SLAVE`, their own ports (HA port
    /// included) and store, replicating from the master's HA port. In controller mode,
    /// the number of nodes besides the first in each group.
    ///
    /// A 5.x slave refuses pulls (SYSTEM_BUSY) unless `slaveReadEnable=true`; 4.9.x
    /// serves them either way.
    pub fn slaves(mut self, n: usize) -> Self {
        self.slaves = n;
        self
    }

    /// 5.x controller mode with `n` controllers (0, the default, turns it off): the first
    /// `n` name servers embed one (`enableControllerInNamesrv`, one DLedger group; the
    /// name-server count is raised to `n` if lower), and every broker node runs with
    /// `enableControllerMode=true`, `brokerId=-1`, `allAckInSyncStateSet=true`, so the
    /// controllers elect each group's master and promote a slave when it dies. Readiness
    /// then also waits for a master in every group. Use with [`slaves`](Self::slaves).
    pub fn controller_mode(mut self, n: usize) -> Self {
        self.controllers = n;
        self
    }

    /// An extra `broker.conf` entry for every broker; it overrides the testkit's own.
    pub fn broker_config(mut self, key: &str, value: &str) -> Self {
        self.broker_config
            .push((key.to_string(), value.to_string()));
        self
    }

    /// Where the jar cache and run directories live (default
    /// `<CARGO_TARGET_DIR or ./target>/rocketmq-testkit`).
    pub fn work_dir(mut self, dir: PathBuf) -> Self {
        self.work_dir = Some(dir);
        self
    }

    /// Replaces the log-based registration check; see [`ReadinessCheck`].
    pub fn readiness_check(mut self, f: ReadinessCheck) -> Self {
        self.readiness = Some(f);
        self
    }

    /// How long JVM start-up may take, per start (default 120 s; the one-time jar
    /// download is not counted).
    pub fn start_timeout(mut self, d: Duration) -> Self {
        self.start_timeout = d;
        self
    }

    /// How long the readiness check may keep failing once every JVM is up (default: only
    /// the start timeout bounds it). Separates "the JVMs are slow to boot" from "the
    /// cluster never becomes ready".
    pub fn readiness_timeout(mut self, d: Duration) -> Self {
        self.readiness_timeout = Some(d);
        self
    }

    /// Makes the brokers enforce ACL and adds `account` to them; the first account must
    /// be an [admin](AclAccount::admin): the brokers sign their own requests with it, and
    /// on 5.3+ it creates the other accounts with `mqadmin` once the cluster is up.
    /// 4.x reads the accounts from a generated `plain_acl.yml` (ACL 1.0); 5.3+ uses ACL
    /// 2.0 (authentication and authorization with the default providers). Name servers
    /// enforce nothing on either line.
    pub fn acl_account(mut self, account: AclAccount) -> Self {
        self.acl.push(account);
        self
    }

    /// Name servers and brokers with TLS (default: TLS disabled). A new CA, a server and
    /// a client certificate are generated under the run directory
    /// ([`Cluster::tls_files`]); [`Cluster::client_tls`] is what a client needs, and the
    /// launcher's own readiness check uses it too.
    pub fn tls(mut self, options: TlsOptions) -> Self {
        self.tls = Some(options);
        self
    }

    /// Puts a [`TcpProxy`] in front of every broker (default off), so that every client
    /// connection to a broker crosses its proxy and a test can delay, stall, black-hole
    /// or cut them ([`Cluster::broker_proxy`]). A broker then binds `127.0.0.1:<port>`
    /// and advertises `127.0.0.2:<port>` (`brokerIP1`) to the name servers, and only its
    /// proxy listens there; [`Cluster::broker_addrs`] gives the advertised addresses.
    /// The VIP channel (`<port> - 2`) and HA port are not proxied. Needs RocketMQ 5.x:
    /// 4.x brokers have no `bindAddress` and take the port on every address.
    pub fn broker_proxies(mut self, on: bool) -> Self {
        self.broker_proxies = on;
        self
    }

    /// Fetches the jars if needed, starts the name servers, then the brokers, and
    /// waits until the cluster is ready.
    pub fn start(self) -> Result<Cluster, TestkitError> {
        self.validate()?;
        let work_dir = absolute(self.work_dir.clone().unwrap_or_else(default_work_dir));
        let runs = work_dir.join("runs");
        fs::create_dir_all(&runs).map_err(|e| TestkitError::io("create runs dir", &runs, e))?;
        remove_stale_runs(&runs);

        let dist = dist::ensure(&work_dir, &self.version)?;

        let run_dir = runs.join(format!(
            "{}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            RUN_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let log_dir = run_dir.join("logs");
        let home = run_dir.join("home");
        for dir in [&log_dir, &home, &run_dir.join("tmp")] {
            fs::create_dir_all(dir).map_err(|e| TestkitError::io("create run dir", dir, e))?;
        }
        config::write_logback(&home)?;
        acl::write_files(&home, &self.version, &self.acl)?;
        // The ACL switches first, so that the caller's own entries override them.
        let mut broker_extra = match self.acl.first() {
            Some(admin) => acl::broker_entries(&self.version, admin),
            None => Vec::new(),
        };
        broker_extra.extend(self.broker_config);
        let tls = match self.tls {
            Some(options) => Some(tls::ClusterTls::create(options, &run_dir.join("tls"))?),
            None => None,
        };
        let client_tls = tls.as_ref().map(|t| t.files.client_config());

        // From here on, dropping `cluster` on an error path stops whatever started.
        let name_servers = self.name_servers.max(self.controllers);
        let mut cluster = Cluster {
            version: self.version,
            run_dir,
            log_dir,
            home,
            java: java_binary(),
            classpath: dist.classpath,
            namesrvs: Vec::new(),
            brokers: Vec::new(),
            broker_extra,
            acl: self.acl,
            slaves: self.slaves,
            controllers: self.controllers,
            readiness: Some(self.readiness.unwrap_or_else(|| {
                remoting::registered_at_every_name_server(self.controllers > 0, client_tls)
            })),
            start_timeout: self.start_timeout,
            readiness_timeout: self.readiness_timeout,
            tls,
            broker_proxies: self.broker_proxies,
        };
        let started = Instant::now();
        let deadline = started + cluster.start_timeout;

        let mut launches = Vec::new();
        for i in 0..name_servers {
            let idx = cluster.add_node(Role::Namesrv, format!("namesrv-{i}"), String::new(), 0)?;
            launches.push(cluster.launch(Role::Namesrv, idx)?);
        }
        // The cluster-level check waits for the broker phase, unless there is none.
        let namesrvs_only = self.brokers == 0;
        cluster.await_ready(&mut launches, deadline, true, namesrvs_only)?;

        // Brokers register once at boot and then only every 30 s, so they start only
        // after every name server accepts connections.
        let mut launches = Vec::new();
        for i in 0..self.brokers {
            for idx in cluster.add_group(&broker_name(i))? {
                launches.push(cluster.launch(Role::Broker, idx)?);
            }
        }
        if self.brokers > 0 {
            cluster.await_ready(&mut launches, deadline, true, true)?;
            cluster.reregister_slaves();
            if acl::is_v2(&cluster.version) && !cluster.acl.is_empty() {
                let tool = acl::Tool {
                    java: &cluster.java,
                    classpath: &cluster.classpath,
                    home: &cluster.home,
                    run_dir: &cluster.run_dir,
                    log_dir: &cluster.log_dir,
                    namesrv: cluster.namesrv_addr(),
                    timeout: cluster.start_timeout,
                };
                acl::create_users(&tool, &cluster.acl)?;
            }
        }

        info!(
            "RocketMQ {} cluster ready in {:.1}s: name servers {}, brokers {:?}; run dir {}",
            cluster.version,
            started.elapsed().as_secs_f64(),
            cluster.namesrv_addr(),
            cluster.broker_addrs(),
            cluster.run_dir.display()
        );
        Ok(cluster)
    }

    fn validate(&self) -> Result<(), TestkitError> {
        let ok_version = !self.version.is_empty()
            && self
                .version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
        if !ok_version {
            return Err(TestkitError::InvalidArgument(format!(
                "bad version {:?}",
                self.version
            )));
        }
        if self.controllers > 0 && self.version.starts_with("4.") {
            return Err(TestkitError::InvalidArgument(format!(
                "controller mode needs RocketMQ 5, not {}",
                self.version
            )));
        }
        if self.broker_proxies && self.version.starts_with("4.") {
            return Err(TestkitError::InvalidArgument(format!(
                "broker proxies need RocketMQ 5.x: a {} broker binds its port on every \
                 address (no bindAddress), so no proxy can listen on its advertised one",
                self.version
            )));
        }
        if self.name_servers == 0 {
            return Err(TestkitError::InvalidArgument(
                "at least one name server is needed".into(),
            ));
        }
        acl::validate(&self.acl)?;
        for (k, v) in &self.broker_config {
            if k.is_empty() || k.contains(['\n', '\r', '=', ':', ' ']) || v.contains(['\n', '\r']) {
                return Err(TestkitError::InvalidArgument(format!(
                    "bad broker config entry {k:?}={v:?}"
                )));
            }
        }
        Ok(())
    }
}

/// A running RocketMQ cluster; stopped by [`Cluster::shutdown`] or on drop.
pub struct Cluster {
    version: String,
    run_dir: PathBuf,
    log_dir: PathBuf,
    home: PathBuf,
    java: PathBuf,
    classpath: OsString,
    namesrvs: Vec<Node>,
    brokers: Vec<Node>,
    broker_extra: Vec<(String, String)>,
    slaves: usize,
    controllers: usize,
    /// The accounts of a cluster that enforces ACL; the first is the admin.
    acl: Vec<AclAccount>,
    readiness: Option<ReadinessCheck>,
    start_timeout: Duration,
    readiness_timeout: Option<Duration>,
    tls: Option<tls::ClusterTls>,
    broker_proxies: bool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("version", &self.version)
            .field("namesrv_addrs", &self.namesrv_addrs())
            .field("broker_addrs", &self.broker_addrs())
            .field("run_dir", &self.run_dir)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A builder with the defaults: 5.3.3, one name server, one broker.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Name server address list as clients take it: `"127.0.0.1:p1;127.0.0.1:p2"`.
    pub fn namesrv_addr(&self) -> String {
        self.namesrv_addrs().join(";")
    }

    /// Name server addresses, `"127.0.0.1:port"` each.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        self.namesrvs.iter().map(Node::addr).collect()
    }

    /// Every broker of the cluster, stopped ones included: `(name, "127.0.0.1:port")`,
    /// or `(name, "127.0.0.2:port")`, its proxy, with
    /// [`broker_proxies`](ClusterBuilder::broker_proxies).
    pub fn broker_addrs(&self) -> Vec<(String, String)> {
        self.brokers
            .iter()
            .filter(|b| b.ordinal == 0)
            .map(|b| (b.name.clone(), b.addr()))
            .collect()
    }

    /// Every broker node, slaves included, stopped ones too.
    pub fn broker_nodes(&self) -> Vec<BrokerNode> {
        self.brokers
            .iter()
            .map(|b| BrokerNode {
                name: b.name.clone(),
                broker_name: b.group.clone(),
                // A node's place in its group, never negative.
                broker_id: u64::try_from(b.ordinal).unwrap_or(0),
                addr: b.addr(),
                ha_addr: format!("127.0.0.1:{}", u32::from(b.port) + 1),
                running: b.process.is_some(),
            })
            .collect()
    }

    /// The controllers' addresses (`"127.0.0.1:port"`), empty without controller mode.
    pub fn controller_addrs(&self) -> Vec<String> {
        self.namesrvs
            .iter()
            .take(self.controllers)
            .map(Node::controller_addr)
            .collect()
    }

    /// The proxy in front of the named broker (see
    /// [`broker_proxies`](ClusterBuilder::broker_proxies)). It outlives the broker's
    /// restarts, with its switches as they are.
    pub fn broker_proxy(&self, name: &str) -> Result<&TcpProxy, TestkitError> {
        let idx = self.broker_index(name)?;
        self.brokers[idx].proxy.as_ref().ok_or_else(|| {
            TestkitError::InvalidArgument(format!(
                "broker {name} has no proxy (ClusterBuilder::broker_proxies)"
            ))
        })
    }

    /// Whether the named broker node's JVM is running (not stopped through this handle).
    pub fn is_broker_running(&self, name: &str) -> bool {
        self.brokers
            .iter()
            .any(|b| b.name == name && b.process.is_some())
    }

    /// The admin account's credentials, when the cluster enforces ACL
    /// ([`ClusterBuilder::acl_account`]).
    pub fn acl_admin(&self) -> Option<crate::Credentials> {
        self.acl
            .first()
            .map(|a| crate::Credentials::new(&a.access_key, &a.secret_key))
    }

    /// The RocketMQ version this cluster runs.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The CA and certificates of a cluster started with [`ClusterBuilder::tls`].
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref().map(|t| &t.files)
    }

    /// The TLS settings of a cluster started with [`ClusterBuilder::tls`].
    pub fn tls_options(&self) -> Option<&TlsOptions> {
        self.tls.as_ref().map(|t| &t.options)
    }

    /// What a client of this cluster passes to its builder's `tls`: trust the cluster's
    /// CA and present its client certificate. `None` without TLS.
    pub fn client_tls(&self) -> Option<crate::TlsConfig> {
        self.tls_files().map(TlsFiles::client_config)
    }

    /// Directory of the JVMs' logs: `<name>.log` (logback) and `<name>.out`
    /// (stdout/stderr) per process.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// This cluster's run directory (stores, configs, logs).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Runs the official admin tool of this cluster's version (`mqadmin`, main class
    /// `MQAdminStartup` from the distribution's `rocketmq-tools` jar) with `args` and
    /// `-n <name servers>`, and returns its standard output without the tool's own log
    /// lines. It runs in a scratch directory under the run directory (`consumerStatus`
    /// writes files there) and is killed after `timeout`. A non-zero exit is an error
    /// carrying the output.
    pub fn mqadmin(&self, args: &[&str], timeout: Duration) -> Result<String, TestkitError> {
        let dir = self.run_dir.join("mqadmin");
        // 4.9's tool reads `<home>/conf/logback_tools.xml` and does nothing without it;
        // its own logging is not wanted here.
        let conf = dir.join("home").join("conf");
        std::fs::create_dir_all(&conf).map_err(|e| TestkitError::io("create", &conf, e))?;
        let logback = conf.join("logback_tools.xml");
        std::fs::write(
            &logback,
            "<configuration><root level=\"OFF\"/></configuration>\n",
        )
        .map_err(|e| TestkitError::io("write", &logback, e))?;
        let home = dir.join("home");
        let mut cmd = std::process::Command::new(&self.java);
        cmd.current_dir(&dir)
            .env("ROCKETMQ_HOME", &home)
            .arg("-Xmx128m")
            .arg(format!("-Duser.home={}", dir.display()))
            .arg(format!("-Drocketmq.home.dir={}", home.display()))
            .arg("-cp")
            .arg(&self.classpath)
            .arg("org.apache.rocketmq.tools.command.MQAdminStartup")
            .args(args)
            .arg("-n")
            .arg(self.namesrv_addr())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let command = format!("mqadmin {}", args.join(" "));
        let mut child = cmd
            .spawn()
            .map_err(|e| TestkitError::io("run mqadmin", &self.java, e))?;
        // Read both pipes on their own threads, so a chatty tool never blocks on a full pipe.
        let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut out = String::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_string(&mut out);
                }
                out
            })
        };
        let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(TestkitError::Timeout {
                        what: command,
                        waited: timeout,
                        log_dir: self.log_dir.clone(),
                        log_tail: String::new(),
                    });
                }
                Err(e) => return Err(TestkitError::io("wait for mqadmin", &self.java, e)),
            }
        };
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        let out: String = out
            .lines()
            .filter(|l| !l.contains("|-INFO") && !l.contains("logback"))
            .map(|l| format!("{l}\n"))
            .collect();
        // The tool exits 0 when a command fails; it prints the exception instead.
        if !status.success() || err.contains("SubCommandException") {
            return Err(TestkitError::InvalidArgument(format!(
                "{command} failed ({status}):\n{out}{err}"
            )));
        }
        Ok(out)
    }

    /// Stops a broker's JVM: SIGTERM, and SIGKILL if it has not exited after 5 s.
    /// A no-op for a broker that is already stopped.
    pub fn stop_broker(&mut self, name: &str) -> Result<(), TestkitError> {
        self.stop_broker_with(name, false)
    }

    /// SIGKILLs a broker's JVM at once, as in a crash (no shutdown hook, no
    /// unregistration; the store is recovered at the next start).
    pub fn kill_broker(&mut self, name: &str) -> Result<(), TestkitError> {
        self.stop_broker_with(name, true)
    }

    /// Freezes a broker's JVM (SIGSTOP): its connections stay open and nothing answers, as
    /// with a machine that hangs. [`resume_broker`](Self::resume_broker) thaws it.
    pub fn pause_broker(&mut self, name: &str) -> Result<(), TestkitError> {
        self.signal_broker(name, true)
    }

    /// Thaws a broker frozen by [`pause_broker`](Self::pause_broker) (SIGCONT).
    pub fn resume_broker(&mut self, name: &str) -> Result<(), TestkitError> {
        self.signal_broker(name, false)
    }

    fn signal_broker(&mut self, name: &str, pause: bool) -> Result<(), TestkitError> {
        let idx = self.broker_index(name)?;
        let sent = self.brokers[idx]
            .process
            .as_mut()
            .is_some_and(|p| p.pause(pause));
        if sent {
            Ok(())
        } else {
            Err(TestkitError::InvalidArgument(format!(
                "broker {name} is not running"
            )))
        }
    }

    /// SIGKILLs name server `idx` (0-based, in [`namesrv_addrs`](Self::namesrv_addrs)
    /// order). Brokers keep running; clients keep their cached routes.
    pub fn kill_name_server(&mut self, idx: usize) -> Result<(), TestkitError> {
        let node = self
            .namesrvs
            .get_mut(idx)
            .ok_or_else(|| TestkitError::InvalidArgument(format!("no name server number {idx}")))?;
        if let Some(mut p) = node.process.take() {
            p.kill_now();
            p.wait_stopped();
        }
        Ok(())
    }

    /// Restarts every stopped name server on its port, together, and waits until they are
    /// ready. Brokers register with them again at their next registration (every 30 s by
    /// default); until then the name servers know no route.
    pub fn start_name_servers(&mut self) -> Result<(), TestkitError> {
        let stopped: Vec<usize> = (0..self.namesrvs.len())
            .filter(|&i| self.namesrvs[i].process.is_none())
            .collect();
        if stopped.is_empty() {
            return Ok(());
        }
        for &i in &stopped {
            let ports = self.namesrvs[i].ports();
            if !self.namesrvs[i].ports_free(self.start_timeout) {
                return Err(TestkitError::Timeout {
                    what: format!("ports {ports:?} of name server {i} to become free"),
                    waited: self.start_timeout,
                    log_dir: self.log_dir.clone(),
                    log_tail: String::new(),
                });
            }
        }
        let deadline = Instant::now() + self.start_timeout;
        let mut launches = Vec::new();
        for &i in &stopped {
            launches.push(self.launch(Role::Namesrv, i)?);
        }
        self.await_ready(&mut launches, deadline, false, true)
    }

    /// Restarts a stopped broker with the same ports and store, and waits until it is
    /// ready again.
    pub fn start_broker(&mut self, name: &str) -> Result<(), TestkitError> {
        let idx = self.broker_index(name)?;
        if self.brokers[idx].process.is_some() {
            return Err(TestkitError::InvalidArgument(format!(
                "broker {name} is already running"
            )));
        }
        let ports = self.brokers[idx].ports();
        let wait = self.start_timeout;
        if !self.brokers[idx].ports_free(wait) {
            return Err(TestkitError::Timeout {
                what: format!("ports {ports:?} of {name} to become free"),
                waited: wait,
                log_dir: self.log_dir.clone(),
                log_tail: String::new(),
            });
        }
        let deadline = Instant::now() + self.start_timeout;
        let mut launches = vec![self.launch(Role::Broker, idx)?];
        // Same ports are a must here, so a port race is not retried.
        self.await_ready(&mut launches, deadline, false, true)?;
        // A slave started while its master was down has no HA address yet.
        self.reregister_slaves();
        Ok(())
    }

    /// Starts one more broker group (the next free name: `broker-c` after a and b; its
    /// slaves too, if the cluster has them) and waits until it is ready. Returns its name.
    pub fn add_broker(&mut self) -> Result<String, TestkitError> {
        let groups = self.brokers.iter().filter(|b| b.ordinal == 0).count();
        let name = broker_name(groups);
        let deadline = Instant::now() + self.start_timeout;
        let mut launches = Vec::new();
        for idx in self.add_group(&name)? {
            launches.push(self.launch(Role::Broker, idx)?);
        }
        self.await_ready(&mut launches, deadline, true, true)?;
        self.reregister_slaves();
        Ok(name)
    }

    /// Stops every JVM (brokers and name servers together: SIGTERM, SIGKILL after
    /// 5 s) and reaps them. Idempotent; also run on drop. Afterwards the cluster has
    /// no nodes (their ports are released). The run directory is kept for debugging
    /// and removed by a later start once this process has exited.
    pub fn shutdown(&mut self) {
        let started = Instant::now();
        let mut any = false;
        for node in self.brokers.iter_mut().chain(self.namesrvs.iter_mut()) {
            if let Some(p) = node.process.as_mut() {
                p.request_stop();
                any = true;
            }
        }
        for node in self.brokers.iter_mut().chain(self.namesrvs.iter_mut()) {
            if let Some(mut p) = node.process.take() {
                let status = p.wait_stopped();
                info!("{} stopped ({})", node.name, process::describe(status));
            }
        }
        for node in self.brokers.drain(..).chain(self.namesrvs.drain(..)) {
            ports::release(node.port, node.role.port_offsets());
        }
        if any {
            info!(
                "cluster stopped in {:.1}s; logs in {}",
                started.elapsed().as_secs_f64(),
                self.log_dir.display()
            );
        }
    }

    fn stop_broker_with(&mut self, name: &str, kill: bool) -> Result<(), TestkitError> {
        let idx = self.broker_index(name)?;
        let node = &mut self.brokers[idx];
        let Some(mut p) = node.process.take() else {
            return Ok(());
        };
        let started = Instant::now();
        if kill {
            p.kill_now();
        }
        let status = p.wait_stopped();
        info!(
            "{} stopped in {:.1}s ({})",
            node.name,
            started.elapsed().as_secs_f64(),
            process::describe(status)
        );
        Ok(())
    }

    /// Registers the nodes of broker group `name`: its first node and its slaves.
    fn add_group(&mut self, name: &str) -> Result<Vec<usize>, TestkitError> {
        (0..=self.slaves)
            .map(|k| {
                let node = match k {
                    0 => name.to_string(),
                    k => format!("{name}-{k}"),
                };
                self.add_node(Role::Broker, node, name.to_string(), k as i64)
            })
            .collect()
    }

    fn broker_index(&self, name: &str) -> Result<usize, TestkitError> {
        self.brokers
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| TestkitError::InvalidArgument(format!("no broker named {name}")))
    }

    fn nodes(&self, role: Role) -> &[Node] {
        match role {
            Role::Namesrv => &self.namesrvs,
            Role::Broker => &self.brokers,
        }
    }

    fn nodes_mut(&mut self, role: Role) -> &mut Vec<Node> {
        match role {
            Role::Namesrv => &mut self.namesrvs,
            Role::Broker => &mut self.brokers,
        }
    }

    fn out_file(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.out"))
    }

    fn log_file(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// Registers a new node with fresh ports (not started yet).
    fn add_node(
        &mut self,
        role: Role,
        name: String,
        group: String,
        ordinal: i64,
    ) -> Result<usize, TestkitError> {
        let port = ports::pick(role.port_offsets())?;
        let dir = self.run_dir.join(&name);
        fs::create_dir_all(&dir).map_err(|e| TestkitError::io("create node dir", &dir, e))?;
        let proxied = role == Role::Broker && self.broker_proxies;
        let nodes = self.nodes_mut(role);
        nodes.push(Node {
            role,
            name,
            group,
            ordinal,
            port,
            dir,
            process: None,
            proxied,
            proxy: None,
        });
        Ok(nodes.len() - 1)
    }

    /// Starts the node's proxy if it has none yet on its current port (a port race
    /// retried with new ports needs a new one).
    fn ensure_proxy(&mut self, role: Role, idx: usize) -> Result<(), TestkitError> {
        let node = &mut self.nodes_mut(role)[idx];
        if !node.proxied
            || node
                .proxy
                .as_ref()
                .is_some_and(|p| p.listen_addr().port() == node.port)
        {
            return Ok(());
        }
        // The old one (if any) first: it may hold the port the new one needs.
        node.proxy = None;
        let listen = std::net::SocketAddr::from((PROXY_HOST, node.port));
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], node.port));
        let proxy = TcpProxy::start(listen, upstream).map_err(|e| {
            TestkitError::io(
                format!("start the proxy of {} on {listen}", node.name),
                &node.dir,
                e,
            )
        })?;
        node.proxy = Some(proxy);
        Ok(())
    }

    /// Writes the node's config and spawns its JVM.
    fn launch(&mut self, role: Role, idx: usize) -> Result<Launch, TestkitError> {
        self.ensure_proxy(role, idx)?;
        let node = &self.nodes(role)[idx];
        let name = node.name.clone();
        let conf = node.conf_path();
        let text = match role {
            Role::Namesrv if idx < self.controllers => {
                let peers: Vec<String> = self.namesrvs[..self.controllers]
                    .iter()
                    .enumerate()
                    .map(|(i, n)| format!("n{i}-{}", n.controller_addr()))
                    .collect();
                let controller = config::EmbeddedController {
                    peers: &peers.join(";"),
                    self_id: &format!("n{idx}"),
                };
                config::namesrv_properties(node.port, &node.dir, Some(&controller))
            }
            Role::Namesrv => config::namesrv_properties(node.port, &node.dir, None),
            Role::Broker => {
                let kind = if self.controllers > 0 {
                    config::BrokerKind::Controlled {
                        controllers: self.controller_addrs().join(";"),
                    }
                } else if node.ordinal == 0 {
                    config::BrokerKind::Master
                } else {
                    config::BrokerKind::Slave { id: node.ordinal }
                };
                config::broker_conf(
                    &node.group,
                    node.port,
                    &node.addr(),
                    &self.namesrv_addr(),
                    &self.run_dir.join(format!("store-{name}")),
                    &kind,
                    &self.broker_extra,
                )
            }
        };
        config::write(&conf, &text)?;

        let (main_class, heap, max_heap) = match role {
            Role::Namesrv => (
                "org.apache.rocketmq.namesrv.NamesrvStartup",
                "-Xms128m",
                "-Xmx256m",
            ),
            Role::Broker => (
                "org.apache.rocketmq.broker.BrokerStartup",
                "-Xms256m",
                "-Xmx512m",
            ),
        };
        let log_file = self.log_file(&name);
        let out_file = self.out_file(&name);
        let mut args = config::jvm_options(heap, max_heap, &self.run_dir, &self.home, &log_file);
        if role == Role::Broker {
            args.extend(config::broker_jvm_properties());
        }
        if let Some(tls) = &self.tls {
            // After the defaults: the last `-D` of a key wins.
            args.extend(tls.jvm_properties());
        }
        args.push("-cp".into());
        args.push(self.classpath.clone());
        args.push(main_class.into());
        args.push("-c".into());
        args.push(conf.into_os_string());

        let launch = Launch {
            role,
            idx,
            spawned: Instant::now(),
            out_offset: logs::len(&out_file),
            log_offset: logs::len(&log_file),
            ns_offsets: match role {
                Role::Namesrv => Vec::new(),
                Role::Broker => self
                    .namesrvs
                    .iter()
                    .map(|n| logs::len(&self.log_file(&n.name)))
                    .collect(),
            },
            up_after: None,
            last_nudge: None,
            attempts: 1,
        };
        let spec = JvmSpec {
            name: name.clone(),
            java: self.java.clone(),
            args,
            env: vec![("ROCKETMQ_HOME", self.home.clone().into_os_string())],
            cwd: self.nodes(role)[idx].dir.clone(),
            out_file,
            pid_file: self.nodes(role)[idx].dir.join("jvm.pid"),
            grace: STOP_GRACE,
        };
        let process = JvmProcess::spawn(&spec)?;
        self.nodes_mut(role)[idx].process = Some(process);
        Ok(launch)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// `broker-a` ... `broker-z`, then `broker-26`, ...
fn broker_name(i: usize) -> String {
    match u8::try_from(i) {
        Ok(n) if n < 26 => format!("broker-{}", char::from(b'a' + n)),
        _ => format!("broker-{i}"),
    }
}

fn java_binary() -> PathBuf {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = Path::new(&home).join("bin").join("java");
        if java.is_file() {
            return java;
        }
    }
    PathBuf::from("java")
}

mod node;
#[cfg(test)]
mod tests;
mod work_dir;
