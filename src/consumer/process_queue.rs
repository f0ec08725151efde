//! `ProcessQueue`: the messages pulled from one queue and not yet consumed (Java
//! `ProcessQueue`). The smallest offset still cached is what may be committed, so a crash
//! re-delivers rather than skips.
//!
//! Java keeps a reference to every message here. A Rust copy would be a deep clone, so the
//! queue keeps only offset and body size for messages that travel on to their consumer
//! (concurrently, lite pull) and keeps the messages themselves only where it hands them out
//! (orderly).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::message::{property, MessageExt};
use crate::protocol::consumer_admin::ProcessQueueInfo;
use crate::remoting::pending::OpaqueMap;

/// A queue held longer than this without a pull is dropped and re-created by rebalance.
pub const PULL_MAX_IDLE_TIME: Duration = Duration::from_secs(120);
/// A broker lock older than this is not trusted for orderly consumption.
pub const REBALANCE_LOCK_MAX_LIVE_TIME: Duration = Duration::from_secs(30);

/// A concurrent batch in its listener: when it started, and its messages.
type InFlight = (Instant, Arc<Vec<MessageExt>>);

/// One pulled message not yet consumed.
struct Cached {
    body_len: u64,
    /// Held only for orderly consumption, which takes messages from here. Boxed so that
    /// an entry of the other consumers (offset and size only) stays 16 bytes: the map
    /// moves entries within its nodes on every insert and removal, and a message inline
    /// made that a copy of ~3 KiB per message consumed.
    msg: Option<Box<MessageExt>>,
}

#[derive(Default)]
struct Inner {
    /// Offset → message, every message pulled and not yet consumed.
    msgs: BTreeMap<i64, Cached>,
    msg_size: u64,
    queue_offset_max: i64,
    /// Orderly: offset → body size of the messages taken and not yet committed.
    consuming: BTreeMap<i64, u64>,
    /// Orderly: a consume task is scheduled or running.
    consume_task_active: bool,
    /// Backlog on the broker (max offset − last pulled), for the pool adjustment.
    msg_acc_cnt: i64,
    /// The broker's max offset of the queue as of the last pull that returned messages
    /// (for the lag in the consumer's stats).
    broker_max_offset: Option<i64>,
}

/// Messages of one queue in flight through the consumer.
///
/// Lock order: `consume_lock` → `inner`, `last_lock`. `consume_lock` is held for a whole
/// orderly consume round, the listener included — the one place where a lock is held
/// across user code, by design: it keeps one queue's messages in order and lets the
/// rebalance wait (bounded) for the round before unlocking the queue at the broker. No
/// other lock is held when it is taken. `inner`, `last_lock` and `last_pull` are
/// otherwise taken alone.
pub struct ProcessQueue {
    inner: Mutex<Inner>,
    dropped: AtomicBool,
    locked: AtomicBool,
    last_lock: Mutex<Instant>,
    last_pull: Mutex<Instant>,
    /// Serialises orderly consumption of this queue.
    pub(crate) consume_lock: Mutex<()>,
    try_unlock_times: AtomicI64,
    /// When messages were last consumed (removed or committed), ms since the epoch; 0
    /// before the first. For the admin tool's "can't consume for a while".
    last_consume_millis: AtomicI64,
    /// Concurrent batches handed to a listener that has not returned: id → when it
    /// started and the messages, for the consume timeout (Java `cleanExpiredMsg`). Ids
    /// are consecutive: a multiplicative hash, not SipHash (a push consumer inserts and
    /// removes one per message at the default batch size of 1).
    in_flight: Mutex<OpaqueMap<u64, InFlight>>,
    next_batch: AtomicU64,
}

impl Default for ProcessQueue {
    fn default() -> Self {
        ProcessQueue {
            inner: Mutex::new(Inner::default()),
            dropped: AtomicBool::new(false),
            locked: AtomicBool::new(false),
            last_lock: Mutex::new(Instant::now()),
            last_pull: Mutex::new(Instant::now()),
            consume_lock: Mutex::new(()),
            try_unlock_times: AtomicI64::new(0),
            last_consume_millis: AtomicI64::new(0),
            in_flight: Mutex::new(OpaqueMap::default()),
            next_batch: AtomicU64::new(0),
        }
    }
}

impl ProcessQueue {
    /// Whether rebalance took the queue away (work on it stops).
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    pub(crate) fn set_dropped(&self, v: bool) {
        self.dropped.store(v, Ordering::Release);
    }

