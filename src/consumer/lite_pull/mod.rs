//! The lite pull consumer (Java `DefaultLitePullConsumer`): the application calls
//! [`poll`](LitePullConsumer::poll); background pulls keep a bounded cache filled.
//!
//! Queues come from rebalance ([`subscribe`](LitePullConsumerBuilder::subscribe)) or from
//! the application ([`assign`](LitePullConsumer::assign)). Each queue has a pull cursor and
//! a consumed offset; `seek` moves the cursor and discards what was cached, commits write
//! the consumed offsets to the group's offset store (the broker's in clustering mode).
//!
//! This module owns the consumer's state, its builder and start, `assign`, `poll`, the
//! background pulls and the rebalance hooks; `commit` owns offsets (commit, committed,
//! seek), `subscription` the topics (subscribe and unsubscribe while running, topic queue
//! change listeners), `consumer_inner` what the client instance asks of the consumer.

mod commit;
mod consumer_inner;
mod subscription;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use log::{info, warn};
use parking_lot::Mutex;

use super::allocate::AllocateStrategy;
use super::offset_store::{compute_start_offset, OffsetStore};
use super::process_queue::ProcessQueue;
use super::pull::{self, sys_flag, PullParams, PullRouting, PullStatus};
use super::rebalance::{RebalanceHooks, RebalanceImpl};
use super::subscription::{build_subscription_data, MessageSelector};
use super::{
    ConsumeFromWhere, ConsumerConfig, MessageModel, MessageQueueListener, TopicQueueChangeListener,
};
use crate::client::validators::{check_group, check_topic};
use crate::client::{namespace, ClientOptions, ConsumerInner, MQClientInstance, ServiceState};
use crate::error::{Error, Result};
use crate::message::{MessageExt, MessageQueue};
use crate::trace::TraceDispatcher;
use subscription::WatchedTopic;

/// Lite pull settings with Java's defaults (Java `DefaultLitePullConsumer` fields). Set
/// them on the [`LitePullConsumerBuilder`], or all at once with
/// [`LitePullConsumerBuilder::options`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LitePullOptions {
    /// Clustering (default) or broadcasting.
    pub message_model: MessageModel,
    /// Start position of a group without stored offsets.
    pub consume_from_where: ConsumeFromWhere,
    /// Messages per pull (Java 10).
    pub pull_batch_size: usize,
    /// Cached pull results across all queues before pulls pause (Java 10,000 messages).
    pub pull_threshold_for_all: usize,
    /// Cached messages per queue before its pulls pause (Java 1000).
    pub pull_threshold_for_queue: usize,
    /// Cached body bytes per queue, in MiB, before its pulls pause (Java
    /// `pullThresholdSizeForQueue`, 100 MiB).
    #[doc(alias = "pullThresholdSizeForQueue")]
    pub pull_threshold_size_for_queue_mib: u64,
    /// Cached body bytes across all queues, in MiB, before pulls pause (1,024 MiB; Java has
    /// no such bound, so 10,000 cached bodies of 4 MiB could hold 40 GB there).
    pub pull_threshold_size_for_all_mib: u64,
    /// Default wait of [`poll`](LitePullConsumer::poll) (Java 5 s).
    pub poll_timeout: Duration,
    /// Commit automatically (Java true): at the start of a `poll`, at most once per
    /// `auto_commit_interval`, what earlier polls returned is committed (the application
    /// is done with it then). The batch the last `poll` returned is never committed
    /// before the next `poll` or `commit_sync`; shutdown (and `Drop`) commit only what
    /// those confirmed.
    pub auto_commit: bool,
    /// How often auto-commit runs, checked at each poll (Java 5 s, at least 1 s).
    pub auto_commit_interval: Duration,
    /// How long the broker may hold a pull with nothing new (Java 20 s; shorter makes
    /// `seek` and shutdown answer sooner).
    pub broker_suspend_max_time: Duration,
    /// Delay of a pull retry after an error (Java 1 s).
    pub pull_time_delay_when_exception: Duration,
    /// Directory of broadcasting offsets.
    pub offset_store_dir: std::path::PathBuf,
    /// Record a trace of every message `poll` returns (Java `enableMsgTrace`, false).
    #[doc(alias = "enableMsgTrace")]
    pub enable_msg_trace: bool,
    /// The trace topic when tracing (default `RMQ_SYS_TRACE_TOPIC`).
    #[doc(alias = "customizedTraceTopic")]
    pub trace_topic: Option<String>,
    /// How often offsets are written to the broker (Java `persistConsumerOffsetInterval`,
    /// 5 s). It runs on the shared client instance: the first client of a client id to
    /// start sets it.
    #[doc(alias = "persistConsumerOffsetInterval")]
    pub persist_offset_interval: Duration,
    /// How often the topics with a [`TopicQueueChangeListener`] are looked up for a
    /// changed queue set (Java `topicMetadataCheckIntervalMillis`, 30 s).
    #[doc(alias = "topicMetadataCheckIntervalMillis")]
    pub topic_metadata_check_interval: Duration,
}

