//! Named worker threads and their bounded join: the part that the callback and processor
//! pools (`remoting::pool`), the consume pool (`consumer::pool`), the timer threads
//! (`scheduler`) and the client instance's services share.
//!
//! Each owner keeps its own loop (a FIFO channel, a resizable queue with its wake-up
//! policy, a timer heap); what is common is here: [`spawn`] starts a named thread whose
//! end the owner can wait for with a deadline, [`run_caught`] runs one job so that a
//! panic is logged and the worker lives on, and [`join_all`] joins every thread within
//! one bound, skipping the current thread (a job may shut down its own pool).

use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use log::{error, warn};

/// How long an owner's shutdown waits for all its threads together. A thread still
/// running then (a listener or callback that does not return) is left to end on its own,
/// with a warning, rather than hang the shutdown.
pub(crate) const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// A named thread started by [`spawn`].
pub(crate) struct Worker {
    handle: JoinHandle<()>,
    /// Disconnected once the thread's body has returned or unwound.
    done: Receiver<()>,
}

/// Starts a thread named `name` running `body`.
pub(crate) fn spawn(
    name: impl Into<String>,
    body: impl FnOnce() + Send + 'static,
) -> std::io::Result<Worker> {
    let (done_tx, done) = bounded::<()>(0);
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // Dropped when `body` returns or unwinds: that is what the joiner waits for.
            let _done = done_tx;
            body();
        })?;
    Ok(Worker { handle, done })
}

impl Worker {
    /// The thread's name.
    pub(crate) fn name(&self) -> &str {
        self.handle.thread().name().unwrap_or("unnamed")
    }

    /// The thread's id.
    pub(crate) fn thread_id(&self) -> std::thread::ThreadId {
        self.handle.thread().id()
    }

    /// Whether this worker is the calling thread.
    pub(crate) fn is_current(&self) -> bool {
        self.handle.thread().id() == std::thread::current().id()
    }

    /// Whether the thread has ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Joins the thread if its body ends by `deadline`; true if it was joined. The
    /// current thread is never joined (it would wait for itself): it ends on its own once
    /// the job that called this returns.
    pub(crate) fn join_until(self, deadline: Instant, owner: &str) -> bool {
        if self.is_current() {
            return false;
        }
        match self.done.recv_deadline(deadline) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                // The body has returned; only thread-local destructors are left.
                if self.handle.join().is_err() {
                    warn!("{owner}: thread ended by panic");
                }
                true
            }
            Err(RecvTimeoutError::Timeout) => {
                warn!(
                    "{owner}: thread {} still runs at the shutdown deadline; not waiting for it",
                    self.name()
                );
                false
            }
        }
    }
}

/// Joins `workers` within `timeout` for all of them together, skipping the current thread.
pub(crate) fn join_all(workers: impl IntoIterator<Item = Worker>, timeout: Duration, owner: &str) {
    join_all_until(workers, Instant::now() + timeout, owner);
}

/// Joins `workers` by `deadline`, skipping the current thread: how an owner with one
/// shutdown bound for all its parts shares it among them.
pub(crate) fn join_all_until(
    workers: impl IntoIterator<Item = Worker>,
    deadline: Instant,
    owner: &str,
) {
    for w in workers {
        w.join_until(deadline, owner);
    }
}

/// Runs `job`, catching a panic: the panic is logged as `what` and `None` returned, so
/// the worker that runs it lives on.
pub(crate) fn run_caught<R>(what: impl Display, job: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(job)) {
        Ok(r) => Some(r),
        Err(_) => {
            error!("{what} panicked; the worker continues");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_waits_for_the_body_and_is_bounded() {
        let w = spawn("t-worker", || std::thread::sleep(Duration::from_millis(50))).unwrap();
        assert_eq!(w.name(), "t-worker");
        assert!(w.join_until(Instant::now() + Duration::from_secs(5), "test"));

        let (tx, rx) = bounded::<()>(0);
        let stuck = spawn("t-stuck", move || {
            let _ = rx.recv();
        })
        .unwrap();
        let began = Instant::now();
        assert!(!stuck.join_until(Instant::now() + Duration::from_millis(100), "test"));
        let waited = began.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        drop(tx);
    }

    #[test]
    fn a_worker_never_joins_itself() {
        let (tx, rx) = bounded::<Worker>(1);
        let (res_tx, res_rx) = bounded::<bool>(1);
        let w = spawn("t-self", move || {
            if let Ok(me) = rx.recv() {
                // Joining itself would deadlock; it must return at once.
                let _ = res_tx.send(me.join_until(Instant::now() + Duration::from_secs(30), "t"));
            }
        })
        .unwrap();
        let id = w.handle.thread().id();
        tx.send(w).unwrap();
        let joined = res_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(!joined);
        assert_ne!(id, std::thread::current().id());
    }

    #[test]
    fn run_caught_returns_the_value_or_none_on_panic() {
        assert_eq!(run_caught("ok job", || 7), Some(7));
        assert_eq!(run_caught("bad job", || -> i32 { panic!("boom") }), None);
    }
}
