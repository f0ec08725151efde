//! The Python package as users get it: `maturin build` makes the wheel (debug, to keep
//! CI short), `pip install` puts it into a fresh venv under `target/python/`, and then
//! the wheel imports with no cargo on the `PATH`, the pytest suite beside this file
//! (`test_*.py`) passes against one real RocketMQ cluster (testkit), `test_secure.py`
//! against a second one enforcing mutual TLS and ACL, and the example of docs/python.md
//! works as written. `test_typing.py` runs `mypy --strict` over the installed package and
//! the Python snippets of docs/python.md.
//!
//! maturin and pytest come from PyPI into a venv of their own (`target/python/tools`),
//! installed on the first run. The wheel is built into a target directory of its own:
//! the outer cargo holds the lock of the shared one while tests run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::{AclAccount, Cluster, TlsOptions};

#[path = "../../tests/common/java.rs"]
mod java;
use java::{lines_after, JavaProgram};

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();
static NAMESRV: OnceLock<String> = OnceLock::new();

/// `target/` of the workspace: the test binary is `target/<profile>/deps/<name>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<binary>")
        .to_path_buf()
}

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn work_dir() -> PathBuf {
    target_dir().join("python")
}

fn namesrv() -> &'static str {
    NAMESRV.get_or_init(|| {
        let c = CLUSTER.get_or_init(|| {
            // test_transaction.py: checks within seconds (every second, of half messages
            // older than two), and 5.x's commit/rollback records written well before a
            // check could ask about a committed message (see tests/transactions/main.rs).
            let mut b = Cluster::builder()
                .work_dir(target_dir().join("rocketmq-testkit"))
                .brokers(1)
                .broker_config("transactionCheckInterval", "1000")
                .broker_config("transactionTimeOut", "2000")
                .broker_config("transactionOpBatchInterval", "200")
                // A loaded machine: a send waits up to 5 s in the broker's queue instead of
                // failing with SYSTEM_BUSY after 200 ms (test_asyncio.py's 50 sends at once).
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
    })
}

/// Runs `cmd` to its end or until `limit` (then kills it); prints its stderr.
fn run(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .env_remove("RUST_LOG")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + limit;
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = waiter.join().expect("waiter").expect("output");
    eprintln!("--- {:?}\n{}", cmd, String::from_utf8_lossy(&out.stderr));
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        text(out)
    );
}

/// A venv at `dir`, emptied first.
fn fresh_venv(dir: &Path) {
    let out = run(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(dir),
        Duration::from_secs(300),
    );
    check("python3 -m venv", &out);
}

fn pip_install(venv: &Path, what: &[&str]) {
    let out = run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(what),
        Duration::from_secs(600),
    );
    check("pip install", &out);
}

/// The venv with maturin and pytest (from PyPI, once).
fn tools() -> PathBuf {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let venv = work_dir().join("tools");
            if !venv.join("bin/maturin").exists() || !venv.join("bin/pytest").exists() {
                fresh_venv(&venv);
                pip_install(&venv, &["maturin>=1.5,<2", "pytest"]);
            }
            venv
        })
        .clone()
}

/// Builds the wheel once; its path.
fn wheel() -> PathBuf {
    static WHEEL: OnceLock<PathBuf> = OnceLock::new();
    WHEEL
        .get_or_init(|| {
            let out_dir = work_dir().join("wheels");
            let _ = std::fs::remove_dir_all(&out_dir);
            let tools = tools();
            let out = run(
                Command::new(tools.join("bin/maturin"))
                    .arg("build")
                    .arg("--manifest-path")
                    .arg(python_dir().join("Cargo.toml"))
                    .arg("--interpreter")
                    .arg(tools.join("bin/python"))
                    .arg("--out")
                    .arg(&out_dir)
                    .arg("--target-dir")
                    .arg(work_dir().join("build")),
                Duration::from_secs(1800),
            );
            check("maturin build", &out);
            let wheels: Vec<PathBuf> = std::fs::read_dir(&out_dir)
                .expect("the wheel directory")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .collect();
            assert_eq!(wheels.len(), 1, "one wheel expected: {wheels:?}");
            wheels[0].clone()
        })
        .clone()
}

/// A fresh venv with the wheel, pytest and mypy, for the suite and the docs example.
fn test_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let venv = work_dir().join("venv-test");
        fresh_venv(&venv);
        let wheel = wheel();
        // mypy: test_typing.py checks the package and the docs' snippets with it.
        pip_install(
            &venv,
            &[
                wheel.to_str().expect("UTF-8 path"),
                "pytest",
                "mypy",
                // The prometheus_client collector example's test.
                "prometheus-client",
            ],
        );
        venv
    })
    .clone()
}

