//! What the feature examples share: the cluster to talk to, logging, unique names.
//!
//! Included by each example with `#[path = "common/mod.rs"] mod common;`. A directory
//! without `main.rs` is not an example of its own, so cargo does not build this alone.

// Each example uses only part of this module.
#![allow(dead_code)]

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rocketmq_blocking::testkit::{Cluster, ClusterBuilder};
use rocketmq_blocking::{Admin, ClientOptions};

/// What examples return: any error, printed by `main` with a non-zero exit code.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The name servers to use, and the local cluster when this run started one.
///
/// Keep it alive until the end of `main`: dropping it stops the cluster.
pub struct Target {
    /// `;`-separated name-server addresses.
    pub namesrv: String,
    /// The cluster this run started; `None` when `NAMESRV_ADDR` was set.
    pub cluster: Option<Cluster>,
}

impl Target {
    /// Client options on these name servers, for every client an example builds.
    pub fn options(&self) -> ClientOptions {
        ClientOptions::new().namesrv_addr(&self.namesrv)
    }

    /// A started admin on these name servers.
    pub fn admin(&self) -> rocketmq_blocking::Result<Admin> {
        Admin::builder().client_options(self.options()).start()
    }
}

/// Logging to stderr at `warn` unless `RUST_LOG` says otherwise.
pub fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
}

/// The cluster at `NAMESRV_ADDR` when it is set, else a local one with default settings.
pub fn target() -> Result<Target> {
    target_with(Cluster::builder())
}

/// The cluster at `NAMESRV_ADDR` when it is set, else a local one started from `builder`
/// (the jars come from Maven Central on first use; JDK 17 and Maven are needed).
pub fn target_with(builder: ClusterBuilder) -> Result<Target> {
    if let Ok(addr) = std::env::var("NAMESRV_ADDR") {
        if !addr.trim().is_empty() {
            println!("using the cluster at NAMESRV_ADDR={addr}");
            return Ok(Target {
                namesrv: addr,
                cluster: None,
            });
        }
    }
    println!("NAMESRV_ADDR is not set: starting a local RocketMQ cluster...");
    let t = Instant::now();
    let cluster = builder.start()?;
    println!(
        "cluster up in {:.1} s: NAMESRV_ADDR={} (RocketMQ {})",
        t.elapsed().as_secs_f64(),
        cluster.namesrv_addr(),
        cluster.version()
    );
    Ok(Target {
        namesrv: cluster.namesrv_addr(),
        cluster: Some(cluster),
    })
}

/// `prefix` made unique per run (process id and time), for topics and groups: a fresh
/// group has no stored offsets, and a fresh topic holds only this run's messages.
pub fn unique(prefix: &str) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{prefix}_{}_{ms}", std::process::id())
}
