//! The push consumer's engine (Java `DefaultMQPushConsumerImpl`, `RebalancePushImpl`,
//! `ConsumeMessageConcurrentlyService`, `ConsumeMessageOrderlyService`).
//!
//! Flow: rebalance assigns queues → a `PullRequest` per queue goes to the instance's pull
//! thread → `pull_message` applies flow control and sends an async long-polling pull →
//! the callback (callback pool) caches the messages in the queue's `ProcessQueue` and
//! hands them to the consume pool → the listener runs there → the offset store learns
//! the smallest offset still in flight. The pull thread and the I/O thread never wait
//! for a listener.

mod consumer_inner;
mod orderly;
mod pop;

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use super::hook::{ConsumeHookStatus, ConsumeObserver};
use super::offset_store::{OffsetStore, ReadOffset, ReadOffsetType};
use super::pool::ConsumePool;
use super::process_queue::ProcessQueue;
use super::pull::{self, sys_flag, PullParams, PullResult, PullRouting, PullStatus};
use super::rebalance::{RebalanceHooks, RebalanceImpl};
use super::stats::ConsumeStats;
use super::{
    ConsumeConcurrentlyContext, ConsumeOrderlyContext, ConsumeOrderlyStatus, ConsumeStatus,
    Listener, PushConsumerOptions, ReconsumeDelay,
};
use crate::client::{MQClientInstance, PullTask, ServiceState};
use crate::error::{ErrorKind, Result};
use crate::message::{property, MessageExt, MessageQueue};
use crate::protocol::header::ConsumerSendMsgBackRequestHeader;
use crate::protocol::heartbeat::MessageModel;
use crate::protocol::ResponseCode;
use crate::scheduler::ScheduledExecutor;
use crate::trace::{self, TraceDispatcher};

use crate::client::validators::{retry_topic, RETRY_GROUP_TOPIC_PREFIX};
/// Java `BROKER_SUSPEND_MAX_TIME_MILLIS`.
const BROKER_SUSPEND_MAX_TIME: Duration = Duration::from_millis(15_000);
/// Java `CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND`.
const CONSUMER_TIMEOUT_WHEN_SUSPEND: Duration = Duration::from_millis(30_000);
/// Java `PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL`.
const FLOW_CONTROL_DELAY: Duration = Duration::from_millis(50);
const BROKER_FLOW_CONTROL_DELAY: Duration = Duration::from_millis(20);
const SUSPENDED_DELAY: Duration = Duration::from_millis(1000);
const MAX_TIME_CONSUME_CONTINUOUSLY: Duration = Duration::from_secs(60);
const LOCAL_RETRY_DELAY: Duration = Duration::from_secs(5);
const OFFSET_ILLEGAL_DELAY: Duration = Duration::from_secs(10);
const LOCK_INTERVAL: Duration = Duration::from_secs(20);
const SEND_BACK_TIMEOUT: Duration = Duration::from_millis(5000);

/// One queue's pull cursor, passed between the pull thread and callbacks (Java `PullRequest`).
pub struct PullRequest {
    consumer: Weak<PushConsumerImpl>,
    pub(crate) mq: MessageQueue,
    pub(crate) pq: Arc<ProcessQueue>,
    pub(crate) next_offset: i64,
    previously_locked: bool,
}

impl PullTask for PullRequest {
    fn pull(self: Box<Self>) {
        if let Some(consumer) = self.consumer.upgrade() {
            consumer.pull_message(*self);
        }
    }
}