impl Default for LitePullOptions {
    fn default() -> Self {
        LitePullOptions {
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            pull_batch_size: 10,
            pull_threshold_for_all: 10_000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            pull_threshold_size_for_all_mib: 1024,
            poll_timeout: Duration::from_secs(5),
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            broker_suspend_max_time: Duration::from_secs(5),
            pull_time_delay_when_exception: Duration::from_secs(1),
            offset_store_dir: super::default_local_offset_dir(),
            enable_msg_trace: false,
            trace_topic: None,
            persist_offset_interval: crate::client::DEFAULT_PERSIST_OFFSET_INTERVAL,
            topic_metadata_check_interval: Duration::from_secs(30),
        }
    }
}

/// Pulled messages waiting for `poll`.
struct Batch {
    mq: MessageQueue,
    epoch: u64,
    msgs: Vec<MessageExt>,
}

/// Per-queue state.
struct QueueState {
    pq: Arc<ProcessQueue>,
    /// Next offset to pull; `None` until computed from the store.
    pull_offset: Option<i64>,
    /// Offset after the last message `poll` returned; -1 until then.
    consumed_offset: i64,
    /// The consumed offset a later `poll` (or `commit_sync`, or `seek`) confirmed: the
    /// application is done with everything before it. Shutdown commits this, never the
    /// consumed offset, whose last batch may still be in processing.
    confirmed_offset: i64,
    paused: bool,
    /// Bumped by seek and re-assignment: pulls and cached batches of older epochs are void.
    epoch: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Subscribe,
    Assign,
}

/// The lite pull consumer's state.
///
/// Its locks (`mode`, `queues`, `state`, `last_commit`) are each taken alone, never
/// nested, and none is held while calling the instance or the network.
struct LitePullImpl {
    group: String,
    options: LitePullOptions,
    namespace: Option<String>,
    instance: Arc<MQClientInstance>,
    rebalance: RebalanceImpl,
    store: Box<dyn OffsetStore>,
    routing: Arc<PullRouting>,
    mode: Mutex<Option<Mode>>,
    queues: Mutex<HashMap<MessageQueue, QueueState>>,
    cache_tx: Sender<Batch>,
    cache_rx: Receiver<Batch>,
    cached_msgs: AtomicU64,
    /// Body bytes of the batches waiting in `cache_rx`.
    cached_bytes: AtomicU64,
    epochs: AtomicU64,
    state: Mutex<ServiceState>,
    last_commit: Mutex<Instant>,
    /// When the consumer was created, ms since the epoch.
    started_at: i64,
    /// The trace of what `poll` returns, with `enable_msg_trace`.
    trace: Mutex<Option<Arc<TraceDispatcher>>>,
    /// Monotonic counters for `LitePullConsumer::stats`.
    counters: crate::stats::ConsumeCounters,
    /// Told of every allocation change of a subscribed topic.
    queue_listener: Option<Arc<dyn MessageQueueListener>>,
    /// The topics (with namespace) watched for a changed queue set, each with its listener
    /// and the queues last seen (`None` until a lookup succeeded).
    topic_listeners: Mutex<HashMap<String, WatchedTopic>>,
    /// Whether the periodic check of `topic_listeners` runs.
    watching: AtomicBool,
    me: Weak<LitePullImpl>,
}

/// Builder for [`LitePullConsumer`].
pub struct LitePullConsumerBuilder {
    group: String,
    client: ClientOptions,
    options: LitePullOptions,
    subscriptions: Vec<(String, MessageSelector)>,
    strategy: Option<Box<dyn AllocateStrategy>>,
    request_hooks: crate::util::Hooks<dyn crate::RequestHook>,
    queue_listener: Option<Arc<dyn MessageQueueListener>>,
    topic_listeners: Vec<(String, Arc<dyn TopicQueueChangeListener>)>,
}

