//! Consumers: the push consumer (Java `DefaultMQPushConsumer`), the lite pull consumer
//! (Java `DefaultLitePullConsumer`), rebalance with Java's
//! allocation strategies, offset stores, retry and DLQ handling.
//!
//! The crate docs show each consumer in use; this module owns the facades and their
//! options, and wires the engines below to the shared client instance.

mod allocate;
mod hook;
mod lite_pull;
mod offset_store;
mod options;
mod pool;
mod pop;
mod process_queue;
mod pull;
mod push;
mod push_builder;
mod queue_listener;
mod rebalance;
mod stats;
mod subscription;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use log::info;

use crate::client::validators::{check_group, check_topic, DEFAULT_CONSUMER_GROUP};
use crate::client::{namespace, ClientOptions, ConsumerInner, ServiceState};
use crate::error::{Error, Result};
use crate::message::{MessageExt, MessageQueue};

pub use crate::protocol::heartbeat::MessageModel;
pub use allocate::{
    AllocateAveragely, AllocateAveragelyByCircle, AllocateByConfig, AllocateByMachineRoom,
    AllocateConsistentHash, AllocateMachineRoomNearby, AllocateStrategy,
};
pub use hook::{ConsumeContext, ConsumeHook, ConsumeHookStatus};
pub use lite_pull::{LitePullConsumer, LitePullConsumerBuilder, LitePullOptions};
pub(crate) use offset_store::default_local_offset_dir;
#[cfg(feature = "unstable-internals")]
pub(crate) use offset_store::parse_offsets_file;
use options::follow_new_subscription;
pub(crate) use options::ConsumerConfig;
pub use options::{PushConsumerOptions, MAX_POP_INVISIBLE_TIME, MIN_POP_INVISIBLE_TIME};
pub use push_builder::PushConsumerBuilder;

/// A PULL_MESSAGE response of `mq` as a consumer subscribed to every tag processes it
/// (decoded, filtered, the offsets added): the pull path's decoding, for the fuzzing module.
#[cfg(feature = "unstable-internals")]
pub(crate) fn process_pull_response(
    mq: &crate::message::MessageQueue,
    response: crate::protocol::RemotingCommand,
) -> Result<Vec<crate::message::MessageExt>> {
    let sub = subscription::build_subscription_data(&mq.topic, &MessageSelector::by_tag("*"))?;
    pull::process_response(&pull::PullRouting::default(), mq, &sub, response).map(|r| r.msgs)
}
pub use pop::{ReceivedMessage, SimpleConsumer, SimpleConsumerBuilder};
pub use queue_listener::{MessageQueueListener, TopicQueueChangeListener};
pub use subscription::MessageSelector;

use push::PushConsumerImpl;
use rebalance::RebalanceImpl;

/// What a concurrent listener answers (Java `ConsumeStatus`).
#[doc(alias = "ConsumeConcurrentlyStatus")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeStatus {
    /// Consumed: all messages, or those up to [`ConsumeConcurrentlyContext::set_ack_index`].
    #[doc(alias = "CONSUME_SUCCESS")]
    Success,
    /// Failed: the messages come back later through `%RETRY%<group>`, with a delay that grows
    /// with each attempt (see [`ReconsumeDelay`]).
    #[doc(alias = "RECONSUME_LATER")]
    ReconsumeLater,
}

/// When a message that failed concurrent consumption is delivered again (Java
/// `ConsumeConcurrentlyContext.delayLevelWhenNextConsume`: 0, a level, or below 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReconsumeDelay {
    /// The broker chooses: delay level 3 + the number of earlier attempts (Java 0).
    #[default]
    Broker,
    /// This delay level (1 = 1 s, 2 = 5 s, 3 = 10 s, ... as the broker's
    /// `messageDelayLevel` lists them). Level 0 is [`ReconsumeDelay::Broker`].
    Level(u32),
    /// No more attempts: straight to the dead-letter queue `%DLQ%<group>` (Java -1).
    DeadLetter,
}

impl ReconsumeDelay {
    /// The `delayLevel` field of CONSUMER_SEND_MSG_BACK.
    pub(crate) fn wire(self) -> i32 {
        // Level(0) is Broker on the wire as in Java; a level past i32::MAX is clamped.
        match self {
            ReconsumeDelay::Broker => 0,
            ReconsumeDelay::Level(n) => i32::try_from(n).unwrap_or(i32::MAX),
            ReconsumeDelay::DeadLetter => -1,
        }
    }
}

