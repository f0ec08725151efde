//! Where clusters run: the default work directory (`target/rocketmq-testkit`: the jar cache
//! and one run directory per cluster) and the removal of run directories whose process is
//! gone.

use std::fs;
use std::path::{Path, PathBuf};

use log::{info, warn};

pub(super) fn default_work_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("rocketmq-testkit")
}

pub(super) fn absolute(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        return p;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(p),
        Err(_) => p,
    }
}

/// Whether a process with this pid exists (Linux `/proc`).
pub(crate) fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Deletes run directories left by processes that no longer exist.
pub(super) fn remove_stale_runs(runs: &Path) {
    // Without /proc every process would look dead.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(Ok(pid)) = name.split('-').next().map(str::parse::<u32>) else {
            continue;
        };
        if pid == me || pid_alive(pid) {
            continue;
        }
        let path = entry.path();
        match fs::remove_dir_all(&path) {
            Ok(()) => info!("removed stale run dir {}", path.display()),
            Err(e) => warn!("cannot remove stale run dir {}: {e}", path.display()),
        }
    }
}