impl std::fmt::Debug for LitePullConsumerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePullConsumerBuilder")
            .field("group", &self.group)
            .field("client", &self.client)
            .field("options", &self.options)
            .field("subscriptions", &self.subscriptions)
            .field("strategy", &self.strategy.as_ref().map(|s| s.name()))
            .field("request_hooks", &self.request_hooks)
            .field("queue_listener", &self.queue_listener.is_some())
            .field(
                "topic_listeners",
                &self
                    .topic_listeners
                    .iter()
                    .map(|(t, _)| t)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl LitePullConsumerBuilder {
    /// What every client shares: name servers, instance name, namespace, credentials, TLS,
    /// timeouts (default [`ClientOptions::new`]).
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// All options at once.
    pub fn options(mut self, options: LitePullOptions) -> Self {
        self.options = options;
        self
    }

    crate::util::option_setters! {
        /// Clustering (default) or broadcasting.
        message_model: MessageModel;
        /// Start position of a group without stored offsets (Java last offset).
        consume_from_where: ConsumeFromWhere;
        /// Messages per pull (Java 10).
        pull_batch_size: usize;
        /// Cached messages across all queues before pulls pause (Java 10,000).
        pull_threshold_for_all: usize;
        /// Cached messages per queue before its pulls pause (Java 1000).
        pull_threshold_for_queue: usize;
        /// Cached body MiB per queue before its pulls pause (Java
        /// `pullThresholdSizeForQueue`, 100).
        pull_threshold_size_for_queue_mib: u64;
        /// Cached body MiB across all queues before pulls pause (1,024).
        pull_threshold_size_for_all_mib: u64;
        /// Default wait of `poll` (Java 5 s).
        poll_timeout: Duration;
        /// Commit what earlier polls returned at the start of a `poll` (Java true); see
        /// [`LitePullOptions::auto_commit`].
        auto_commit: bool;
        /// How often auto-commit runs, at least 1 s (Java 5 s).
        auto_commit_interval: Duration;
        /// How long the broker may hold a pull with nothing new.
        broker_suspend_max_time: Duration;
        /// Directory of broadcasting offsets.
        offset_store_dir: std::path::PathBuf;
        /// Trace every message `poll` returns (Java `enableMsgTrace`).
        enable_msg_trace: bool;
        /// How often offsets are written to the broker (Java 5 s).
        persist_offset_interval: Duration;
        /// How often topics with a queue-change listener are looked up (Java 30 s).
        topic_metadata_check_interval: Duration;
    }

    /// Tells `listener` whenever a rebalance changes the queues this consumer holds of a
    /// subscribed topic (Java `subscribe(topic, expression, MessageQueueListener)`); it runs
    /// on the rebalance thread after the new queues are taken.
    pub fn message_queue_listener(mut self, listener: impl MessageQueueListener + 'static) -> Self {
        self.queue_listener = Some(Arc::new(listener));
        self
    }

    /// Tells `listener` whenever the readable queues of `topic` change, as a lookup every
    /// [`topic_metadata_check_interval`](LitePullOptions::topic_metadata_check_interval)
    /// finds them (Java `registerTopicMessageQueueChangeListener`); for a consumer that
    /// assigns queues itself and must follow a topic that grows. A later listener of the
    /// same topic replaces the earlier one.
    #[doc(alias = "registerTopicMessageQueueChangeListener")]
    pub fn topic_queue_change_listener(
        mut self,
        topic: impl Into<String>,
        listener: impl TopicQueueChangeListener + 'static,
    ) -> Self {
        self.topic_listeners
            .push((topic.into(), Arc::new(listener)));
        self
    }

    /// Traces what `poll` returns in `topic` instead of `RMQ_SYS_TRACE_TOPIC`, and turns
    /// tracing on (Java `customizedTraceTopic`).
    pub fn trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.options.enable_msg_trace = true;
        self.options.trace_topic = Some(topic.into());
        self
    }

    /// Adds a hook called around every request of the client instance, from the first
    /// heartbeat and pull on (Java `RPCHook`); see [`RequestHook`](crate::RequestHook).
    pub fn request_hook(mut self, hook: Arc<dyn crate::RequestHook>) -> Self {
        self.request_hooks.0.push(hook);
        self
    }

    /// Subscribes (queues assigned by rebalance); not combinable with `assign`.
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        tag_expression: impl Into<String>,
    ) -> Self {
        self.subscriptions
            .push((topic.into(), MessageSelector::by_tag(tag_expression)));
        self
    }

    /// [`subscribe`](Self::subscribe) with a tag or SQL92 selector (Java
    /// `subscribe(topic, MessageSelector)`; SQL92 needs `enablePropertyFilter` on the broker).
    pub fn subscribe_with(mut self, topic: impl Into<String>, selector: MessageSelector) -> Self {
        self.subscriptions.push((topic.into(), selector));
        self
    }

    /// Queue allocation strategy for `subscribe` (default averagely).
    pub fn allocate_strategy(mut self, s: impl AllocateStrategy + 'static) -> Self {
        self.strategy = Some(Box::new(s));
        self
    }

    /// Checks the configuration, registers with the shared client instance (starting it
    /// if it is new) and returns the running consumer (Java `new
    /// DefaultLitePullConsumer`, then `start()`). Without subscriptions the consumer waits
    /// for [`LitePullConsumer::assign`].
    #[doc(alias = "DefaultLitePullConsumer")]
    pub fn start(self) -> Result<LitePullConsumer> {
        let consumer = self.build()?;
        consumer.start()?;
        Ok(consumer)
    }

    /// Checks the configuration and creates a consumer that is not started yet: nothing is
    /// sent before `start`.
    pub(crate) fn build(self) -> Result<LitePullConsumer> {
        check_group(&self.group)?;
        let o = &self.options;
        if !(1..=1024).contains(&o.pull_batch_size) {
            return Err(Error::invalid_argument(
                "pull_batch_size must be within 1..=1024",
            ));
        }
        if o.auto_commit_interval < Duration::from_secs(1) {
            return Err(Error::invalid_argument(
                "auto_commit_interval must be at least 1 s",
            ));
        }
        if o.topic_metadata_check_interval < Duration::from_millis(100) {
            return Err(Error::invalid_argument(
                "topic_metadata_check_interval must be at least 100 ms",
            ));
        }
        let model = self.options.message_model;
        let dir = &self.options.offset_store_dir;
        let client = self.client.consumer_periods(
            o.persist_offset_interval,
            crate::client::DEFAULT_ADJUST_THREAD_POOL_INTERVAL,
        );
        let cc = ConsumerConfig::new(client, &self.group, model, dir)?;
        let mut subs = Vec::new();
        for (topic, selector) in &self.subscriptions {
            check_topic(topic)?;
            let wrapped = cc.wrap(topic);
            subs.push((
                wrapped.clone(),
                build_subscription_data(&wrapped, selector)?,
            ));
        }
        let mut watched = HashMap::new();
        for (topic, listener) in self.topic_listeners {
            check_topic(&topic)?;
            let seen = None;
            watched.insert(cc.wrap(&topic), WatchedTopic { listener, seen });
        }
        let mode = (!subs.is_empty()).then_some(Mode::Subscribe);
        let (instance, rebalance, store) =
            cc.instance_rebalance_store(model, self.strategy, dir)?;
        rebalance.subscriptions.write().extend(subs);
        let (group, ns) = (cc.group, cc.namespace);
        let (cache_tx, cache_rx) = unbounded();
        let inner = Arc::new_cyclic(|me| LitePullImpl {
            group,
            options: self.options,
            namespace: ns,
            instance: instance.clone(),
            rebalance,
            store,
            routing: Arc::new(PullRouting::default()),
            mode: Mutex::new(mode),
            queues: Mutex::new(HashMap::new()),
            cache_tx,
            cache_rx,
            cached_msgs: AtomicU64::new(0),
            cached_bytes: AtomicU64::new(0),
            epochs: AtomicU64::new(1),
            state: Mutex::new(ServiceState::CreateJust),
            last_commit: Mutex::new(Instant::now()),
            started_at: crate::util::now_millis(),
            trace: Mutex::new(None),
            counters: Default::default(),
            queue_listener: self.queue_listener,
            topic_listeners: Mutex::new(watched),
            watching: AtomicBool::new(false),
            me: me.clone(),
        });
        for hook in self.request_hooks.0 {
            instance.register_request_hook(hook);
        }
        Ok(LitePullConsumer { inner })
    }
}

