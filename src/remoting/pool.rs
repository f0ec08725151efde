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

/// Work for a pool thread: any `FnOnce()`, or a boxed value that runs itself (an async
/// request's completion reuses its box instead of boxing a closure around it).
pub(crate) trait Task: Send + 'static {
    fn run(self: Box<Self>);
}

impl<F: FnOnce() + Send + 'static> Task for F {
    fn run(self: Box<Self>) {
        (*self)()
    }
}

pub(crate) type Job = Box<dyn Task>;

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
            match spawn_worker(name, i, &rx, &waiting, None) {
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

    /// Starts one more worker, with `job` as its first, unless the pool has `max` workers
    /// already or is shut down; then the job comes back. Java's `ThreadPoolExecutor` does
    /// this when its queue is full: the new thread's first task never waits in the queue,
    /// so the queue stays within its bound.
    pub fn grow_with<F>(&self, max: usize, job: F) -> Result<(), F>
    where
        F: FnOnce() + Send + 'static,
    {
        let mut workers = self.workers.lock();
        if self.closed.load(Ordering::Acquire) || workers.len() >= max {
            return Err(job);
        }
        // The job goes in a slot the worker empties, so a worker that cannot be started
        // gives it back.
        let slot = Arc::new(Mutex::new(Some(job)));
        let first = {
            let slot = slot.clone();
            Box::new(move || {
                let job = slot.lock().take();
                if let Some(job) = job {
                    job();
                }
            }) as Job
        };
        match spawn_worker(
            &self.name,
            workers.len(),
            &self.receiver,
            &self.waiting,
            Some(first),
        ) {
            Ok(w) => {
                workers.push(w);
                Ok(())
            }
            Err(_) => {
                let job = slot.lock().take();
                // A worker that did not start ran nothing: the job is still there.
                job.map_or(Ok(()), Err)
            }
        }
    }

    /// Workers started.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn threads(&self) -> usize {
        self.workers.lock().len()
    }

    /// Queues a job. Returns false (and drops the job) when the pool is shut down.
    pub fn execute(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.execute_boxed(Box::new(job))
    }

    /// [`execute`](Self::execute) for a job already boxed.
    pub(crate) fn execute_boxed(&self, job: Job) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        if self.sender.send(Msg::Run(job)).is_err() {
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
        // Reserve a place first, so concurrent callers cannot overshoot the limit; only
        // below it, so `waiting` never reads more than the limit, even for a moment.
        let reserved = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        if reserved.is_err() {
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
    first: Option<Job>,
) -> std::io::Result<Worker> {
    let rx = rx.clone();
    let pool = name.to_string();
    let waiting = waiting.clone();
    worker::spawn(format!("{name}-{i}"), move || {
        if let Some(job) = first {
            worker::run_caught(format_args!("a job on pool {pool}"), || job.run());
        }
        while let Ok(Msg::Run(job)) = rx.recv() {
            waiting.fetch_sub(1, Ordering::AcqRel);
            worker::run_caught(format_args!("a job on pool {pool}"), || job.run());
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
        // Three jobs that wait for each other all run: the grown workers run theirs.
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let job = |b: Arc<std::sync::Barrier>| {
            move || {
                b.wait();
            }
        };
        assert!(pool.execute(job(barrier.clone())));
        assert!(pool.grow_with(3, job(barrier.clone())).is_ok());
        assert!(pool.grow_with(3, job(barrier.clone())).is_ok());
        assert!(pool.grow_with(3, || {}).is_err(), "past the maximum");
        assert_eq!(pool.threads(), 3);
        barrier.wait();
        pool.shutdown();
        assert!(
            pool.grow_with(5, || {}).is_err(),
            "a shut-down pool does not grow"
        );
        assert_eq!(pool.threads(), 0);
    }

    #[test]
    fn a_full_pool_never_shows_more_waiting_jobs_than_its_limit() {
        // One worker held, two jobs waiting: every further try is refused. A sampler
        // must never see the refused tries as waiting jobs, however briefly.
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
        let pool = Arc::new(ThreadPool::new("t-limit", 1).unwrap());
        let (entered_tx, entered_rx) = crossbeam_channel::bounded::<()>(1);
        assert!(pool.execute(move || {
            let _ = entered_tx.send(());
            let _ = release_rx.recv_timeout(std::time::Duration::from_secs(20));
        }));
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        for _ in 0..2 {
            assert_eq!(pool.try_execute(2, || {}), Ok(()));
        }
        let done = Arc::new(AtomicBool::new(false));
        let tries = {
            let (pool, done) = (pool.clone(), done.clone());
            std::thread::spawn(move || {
                let mut refused = 0;
                while !done.load(Ordering::Relaxed) {
                    if pool.try_execute(2, || {}) == Err(Refused::Full) {
                        refused += 1;
                    }
                }
                refused
            })
        };
        let mut most = 0;
        let until = Instant::now() + std::time::Duration::from_millis(300);
        while Instant::now() < until {
            most = most.max(pool.waiting());
        }
        done.store(true, Ordering::Relaxed);
        let refused = tries.join().unwrap();
        let _ = release_tx.send(());
        pool.shutdown();
        assert!(refused > 0);
        assert_eq!(
            most, 2,
            "waiting read {most} with a limit of 2 ({refused} refused)"
        );
    }

    #[test]
    fn a_grown_worker_takes_its_first_job_without_queueing_it() {
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
        let pool = ThreadPool::new("t-first", 1).unwrap();
        let (entered_tx, entered_rx) = crossbeam_channel::bounded::<()>(4);
        let hold = move |entered: crossbeam_channel::Sender<()>,
                         release: crossbeam_channel::Receiver<()>| {
            move || {
                let _ = entered.send(());
                let _ = release.recv_timeout(std::time::Duration::from_secs(20));
            }
        };
        assert!(pool.execute(hold(entered_tx.clone(), release_rx.clone())));
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        assert_eq!(pool.try_execute(1, || {}), Ok(()));
        // The queue is full: a new worker starts with the job in hand.
        assert!(pool
            .grow_with(2, hold(entered_tx.clone(), release_rx.clone()))
            .is_ok());
        entered_rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        assert_eq!(pool.waiting(), 1, "the first job never waited");
        assert_eq!(pool.threads(), 2);
        assert!(pool.grow_with(2, || {}).is_err(), "past the maximum");
        for _ in 0..2 {
            let _ = release_tx.send(());
        }
        pool.shutdown();
        assert!(pool.grow_with(3, || {}).is_err(), "shut down");
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
