//! The one error type of the testkit. Every variant carries enough context (command,
//! path, log tail, log directory) to diagnose a failed start from the test output alone.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why the testkit could not fetch, start or stop a cluster.
#[derive(Debug)]
pub enum TestkitError {
    /// `mvn` ran but failed to fetch the RocketMQ jars.
    Maven {
        /// The command line that was run, and where.
        command: String,
        /// How it exited.
        status: String,
        /// The last lines of its combined output.
        output_tail: String,
    },
    /// The official admin tool (`mqadmin`) failed, e.g. creating an ACL user.
    Tool {
        /// The subcommand that was run (its arguments are left out: they hold secrets).
        command: String,
        /// How it exited.
        status: String,
        /// The last lines of its output.
        output_tail: String,
    },
    /// A file-system or process-spawn operation failed.
    Io {
        /// What we were doing.
        what: String,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A JVM exited while we waited for it to become ready.
    JvmExited {
        /// `namesrv-0`, `broker-a`, ...
        process: String,
        /// Its exit status.
        status: String,
        /// The run's log directory.
        log_dir: PathBuf,
        /// The last lines of its stdout/stderr and log file.
        log_tail: String,
    },
    /// Something did not happen in time.
    Timeout {
        /// What we waited for.
        what: String,
        /// How long we waited.
        waited: Duration,
        /// The run's log directory.
        log_dir: PathBuf,
        /// The last lines of the relevant logs.
        log_tail: String,
    },
    /// The caller asked for something impossible (unknown broker, zero name servers, ...).
    InvalidArgument(String),
}

impl TestkitError {
    pub(crate) fn io(what: impl Into<String>, path: &Path, source: io::Error) -> Self {
        TestkitError::Io {
            what: what.into(),
            path: path.to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for TestkitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestkitError::Maven {
                command,
                status,
                output_tail,
            } => write!(
                f,
                "maven failed to fetch the RocketMQ jars ({status}): {command}\n{output_tail}"
            ),
            TestkitError::Tool {
                command,
                status,
                output_tail,
            } => write!(f, "{command} failed ({status})\n{output_tail}"),
            TestkitError::Io { what, path, source } => {
                write!(f, "{what} failed for {}: {source}", path.display())
            }
            TestkitError::JvmExited {
                process,
                status,
                log_dir,
                log_tail,
            } => write!(
                f,
                "{process} exited early ({status}); logs in {}\n{log_tail}",
                log_dir.display()
            ),
            TestkitError::Timeout {
                what,
                waited,
                log_dir,
                log_tail,
            } => write!(
                f,
                "timed out after {:.1}s waiting for {what}; logs in {}\n{log_tail}",
                waited.as_secs_f64(),
                log_dir.display()
            ),
            TestkitError::InvalidArgument(msg) => write!(f, "invalid testkit argument: {msg}"),
        }
    }
}

impl std::error::Error for TestkitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestkitError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
