//! Offsets of the lite pull consumer: what the application commits (`commit_sync`,
//! `commit`, the confirmed offsets auto-commit and shutdown write), what the store holds
//! (`committed`), and where pulls go next (`seek*`, `offset_for_timestamp`, and the
//! queue reset they share with the consumer's reset requests).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use log::warn;

use super::{LitePullConsumer, LitePullImpl};
use crate::consumer::offset_store::{ReadOffset, ReadOffsetType};
use crate::consumer::process_queue::ProcessQueue;
use crate::error::{Error, Result};
use crate::message::MessageQueue;

impl LitePullConsumer {
    /// Writes the consumed offsets of every queue to the offset store, synchronously: the
    /// application is done with everything `poll` returned.
    pub fn commit_sync(&self) -> Result<()> {
        self.inner.confirm_consumed();
        let deadline = Instant::now() + crate::consumer::offset_store::BROKER_TIMEOUT;
        self.inner.commit_all(Some(deadline));
        Ok(())
    }

    /// The committed offset of `mq` in the store (the broker's in clustering mode).
    pub fn committed(&self, mq: &MessageQueue) -> Result<Option<i64>> {
        match self
            .inner
            .store
            .read_offset(&self.inner.wrap(mq), ReadOffsetType::ReadFromStore)
        {
            ReadOffset::Found(o) => Ok(Some(o)),
            ReadOffset::NotFound => Ok(None),
            ReadOffset::Failed => Err(Error::state(format!(
                "the offset of {mq} could not be read"
            ))),
        }
    }

    /// Next pulls of `mq` start at `offset` (checked against the queue's min and max);
    /// what was cached is discarded.
    pub fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let c = &self.inner;
        let mq = c.wrap(mq);
        let (min, max) = (c.queue_offset(&mq, false)?, c.queue_offset(&mq, true)?);
        if offset < min || offset > max {
            return Err(Error::invalid_argument(format!(
                "seek offset {offset} of {mq} is outside [{min}, {max}]"
            )));
        }
        c.reset_queue(&mq, offset)
    }

    /// Seeks to the first stored message.
    pub fn seek_to_begin(&self, mq: &MessageQueue) -> Result<()> {
        let c = &self.inner;
        let mq = c.wrap(mq);
        let min = c.queue_offset(&mq, false)?;
        c.reset_queue(&mq, min)
    }

    /// Seeks past the last stored message.
    pub fn seek_to_end(&self, mq: &MessageQueue) -> Result<()> {
        let c = &self.inner;
        let mq = c.wrap(mq);
        let max = c.queue_offset(&mq, true)?;
        c.reset_queue(&mq, max)
    }

    /// The offset of the first message stored at or after `timestamp` (Java
    /// `offsetForTimestamp`).
    pub fn offset_for_timestamp(&self, mq: &MessageQueue, timestamp: SystemTime) -> Result<i64> {
        let timestamp = crate::util::millis_since_epoch(timestamp);
        let c = &self.inner;
        let mq = c.wrap(mq);
        let addr = c.master(&mq)?;
        c.instance
            .api()
            .search_offset(&addr, &mq, timestamp, Duration::from_secs(5))
    }

    /// Commits the given offset of each queue (Java `commit(Map<MessageQueue, Long>,
    /// boolean)`): the offset is the next message to consume, as
    /// [`committed`](Self::committed) gives it back. With `persist` the offsets are written
    /// to the broker (or the local file in broadcasting) before this returns, else with the
    /// next periodic persist. Every queue must be held by this consumer and every offset
    /// at least 0, or nothing is committed. An auto-commit or `commit_sync` later commits
    /// the consumed position again, as in Java.
    pub fn commit(&self, offsets: &HashMap<MessageQueue, i64>, persist: bool) -> Result<()> {
        let c = &self.inner;
        c.check_running()?;
        let wrapped: Vec<(MessageQueue, i64)> =
            offsets.iter().map(|(mq, o)| (c.wrap(mq), *o)).collect();
        {
            let mut q = c.queues.lock();
            for (mq, offset) in &wrapped {
                if *offset < 0 {
                    return Err(Error::invalid_argument(format!(
                        "the commit offset {offset} of {} is negative",
                        c.unwrap(mq)
                    )));
                }
                if q.get(mq).is_none_or(|s| s.pq.is_dropped()) {
                    return Err(Error::state(format!(
                        "{} is not assigned to this consumer",
                        c.unwrap(mq)
                    )));
                }
            }
            for (mq, offset) in &wrapped {
                if let Some(s) = q.get_mut(mq) {
                    // Shutdown and the periodic persist write this until a poll confirms more.
                    s.confirmed_offset = *offset;
                }
            }
        }
        if !persist {
            for (mq, offset) in &wrapped {
                c.store.update_offset(mq, *offset, false);
            }
            return Ok(());
        }
        let deadline = Instant::now() + crate::consumer::offset_store::BROKER_TIMEOUT;
        match c.store.commit_until(&wrapped, deadline) {
            Ok(()) => Ok(()),
            Err((failed, e)) => Err(Error::new(
                e.kind(),
                format!(
                    "{failed} of {} offsets were not written: {e}",
                    wrapped.len()
                ),
            )),
        }
    }
}

