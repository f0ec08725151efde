//! The consume thread pool: named workers whose number moves between a minimum and a
//! maximum (job 5 grows it under backlog and shrinks it when idle).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Receiver, Sender};
use log::{debug, error, warn};
use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send + 'static>;

enum Msg {
    Run(Job),
    Stop,
}

/// A resizable pool.
pub(crate) struct ConsumePool {
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    size: AtomicUsize,
    min: usize,
    max: usize,
    next_id: AtomicUsize,
    closed: AtomicBool,
    name: String,
}

impl ConsumePool {
    /// Starts `min` workers.
    pub(crate) fn new(name: &str, min: usize, max: usize) -> std::io::Result<Self> {
        let (tx, rx) = unbounded();
        let pool = ConsumePool {
            tx,
            rx,
            workers: Mutex::new(Vec::new()),
            size: AtomicUsize::new(0),
            min: min.max(1),
            max: max.max(min.max(1)),
            next_id: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            name: name.to_string(),
        };
        for _ in 0..pool.min {
            pool.spawn()?;
        }
        Ok(pool)
    }

    fn spawn(&self) -> std::io::Result<()> {
        let rx = self.rx.clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let name = self.name.clone();
        let h = std::thread::Builder::new()
            .name(format!("{}-{id}", self.name))
            .spawn(move || {
                while let Ok(Msg::Run(job)) = rx.recv() {
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        error!("a consume job on {name} panicked; the worker continues");
                    }
                }
            })?;
        let mut w = self.workers.lock();
        w.retain(|h| !h.is_finished());
        w.push(h);
        self.size.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Queues a job; false after shutdown.
    pub(crate) fn execute(&self, job: impl FnOnce() + Send + 'static) -> bool {
        !self.closed.load(Ordering::Acquire) && self.tx.send(Msg::Run(Box::new(job))).is_ok()
    }

    /// Current number of workers.
    pub(crate) fn size(&self) -> usize {
        self.size.load(Ordering::SeqCst)
    }

    /// One more worker, up to the maximum (Java `incCorePoolSize`).
    pub(crate) fn grow(&self) {
        if self.closed.load(Ordering::Acquire) || self.size() >= self.max {
            return;
        }
        match self.spawn() {
            Ok(()) => debug!("{}: grew to {} threads", self.name, self.size()),
            Err(e) => warn!("{}: could not add a thread: {e}", self.name),
        }
    }

    /// One worker fewer, down to the minimum (Java `decCorePoolSize`). The worker that
    /// takes the stop message finishes its current job first.
    pub(crate) fn shrink(&self) {
        if self.closed.load(Ordering::Acquire) || self.size() <= self.min {
            return;
        }
        if self.tx.send(Msg::Stop).is_ok() {
            self.size.fetch_sub(1, Ordering::SeqCst);
            debug!("{}: shrank to {} threads", self.name, self.size());
        }
    }

    /// Drops queued jobs that have not started, lets running ones finish, joins all.
    pub(crate) fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        while self.rx.try_recv().is_ok() {}
        let workers = std::mem::take(&mut *self.workers.lock());
        for _ in 0..workers.len() {
            let _ = self.tx.send(Msg::Stop);
        }
        let me = std::thread::current().id();
        for w in workers {
            if w.thread().id() != me && w.join().is_err() {
                warn!("{}: a worker ended by panic", self.name);
            }
        }
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
}
