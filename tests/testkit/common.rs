//! Helpers shared by the testkit tests: cluster probes through the crate's own client,
//! polling, and a /proc scan for a run's processes.
#![allow(dead_code)]

use std::path::Path;

use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;

pub fn init_logging() {
    let _ = env_logger::builder()
        .is_test(true)
        .filter_level(log::LevelFilter::Info)
        .try_init();
}

/// GET_BROKER_CLUSTER_INFO from one name server, as JSON text (broker name → addresses).
pub fn cluster_info(addr: &str) -> Result<String, String> {
    let info = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(addr))
        .start()
        .and_then(|a| a.cluster_info())
        .map_err(|e| e.to_string())?;
    let table: std::collections::BTreeMap<_, _> = info
        .broker_addr_table
        .into_iter()
        .map(|(k, v)| (k, v.broker_addrs))
        .collect();
    serde_json::to_string(&serde_json::json!({
        "brokerAddrTable": table,
        "clusterAddrTable": info.cluster_addr_table,
    }))
    .map_err(|e| e.to_string())
}

/// Whether every name server lists every expected broker address.
pub fn all_registered(namesrv_addr: &str, brokers: &[(String, String)]) -> Result<bool, String> {
    for ns in namesrv_addr.split(';') {
        let body = cluster_info(ns)?;
        if !brokers
            .iter()
            .all(|(_, addr)| body.contains(&format!("\"{addr}\"")))
        {
            return Ok(false);
        }
    }
    Ok(true)
}

pub use crate::counting::eventually;

/// Processes (other than this one) whose command line mentions `dir`: the watchdog
/// shells and JVMs of a run.
pub fn processes_mentioning(dir: &Path) -> Vec<(u32, String)> {
    let needle = dir.to_string_lossy().into_owned();
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmd.contains(&needle) {
            found.push((pid, cmd.chars().take(60).collect()));
        }
    }
    found
}

/// Apparent and allocated size of a directory tree, via `du`.
pub fn disk_use(dir: &Path) -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("du")
            .args(args)
            .arg(dir)
            .output()
            .ok()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .next()
                    .unwrap_or("?")
                    .to_string()
            })
            .unwrap_or_else(|| "?".into())
    };
    format!(
        "{} allocated, {} apparent",
        run(&["-sh"]),
        run(&["-sh", "--apparent-size"])
    )
}
