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
mod pool;
mod pop;
mod process_queue;
mod pull;
mod push;
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
use crate::client::{
    manager, namespace, ClientConfig, ClientOptions, ConsumerInner, MQClientInstance, ServiceState,
};
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

/// Push consumer settings with Java's defaults (Java `DefaultMQPushConsumer` fields).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PushConsumerOptions {
    /// Clustering (default) or broadcasting.
    pub message_model: MessageModel,
    /// Start position of a group without stored offsets.
    pub consume_from_where: ConsumeFromWhere,
    /// Consume threads at least (Java 20).
    pub consume_thread_min: usize,
    /// Consume threads at most (Java 20).
    pub consume_thread_max: usize,
    /// Backlog (messages not yet consumed, summed over the held queues) above which the
    /// periodic pool adjustment adds a consume thread (Java 100,000).
    pub adjust_thread_pool_nums_threshold: u64,
    /// Pause pulls of a queue whose cached offsets span more than this (Java 2000).
    pub consume_concurrently_max_span: u64,
    /// Pause pulls of a queue with more cached messages (Java 1000).
    pub pull_threshold_for_queue: usize,
    /// Pause pulls of a queue with more cached MiB (Java 100).
    pub pull_threshold_size_for_queue_mib: u64,
    /// Cached messages per topic: when set, each held queue of a topic gets an equal share
    /// (at least 1) in place of `pull_threshold_for_queue`, recomputed at every rebalance
    /// (Java `pullThresholdForTopic`, -1: unset).
    #[doc(alias = "pullThresholdForTopic")]
    pub pull_threshold_for_topic: Option<usize>,
    /// Cached MiB per topic, shared the same way in place of
    /// `pull_threshold_size_for_queue_mib` (Java `pullThresholdSizeForTopic`, -1: unset).
    #[doc(alias = "pullThresholdSizeForTopic")]
    pub pull_threshold_size_for_topic_mib: Option<u64>,
    /// Pause between pulls of a queue (Java 0).
    pub pull_interval: Duration,
    /// Messages per listener call (Java 1).
    pub consume_message_batch_max_size: usize,
    /// Messages per pull (Java 32).
    pub pull_batch_size: usize,
    /// Send the subscription with every pull (Java false).
    pub post_subscription_when_pull: bool,
    /// Deliveries of a failed message before it goes to the DLQ; `None` is Java's -1:
    /// 16 for a concurrent listener, unlimited for an orderly one.
    pub max_reconsume_times: Option<u32>,
    /// Orderly: pause before a suspended batch is retried (Java
    /// `suspendCurrentQueueTimeMillis`, 1 s).
    #[doc(alias = "suspendCurrentQueueTimeMillis")]
    pub suspend_time: Duration,
    /// Delay of a pull retry after an error (Java 1 s, `pullTimeDelayMillsWhenException`).
    pub pull_time_delay_when_exception: Duration,
    /// Directory of broadcasting offsets (Java `rocketmq.client.localOffsetStoreDir`).
    pub offset_store_dir: PathBuf,
    /// How long [`PushConsumer::shutdown`] (and `Drop`) waits for listeners that are
    /// running (Java `awaitTerminationMillisWhenShutdown`, default 0: no wait). See
    /// [`PushConsumer::shutdown`] for what happens to a batch whose listener has not
    /// returned by then.
    #[doc(alias = "awaitTerminationMillisWhenShutdown")]
    pub await_termination_when_shutdown: Duration,
    /// A concurrent listener still running on a batch after this long has the batch's
    /// messages sent back for retry and taken off its queue, so that the queue's offset
    /// moves on (Java `consumeTimeout`, 15 min). The listener is not interrupted; what it
    /// returns later no longer counts for those messages. Orderly listeners are not timed.
    #[doc(alias = "consumeTimeout")]
    pub consume_timeout: Duration,
    /// Record a trace of every listener call in the trace topic (Java `enableMsgTrace`,
    /// false).
    #[doc(alias = "enableMsgTrace")]
    pub enable_msg_trace: bool,
    /// The trace topic when tracing (Java `customizedTraceTopic`; default
    /// `RMQ_SYS_TRACE_TOPIC`).
    #[doc(alias = "customizedTraceTopic")]
    pub trace_topic: Option<String>,
    /// How often offsets are written to the broker (Java `persistConsumerOffsetInterval`,
    /// 5 s). This and [`adjust_thread_pool_interval`](Self::adjust_thread_pool_interval)
    /// run on the shared client instance: the first client of a client id to start sets
    /// them.
    #[doc(alias = "persistConsumerOffsetInterval")]
    pub persist_offset_interval: Duration,
    /// How often consume pools are resized to the backlog (Java's adjustment job, 1 min).
    pub adjust_thread_pool_interval: Duration,
    /// Allocate queues here (true, Java's default) or ask a 5.x broker (false, Java
    /// `setClientRebalance(false)`): the broker then allocates, and says per queue whether
    /// to pull it or to pop it (`mqadmin setConsumeMode`). A 4.x broker cannot, and the
    /// allocation stays here. Orderly and broadcasting consumers always allocate here.
    #[doc(alias = "clientRebalance")]
    pub client_rebalance: bool,
    /// POP mode: how long a popped message stays invisible to the group before the broker
    /// hands it out again unless acked (Java `popInvisibleTime`, 60 s, 5 s..=300 s). A
    /// listener that takes longer has it renewed before it expires.
    #[doc(alias = "popInvisibleTime")]
    pub pop_invisible_time: Duration,
    /// POP mode: messages per pop (Java `popBatchNums`, 32, 1..=32).
    #[doc(alias = "popBatchNums")]
    pub pop_batch_nums: u32,
    /// POP mode: pops of a queue pause while more of its messages wait for their ack
    /// (Java `popThresholdForQueue`, 96).
    #[doc(alias = "popThresholdForQueue")]
    pub pop_threshold_for_queue: usize,
    /// POP mode: ack what the listeners of one pop consumed with one BATCH_ACK_MESSAGE
    /// per broker once the last of them returns (or when the first receipts reach half
    /// their invisible time), instead of one ACK_MESSAGE per message (default false: the
    /// Java 5.3 push consumer acks one by one; the 5.x proxy's `enableBatchAck` is false
    /// too). A broker before 5.1.1 refuses batch acks and gets single ones.
    #[doc(alias = "enableBatchAck")]
    pub pop_batch_ack: bool,
}