impl LitePullImpl {
    fn master(&self, mq: &MessageQueue) -> Result<String> {
        self.instance
            .find_broker_address_in_publish(&mq.broker_name)
            .or_else(|| {
                let _ = self.instance.update_topic_route(&mq.topic);
                self.instance
                    .find_broker_address_in_publish(&mq.broker_name)
            })
            .ok_or_else(|| {
                Error::new(
                    crate::ErrorKind::NoRoute,
                    format!("the broker {} does not exist", mq.broker_name),
                )
            })
    }

    fn queue_offset(&self, mq: &MessageQueue, max: bool) -> Result<i64> {
        let addr = self.master(mq)?;
        self.instance
            .api()
            .get_queue_offset(&addr, mq, max, Duration::from_secs(5))
    }

    pub(super) fn reset_queue(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst);
        {
            let mut q = self.queues.lock();
            let Some(s) = q.get_mut(mq) else {
                return Err(Error::state(format!(
                    "{mq} is not assigned to this consumer"
                )));
            };
            s.pq.set_dropped(true);
            s.pq = Arc::new(ProcessQueue::default());
            s.pull_offset = Some(offset);
            s.consumed_offset = offset;
            s.confirmed_offset = offset;
            s.epoch = epoch;
        }
        self.store.update_offset(mq, offset, false);
        self.schedule_pull(mq.clone(), epoch, Duration::ZERO);
        Ok(())
    }

    /// Marks everything `poll` returned so far as processed (the start of a `poll`,
    /// `commit_sync`).
    pub(super) fn confirm_consumed(&self) {
        for s in self.queues.lock().values_mut() {
            s.confirmed_offset = s.consumed_offset;
        }
    }

    /// Commits every queue's confirmed offset (Java `commitAll`): the offset store takes
    /// it, and with `until` writes these offsets through at once, waiting until that
    /// deadline, else a persist of every held queue sends it. Called by `commit_sync`, by
    /// the auto-commit at the start of `poll` (the batches earlier polls returned are
    /// processed then) and by shutdown.
    pub(super) fn commit_all(&self, until: Option<Instant>) {
        *self.last_commit.lock() = Instant::now();
        let (held, offsets): (HashSet<MessageQueue>, Vec<(MessageQueue, i64)>) = {
            let q = self.queues.lock();
            let offsets = q
                .iter()
                .filter(|(_, s)| s.confirmed_offset >= 0)
                .map(|(mq, s)| (mq.clone(), s.confirmed_offset))
                .collect();
            (q.keys().cloned().collect(), offsets)
        };
        match until {
            Some(deadline) => {
                if let Err((failed, e)) = self.store.commit_until(&offsets, deadline) {
                    warn!("{}: {failed} offsets not committed ({e})", self.group);
                }
            }
            None => {
                for (mq, off) in &offsets {
                    self.store.update_offset(mq, *off, false);
                }
                self.store.persist_all(&held);
            }
        }
    }
}