impl LitePullConsumer {
    /// Registers with the shared client instance, starts it and starts pulling (Java
    /// `DefaultLitePullConsumer.start`). Starting twice, or after shutdown, is a state
    /// error.
    fn start(&self) -> Result<()> {
        let inner = &self.inner;
        let instance = &inner.instance;
        if *inner.state.lock() != ServiceState::CreateJust {
            return Err(Error::state(format!(
                "the lite pull consumer {} was started before",
                inner.group
            )));
        }
        let me: Arc<dyn ConsumerInner> = inner.clone();
        if !instance.register_consumer(&inner.group, me) {
            return Err(Error::state(format!(
                "the consumer group {} is already registered in client {}",
                inner.group,
                instance.client_id()
            )));
        }
        if let Err(e) = instance.start() {
            instance.unregister_consumer(&inner.group);
            return Err(e);
        }
        *inner.state.lock() = ServiceState::Running;
        let group = namespace::unwrap(inner.namespace.as_deref(), &inner.group);
        *inner.trace.lock() = crate::producer::start_trace(
            inner.options.enable_msg_trace,
            &group,
            instance.config().clone(),
            inner.options.trace_topic.as_deref(),
        );
        let topics = inner.rebalance.subscribed_topics();
        for t in topics {
            if let Err(e) = instance.update_topic_route(&t) {
                warn!("{}: route of {t}: {e}", inner.group);
            }
        }
        instance.send_heartbeat_to_all_brokers_with_lock();
        instance.rebalance_immediately();
        if !inner.topic_listeners.lock().is_empty() {
            inner.start_watching_topics();
        }
        info!(
            "lite pull consumer {} started on client {}",
            inner.group,
            instance.client_id()
        );
        Ok(())
    }
}

