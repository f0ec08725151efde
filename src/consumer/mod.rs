//! Consumers: the push consumer (Java `DefaultMQPushConsumer`), the lite pull consumer
//! (Java `DefaultLitePullConsumer`), rebalance with Java's
//! allocation strategies, offset stores, retry and DLQ handling.
//!
//! ```no_run
//! use rocketmq_blocking::consumer::{ConsumeConcurrentlyStatus, PushConsumer};
//!
//! let consumer = PushConsumer::builder("my_group")
//!     .namesrv_addr("127.0.0.1:9876")
//!     .subscribe("TopicTest", "TagA || TagB")
//!     .register_message_listener_concurrently(|msgs, _ctx| {
//!         for m in msgs {
//!             println!("{} {:?}", m.msg_id(), String::from_utf8_lossy(m.body()));
//!         }
//!         ConsumeConcurrentlyStatus::ConsumeSuccess
//!     })
//!     .start()?;
//! # consumer.shutdown();
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```

pub mod allocate;
mod lite_pull;
mod offset_store;
mod pool;
mod process_queue;
mod pull;
mod push;
mod rebalance;
mod subscription;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use log::info;

use crate::client::validators::{check_group, check_topic, DEFAULT_CONSUMER_GROUP};
use crate::client::{
    manager, namespace, ClientConfig, ClientConfigBuilder, ConsumerInner, ServiceState,
};
use crate::error::{Error, Result};
use crate::message::{MessageExt, MessageQueue};

pub use crate::protocol::heartbeat::{ConsumeFromWhere, MessageModel};
pub use allocate::{AllocateAveragely, AllocateStrategy};
pub use lite_pull::{LitePullConsumer, LitePullConsumerBuilder, LitePullOptions};
pub use offset_store::{default_local_offset_dir, ReadOffset, ReadOffsetType};
pub use process_queue::ProcessQueue;
pub use pull::{PullResult, PullStatus};
pub use subscription::MessageSelector;

use push::PushConsumerImpl;
use rebalance::RebalanceImpl;

/// What a concurrent listener answers (Java `ConsumeConcurrentlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeConcurrentlyStatus {
    /// Consumed (up to `ack_index` of the context).
    ConsumeSuccess,
    /// Failed: retry later through `%RETRY%<group>` with a growing delay.
    ReconsumeLater,
}

/// Context of one concurrent consumption (Java `ConsumeConcurrentlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeConcurrentlyContext {
    /// The queue the messages came from.
    pub message_queue: MessageQueue,
    /// Delay level of a retry: 0 lets the broker choose (3 + reconsume times); below 0
    /// sends the message straight to the DLQ.
    pub delay_level_when_next_consume: i32,
    /// With success, messages after this index are still retried.
    pub ack_index: i32,
}

impl ConsumeConcurrentlyContext {
    fn new(message_queue: MessageQueue) -> Self {
        ConsumeConcurrentlyContext {
            message_queue,
            delay_level_when_next_consume: 0,
            ack_index: i32::MAX,
        }
    }
}

/// What an orderly listener answers (Java `ConsumeOrderlyStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeOrderlyStatus {
    /// Consumed; the offset moves on.
    Success,
    /// Retry the same messages after a pause, holding the queue's order.
    SuspendCurrentQueueAMoment,
}

/// Context of one orderly consumption (Java `ConsumeOrderlyContext`).
#[derive(Debug, Clone)]
pub struct ConsumeOrderlyContext {
    /// The queue the messages came from.
    pub message_queue: MessageQueue,
    /// Pause before a suspended batch is retried (default: the consumer's setting).
    pub suspend_current_queue_time: Option<Duration>,
}

impl ConsumeOrderlyContext {
    fn new(message_queue: MessageQueue) -> Self {
        ConsumeOrderlyContext {
            message_queue,
            suspend_current_queue_time: None,
        }
    }
}

type ConcurrentFn = dyn Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus
    + Send
    + Sync;
type OrderlyFn =
    dyn Fn(&[MessageExt], &mut ConsumeOrderlyContext) -> ConsumeOrderlyStatus + Send + Sync;

pub(crate) enum Listener {
    Concurrently(Box<ConcurrentFn>),
    Orderly(Box<OrderlyFn>),
}

