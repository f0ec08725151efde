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
//! in its listener.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

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
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ExtraInfo, PopMessageRequestHeader,
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
    /// The messages' receipts, in order. Held across a renewal's broker calls, so that
    /// the ack after the listener waits for a renewal in progress and uses the newest
    /// receipts; no other task takes it.
    receipts: Mutex<Vec<ExtraInfo>>,
    /// Set when the listener has returned (or the batch was given up): no more renewals.
    done: AtomicBool,
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
            let (me, topic) = (self.clone(), mq.topic.clone());
            self.pool.execute(move || {
                for r in &receipts {
                    me.ack_popped(&topic, r);
                }
            });
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
        let mut rest = messages.into_iter();
        let mut tasks = Vec::new();
        loop {
            let (msgs, receipts): (Vec<MessageExt>, Vec<ExtraInfo>) =
                rest.by_ref().take(size).unzip();
            if msgs.is_empty() {
                break;
            }
            let batch = Arc::new(PopBatch {
                receipts: Mutex::new(receipts),
                done: AtomicBool::new(false),
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
            .receipts
            .lock()
            .iter()
            .map(|r| r.pop_time.saturating_add(r.invisible_time / 2))
            .min();
        let Some(due) = due else { return };
        let delay = Duration::from_millis(
            u64::try_from(due.saturating_sub(crate::util::now_millis())).unwrap_or(0),
        )
        .max(at_least);
        let (me, batch, mq) = (Arc::downgrade(self), batch.clone(), mq.clone());
        // On the client timer: broker calls must not hold up the pull-delay timer.
        self.instance
            .schedule_on_client_timer("pop-renew", delay, move || {
                let Some(me) = me.upgrade() else { return };
                if batch.done.load(Ordering::SeqCst) || !me.is_running() {
                    return;
                }
                me.renew(&batch, &mq);
                me.schedule_renewal(&batch, &mq, RENEW_RETRY);
            });
    }

    /// Makes every message of `batch` invisible for `pop_invisible_time` again, keeping
    /// the new receipts.
    fn renew(&self, batch: &PopBatch, mq: &MessageQueue) {
        let mut receipts = batch.receipts.lock();
        if batch.done.load(Ordering::SeqCst) {
            return;
        }
        let invisible = self.options.pop_invisible_time;
        for r in receipts.iter_mut() {
            match self.change_invisible(&mq.topic, r, invisible) {
                Ok(new) => {
                    debug!(
                        "{}: renewed {} of {mq} for {invisible:?}",
                        self.group, r.queue_offset
                    );
                    *r = new;
                }
                Err(e) => warn!(
                    "{}: renewing the invisible time of {} of {mq}: {e}",
                    self.group, r.queue_offset
                ),
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
            .receipts
            .lock()
            .iter()
            .all(|r| now.saturating_sub(r.pop_time) >= r.invisible_time);
        if !self.is_running() || expired {
            // Shut down, or renewals failed: they come back to the group after their
            // invisible time (Java `isPopTimeout`).
            batch.done.store(true, Ordering::SeqCst);
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
        // Waits for a renewal in progress; none starts after this.
        let receipts = {
            let r = batch.receipts.lock();
            batch.done.store(true, Ordering::SeqCst);
            r.clone()
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
        for (i, (m, receipt)) in msgs.iter().zip(&receipts).enumerate() {
            if i < acked {
                self.ack_popped(&mq.topic, receipt);
                continue;
            }
            if ctx.reconsume_delay == ReconsumeDelay::DeadLetter {
                // Straight to the DLQ, as a pulled message would go.
                if self
                    .send_message_back(m, ReconsumeDelay::DeadLetter, &mq)
                    .is_ok()
                {
                    self.ack_popped(&mq.topic, receipt);
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
                        self.ack_popped(&mq.topic, receipt);
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
        pq.done(n);
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
        let header = ChangeInvisibleTimeRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.real_topic(topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.encode(),
            offset: r.queue_offset,
            invisible_time: ms(after),
            broker_name: Some(r.broker_name.clone()),
        };
        let addr = self.broker_addr(&r.broker_name, topic).ok_or_else(|| {
            Error::new(
                ErrorKind::NoRoute,
                format!("the address of broker {} is not known", r.broker_name),
            )
        })?;
        self.instance
            .api()
            .change_invisible_time(&addr, &r.broker_name, &header, ACK_TIMEOUT)
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