#[test]
fn the_wheel_is_abi3_and_imports_from_a_fresh_venv_without_cargo_on_the_path() {
    let wheel = wheel();
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .expect("wheel name");
    assert!(
        name.starts_with("rocketmq_blocking-") && name.contains("-cp39-abi3-manylinux"),
        "not an abi3 manylinux wheel: {name}"
    );
    let venv = work_dir().join("venv-clean");
    fresh_venv(&venv);
    pip_install(&venv, &[wheel.to_str().expect("UTF-8 path")]);
    // Only the venv on the PATH, run from an empty directory: nothing of the checkout or
    // of the Rust toolchain can serve the import.
    let empty = work_dir().join("empty");
    std::fs::create_dir_all(&empty).expect("an empty directory");
    let out = run(
        Command::new(venv.join("bin/python"))
            .arg("-c")
            .arg(
                "import shutil, rocketmq_blocking as r; \
                 assert shutil.which('cargo') is None, shutil.which('cargo'); \
                 print(r.version(), r.__file__, r._native.__file__)",
            )
            .current_dir(&empty)
            .env_clear()
            .env("PATH", venv.join("bin")),
        Duration::from_secs(60),
    );
    check("importing the installed wheel", &out);
    let printed = text(&out);
    let site = venv.join("lib");
    assert!(
        printed.starts_with(&format!("{} ", env!("CARGO_PKG_VERSION"))),
        "{printed}"
    );
    assert_eq!(
        printed.matches(site.to_str().expect("UTF-8 path")).count(),
        2,
        "the package and its extension come from the venv: {printed}"
    );
    assert!(printed.contains("_native.abi3.so"), "{printed}");
}

#[test]
fn the_python_package_passes_its_pytest_suite() {
    let venv = test_venv();
    // From the tests' directory, so the checkout's package (without the extension) is
    // not on the path: the suite imports the installed wheel.
    let out = run(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "."])
            // Against a cluster of its own (the test below).
            .arg("--ignore=test_secure.py")
            .current_dir(python_dir().join("tests"))
            .env("NAMESRV_ADDR", namesrv()),
        Duration::from_secs(900),
    );
    let printed = text(&out);
    eprintln!("{printed}");
    check("pytest", &out);
    assert!(printed.contains(" passed"), "{printed}");
    assert!(!printed.contains("skipped"), "{printed}");
}