/// Push consumer settings with Java's defaults (Java `DefaultMQPushConsumer` fields).
#[derive(Debug, Clone)]
pub struct PushConsumerOptions {
    /// Clustering (default) or broadcasting.
    pub message_model: MessageModel,
    /// Start position of a group without stored offsets.
    pub consume_from_where: ConsumeFromWhere,
    /// For `ConsumeFromTimestamp`: ms since the epoch (default: 30 minutes ago).
    pub consume_timestamp: Option<i64>,
    /// Consume threads at least (Java 20).
    pub consume_thread_min: usize,
    /// Consume threads at most (Java 20).
    pub consume_thread_max: usize,
    /// Backlog above which job 5 adds a consume thread (Java 100,000).
    pub adjust_thread_pool_nums_threshold: u64,
    /// Pause pulls of a queue whose cached offsets span more than this (Java 2000).
    pub consume_concurrently_max_span: i64,
    /// Pause pulls of a queue with more cached messages (Java 1000).
    pub pull_threshold_for_queue: usize,
    /// Pause pulls of a queue with more cached MiB (Java 100).
    pub pull_threshold_size_for_queue_mib: u64,
    /// Pause between pulls of a queue (Java 0).
    pub pull_interval: Duration,
    /// Messages per listener call (Java 1).
    pub consume_message_batch_max_size: usize,
    /// Messages per pull (Java 32).
    pub pull_batch_size: usize,
    /// Send the subscription with every pull (Java false).
    pub post_subscription_when_pull: bool,
    /// Retries before the DLQ; -1 = 16 (concurrent) or unlimited (orderly).
    pub max_reconsume_times: i32,
    /// Orderly: pause before a suspended batch is retried (Java 1 s).
    pub suspend_current_queue_time: Duration,
    /// Delay of a pull retry after an error (Java 1 s, `pullTimeDelayMillsWhenException`).
    pub pull_time_delay_when_exception: Duration,
    /// Directory of broadcasting offsets (Java `rocketmq.client.localOffsetStoreDir`).
    pub offset_store_dir: PathBuf,
}

impl Default for PushConsumerOptions {
    fn default() -> Self {
        PushConsumerOptions {
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp: None,
            consume_thread_min: 20,
            consume_thread_max: 20,
            adjust_thread_pool_nums_threshold: 100_000,
            consume_concurrently_max_span: 2000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            post_subscription_when_pull: false,
            max_reconsume_times: -1,
            suspend_current_queue_time: Duration::from_millis(1000),
            pull_time_delay_when_exception: Duration::from_millis(1000),
            offset_store_dir: default_local_offset_dir(),
        }
    }
}

impl PushConsumerOptions {
    pub(crate) fn max_reconsume_times_concurrently(&self) -> i32 {
        if self.max_reconsume_times < 0 {
            16
        } else {
            self.max_reconsume_times
        }
    }

    pub(crate) fn max_reconsume_times_orderly(&self) -> i32 {
        if self.max_reconsume_times < 0 {
            i32::MAX
        } else {
            self.max_reconsume_times
        }
    }

    pub(crate) fn consume_timestamp_millis(&self) -> i64 {
        self.consume_timestamp
            .unwrap_or_else(|| crate::util::now_millis() - 30 * 60 * 1000)
    }
}

/// Builder for [`PushConsumer`].
pub struct PushConsumerBuilder {
    group: String,
    client: ClientConfigBuilder,
    options: PushConsumerOptions,
    subscriptions: Vec<(String, MessageSelector)>,
    listener: Option<Listener>,
    strategy: Option<Box<dyn AllocateStrategy>>,
}

impl PushConsumerBuilder {
    crate::util::client_setters!();

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