/// Shortest [`PushConsumerOptions::pop_invisible_time`] (Java `MIN_POP_INVISIBLE_TIME`).
pub const MIN_POP_INVISIBLE_TIME: Duration = Duration::from_secs(5);
/// Longest [`PushConsumerOptions::pop_invisible_time`] (Java `MAX_POP_INVISIBLE_TIME`).
pub const MAX_POP_INVISIBLE_TIME: Duration = Duration::from_secs(300);

impl Default for PushConsumerOptions {
    fn default() -> Self {
        PushConsumerOptions {
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            consume_thread_min: 20,
            consume_thread_max: 20,
            adjust_thread_pool_nums_threshold: 100_000,
            consume_concurrently_max_span: 2000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            pull_threshold_for_topic: None,
            pull_threshold_size_for_topic_mib: None,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            post_subscription_when_pull: false,
            max_reconsume_times: None,
            suspend_time: Duration::from_millis(1000),
            pull_time_delay_when_exception: Duration::from_millis(1000),
            offset_store_dir: default_local_offset_dir(),
            await_termination_when_shutdown: Duration::ZERO,
            consume_timeout: Duration::from_secs(15 * 60),
            enable_msg_trace: false,
            trace_topic: None,
            persist_offset_interval: crate::client::DEFAULT_PERSIST_OFFSET_INTERVAL,
            adjust_thread_pool_interval: crate::client::DEFAULT_ADJUST_THREAD_POOL_INTERVAL,
            client_rebalance: true,
            pop_invisible_time: Duration::from_secs(60),
            pop_batch_nums: 32,
            pop_threshold_for_queue: 96,
            pop_batch_ack: false,
        }
    }
}

