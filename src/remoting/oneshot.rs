//! A one-value channel for sync calls: the I/O thread completes it, the caller blocks on it.
//!
//! crossbeam's receive spins and then yields the CPU up to four times before it parks. A
//! sync call waits a whole broker round trip, so that spinning only costs: with 64 sync
//! callers on two cores it was 3.4 `sched_yield` calls per message, each a trip through the
//! scheduler. This receiver parks at once on a `parking_lot` condvar.
//!
//! A sender that holds a lock can fill the slot under it and wake the receiver after
//! letting go ([`Sender::fill`]): a woken thread may take the CPU from its waker at once,
//! and should not find the waker's lock still held.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

enum State<T> {
    Empty,
    Full(T),
    /// The sender was dropped without sending.
    Closed,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The completing half; dropping it unsent wakes the receiver with [`RecvError::Closed`].
pub(crate) struct Sender<T> {
    /// Taken when the slot is filled: the drop then has nothing left to do.
    slot: Option<Arc<Slot<T>>>,
}

/// The wake-up of a receiver whose value is in its slot already ([`Sender::fill`]):
/// made when this is dropped.
#[must_use = "dropping it wakes the receiver"]
pub(crate) struct Wake<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The waiting half.
pub(crate) struct Receiver<T> {
    slot: Arc<Slot<T>>,
}

/// Why [`Receiver::recv_deadline`] returned without a value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RecvError {
    Timeout,
    Closed,
}

pub(crate) fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Empty),
        ready: Condvar::new(),
    });
    (
        Sender {
            slot: Some(slot.clone()),
        },
        Receiver { slot },
    )
}

impl<T> Slot<T> {
    /// Puts `end` in the slot unless it holds something already; `true` when it did.
    fn put(&self, end: State<T>) -> bool {
        let mut s = self.state.lock();
        let empty = matches!(*s, State::Empty);
        if empty {
            *s = end;
        }
        empty
    }
}

impl<T> Sender<T> {
    pub(crate) fn send(self, value: T) {
        drop(self.fill(value));
    }

    /// Puts `value` in the slot now and leaves the receiver's wake-up (a system call when
    /// it sleeps) to the returned [`Wake`]. A receiver that looks before it is woken (its
    /// deadline passed) finds the value.
    pub(crate) fn fill(mut self, value: T) -> Wake<T> {
        let slot = self.slot.take().filter(|s| s.put(State::Full(value)));
        Wake { slot }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            if slot.put(State::Closed) {
                slot.ready.notify_one();
            }
        }
    }
}

impl<T> Drop for Wake<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.ready.notify_one();
        }
    }
}

impl<T> Receiver<T> {
    /// Waits for the value until `deadline` (a value already sent is returned even when
    /// `deadline` has passed).
    pub(crate) fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvError> {
        let mut s = self.slot.state.lock();
        loop {
            match std::mem::replace(&mut *s, State::Empty) {
                State::Full(v) => return Ok(v),
                State::Closed => return Err(RecvError::Closed),
                State::Empty => {}
            }
            if self.slot.ready.wait_until(&mut s, deadline).timed_out() {
                return match std::mem::replace(&mut *s, State::Empty) {
                    State::Full(v) => Ok(v),
                    State::Closed => Err(RecvError::Closed),
                    State::Empty => Err(RecvError::Timeout),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn value_from_another_thread() {
        let (tx, rx) = oneshot();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(7);
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(rx.recv_deadline(deadline), Ok(7));
        t.join().unwrap();
    }

    #[test]
    fn value_sent_before_the_wait() {
        let (tx, rx) = oneshot();
        tx.send("x");
        assert_eq!(rx.recv_deadline(Instant::now()), Ok("x"));
    }

    #[test]
    fn a_filled_value_is_there_before_the_wake_up_and_the_wake_up_ends_the_wait() {
        let (tx, rx) = oneshot();
        let wake = tx.fill(3);
        // Not woken yet: a receiver whose deadline passed still finds the value.
        assert_eq!(rx.recv_deadline(Instant::now()), Ok(3));
        drop(wake);

        let (tx, rx) = oneshot();
        let t = std::thread::spawn(move || {
            let wake = tx.fill(9);
            std::thread::sleep(Duration::from_millis(20));
            drop(wake);
        });
        let begin = Instant::now();
        assert_eq!(rx.recv_deadline(begin + Duration::from_secs(60)), Ok(9));
        // Woken by the drop, not by the deadline.
        assert!(begin.elapsed() < Duration::from_secs(30));
        t.join().unwrap();
    }

    #[test]
    fn timeout_and_closed() {
        let (tx, rx) = oneshot::<u8>();
        let begin = Instant::now();
        assert_eq!(
            rx.recv_deadline(begin + Duration::from_millis(30)),
            Err(RecvError::Timeout)
        );
        assert!(begin.elapsed() >= Duration::from_millis(30));
        drop(tx);

        let (tx, rx) = oneshot::<u8>();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(tx);
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(rx.recv_deadline(deadline), Err(RecvError::Closed));
        t.join().unwrap();
    }
}
