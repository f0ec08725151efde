//! Python callbacks whose outcome no library thread waits for (the completions of async
//! sends and requests), run in batches under one hold of the GIL.
//!
//! Taking the GIL from a library thread is the dear part of such a callback: the thread
//! that sends holds it between its calls, so each taking is a hand-off between threads,
//! and a thread new to Python makes and frees a thread state each time. A completion
//! therefore only queues its Python work; the first library thread that finds nobody
//! draining the queue takes the GIL once and runs everything queued, including what
//! other threads queue meanwhile, then lets go. The others return at once. Callbacks run
//! one at a time in the order they were queued, as they would under the GIL anyway.
//!
//! A callback may block on something only a later callback brings (a future completed
//! by the next completion, a `close` waiting for the callbacks of another client). So a
//! watchdog thread, awake only while a drainer is, hands the queue to a new thread when
//! the drainer has not finished a callback for [`STUCK`]; the stuck one stops draining
//! when its callback returns.
//!
//! Listener calls do not come here: their consume thread waits for the listener's answer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pyo3::prelude::*;

type Job = Box<dyn for<'py> FnOnce(Python<'py>) + Send>;

/// How long a callback may run before the queue behind it goes to another thread.
const STUCK: Duration = Duration::from_millis(50);

struct State {
    jobs: VecDeque<Job>,
    /// The drainer's number; 0 when nobody drains.
    drainer: u64,
    /// The last number given to a drainer.
    last: u64,
    /// Whether the watchdog thread runs.
    watched: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    jobs: VecDeque::new(),
    drainer: 0,
    last: 0,
    watched: false,
});
/// Wakes the watchdog when a drainer starts.
static DRAINING: Condvar = Condvar::new();
/// Callbacks finished, for the watchdog to see progress.
static FINISHED: AtomicU64 = AtomicU64::new(0);

/// Runs `job` with the GIL, now on this thread or soon on the thread draining the queue.
/// When the interpreter is gone, queued jobs are dropped without running.
pub(crate) fn run(job: impl for<'py> FnOnce(Python<'py>) + Send + 'static) {
    let me = {
        let mut s = STATE.lock();
        s.jobs.push_back(Box::new(job));
        if s.drainer != 0 {
            return;
        }
        become_drainer(&mut s)
    };
    drain(me);
}

fn become_drainer(s: &mut State) -> u64 {
    s.last += 1;
    s.drainer = s.last;
    if !s.watched {
        s.watched = true;
        if std::thread::Builder::new()
            .name("rmq-py-watch".into())
            .spawn(watch)
            .is_err()
        {
            // Without a watchdog a stuck callback holds up the ones behind it; nothing
            // else changes.
            s.watched = false;
        }
    }
    DRAINING.notify_one();
    s.last
}

/// Runs queued jobs while this thread is drainer `me` and jobs remain.
fn drain(me: u64) {
    let attached = Python::try_attach(|py| loop {
        let job = {
            let mut s = STATE.lock();
            if s.drainer != me {
                return; // the watchdog gave the queue to another thread
            }
            match s.jobs.pop_front() {
                Some(job) => job,
                None => {
                    s.drainer = 0;
                    return;
                }
            }
        };
        job(py);
        FINISHED.fetch_add(1, Ordering::Relaxed);
    });
    if attached.is_none() {
        // No interpreter: nothing can run them. Their Python references are released by
        // PyO3's deferred reference counting.
        let dropped = {
            let mut s = STATE.lock();
            if s.drainer == me {
                s.drainer = 0;
            }
            std::mem::take(&mut s.jobs)
        };
        drop(dropped);
    }
}

/// The watchdog: sleeps while nobody drains; while someone does, looks every [`STUCK`]
/// and moves the queue to a new thread when the same drainer finished no callback in
/// that time and callbacks wait behind it.
fn watch() {
    let mut s = STATE.lock();
    loop {
        if s.drainer == 0 {
            DRAINING.wait(&mut s);
            continue;
        }
        let (drainer, seen) = (s.drainer, FINISHED.load(Ordering::Relaxed));
        let deadline = Instant::now() + STUCK;
        while Instant::now() < deadline {
            DRAINING.wait_until(&mut s, deadline);
        }
        if s.drainer != drainer || FINISHED.load(Ordering::Relaxed) != seen || s.jobs.is_empty() {
            continue;
        }
        let next = become_drainer(&mut s);
        if std::thread::Builder::new()
            .name("rmq-py-callback".into())
            .spawn(move || drain(next))
            .is_err()
        {
            // No thread to hand the queue to: the stuck drainer keeps it.
            s.drainer = drainer;
        }
    }
}