impl PushConsumerOptions {
    pub(crate) fn max_reconsume_times_concurrently(&self) -> i32 {
        self.max_reconsume_times
            .map_or(16, |n| i32::try_from(n).unwrap_or(i32::MAX))
    }

    pub(crate) fn max_reconsume_times_orderly(&self) -> i32 {
        self.max_reconsume_times
            .map_or(i32::MAX, |n| i32::try_from(n).unwrap_or(i32::MAX))
    }
}

/// What both consumer builders set up alike: the client configuration and the namespaced
/// group, checked before any client instance exists.
pub(crate) struct ConsumerConfig {
    pub(crate) config: ClientConfig,
    pub(crate) namespace: Option<String>,
    pub(crate) group: String,
}

impl ConsumerConfig {
    /// Wraps `group` in the namespace; for clustering, makes the instance name unique per
    /// process (Java `changeInstanceNameToPID`); for broadcasting, checks that the offsets
    /// file stays inside `offset_dir`, so a bad name creates nothing.
    pub(crate) fn new(
        client: ClientOptions,
        group: &str,
        model: MessageModel,
        offset_dir: &std::path::Path,
    ) -> Result<ConsumerConfig> {
        let mut config = client.into_config();
        let namespace = config.namespace();
        let group = namespace::wrap(namespace.as_deref(), group);
        match model {
            MessageModel::Clustering => config.change_instance_name_to_pid(),
            MessageModel::Broadcasting => {
                offset_store::local_store_path(offset_dir, &config.client_id(), &group)?;
            }
        }
        Ok(ConsumerConfig {
            config,
            namespace,
            group,
        })
    }

    /// The namespaced name of `topic`.
    pub(crate) fn wrap(&self, topic: &str) -> String {
        namespace::wrap(self.namespace.as_deref(), topic)
    }

    /// The shared client instance, the group's rebalance and its offset store.
    pub(crate) fn instance_rebalance_store(
        &self,
        model: MessageModel,
        strategy: Option<Box<dyn AllocateStrategy>>,
        offset_dir: &std::path::Path,
    ) -> Result<(
        Arc<MQClientInstance>,
        RebalanceImpl,
        Box<dyn offset_store::OffsetStore>,
    )> {
        let instance = manager::get_or_create_instance(&self.config)?;
        let strategy = strategy.unwrap_or_else(|| Box::new(AllocateAveragely));
        let rebalance = RebalanceImpl::new(&self.group, model, strategy, instance.clone());
        let store = offset_store::open_store(model, &instance, offset_dir, &self.group)?;
        Ok((instance, rebalance, store))
    }
}

/// What a running consumer does after subscribing to `topic` (with namespace): fetch its
/// route, tell the brokers, rebalance now.
fn follow_new_subscription(instance: &MQClientInstance, group: &str, topic: &str) {
    if let Err(e) = instance.update_topic_route(topic) {
        log::warn!("{group}: route of {topic}: {e}");
    }
    instance.send_heartbeat_to_all_brokers_with_lock();
    instance.rebalance_immediately();
}

/// Builder for [`PushConsumer`].
pub struct PushConsumerBuilder {
    group: String,
    client: ClientOptions,
    options: PushConsumerOptions,
    subscriptions: Vec<(String, MessageSelector)>,
    listener: Option<Listener>,
    strategy: Option<Box<dyn AllocateStrategy>>,
    consume_hooks: crate::util::Hooks<dyn ConsumeHook>,
    request_hooks: crate::util::Hooks<dyn crate::RequestHook>,
    queue_listener: Option<Arc<dyn MessageQueueListener>>,
}