/// Context of one concurrent consumption (Java `ConsumeConcurrentlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeConcurrentlyContext {
    pub(crate) message_queue: MessageQueue,
    pub(crate) reconsume_delay: ReconsumeDelay,
    pub(crate) ack_index: Option<usize>,
}

impl ConsumeConcurrentlyContext {
    pub(crate) fn new(message_queue: MessageQueue) -> Self {
        ConsumeConcurrentlyContext {
            message_queue,
            reconsume_delay: ReconsumeDelay::Broker,
            ack_index: None,
        }
    }

    /// The queue the messages came from.
    pub fn message_queue(&self) -> &MessageQueue {
        &self.message_queue
    }

    /// With [`ConsumeStatus::Success`], only messages `0..=index` count as consumed; the
    /// rest are retried (Java `setAckIndex`). By default all are consumed.
    #[doc(alias = "setAckIndex")]
    pub fn set_ack_index(&mut self, index: usize) {
        self.ack_index = Some(index);
    }

    /// When the failed messages of this call come back (Java
    /// `setDelayLevelWhenNextConsume`).
    #[doc(alias = "setDelayLevelWhenNextConsume")]
    pub fn set_reconsume_delay(&mut self, delay: ReconsumeDelay) {
        self.reconsume_delay = delay;
    }
}

/// What an orderly listener answers (Java `ConsumeOrderlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumeOrderlyStatus {
    /// Consumed; the offset moves on.
    #[doc(alias = "SUCCESS")]
    Success,
    /// Retry the same messages after a pause, holding the queue's order.
    #[doc(alias = "SUSPEND_CURRENT_QUEUE_A_MOMENT")]
    Suspend,
}

/// Context of one orderly consumption (Java `ConsumeOrderlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeOrderlyContext {
    pub(crate) message_queue: MessageQueue,
    pub(crate) suspend_time: Option<Duration>,
}

impl ConsumeOrderlyContext {
    pub(crate) fn new(message_queue: MessageQueue) -> Self {
        ConsumeOrderlyContext {
            message_queue,
            suspend_time: None,
        }
    }

    /// The queue the messages came from.
    pub fn message_queue(&self) -> &MessageQueue {
        &self.message_queue
    }

    /// The pause before a suspended batch is retried, for this call only (default: the
    /// consumer's [`PushConsumerBuilder::suspend_time`]; Java
    /// `setSuspendCurrentQueueTimeMillis`).
    #[doc(alias = "setSuspendCurrentQueueTimeMillis")]
    pub fn set_suspend_time(&mut self, pause: Duration) {
        self.suspend_time = Some(pause);
    }
}

/// Where a consumer group starts on a queue for which it has no stored offset (Java
/// `ConsumeFromWhere` with `consumeTimestamp`). A stored offset always wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ConsumeFromWhere {
    /// From the end of the queue: only messages sent from now on (Java default).
    #[default]
    #[doc(alias = "CONSUME_FROM_LAST_OFFSET")]
    LastOffset,
    /// From the first message the broker still stores.
    #[doc(alias = "CONSUME_FROM_FIRST_OFFSET")]
    FirstOffset,
    /// From the first message stored at or after this time.
    #[doc(alias = "CONSUME_FROM_TIMESTAMP")]
    Timestamp(SystemTime),
}

impl ConsumeFromWhere {
    /// The value heartbeats carry.
    pub(crate) fn wire(self) -> crate::protocol::heartbeat::ConsumeFromWhere {
        use crate::protocol::heartbeat::ConsumeFromWhere as W;
        match self {
            ConsumeFromWhere::LastOffset => W::ConsumeFromLastOffset,
            ConsumeFromWhere::FirstOffset => W::ConsumeFromFirstOffset,
            ConsumeFromWhere::Timestamp(_) => W::ConsumeFromTimestamp,
        }
    }
}

pub(crate) type ConcurrentFn =
    dyn Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeStatus + Send + Sync;
type OrderlyFn =
    dyn Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus + Send + Sync;

pub(crate) enum Listener {
    Concurrently(Box<ConcurrentFn>),
    Orderly(Box<OrderlyFn>),
}

impl Listener {
    fn kind(&self) -> &'static str {
        match self {
            Listener::Concurrently(_) => "concurrently",
            Listener::Orderly(_) => "orderly",
        }
    }
}