/// A consumer the application pulls from with [`poll`](Self::poll) (Java
/// `DefaultLitePullConsumer`). Dropping it shuts it down.
pub struct LitePullConsumer {
    inner: Arc<LitePullImpl>,
}

impl std::fmt::Debug for LitePullConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePullConsumer")
            .field("group", &self.inner.group)
            .field("client_id", &self.inner.instance.client_id())
            .field("state", &*self.inner.state.lock())
            .finish_non_exhaustive()
    }
}

impl LitePullConsumer {
    /// A builder for a consumer of `group`.
    pub fn builder(group: impl Into<String>) -> LitePullConsumerBuilder {
        LitePullConsumerBuilder {
            group: group.into(),
            client: ClientOptions::new(),
            options: LitePullOptions::default(),
            subscriptions: Vec::new(),
            strategy: None,
            request_hooks: Default::default(),
            queue_listener: None,
            topic_listeners: Vec::new(),
        }
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

    /// Takes these queues (replacing earlier assignments); not combinable with subscribe.
    pub fn assign(&self, mqs: &[MessageQueue]) -> Result<()> {
        let c = &self.inner;
        {
            let mut mode = c.mode.lock();
            if *mode == Some(Mode::Subscribe) {
                return Err(Error::state(
                    "this consumer subscribes; assign is not allowed",
                ));
            }
            *mode = Some(Mode::Assign);
        }
        let wanted: HashSet<MessageQueue> = mqs.iter().map(|mq| c.wrap(mq)).collect();
        for mq in &wanted {
            let mut subs = c.rebalance.subscriptions.write();
            if !subs.contains_key(&*mq.topic) {
                subs.insert(
                    mq.topic.to_string(),
                    build_subscription_data(&mq.topic, &MessageSelector::by_tag("*"))?,
                );
            }
        }
        let gone: Vec<MessageQueue> = c
            .queues
            .lock()
            .keys()
            .filter(|mq| !wanted.contains(*mq))
            .cloned()
            .collect();
        for mq in gone {
            c.drop_queue(&mq);
        }
        for mq in wanted {
            c.add_queue(mq, None);
        }
        c.instance.send_heartbeat_to_all_brokers_with_lock();
        Ok(())
    }

    /// Queues this consumer pulls now (topics without namespace).
    pub fn assignment(&self) -> Vec<MessageQueue> {
        let mut v: Vec<MessageQueue> = self
            .inner
            .queues
            .lock()
            .keys()
            .map(|mq| self.inner.unwrap(mq))
            .collect();
        v.sort();
        v
    }

    /// Waits up to the configured poll timeout for messages.
    pub fn poll(&self) -> Result<Vec<MessageExt>> {
        self.poll_timeout(self.inner.options.poll_timeout)
    }

    /// Waits up to `timeout` for the next pulled batch; an empty vector when none came.
    pub fn poll_timeout(&self, timeout: Duration) -> Result<Vec<MessageExt>> {
        let c = &self.inner;
        if *c.state.lock() != ServiceState::Running {
            return Err(Error::state(format!("consumer {} is not running", c.group)));
        }
        // Calling poll again says the application is done with what earlier polls returned.
        c.confirm_consumed();
        if c.options.auto_commit && c.last_commit.lock().elapsed() >= c.options.auto_commit_interval
        {
            c.commit_all(None);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let batch = match c.cache_rx.recv_deadline(deadline) {
                Ok(b) => b,
                Err(RecvTimeoutError::Timeout) => return Ok(Vec::new()),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::state("the consumer is shut down"))
                }
            };
            c.cached_msgs
                .fetch_sub(batch.msgs.len() as u64, Ordering::SeqCst);
            c.cached_bytes
                .fetch_sub(body_bytes(&batch.msgs), Ordering::SeqCst);
            let mut queues = c.queues.lock();
            let Some(q) = queues.get_mut(&batch.mq) else {
                continue;
            };
            if q.epoch != batch.epoch || q.pq.is_dropped() {
                continue; // seeked or re-assigned since the pull
            }
            let offset =
                q.pq.remove_messages(batch.msgs.iter().map(|m| m.queue_offset));
            if offset >= 0 {
                q.consumed_offset = offset;
            }
            drop(queues);
            let mut msgs = batch.msgs;
            c.counters
                .consumed(&c.unwrap_topic(&batch.mq.topic), msgs.len() as u64, 0, None);
            if c.namespace.as_deref().is_some_and(|ns| !ns.is_empty()) {
                for m in &mut msgs {
                    let t = c.unwrap_topic(m.topic());
                    m.message.set_topic(t);
                }
            }
            let trace = c
                .options
                .enable_msg_trace
                .then(|| c.trace.lock().clone())
                .flatten();
            if let Some(t) = trace {
                // Java traces a poll as a call that succeeded at once.
                let group = namespace::unwrap(c.namespace.as_deref(), &c.group);
                let began = Instant::now();
                let id = crate::trace::consume_before(&t, &group, &msgs);
                crate::trace::consume_after(&t, &group, &id, &msgs, began, true, false);
            }
            return Ok(msgs);
        }
    }

    /// The consumer's figures now: per topic, messages pulled and returned by `poll`; per
    /// queue held, messages and bytes cached (pulled, not yet returned by `poll`), the
    /// offset a commit writes (what a later `poll` confirmed, else the stored one) and the
    /// lag; the client instance's connections, heartbeats, route refreshes and
    /// rebalances. Cheap: atomics and a few short locks, no network call.
    pub fn stats(&self) -> crate::ConsumerStats {
        let c = &self.inner;
        let offsets = c.store.offsets();
        let mut queues: Vec<crate::QueueStats> = c
            .queues
            .lock()
            .iter()
            .map(|(mq, s)| {
                let (count, bytes, max) = s.pq.stats();
                let consumed = if s.confirmed_offset >= 0 {
                    Some(s.confirmed_offset)
                } else {
                    offsets.get(mq).copied()
                };
                (c.unwrap(mq), (count, bytes), consumed, max)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(mq, cached, consumed, max)| crate::QueueStats::new(mq, cached, consumed, max))
            .collect();
        queues.sort_by(|a, b| a.queue.cmp(&b.queue));
        c.counters
            .snapshot(&c.group, queues, (0, 0), c.instance.client_stats())
    }

    /// Adds a hook called around every request of this consumer's client instance (Java
    /// `RPCHook`), which every client with the same client id shares; requests sent before
    /// it is registered do not see it.
    pub fn register_request_hook(&self, hook: Arc<dyn crate::RequestHook>) {
        self.inner.instance.register_request_hook(hook)
    }

    /// What the message trace did so far; `None` when the consumer does not trace.
    pub fn trace_stats(&self) -> Option<crate::TraceStats> {
        self.inner.trace.lock().as_ref().map(|t| t.stats())
    }

    /// Stops pulling these queues (what is cached can still be polled).
    pub fn pause(&self, mqs: &[MessageQueue]) {
        let mut q = self.inner.queues.lock();
        for mq in mqs {
            if let Some(s) = q.get_mut(&self.inner.wrap(mq)) {
                s.paused = true;
            }
        }
    }

    /// Resumes pulling these queues.
    pub fn resume(&self, mqs: &[MessageQueue]) {
        let mut q = self.inner.queues.lock();
        for mq in mqs {
            if let Some(s) = q.get_mut(&self.inner.wrap(mq)) {
                s.paused = false;
            }
        }
    }

    /// Commits (when auto-commit is on) what a later `poll` or `commit_sync` confirmed —
    /// never the batch the last `poll` returned, which may still be in processing (as when
    /// a panic while processing it drops the consumer) — then unregisters and stops the
    /// client instance if nothing else uses it. Idempotent.
    pub fn shutdown(&self) {
        let c = &self.inner;
        {
            let mut st = c.state.lock();
            match *st {
                ServiceState::Running => *st = ServiceState::ShutdownAlready,
                ServiceState::CreateJust => {
                    // Built but never started: nothing runs yet.
                    *st = ServiceState::ShutdownAlready;
                    return;
                }
                _ => return,
            }
        }
        for s in c.queues.lock().values() {
            s.pq.set_dropped(true);
        }
        // One deadline for the commits (sent together), the trace, the unregistration and
        // the threads, however many queues and brokers.
        let deadline = Instant::now() + c.instance.config().remoting.shutdown_timeout;
        if c.options.auto_commit {
            c.commit_all(Some(deadline));
        }
        let trace = c.trace.lock().take();
        if let Some(t) = trace {
            t.shutdown_until(deadline);
        }
        c.instance
            .unregister_consumer_until(&c.group, Some(deadline));
        c.instance.shutdown_until(deadline);
        info!("lite pull consumer {} shut down", c.group);
    }
}

