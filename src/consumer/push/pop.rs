//! The push consumer's POP path (Java 5.3 `DefaultMQPushConsumerImpl.popMessage`,
//! `ConsumeMessagePopConcurrentlyService`): for the queues a broker assigned in POP mode.
//!
//! Flow: a `PopRequest` per assigned queue goes to the instance's pull thread → an async
//! long-polling POP_MESSAGE → the callback hands the messages, each with its receipt, to
//! the consume pool in batches → the listener runs → ACK_MESSAGE for what it consumed,
//! CHANGE_MESSAGE_INVISIBLETIME (by Java's delay table) for what it did not. There are no
//! offsets on this side: the broker keeps the group's progress, and a message neither
//! acked nor handed back comes to the group again after its invisible time.
//!
//! Unlike Java, which lets a slow listener's messages go to another consumer once their
//! invisible time is over, a batch's receipts are renewed (CHANGE_MESSAGE_INVISIBLETIME to
//! `pop_invisible_time` again) halfway through that time while the batch waits for or runs
//! in its listener. A renewal sends its requests from the client timer without waiting:
//! the answers replace the receipts on the callback pool, and the ack after the listener
//! waits for the answers of a renewal in flight, so that it acks with the newest receipts.
//!
//! With `pop_batch_ack`, what the listener batches of one pop consumed is acked with one
//! BATCH_ACK_MESSAGE per broker (Java `batchAckMessageAsync`) when the last of them
//! returns, or when the first receipts waiting for it reach half their invisible time; a
//! broker that refuses the request (before 5.1.1) gets single acks from then on.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Condvar, Mutex};

use super::{PushConsumerImpl, BROKER_FLOW_CONTROL_DELAY, BROKER_SUSPEND_MAX_TIME};
use super::{FLOW_CONTROL_DELAY, SUSPENDED_DELAY};
use crate::client::{PopResult, PopStatus, PullTask, MASTER_ID};
use crate::consumer::process_queue::PopProcessQueue;
use crate::consumer::subscription::tag_matches;
use crate::consumer::{ConsumeStatus, Listener, ReconsumeDelay};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::heartbeat::SubscriptionData;
use crate::protocol::pop::{
    AckMessageRequestHeader, BatchAckMessageRequestBody, ChangeInvisibleTimeRequestHeader,
    ExtraInfo, PopMessageRequestHeader,
};
use crate::protocol::ResponseCode;

/// Java `popDelayLevel`: seconds until a message whose listener failed is handed out
/// again, by delay level (the attempt number unless the listener chose one).
const POP_DELAY_LEVEL: [i64; 16] = [
    10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
];
/// Java `ASYNC_TIMEOUT` of acks and invisible-time changes.
const ACK_TIMEOUT: Duration = Duration::from_millis(3000);
/// The least wait before a batch's next renewal.
const RENEW_RETRY: Duration = Duration::from_secs(1);
/// A long poll's response may come this long after the poll time (Java adds 10 s).
const POP_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// One POP-mode queue's pop loop, passed between the pull thread and callbacks (Java
/// `PopRequest`).
pub(crate) struct PopRequest {
    pub(super) consumer: Weak<PushConsumerImpl>,
    pub(super) mq: MessageQueue,
    pub(super) pq: Arc<PopProcessQueue>,
}

impl PullTask for PopRequest {
    fn pull(self: Box<Self>) {
        if let Some(consumer) = self.consumer.upgrade() {
            consumer.pop_message(*self);
        }
    }
}

/// Popped messages on their way to and through one listener call.
struct PopBatch {
    state: Mutex<BatchState>,
    /// Signalled when the last answer of a renewal has arrived.
    answered: Condvar,
    /// With `pop_batch_ack`: where the acks of the pop this batch came from gather.
    acks: Option<Arc<PopAcks>>,
}

struct BatchState {
    /// The messages' receipts, in order; a renewal's answers replace them.
    receipts: Vec<ExtraInfo>,
    /// Renewal requests without an answer yet.
    renewing: usize,
    /// Set when the listener has returned (or the batch was given up): no more renewals.
    done: bool,
}

/// The acks of one pop's listener batches, sent together (`pop_batch_ack`).
struct PopAcks {
    state: Mutex<PopAcksState>,
}

