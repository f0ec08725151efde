//! The consume thread pool: named workers whose number moves between a minimum and a
//! maximum (job 5 grows it under backlog and shrinks it when idle).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The queue and what the workers are doing, under one lock.
///
/// Waking a sleeping worker for every job costs a context switch per message when the
/// listener is fast, and on a small machine that switching is most of the consumer's CPU.
/// So at most one wake-up is in flight at a time (`waking`), and a worker that takes a job
/// and sees more queued wakes the next one: a slow listener still gets every worker busy
/// within a few jobs, a fast one is served by the workers already running.
#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Workers asked to exit by `shrink`.
    stops: usize,
    /// Workers blocked in `ready.wait`.
    sleeping: usize,
    /// A worker was notified and has not yet looked at the queue.
    waking: bool,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

impl Shared {
    fn wake_one(&self, s: &mut State) {
        if s.sleeping > 0 && !s.waking {
            s.waking = true;
            self.ready.notify_one();
        }
    }

    fn work(&self, name: &str) {
        let mut s = self.state.lock();
        loop {
            if s.closed {
                return;
            }
            if s.stops > 0 {
                s.stops -= 1;
                if !s.jobs.is_empty() {
                    self.wake_one(&mut s);
                }
                return;
            }
            if let Some(job) = s.jobs.pop_front() {
                if !s.jobs.is_empty() {
                    self.wake_one(&mut s);
                }
                drop(s);
                worker::run_caught(format_args!("a consume job on {name}"), job);
                s = self.state.lock();
                continue;
            }
            s.sleeping += 1;
            self.ready.wait(&mut s);
            s.sleeping -= 1;
            s.waking = false;
        }
    }
}

/// A resizable pool.
///
/// Locks (`shared.state`, `workers`) are taken one at a time, never nested; no lock is
/// held while a job runs or while workers are joined.
pub(crate) struct ConsumePool {
    shared: Arc<Shared>,
    workers: Mutex<Vec<Worker>>,
    size: AtomicUsize,
    min: usize,
    max: usize,
    next_id: AtomicUsize,
    name: String,
}

impl ConsumePool {
    /// Starts `min` workers.
    pub(crate) fn new(name: &str, min: usize, max: usize) -> std::io::Result<Self> {
        let pool = ConsumePool {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                ready: Condvar::new(),
            }),
            workers: Mutex::new(Vec::new()),
            size: AtomicUsize::new(0),
            min: min.max(1),
            max: max.max(min.max(1)),
            next_id: AtomicUsize::new(0),
            name: name.to_string(),
        };
        for _ in 0..pool.min {
            pool.spawn()?;
        }
        Ok(pool)
    }

    fn spawn(&self) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name = self.name.clone();
        let h = worker::spawn(format!("{}-{id}", self.name), move || shared.work(&name))?;
        let mut w = self.workers.lock();
        w.retain(|h| !h.is_finished());
        w.push(h);
        self.size.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }

    /// Queues a job; false after shutdown.
    pub(crate) fn execute(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let mut s = self.shared.state.lock();
        if s.closed {
            return false;
        }
        s.jobs.push_back(Box::new(job));
        self.shared.wake_one(&mut s);
        true
    }

    /// Current number of workers.
    pub(crate) fn size(&self) -> usize {
        self.size.load(Ordering::SeqCst)
    }

    /// One more worker, up to the maximum (Java `incCorePoolSize`).
    pub(crate) fn grow(&self) {
        if self.is_closed() || self.size() >= self.max {
            return;
        }
        match self.spawn() {
            Ok(()) => debug!("{}: grew to {} threads", self.name, self.size()),
            Err(e) => warn!("{}: could not add a thread: {e}", self.name),
        }
    }

    /// One worker fewer, down to the minimum (Java `decCorePoolSize`). The worker that
    /// takes the stop request finishes its current job first.
    pub(crate) fn shrink(&self) {
        let mut s = self.shared.state.lock();
        if s.closed || self.size() <= self.min {
            return;
        }
        s.stops += 1;
        // Any sleeper may take the stop, even while a wake-up for a job is in flight.
        self.shared.ready.notify_one();
        self.size.fetch_sub(1, Ordering::SeqCst);
        debug!("{}: shrank to {} threads", self.name, self.size());
    }

    /// Drops queued jobs that have not started, lets running ones finish, joins all
    /// (within `util::worker::JOIN_TIMEOUT`; a job that shuts down its own pool does not join itself).
    pub(crate) fn shutdown(&self) {
        let dropped = {
            let mut s = self.shared.state.lock();
            if s.closed {
                return;
            }
            s.closed = true;
            self.shared.ready.notify_all();
            std::mem::take(&mut s.jobs)
        };
        // Outside the lock: a job's captures may do anything when dropped.
        drop(dropped);
        let workers = std::mem::take(&mut *self.workers.lock());
        worker::join_all(workers, JOIN_TIMEOUT, &self.name);
        self.size.store(0, Ordering::SeqCst);
    }
}

impl Drop for ConsumePool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn grows_and_shrinks_within_bounds() {
        let p = ConsumePool::new("t-consume", 1, 3).unwrap();
        assert_eq!(p.size(), 1);
        for _ in 0..5 {
            p.grow();
        }
        assert_eq!(p.size(), 3);
        for _ in 0..5 {
            p.shrink();
        }
        assert_eq!(p.size(), 1);
        let (tx, rx) = crossbeam_channel::bounded(1);
        assert!(p.execute(move || {
            let _ = tx.send(std::thread::current().name().map(str::to_string));
        }));
        let name = rx.recv_timeout(Duration::from_secs(2)).unwrap().unwrap();
        assert!(name.starts_with("t-consume-"), "{name}");
        p.shutdown();
        assert!(!p.execute(|| {}));
    }

    #[test]
    fn slow_jobs_get_every_worker() {
        // Each job waits until all four run at once, so a pool that wakes too few workers
        // fails here instead of serializing slow listeners.
        let p = ConsumePool::new("t-wide", 4, 4).unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = crossbeam_channel::unbounded();
        for _ in 0..4 {
            let (running, tx) = (running.clone(), tx.clone());
            assert!(p.execute(move || {
                running.fetch_add(1, Ordering::SeqCst);
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while running.load(Ordering::SeqCst) < 4 && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let _ = tx.send(running.load(Ordering::SeqCst));
            }));
        }
        for _ in 0..4 {
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 4);
        }
        p.shutdown();
    }

    #[test]
    fn every_job_runs_while_the_pool_shrinks() {
        let p = ConsumePool::new("t-many", 2, 8).unwrap();
        for _ in 0..6 {
            p.grow();
        }
        let done = Arc::new(AtomicUsize::new(0));
        for i in 0..2000 {
            let done = done.clone();
            assert!(p.execute(move || {
                done.fetch_add(1, Ordering::SeqCst);
            }));
            if i % 300 == 0 {
                p.shrink();
            }
        }
        assert_eq!(p.size(), 2);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while done.load(Ordering::SeqCst) < 2000 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(done.load(Ordering::SeqCst), 2000);
        p.shutdown();
        assert_eq!(p.size(), 0);
    }
}
