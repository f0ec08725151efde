//! Auto-batching (Java 5 `ProduceAccumulator`, `DefaultMQProducer.setAutoBatch`): single
//! sends of one topic — and of one queue, when the caller chose it — wait together for a
//! few milliseconds and go to the broker as one `SEND_BATCH_MESSAGE`, whose answer is split
//! back into each caller's own `SendResult` (its message id, broker id and queue offset).
//!
//! Sync batches need no thread of their own. A sync caller puts its message into the open
//! batch of its key and waits on its own channel until the batch's deadline; the caller
//! whose message fills the batch, or the first one to wake at the deadline, takes the batch
//! out of the table and sends it on its own thread with a sync send's retries, then hands
//! every waiter its part of the answer. Async batches have no caller waiting: the
//! accumulator's timer thread sends them at their deadline (or the caller that fills one
//! does), as an async send whose completion calls each caller's callback. Shutdown takes
//! every open batch and sends it, bounded by the shutdown deadline, before the producer
//! stops; so a caller is answered `Ok` only for a message the broker stored, and every
//! caller is answered.
//!
//! Invariant: a batch is taken out of the table exactly once (by the caller that fills it,
//! a waiter or timer at its deadline, or shutdown), and whoever takes it answers each of
//! its callers exactly once.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::warn;
use parking_lot::Mutex;

use super::{Mode, ProducerImpl, SendCallback};
use crate::client::{namespace, validators::is_retry_topic};
use crate::error::{Error, Result};
use crate::message::{property, Message, MessageQueue};
use crate::producer::{ProducerOptions, SendResult};
use crate::scheduler::ScheduledExecutor;
use crate::util::ShortText;

/// What messages share a batch (Java `AggregateKey`, without the tag: each message of a
/// batch keeps its own tags).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    topic: String,
    queue: Option<MessageQueue>,
    wait_store_msg_ok: bool,
    /// Sync and async callers are batched apart: a sync batch is sent by one of its
    /// callers, an async one by the timer.
    sync: bool,
}

/// Messages waiting to go together, and whom to answer.
pub(super) struct Batch {
    id: u64,
    deadline: Instant,
    msgs: Vec<Message>,
    callers: Vec<SendCallback>,
    bytes: usize,
    /// The send timeout of the caller that opened the batch.
    timeout: Duration,
}

/// Where a message went.
enum Joined {
    /// Not batched (the accumulator is full or closed): the caller sends it alone.
    Refused(SendCallback),
    /// In batch `id`, to be sent by `deadline`; `opened` when this message opened it, and
    /// `full`, a batch the caller must send now (the one this message filled, or the one
    /// it did not fit in).
    Waiting {
        id: u64,
        deadline: Instant,
        opened: bool,
        full: Option<Batch>,
    },
}

struct State {
    open: HashMap<Key, Batch>,
    /// Bytes of bodies in batches not answered yet.
    held: usize,
    next_id: u64,
    closed: bool,
}

/// The open batches of one producer.
///
/// `state` and `timer` are each taken alone; neither is held while a batch is sent.
pub(super) struct Accumulator {
    max_delay: Duration,
    max_bytes: usize,
    total_max_bytes: usize,
    compress_over: usize,
    state: Mutex<State>,
    /// Sends async batches at their deadline; started with the producer.
    timer: Mutex<Option<ScheduledExecutor>>,
}

impl Accumulator {
    pub(super) fn new(options: &ProducerOptions) -> Self {
        Accumulator {
            max_delay: options.batch_max_delay,
            max_bytes: options.batch_max_bytes,
            total_max_bytes: options.total_batch_max_bytes,
            compress_over: options.compress_over,
            state: Mutex::new(State {
                open: HashMap::new(),
                held: 0,
                next_id: 0,
                closed: false,
            }),
            timer: Mutex::new(None),
        }
    }

    /// Starts the timer of async batches.
    pub(super) fn start(&self, group: &str) -> Result<()> {
        let timer = ScheduledExecutor::new(&format!("rmq-autobatch-{group}"), 1)?;
        *self.timer.lock() = Some(timer);
        Ok(())
    }