/// A push consumer: messages are pulled for you and handed to your listener.
/// Dropping it shuts it down.
pub struct PushConsumer {
    inner: Arc<PushConsumerImpl>,
}

impl fmt::Debug for PushConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushConsumer")
            .field("group", &self.inner.group)
            .field("client_id", &self.inner.instance.client_id())
            .field("state", &*self.inner.state.lock())
            .finish_non_exhaustive()
    }
}

impl PushConsumer {
    /// A builder for a consumer of `group`.
    pub fn builder(group: impl Into<String>) -> PushConsumerBuilder {
        PushConsumerBuilder {
            group: group.into(),
            client: ClientOptions::new(),
            options: PushConsumerOptions::default(),
            subscriptions: Vec::new(),
            listener: None,
            strategy: None,
            consume_hooks: Default::default(),
            request_hooks: Default::default(),
            queue_listener: None,
        }
    }

    /// Registers with the shared client instance, starts it and starts consuming (Java
    /// `DefaultMQPushConsumerImpl.start`). Starting twice, or after shutdown, is a state
    /// error.
    fn start(&self) -> Result<()> {
        let c = &self.inner;
        if *c.state.lock() != ServiceState::CreateJust {
            return Err(Error::state(format!(
                "the push consumer {} was started before",
                c.group
            )));
        }
        let instance = &c.instance;
        let me: Arc<dyn ConsumerInner> = c.clone();
        if !instance.register_consumer(&c.group, me) {
            c.pool.shutdown(Duration::ZERO);
            return Err(Error::state(format!(
                "the consumer group {} is already registered in client {}; choose another name",
                c.group,
                instance.client_id()
            )));
        }
        if let Err(e) = instance.start() {
            instance.unregister_consumer(&c.group);
            c.pool.shutdown(Duration::ZERO);
            return Err(e);
        }
        // The retry/DLQ fallback sends through a producer of this client id.
        if c.options.message_model == MessageModel::Clustering {
            // One per consumer group, so that consumers sharing an instance do not clash.
            let group = format!(
                "{}_{}",
                crate::client::validators::CLIENT_INNER_PRODUCER_GROUP,
                c.group
            );
            let config = instance.config().clone();
            match crate::producer::Producer::builder(group).build_with_config(config) {
                Ok(p) => {
                    if p.start().is_ok() {
                        *c.fallback_producer.write() = Some(Arc::new(p));
                    }
                }
                Err(e) => log::warn!("{}: no fallback producer: {e}", c.group),
            }
        }
        *c.state.lock() = ServiceState::Running;
        let group = namespace::unwrap(instance.config().namespace().as_deref(), &c.group);
        *c.trace.write() = crate::producer::start_trace(
            c.options.enable_msg_trace,
            &group,
            instance.config().clone(),
            c.options.trace_topic.as_deref(),
        );
        c.start_lock_timer()?;
        c.start_consume_timeout_check();
        let topics = c.rebalance.subscribed_topics();
        let mut missing = Vec::new();
        for t in topics {
            if let Err(e) = instance.update_topic_route(&t) {
                if crate::client::validators::is_retry_topic(&t) {
                    missing.push(t);
                } else {
                    log::warn!("{}: route of {t}: {e}", c.group);
                }
            }
        }
        instance.send_heartbeat_to_all_brokers_with_lock();
        // A new group's retry topic exists once a broker has our heartbeat (the broker
        // creates it and registers it with the name servers at once): ask again now, or
        // the first retries wait for the next route refresh (30 s).
        for t in missing {
            if let Err(e) = instance.update_topic_route(&t) {
                log::debug!("{}: route of {t} not there yet: {e}", c.group);
            }
        }
        instance.rebalance_immediately();
        info!(
            "push consumer {} started on client {}",
            c.group,
            instance.client_id()
        );
        Ok(())
    }

    /// Subscribes to one more topic, before or after start (Java `subscribe` on a running
    /// consumer): a running consumer fetches the route, sends its heartbeat and rebalances
    /// at once. Subscribing again to a topic replaces its expression.
    pub fn subscribe(&self, topic: &str, tag_expression: &str) -> Result<()> {
        self.subscribe_with(topic, MessageSelector::by_tag(tag_expression))
    }

