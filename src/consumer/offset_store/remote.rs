//! Clustering: the group's offsets on the broker (Java `RemoteBrokerOffsetStore`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use log::{debug, warn};
use parking_lot::{Condvar, Mutex};

use super::*;
use crate::client::{MQClientInstance, MASTER_ID};
use crate::error::{Error, ErrorKind, Result};
use crate::message::MessageQueue;

/// Clustering: offsets live on the broker (Java `RemoteBrokerOffsetStore`).
pub(crate) struct RemoteBrokerOffsetStore {
    instance: Arc<MQClientInstance>,
    group: String,
    table: Mutex<HashMap<MessageQueue, i64>>,
    /// Held by each write to the broker from its snapshot of `table` until it is sent (a
    /// commit: until the broker answered). The broker applies offset updates on a pool of
    /// threads, in any order, so two writes in flight at once (job 4's and a commit's)
    /// could leave the older offset last: one write at a time, and a commit waits for
    /// job 4's answers before it sends.
    writes: Mutex<()>,
    /// Job 4's writes still waiting for their answers (sent async, so that a slow broker
    /// does not hold the timer thread).
    in_flight: Arc<InFlight>,
}

/// A count of writes waiting for their answers, and a signal when it falls to 0.
#[derive(Default)]
pub(super) struct InFlight {
    count: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    pub(super) fn busy(&self) -> bool {
        *self.count.lock() > 0
    }

    pub(super) fn add(&self, n: usize) {
        *self.count.lock() += n;
    }

    pub(super) fn done(&self) {
        let mut c = self.count.lock();
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until nothing is in flight or `deadline`; whether nothing is.
    pub(super) fn wait_idle(&self, deadline: Instant) -> bool {
        let mut c = self.count.lock();
        while *c > 0 {
            if self.idle.wait_until(&mut c, deadline).timed_out() {
                return *c == 0;
            }
        }
        true
    }
}

impl RemoteBrokerOffsetStore {
    pub(crate) fn new(instance: Arc<MQClientInstance>, group: &str) -> Self {
        RemoteBrokerOffsetStore {
            instance,
            group: group.to_string(),
            table: Mutex::new(HashMap::new()),
            writes: Mutex::new(()),
            in_flight: Arc::default(),
        }
    }

    /// Where the group's offsets of `mq` are read and written (Java 4.9
    /// `RemoteBrokerOffsetStore`): the master, else, once a fresh route still has no
    /// master, any broker of the group, so a slave keeps the offsets while its master is
    /// down (the master gets them again with the first persist after it is back).
    fn offset_addr(&self, mq: &MessageQueue) -> Result<String> {
        let found = self
            .instance
            .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, true)
            .or_else(|| {
                let _ = self.instance.update_topic_route(&mq.topic);
                self.instance
                    .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, false)
            });
        found.map(|f| f.addr).ok_or_else(|| {
            Error::new(
                ErrorKind::NoRoute,
                format!("the broker {} does not exist", mq.broker_name),
            )
        })
    }

    /// Writes one offset and waits for the broker's answer, after those of job 4; the
    /// caller holds `writes`.
    fn push(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let addr = self.offset_addr(mq)?;
        self.in_flight.wait_idle(Instant::now() + BROKER_TIMEOUT);
        self.instance.api().update_consumer_offset(
            &addr,
            &self.group,
            mq,
            offset,
            false,
            BROKER_TIMEOUT,
        )
    }

    /// What `table` holds for `mqs`.
    fn snapshot(&self, mqs: &HashSet<MessageQueue>) -> Vec<(MessageQueue, i64)> {
        let t = self.table.lock();
        t.iter()
            .filter(|(mq, _)| mqs.contains(*mq))
            .map(|(mq, o)| (mq.clone(), *o))
            .collect()
    }

    /// Writes `offsets` to their brokers all at once and waits for the answers until
    /// `deadline`; the caller holds `writes`, and job 4's writes were answered.
    fn write_until(&self, offsets: Vec<(MessageQueue, i64)>, deadline: Instant) -> Written {
        let (mut failed, mut first) = (0, None);
        let commits = self.addresses(offsets, deadline, &mut failed, &mut first);
        let results =
            self.instance
                .api()
                .update_consumer_offsets_until(&self.group, &commits, deadline);
        for (r, (_, mq, offset)) in results.into_iter().zip(&commits) {
            match r {
                Ok(()) => debug!("{}: committed {offset} for {mq}", self.group),
                Err(e) => {
                    warn!("{}: committing {offset} for {mq}: {e}", self.group);
                    failed += 1;
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err((failed, e)),
            None => Ok(()),
        }
    }

    /// The broker address of each offset of `snapshot`; those without one are counted in
    /// `failed`, the first one's error kept in `first`.
    fn addresses(
        &self,
        snapshot: Vec<(MessageQueue, i64)>,
        deadline: Instant,
        failed: &mut usize,
        first: &mut Option<Error>,
    ) -> Vec<(String, MessageQueue, i64)> {
        let mut commits = Vec::with_capacity(snapshot.len());
        let mut refreshed: HashSet<String> = HashSet::new();
        for (mq, offset) in snapshot {
            let cached = |mq: &MessageQueue| {
                self.instance
                    .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, false)
                    .map(|f| f.addr)
            };
            let mut addr = cached(&mq);
            // A queue assigned a moment ago can be committed before anything pulled it, so
            // before its route is here: one name-server round trip per topic, while the
            // deadline has not passed.
            if addr.is_none() && Instant::now() < deadline && refreshed.insert(mq.topic.to_string())
            {
                let _ = self.instance.update_topic_route(&mq.topic);
                addr = cached(&mq);
            }
            match addr {
                Some(addr) => commits.push((addr, mq, offset)),
                None => {
                    warn!(
                        "{}: no address of {} to commit {offset} for {mq}",
                        self.group, mq.broker_name
                    );
                    *failed += 1;
                    first.get_or_insert_with(|| {
                        Error::new(
                            ErrorKind::NoRoute,
                            format!("no address of the broker {}", mq.broker_name),
                        )
                    });
                }
            }
        }
        commits
    }
}