    /// Whether `msg` may wait in a batch (Java `canBatch`): not when it has a delay
    /// level or a timer, goes to a retry topic, is bound to a producer group
    /// (transactional), is a reply, or is big enough to be sent alone or compressed.
    fn batchable(&self, msg: &Message) -> bool {
        let len = msg.body().len();
        len < self.max_bytes
            && len < self.compress_over
            && msg.delay_time_level().is_none()
            && msg.property(property::TIMER_DELIVER_MS).is_none()
            && msg.property(property::TIMER_DELAY_SEC).is_none()
            && msg.property(property::TIMER_DELAY_MS).is_none()
            && msg.property(property::PGROUP).is_none()
            && msg.property(property::TRAN_MSG).is_none()
            && !crate::producer::request::is_reply(msg)
            && !is_retry_topic(msg.topic())
    }

    /// Puts `msg` into the open batch of `key` (Java `MessageAccumulation.add`).
    fn join(&self, key: &Key, msg: Message, timeout: Duration, callback: SendCallback) -> Joined {
        let len = msg.body().len();
        let mut s = self.state.lock();
        // Java sends a message alone when the accumulator holds its maximum.
        if s.closed || s.held.saturating_add(len) > self.total_max_bytes {
            return Joined::Refused(callback);
        }
        s.held += len;
        // A message that does not fit sends the open batch on and opens the next one, so a
        // batch's bodies never pass `max_bytes`.
        let mut full = match s.open.get(key) {
            Some(b) if b.bytes + len > self.max_bytes => s.open.remove(key),
            _ => None,
        };
        let opened = !s.open.contains_key(key);
        if opened {
            let id = s.next_id;
            s.next_id += 1;
            s.open.insert(
                key.clone(),
                Batch {
                    id,
                    deadline: Instant::now() + self.max_delay,
                    msgs: Vec::new(),
                    callers: Vec::new(),
                    bytes: 0,
                    timeout,
                },
            );
        }
        let Some(batch) = s.open.get_mut(key) else {
            // Inserted just above, under the same lock.
            return Joined::Refused(callback);
        };
        batch.msgs.push(msg);
        batch.callers.push(callback);
        batch.bytes += len;
        let (id, deadline) = (batch.id, batch.deadline);
        if batch.bytes >= self.max_bytes && full.is_none() {
            full = s.open.remove(key);
        }
        Joined::Waiting {
            id,
            deadline,
            opened,
            full,
        }
    }

    /// Takes batch `id` of `key` if it is still open.
    fn take(&self, key: &Key, id: u64) -> Option<Batch> {
        let mut s = self.state.lock();
        match s.open.get(key) {
            Some(b) if b.id == id => s.open.remove(key),
            _ => None,
        }
    }

    /// The bytes of an answered batch no longer count against the total.
    fn release(&self, bytes: usize) {
        let mut s = self.state.lock();
        s.held = s.held.saturating_sub(bytes);
    }

    /// Refuses new messages, stops the timer and returns the batches still open.
    fn close(&self, deadline: Instant) -> Vec<(Key, Batch)> {
        let open = {
            let mut s = self.state.lock();
            s.closed = true;
            std::mem::take(&mut s.open)
        };
        let timer = self.timer.lock().take();
        if let Some(t) = timer {
            t.shutdown_until(deadline);
        }
        open.into_iter().collect()
    }

    /// Runs `job` at `deadline` on the timer; false when the timer does not run.
    fn schedule(&self, deadline: Instant, job: impl FnOnce() + Send + 'static) -> bool {
        let guard = self.timer.lock();
        let Some(timer) = guard.as_ref() else {
            return false;
        };
        let delay = deadline.saturating_duration_since(Instant::now());
        timer
            .schedule_once("auto-batch", delay, move || {
                job();
                Ok(())
            })
            .is_ok()
    }
}

impl Key {
    fn new(msg: &Message, queue: Option<&MessageQueue>, sync: bool) -> Self {
        Key {
            topic: msg.topic().to_string(),
            queue: queue.cloned(),
            wait_store_msg_ok: msg.wait_store_msg_ok(),
            sync,
        }
    }
}

/// The part of a batch's answer that is message `i`'s of `n` (Java
/// `splitSendResults`): the broker answers the batch's ids joined by `,` and the offset
/// of its first message; a topic with a batch consume queue answers one id for all.
fn split(r: &SendResult, n: usize) -> Result<Vec<SendResult>> {
    if n > 1 && !r.offset_msg_id.contains(',') {
        return Ok(vec![r.clone(); n]);
    }
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    let offset_ids: Vec<&str> = r.offset_msg_id.split(',').collect();
    if ids.len() != n || offset_ids.len() != n {
        return Err(Error::decode(format!(
            "the broker answered {} ids for a batch of {n} messages",
            offset_ids.len()
        )));
    }
    Ok(ids
        .iter()
        .zip(&offset_ids)
        .enumerate()
        .map(|(i, (id, offset_id))| SendResult {
            msg_id: ShortText::new(id),
            offset_msg_id: ShortText::new(offset_id),
            queue_offset: r.queue_offset.saturating_add(i as i64),
            ..r.clone()
        })
        .collect())
}