    /// Whether this consumer holds the broker lock (orderly).
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Acquire)
    }

    pub(crate) fn set_locked(&self, v: bool) {
        self.locked.store(v, Ordering::Release);
        if v {
            *self.last_lock.lock() = Instant::now();
        }
    }

    /// Whether the last successful lock is too old to rely on.
    pub fn is_lock_expired(&self) -> bool {
        self.last_lock.lock().elapsed() > REBALANCE_LOCK_MAX_LIVE_TIME
    }

    pub(crate) fn touch_pull(&self) {
        *self.last_pull.lock() = Instant::now();
    }

    /// Whether nothing pulled this queue for 120 s (`PULL_MAX_IDLE_TIME`).
    pub fn is_pull_expired(&self) -> bool {
        self.last_pull.lock().elapsed() > PULL_MAX_IDLE_TIME
    }

    pub(crate) fn inc_try_unlock_times(&self) -> i64 {
        self.try_unlock_times.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records pulled messages that go on to their consumer (concurrently, lite pull): the
    /// queue tracks their offsets and sizes only.
    pub(crate) fn put_messages(&self, msgs: &[MessageExt]) -> bool {
        self.put_entries(
            msgs.iter()
                .map(|m| (m.queue_offset, m.body().len() as u64, None)),
            msgs.last().map(|m| (m.queue_offset, max_offset(m))),
        )
    }

    /// Orderly: keeps pulled messages for [`take_messages`](Self::take_messages). Returns
    /// whether a consume task should be started.
    pub(crate) fn hold_messages(&self, msgs: Vec<MessageExt>) -> bool {
        let last = msgs.last().map(|m| (m.queue_offset, max_offset(m)));
        self.put_entries(
            msgs.into_iter()
                .map(|m| (m.queue_offset, m.body().len() as u64, Some(Box::new(m)))),
            last,
        )
    }

    /// `last`: offset of the newest message and the broker's max offset it carried.
    fn put_entries(
        &self,
        entries: impl Iterator<Item = (i64, u64, Option<Box<MessageExt>>)>,
        last: Option<(i64, Option<i64>)>,
    ) -> bool {
        let mut g = self.inner.lock();
        for (offset, body_len, msg) in entries {
            if g.msgs.insert(offset, Cached { body_len, msg }).is_none() {
                g.msg_size += body_len;
                g.queue_offset_max = g.queue_offset_max.max(offset);
            }
        }
        if let Some((offset, Some(max))) = last {
            g.msg_acc_cnt = (max - offset).max(0);
            g.broker_max_offset = Some(max);
        }
        if !g.msgs.is_empty() && !g.consume_task_active {
            g.consume_task_active = true;
            return true;
        }
        false
    }

    /// Removes consumed messages; returns the offset to commit: the smallest offset still
    /// cached, or the highest seen + 1 when nothing is left (-1 if there was nothing).
    pub(crate) fn remove_messages(&self, offsets: impl IntoIterator<Item = i64>) -> i64 {
        self.touch_consume();
        let mut g = self.inner.lock();
        if g.msgs.is_empty() {
            return -1;
        }
        let mut removed = false;
        for o in offsets {
            if let Some(c) = g.msgs.remove(&o) {
                g.msg_size = g.msg_size.saturating_sub(c.body_len);
                removed = true;
            }
        }
        let _ = removed;
        match g.msgs.keys().next() {
            Some(first) => *first,
            None => g.queue_offset_max + 1,
        }
    }

    /// A listener starts on `msgs`; returns the batch's id for [`end_batch`](Self::end_batch).
    pub(crate) fn begin_batch(&self, msgs: Arc<Vec<MessageExt>>) -> u64 {
        let id = self.next_batch.fetch_add(1, Ordering::Relaxed);
        self.in_flight.lock().insert(id, (Instant::now(), msgs));
        id
    }

    /// The listener of batch `id` returned; false if the batch had expired (its messages
    /// were taken by [`take_expired`](Self::take_expired)).
    pub(crate) fn end_batch(&self, id: u64) -> bool {
        self.in_flight.lock().remove(&id).is_some()
    }

    /// The batches whose listener has run for longer than `timeout`, with those of their
    /// messages that are still cached (not consumed since). Once each of them is sent
    /// back, [`end_batch`](Self::end_batch) forgets the batch, and its listener, when it
    /// returns, no longer decides about them.
    pub(crate) fn expired_batches(&self, timeout: Duration) -> Vec<(u64, Vec<MessageExt>)> {
        let expired: Vec<(u64, Arc<Vec<MessageExt>>)> = self
            .in_flight
            .lock()
            .iter()
            .filter(|(_, (started, _))| started.elapsed() > timeout)
            .map(|(id, (_, msgs))| (*id, msgs.clone()))
            .collect();
        let g = self.inner.lock();
        expired
            .into_iter()
            .map(|(id, batch)| {
                let cached = batch
                    .iter()
                    .filter(|m| g.msgs.contains_key(&m.queue_offset))
                    .cloned()
                    .collect();
                (id, cached)
            })
            .collect()
    }

    fn touch_consume(&self) {
        self.last_consume_millis
            .store(crate::util::now_millis(), Ordering::Relaxed);
    }

    /// What the admin tool shows of this queue (Java `fillProcessQueueInfo`), with the
    /// store's offset as `commit_offset`.
    pub(crate) fn info(&self, commit_offset: i64) -> ProcessQueueInfo {
        let now = crate::util::now_millis();
        let millis_ago = |t: Instant| now - i64::try_from(t.elapsed().as_millis()).unwrap_or(now);
        let (min, max, count, size) = {
            let g = self.inner.lock();
            (
                g.msgs.keys().next().copied().unwrap_or(0),
                g.msgs.keys().next_back().copied().unwrap_or(0),
                g.msgs.len() + g.consuming.len(),
                g.msg_size,
            )
        };
        ProcessQueueInfo {
            commit_offset,
            cached_msg_min_offset: min,
            cached_msg_max_offset: max,
            cached_msg_count: i32::try_from(count).unwrap_or(i32::MAX),
            cached_msg_size_in_mib: i32::try_from(size / (1024 * 1024)).unwrap_or(i32::MAX),
            locked: self.is_locked(),
            try_unlock_times: self.try_unlock_times.load(Ordering::Relaxed),
            last_lock_timestamp: millis_ago(*self.last_lock.lock()),
            droped: self.is_dropped(),
            last_pull_timestamp: millis_ago(*self.last_pull.lock()),
            last_consume_timestamp: self.last_consume_millis.load(Ordering::Relaxed),
            ..ProcessQueueInfo::default()
        }
    }

    /// Cached messages, their body bytes and the broker's max offset last seen, in one
    /// lock (the consumer's stats).
    pub(crate) fn stats(&self) -> (u64, u64, Option<i64>) {
        let g = self.inner.lock();
        (
            (g.msgs.len() + g.consuming.len()) as u64,
            g.msg_size,
            g.broker_max_offset,
        )
    }

    /// Cached message count.
    pub fn msg_count(&self) -> usize {
        let g = self.inner.lock();
        g.msgs.len() + g.consuming.len()
    }

    /// Cached body bytes.
    pub fn msg_size(&self) -> u64 {
        self.inner.lock().msg_size
    }

    /// Broker backlog seen in the last pull.
    pub fn msg_acc_cnt(&self) -> i64 {
        self.inner.lock().msg_acc_cnt
    }

    /// Distance between the highest and lowest cached offsets (Java `getMaxSpan`).
    pub fn max_span(&self) -> i64 {
        let g = self.inner.lock();
        match (g.msgs.keys().next(), g.msgs.keys().next_back()) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    /// Orderly: takes up to `n` messages in offset order; clears the task flag when empty.
    pub(crate) fn take_messages(&self, n: usize) -> Vec<MessageExt> {
        let mut g = self.inner.lock();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some((o, c)) = g.msgs.pop_first() else {
                break;
            };
            g.consuming.insert(o, c.body_len);
            // Orderly queues hold every message; an offset-only entry has nothing to
            // consume and is committed with the others.
            out.extend(c.msg.map(|m| *m));
        }
        if out.is_empty() {
            g.consume_task_active = false;
        }
        out
    }

    /// Orderly: forgets the messages being consumed; returns the offset to commit.
    pub(crate) fn commit(&self) -> i64 {
        self.touch_consume();
        let mut g = self.inner.lock();
        let Some((&last, _)) = g.consuming.last_key_value() else {
            return -1;
        };
        let freed: u64 = g.consuming.values().sum();
        g.msg_size = g.msg_size.saturating_sub(freed);
        g.consuming.clear();
        last + 1
    }

    /// Orderly: puts messages back to be consumed again.
    pub(crate) fn make_messages_to_consume_again(&self, msgs: Vec<MessageExt>) {
        let mut g = self.inner.lock();
        for m in msgs {
            let body_len = g
                .consuming
                .remove(&m.queue_offset)
                .unwrap_or(m.body().len() as u64);
            g.msgs.insert(
                m.queue_offset,
                Cached {
                    body_len,
                    msg: Some(Box::new(m)),
                },
            );
        }
    }
}