impl OffsetStore for RemoteBrokerOffsetStore {
    fn load(&self) -> Result<()> {
        Ok(())
    }

    fn persist_until(&self, mqs: &HashSet<MessageQueue>, deadline: Instant) -> Written {
        let _writing = self.writes.lock();
        // Job 4's older offsets land before these.
        self.in_flight.wait_idle(deadline);
        let snapshot = self.snapshot(mqs);
        self.write_until(snapshot, deadline)
    }

    /// The table takes the offsets under `writes`, and exactly these are sent: nothing
    /// that changes the table meanwhile (a queue dropped and taken again resets its
    /// entry) can leave one out of a commit that then reports success.
    fn commit_until(&self, offsets: &[(MessageQueue, i64)], deadline: Instant) -> Written {
        let _writing = self.writes.lock();
        {
            let mut t = self.table.lock();
            for (mq, offset) in offsets {
                t.insert(mq.clone(), *offset);
            }
        }
        self.in_flight.wait_idle(deadline);
        self.write_until(offsets.to_vec(), deadline)
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        update_in(&self.table, mq, offset, increase_only);
    }

    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset {
        if let Some(r) = read_memory(&self.table, mq, ty) {
            return r;
        }
        let addr = match self.offset_addr(mq) {
            Ok(a) => a,
            Err(e) => {
                warn!("reading the offset of {mq}: {e}");
                return ReadOffset::Failed;
            }
        };
        match self
            .instance
            .api()
            .query_consumer_offset(&addr, &self.group, mq, BROKER_TIMEOUT)
        {
            Ok(Some(o)) => {
                keep_read(&self.table, mq, o);
                ReadOffset::Found(o)
            }
            // Only QUERY_NOT_FOUND means "no offset" (Java 5.x `OffsetNotFoundException`,
            // -1). Any other answer, a timeout or a lost connection is a failure (-2): the
            // queue is retried next round. Taking a broker error for "no offset", as 4.9.x
            // does, would start the queue at its end and skip the backlog.
            Ok(None) => ReadOffset::NotFound,
            Err(e) => {
                warn!("reading the offset of {mq} for {}: {e}", self.group);
                ReadOffset::Failed
            }
        }
    }

    /// Writes the offsets of `mqs`. Java's `persistAll` also forgets the offsets of the
    /// queues not in `mqs`; here a queue's offset goes when its consumer drops the queue
    /// (`remove_offset`), because `mqs` is read before this takes `writes`, so a queue
    /// taken meanwhile would lose the offset just committed for it.
    ///
    /// Java sends these oneway. Here the broker answers each, on the callback pool, so
    /// that a commit written through can wait for them (see `writes`); a round whose
    /// predecessor is still unanswered, or that meets a commit being written, is skipped:
    /// the next round, or the commit, writes the offsets.
    fn persist_all(&self, mqs: &HashSet<MessageQueue>) {
        if mqs.is_empty() {
            return;
        }
        let Some(_writing) = self.writes.try_lock() else {
            debug!(
                "{}: a commit is being written; persisting next round",
                self.group
            );
            return;
        };
        if self.in_flight.busy() {
            debug!(
                "{}: the last persist is unanswered; persisting next round",
                self.group
            );
            return;
        }
        let snapshot = self.snapshot(mqs);
        let (mut failed, mut first) = (0, None);
        let deadline = Instant::now() + BROKER_TIMEOUT;
        let commits = self.addresses(snapshot, deadline, &mut failed, &mut first);
        self.in_flight.add(commits.len());
        for (addr, mq, offset) in commits {
            let in_flight = self.in_flight.clone();
            let (group, queue) = (self.group.clone(), mq.clone());
            let sent = self.instance.api().update_consumer_offset_async(
                &addr,
                &self.group,
                &mq,
                offset,
                BROKER_TIMEOUT,
                move |r| {
                    if let Err(e) = r {
                        warn!("{group}: persisting the offset {offset} of {queue}: {e}");
                    }
                    in_flight.done();
                },
            );
            if let Err(e) = sent {
                warn!(
                    "{}: persisting the offset {offset} of {mq}: {e}",
                    self.group
                );
                self.in_flight.done();
            }
        }
        if let Some(e) = first {
            warn!("{}: {failed} offsets were not persisted ({e})", self.group);
        }
    }

    fn persist(&self, mq: &MessageQueue) {
        let _writing = self.writes.lock();
        let offset = self.table.lock().get(mq).copied();
        if let Some(offset) = offset {
            if let Err(e) = self.push(mq, offset) {
                warn!("persisting the offset {offset} of {mq}: {e}");
            }
        }
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }

    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let _writing = self.writes.lock();
        self.push(mq, offset)
    }

    fn offsets(&self) -> HashMap<MessageQueue, i64> {
        self.table.lock().clone()
    }
}