    /// The concurrent listener (Java `MessageListenerConcurrently`); runs on the consume pool.
    pub fn register_message_listener_concurrently(
        mut self,
        f: impl Fn(&[MessageExt], &mut ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.listener = Some(Listener::Concurrently(Box::new(f)));
        self
    }

    /// The orderly listener (Java `MessageListenerOrderly`): one thread per queue at a time.
    pub fn register_message_listener_orderly(
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
        /// Retries before the DLQ.
        max_reconsume_times: i32;
        /// Orderly pause before a retry.
        suspend_current_queue_time: Duration;
        /// Pause between pulls of a queue.
        pull_interval: Duration;
        /// Cached messages per queue before pulls pause.
        pull_threshold_for_queue: usize;
        /// Directory of broadcasting offsets.
        offset_store_dir: PathBuf;
    }

    /// Checks the configuration, registers with the client instance and starts
    /// consuming (Java `DefaultMQPushConsumerImpl.start`).
    pub fn start(self) -> Result<PushConsumer> {
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
        if !(1..=1024).contains(&o.pull_batch_size)
            || !(1..=1024).contains(&o.consume_message_batch_max_size)
        {
            return Err(Error::invalid_argument(
                "pull and consume batch sizes must be within 1..=1024",
            ));
        }
        let Some(listener) = self.listener else {
            return Err(Error::invalid_argument("no message listener is registered"));
        };
        if self.subscriptions.is_empty() {
            return Err(Error::invalid_argument(
                "the consumer subscribes to no topic",
            ));
        }
        let mut config: ClientConfig = self.client.build();
        let ns = config.namespace();
        let group = namespace::wrap(ns.as_deref(), &self.group);
        let mut subs = Vec::new();
        for (topic, selector) in &self.subscriptions {
            check_topic(topic)?;
            let wrapped = namespace::wrap(ns.as_deref(), topic);
            subs.push(subscription::build_subscription_data(&wrapped, selector)?);
        }
        if self.options.message_model == MessageModel::Clustering {
            config.change_instance_name_to_pid();
            // Clustering consumers also consume their retry topic.
            let retry = format!("%RETRY%{group}");
            subs.push(subscription::build_subscription_data(
                &retry,
                &MessageSelector::by_tag("*"),
            )?);
        }
        let instance = manager::get_or_create_instance(&config)?;
        let strategy = self.strategy.unwrap_or_else(|| Box::new(AllocateAveragely));
        let rebalance = RebalanceImpl::new(
            &group,
            self.options.message_model,
            strategy,
            instance.clone(),
        );
        for s in subs {
            rebalance.subscriptions.write().insert(s.topic.clone(), s);
        }
        let store = offset_store::open_store(
            self.options.message_model,
            &instance,
            &self.options.offset_store_dir,
            &group,
        )?;
        let inner = PushConsumerImpl::new(
            group.clone(),
            self.options,
            listener,
            instance.clone(),
            rebalance,
            store,
        )?;
        let consumer = PushConsumer { inner };
        consumer.start_inner()?;
        Ok(consumer)
    }
}

/// A push consumer: messages are pulled for you and handed to your listener.
/// Dropping it shuts it down.
pub struct PushConsumer {
    inner: Arc<PushConsumerImpl>,
}

impl PushConsumer {
    /// A builder for a consumer of `group`.
    pub fn builder(group: impl Into<String>) -> PushConsumerBuilder {
        PushConsumerBuilder {
            group: group.into(),
            client: ClientConfig::builder(),
            options: PushConsumerOptions::default(),
            subscriptions: Vec::new(),
            listener: None,
            strategy: None,
        }
    }

    fn start_inner(&self) -> Result<()> {
        let c = &self.inner;
        let instance = &c.instance;
        let me: Arc<dyn ConsumerInner> = c.clone();
        if !instance.register_consumer(&c.group, me) {
            c.pool.shutdown();
            return Err(Error::state(format!(
                "the consumer group {} is already registered in client {}; choose another name",
                c.group,
                instance.client_id()
            )));
        }
        if let Err(e) = instance.start() {
            instance.unregister_consumer(&c.group);
            c.pool.shutdown();
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
        c.start_lock_timer()?;
        let topics: Vec<String> = c.rebalance.subscriptions.read().keys().cloned().collect();
        for t in topics {
            if let Err(e) = instance.update_topic_route(&t) {
                if !t.starts_with("%RETRY%") {
                    log::warn!("{}: route of {t}: {e}", c.group);
                }
            }
        }
        instance.send_heartbeat_to_all_brokers_with_lock();
        instance.rebalance_immediately();
        info!(
            "push consumer {} started on client {}",
            c.group,
            instance.client_id()
        );
        Ok(())
    }

    /// The consumer group (with namespace).
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// The client id of the shared instance.
    pub fn client_id(&self) -> &str {
        self.inner.instance.client_id()
    }

    /// Queues this consumer holds now.
    pub fn assigned_queues(&self) -> Vec<MessageQueue> {
        self.inner.held_queues()
    }

    /// Offsets in memory (what the next persist writes).
    pub fn offsets(&self) -> std::collections::HashMap<MessageQueue, i64> {
        self.inner.offset_store.offsets()
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

    /// Runs job 5 now (the thread-pool adjustment), for tools and tests.
    pub fn adjust_thread_pool(&self) {
        self.inner.adjust_thread_pool();
    }

    /// Stops pulling, lets running listeners finish, persists offsets synchronously,
    /// unlocks orderly queues, unregisters from the brokers and stops the client
    /// instance if nothing else uses it. Idempotent.
    pub fn shutdown(&self) {
        let c = &self.inner;
        {
            let mut st = c.state.lock();
            if *st != ServiceState::Running {
                return;
            }
            *st = ServiceState::ShutdownAlready;
        }
        c.stop_lock_timer();
        c.drop_all_queues();
        c.pool.shutdown();
        c.persist_offsets_sync();
        if c.is_orderly_clustering() {
            c.rebalance.unlock_all(false);
        }
        let fallback = c.fallback_producer.write().take();
        if let Some(p) = fallback {
            p.shutdown();
        }
        c.instance.unregister_consumer(&c.group);
        c.instance.shutdown();
        info!("push consumer {} shut down", c.group);
    }
}

impl Drop for PushConsumer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
