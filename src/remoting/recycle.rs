//! Frame buffers that go back to whoever encodes the next frame ([`FramePool`]).
//!
//! A caller encodes a request into a new vector and the I/O thread frees it once written:
//! memory allocated on one thread and freed on another, which the system allocator serves
//! on its slow path (no per-thread cache), and a 1 KiB message's frame is past the size
//! that cache takes anyway. Written frames come back here instead, and the next encode
//! takes one, its capacity kept.

use parking_lot::Mutex;

/// Bytes of buffers kept at most (their capacity); beyond, written frames are freed. An
/// async sender runs up to its window (1,024 requests by default) ahead of the I/O
/// thread, so the pool must hold a window of 1 KiB messages' frames to serve it.
const KEEP_BYTES: usize = 2 * 1024 * 1024;

/// Capacity past which a written frame is freed rather than kept: a few large messages do
/// not pin their size for the life of the client.
const KEEP_CAPACITY: usize = 32 * 1024;

/// Written frames' buffers, cleared, for the next frames.
#[derive(Default)]
pub(crate) struct FramePool {
    free: Mutex<Free>,
}

#[derive(Default)]
struct Free {
    buffers: Vec<Vec<u8>>,
    /// The sum of `buffers`' capacities.
    bytes: usize,
}

impl Free {
    /// Keeps `frame` when it is small enough and there is room.
    fn keep(&mut self, mut frame: Vec<u8>) {
        let capacity = frame.capacity();
        if capacity > 0 && capacity <= KEEP_CAPACITY && self.bytes + capacity <= KEEP_BYTES {
            frame.clear();
            self.bytes += capacity;
            self.buffers.push(frame);
        }
    }
}

impl FramePool {
    /// An empty buffer: a kept one when there is one.
    pub(crate) fn take(&self) -> Vec<u8> {
        // Never waits: with many sending threads a wait for the pool would cost more
        // than the allocation it saves.
        let Some(mut free) = self.free.try_lock() else {
            return Vec::new();
        };
        match free.buffers.pop() {
            Some(frame) => {
                free.bytes -= frame.capacity();
                frame
            }
            None => Vec::new(),
        }
    }

    /// Keeps `frame`'s buffer for a next frame, or frees it (also when the pool is busy).
    pub(crate) fn give(&self, frame: Vec<u8>) {
        if frame.capacity() <= KEEP_CAPACITY {
            if let Some(mut free) = self.free.try_lock() {
                free.keep(frame);
            }
        }
    }

    /// [`give`](Self::give) for every buffer of `frames` (left empty), under one lock.
    pub(crate) fn give_all(&self, frames: &mut Vec<Vec<u8>>) {
        if frames.is_empty() {
            return;
        }
        let Some(mut free) = self.free.try_lock() else {
            frames.clear();
            return;
        };
        while free.bytes < KEEP_BYTES {
            match frames.pop() {
                Some(frame) => free.keep(frame),
                None => break,
            }
        }
        drop(free);
        // What did not fit is freed here, outside the lock.
        frames.clear();
    }

    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let free = self.free.lock();
        (free.buffers.len(), free.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_frame_comes_back_empty_with_its_capacity() {
        let pool = FramePool::default();
        let mut frame = pool.take();
        assert_eq!(frame.capacity(), 0, "nothing kept yet");
        frame.extend_from_slice(&[7u8; 1400]);
        let at = frame.as_ptr();
        let capacity = frame.capacity();
        pool.give(frame);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
        assert_eq!(again.as_ptr(), at, "the same buffer, not a new one");
        assert_eq!(pool.take().capacity(), 0, "one kept, one taken");
    }

    #[test]
    fn the_pool_keeps_neither_large_buffers_nor_more_bytes_than_its_bound() {
        let pool = FramePool::default();
        pool.give(Vec::with_capacity(KEEP_CAPACITY + 1));
        pool.give(Vec::new());
        assert_eq!(pool.kept(), (0, 0));
        // Twice what the bound holds, in buffers of 16 KiB.
        let each = 16 * 1024;
        let fit = KEEP_BYTES / each;
        let mut written: Vec<Vec<u8>> = (0..2 * fit).map(|_| vec![1u8; each]).collect();
        pool.give_all(&mut written);
        assert!(written.is_empty());
        assert_eq!(pool.kept(), (fit, KEEP_BYTES));
        pool.give(vec![1u8; 100]);
        assert_eq!(pool.kept(), (fit, KEEP_BYTES), "full: freed");
        let taken = pool.take();
        assert_eq!(taken.capacity(), each);
        assert_eq!(pool.kept(), (fit - 1, KEEP_BYTES - each));
    }
}
