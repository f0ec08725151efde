//! The consume thread pool: named workers whose number moves between a minimum and a
//! maximum (job 5 grows it under backlog and shrinks it when idle).
//!
//! Like Java's `ThreadPoolExecutor`, the pool has a core size (`min` at first, moved by
//! `grow`/`shrink`) and starts workers only when jobs find none idle, up to that size: an
//! idle push consumer holds one consume thread, not twenty. One worker starts with the
//! pool, so a machine that cannot start threads fails the consumer's start.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

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
    /// Workers running a job now.
    busy: HashSet<ThreadId>,
    closed: bool,
}

impl State {
    /// Whether a worker other than the calling thread runs a job.
    fn others_busy(&self) -> bool {
        let me = std::thread::current().id();
        self.busy.iter().any(|t| *t != me)
    }
}

struct Shared {
    state: Mutex<State>,
    /// Workers wait here for jobs.
    ready: Condvar,
    /// Shutdown waits here for running jobs to end.
    idle: Condvar,
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
                let me = std::thread::current().id();
                s.busy.insert(me);
                drop(s);
                worker::run_caught(format_args!("a consume job on {name}"), job);
                s = self.state.lock();
                s.busy.remove(&me);
                if s.closed {
                    self.idle.notify_all();
                }
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
    /// The core size: workers are started on demand up to it.
    size: AtomicUsize,
    /// Workers started and not asked to stop.
    live: AtomicUsize,
    min: usize,
    max: usize,
    next_id: AtomicUsize,
    name: String,
}