/// The broker's max offset, which the pull put on every message.
fn max_offset(m: &MessageExt) -> Option<i64> {
    m.property(property::MAX_OFFSET)
        .and_then(|v| v.parse::<i64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(offset: i64) -> MessageExt {
        let mut m = MessageExt {
            queue_offset: offset,
            ..MessageExt::default()
        };
        m.message.set_body(vec![0u8; 10]);
        m
    }

    #[test]
    fn a_cached_entry_of_a_concurrent_consumer_is_two_words() {
        // Offset-only entries are what push and lite pull keep per message; the map moves
        // them on every insert and removal.
        assert_eq!(std::mem::size_of::<Cached>(), 16);
    }

    #[test]
    fn commit_offset_is_the_smallest_still_cached() {
        let pq = ProcessQueue::default();
        assert!(pq.put_messages(&[msg(5), msg(6), msg(7)]));
        assert_eq!(pq.msg_count(), 3);
        assert_eq!(pq.msg_size(), 30);
        assert_eq!(pq.max_span(), 2);
        assert_eq!(pq.remove_messages([6]), 5, "5 is still in flight");
        assert_eq!(pq.remove_messages([5]), 7);
        assert_eq!(pq.remove_messages([7]), 8, "all done: max + 1");
        assert_eq!(pq.remove_messages([7]), -1);
    }

    #[test]
    fn orderly_take_commit_and_redeliver() {
        let pq = ProcessQueue::default();
        pq.hold_messages(vec![msg(1), msg(2), msg(3)]);
        let first = pq.take_messages(2);
        assert_eq!(
            first.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![1, 2]
        );
        pq.make_messages_to_consume_again(first);
        let again = pq.take_messages(2);
        assert_eq!(
            again.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(pq.commit(), 3);
        assert_eq!(pq.take_messages(2).len(), 1);
        assert_eq!(pq.commit(), 4);
        assert!(pq.take_messages(2).is_empty());
        assert!(
            pq.hold_messages(vec![msg(4)]),
            "an emptied queue starts a new task"
        );
    }
}

/// A queue the broker assigned in POP mode (Java `PopProcessQueue`): no offsets and no
/// cache here (the broker keeps the group's progress), only the count of messages popped
/// and not yet acked or handed back, which bounds the pops (`pop_threshold_for_queue`).
#[derive(Debug)]
pub struct PopProcessQueue {
    dropped: AtomicBool,
    wait_ack: AtomicI64,
    /// When the queue was last popped, ms since the epoch.
    last_pop: AtomicI64,
}

impl Default for PopProcessQueue {
    fn default() -> Self {
        PopProcessQueue {
            dropped: AtomicBool::new(false),
            wait_ack: AtomicI64::new(0),
            last_pop: AtomicI64::new(crate::util::now_millis()),
        }
    }
}

impl PopProcessQueue {
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }

    pub(crate) fn set_dropped(&self, v: bool) {
        self.dropped.store(v, Ordering::SeqCst);
    }

    pub(crate) fn touch_pop(&self) {
        self.last_pop
            .store(crate::util::now_millis(), Ordering::SeqCst);
    }

    /// Whether nothing popped this queue for 120 s (`PULL_MAX_IDLE_TIME`).
    pub fn is_pull_expired(&self) -> bool {
        let idle = crate::util::now_millis().saturating_sub(self.last_pop.load(Ordering::SeqCst));
        idle > i64::try_from(PULL_MAX_IDLE_TIME.as_millis()).unwrap_or(i64::MAX)
    }

    /// The admin tool's view (Java `fillPopProcessQueueInfo`).
    pub(crate) fn info(&self) -> crate::protocol::consumer_admin::PopProcessQueueInfo {
        crate::protocol::consumer_admin::PopProcessQueueInfo {
            wait_ack_count: i32::try_from(self.wait_ack_count()).unwrap_or(i32::MAX),
            droped: self.is_dropped(),
            last_pop_timestamp: self.last_pop.load(Ordering::SeqCst),
        }
    }

    /// Messages popped and neither acked nor handed back yet (Java `getWaiAckMsgCount`).
    pub fn wait_ack_count(&self) -> i64 {
        self.wait_ack.load(Ordering::SeqCst)
    }

    pub(crate) fn popped(&self, n: usize) {
        self.wait_ack
            .fetch_add(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    pub(crate) fn done(&self, n: usize) {
        self.wait_ack
            .fetch_sub(i64::try_from(n).unwrap_or(i64::MAX), Ordering::SeqCst);
    }
}
