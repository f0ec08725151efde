//! What the compat tests share: the library under test (found or built), one real
//! RocketMQ cluster per test binary (testkit), unique names and topic creation.

use std::collections::HashSet;
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

/// Stores offset 0 of every queue of `topic` for the new clustering `group`, so that its
/// consumers read the topic from the start.
///
/// The original API cannot choose where a new group starts: its consumers use
/// CONSUME_FROM_LAST_OFFSET, and for a group without offsets a 5.x broker answers 0 only
/// while the queue's first message is still in the page cache (`checkInMemByConsumeOffset`);
/// otherwise the group starts at the queue's end and skips what was sent before it. On a
/// loaded machine the kernel can drop those pages, which made one consuming test in about
/// five miss every message. With stored offsets, the consumer reads them instead.
#[allow(dead_code)]
pub fn start_group_at_first_offsets(topic: &str, group: &str) {
    start_group_at_first_offsets_with(ClientOptions::new().namesrv_addr(namesrv()), topic, group)
}

/// [`start_group_at_first_offsets`] through a cluster of its own (`options`).
#[allow(dead_code)]
pub fn start_group_at_first_offsets_with(options: ClientOptions, topic: &str, group: &str) {
    use rocketmq_blocking::LitePullConsumer;
    let c = LitePullConsumer::builder(group)
        .client_options(options)
        .auto_commit(false)
        .start()
        .expect("lite pull consumer starts");
    let queues = c.fetch_message_queues(topic).expect("the topic's queues");
    c.assign(&queues).expect("queues assigned");
    let zero: std::collections::HashMap<_, i64> = queues.iter().map(|q| (q.clone(), 0)).collect();
    // The broker refuses offsets of a group it has not seen yet: it learns the group from
    // the consumer's first heartbeat or pull.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match c.commit(&zero, true) {
            Ok(()) => break,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => panic!("storing the offsets of {group}: {e}"),
        }
    }
    c.shutdown();
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

/// A running program whose standard output is read line by line as it comes, so a test
/// can wait for what it printed while it runs.
#[allow(dead_code)]
pub struct Watched {
    child: std::process::Child,
    lines: std::sync::Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
    what: String,
}

#[allow(dead_code)]
impl Watched {
    /// Spawns `cmd` with its standard output piped to a reader thread.
    pub fn spawn(cmd: &mut Command, what: &str) -> Watched {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} runs: {e}"));
        // Read as it comes too: a full pipe would block the child.
        let stderr = child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = std::io::Read::read_to_end(&mut e, &mut buf);
                buf
            })
        });
        let lines = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (l, out) = (lines.clone(), child.stdout.take().expect("piped"));
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
                l.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Watched {
            child,
            lines,
            reader: Some(reader),
            stderr,
            what: what.to_string(),
        }
    }

    /// What it printed so far.
    pub fn stdout(&self) -> String {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Its output once it exits (killed, and the test failed, past `limit`).
    pub fn finish(mut self, limit: std::time::Duration) -> Output {
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("waiting for the child") {
                break s;
            }
            if std::time::Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} ran longer than {limit:?} and was killed; it printed:\n{}",
                    self.what,
                    self.stdout()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default();
        Output {
            status,
            stdout: self.stdout().into_bytes(),
            stderr,
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // A test that failed early leaves no consumer running.
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Broadcasting consumers without a stored offset start at each queue's end (the
/// original's CONSUME_FROM_LAST_OFFSET), so what is sent before they hold a queue is
/// not theirs. Sends a message tagged `Probe` to every queue of `topic`, once a second,
/// until each of `consumers` printed "PROBE <queue>" for every queue: from then on each
/// gets everything sent. Returns the probes' message ids.
#[allow(dead_code)]
pub fn position_by_probes(topic: &str, consumers: &[&Watched]) -> HashSet<String> {
    use rocketmq_blocking::{Message, Producer};
    let p = Producer::builder(unique("probe"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("producer starts");
    let queues = p
        .fetch_publish_message_queues(topic)
        .expect("the topic's queues");
    let mut ids = HashSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        for mq in &queues {
            let m = Message::new(topic, "probe").with_tags("Probe");
            let r = p.send_to_queue(&m, mq).expect("probe sent");
            ids.insert(r.msg_id().to_string());
        }
        let positioned = |c: &&Watched| {
            let out = c.stdout();
            let held: HashSet<i32> = out
                .lines()
                .filter_map(|l| l.strip_prefix("PROBE ")?.trim().parse().ok())
                .collect();
            queues.iter().all(|mq| held.contains(&mq.queue_id()))
        };
        if consumers.iter().all(positioned) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the consumers did not get probes on every queue in 90 s:\n{}",
            consumers
                .iter()
                .map(|c| c.stdout())
                .collect::<Vec<_>>()
                .join("\n----\n")
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    p.shutdown();
    ids
}

/// A venv with the PyPI package in it, installed once per target directory.
#[allow(dead_code)]
pub fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let dir = profile_dir()
            .parent()
            .expect("target")
            .join("compat-python")
            .join("venv");
        let python = dir.join("bin").join("python");
        let installed = python.exists()
            && Command::new(&python)
                .args(["-c", "import rocketmq.client"])
                .env("LD_LIBRARY_PATH", lib_dir())
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        if !installed {
            let _ = std::fs::remove_dir_all(&dir);
            let out = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .output()
                .expect("python3 runs");
            check("python3 -m venv", &out);
            let what = std::env::var("RMQ_PY_CLIENT_SDIST")
                .unwrap_or_else(|_| "rocketmq-client-python==2.0.0".to_string());
            let out = Command::new(dir.join("bin").join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", &what])
                .output()
                .expect("pip runs");
            check("pip install rocketmq-client-python==2.0.0", &out);
        }
        dir
    })
}

/// Runs `cmd` to its end with its output captured (killed, and the test failed, past
/// `limit`).
#[allow(dead_code)]
pub fn run(cmd: &mut Command, limit: std::time::Duration) -> Output {
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    crate::java::wait_or_kill(child, limit)
}

#[allow(dead_code)]
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The ids a producer run (`examples/producer.c`) reports: one per `SENT`, several per
/// `BATCH`.
#[allow(dead_code)]
pub fn acked(produced: &str) -> HashSet<String> {
    let mut ids: HashSet<String> = crate::java::lines_after(produced, "SENT ")
        .into_iter()
        .collect();
    for b in crate::java::lines_after(produced, "BATCH ") {
        ids.extend(b.split(',').map(str::to_string));
    }
    ids
}