impl fmt::Debug for PushConsumerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushConsumerBuilder")
            .field("group", &self.group)
            .field("client", &self.client)
            .field("options", &self.options)
            .field("subscriptions", &self.subscriptions)
            .field("listener", &self.listener.as_ref().map(Listener::kind))
            .field("strategy", &self.strategy.as_ref().map(|s| s.name()))
            .field("consume_hooks", &self.consume_hooks)
            .field("request_hooks", &self.request_hooks)
            .field("queue_listener", &self.queue_listener.is_some())
            .finish()
    }
}

impl PushConsumerBuilder {
    /// Tells `listener` whenever a rebalance changes the queues this consumer holds of a
    /// subscribed topic (Java `setMessageQueueListener`); it runs on the rebalance thread
    /// after the new queues are taken and before their first pulls.
    #[doc(alias = "setMessageQueueListener")]
    pub fn message_queue_listener(mut self, listener: impl MessageQueueListener + 'static) -> Self {
        self.queue_listener = Some(Arc::new(listener));
        self
    }

    /// Adds a hook called around every listener call, from the first one on (Java
    /// `registerConsumeMessageHook`); see [`ConsumeHook`].
    /// [`PushConsumer::register_consume_hook`] adds one to a running consumer.
    #[doc(alias = "registerConsumeMessageHook")]
    pub fn consume_hook(mut self, hook: Arc<dyn ConsumeHook>) -> Self {
        self.consume_hooks.0.push(hook);
        self
    }

    /// Adds a hook called around every request of the client instance, from the first
    /// heartbeat and pull on (Java `RPCHook`); see [`RequestHook`](crate::RequestHook).
    pub fn request_hook(mut self, hook: Arc<dyn crate::RequestHook>) -> Self {
        self.request_hooks.0.push(hook);
        self
    }