/// The push consumer's engine.
///
/// Its own locks (`state`, `lock_timer`, `fallback_producer`) are each taken alone and
/// released before calling the instance, the listener or a producer. The orderly
/// listener runs under its queue's `ProcessQueue::consume_lock` (see there).
/// `recording` is taken (read) around one offset-store update; `persisting` is held
/// across one persist of all offsets and is taken before `state` (job 4 checks the
/// state under it).
pub(crate) struct PushConsumerImpl {
    pub(crate) group: String,
    pub(crate) options: PushConsumerOptions,
    listener: Listener,
    pub(crate) instance: Arc<MQClientInstance>,
    pub(crate) rebalance: RebalanceImpl,
    pub(crate) offset_store: Box<dyn OffsetStore>,
    routing: Arc<PullRouting>,
    pub(crate) pool: ConsumePool,
    pub(crate) state: Mutex<ServiceState>,
    paused: std::sync::atomic::AtomicBool,
    lock_timer: Mutex<Option<ScheduledExecutor>>,
    me: Weak<PushConsumerImpl>,
    /// Producer used when CONSUMER_SEND_MSG_BACK fails (Java: the instance's inner producer).
    /// Cloned out before a send, so no lock is held across the network call.
    pub(crate) fallback_producer: RwLock<Option<Arc<crate::producer::Producer>>>,
    /// False once shutdown has stopped waiting for listeners: consumption results are no
    /// longer recorded as offsets (see `PushConsumer::shutdown`).
    recording: RwLock<bool>,
    /// Serializes the periodic persist with shutdown's final one, so that an older
    /// snapshot never reaches the broker after the final offsets.
    persisting: Mutex<()>,
    /// Pull and consume figures for the admin tool.
    pub(crate) stats: ConsumeStats,
    /// Monotonic counters for `PushConsumer::stats`, and the consume hooks.
    pub(crate) observer: ConsumeObserver,
    /// When the consumer was created, ms since the epoch (Java
    /// `consumerStartTimestamp`).
    started_at: i64,
    /// Per-queue (messages, MiB) limits of topics with a per-topic threshold, from the
    /// last rebalance: the topic's threshold divided by the queues held of it.
    topic_queue_limits: RwLock<HashMap<String, (usize, u64)>>,
    /// The trace of every listener call, with `enable_msg_trace`.
    pub(crate) trace: RwLock<Option<Arc<TraceDispatcher>>>,
    /// The instance's namespace, fixed with its configuration; read for every message.
    namespace: Option<String>,
    /// Told of every allocation change (Java `messageQueueListener`).
    pub(crate) queue_listener: RwLock<Option<Arc<dyn crate::consumer::MessageQueueListener>>>,
    /// POP mode: brokers that refused BATCH_ACK_MESSAGE (before 5.1.1); acked one by one.
    pub(crate) pop_single_ack_brokers: RwLock<HashSet<String>>,
}

fn has_topic_thresholds(o: &PushConsumerOptions) -> bool {
    o.pull_threshold_for_topic.is_some() || o.pull_threshold_size_for_topic_mib.is_some()
}

/// Java `RebalancePushImpl.messageQueueChanged`: a per-topic threshold is shared equally
/// by the `held` queues of the topic (at least 1 each); `None` without per-topic
/// thresholds. Unlike Java, which overwrites the one per-queue setting for all topics,
/// each topic keeps its own share.
fn topic_queue_limits(o: &PushConsumerOptions, held: usize) -> Option<(usize, u64)> {
    if !has_topic_thresholds(o) {
        return None;
    }
    let share = |total: u64| (total / held.max(1) as u64).max(1);
    let count = o
        .pull_threshold_for_topic
        .map_or(o.pull_threshold_for_queue, |t| {
            usize::try_from(share(t as u64)).unwrap_or(usize::MAX)
        });
    let mib = o
        .pull_threshold_size_for_topic_mib
        .map_or(o.pull_threshold_size_for_queue_mib, share);
    Some((count, mib))
}

impl PushConsumerImpl {
    pub(crate) fn new(
        group: String,
        options: PushConsumerOptions,
        listener: Listener,
        instance: Arc<MQClientInstance>,
        rebalance: RebalanceImpl,
        offset_store: Box<dyn OffsetStore>,
    ) -> Result<Arc<Self>> {
        let pool = ConsumePool::new(
            "rmq-consume",
            options.consume_thread_min,
            options.consume_thread_max,
        )
        .map_err(|e| crate::Error::io("starting the consume pool", e))?;
        Ok(Arc::new_cyclic(|me| PushConsumerImpl {
            group,
            options,
            listener,
            rebalance,
            offset_store,
            routing: Arc::new(PullRouting::default()),
            pool,
            state: Mutex::new(ServiceState::CreateJust),
            paused: std::sync::atomic::AtomicBool::new(false),
            lock_timer: Mutex::new(None),
            me: me.clone(),
            fallback_producer: RwLock::new(None),
            recording: RwLock::new(true),
            persisting: Mutex::new(()),
            stats: ConsumeStats::default(),
            observer: ConsumeObserver::default(),
            started_at: crate::util::now_millis(),
            topic_queue_limits: RwLock::new(HashMap::new()),
            trace: RwLock::new(None),
            namespace: instance.config().namespace(),
            instance,
            queue_listener: RwLock::new(None),
            pop_single_ack_brokers: RwLock::new(HashSet::new()),
        }))
    }

    fn is_orderly(&self) -> bool {
        matches!(self.listener, Listener::Orderly(_))
    }

    pub(crate) fn is_orderly_clustering(&self) -> bool {
        self.is_orderly() && self.options.message_model == MessageModel::Clustering
    }

    pub(crate) fn is_running(&self) -> bool {
        *self.state.lock() == ServiceState::Running
    }

