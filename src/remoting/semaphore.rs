//! A counting semaphore with timed acquire and RAII permits, bounding in-flight requests.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// Counting semaphore (Java `Semaphore` as used by `NettyRemotingAbstract`).
#[derive(Clone)]
pub struct Semaphore {
    inner: Arc<(Mutex<usize>, Condvar)>,
}

/// Returns its permit when dropped.
pub struct Permit {
    sem: Semaphore,
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    pub fn new(permits: usize) -> Self {
        Semaphore {
            inner: Arc::new((Mutex::new(permits), Condvar::new())),
        }
    }

    /// Takes a permit, waiting until `deadline`; `None` if none became free in time.
    pub fn acquire_until(&self, deadline: Instant) -> Option<Permit> {
        let (lock, cv) = &*self.inner;
        let mut n = lock.lock();
        while *n == 0 {
            if cv.wait_until(&mut n, deadline).timed_out() && *n == 0 {
                return None;
            }
        }
        *n -= 1;
        Some(Permit { sem: self.clone() })
    }

    /// Permits currently free.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn available(&self) -> usize {
        *self.inner.0.lock()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let (lock, cv) = &*self.sem.inner;
        *lock.lock() += 1;
        cv.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn permits_are_bounded_and_returned_on_drop() {
        let s = Semaphore::new(2);
        let a = s.acquire_until(Instant::now()).unwrap();
        let _b = s.acquire_until(Instant::now()).unwrap();
        assert!(s
            .acquire_until(Instant::now() + Duration::from_millis(20))
            .is_none());
        drop(a);
        assert!(s.acquire_until(Instant::now()).is_some());
        assert_eq!(s.available(), 1);
    }
}
