//! `ScheduledExecutor`: named timer threads running fixed-rate and one-shot
//! jobs (Java `ScheduledExecutorService` as `MQClientInstance` uses it).
//!
//! A job that returns an error or panics is logged and keeps its schedule, as the Java
//! client wraps every job in try/catch. A job never runs twice at the same time.
//! `shutdown` (and `Drop`) lets running jobs finish and joins every thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::warn;
use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

type JobFn = Box<dyn FnMut() -> Result<()> + Send + 'static>;

#[derive(Clone, Copy)]
enum Schedule {
    Once,
    FixedRate(Duration),
}

struct Slot {
    name: String,
    schedule: Schedule,
    /// `None` while a worker runs the job.
    job: Option<JobFn>,
}

#[derive(Default)]
struct Queue {
    /// (next run, job id); entries of jobs no longer in `slots` (a one-shot job that ran,
    /// a job dropped at shutdown) are skipped when popped.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    slots: HashMap<u64, Slot>,
    next_id: u64,
    shutdown: bool,
}

struct State {
    queue: Mutex<Queue>,
    cv: Condvar,
}

/// Timer threads running scheduled jobs.
///
/// `state.queue` and `threads` are each taken alone; no lock is held while a job runs or
/// while the threads are joined.
pub struct ScheduledExecutor {
    state: Arc<State>,
    threads: Mutex<Vec<Worker>>,
    name: String,
}

impl ScheduledExecutor {
    /// Starts `threads` timer threads named `<name>-<i>`.
    pub fn new(name: &str, threads: usize) -> Result<Self> {
        let state = Arc::new(State {
            queue: Mutex::new(Queue::default()),
            cv: Condvar::new(),
        });
        let exec = ScheduledExecutor {
            state,
            threads: Mutex::new(Vec::new()),
            name: name.to_string(),
        };
        for i in 0..threads.max(1) {
            let state = exec.state.clone();
            let h = worker::spawn(format!("{name}-{i}"), move || run_timer(&state))
                .map_err(|e| Error::io(format!("starting timer thread {name}-{i}"), e))?;
            exec.threads.lock().push(h);
        }
        Ok(exec)
    }

    /// Runs `job` after `initial_delay`, then every `period` measured from the start of
    /// each run. A run that is late starts as soon as it can; missed runs are not bunched.
    pub fn schedule_at_fixed_rate(
        &self,
        name: &str,
        initial_delay: Duration,
        period: Duration,
        job: impl FnMut() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        self.add(
            name,
            initial_delay,
            Schedule::FixedRate(period),
            Box::new(job),
        )
    }

    /// Runs `job` once after `delay`.
    pub fn schedule_once(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let mut job = Some(job);
        self.add(
            name,
            delay,
            Schedule::Once,
            Box::new(move || match job.take() {
                Some(f) => f(),
                None => Ok(()),
            }),
        )
    }

    fn add(&self, name: &str, delay: Duration, schedule: Schedule, job: JobFn) -> Result<()> {
        if let Schedule::FixedRate(p) = schedule {
            if p.is_zero() {
                return Err(Error::invalid_argument(format!(
                    "job {name}: the period must be greater than zero"
                )));
            }
        }
        let mut q = self.state.queue.lock();
        if q.shutdown {
            return Err(Error::state(format!(
                "executor {} is shut down; job {name} not scheduled",
                self.name
            )));
        }
        let id = q.next_id;
        q.next_id += 1;
        q.slots.insert(
            id,
            Slot {
                name: name.to_string(),
                schedule,
                job: Some(job),
            },
        );
        q.heap.push(Reverse((Instant::now() + delay, id)));
        drop(q);
        self.state.cv.notify_one();
        Ok(())
    }

    /// Stops every schedule, waits for running jobs and joins the threads (within
    /// `util::worker::JOIN_TIMEOUT`, never the calling one). Idempotent.
    pub fn shutdown(&self) {
        self.shutdown_until(Instant::now() + JOIN_TIMEOUT);
    }

    /// [`shutdown`](Self::shutdown) by the owner's `deadline`.
    pub fn shutdown_until(&self, deadline: Instant) {
        {
            let mut q = self.state.queue.lock();
            q.shutdown = true;
            q.slots.clear();
            q.heap.clear();
        }
        self.state.cv.notify_all();
        // A job shutting down its own executor does not join its own thread.
        let threads = std::mem::take(&mut *self.threads.lock());
        worker::join_all_until(threads, deadline, &self.name);
    }
}