impl ConsumePool {
    /// A pool of core size `min` with one worker started.
    pub(crate) fn new(name: &str, min: usize, max: usize) -> std::io::Result<Self> {
        let pool = ConsumePool {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                ready: Condvar::new(),
                idle: Condvar::new(),
            }),
            workers: Mutex::new(Vec::new()),
            size: AtomicUsize::new(min.max(1)),
            live: AtomicUsize::new(0),
            min: min.max(1),
            max: max.max(min.max(1)),
            next_id: AtomicUsize::new(0),
            name: name.to_string(),
        };
        pool.live.fetch_add(1, Ordering::SeqCst);
        pool.spawn()?;
        Ok(pool)
    }

    /// Starts one more worker if fewer than the core size run (reserving its place first,
    /// so racing callers never start more than the core size).
    fn spawn_if_below_core(&self) {
        let core = self.size();
        if self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
                (l < core).then_some(l + 1)
            })
            .is_err()
        {
            return;
        }
        if let Err(e) = self.spawn() {
            self.live.fetch_sub(1, Ordering::SeqCst);
            warn!("{}: could not add a thread: {e}", self.name);
        }
    }

    /// After queueing: wake a sleeper, or start a worker when none sleeps. The state
    /// lock is released before a thread is started (locks are never nested).
    fn dispatch(&self, mut s: parking_lot::MutexGuard<'_, State>) {
        // A sleeper not already being woken takes the job (and wakes the next one if
        // more wait); otherwise every worker is busy or claimed, and one more may start.
        if s.sleeping > usize::from(s.waking) {
            self.shared.wake_one(&mut s);
            return;
        }
        drop(s);
        self.spawn_if_below_core();
    }

    fn spawn(&self) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name = self.name.clone();
        let h = worker::spawn(format!("{}-{id}", self.name), move || shared.work(&name))?;
        let mut w = self.workers.lock();
        w.retain(|h| !h.is_finished());
        w.push(h);
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
        self.dispatch(s);
        true
    }

    /// Queues every job of `jobs` under one lock, with at most one wake-up: the consume
    /// requests of one pull result go in together rather than one lock round each.
    /// False (and nothing queued) after shutdown.
    pub(crate) fn execute_all<I, F>(&self, jobs: I) -> bool
    where
        I: IntoIterator<Item = F>,
        F: FnOnce() + Send + 'static,
    {
        let mut s = self.shared.state.lock();
        if s.closed {
            return false;
        }
        let before = s.jobs.len();
        s.jobs
            .extend(jobs.into_iter().map(|job| Box::new(job) as Job));
        if s.jobs.len() > before {
            self.dispatch(s);
        }
        true
    }

    /// The core size (Java `getCorePoolSize`): how many workers may run.
    pub(crate) fn size(&self) -> usize {
        self.size.load(Ordering::SeqCst)
    }

    /// Workers running a job now (Java `getActiveCount`).
    pub(crate) fn busy(&self) -> usize {
        self.shared.state.lock().busy.len()
    }

    /// Workers started and not asked to stop.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// A core size one larger, up to the maximum (Java `incCorePoolSize`); the worker is
    /// started now when jobs wait, as `setCorePoolSize` does.
    pub(crate) fn grow(&self) {
        if self.is_closed() || self.size() >= self.max {
            return;
        }
        self.size.fetch_add(1, Ordering::SeqCst);
        debug!("{}: core size {}", self.name, self.size());
        let waiting = !self.shared.state.lock().jobs.is_empty();
        if waiting {
            self.spawn_if_below_core();
        }
    }

    /// One worker fewer, down to the minimum (Java `decCorePoolSize`). The worker that
    /// takes the stop request finishes its current job first.
    pub(crate) fn shrink(&self) {
        let mut s = self.shared.state.lock();
        if s.closed || self.size() <= self.min {
            return;
        }
        let core = self.size.fetch_sub(1, Ordering::SeqCst) - 1;
        if self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
                (l > core).then(|| l - 1)
            })
            .is_ok()
        {
            s.stops += 1;
            // Any sleeper may take the stop, even while a wake-up for a job is in flight.
            self.shared.ready.notify_one();
        }
        debug!("{}: core size {core}", self.name);
    }

    /// Drops queued jobs that have not started and waits up to `await_running` for the
    /// running ones to end (Java `ThreadUtils.shutdownGracefully` with
    /// `awaitTerminationMillisWhenShutdown`). Then joins the idle workers, which end at
    /// once (within `util::worker::JOIN_TIMEOUT`, as a safety bound), and leaves a worker
    /// still running a job to end on its own, with a warning: this never waits for a job
    /// longer than `await_running`. A job that shuts down its own pool waits for neither
    /// itself nor its own thread. Returns whether no job (but the caller's) still runs.
    pub(crate) fn shutdown(&self, await_running: Duration) -> bool {
        let dropped = {
            let mut s = self.shared.state.lock();
            if s.closed {
                return true;
            }
            s.closed = true;
            self.shared.ready.notify_all();
            std::mem::take(&mut s.jobs)
        };
        // Outside the lock: a job's captures may do anything when dropped.
        drop(dropped);
        let deadline = Instant::now() + await_running;
        let still_busy = {
            let mut s = self.shared.state.lock();
            while s.others_busy() && !self.shared.idle.wait_until(&mut s, deadline).timed_out() {}
            s.busy.clone()
        };
        let workers = std::mem::take(&mut *self.workers.lock());
        let mut idle = Vec::new();
        for w in workers {
            if still_busy.contains(&w.thread_id()) && !w.is_current() {
                warn!(
                    "{}: {} still runs a listener after {await_running:?}; not waiting for it \
                     (its messages are not committed and come again)",
                    self.name,
                    w.name()
                );
            } else {
                idle.push(w);
            }
        }
        worker::join_all(idle, JOIN_TIMEOUT, &self.name);
        self.size.store(0, Ordering::SeqCst);
        self.live.store(0, Ordering::SeqCst);
        still_busy.is_empty()
            || (still_busy.len() == 1 && still_busy.contains(&std::thread::current().id()))
    }
}

impl Drop for ConsumePool {
    fn drop(&mut self) {
        // The owner has shut the pool down already, unless it was never started; no job
        // runs then but, maybe, the one dropping the pool.
        self.shutdown(Duration::ZERO);
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
        p.shutdown(Duration::ZERO);
        assert!(!p.execute(|| {}));
    }