/// A Python script run in the test venv against the shared cluster; its stdout.
fn python(script: &str, args: &[&str]) -> String {
    let out = run(
        Command::new(test_venv().join("bin/python"))
            .arg("-c")
            .arg(script)
            .args(args)
            .current_dir(python_dir().join("tests"))
            .env("NAMESRV_ADDR", namesrv()),
        Duration::from_secs(300),
    );
    check("python -c", &out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends `count` messages with a tag, a key and a property; prints `SENT <msg id>` each.
const PY_PRODUCE: &str = r#"
import os, sys
import rocketmq_blocking as rmq
topic, count = sys.argv[1], int(sys.argv[2])
with rmq.Producer("py_exchange_p", namesrv=os.environ["NAMESRV_ADDR"]) as p:
    for i in range(count):
        m = rmq.Message(topic, f"python {i}".encode(), tags="FromPython", keys=[f"pk{i}"],
                        properties={"origin": "python"})
        print("SENT", p.send(m).msg_id, flush=True)
"#;

/// Consumes `count` distinct messages from the first offset; prints
/// `GOT <msg id> <tags> <keys> <origin> <body>` each.
const PY_CONSUME: &str = r#"
import os, sys, threading
import rocketmq_blocking as rmq
topic, group, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen, lock, done = set(), threading.Lock(), threading.Event()
def listener(messages):
    with lock:
        for m in messages:
            if m.msg_id not in seen:
                seen.add(m.msg_id)
                print("GOT", m.msg_id, m.tags, " ".join(m.keys), m.properties.get("origin"),
                      m.body.decode(), flush=True)
        if len(seen) >= count:
            done.set()
    return rmq.ConsumeStatus.SUCCESS
with rmq.PushConsumer(group, topic, listener, from_first=True,
                      namesrv=os.environ["NAMESRV_ADDR"]):
    sys.exit(0 if done.wait(120) else 1)
"#;

/// Every message the sender printed (`SENT <id> [<body>]`) was received once (`GOT <id> <tags>
/// <keys> <origin> <body>`) with the sender's tag, key, origin property and body
/// (`<origin> <i>` for key `<key prefix><i>`).
fn assert_exchanged(sent: &str, got: &str, (tag, key_prefix, origin): (&str, &str, &str)) {
    // "SENT <id>" (Python) or "SENT <id> <body>" (Java).
    let mut ids: Vec<String> = lines_after(sent, "SENT ")
        .iter()
        .filter_map(|l| l.split(' ').next().map(str::to_string))
        .collect();
    let mut got = lines_after(got, "GOT ");
    assert_eq!(ids.len(), N, "{sent}");
    assert_eq!(got.len(), N, "{got:?}");
    ids.sort();
    got.sort();
    for (line, id) in got.iter().zip(&ids) {
        let f: Vec<&str> = line.splitn(5, ' ').collect();
        assert_eq!(f.len(), 5, "{line}");
        assert_eq!(f[0], id, "{line}");
        let i = f[2].strip_prefix(key_prefix).expect("the sender's key");
        assert_eq!(
            f[1..],
            [tag, f[2], origin, &format!("{origin} {i}")],
            "{line}"
        );
    }
}

/// Messages each way in the Java ↔ Python exchange.
const N: usize = 20;

/// The official Java client and the Python package exchange messages both ways, with
/// their tags, keys and user properties.
#[test]
fn java_and_python_exchange_messages_both_ways() {
    let version = std::env::var("RMQ_TEST_VERSION")
        .unwrap_or_else(|_| rocketmq_blocking::testkit::DEFAULT_VERSION.to_string());
    let javaprog = JavaProgram::compile(
        &version,
        "../tests/common/java/PythonInterop.java",
        "PythonInterop",
    );
    let pid = std::process::id();
    let (to_python, to_java) = (format!("JavaToPy{pid}"), format!("PyToJava{pid}"));
    let admin = rocketmq_blocking::Admin::builder()
        .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("an admin");
    for t in [&to_python, &to_java] {
        admin
            .create_topic(&rocketmq_blocking::TopicConfig::new(t.as_str(), 4))
            .unwrap_or_else(|e| panic!("creating {t}: {e}"));
    }
    let n = N.to_string();

    // Java → Python.
    let sent = javaprog.run(
        &[],
        &[
            "produce",
            namesrv(),
            &to_python,
            &n,
            "FromJava",
            "jk",
            "java ",
        ],
        Duration::from_secs(120),
    );
    let got = python(
        PY_CONSUME,
        &[&to_python, &format!("py_exchange_g{pid}"), &n],
    );
    assert_exchanged(&sent, &got, ("FromJava", "jk", "java"));
    // Python → Java.
    let sent = python(PY_PRODUCE, &[&to_java, &n]);
    let got = javaprog.run(
        &[],
        &[
            "consume",
            namesrv(),
            &to_java,
            &format!("java_exchange_g{pid}"),
            &n,
        ],
        Duration::from_secs(180),
    );
    assert_exchanged(&sent, &got, ("FromPython", "pk", "python"));
    drop(admin);
}

/// The ACL admin of the TLS and ACL cluster (5.x: a `Super` user).
const SECURE_ADMIN: (&str, &str) = ("py_acl_admin", "PyAdm1nS3cretQx7");

#[test]
fn the_python_package_talks_to_a_cluster_enforcing_mutual_tls_and_acl() {
    let venv = test_venv();
    let mut b = Cluster::builder()
        .work_dir(target_dir().join("rocketmq-testkit"))
        .brokers(1)
        .tls(TlsOptions::enforcing().require_client_cert(true))
        .acl_account(AclAccount::admin(SECURE_ADMIN.0, SECURE_ADMIN.1));
    if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
        b = b.version(&v);
    }
    let cluster = b
        .start()
        .unwrap_or_else(|e| panic!("starting the TLS and ACL cluster: {e}"));
    let files = cluster.tls_files().expect("the cluster's TLS files");
    let out = run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "test_secure.py",
            ])
            .current_dir(python_dir().join("tests"))
            .env("RMQ_SECURE_NAMESRV", cluster.namesrv_addr())
            .env("RMQ_SECURE_CA", &files.ca_cert)
            .env("RMQ_SECURE_CERT", &files.client_cert)
            .env("RMQ_SECURE_KEY", &files.client_key)
            .env("RMQ_SECURE_ACCESS_KEY", SECURE_ADMIN.0)
            .env("RMQ_SECURE_SECRET_KEY", SECURE_ADMIN.1),
        Duration::from_secs(600),
    );
    let printed = text(&out);
    eprintln!("{printed}");
    check("pytest test_secure.py", &out);
    assert!(printed.contains("3 passed"), "{printed}");
}

#[test]
fn the_docs_python_example_works_as_written() {
    let docs =
        std::fs::read_to_string(python_dir().join("../docs/python.md")).expect("docs/python.md");
    let section = docs
        .split("# From Python")
        .nth(1)
        .expect("a From Python section");
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a ```python block");
    let venv = test_venv();
    let out = run(
        Command::new(venv.join("bin/python"))
            .arg("-c")
            .arg(code)
            .current_dir(work_dir())
            .env("NAMESRV_ADDR", namesrv()),
        Duration::from_secs(300),
    );
    check("the Python example of docs/python.md", &out);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("consumed "),
        "{}",
        text(&out)
    );
}