    pub(crate) fn set_paused(&self, v: bool) {
        self.paused.store(v, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_paused(&self) -> bool {
        self.paused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Orderly clustering consumers refresh their broker locks every 20 s.
    pub(crate) fn start_lock_timer(&self) -> Result<()> {
        if !self.is_orderly() || self.options.message_model != MessageModel::Clustering {
            return Ok(());
        }
        let exec = ScheduledExecutor::new("rmq-lock", 1)?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "lock-all",
            Duration::from_millis(1000),
            LOCK_INTERVAL,
            move || {
                if let Some(c) = me.upgrade() {
                    c.rebalance.lock_all();
                }
                Ok(())
            },
        )?;
        *self.lock_timer.lock() = Some(exec);
        Ok(())
    }

    /// Starts the consume-timeout check (Java `cleanExpireMsg`, every `consume_timeout`):
    /// concurrent consumers only. The timer only hands the check to the rebalance thread,
    /// since sending messages back is network work and the consume pool may be full of
    /// the very listeners that hang.
    pub(crate) fn start_consume_timeout_check(&self) {
        if self.is_orderly() {
            return;
        }
        let me = self.me.clone();
        self.instance
            .schedule_later("consume-timeout", self.options.consume_timeout, move || {
                let Some(c) = me.upgrade() else { return };
                if !c.is_running() {
                    return;
                }
                let weak = c.me.clone();
                c.instance.run_on_rebalance_thread(move || {
                    if let Some(c) = weak.upgrade() {
                        c.clean_expired_messages();
                    }
                });
                c.start_consume_timeout_check();
            });
    }

    /// Sends back every cached message whose listener has run past `consume_timeout`
    /// and takes it off its queue, so the queue's offset can move past it.
    fn clean_expired_messages(&self) {
        let held = self.rebalance.held_queues();
        for (mq, pq) in held {
            if pq.is_dropped() {
                continue;
            }
            for (batch, msgs) in pq.expired_batches(self.options.consume_timeout) {
                let mut all_sent = true;
                for m in msgs {
                    warn!(
                        "{}: the listener has run on {} of {mq} for more than {:?}; sending it back",
                        self.group,
                        m.msg_id(),
                        self.options.consume_timeout
                    );
                    // Java sends it back with delay level 3 (10 s).
                    if self
                        .send_message_back(&m, ReconsumeDelay::Level(3), &mq)
                        .is_err()
                    {
                        // Kept in the queue, and the batch kept: the next check tries again.
                        all_sent = false;
                        continue;
                    }
                    let offset = pq.remove_messages([m.queue_offset]);
                    if offset >= 0 && !pq.is_dropped() {
                        self.record_offset(&mq, offset, true);
                    }
                }
                if all_sent {
                    pq.end_batch(batch);
                }
            }
        }
    }

    pub(crate) fn stop_lock_timer(&self) {
        let timer = self.lock_timer.lock().take();
        if let Some(t) = timer {
            t.shutdown();
        }
    }

    // --- pulling ------------------------------------------------------------------

    /// Records `SubBefore` for a listener call on `msgs`; what `trace_after` needs.
    fn trace_before(&self, msgs: &[MessageExt]) -> Option<(Arc<TraceDispatcher>, String)> {
        if !self.options.enable_msg_trace {
            return None; // no lock per listener call when untraced
        }
        let trace = self.trace.read().clone()?;
        let id = trace::consume_before(&trace, &self.group_without_namespace(), msgs);
        Some((trace, id))
    }

    /// Records `SubAfter` for the call `trace_before` saw start at `began`.
    fn trace_after(
        &self,
        traced: Option<(Arc<TraceDispatcher>, String)>,
        msgs: &[MessageExt],
        began: Instant,
        success: bool,
        panicked: bool,
    ) {
        let Some((trace, id)) = traced else { return };
        let group = self.group_without_namespace();
        trace::consume_after(&trace, &group, &id, msgs, began, success, panicked);
    }

    fn group_without_namespace(&self) -> String {
        let ns = self.instance.config().namespace();
        crate::client::namespace::unwrap(ns.as_deref(), &self.group)
    }

    /// The (messages, MiB) a queue of `topic` may cache before its pulls pause.
    fn queue_limits(&self, topic: &str) -> (usize, u64) {
        let o = &self.options;
        if !has_topic_thresholds(o) {
            // Every pull asks: without per-topic thresholds there is no table to look in.
            return (
                o.pull_threshold_for_queue,
                o.pull_threshold_size_for_queue_mib,
            );
        }
        match self.topic_queue_limits.read().get(topic) {
            Some(&limits) => limits,
            None => (
                o.pull_threshold_for_queue,
                o.pull_threshold_size_for_queue_mib,
            ),
        }
    }

    fn update_topic_limits(&self, topic: &str, held: usize) {
        if let Some(limits) = topic_queue_limits(&self.options, held) {
            self.topic_queue_limits
                .write()
                .insert(topic.to_string(), limits);
        }
    }

    fn later(&self, req: PullRequest, delay: Duration) {
        self.instance.execute_pull_request_later(req, delay);
    }

    /// Java `pullMessage`: flow control, then an async pull.
    pub(crate) fn pull_message(self: &Arc<Self>, mut req: PullRequest) {
        let pq = req.pq.clone();
        if pq.is_dropped() {
            return;
        }
        pq.touch_pull();
        if !self.is_running() {
            return;
        }
        if self.is_paused() {
            return self.later(req, SUSPENDED_DELAY);
        }
        let o = &self.options;
        let (count_limit, mib_limit) = self.queue_limits(&req.mq.topic);
        if pq.msg_count() > count_limit {
            return self.later(req, FLOW_CONTROL_DELAY);
        }
        if pq.msg_size() / (1024 * 1024) > mib_limit {
            return self.later(req, FLOW_CONTROL_DELAY);
        }
        if !self.is_orderly() {
            if pq.max_span().unsigned_abs() > o.consume_concurrently_max_span {
                return self.later(req, FLOW_CONTROL_DELAY);
            }
        } else if pq.is_locked() {
            if !req.previously_locked {
                // The first pull after taking the lock starts from the stored offset.
                match self.compute_pull_from_where(&req.mq) {
                    Some(offset) => {
                        req.next_offset = offset;
                        req.previously_locked = true;
                    }
                    None => return self.later(req, o.pull_time_delay_when_exception),
                }
            }
        } else {
            return self.later(req, o.pull_time_delay_when_exception);
        }
        let Some(sub) = self
            .rebalance
            .subscriptions
            .read()
            .get(&*req.mq.topic)
            .cloned()
        else {
            warn!("{}: no subscription for {}; pull later", self.group, req.mq);
            return self.later(req, o.pull_time_delay_when_exception);
        };
        let mut commit_offset = 0;
        let mut flag = sys_flag::SUSPEND;
        if o.message_model == MessageModel::Clustering {
            if let ReadOffset::Found(v) = self
                .offset_store
                .read_offset(&req.mq, ReadOffsetType::ReadFromMemory)
            {
                if v > 0 {
                    commit_offset = v;
                    flag |= sys_flag::COMMIT_OFFSET;
                }
            }
        }
        if o.post_subscription_when_pull {
            flag |= sys_flag::SUBSCRIPTION;
        }
        let mq = req.mq.clone();
        let params = PullParams {
            mq: &mq,
            sub: &sub,
            offset: req.next_offset,
            max_nums: o.pull_batch_size as i32,
            sys_flag: flag,
            commit_offset,
            suspend: BROKER_SUSPEND_MAX_TIME,
            timeout: CONSUMER_TIMEOUT_WHEN_SUSPEND,
            post_subscription: o.post_subscription_when_pull,
        };
        let me = self.clone();
        let sent_at = Instant::now();
        let sent = pull::pull_async(
            &self.instance,
            self.routing.clone(),
            &self.group,
            &params,
            move |r| {
                me.stats.pulled(&req.mq.topic, sent_at.elapsed());
                me.on_pull_result(req, r)
            },
        );
        if let Err(e) = sent {
            // Not sent: the callback comes back and takes the failure as a failed pull
            // (here, on the pull thread), which schedules the request again.
            let (e, callback) = e.into_parts();
            callback(Err(e));
        }
    }

    fn on_pull_result(self: Arc<Self>, mut req: PullRequest, result: Result<PullResult>) {
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                if req.pq.is_dropped() {
                    return;
                }
                let delay = if e.response_code() == Some(ResponseCode::FLOW_CONTROL) {
                    BROKER_FLOW_CONTROL_DELAY
                } else if e.response_code() == Some(ResponseCode::SUBSCRIPTION_NOT_LATEST) {
                    // The broker missed our newest heartbeat; send it before pulling again.
                    debug!(
                        "{}: subscription of {} not latest at the broker; heartbeat",
                        self.group, req.mq
                    );
                    self.instance.request_heartbeat();
                    BROKER_FLOW_CONTROL_DELAY
                } else {
                    if e.kind() != ErrorKind::State {
                        warn!("{}: pull of {} failed: {e}", self.group, req.mq);
                    }
                    self.options.pull_time_delay_when_exception
                };
                return self.later(req, delay);
            }
        };
        if req.pq.is_dropped() {
            return;
        }
        match r.status {
            PullStatus::Found => {
                req.next_offset = r.next_begin_offset;
                if r.msgs.is_empty() {
                    return self.instance.execute_pull_request_immediately(req);
                }
                let bytes = r.msgs.iter().map(|m| m.body().len() as u64).sum();
                self.observer.counters.pulled(
                    &self.user_topic(&req.mq.topic),
                    r.msgs.len() as u64,
                    bytes,
                );
                let (msgs, dispatch) = match self.listener {
                    Listener::Concurrently(_) => {
                        let dispatch = req.pq.put_messages(&r.msgs);
                        (r.msgs, dispatch)
                    }
                    // Orderly tasks take their messages from the process queue.
                    Listener::Orderly(_) => (Vec::new(), req.pq.hold_messages(r.msgs)),
                };
                self.submit_consume(msgs, req.pq.clone(), req.mq.clone(), dispatch);
                if self.options.pull_interval.is_zero() {
                    self.instance.execute_pull_request_immediately(req);
                } else {
                    self.later(req, self.options.pull_interval);
                }
            }
            PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => {
                req.next_offset = r.next_begin_offset;
                // Java `correctTagsOffset`: with nothing cached, the stored offset may move.
                if req.pq.msg_count() == 0 {
                    self.record_offset(&req.mq, req.next_offset, true);
                }
                self.instance.execute_pull_request_immediately(req);
            }
            PullStatus::OffsetIllegal => {
                warn!(
                    "{}: offset {} of {} is illegal; moving to {}",
                    self.group, req.next_offset, req.mq, r.next_begin_offset
                );
                req.next_offset = r.next_begin_offset;
                req.pq.set_dropped(true);
                let me = self.clone();
                // The offset goes to the broker: on the client timer, not the pull-delay
                // one that every consumer's delayed pulls share.
                self.instance.schedule_on_client_timer(
                    "offset-illegal",
                    OFFSET_ILLEGAL_DELAY,
                    move || {
                        me.offset_store
                            .update_offset(&req.mq, req.next_offset, false);
                        me.offset_store.persist(&req.mq);
                        me.rebalance.process_queues.write().remove(&req.mq);
                        info!(
                            "{}: removed {} after an illegal offset; rebalance re-adds it",
                            me.group, req.mq
                        );
                    },
                );
            }
        }
    }

    fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64> {
        super::offset_store::compute_start_offset(
            &self.instance,
            self.offset_store.as_ref(),
            self.options.consume_from_where,
            mq,
        )
    }

    // --- consuming ------------------------------------------------------------------

    fn submit_consume(
        self: &Arc<Self>,
        msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        dispatch: bool,
    ) {
        match &self.listener {
            Listener::Concurrently(_) => {
                let batch = self.options.consume_message_batch_max_size.max(1);
                let mut msgs = msgs.into_iter();
                let mut chunks = Vec::with_capacity(msgs.len().div_ceil(batch));
                loop {
                    let chunk: Vec<MessageExt> = msgs.by_ref().take(batch).collect();
                    if chunk.is_empty() {
                        break;
                    }
                    chunks.push(chunk);
                }
                // One lock round and one wake-up for the whole pull result.
                self.pool.execute_all(chunks.into_iter().map(|chunk| {
                    let (me, pq, mq) = (self.clone(), pq.clone(), mq.clone());
                    move || me.consume_concurrently(chunk, pq, mq)
                }));
            }
            Listener::Orderly(_) => {
                if dispatch {
                    let me = self.clone();
                    self.pool.execute(move || me.consume_orderly(pq, mq));
                }
            }
        }
    }

    /// Java `resetRetryAndNamespace` plus `CONSUME_START_TIME`.
    fn prepare_for_listener(&self, msgs: &mut [MessageExt]) {
        let mut digits = [0; 20];
        // Written on the stack: this runs for every message.
        let now = std::str::from_utf8(crate::protocol::int_bytes(
            crate::util::now_millis(),
            &mut digits,
        ))
        .unwrap_or_default();
        let namespace = &self.namespace;
        for m in msgs.iter_mut() {
            let is_retry = m
                .topic()
                .strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
                .is_some_and(|g| g == self.group);
            if is_retry {
                if let Some(t) = m.property(property::RETRY_TOPIC).map(str::to_string) {
                    m.message.set_topic(t);
                }
            }
            if let Some(ns) = namespace {
                let t = crate::client::namespace::unwrap(Some(ns), m.topic());
                m.message.set_topic(t);
            }
            m.message.put_property(property::CONSUME_START_TIME, now);
        }
    }

