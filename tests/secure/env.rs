//! The ACL clusters this binary shares (one per RocketMQ line, started on first use),
//! their accounts, and a logger that keeps every log line of the run for the secret
//! search.
#![allow(dead_code)]

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::testkit::{AclAccount, AclPerm, Cluster};
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{Admin, Credentials, TopicConfig};

pub const ADMIN: (&str, &str) = ("acl_admin", "Adm1nS3cretQx7");
/// Pub and Sub on the application topics, Sub on the application groups.
pub const APP: (&str, &str) = ("acl_app", "AppS3cretZk42");
/// Pub on `T_PUB` only; Sub on the group `G_NOSUB` but not on any topic.
pub const PUB_ONLY: (&str, &str) = ("acl_pub_only", "PubOnlyS3cretM9");
/// Sub on `T_SUB` and the group `G_SUB` only.
pub const SUB_ONLY: (&str, &str) = ("acl_sub_only", "SubOnlyS3cretW3");
/// A secret no account has.
pub const WRONG_SECRET: &str = "Wr0ngS3cretVv8";

/// Every secret of the run: none may appear in a log line.
pub const SECRETS: [&str; 5] = [ADMIN.1, APP.1, PUB_ONLY.1, SUB_ONLY.1, WRONG_SECRET];

pub const T_APP: &str = "AclAppTopic";
pub const T_RETRY: &str = "AclRetryTopic";
pub const T_LITE: &str = "AclLiteTopic";
pub const T_JAVA_TO_RUST: &str = "AclJavaToRust";
pub const T_RUST_TO_JAVA: &str = "AclRustToJava";
/// Only wrongly signed sends go here: its offsets must not move.
pub const T_WRONG: &str = "AclWrongSecretTopic";
pub const T_PUB: &str = "AclPubOnlyTopic";
pub const T_SUB: &str = "AclSubOnlyTopic";
pub const G_PUSH: &str = "acl_push_group";
pub const G_RETRY: &str = "acl_retry_group";
pub const G_LITE: &str = "acl_lite_group";
pub const G_JAVA_TO_RUST: &str = "acl_java_to_rust";
pub const G_RUST_TO_JAVA: &str = "acl_rust_to_java";
pub const G_CLI: &str = "acl_cli_group";
pub const G_SECRETS: &str = "acl_secrets_group";
pub const G_NOSUB: &str = "acl_nosub_group";
pub const G_SUB: &str = "acl_sub_group";

const APP_TOPICS: [&str; 6] = [
    T_APP,
    T_RETRY,
    T_LITE,
    T_JAVA_TO_RUST,
    T_RUST_TO_JAVA,
    T_WRONG,
];
const APP_GROUPS: [&str; 7] = [
    G_PUSH,
    G_RETRY,
    G_LITE,
    G_JAVA_TO_RUST,
    G_RUST_TO_JAVA,
    G_CLI,
    G_SECRETS,
];

/// One ACL cluster.
pub struct Env {
    pub cluster: Mutex<Cluster>,
    pub namesrv: String,
    pub version: String,
}

impl Env {
    pub fn v5() -> &'static Env {
        static ENV: OnceLock<Env> = OnceLock::new();
        ENV.get_or_init(|| Env::start("5.3.3"))
    }

    pub fn v4() -> &'static Env {
        static ENV: OnceLock<Env> = OnceLock::new();
        ENV.get_or_init(|| Env::start("4.9.7"))
    }

    fn start(version: &str) -> Env {
        init_logging();
        let mut app = AclAccount::user(APP.0, APP.1);
        for t in APP_TOPICS {
            app = app.topic(t, AclPerm::PubSub);
        }
        for g in APP_GROUPS {
            app = app.group(g, AclPerm::Sub);
        }
        let started = Instant::now();
        let cluster = Cluster::builder()
            .version(version)
            .acl_account(AclAccount::admin(ADMIN.0, ADMIN.1))
            .acl_account(app)
            .acl_account(
                AclAccount::user(PUB_ONLY.0, PUB_ONLY.1)
                    .topic(T_PUB, AclPerm::Pub)
                    .group(G_NOSUB, AclPerm::Sub),
            )
            .acl_account(
                AclAccount::user(SUB_ONLY.0, SUB_ONLY.1)
                    .topic(T_SUB, AclPerm::Sub)
                    .group(G_SUB, AclPerm::Sub),
            )
            // Topics exist only when the admin creates them.
            .broker_config("autoCreateTopicEnable", "false")
            .start()
            .unwrap_or_else(|e| panic!("could not start the {version} ACL cluster: {e}"));
        let namesrv = cluster.namesrv_addr();
        let admin = admin_of(&namesrv, credentials(ADMIN));
        for t in APP_TOPICS.into_iter().chain([T_PUB, T_SUB]) {
            admin
                .create_topic(&TopicConfig::new(t, 2))
                .unwrap_or_else(|e| panic!("{version}: the admin creating {t}: {e}"));
        }
        eprintln!(
            "secure: RocketMQ {version} ACL cluster up with its topics in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        Env {
            cluster: Mutex::new(cluster),
            namesrv,
            version: version.to_string(),
        }
    }
}

pub fn credentials((access_key, secret_key): (&str, &str)) -> Credentials {
    Credentials::new(access_key, secret_key)
}

pub fn admin_of(namesrv: &str, credentials: Credentials) -> Admin {
    Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .credentials(credentials),
        )
        .start()
        .expect("an admin client")
}

/// A name unique in this test run: `<prefix>_<pid>_<n>`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Polls `cond` every 50 ms for up to `timeout`; true as soon as it holds.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Duplicates and missing ids of `got` against `sent`.
pub fn compare(sent: &HashSet<String>, got: &[String]) -> (usize, usize) {
    let unique: HashSet<&String> = got.iter().collect();
    let duplicates = got.len() - unique.len();
    let lost = sent.iter().filter(|id| !unique.contains(id)).count();
    (lost, duplicates)
}

// --- the log of the whole run --------------------------------------------------------

/// Every log line of this process, at every level (trace included).
static LOG: Mutex<String> = Mutex::new(String::new());
/// Past this the log keeps counting lines but stops storing them.
const LOG_CAP: usize = 64 << 20;
static LOG_LINES: AtomicUsize = AtomicUsize::new(0);

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {} {}\n", record.level(), record.target(), record.args());
        LOG_LINES.fetch_add(1, Ordering::Relaxed);
        let mut log = LOG.lock();
        if log.len() + line.len() <= LOG_CAP {
            log.push_str(&line);
        }
    }

    fn flush(&self) {}
}

/// Installs the capturing logger at trace level, once.
pub fn init_logging() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        if log::set_logger(&Capture).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
    });
}

/// (lines logged so far, bytes kept, the lines that contain `needle`).
pub fn log_lines_containing(needle: &str) -> (usize, usize, Vec<String>) {
    let log = LOG.lock();
    let hits = log
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect();
    (LOG_LINES.load(Ordering::Relaxed), log.len(), hits)
}
