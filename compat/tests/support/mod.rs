//! What the compat tests share: the library under test (found or built), one real
//! RocketMQ cluster per test binary (testkit), unique names and topic creation.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{Admin, ClientOptions, TopicConfig};

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();

/// `target/<profile>`: the test binary is `target/<profile>/deps/<name>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors()
        .nth(2)
        .expect("target/<profile>/deps/<binary>")
        .to_path_buf()
}

fn modified(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// The latest modification time of a file under `dir`.
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                newest = newest.max(modified(&path));
            }
        }
    }
    newest
}

/// The directory holding an up-to-date `librocketmq.so`. `cargo build` puts it in the
/// profile's directory; `cargo test` alone does not build a cdylib-only package's
/// library, so when the profile's copy is missing or older than the sources it is built
/// here, once, into a target directory of its own (the outer cargo holds the lock of
/// the shared one while tests run).
pub fn lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile = profile_dir();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let newest = [root.join("src"), root.join("compat/src")]
            .iter()
            .filter_map(|d| newest_mtime(d))
            .max();
        if let (Some(lib), Some(src)) = (modified(&profile.join("librocketmq.so")), newest) {
            if lib >= src {
                return profile;
            }
        }
        let target = profile.parent().expect("target").join("compat-lib");
        eprintln!("building librocketmq.so into {}", target.display());
        let status = Command::new(env!("CARGO"))
            .args(["build", "--locked", "-p", "rocketmq-compat", "--lib"])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building librocketmq.so failed");
        target.join("debug")
    })
    .clone()
}

/// One cluster for the test binary: transaction checks within seconds, and sends that
/// wait in a loaded broker's queue instead of failing.
pub fn namesrv() -> String {
    let c = CLUSTER.get_or_init(|| {
        let mut b = Cluster::builder()
            .work_dir(
                profile_dir()
                    .parent()
                    .expect("target")
                    .join("rocketmq-testkit"),
            )
            .brokers(1)
            .broker_config("transactionCheckInterval", "1000")
            .broker_config("transactionTimeOut", "2000")
            .broker_config("transactionOpBatchInterval", "200")
            .broker_config("waitTimeMillsInSendQueue", "5000")
            .broker_config("osPageCacheBusyTimeOutMills", "5000");
        if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
            b = b.version(&v);
        }
        Mutex::new(
            b.start()
                .unwrap_or_else(|e| panic!("starting the cluster: {e}")),
        )
    });
    c.lock().unwrap_or_else(|e| e.into_inner()).namesrv_addr()
}

/// The cluster's RocketMQ version.
#[allow(dead_code)]
pub fn version() -> String {
    namesrv();
    CLUSTER
        .get()
        .expect("started")
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .version()
        .to_string()
}

pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{prefix}_{}_{nanos}", std::process::id())
}

pub fn create_topic(topic: &str, queues: u32) {
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin starts");
    admin
        .create_topic(&TopicConfig::new(topic, queues))
        .expect("topic created");
}

pub fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
