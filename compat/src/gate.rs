//! The gate in front of a client's callbacks into C: a callback runs only while the gate
//! is open, and closing it waits for the callbacks already running, so that after
//! `Shutdown*`/`Destroy*` returns no callback of that client runs (the original kept
//! calling into freed listeners). Closing from inside one of the gate's own callbacks does
//! not wait (it would wait for itself).

use std::cell::RefCell;

use parking_lot::{Condvar, Mutex};

thread_local! {
    /// The gates whose callbacks this thread is running, innermost last.
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

#[derive(Default)]
pub(crate) struct Gate {
    /// (closed, callbacks running)
    state: Mutex<(bool, usize)>,
    left: Condvar,
}

impl Gate {
    /// Runs `f` (the call into C) if the gate is open; `None` when it is closed.
    pub(crate) fn run<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        {
            let mut s = self.state.lock();
            if s.0 {
                return None;
            }
            s.1 += 1;
        }
        struct Leave<'a>(&'a Gate);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let me = self.0 as *const Gate as usize;
                let _ = INSIDE.try_with(|v| {
                    let mut v = v.borrow_mut();
                    if let Some(i) = v.iter().rposition(|&g| g == me) {
                        v.remove(i);
                    }
                });
                let mut s = self.0.state.lock();
                s.1 -= 1;
                if s.1 == 0 {
                    self.0.left.notify_all();
                }
            }
        }
        let _leave = Leave(self);
        let me = self as *const Gate as usize;
        let _ = INSIDE.try_with(|v| v.borrow_mut().push(me));
        Some(f())
    }

    /// Closes the gate and waits until no callback of it runs (except the caller's own).
    pub(crate) fn close_and_wait(&self) {
        let me = self as *const Gate as usize;
        let own = INSIDE
            .try_with(|v| v.borrow().iter().filter(|&&g| g == me).count())
            .unwrap_or(0);
        let mut s = self.state.lock();
        s.0 = true;
        while s.1 > own {
            self.left.wait(&mut s);
        }
    }

    /// Opens the gate again (a client started after a shutdown).
    pub(crate) fn open(&self) {
        self.state.lock().0 = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn closing_waits_for_running_callbacks_and_refuses_new_ones() {
        let gate = Arc::new(Gate::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let g = gate.clone();
        let t = std::thread::spawn(move || {
            g.run(|| {
                tx.send(()).ok();
                std::thread::sleep(Duration::from_millis(200));
            })
        });
        rx.recv().ok();
        let started = std::time::Instant::now();
        gate.close_and_wait();
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(t.join().ok().flatten().is_some());
        assert!(gate.run(|| ()).is_none(), "a closed gate ran a callback");
        gate.open();
        assert!(gate.run(|| ()).is_some());
    }

    #[test]
    fn closing_from_inside_its_own_callback_does_not_wait_for_itself() {
        let gate = Gate::default();
        assert_eq!(gate.run(|| gate.close_and_wait()), Some(()));
        assert!(gate.run(|| ()).is_none());
    }
}
