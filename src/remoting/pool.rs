//! A fixed pool of named worker threads for callbacks and broker-initiated requests.
//!
//! Jobs run inside `catch_unwind`, so a panicking user callback is logged and the worker
//! lives on. `shutdown` lets every job queued before it finish and joins every thread
//! (by the owner's deadline, `util::worker::JOIN_TIMEOUT` unless told otherwise; never
//! the calling one).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

type Job = Box<dyn FnOnce() + Send + 'static>;

enum Msg {
    Run(Job),
    Stop,
}

/// Why [`ThreadPool::try_execute`] did not queue a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The pool is shut down.
    Closed,
    /// The given number of jobs already wait for a thread.
    Full,
}

/// A fixed-size thread pool whose methods all take `&self`.
pub struct ThreadPool {
    sender: Sender<Msg>,
    /// Kept to start more workers ([`grow`](Self::grow)).
    receiver: Receiver<Msg>,
    closed: AtomicBool,
    /// Jobs queued and not yet taken by a worker.
    waiting: Arc<AtomicUsize>,
    workers: Mutex<Vec<Worker>>,
    name: String,
}

impl ThreadPool {
    /// Starts `threads` workers (at least one) named `<name>-<i>`.
    pub fn new(name: &str, threads: usize) -> std::io::Result<Self> {
        let (tx, rx) = unbounded::<Msg>();
        let waiting = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            match spawn_worker(name, i, &rx, &waiting) {
                Ok(w) => workers.push(w),
                Err(e) => {
                    // Stop the ones already started before reporting.
                    for _ in 0..workers.len() {
                        let _ = tx.send(Msg::Stop);
                    }
                    worker::join_all(workers, JOIN_TIMEOUT, name);
                    return Err(e);
                }
            }
        }
        Ok(ThreadPool {
            sender: tx,
            receiver: rx,
            closed: AtomicBool::new(false),
            waiting,
            workers: Mutex::new(workers),
            name: name.to_string(),
        })
    }

    /// Starts one more worker unless the pool has `max` already or is shut down; true
    /// when it started one (Java `ThreadPoolExecutor` adding a thread beyond its core
    /// size when its queue is full).
    pub fn grow(&self, max: usize) -> bool {
        let mut workers = self.workers.lock();
        if self.closed.load(Ordering::Acquire) || workers.len() >= max {
            return false;
        }
        match spawn_worker(&self.name, workers.len(), &self.receiver, &self.waiting) {
            Ok(w) => {
                workers.push(w);
                true
            }
            Err(_) => false,
        }
    }

    /// Workers started.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn threads(&self) -> usize {
        self.workers.lock().len()
    }

    /// Queues a job. Returns false (and drops the job) when the pool is shut down.
    pub fn execute(&self, job: impl FnOnce() + Send + 'static) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        if self.sender.send(Msg::Run(Box::new(job))).is_err() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Queues a job unless `limit` jobs already wait for a thread (the job is dropped then).
    pub fn try_execute(
        &self,
        limit: usize,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<(), Refused> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Refused::Closed);
        }
        // Reserve a place first, so concurrent callers cannot overshoot the limit.
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= limit {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Full);
        }
        if self.sender.send(Msg::Run(Box::new(job))).is_err() {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Closed);
        }
        Ok(())
    }

    /// Jobs queued and not yet started.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Lets the jobs queued so far finish, then joins the workers (a job that shuts down
    /// its own pool does not join itself), within `JOIN_TIMEOUT`. Idempotent.
    pub fn shutdown(&self) {
        self.shutdown_until(Instant::now() + JOIN_TIMEOUT);
    }

    /// [`shutdown`](Self::shutdown) by `deadline`: a worker still in a job then is left
    /// to end on its own (a job the pool already took is never abandoned half-run).
    pub fn shutdown_until(&self, deadline: Instant) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let workers = std::mem::take(&mut *self.workers.lock());
        // The queue is FIFO: every job queued before the first Stop runs first.
        for _ in 0..workers.len() {
            let _ = self.sender.send(Msg::Stop);
        }
        worker::join_all_until(workers, deadline, &self.name);
    }
}

fn spawn_worker(
    name: &str,
    i: usize,
    rx: &Receiver<Msg>,
    waiting: &Arc<AtomicUsize>,
) -> std::io::Result<Worker> {
    let rx = rx.clone();
    let pool = name.to_string();
    let waiting = waiting.clone();
    worker::spawn(format!("{name}-{i}"), move || {
        while let Ok(Msg::Run(job)) = rx.recv() {
            waiting.fetch_sub(1, Ordering::AcqRel);
            worker::run_caught(format_args!("a job on pool {pool}"), job);
        }
    })
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn grow_adds_workers_up_to_the_maximum_only() {
        let pool = ThreadPool::new("t-grow", 1).unwrap();
        assert_eq!(pool.threads(), 1);
        assert!(pool.grow(3));
        assert!(pool.grow(3));
        assert!(!pool.grow(3), "past the maximum");
        assert_eq!(pool.threads(), 3);
        // The added workers take jobs: three jobs that wait for each other all run.
        let barrier = Arc::new(std::sync::Barrier::new(4));
        for _ in 0..3 {
            let b = barrier.clone();
            assert!(pool.execute(move || {
                b.wait();
            }));
        }
        barrier.wait();
        pool.shutdown();
        assert!(!pool.grow(5), "a shut-down pool does not grow");
        assert_eq!(pool.threads(), 0);
    }

    #[test]
    fn runs_every_queued_job_and_survives_a_panic() {
        let n = Arc::new(AtomicUsize::new(0));
        let pool = ThreadPool::new("t-pool", 3).unwrap();
        pool.execute(|| panic!("boom"));
        for _ in 0..100 {
            let n = n.clone();
            assert!(pool.execute(move || {
                std::thread::sleep(std::time::Duration::from_micros(100));
                n.fetch_add(1, Ordering::SeqCst);
            }));
        }
        pool.shutdown();
        assert_eq!(n.load(Ordering::SeqCst), 100);
        assert!(!pool.execute(|| {}), "closed after shutdown");
    }
}