    /// Runs a concurrent listener on `msgs` of `mq` with the consume hooks and the trace
    /// around it: the status (a panic is `ReconsumeLater`), the context as the listener
    /// left it, and how long it ran.
    fn call_listener(
        &self,
        listener: &super::ConcurrentFn,
        msgs: &Arc<Vec<MessageExt>>,
        mq: MessageQueue,
    ) -> (ConsumeStatus, ConsumeConcurrentlyContext, Duration) {
        let mut ctx = ConsumeConcurrentlyContext::new(mq);
        let hooks = self.observer.before(&self.group, &ctx.message_queue, msgs);
        let began = Instant::now();
        let traced = self.trace_before(msgs);
        let mut panicked = false;
        let status =
            catch_unwind(AssertUnwindSafe(|| listener(msgs, &mut ctx))).unwrap_or_else(|_| {
                warn!(
                    "{}: the listener panicked on {} messages of {}; they will be retried",
                    self.group,
                    msgs.len(),
                    ctx.message_queue
                );
                panicked = true;
                ConsumeStatus::ReconsumeLater
            });
        let ok = status == ConsumeStatus::Success;
        let took = began.elapsed();
        self.trace_after(traced, msgs, began, ok, panicked);
        if let Some(hooks) = hooks {
            let status = match status {
                _ if panicked => ConsumeHookStatus::Panicked,
                ConsumeStatus::Success => ConsumeHookStatus::Success,
                ConsumeStatus::ReconsumeLater => ConsumeHookStatus::ReconsumeLater,
            };
            hooks.after(&self.group, &ctx.message_queue, msgs, status);
        }
        (status, ctx, took)
    }