    /// [`subscribe`](Self::subscribe) with a tag or SQL92 selector.
    pub fn subscribe_with(&self, topic: &str, selector: MessageSelector) -> Result<()> {
        check_topic(topic)?;
        let c = &self.inner;
        let ns = c.instance.config().namespace();
        let wrapped = namespace::wrap(ns.as_deref(), topic);
        let sub = subscription::build_subscription_data(&wrapped, &selector)?;
        c.rebalance
            .subscriptions
            .write()
            .insert(wrapped.clone(), sub);
        if *c.state.lock() == ServiceState::Running {
            follow_new_subscription(&c.instance, &c.group, &wrapped);
        }
        Ok(())
    }

    /// Stops consuming `topic` (Java `unsubscribe`): its queues are dropped at the next
    /// rebalance, which a running consumer starts at once, with their offsets persisted.
    pub fn unsubscribe(&self, topic: &str) -> Result<()> {
        check_topic(topic)?;
        let c = &self.inner;
        let ns = c.instance.config().namespace();
        let wrapped = namespace::wrap(ns.as_deref(), topic);
        if c.rebalance.subscriptions.write().remove(&wrapped).is_none() {
            return Err(Error::invalid_argument(format!(
                "the consumer {} does not subscribe to {topic}",
                c.group
            )));
        }
        if *c.state.lock() == ServiceState::Running {
            c.instance.send_heartbeat_to_all_brokers_with_lock();
            c.instance.rebalance_immediately();
        }
        Ok(())
    }

    /// Sends a consumed message back to the broker for redelivery to the group after
    /// `delay` (Java `sendMessageBack(msg, delayLevel)`): [`ReconsumeDelay::Broker`] lets
    /// the broker choose from the message's reconsume count (Java 0),
    /// [`ReconsumeDelay::Level`] is one of the broker's delay levels (1 = 1 s, 2 = 5 s, ...),
    /// [`ReconsumeDelay::DeadLetter`] sends it straight to the DLQ (Java -1); past the
    /// group's maximum reconsume times the broker moves it to the DLQ. Falls back to a send
    /// to the retry topic, as Java does. For a message this consumer received: it goes to
    /// the broker that delivered it.
    pub fn send_message_back(&self, msg: &MessageExt, delay: ReconsumeDelay) -> Result<()> {
        let c = &self.inner;
        if *c.state.lock() != ServiceState::Running {
            return Err(Error::state(format!(
                "the push consumer {} is not running",
                c.group
            )));
        }
        let mq = MessageQueue::new(msg.topic(), msg.broker_name(), msg.queue_id());
        c.send_message_back(msg, delay, &mq)
    }

    /// What the message trace did so far; `None` when the consumer does not trace.
    pub fn trace_stats(&self) -> Option<crate::TraceStats> {
        self.inner.trace.read().as_ref().map(|t| t.stats())
    }

    /// Topics subscribed (with namespace), the group's retry topic included.
    pub fn subscriptions(&self) -> Vec<String> {
        self.inner.rebalance.subscribed_topics()
    }

    /// The consumer group (with namespace).
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// The client id of the shared client instance (`ip@instance[@unit]`), as brokers and
    /// the admin tool list it.
    pub fn client_id(&self) -> String {
        self.inner.instance.client_id().to_string()
    }

    /// The shared client instance: its routes, broker table and remoting client, for
    /// diagnostics and tests.
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn client_instance(&self) -> Arc<crate::client::MQClientInstance> {
        self.inner.instance.clone()
    }