struct PopAcksState {
    /// Listener batches of the pop that have not finished.
    left: usize,
    /// Receipts to ack, waiting for the other batches.
    pending: Vec<ExtraInfo>,
    /// A flush of `pending` is scheduled on the client timer.
    flush_scheduled: bool,
}

impl PopBatch {
    fn is_done(&self) -> bool {
        self.state.lock().done
    }
}

/// `d` in ms (the options checked it is at most 300 s).
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Java `changePopInvisibleTime`'s delay: the listener's level, else the attempt number,
/// into `POP_DELAY_LEVEL` (capped at its last entry).
fn retry_delay(delay: ReconsumeDelay, reconsume_times: i32) -> Duration {
    let level = match delay {
        ReconsumeDelay::Level(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => usize::try_from(reconsume_times).unwrap_or(0),
    };
    let secs = POP_DELAY_LEVEL
        .get(level)
        .copied()
        .unwrap_or(POP_DELAY_LEVEL[POP_DELAY_LEVEL.len() - 1]);
    Duration::from_secs(secs.unsigned_abs())
}

/// Java `checkNeedAckOrDelay`, for a message past its retries: `None` acks it (it has
/// been around for twice the longest delay), else the delay of the first level not yet
/// reached by its age.
fn exhausted_delay(age: Duration) -> Option<Duration> {
    let last = POP_DELAY_LEVEL[POP_DELAY_LEVEL.len() - 1].unsigned_abs();
    if age > Duration::from_secs(last * 2) {
        return None;
    }
    let level = POP_DELAY_LEVEL
        .iter()
        .position(|&s| age < Duration::from_secs(s.unsigned_abs()))
        .unwrap_or(POP_DELAY_LEVEL.len() - 1);
    Some(Duration::from_secs(POP_DELAY_LEVEL[level].unsigned_abs()))
}

impl PushConsumerImpl {
    fn pop_later(&self, req: PopRequest, delay: Duration) {
        self.instance.execute_pull_request_later(req, delay);
    }

    /// Java `popMessage`: flow control, then an async long-polling pop.
    pub(crate) fn pop_message(self: &Arc<Self>, req: PopRequest) {
        let pq = req.pq.clone();
        if pq.is_dropped() {
            return;
        }
        pq.touch_pop();
        if !self.is_running() {
            return;
        }
        if self.is_paused() {
            return self.pop_later(req, SUSPENDED_DELAY);
        }
        let o = &self.options;
        if pq.wait_ack_count() > i64::try_from(o.pop_threshold_for_queue).unwrap_or(i64::MAX) {
            return self.pop_later(req, FLOW_CONTROL_DELAY);
        }
        let Some(sub) = self
            .rebalance
            .subscriptions
            .read()
            .get(&*req.mq.topic)
            .cloned()
        else {
            warn!("{}: no subscription for {}; pop later", self.group, req.mq);
            return self.pop_later(req, o.pull_time_delay_when_exception);
        };
        let Some(addr) = self.broker_addr(&req.mq.broker_name, &req.mq.topic) else {
            return self.pop_later(req, o.pull_time_delay_when_exception);
        };
        let header = PopMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: req.mq.topic.to_string(),
            queue_id: req.mq.queue_id(),
            max_msg_nums: i32::try_from(o.pop_batch_nums).unwrap_or(32),
            invisible_time: ms(o.pop_invisible_time),
            poll_time: ms(BROKER_SUSPEND_MAX_TIME),
            born_time: crate::util::now_millis(),
            // Java `getConsumeInitMode`: MIN (0) from the first offset, else MAX (1).
            init_mode: match o.consume_from_where {
                crate::consumer::ConsumeFromWhere::FirstOffset => 0,
                _ => 1,
            },
            exp_type: Some(sub.expression_type.clone()),
            exp: Some(sub.sub_string.clone()),
            order: Some(false),
            attempt_id: None,
            broker_name: Some(req.mq.broker_name.to_string()),
        };
        let me = self.clone();
        let sent_at = Instant::now();
        let broker = req.mq.broker_name.clone();
        let sent = self.instance.api().pop_message_async(
            &addr,
            &broker,
            &header,
            BROKER_SUSPEND_MAX_TIME + POP_TIMEOUT_MARGIN,
            move |r| me.on_pop_result(req, &sub, sent_at, r),
        );
        if let Err((e, callback)) = sent {
            // Not sent: taken as a failed pop, which schedules the request again.
            callback(Err(e));
        }
    }

    /// The master of `broker`, refreshing `topic`'s route once if unknown.
    fn broker_addr(&self, broker: &str, topic: &str) -> Option<String> {
        if let Some(r) = self
            .instance
            .find_broker_address_in_subscribe(broker, MASTER_ID, true)
        {
            return Some(r.addr);
        }
        let _ = self.instance.update_topic_route(topic);
        let found = self
            .instance
            .find_broker_address_in_subscribe(broker, MASTER_ID, true)
            .map(|r| r.addr);
        if found.is_none() {
            warn!(
                "{}: the address of broker {broker} is not known",
                self.group
            );
        }
        found
    }

    fn on_pop_result(
        self: Arc<Self>,
        req: PopRequest,
        sub: &SubscriptionData,
        sent_at: Instant,
        result: Result<PopResult>,
    ) {
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                if req.pq.is_dropped() {
                    return;
                }
                let delay = if e.response_code() == Some(ResponseCode::FLOW_CONTROL) {
                    BROKER_FLOW_CONTROL_DELAY
                } else {
                    if e.kind() != ErrorKind::State {
                        warn!("{}: pop of {} failed: {e}", self.group, req.mq);
                    }
                    self.options.pull_time_delay_when_exception
                };
                return self.pop_later(req, delay);
            }
        };
        debug!(
            "{}: pop of {}: {:?}, {} messages",
            self.group,
            req.mq,
            r.status,
            r.messages.len()
        );
        match r.status {
            PopStatus::Found => {
                self.stats.pulled(&req.mq.topic, sent_at.elapsed());
                let messages = self.filter_popped(&req.mq, sub, r.messages);
                if !messages.is_empty() {
                    let bytes = messages.iter().map(|(m, _)| m.body().len() as u64).sum();
                    self.observer.counters.pulled(
                        &self.user_topic(&req.mq.topic),
                        messages.len() as u64,
                        bytes,
                    );
                    // Consumed even when the queue was dropped meanwhile: the receipts
                    // stay good, and the messages need not wait out their invisible time.
                    req.pq.popped(messages.len());
                    self.submit_pop_consume(messages, req.pq.clone(), req.mq.clone());
                }
                if req.pq.is_dropped() {
                    return;
                }
                if self.options.pull_interval.is_zero() {
                    self.instance.execute_pull_request_immediately(req);
                } else {
                    let interval = self.options.pull_interval;
                    self.pop_later(req, interval);
                }
            }
            PopStatus::NoNewMessage => {
                if !req.pq.is_dropped() {
                    self.instance.execute_pull_request_immediately(req);
                }
            }
            PopStatus::PollingFull => {
                let delay = self.options.pull_time_delay_when_exception;
                self.pop_later(req, delay);
            }
        }
    }

    /// Java `processPopResult`: the broker filters by tag hash, so tags are checked again;
    /// a message past its retries is acked rather than consumed. Both are acked on the
    /// consume pool: this runs on the callback pool, which must not wait for a broker.
    fn filter_popped(
        self: &Arc<Self>,
        mq: &MessageQueue,
        sub: &SubscriptionData,
        messages: Vec<(MessageExt, ExtraInfo)>,
    ) -> Vec<(MessageExt, ExtraInfo)> {
        let max = self.options.max_reconsume_times_concurrently();
        let (keep, drop): (Vec<_>, Vec<_>) = messages
            .into_iter()
            .partition(|(m, _)| tag_matches(sub, m.tags()) && m.reconsume_times <= max);
        let mut receipts = Vec::with_capacity(drop.len());
        for (m, receipt) in drop {
            if m.reconsume_times > max {
                info!(
                    "{}: {} was consumed {} times, more than {max}; acked",
                    self.group,
                    m.msg_id(),
                    m.reconsume_times
                );
            }
            receipts.push(receipt);
        }
        if !receipts.is_empty() {
            if self.options.pop_batch_ack {
                self.ack_all(&mq.topic, receipts);
            } else {
                let (me, topic) = (self.clone(), mq.topic.clone());
                self.pool.execute(move || {
                    for r in &receipts {
                        me.ack_popped(&topic, r);
                    }
                });
            }
        }
        keep
    }

    /// Splits popped messages into listener batches and hands them to the consume pool;
    /// each batch's receipts are renewed until its listener returns.
    fn submit_pop_consume(
        self: &Arc<Self>,
        messages: Vec<(MessageExt, ExtraInfo)>,
        pq: Arc<PopProcessQueue>,
        mq: MessageQueue,
    ) {
        let size = self.options.consume_message_batch_max_size.max(1);
        let acks = self.options.pop_batch_ack.then(|| {
            Arc::new(PopAcks {
                state: Mutex::new(PopAcksState {
                    left: messages.len().div_ceil(size),
                    pending: Vec::new(),
                    flush_scheduled: false,
                }),
            })
        });
        let mut rest = messages.into_iter();
        let mut tasks = Vec::new();
        loop {
            let (msgs, receipts): (Vec<MessageExt>, Vec<ExtraInfo>) =
                rest.by_ref().take(size).unzip();
            if msgs.is_empty() {
                break;
            }
            let batch = Arc::new(PopBatch {
                state: Mutex::new(BatchState {
                    receipts,
                    renewing: 0,
                    done: false,
                }),
                answered: Condvar::new(),
                acks: acks.clone(),
            });
            self.schedule_renewal(&batch, &mq, Duration::ZERO);
            let (me, pq, mq) = (self.clone(), pq.clone(), mq.clone());
            tasks.push(move || me.consume_popped(msgs, batch, pq, mq));
        }
        self.pool.execute_all(tasks);
    }

    /// Renews `batch` halfway through the invisible time of its earliest receipt, and not
    /// before `at_least` (after a renewal that failed, its receipts are as they were).
    fn schedule_renewal(
        self: &Arc<Self>,
        batch: &Arc<PopBatch>,
        mq: &MessageQueue,
        at_least: Duration,
    ) {
        let due = batch
            .state
            .lock()
            .receipts
            .iter()
            .map(|r| r.pop_time.saturating_add(r.invisible_time / 2))
            .min();
        let Some(due) = due else { return };
        let delay = Duration::from_millis(
            u64::try_from(due.saturating_sub(crate::util::now_millis())).unwrap_or(0),
        )
        .max(at_least);
        let (me, batch, mq) = (Arc::downgrade(self), batch.clone(), mq.clone());
        // On the client timer, not the pull-delay timer; the renewal does not wait for
        // the broker, and the last answer schedules the next one.
        self.instance
            .schedule_on_client_timer("pop-renew", delay, move || {
                let Some(me) = me.upgrade() else { return };
                if batch.is_done() || !me.is_running() {
                    return;
                }
                me.renew(&batch, &mq);
            });
    }

    /// Asks the broker to make every message of `batch` invisible for
    /// `pop_invisible_time` again, all requests at once and without waiting; the answers
    /// replace the receipts ([`renewed`](Self::renewed)).
    fn renew(self: &Arc<Self>, batch: &Arc<PopBatch>, mq: &MessageQueue) {
        let receipts = {
            let mut st = batch.state.lock();
            if st.done || st.renewing > 0 || st.receipts.is_empty() {
                return;
            }
            st.renewing = st.receipts.len();
            st.receipts.clone()
        };
        let invisible = self.options.pop_invisible_time;
        for (i, sent) in receipts.into_iter().enumerate() {
            let header = self.change_invisible_header(&mq.topic, &sent, invisible);
            let broker = sent.broker_name.clone();
            let (me, b, q) = (Arc::downgrade(self), batch.clone(), mq.clone());
            let on_answer = move |r: Result<ExtraInfo>| Self::renewed(&me, &b, &q, i, &sent, r);
            let sent = match self.broker_addr_or_error(&broker, &mq.topic) {
                Ok(addr) => self.instance.api().change_invisible_time_async(
                    &addr,
                    &broker,
                    &header,
                    ACK_TIMEOUT,
                    on_answer,
                ),
                Err(e) => Err((e, on_answer)),
            };
            if let Err((e, on_answer)) = sent {
                on_answer(Err(e));
            }
        }
    }

    /// The answer to the renewal of the `i`th message of `batch` (receipt `sent`), on
    /// the callback pool; the last answer wakes an ack waiting for it and schedules the
    /// next renewal.
    fn renewed(
        me: &Weak<Self>,
        batch: &Arc<PopBatch>,
        mq: &MessageQueue,
        i: usize,
        sent: &ExtraInfo,
        result: Result<ExtraInfo>,
    ) {
        let (last, done) = {
            let mut st = batch.state.lock();
            match result {
                Ok(new) => {
                    if let Some(r) = st.receipts.get_mut(i).filter(|r| *r == sent) {
                        debug!(
                            "renewed {} of {mq} for {} ms",
                            r.queue_offset, new.invisible_time
                        );
                        *r = new;
                    }
                }
                Err(e) => warn!(
                    "renewing the invisible time of {} of {mq}: {e}",
                    sent.queue_offset
                ),
            }
            st.renewing = st.renewing.saturating_sub(1);
            (st.renewing == 0, st.done)
        };
        if !last {
            return;
        }
        batch.answered.notify_all();
        if let Some(me) = me.upgrade() {
            if !done && me.is_running() {
                me.schedule_renewal(batch, mq, RENEW_RETRY);
            }
        }
    }

    /// Java `ConsumeMessagePopConcurrentlyService.ConsumeRequest.run` and
    /// `processConsumeResult`.
    fn consume_popped(
        self: Arc<Self>,
        mut msgs: Vec<MessageExt>,
        batch: Arc<PopBatch>,
        pq: Arc<PopProcessQueue>,
        mq: MessageQueue,
    ) {
        let n = msgs.len();
        let Listener::Concurrently(listener) = &self.listener else {
            // Orderly consumers always allocate on the client: they never pop.
            return;
        };
        let now = crate::util::now_millis();
        let expired = batch
            .state
            .lock()
            .receipts
            .iter()
            .all(|r| now.saturating_sub(r.pop_time) >= r.invisible_time);
        if !self.is_running() || expired {
            // Shut down, or renewals failed: they come back to the group after their
            // invisible time (Java `isPopTimeout`).
            batch.state.lock().done = true;
            self.finish_acks(&batch, &mq.topic, Vec::new());
            pq.done(n);
            if expired {
                info!(
                    "{}: {n} popped messages of {mq} are past their invisible time; not consumed",
                    self.group
                );
            }
            return;
        }
        self.prepare_for_listener(&mut msgs);
        let msgs = Arc::new(msgs);
        let (status, ctx, took) = self.call_listener(listener, &msgs, mq.clone());
        // No renewal starts after this; the answers of one in flight come within its
        // timeout, and carry the receipts to ack with.
        let receipts = {
            let mut st = batch.state.lock();
            st.done = true;
            let until = Instant::now() + ACK_TIMEOUT + RENEW_RETRY;
            while st.renewing > 0 && !batch.answered.wait_until(&mut st, until).timed_out() {}
            st.receipts.clone()
        };
        let acked = match status {
            ConsumeStatus::Success => ctx.ack_index.map_or(n, |i| i.saturating_add(1)),
            ConsumeStatus::ReconsumeLater => 0,
        }
        .min(n);
        self.stats.consumed(&mq.topic, acked, n - acked, took);
        self.observer.counters.consumed(
            &self.user_topic(&mq.topic),
            acked as u64,
            (n - acked) as u64,
            Some(took),
        );
        let max = self.options.max_reconsume_times_concurrently();
        let mut to_ack = Vec::with_capacity(acked);
        for (i, (m, receipt)) in msgs.iter().zip(&receipts).enumerate() {
            if i < acked {
                to_ack.push(receipt.clone());
                continue;
            }
            if ctx.reconsume_delay == ReconsumeDelay::DeadLetter {
                // Straight to the DLQ, as a pulled message would go.
                if self
                    .send_message_back(m, ReconsumeDelay::DeadLetter, &mq)
                    .is_ok()
                {
                    to_ack.push(receipt.clone());
                    continue;
                }
            }
            let delay = if m.reconsume_times >= max {
                let age = now.saturating_sub(m.born_timestamp);
                match exhausted_delay(Duration::from_millis(age.unsigned_abs())) {
                    Some(d) => d,
                    None => {
                        warn!(
                            "{}: {} failed {} times; acked",
                            self.group,
                            m.msg_id(),
                            m.reconsume_times
                        );
                        to_ack.push(receipt.clone());
                        continue;
                    }
                }
            } else {
                retry_delay(ctx.reconsume_delay, m.reconsume_times)
            };
            if let Err(e) = self.change_invisible(&mq.topic, receipt, delay) {
                warn!(
                    "{}: handing {} back for {delay:?}: {e}; it comes back after its invisible time",
                    self.group,
                    m.msg_id()
                );
            }
        }
        self.finish_acks(&batch, &mq.topic, to_ack);
        pq.done(n);
    }

    /// Acks `to_ack` of a finished listener batch: each now, or with `pop_batch_ack`
    /// together with the other batches of its pop once the last has finished, or when
    /// the first waiting receipts reach half their invisible time.
    fn finish_acks(self: &Arc<Self>, batch: &PopBatch, topic: &Arc<str>, to_ack: Vec<ExtraInfo>) {
        let Some(acks) = &batch.acks else {
            for r in &to_ack {
                self.ack_popped(topic, r);
            }
            return;
        };
        let (now, flush_in) = {
            let mut st = acks.state.lock();
            st.pending.extend(to_ack);
            st.left = st.left.saturating_sub(1);
            if st.left == 0 {
                (std::mem::take(&mut st.pending), None)
            } else if st.flush_scheduled {
                (Vec::new(), None)
            } else {
                let due = st
                    .pending
                    .iter()
                    .map(|r| r.pop_time.saturating_add(r.invisible_time / 2))
                    .min();
                st.flush_scheduled = due.is_some();
                (Vec::new(), due)
            }
        };
        if !now.is_empty() {
            self.ack_all(topic, now);
        }
        let Some(due) = flush_in else { return };
        let delay = Duration::from_millis(
            u64::try_from(due.saturating_sub(crate::util::now_millis())).unwrap_or(0),
        );
        let (me, acks, topic) = (Arc::downgrade(self), acks.clone(), topic.clone());
        self.instance
            .schedule_on_client_timer("pop-ack-flush", delay, move || {
                let pending = {
                    let mut st = acks.state.lock();
                    st.flush_scheduled = false;
                    std::mem::take(&mut st.pending)
                };
                if let Some(me) = me.upgrade() {
                    me.ack_all(&topic, pending);
                }
            });
    }

    /// One BATCH_ACK_MESSAGE per broker for `receipts` (of `topic`), sent without
    /// waiting; single acks on the consume pool for a broker that refuses it and for
    /// receipts that do not fit in one.
    fn ack_all(self: &Arc<Self>, topic: &Arc<str>, receipts: Vec<ExtraInfo>) {
        let mut by_broker: HashMap<String, Vec<ExtraInfo>> = HashMap::new();
        for r in receipts {
            by_broker.entry(r.broker_name.clone()).or_default().push(r);
        }
        for (broker, receipts) in by_broker {
            if receipts.len() == 1 || self.pop_single_ack_brokers.read().contains(&broker) {
                self.ack_singly(topic, receipts);
                continue;
            }
            let (body, alone) = BatchAckMessageRequestBody::new(&self.group, topic, &receipts);
            let (alone, batched): (Vec<ExtraInfo>, Vec<ExtraInfo>) = receipts
                .iter()
                .cloned()
                .partition(|r| alone.iter().any(|a| a == &r));
            if !alone.is_empty() {
                self.ack_singly(topic, alone);
            }
            let Some(addr) = self.broker_addr(&broker, topic) else {
                continue;
            };
            let (me, t, n) = (Arc::downgrade(self), topic.clone(), batched.len());
            let on_answer = move |r: Result<()>| {
                let Some(me) = me.upgrade() else { return };
                match r {
                    Ok(()) => debug!("{}: batch ack of {n} at {broker}", me.group),
                    Err(e) if e.kind() == ErrorKind::Unsupported => {
                        info!("{}: {broker} has no batch ack; acking one by one", me.group);
                        me.pop_single_ack_brokers.write().insert(broker);
                        me.ack_singly(&t, batched);
                    }
                    Err(e) => warn!(
                        "{}: batch ack of {n} at {broker} failed: {e}; they come back after their invisible time",
                        me.group
                    ),
                }
            };
            let sent =
                self.instance
                    .api()
                    .batch_ack_message_async(&addr, &body, ACK_TIMEOUT, on_answer);
            if let Err((e, on_answer)) = sent {
                on_answer(Err(e));
            }
        }
    }

    /// ACK_MESSAGE of each of `receipts`, on the consume pool.
    fn ack_singly(self: &Arc<Self>, topic: &Arc<str>, receipts: Vec<ExtraInfo>) {
        let (me, topic) = (self.clone(), topic.clone());
        self.pool.execute(move || {
            for r in &receipts {
                me.ack_popped(&topic, r);
            }
        });
    }

    /// ACK_MESSAGE of one popped message (Java `ackAsync`, here on the consume thread).
    fn ack_popped(&self, topic: &str, r: &ExtraInfo) {
        let header = AckMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.real_topic(topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.encode(),
            offset: r.queue_offset,
            broker_name: Some(r.broker_name.clone()),
        };
        let Some(addr) = self.broker_addr(&r.broker_name, topic) else {
            return;
        };
        if let Err(e) = self.instance.api().ack_message(&addr, &header, ACK_TIMEOUT) {
            warn!(
                "{}: ack of {} at {} failed: {e}; it comes back after its invisible time",
                self.group, r.queue_offset, r.broker_name
            );
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME: the message comes back `after` from now; its new
    /// receipt.
    fn change_invisible(&self, topic: &str, r: &ExtraInfo, after: Duration) -> Result<ExtraInfo> {
        let header = self.change_invisible_header(topic, r, after);
        let addr = self.broker_addr_or_error(&r.broker_name, topic)?;
        self.instance
            .api()
            .change_invisible_time(&addr, &r.broker_name, &header, ACK_TIMEOUT)
    }

    fn change_invisible_header(
        &self,
        topic: &str,
        r: &ExtraInfo,
        after: Duration,
    ) -> ChangeInvisibleTimeRequestHeader {
        ChangeInvisibleTimeRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.real_topic(topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.encode(),
            offset: r.queue_offset,
            invisible_time: ms(after),
            broker_name: Some(r.broker_name.clone()),
        }
    }

    fn broker_addr_or_error(&self, broker: &str, topic: &str) -> Result<String> {
        self.broker_addr(broker, topic).ok_or_else(|| {
            Error::new(
                ErrorKind::NoRoute,
                format!("the address of broker {broker} is not known"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pop_retry_delays_follow_java_pop_delay_level() {
        let s = Duration::from_secs;
        // First failure: level 0 from the attempt count, 10 s.
        assert_eq!(retry_delay(ReconsumeDelay::Broker, 0), s(10));
        assert_eq!(retry_delay(ReconsumeDelay::Broker, 3), s(120));
        assert_eq!(retry_delay(ReconsumeDelay::Level(0), 2), s(60));
        assert_eq!(retry_delay(ReconsumeDelay::Level(5), 0), s(240));
        assert_eq!(retry_delay(ReconsumeDelay::Level(99), 0), s(7200));
        assert_eq!(retry_delay(ReconsumeDelay::Broker, 16), s(7200));
        assert_eq!(retry_delay(ReconsumeDelay::Broker, -1), s(10));
        // Past the retries: the first level the message's age has not reached; acked
        // once older than twice the longest.
        assert_eq!(exhausted_delay(s(0)), Some(s(10)));
        assert_eq!(exhausted_delay(s(45)), Some(s(60)));
        assert_eq!(exhausted_delay(s(7000)), Some(s(7200)));
        assert_eq!(exhausted_delay(s(9000)), Some(s(7200)));
        assert_eq!(exhausted_delay(s(14_401)), None);
    }
}