    fn consume_concurrently(
        self: Arc<Self>,
        mut msgs: Vec<MessageExt>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
    ) {
        if pq.is_dropped() {
            return;
        }
        let Listener::Concurrently(listener) = &self.listener else {
            return;
        };
        self.prepare_for_listener(&mut msgs);
        let msgs = Arc::new(msgs);
        let batch = pq.begin_batch(msgs.clone());
        let (status, ctx, took) = self.call_listener(listener, &msgs, mq);
        if !pq.end_batch(batch) {
            // Past the consume timeout: its messages were sent back and left the queue.
            debug!(
                "{}: a listener returned after the consume timeout",
                self.group
            );
            return;
        }
        // The queue moved into the context to save a copy per consume task; take it back.
        let ConsumeConcurrentlyContext {
            message_queue: mq,
            reconsume_delay,
            ack_index,
        } = ctx;
        if pq.is_dropped() {
            debug!(
                "{}: {mq} was dropped while its listener ran; nothing recorded",
                self.group
            );
            return;
        }
        // How many messages, from the first, count as consumed.
        let acked = match status {
            ConsumeStatus::Success => ack_index.map_or(msgs.len(), |i| i.saturating_add(1)),
            ConsumeStatus::ReconsumeLater => 0,
        }
        .min(msgs.len());
        self.stats
            .consumed(&mq.topic, acked, msgs.len() - acked, took);
        self.observer.counters.consumed(
            &self.user_topic(&mq.topic),
            acked as u64,
            (msgs.len() - acked) as u64,
            Some(took),
        );
        if acked < msgs.len()
            && self.options.message_model == MessageModel::Clustering
            && !self.is_running()
        {
            // Shutting down: a retry is not sent back (a broker call that would stretch
            // shutdown). The messages stay in the queue, so its offset stays below them
            // and they come again to the group from this queue.
            let offset = pq.remove_messages(msgs.iter().take(acked).map(|m| m.queue_offset));
            if offset >= 0 && !pq.is_dropped() {
                self.record_offset(&mq, offset, true);
            }
            return;
        }
        let mut failed = Vec::new();
        for m in msgs.iter().skip(acked) {
            match self.options.message_model {
                MessageModel::Broadcasting => {
                    warn!(
                        "{}: broadcasting consumption of {} failed; dropped",
                        self.group,
                        m.msg_id()
                    )
                }
                MessageModel::Clustering => {
                    if self.send_message_back(m, reconsume_delay, &mq).is_err() {
                        let mut m = m.clone();
                        m.reconsume_times += 1;
                        failed.push(m);
                    }
                }
            }
        }
        let failed_offsets: HashSet<i64> = failed.iter().map(|m| m.queue_offset).collect();
        let done = msgs
            .iter()
            .map(|m| m.queue_offset)
            .filter(|o| !failed_offsets.contains(o));
        let offset = pq.remove_messages(done);
        if offset >= 0 && !pq.is_dropped() {
            self.record_offset(&mq, offset, true);
        }
        if !failed.is_empty() {
            // Even the fallback failed: consume them again here later (Java: 5 s).
            let me = self.clone();
            self.instance
                .schedule_later("consume-later", LOCAL_RETRY_DELAY, move || {
                    let pq2 = pq.clone();
                    me.submit_consume(failed, pq2, mq, true);
                });
        }
    }

    /// Orderly: whether to suspend (retry locally) rather than give up on the messages.
    fn check_reconsume_times(&self, msgs: &mut [MessageExt], mq: &MessageQueue) -> bool {
        let max = self.options.max_reconsume_times_orderly();
        let mut suspend = false;
        for m in msgs.iter_mut() {
            if m.reconsume_times >= max {
                m.message
                    .put_property(property::RECONSUME_TIME, m.reconsume_times.to_string());
                if !self.send_back_as_normal_message(m, mq) {
                    suspend = true;
                    m.reconsume_times += 1;
                }
            } else {
                suspend = true;
                m.reconsume_times += 1;
            }
        }
        suspend
    }