    /// What every client shares: name servers, instance name, namespace, credentials, TLS,
    /// timeouts (default [`ClientOptions::new`]).
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        tag_expression: impl Into<String>,
    ) -> Self {
        self.subscriptions
            .push((topic.into(), MessageSelector::by_tag(tag_expression)));
        self
    }

    /// Subscribes to `topic` with a selector (tag or SQL92).
    pub fn subscribe_with(mut self, topic: impl Into<String>, selector: MessageSelector) -> Self {
        self.subscriptions.push((topic.into(), selector));
        self
    }

    /// Deliveries of a failed message before it goes to the DLQ (default: 16 for a
    /// concurrent listener, unlimited for an orderly one).
    pub fn max_reconsume_times(mut self, times: u32) -> Self {
        self.options.max_reconsume_times = Some(times);
        self
    }

    /// The concurrent listener (Java `MessageListenerConcurrently`); runs on the consume
    /// pool, several calls at once. Replaces an earlier listener.
    #[doc(alias = "registerMessageListener")]
    #[doc(alias = "MessageListenerConcurrently")]
    pub fn listener(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeStatus
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.listener = Some(Listener::Concurrently(Box::new(f)));
        self
    }

    /// The orderly listener (Java `MessageListenerOrderly`): one call per queue at a time,
    /// in queue order; in clustering mode the queue is locked at the broker while this
    /// consumer holds it. Replaces an earlier listener.
    #[doc(alias = "MessageListenerOrderly")]
    pub fn orderly_listener(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.listener = Some(Listener::Orderly(Box::new(f)));
        self
    }

    /// Queue allocation strategy (default [`AllocateAveragely`]).
    pub fn allocate_strategy(mut self, s: impl AllocateStrategy + 'static) -> Self {
        self.strategy = Some(Box::new(s));
        self
    }

    /// All options at once.
    pub fn options(mut self, options: PushConsumerOptions) -> Self {
        self.options = options;
        self
    }

    /// Traces every listener call in `topic` instead of `RMQ_SYS_TRACE_TOPIC`, and turns
    /// tracing on (Java `customizedTraceTopic`).
    pub fn trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.options.enable_msg_trace = true;
        self.options.trace_topic = Some(topic.into());
        self
    }

    /// Cached messages per topic, shared among its held queues (Java
    /// `pullThresholdForTopic`); see [`PushConsumerOptions::pull_threshold_for_topic`].
    #[doc(alias = "pullThresholdForTopic")]
    pub fn pull_threshold_for_topic(mut self, messages: usize) -> Self {
        self.options.pull_threshold_for_topic = Some(messages);
        self
    }

    /// Cached MiB per topic, shared among its held queues (Java
    /// `pullThresholdSizeForTopic`).
    #[doc(alias = "pullThresholdSizeForTopic")]
    pub fn pull_threshold_size_for_topic_mib(mut self, mib: u64) -> Self {
        self.options.pull_threshold_size_for_topic_mib = Some(mib);
        self
    }

    crate::util::option_setters! {
        /// Clustering or broadcasting.
        message_model: MessageModel;
        /// Start position of a new group.
        consume_from_where: ConsumeFromWhere;
        /// Minimum consume threads.
        consume_thread_min: usize;
        /// Maximum consume threads.
        consume_thread_max: usize;
        /// Backlog threshold of the pool adjustment.
        adjust_thread_pool_nums_threshold: u64;
        /// Messages per listener call.
        consume_message_batch_max_size: usize;
        /// Messages per pull.
        pull_batch_size: usize;
        /// Pause between pulls of a queue.
        pull_interval: Duration;
        /// Orderly pause before a retry.
        suspend_time: Duration;
        /// Cached messages per queue before pulls pause.
        pull_threshold_for_queue: usize;
        /// Cached MiB per queue before pulls pause.
        pull_threshold_size_for_queue_mib: u64;
        /// Directory of broadcasting offsets.
        offset_store_dir: PathBuf;
        /// How long shutdown waits for running listeners (Java
        /// `awaitTerminationMillisWhenShutdown`, default 0: no wait); see
        /// [`PushConsumer::shutdown`].
        #[doc(alias = "awaitTerminationMillisWhenShutdown")]
        await_termination_when_shutdown: Duration;
        /// How long a concurrent listener may run before its messages are retried (Java
        /// `consumeTimeout`, 15 min).
        #[doc(alias = "consumeTimeout")]
        consume_timeout: Duration;
        /// Trace every listener call in the trace topic (Java `enableMsgTrace`).
        enable_msg_trace: bool;
        /// How often offsets are written to the broker (Java 5 s).
        persist_offset_interval: Duration;
        /// How often consume pools are resized (1 min).
        adjust_thread_pool_interval: Duration;
        /// Allocate queues here (true, Java's default) or follow a 5.x broker's
        /// assignment and request mode, PULL or POP (false); see
        /// [`PushConsumerOptions::client_rebalance`].
        #[doc(alias = "setClientRebalance")]
        client_rebalance: bool;
        /// POP mode: invisible time of a popped message (Java `popInvisibleTime`, 60 s,
        /// 5 s..=300 s).
        #[doc(alias = "setPopInvisibleTime")]
        pop_invisible_time: Duration;
        /// POP mode: messages per pop (Java `popBatchNums`, 32, 1..=32).
        #[doc(alias = "setPopBatchNums")]
        pop_batch_nums: u32;
        /// POP mode: messages waiting for their ack per queue before pops pause (Java
        /// `popThresholdForQueue`, 96).
        #[doc(alias = "setPopThresholdForQueue")]
        pop_threshold_for_queue: usize;
        /// POP mode: one BATCH_ACK_MESSAGE per broker for what the listeners of one pop
        /// consumed (default false, as Java); see [`PushConsumerOptions::pop_batch_ack`].
        #[doc(alias = "enableBatchAck")]
        pop_batch_ack: bool;
    }

    /// Checks the configuration, registers with the shared client instance (starting it
    /// if it is new) and returns the consumer, consuming (Java `new
    /// DefaultMQPushConsumer`, then `start()`).
    #[doc(alias = "DefaultMQPushConsumer")]
    pub fn start(self) -> Result<PushConsumer> {
        let consumer = self.build()?;
        consumer.start()?;
        Ok(consumer)
    }

    /// Checks the configuration and creates a consumer that is not started yet: nothing is
    /// sent before `start`.
    pub(crate) fn build(self) -> Result<PushConsumer> {
        check_group(&self.group)?;
        if self.group == DEFAULT_CONSUMER_GROUP {
            return Err(Error::invalid_argument(format!(
                "the consumer group {DEFAULT_CONSUMER_GROUP} is reserved; choose another"
            )));
        }
        let o = &self.options;
        if o.consume_thread_min == 0
            || o.consume_thread_min > 1000
            || o.consume_thread_max < o.consume_thread_min
            || o.consume_thread_max > 1000
        {
            return Err(Error::invalid_argument(format!(
                "consume threads must satisfy 1 <= min ({}) <= max ({}) <= 1000",
                o.consume_thread_min, o.consume_thread_max
            )));
        }
        if o.consume_timeout < Duration::from_secs(1) {
            return Err(Error::invalid_argument(
                "consume_timeout must be at least 1 s",
            ));
        }
        if !(1..=1024).contains(&o.pull_batch_size)
            || !(1..=1024).contains(&o.consume_message_batch_max_size)
        {
            return Err(Error::invalid_argument(
                "pull and consume batch sizes must be within 1..=1024",
            ));
        }
        if !(MIN_POP_INVISIBLE_TIME..=MAX_POP_INVISIBLE_TIME).contains(&o.pop_invisible_time) {
            return Err(Error::invalid_argument(format!(
                "pop_invisible_time of {:?} is outside {MIN_POP_INVISIBLE_TIME:?}..={MAX_POP_INVISIBLE_TIME:?}",
                o.pop_invisible_time
            )));
        }
        if !(1..=32).contains(&o.pop_batch_nums) {
            return Err(Error::invalid_argument(format!(
                "pop_batch_nums of {} is outside 1..=32",
                o.pop_batch_nums
            )));
        }
        let Some(listener) = self.listener else {
            return Err(Error::invalid_argument("no message listener is registered"));
        };
        if self.subscriptions.is_empty() {
            return Err(Error::invalid_argument(
                "the consumer subscribes to no topic",
            ));
        }
        let model = self.options.message_model;
        let dir = &self.options.offset_store_dir;
        let client = self
            .client
            .consumer_periods(o.persist_offset_interval, o.adjust_thread_pool_interval);
        let cc = ConsumerConfig::new(client, &self.group, model, dir)?;
        let mut subs = Vec::new();
        for (topic, selector) in &self.subscriptions {
            check_topic(topic)?;
            subs.push(subscription::build_subscription_data(
                &cc.wrap(topic),
                selector,
            )?);
        }
        if model == MessageModel::Clustering {
            // Clustering consumers also consume their retry topic.
            let retry = crate::client::validators::retry_topic(&cc.group);
            subs.push(subscription::build_subscription_data(
                &retry,
                &MessageSelector::by_tag("*"),
            )?);
        }
        let (instance, rebalance, store) =
            cc.instance_rebalance_store(model, self.strategy, dir)?;
        for s in subs {
            rebalance.subscriptions.write().insert(s.topic.clone(), s);
        }
        let inner = PushConsumerImpl::new(
            cc.group,
            self.options,
            listener,
            instance.clone(),
            rebalance,
            store,
        )?;
        *inner.queue_listener.write() = self.queue_listener;
        for hook in self.request_hooks.0 {
            instance.register_request_hook(hook);
        }
        let consumer = PushConsumer { inner };
        for hook in self.consume_hooks.0 {
            consumer.register_consume_hook(hook);
        }
        Ok(consumer)
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
    pub fn client_instance(&self) -> Arc<MQClientInstance> {
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