/// Answers each caller of a batch once: its part of `r`, or a copy of the error.
fn answer(callers: Vec<SendCallback>, r: Result<SendResult>) {
    let n = callers.len();
    let parts = r.and_then(|r| split(&r, n));
    let mut each: Box<dyn FnMut() -> Result<SendResult>> = match parts {
        Ok(parts) => {
            let mut parts = parts.into_iter();
            Box::new(move || {
                parts
                    .next()
                    .ok_or_else(|| Error::decode("the batch's answer has too few parts"))
            })
        }
        Err(e) => Box::new(move || Err(e.copy_for_another())),
    };
    for callback in callers {
        let r = each();
        // One caller's panicking callback must not cost the others their answer.
        if catch_unwind(AssertUnwindSafe(|| callback(r))).is_err() {
            warn!("an auto-batched send's callback panicked");
        }
    }
}

impl ProducerImpl {
    /// A sync send through the accumulator, to `queue` when the caller chose one; `None`
    /// when the message goes alone.
    pub(super) fn send_auto_batched(
        &self,
        msg: &Message,
        queue: Option<&MessageQueue>,
        timeout: Duration,
    ) -> Option<Result<SendResult>> {
        let acc = self.batcher.as_ref()?;
        if !acc.batchable(msg) {
            return None;
        }
        let call_deadline = Instant::now() + timeout;
        // A bad message or a topic without a route fails its own caller, not a batch.
        if let Err(e) = self.check_route(msg) {
            return Some(Err(e));
        }
        let key = Key::new(msg, queue, true);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let callback: SendCallback = Box::new(move |r| {
            let _ = tx.send(r);
        });
        let (id, deadline) = match acc.join(&key, msg.clone(), timeout, callback) {
            Joined::Refused(_) => return None,
            Joined::Waiting {
                id, deadline, full, ..
            } => {
                if let Some(batch) = full {
                    self.send_batch_now(acc, &key, batch, None);
                }
                (id, deadline)
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => return Some(r),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if let Some(batch) = acc.take(&key, id) {
                    self.send_batch_now(acc, &key, batch, None);
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {}
        }
        // Whoever took the batch answers every caller, within the batch's send timeout;
        // this caller waits no longer than its own.
        Some(match rx.recv_deadline(call_deadline) {
            Ok(r) => r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                Err(Error::timeout(crate::TimeoutPhase::Response, timeout)
                    .context("auto-batched send"))
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(Error::state(
                "the batch of this message was dropped unanswered",
            )),
        })
    }

    /// An async send through the accumulator: `Ok(Ok)` queued (the callback runs once),
    /// `Ok(Err)` refused (the callback dropped unrun), `Err(callback)` not batched: the
    /// caller sends it alone.
    pub(super) fn send_async_auto_batched(
        self: &Arc<Self>,
        msg: &Message,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        callback: SendCallback,
    ) -> std::result::Result<Result<()>, SendCallback> {
        let Some(acc) = self.batcher.as_ref() else {
            return Err(callback);
        };
        if !acc.batchable(msg) {
            return Err(callback);
        }
        if let Err(e) = self.check_route(msg) {
            return Ok(Err(e));
        }
        let key = Key::new(msg, queue, false);
        match acc.join(&key, msg.clone(), timeout, callback) {
            Joined::Refused(callback) => Err(callback),
            Joined::Waiting {
                id,
                deadline,
                opened,
                full,
            } => {
                if let Some(batch) = full {
                    self.send_batch_now(acc, &key, batch, Some(self));
                }
                if opened {
                    let me: Weak<ProducerImpl> = Arc::downgrade(self);
                    let k = key.clone();
                    let scheduled = acc.schedule(deadline, move || {
                        let Some(me) = me.upgrade() else { return };
                        if let Some(acc) = me.batcher.as_ref() {
                            if let Some(batch) = acc.take(&k, id) {
                                me.send_batch_now(acc, &k, batch, Some(&me));
                            }
                        }
                    });
                    // No timer (shutting down): the batch goes now, unless shutdown took it.
                    if !scheduled {
                        if let Some(batch) = acc.take(&key, id) {
                            self.send_batch_now(acc, &key, batch, Some(self));
                        }
                    }
                }
                Ok(Ok(()))
            }
        }
    }

    /// The checks of a send that the caller's own send would fail: the message itself and
    /// the route of its topic (looked up now, so that the timer never waits for the name
    /// server).
    fn check_route(&self, msg: &Message) -> Result<()> {
        self.check_message(msg)?;
        let instance = self.instance()?;
        let topic = namespace::wrap(self.namespace.as_deref(), msg.topic());
        self.find_publish_info(&instance, &topic).map(|_| ())
    }

    /// Sends a batch taken out of the accumulator and answers its callers: on this thread
    /// with a sync send's retries, or, with `this` (async callers), as an async send.
    fn send_batch_now(
        &self,
        acc: &Accumulator,
        key: &Key,
        batch: Batch,
        this: Option<&Arc<ProducerImpl>>,
    ) {
        self.send_batch_within(acc, key, batch, this, None)
    }

    /// [`send_batch_now`](Self::send_batch_now) with the send timeout cut to `deadline`.
    fn send_batch_within(
        &self,
        acc: &Accumulator,
        key: &Key,
        batch: Batch,
        this: Option<&Arc<ProducerImpl>>,
        deadline: Option<Instant>,
    ) {
        let Batch {
            msgs,
            callers,
            bytes,
            timeout,
            ..
        } = batch;
        let timeout = match deadline {
            Some(d) => timeout.min(d.saturating_duration_since(Instant::now())),
            None => timeout,
        };
        if timeout.is_zero() {
            acc.release(bytes);
            return answer(
                callers,
                Err(Error::state(
                    "the producer shut down before the batch could be sent",
                )),
            );
        }
        let p = match self.prepare_batch(&msgs) {
            Ok(p) => p,
            Err(e) => {
                acc.release(bytes);
                return answer(callers, Err(e));
            }
        };
        if let Some(this) = this {
            let weak = Arc::downgrade(this);
            let done: SendCallback = Box::new(move |r| {
                if let Some(me) = weak.upgrade() {
                    if let Some(acc) = me.batcher.as_ref() {
                        acc.release(bytes);
                    }
                }
                answer(callers, r);
            });
            let done = super::async_send::Done::plain(done);
            let queue = key.queue.as_ref();
            if let Err(unqueued) = this.queue_prepared(p, queue, timeout, done, Instant::now()) {
                let super::async_send::Unqueued { error, done, .. } = *unqueued;
                done.complete(Err(error));
            }
            return;
        }
        let begin = Instant::now();
        let r = match &key.queue {
            None => self.send_default(&p, Mode::Sync, timeout, begin),
            Some(mq) => self.send_prepared_to_queue(&p, mq, Mode::Sync, timeout, begin),
        }
        .and_then(|r| r.ok_or_else(|| Error::state("sync send returned no result")));
        acc.release(bytes);
        answer(callers, r);
    }

    /// Shutdown's part: the batches still open are sent, sync ones on this thread, and
    /// their callers answered, all by `deadline`.
    pub(super) fn flush_auto_batches(&self, deadline: Instant) {
        let Some(acc) = self.batcher.as_ref() else {
            return;
        };
        for (key, batch) in acc.close(deadline) {
            self.send_batch_within(acc, &key, batch, None, Some(deadline));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::producer::SendStatus;

    fn result(msg_id: &str, offset_msg_id: &str, offset: i64) -> SendResult {
        SendResult {
            send_status: SendStatus::Ok,
            msg_id: msg_id.into(),
            offset_msg_id: offset_msg_id.into(),
            message_queue: MessageQueue::new("T", "b", 1),
            queue_offset: offset,
            transaction_id: None,
            region_id: "DefaultRegion".into(),
            trace_on: true,
        }
    }

    #[test]
    fn auto_batch_answer_splits_ids_and_offsets_per_message() {
        let parts = split(&result("a,b,c", "x,y,z", 7), 3).unwrap();
        let got: Vec<_> = parts
            .iter()
            .map(|r| (r.msg_id(), r.offset_msg_id(), r.queue_offset()))
            .collect();
        assert_eq!(got, [("a", "x", 7), ("b", "y", 8), ("c", "z", 9)]);
        // A batch consume queue answers one id: every caller gets it.
        let same = split(&result("a,b", "x", 3), 2).unwrap();
        assert!(same
            .iter()
            .all(|r| r.offset_msg_id() == "x" && r.queue_offset() == 3));
        // Ids that do not match the batch are the broker's fault, not a panic.
        let e = split(&result("a,b,c", "x,y", 0), 3).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Decode);
    }

    #[test]
    fn auto_batch_answers_every_caller_once_even_when_one_panics() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut callers: Vec<SendCallback> = Vec::new();
        for i in 0..3 {
            let tx = tx.clone();
            callers.push(Box::new(move |r: Result<SendResult>| {
                if i == 1 {
                    panic!("caller 1");
                }
                let _ = tx.send((i, r.map(|r| r.queue_offset)));
            }));
        }
        answer(callers, Ok(result("a,b,c", "x,y,z", 10)));
        let got: Vec<_> = rx.try_iter().map(|(i, r)| (i, r.unwrap())).collect();
        assert_eq!(got, [(0, 10), (2, 12)]);

        let (tx, rx) = crossbeam_channel::unbounded();
        let callers: Vec<SendCallback> = (0..2)
            .map(|_| {
                let tx = tx.clone();
                Box::new(move |r: Result<SendResult>| {
                    let _ = tx.send(r.map_err(|e| e.kind()).map(|_| ()));
                }) as SendCallback
            })
            .collect();
        answer(callers, Err(Error::new(ErrorKind::Response, "busy")));
        let got: Vec<_> = rx.try_iter().collect();
        assert_eq!(got, [Err(ErrorKind::Response), Err(ErrorKind::Response)]);
    }

    #[test]
    fn auto_batch_leaves_out_what_java_sends_alone() {
        let acc = Accumulator::new(&ProducerOptions::default());
        let plain = Message::new("T", "x");
        assert!(acc.batchable(&plain));
        let with = |k: &str, v: &str| {
            let mut m = plain.clone();
            m.put_property(k, v);
            m
        };
        let mut delayed = plain.clone();
        delayed.set_delay_time_level(3);
        let alone = [
            delayed,
            plain.clone().with_delivery_delay(Duration::from_secs(5)),
            plain
                .clone()
                .with_delivery_delay(Duration::from_millis(1500)),
            plain
                .clone()
                .with_deliver_time(std::time::SystemTime::now() + Duration::from_secs(9)),
            with(property::TRAN_MSG, "true"),
            with(property::PGROUP, "g"),
            with(property::MSG_TYPE, "reply"),
            Message::new("%RETRY%g", "x"),
            // Would be compressed (4096), or fills a batch (32 KiB) alone.
            Message::new("T", vec![0u8; 4096]),
        ];
        for m in &alone {
            assert!(!acc.batchable(m), "{m:?}");
        }
    }

    #[test]
    fn auto_batch_sends_a_batch_on_before_it_passes_max_bytes() {
        let options = ProducerOptions {
            batch_max_bytes: 10,
            total_batch_max_bytes: 25,
            ..ProducerOptions::default()
        };
        let acc = Accumulator::new(&options);
        let m = |n: usize| Message::new("T", vec![b'x'; n]);
        let key = Key::new(&m(1), None, true);
        let cb = || Box::new(|_| {}) as SendCallback;
        let d = Duration::from_secs(1);
        // 4 + 4 bytes stay open; 4 more would pass 10: the first batch comes back full.
        for _ in 0..2 {
            assert!(matches!(
                acc.join(&key, m(4), d, cb()),
                Joined::Waiting { full: None, .. }
            ));
        }
        let Joined::Waiting {
            full: Some(b),
            opened: true,
            ..
        } = acc.join(&key, m(4), d, cb())
        else {
            panic!("the first batch should be full");
        };
        assert_eq!((b.msgs.len(), b.bytes), (2, 8));
        // 4 + 6 reach 10: full at once; 6 more open the next (24 of 25 bytes held) ...
        assert!(matches!(
            acc.join(&key, m(6), d, cb()),
            Joined::Waiting { full: Some(_), .. }
        ));
        assert!(matches!(
            acc.join(&key, m(6), d, cb()),
            Joined::Waiting {
                full: None,
                opened: true,
                ..
            }
        ));
        // ... which leaves no room for 2 more: sent alone.
        assert!(matches!(acc.join(&key, m(2), d, cb()), Joined::Refused(_)));
        acc.release(b.bytes);
        assert!(matches!(
            acc.join(&key, m(2), d, cb()),
            Joined::Waiting { .. }
        ));
        // Closed, it refuses and hands back what is open.
        assert_eq!(acc.close(Instant::now()).len(), 1);
        assert!(matches!(acc.join(&key, m(1), d, cb()), Joined::Refused(_)));
    }
}
