//! Test-only Java programs: a source file under `tests/` compiled with `javac` against the
//! jars of the RocketMQ distribution the launcher fetched (its `lib/` holds the official
//! client), then run with a small heap and a watchdog. Interop tests use it to put the
//! official Java client on the other end of a Rust client.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A compiled Java program: its class directory and the classpath to run it with.
#[derive(Debug, Clone)]
pub struct JavaProgram {
    classes: PathBuf,
    classpath: OsString,
    main_class: String,
}

impl JavaProgram {
    /// Compiles `source` (a path relative to the crate root) against the `version`
    /// distribution, once per test binary for each (version, source).
    pub fn compile(version: &str, source: &str, main_class: &str) -> JavaProgram {
        static BUILT: OnceLock<parking_lot::Mutex<Vec<PathBuf>>> = OnceLock::new();
        let lib = rocketmq_blocking::testkit::fetch_jars(version)
            .expect("the RocketMQ jars")
            .join("lib");
        let stem = Path::new(source)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("java");
        let classes = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("java-programs")
            .join(stem)
            .join(version);
        let mut classpath = OsString::from(&classes);
        classpath.push(":");
        classpath.push(lib.join("*"));
        let built = BUILT.get_or_init(Default::default);
        let mut built = built.lock();
        if !built.contains(&classes) {
            std::fs::create_dir_all(&classes).expect("the class directory");
            let out = Command::new("javac")
                .arg("-nowarn")
                .arg("-cp")
                .arg(lib.join("*"))
                .arg("-d")
                .arg(&classes)
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(source))
                .output()
                .expect("javac runs (a JDK is a prerequisite of the tests)");
            assert!(
                out.status.success(),
                "javac {source} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            built.push(classes.clone());
        }
        JavaProgram {
            classes,
            classpath,
            main_class: main_class.to_string(),
        }
    }

    /// `java` with a small heap, a private `user.home` (the client writes its logs there)
    /// and the classpath; add properties with [`Command::arg`] before [`JavaProgram::run`].
    pub fn command(&self, jvm_args: &[&str], args: &[&str]) -> Command {
        let mut home = OsString::from("-Duser.home=");
        home.push(self.classes.join("home"));
        let mut cmd = Command::new("java");
        cmd.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData"])
            .arg(home)
            .args(jvm_args)
            .arg("-cp")
            .arg(&self.classpath)
            .arg(&self.main_class)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs the program to its end (killed, and the test failed, past `timeout`), asserts
    /// that it exited 0 and returns its standard output.
    pub fn run(&self, jvm_args: &[&str], args: &[&str], timeout: Duration) -> String {
        let child = self.command(jvm_args, args).spawn().expect("java runs");
        let out = wait_or_kill(child, timeout);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{} failed ({}): {}\n{}",
            self.main_class,
            out.status,
            stdout
                .lines()
                .filter(|l| !l.contains("|-INFO"))
                .collect::<Vec<_>>()
                .join("\n"),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

/// The lines of `stdout` that start with `prefix`, without it, trimmed.
pub fn lines_after(stdout: &str, prefix: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|s| s.trim().to_string())
        .collect()
}

/// The child's output once it exits; killed (and the test failed) past `timeout`.
pub fn wait_or_kill(mut child: Child, timeout: Duration) -> Output {
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + timeout;
        while !d.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !d.load(Ordering::SeqCst) {
            // The child is ours; its pid is not reused before we reap it below.
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            return true;
        }
        false
    });
    let _ = child.stdin.take();
    let out = child.wait_with_output().expect("waiting for java");
    done.store(true, Ordering::SeqCst);
    let killed = watchdog.join().unwrap_or(false);
    assert!(
        !killed,
        "the Java program ran longer than {timeout:?} and was killed; it printed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.contains("|-INFO"))
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