    /// Queues this consumer holds now, pulled or (assigned by a broker in POP mode, see
    /// [`PushConsumerOptions::client_rebalance`]) popped, sorted; a POP assignment of a
    /// whole topic is its queue -1. None once [`shutdown`](Self::shutdown) has begun (from
    /// then on it takes no message from them, and a listener's retry leaves its messages
    /// uncommitted instead of sending them back).
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        if !self.inner.is_running() {
            return Vec::new();
        }
        let mut queues = self.inner.held_queues();
        queues.extend(
            self.inner
                .rebalance
                .pop_process_queues
                .read()
                .iter()
                .filter(|(_, pq)| !pq.is_dropped())
                .map(|(mq, _)| mq.clone()),
        );
        queues.sort();
        queues
    }

    /// Offsets in memory (what the next persist writes).
    pub fn offsets(&self) -> std::collections::HashMap<MessageQueue, i64> {
        self.inner.offset_store.offsets()
    }

    /// The consumer's figures now: per topic, messages pulled, consumed and failed and
    /// the listener's time; per queue held, messages and bytes cached, the offset to commit
    /// and the lag; the consume pool's size and busy threads; the client instance's
    /// connections, heartbeats, route refreshes and rebalances. Cheap: atomics and a few
    /// short locks, no network call.
    pub fn stats(&self) -> crate::ConsumerStats {
        self.inner.stats_snapshot()
    }

    /// Adds a hook called around every listener call; hooks run in registration order, on
    /// the consume thread. See [`ConsumeHook`].
    pub fn register_consume_hook(&self, hook: Arc<dyn ConsumeHook>) {
        self.inner.observer.register(hook)
    }

    /// Adds a hook called around every request of this consumer's client instance (Java
    /// `RPCHook`), which every client with the same client id shares; requests sent before
    /// it is registered (those of `start`) do not see it ([`PushConsumerBuilder::request_hook`]
    /// sees them all).
    pub fn register_request_hook(&self, hook: Arc<dyn crate::RequestHook>) {
        self.inner.instance.register_request_hook(hook)
    }

    /// Current consume threads.
    pub fn consume_pool_size(&self) -> usize {
        self.inner.pool.size()
    }

    /// Stops pulling (consumption of what is cached goes on) — Java `suspend`.
    pub fn suspend(&self) {
        self.inner.set_paused(true);
    }

    /// Resumes pulling — Java `resume`.
    pub fn resume(&self) {
        self.inner.set_paused(false);
        self.inner.instance.rebalance_immediately();
    }

    /// Resizes the consume pool now, as the periodic adjustment does: one more thread
    /// while the backlog is above the threshold (up to the maximum), one fewer when it is
    /// below (down to the minimum).
    pub fn adjust_thread_pool(&self) {
        self.inner.adjust_thread_pool();
    }

    /// Shuts the consumer down in Java's order (`DefaultMQPushConsumerImpl.shutdown`):
    /// stops pulling; stops the consume pool, dropping batches that have not started and
    /// waiting up to [`await_termination_when_shutdown`] (default 0, as in Java) for
    /// listeners that are running; persists the offsets of everything consumed,
    /// including what listeners finished during that wait; unlocks orderly queues;
    /// unregisters from the brokers; and stops the client instance if nothing else uses
    /// it. Idempotent; `Drop` calls it.
    ///
    /// A listener that asks for a retry during the wait is not sent back to the broker:
    /// its batch stays uncommitted and comes again, unchanged, from its own queue.
    ///
    /// A listener still running when the wait ends is not waited for (its thread ends on
    /// its own when the listener returns) and its batch is never acknowledged: whatever
    /// the listener returns, that batch's offset is not committed, so the batch — like
    /// every batch that had not started — is delivered to the group again (to a consumer
    /// started later, or to another member). Messages whose listener returned before the
    /// wait ended are committed and do not come again. The wait bounds what this call
    /// spends on listeners; everything after it — the offsets of every held queue, sent
    /// together, the unlocks, the unregistration and the threads — shares one deadline,
    /// `shutdown_timeout` (10 s) after the wait, even when a broker stops reading.
    ///
    /// [`await_termination_when_shutdown`]: PushConsumerBuilder::await_termination_when_shutdown
    pub fn shutdown(&self) {
        let c = &self.inner;
        {
            let mut st = c.state.lock();
            match *st {
                ServiceState::Running => *st = ServiceState::ShutdownAlready,
                ServiceState::CreateJust => {
                    // Built but never started: only the consume pool runs.
                    *st = ServiceState::ShutdownAlready;
                    drop(st);
                    c.pool.shutdown(Duration::ZERO);
                    return;
                }
                _ => return,
            }
        }
        // Pulls, rebalances and the periodic persist see the state and stop. Queues stay
        // held (not dropped) so that listeners ending during the wait record their offsets.
        c.stop_lock_timer();
        c.pool.shutdown(c.options.await_termination_when_shutdown);
        // From here on no offset moves: a listener that returns later is not acknowledged.
        c.stop_recording_offsets();
        // One deadline for the rest: the trace, the commits (sent together), the unlocks,
        // the unregistration and the threads, however many queues and brokers.
        let deadline = std::time::Instant::now() + c.instance.config().remoting.shutdown_timeout;
        let trace = c.trace.write().take();
        if let Some(t) = trace {
            t.shutdown_until(deadline);
        }
        c.persist_offsets_until(deadline);
        if c.is_orderly_clustering() {
            c.rebalance.unlock_all_until(deadline);
        }
        let fallback = c.fallback_producer.write().take();
        if let Some(p) = fallback {
            p.shutdown_until(deadline);
        }
        c.instance
            .unregister_consumer_until(&c.group, Some(deadline));
        c.drop_all_queues();
        c.instance.shutdown_until(deadline);
        info!("push consumer {} shut down", c.group);
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn reconsume_delay_keeps_the_delay_levels_send_back_used_to_take() {
        // `send_message_back(msg, 0)` was "the broker decides", `n` a level, below 0 the DLQ.
        assert_eq!(ReconsumeDelay::Broker.wire(), 0);
        assert_eq!(ReconsumeDelay::Level(0).wire(), 0);
        assert_eq!(ReconsumeDelay::Level(2).wire(), 2);
        assert_eq!(ReconsumeDelay::Level(18).wire(), 18);
        assert_eq!(ReconsumeDelay::Level(u32::MAX).wire(), i32::MAX);
        assert_eq!(ReconsumeDelay::DeadLetter.wire(), -1);
    }

    /// Client settings that would put a broadcasting offsets file outside its directory.
    const ESCAPING: [(&str, &str); 4] = [
        ("instance name", "../../../escape"),
        ("unit name", "../../escape"),
        ("namespace", "../../escape"),
        ("client IP", "../.."),
    ];

    /// Client options with one of `ESCAPING` set.
    fn escaping(what: &str, v: &str) -> ClientOptions {
        let o = ClientOptions::new();
        match what {
            "instance name" => o.instance_name(v),
            "unit name" => o.unit_name(v),
            "namespace" => o.namespace(v),
            _ => o.client_ip(v),
        }
    }

    #[test]
    fn broadcasting_consumers_reject_names_that_would_leave_the_offset_directory() {
        let root = std::env::temp_dir().join(format!(
            "rmq-escape-{}-{}",
            std::process::id(),
            crate::util::random_u64()
        ));
        let dir = root.join("a/b/c/offsets");
        let mut accepted = Vec::new();
        for (what, value) in ESCAPING {
            let b = LitePullConsumer::builder("g")
                .message_model(MessageModel::Broadcasting)
                .offset_store_dir(dir.clone())
                .client_options(escaping(what, value));
            match b.build() {
                Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
                Ok(_) => accepted.push(format!("lite pull, {what}")),
            }
            let b = PushConsumer::builder("g")
                .message_model(MessageModel::Broadcasting)
                .offset_store_dir(dir.clone())
                .subscribe("T", "*")
                .listener(|_, _| ConsumeStatus::Success)
                .client_options(escaping(what, value));
            match b.build() {
                Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
                Ok(_) => accepted.push(format!("push, {what}")),
            }
        }
        assert!(accepted.is_empty(), "accepted: {accepted:?}");
        assert!(!root.exists(), "nothing was written");
    }

    #[test]
    fn pop_options_outside_java_ranges_are_refused_before_anything_is_sent() {
        let secs = Duration::from_secs;
        let build = |invisible: Duration, batch: u32| {
            PushConsumer::builder("g")
                .client_options(ClientOptions::new().namesrv_addr("127.0.0.1:9"))
                .subscribe("T", "*")
                .listener(|_, _| ConsumeStatus::Success)
                .client_rebalance(false)
                .pop_invisible_time(invisible)
                .pop_batch_nums(batch)
                .build()
                .map(|_| ())
        };
        for (invisible, batch) in [
            (secs(4), 32),
            (secs(301), 32),
            (secs(60), 0),
            (secs(60), 33),
        ] {
            let e = build(invisible, batch).unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidArgument,
                "{invisible:?} {batch}: {e}"
            );
        }
        for (invisible, batch) in [(secs(5), 1), (secs(300), 32)] {
            build(invisible, batch).unwrap();
        }
        let o = PushConsumerOptions::default();
        assert!(
            o.client_rebalance,
            "Java's default: allocated on the client"
        );
        assert_eq!(
            (
                o.pop_invisible_time,
                o.pop_batch_nums,
                o.pop_threshold_for_queue
            ),
            (secs(60), 32, 96)
        );
    }
}