    /// CONSUMER_SEND_MSG_BACK, falling back to a send to `%RETRY%<group>` (Java
    /// `sendMessageBack`). `Ok` when the message is in the broker's hands again.
    pub(crate) fn send_message_back(
        &self,
        m: &MessageExt,
        delay: ReconsumeDelay,
        mq: &MessageQueue,
    ) -> Result<()> {
        let addr = self
            .instance
            .find_broker_address_in_publish(&mq.broker_name)
            .unwrap_or_else(|| m.store_host.to_string());
        let header = ConsumerSendMsgBackRequestHeader {
            offset: m.commit_log_offset,
            group: self.group.clone(),
            delay_level: delay.wire(),
            origin_msg_id: Some(m.msg_id().to_string()),
            origin_topic: Some(m.topic().to_string()),
            unit_mode: false,
            max_reconsume_times: Some(self.options.max_reconsume_times_concurrently()),
            broker_name: Some(mq.broker_name.to_string()),
        };
        match self
            .instance
            .api()
            .consumer_send_message_back(&addr, &header, SEND_BACK_TIMEOUT)
        {
            Ok(()) => Ok(()),
            Err(e) => {
                warn!(
                    "{}: send-back of {} failed ({e}); sending to the retry topic",
                    self.group,
                    m.msg_id()
                );
                if self.send_back_as_normal_message(m, mq) {
                    Ok(())
                } else {
                    Err(e.context(format!(
                        "send-back of {} (the send to the retry topic failed too)",
                        m.msg_id()
                    )))
                }
            }
        }
    }

    /// Sends `m` as a new message to `%RETRY%<group>` with the retry bookkeeping
    /// properties; past the maximum the broker moves it to the DLQ.
    fn send_back_as_normal_message(&self, m: &MessageExt, _mq: &MessageQueue) -> bool {
        let producer = self.fallback_producer.read().clone();
        let Some(producer) = producer else {
            return false;
        };
        let mut msg = crate::message::Message::new(retry_topic(&self.group), m.body().to_vec());
        for (k, v) in m.message.properties() {
            msg.put_property(k, v);
        }
        let origin = m
            .property(property::ORIGIN_MESSAGE_ID)
            .unwrap_or(m.msg_id())
            .to_string();
        msg.put_property(property::ORIGIN_MESSAGE_ID, origin);
        msg.set_flag(m.flag());
        msg.put_property(property::RETRY_TOPIC, m.topic());
        msg.put_property(
            property::RECONSUME_TIME,
            (m.reconsume_times + 1).to_string(),
        );
        msg.put_property(
            property::MAX_RECONSUME_TIMES,
            self.options.max_reconsume_times_concurrently().to_string(),
        );
        msg.remove_property(property::TRAN_MSG);
        msg.remove_property(property::UNIQ_KEY);
        msg.set_delay_time_level(3 + u32::try_from(m.reconsume_times).unwrap_or(0));
        match producer.send(&msg) {
            Ok(_) => true,
            Err(e) => {
                warn!(
                    "{}: sending {} to the retry topic failed: {e}",
                    self.group,
                    m.msg_id()
                );
                false
            }
        }
    }

