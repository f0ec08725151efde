//! No JVM outlives a test process that is SIGKILLed: this test re-runs itself as a
//! child that starts a cluster, SIGKILLs the child, and watches the run's processes.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{eventually, processes_mentioning};
use rocketmq_blocking::testkit::Cluster;

const CHILD_ENV: &str = "ROCKETMQ_TESTKIT_ORPHAN_CHILD";
const NAME: &str = "orphan::no_jvm_outlives_a_sigkilled_test_process";

#[test]
fn no_jvm_outlives_a_sigkilled_test_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return child();
    }
    crate::common::init_logging();
    let exe = std::env::current_exe().expect("current exe");
    let mut child = KillOnDrop(Some(
        Command::new(exe)
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn child"),
    ));
    let stdout = child.get().stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut run_dir = None;
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_secs(1)) {
            // libtest may print "test <name> ... " in front of the first line.
            Ok(line) if line.contains("RUN_DIR=") => {
                let at = line.find("RUN_DIR=").unwrap_or(0) + "RUN_DIR=".len();
                run_dir = Some(PathBuf::from(&line[at..]));
            }
            Ok(line) if line.ends_with("READY") => break,
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("child ended before READY"),
        }
    }
    let run_dir = run_dir.expect("child printed its run dir");
    let before = processes_mentioning(&run_dir);
    let jvms = before
        .iter()
        .filter(|(_, cmd)| cmd.starts_with("java"))
        .count();
    assert_eq!(jvms, 2, "namesrv and broker JVMs running: {before:?}");

    let mut victim = child.0.take().expect("child");
    victim.kill().expect("SIGKILL child"); // std's kill is SIGKILL on Unix
    victim.wait().expect("reap child");
    let t = Instant::now();
    let gone = eventually(Duration::from_secs(20), || {
        processes_mentioning(&run_dir).is_empty()
    });
    eprintln!(
        "after SIGKILL of the test process, its {} processes were gone in {:.1}s",
        before.len(),
        t.elapsed().as_secs_f64()
    );
    assert!(gone, "left behind: {:?}", processes_mentioning(&run_dir));
}

/// Kills the child if an assertion fails before the real SIGKILL, so that a failing
/// test does not leave it (and its cluster) running.
struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    fn get(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("child")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The child: start a cluster, keep it in a static like real tests do, report, wait.
fn child() {
    static CLUSTER: std::sync::OnceLock<std::sync::Mutex<Cluster>> = std::sync::OnceLock::new();
    let cluster = Cluster::builder()
        .start()
        .unwrap_or_else(|e| panic!("start: {e}"));
    let run_dir = cluster.run_dir().display().to_string();
    let _ = CLUSTER.set(std::sync::Mutex::new(cluster));
    let mut out = std::io::stdout();
    let _ = writeln!(out, "RUN_DIR={run_dir}");
    let _ = writeln!(out, "READY");
    let _ = out.flush();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
