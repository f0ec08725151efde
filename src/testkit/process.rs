//! One JVM under a watchdog shell, so that no JVM outlives the Rust process that
//! started it, even when that process is SIGKILLed (no destructors run then, and tests
//! keep their cluster in a static that is never dropped anyway).
//!
//! The shell's stdin is a pipe whose only write end is held by the Rust [`Child`]
//! handle (std opens it close-on-exec, so no other child inherits it). The shell starts
//! the JVM in the background with stdin from `/dev/null`, and blocks reading the pipe.
//! End of file means "stop": either we dropped the handle on purpose or our process
//! died. The shell then sends SIGTERM (RocketMQ's shutdown hook runs) and SIGKILL
//! after the grace period. If the JVM exits on its own, the shell exits with its
//! status, which is how an early crash is noticed.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use log::warn;

use super::TestkitError;

/// `$1` pid file, `$2` grace period in tenths of a second, the rest is the java command.
const WATCHDOG: &str = r#"
pidfile=$1; grace=$2; shift 2
# Keep the lifeline on fd 3: background jobs get /dev/null as stdin otherwise.
exec 3<&0
# The JVM gets neither end of the lifeline.
"$@" </dev/null 3<&- &
jvm=$!
echo "$jvm" >"$pidfile"
{
  # EOF: the Rust side closed the pipe or died.
  while read -r line; do :; done
  kill -TERM "$jvm" 2>/dev/null
  n=0
  while kill -0 "$jvm" 2>/dev/null && [ "$n" -lt "$grace" ]; do sleep 0.1; n=$((n+1)); done
  kill -KILL "$jvm" 2>/dev/null
} <&3 &
watcher=$!
exec 3<&-
wait "$jvm"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// Everything needed to start one JVM.
pub(crate) struct JvmSpec {
    pub(crate) name: String,
    pub(crate) java: PathBuf,
    /// JVM options, `-cp`, main class and program arguments.
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(&'static str, OsString)>,
    pub(crate) cwd: PathBuf,
    /// stdout and stderr of the shell and the JVM (appended).
    pub(crate) out_file: PathBuf,
    pub(crate) pid_file: PathBuf,
    /// Time between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
}

/// A running (or exited) watchdog shell with its JVM.
pub(crate) struct JvmProcess {
    name: String,
    child: Child,
    lifeline: Option<ChildStdin>,
    pid_file: PathBuf,
    grace: Duration,
    status: Option<ExitStatus>,
}

impl JvmProcess {
    pub(crate) fn spawn(spec: &JvmSpec) -> Result<Self, TestkitError> {
        let out = open_append(&spec.out_file)?;
        let err = out
            .try_clone()
            .map_err(|e| TestkitError::io("duplicate log handle", &spec.out_file, e))?;
        let tenths = spec.grace.as_millis() / 100;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg("rocketmq-testkit-watchdog")
            .arg(&spec.pid_file)
            .arg(tenths.to_string())
            .arg(&spec.java)
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        for (key, value) in &spec.env {
            cmd.env(key, value);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| TestkitError::io(format!("spawn {}", spec.name), &spec.cwd, e))?;
        let lifeline = child.stdin.take();
        Ok(JvmProcess {
            name: spec.name.clone(),
            child,
            lifeline,
            pid_file: spec.pid_file.clone(),
            grace: spec.grace,
            status: None,
        })
    }

    /// The exit status once the shell (and so the JVM) has exited.
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            match self.child.try_wait() {
                Ok(status) => self.status = status,
                Err(e) => warn!("cannot poll {}: {e}", self.name),
            }
        }
        self.status
    }

    /// The JVM's pid, once the shell has written it.
    pub(crate) fn jvm_pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Asks the watchdog to stop the JVM: SIGTERM now, SIGKILL after the grace period.
    pub(crate) fn request_stop(&mut self) {
        self.lifeline = None;
    }

    /// SIGKILLs the JVM at once (a crash, for reliability tests).
    pub(crate) fn kill_now(&mut self) {
        if self.exit_status().is_none() {
            if let Some(pid) = self.jvm_pid() {
                kill_pid(pid);
            }
        }
        self.request_stop();
    }

    /// Sends SIGSTOP (`pause`) or SIGCONT (resume) to the JVM: a peer that hangs with its
    /// sockets open, as a machine that froze does.
    pub(crate) fn pause(&mut self, pause: bool) -> bool {
        if self.exit_status().is_some() {
            return false;
        }
        match self.jvm_pid() {
            Some(pid) => signal_pid(pid, if pause { "STOP" } else { "CONT" }),
            None => false,
        }
    }

    /// Stops (if not yet asked) and reaps the process; forces it if the watchdog does
    /// not finish within the grace period plus a margin.
    pub(crate) fn wait_stopped(&mut self) -> Option<ExitStatus> {
        self.request_stop();
        let deadline = Instant::now() + self.grace + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        warn!("{} did not stop in time; killing it", self.name);
        if let Some(pid) = self.jvm_pid() {
            kill_pid(pid);
        }
        let _ = self.child.kill();
        match self.child.wait() {
            Ok(status) => self.status = Some(status),
            Err(e) => warn!("cannot reap {}: {e}", self.name),
        }
        self.status
    }
}

impl Drop for JvmProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.wait_stopped();
        }
    }
}

/// SIGKILL by pid without `unsafe`: the shell's `kill` builtin does it.
fn kill_pid(pid: u32) {
    signal_pid(pid, "KILL");
}

/// Sends `SIG<signal>` to `pid` with the shell's `kill` builtin; true when it was sent.
fn signal_pid(pid: u32, signal: &str) -> bool {
    let result = Command::new("sh")
        .arg("-c")
        .arg("kill -\"$1\" \"$2\" 2>/dev/null")
        .arg("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .status();
    match result {
        Ok(status) => status.success(),
        Err(e) => {
            warn!("cannot run kill -{signal} for pid {pid}: {e}");
            false
        }
    }
}

fn open_append(path: &Path) -> Result<File, TestkitError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| TestkitError::io("open log file", path, e))
}

/// Human-readable exit status.
pub(crate) fn describe(status: Option<ExitStatus>) -> String {
    match status {
        Some(s) => match s.code() {
            // The watchdog shell reports a JVM killed by signal N as 128 + N (a JVM's
            // own exit code can be in that range too, e.g. 253 for System.exit(-3)).
            Some(code @ 129..=192) => format!("exit code {code} = 128 + signal {}", code - 128),
            Some(code) => format!("exit code {code}"),
            None => s.to_string(),
        },
        None => "still running".to_string(),
    }
}