impl Drop for ScheduledExecutor {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run_timer(state: &State) {
    let mut q = state.queue.lock();
    loop {
        if q.shutdown {
            return;
        }
        let Some(&Reverse((at, id))) = q.heap.peek() else {
            state.cv.wait(&mut q);
            continue;
        };
        let now = Instant::now();
        if at > now {
            state.cv.wait_until(&mut q, at);
            continue;
        }
        q.heap.pop();
        let Some(slot) = q.slots.get_mut(&id) else {
            continue; // no longer scheduled
        };
        let Some(mut job) = slot.job.take() else {
            continue; // already running elsewhere; it reschedules itself
        };
        let name = slot.name.clone();
        let schedule = slot.schedule;
        drop(q);

        // A panicking job keeps its schedule, as a failing one does.
        if let Some(Err(e)) = worker::run_caught(format_args!("scheduled job {name}"), &mut job) {
            warn!("scheduled job {name} failed: {e}");
        }

        q = state.queue.lock();
        let next = match schedule {
            Schedule::Once => None,
            Schedule::FixedRate(p) => Some((at + p).max(Instant::now())),
        };
        let shutdown = q.shutdown;
        match (next, q.slots.get_mut(&id)) {
            (Some(next), Some(slot)) if !shutdown => {
                slot.job = Some(job);
                q.heap.push(Reverse((next, id)));
            }
            _ => {
                q.slots.remove(&id);
            }
        }
        // Let another worker pick up the earliest job if it is not this one.
        state.cv.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counter() -> (Arc<AtomicUsize>, impl Fn() -> usize) {
        let c = Arc::new(AtomicUsize::new(0));
        let r = c.clone();
        (c, move || r.load(Ordering::SeqCst))
    }

    #[test]
    fn fixed_rate_runs_repeatedly_after_the_initial_delay() {
        let exec = ScheduledExecutor::new("t-rate", 2).unwrap();
        let (c, count) = counter();
        exec.schedule_at_fixed_rate(
            "tick",
            Duration::from_millis(50),
            Duration::from_millis(20),
            move || {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(count(), 0, "initial delay not honoured");
        std::thread::sleep(Duration::from_millis(200));
        let n = count();
        assert!(
            (4..=12).contains(&n),
            "ran {n} times in ~200 ms at a 20 ms period"
        );
    }

    #[test]
    fn failing_and_panicking_jobs_keep_their_schedule() {
        let exec = ScheduledExecutor::new("t-fail", 1).unwrap();
        let (c, count) = counter();
        let c2 = c.clone();
        exec.schedule_at_fixed_rate(
            "err",
            Duration::ZERO,
            Duration::from_millis(10),
            move || {
                c.fetch_add(1, Ordering::SeqCst);
                Err(Error::state("always fails"))
            },
        )
        .unwrap();
        let (p, panics) = counter();
        exec.schedule_at_fixed_rate(
            "panic",
            Duration::ZERO,
            Duration::from_millis(10),
            move || {
                p.fetch_add(1, Ordering::SeqCst);
                panic!("job panics");
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(150));
        assert!(count() >= 3, "failing job ran {} times", count());
        assert!(panics() >= 3, "panicking job ran {} times", panics());
        drop(c2);
    }

    #[test]
    fn once_runs_exactly_once_and_slow_jobs_do_not_overlap() {
        let exec = ScheduledExecutor::new("t-once", 3).unwrap();
        let (c, count) = counter();
        exec.schedule_once("once", Duration::from_millis(5), move || {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let (overlaps, overlap_count) = counter();
        let r = running.clone();
        exec.schedule_at_fixed_rate(
            "slow",
            Duration::ZERO,
            Duration::from_millis(1),
            move || {
                if r.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
                r.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(count(), 1);
        assert_eq!(overlap_count(), 0);
    }

    #[test]
    fn shutdown_joins_every_thread_and_refuses_new_jobs() {
        let exec = ScheduledExecutor::new("t-shut", 2).unwrap();
        exec.schedule_at_fixed_rate("x", Duration::ZERO, Duration::from_millis(5), || Ok(()))
            .unwrap();
        exec.shutdown();
        assert!(exec.threads.lock().is_empty());
        let e = exec
            .schedule_once("late", Duration::ZERO, || Ok(()))
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::State);
        assert!(exec
            .schedule_at_fixed_rate("zero", Duration::ZERO, Duration::ZERO, || Ok(()))
            .is_err());
    }
}