    /// `topic` without the namespace (a copy only with a namespace).
    fn user_topic<'a>(&self, topic: &'a str) -> std::borrow::Cow<'a, str> {
        match self.namespace.as_deref() {
            None => std::borrow::Cow::Borrowed(topic),
            ns => std::borrow::Cow::Owned(crate::client::namespace::unwrap(ns, topic)),
        }
    }

    /// The consumer's figures now (`PushConsumer::stats`).
    pub(crate) fn stats_snapshot(&self) -> crate::ConsumerStats {
        let pqs: Vec<(MessageQueue, Arc<ProcessQueue>)> = self
            .rebalance
            .process_queues
            .read()
            .iter()
            .filter(|(_, pq)| !pq.is_dropped())
            .map(|(mq, pq)| (mq.clone(), pq.clone()))
            .collect();
        let offsets = self.offset_store.offsets();
        let mut queues: Vec<crate::QueueStats> = pqs
            .into_iter()
            .map(|(mq, pq)| {
                let (count, bytes, max) = pq.stats();
                let consumed = offsets.get(&mq).copied();
                let mut user = mq;
                user.topic = self.user_topic(&user.topic).as_ref().into();
                crate::QueueStats::new(user, (count, bytes), consumed, max)
            })
            .collect();
        queues.sort_by(|a, b| a.queue.cmp(&b.queue));
        self.observer.counters.snapshot(
            &self.group,
            queues,
            (self.pool.size(), self.pool.busy()),
            self.instance.client_stats(),
        )
    }

    /// Queues held now, with their process queues.
    pub(crate) fn held_queues(&self) -> Vec<MessageQueue> {
        let mut v: Vec<MessageQueue> = self
            .rebalance
            .process_queues
            .read()
            .iter()
            .filter(|(_, pq)| !pq.is_dropped())
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }

    /// Records a consumed offset in the offset store, unless shutdown has stopped
    /// recording.
    fn record_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let recording = self.recording.read();
        if *recording {
            self.offset_store.update_offset(mq, offset, increase_only);
        } else {
            debug!(
                "{}: {offset} of {mq} not recorded: shutdown stopped recording",
                self.group
            );
        }
    }

    /// Shutdown: from now on listeners that return are not acknowledged. Waits for an
    /// update in progress, so the final persist sees every recorded offset.
    pub(crate) fn stop_recording_offsets(&self) {
        *self.recording.write() = false;
    }

    /// Drops every queue (stops pulls, pops and consumption).
    pub(crate) fn drop_all_queues(&self) {
        for pq in self.rebalance.process_queues.read().values() {
            pq.set_dropped(true);
        }
        for pq in self.rebalance.pop_process_queues.read().values() {
            pq.set_dropped(true);
        }
    }

    /// Commits the offsets of every held queue, all at once, acknowledged by `deadline`
    /// (shutdown): no lock is held while they are on the way.
    pub(crate) fn persist_offsets_until(&self, deadline: std::time::Instant) {
        let _persisting = self.persisting.lock();
        let all: HashSet<MessageQueue> = self
            .rebalance
            .process_queues
            .read()
            .keys()
            .cloned()
            .collect();
        if let Err((failed, e)) = self.offset_store.persist_until(&all, deadline) {
            warn!(
                "{}: {failed} of {} offsets not committed at shutdown ({e}); their messages come again",
                self.group,
                all.len()
            );
        }
    }
}

impl RebalanceHooks for PushConsumerImpl {
    fn message_queue_changed(
        &self,
        topic: &str,
        all: &HashSet<MessageQueue>,
        mine: &HashSet<MessageQueue>,
    ) {
        self.update_topic_limits(topic, mine.len());
        // A new subscription version tells the broker to take the fresh heartbeat.
        if let Some(sub) = self.rebalance.subscriptions.write().get_mut(topic) {
            sub.sub_version = crate::util::now_millis();
        }
        let listener = self.queue_listener.read().clone();
        if let Some(l) = listener {
            crate::consumer::queue_listener::notify_allocation(
                &self.group,
                self.namespace.as_deref(),
                l.as_ref(),
                (topic, all, mine),
            );
        }
    }

    fn allocation_changed(&self) {
        self.instance.send_heartbeat_to_all_brokers_waiting();
    }

    fn remove_unnecessary_message_queue(&self, mq: &MessageQueue, pq: &ProcessQueue) -> bool {
        self.offset_store.persist(mq);
        self.offset_store.remove_offset(mq);
        if self.is_orderly() && self.options.message_model == MessageModel::Clustering {
            // Unlock only when no listener is running on the queue; else try next round.
            match pq.consume_lock.try_lock_for(Duration::from_millis(1000)) {
                Some(_g) => self.rebalance.unlock(mq, true),
                None => {
                    let n = pq.inc_try_unlock_times();
                    debug!("{}: {mq} busy, unlock deferred ({n} tries)", self.group);
                    return false;
                }
            }
        }
        true
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        self.offset_store.remove_offset(mq);
    }

    fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64> {
        PushConsumerImpl::compute_pull_from_where(self, mq)
    }

    fn dispatch_pull_requests(&self, requests: Vec<(MessageQueue, Arc<ProcessQueue>, i64)>) {
        for (mq, pq, offset) in requests {
            self.instance.execute_pull_request_immediately(PullRequest {
                consumer: self.me.clone(),
                mq,
                pq,
                next_offset: offset,
                previously_locked: false,
            });
        }
    }

    fn drops_idle_queues(&self) -> bool {
        true
    }

    /// Java `RebalancePushImpl.clientRebalance`: orderly and broadcasting consumers
    /// always allocate here (Java has no orderly POP).
    fn client_rebalance(&self, _topic: &str) -> bool {
        self.options.client_rebalance
            || self.is_orderly()
            || self.options.message_model == MessageModel::Broadcasting
    }

    fn dispatch_pop_requests(&self, requests: Vec<super::rebalance::PopStart>) {
        for (mq, pq) in requests {
            self.instance
                .execute_pull_request_immediately(pop::PopRequest {
                    consumer: self.me.clone(),
                    mq,
                    pq,
                });
        }
    }
}

#[cfg(test)]
mod tests;