impl Drop for LitePullConsumer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl LitePullImpl {
    fn wrap(&self, mq: &MessageQueue) -> MessageQueue {
        let mut mq = mq.clone();
        mq.topic = namespace::wrap(self.namespace.as_deref(), &mq.topic).into();
        mq
    }

    fn unwrap(&self, mq: &MessageQueue) -> MessageQueue {
        let mut mq = mq.clone();
        mq.topic = self.unwrap_topic(&mq.topic).into();
        mq
    }

    fn unwrap_topic(&self, topic: &str) -> String {
        namespace::unwrap(self.namespace.as_deref(), topic)
    }

    fn is_running(&self) -> bool {
        *self.state.lock() == ServiceState::Running
    }

    fn check_running(&self) -> Result<()> {
        if self.is_running() {
            Ok(())
        } else {
            Err(Error::state(format!(
                "the lite pull consumer {} is not running",
                self.group
            )))
        }
    }

    /// Starts pulling `mq` (no-op when held); `offset` None computes it from the store.
    fn add_queue(&self, mq: MessageQueue, offset: Option<i64>) {
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst);
        {
            let mut q = self.queues.lock();
            if q.contains_key(&mq) {
                return;
            }
            q.insert(
                mq.clone(),
                QueueState {
                    pq: Arc::new(ProcessQueue::default()),
                    pull_offset: offset,
                    consumed_offset: -1,
                    confirmed_offset: -1,
                    paused: false,
                    epoch,
                },
            );
        }
        self.schedule_pull(mq, epoch, Duration::ZERO);
    }

    /// Stops pulling `mq` and writes its committed offset through (Java
    /// `RebalanceLitePullImpl.removeUnnecessaryMessageQueue`). Only what was committed
    /// goes out, never the consumed position: without auto-commit the application has
    /// not committed it, and with auto-commit the batch `poll` returned last may still
    /// be in processing (the next poll would commit it).
    fn drop_queue(&self, mq: &MessageQueue) {
        // Released before the persist, which is a network call.
        let removed = self.queues.lock().remove(mq);
        if let Some(s) = removed {
            s.pq.set_dropped(true);
            self.store.persist(mq);
            self.store.remove_offset(mq);
        }
    }

    fn schedule_pull(&self, mq: MessageQueue, epoch: u64, delay: Duration) {
        let me = self.me.clone();
        self.instance.schedule_later("lite-pull", delay, move || {
            if let Some(c) = me.upgrade() {
                c.pull_once(mq, epoch);
            }
        });
    }

    /// Looks up where `mq` starts on the rebalance thread, as Java's
    /// `computePullFromWhere` runs there: it is a broker call of up to 5 s, and this
    /// method is reached from the pull-delay timer that every consumer's delayed pulls
    /// share. The lookup that finds the offset starts the queue's pulls; a failed one
    /// comes back through [`pull_once`](Self::pull_once) after
    /// `pull_time_delay_when_exception`, so each queue and epoch has one chain of tries.
    fn look_up_start_offset(&self, mq: MessageQueue, epoch: u64) {
        let me = self.me.clone();
        self.instance.run_on_rebalance_thread(move || {
            let Some(c) = me.upgrade() else { return };
            if !c.is_running() || !c.holds(&mq, epoch) {
                return;
            }
            let found = compute_start_offset(
                &c.instance,
                c.store.as_ref(),
                c.options.consume_from_where,
                &mq,
            );
            let Some(off) = found else {
                return c.schedule_pull(mq, epoch, c.options.pull_time_delay_when_exception);
            };
            let set = {
                let mut q = c.queues.lock();
                match q.get_mut(&mq) {
                    Some(s) if s.epoch == epoch => {
                        s.pull_offset.get_or_insert(off);
                        true
                    }
                    _ => false,
                }
            };
            if set {
                c.schedule_pull(mq, epoch, Duration::ZERO);
            }
        });
    }

    /// Whether `mq` is still held at `epoch` (not dropped, reassigned or sought since).
    fn holds(&self, mq: &MessageQueue, epoch: u64) -> bool {
        self.queues.lock().get(mq).is_some_and(|s| s.epoch == epoch)
    }

    /// One pull of `mq` if it is still ours at `epoch`; the callback schedules the next.
    fn pull_once(self: Arc<Self>, mq: MessageQueue, epoch: u64) {
        if !self.is_running() {
            return;
        }
        let (pq, offset, paused) = {
            let q = self.queues.lock();
            let Some(s) = q.get(&mq) else { return };
            if s.epoch != epoch {
                return;
            }
            (s.pq.clone(), s.pull_offset, s.paused)
        };
        let o = &self.options;
        if paused {
            return self.schedule_pull(mq, epoch, Duration::from_millis(1000));
        }
        const MIB: u64 = 1 << 20;
        if self.cached_msgs.load(Ordering::SeqCst) as usize > o.pull_threshold_for_all
            || pq.msg_count() > o.pull_threshold_for_queue
            || self.cached_bytes.load(Ordering::SeqCst)
                > o.pull_threshold_size_for_all_mib.saturating_mul(MIB)
            || pq.msg_size() > o.pull_threshold_size_for_queue_mib.saturating_mul(MIB)
        {
            return self.schedule_pull(mq, epoch, Duration::from_millis(50));
        }
        let Some(offset) = offset else {
            return self.look_up_start_offset(mq, epoch);
        };
        let sub = self.rebalance.subscriptions.read().get(&*mq.topic).cloned();
        let sub = match sub {
            Some(s) => s,
            None => return self.schedule_pull(mq, epoch, o.pull_time_delay_when_exception),
        };
        let params = PullParams {
            mq: &mq,
            sub: &sub,
            offset,
            max_nums: o.pull_batch_size as i32,
            sys_flag: sys_flag::SUSPEND | sys_flag::SUBSCRIPTION | sys_flag::LITE_PULL,
            commit_offset: 0,
            suspend: o.broker_suspend_max_time,
            timeout: o.broker_suspend_max_time + Duration::from_secs(10),
            post_subscription: true,
        };
        let me = self.clone();
        let mq2 = mq.clone();
        let sent = pull::pull_async(
            &self.instance,
            self.routing.clone(),
            &self.group,
            &params,
            move |r| me.on_pull(mq2, epoch, pq, r),
        );
        if let Err(e) = sent {
            // Not sent: the callback comes back and takes the failure as a failed pull.
            let (e, callback) = e.into_parts();
            callback(Err(e));
        }
    }

    fn on_pull(
        self: Arc<Self>,
        mq: MessageQueue,
        epoch: u64,
        pq: Arc<ProcessQueue>,
        r: Result<pull::PullResult>,
    ) {
        if pq.is_dropped() || !self.is_running() {
            return;
        }
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                warn!("{}: pull of {mq} failed: {e}", self.group);
                return self.schedule_pull(mq, epoch, self.options.pull_time_delay_when_exception);
            }
        };
        {
            let mut q = self.queues.lock();
            let Some(s) = q.get_mut(&mq) else { return };
            if s.epoch != epoch {
                return;
            }
            s.pull_offset = Some(r.next_begin_offset);
        }
        match r.status {
            PullStatus::Found if !r.msgs.is_empty() => {
                self.counters.pulled(
                    &self.unwrap_topic(&mq.topic),
                    r.msgs.len() as u64,
                    body_bytes(&r.msgs),
                );
                pq.put_messages(&r.msgs);
                self.cached_msgs
                    .fetch_add(r.msgs.len() as u64, Ordering::SeqCst);
                self.cached_bytes
                    .fetch_add(body_bytes(&r.msgs), Ordering::SeqCst);
                let _ = self.cache_tx.send(Batch {
                    mq: mq.clone(),
                    epoch,
                    msgs: r.msgs,
                });
            }
            PullStatus::OffsetIllegal => {
                warn!(
                    "{}: offset of {mq} was illegal; continuing at {}",
                    self.group, r.next_begin_offset
                )
            }
            _ => {}
        }
        // The next pull goes out from this callback thread: through the timer it cost a
        // wake-up and a context switch more per pull (BENCHMARKS.md, seventeenth round).
        self.pull_once(mq, epoch);
    }
}