    #[test]
    fn shutdown_waits_for_running_jobs_only_as_long_as_it_is_told() {
        // One job ends within the wait and is joined; one is stuck and is left running;
        // one is queued and never runs.
        let p = ConsumePool::new("t-await", 2, 2).unwrap();
        let (started_tx, started) = crossbeam_channel::unbounded::<()>();
        let (release, released) = crossbeam_channel::bounded::<()>(0);
        let (quick_tx, quick) = crossbeam_channel::bounded::<()>(1);
        let s = started_tx.clone();
        assert!(p.execute(move || {
            let _ = s.send(());
            std::thread::sleep(Duration::from_millis(200));
            let _ = quick_tx.send(());
        }));
        assert!(p.execute(move || {
            let _ = started_tx.send(());
            let _ = released.recv_timeout(Duration::from_secs(30));
        }));
        let queued = Arc::new(AtomicUsize::new(0));
        let q = queued.clone();
        assert!(p.execute(move || {
            q.fetch_add(1, Ordering::SeqCst);
        }));
        for _ in 0..2 {
            started.recv_timeout(Duration::from_secs(5)).unwrap();
        }
        let began = std::time::Instant::now();
        assert!(
            !p.shutdown(Duration::from_millis(700)),
            "the stuck job still runs"
        );
        let took = began.elapsed();
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_millis(1500),
            "{took:?}"
        );
        assert!(
            quick.try_recv().is_ok(),
            "the quick job ended within the wait"
        );
        assert_eq!(
            queued.load(Ordering::SeqCst),
            0,
            "a queued job never starts"
        );
        drop(release);

        // Nothing running: shutdown returns at once, whatever the bound.
        let p = ConsumePool::new("t-await-idle", 3, 3).unwrap();
        let began = std::time::Instant::now();
        assert!(p.shutdown(Duration::from_secs(30)));
        assert!(began.elapsed() < Duration::from_secs(2));
    }

    /// A job that counts itself running, waits (up to 5 s) until `n` jobs run at once and
    /// reports how many ran then.
    fn waits_for_running(
        running: &Arc<AtomicUsize>,
        tx: &crossbeam_channel::Sender<usize>,
        n: usize,
    ) -> impl FnOnce() + Send + 'static {
        let (running, tx) = (running.clone(), tx.clone());
        move || {
            running.fetch_add(1, Ordering::SeqCst);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while running.load(Ordering::SeqCst) < n && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = tx.send(running.load(Ordering::SeqCst));
        }
    }

    #[test]
    fn workers_start_on_demand_up_to_the_core_size() {
        // An idle pool of core size 4 holds one thread; four jobs that each wait for the
        // others get four; a fifth waiting job never makes a fifth thread.
        let p = ConsumePool::new("t-lazy", 4, 8).unwrap();
        assert_eq!((p.size(), p.live()), (4, 1));
        let running = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = crossbeam_channel::unbounded();
        for _ in 0..5 {
            assert!(p.execute(waits_for_running(&running, &tx, 4)));
        }
        for _ in 0..5 {
            assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap() >= 4);
        }
        assert_eq!(p.live(), 4, "never more threads than the core size");
        p.shutdown(Duration::ZERO);
    }

    #[test]
    fn slow_jobs_get_every_worker() {
        // Each job waits until all four run at once, so a pool that wakes too few workers
        // fails here instead of serializing slow listeners.
        let p = ConsumePool::new("t-wide", 4, 4).unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = crossbeam_channel::unbounded();
        for _ in 0..4 {
            assert!(p.execute(waits_for_running(&running, &tx, 4)));
        }
        for _ in 0..4 {
            assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 4);
        }
        p.shutdown(Duration::ZERO);
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
        p.shutdown(Duration::ZERO);
        assert_eq!(p.size(), 0);
    }
}