/// Body bytes of `msgs`, as the process queue counts them.
fn body_bytes(msgs: &[MessageExt]) -> u64 {
    msgs.iter().map(|m| m.body().len() as u64).sum()
}

impl RebalanceHooks for LitePullImpl {
    fn message_queue_changed(
        &self,
        topic: &str,
        all: &HashSet<MessageQueue>,
        mine: &HashSet<MessageQueue>,
    ) {
        if let Some(l) = &self.queue_listener {
            super::queue_listener::notify_allocation(
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

    fn remove_unnecessary_message_queue(&self, mq: &MessageQueue, _pq: &ProcessQueue) -> bool {
        self.drop_queue(mq);
        true
    }

    fn remove_dirty_offset(&self, mq: &MessageQueue) {
        self.store.remove_offset(mq);
    }

    fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64> {
        compute_start_offset(
            &self.instance,
            self.store.as_ref(),
            self.options.consume_from_where,
            mq,
        )
    }

    fn dispatch_pull_requests(&self, requests: Vec<(MessageQueue, Arc<ProcessQueue>, i64)>) {
        for (mq, _pq, offset) in requests {
            self.add_queue(mq, Some(offset));
        }
    }

    fn drops_idle_queues(&self) -> bool {
        false
    }
}

#[cfg(all(test, feature = "testkit"))]
mod tests;
