//! The push consumer's builder: subscriptions, the listener, hooks and options, checked
//! before [`PushConsumerBuilder::start`] makes a [`PushConsumer`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// Builder for [`PushConsumer`].
pub struct PushConsumerBuilder {
    pub(super) group: String,
    pub(super) client: ClientOptions,
    pub(super) options: PushConsumerOptions,
    pub(super) subscriptions: Vec<(String, MessageSelector)>,
    pub(super) listener: Option<Listener>,
    pub(super) strategy: Option<Box<dyn AllocateStrategy>>,
    pub(super) consume_hooks: crate::util::Hooks<dyn ConsumeHook>,
    pub(super) request_hooks: crate::util::Hooks<dyn crate::RequestHook>,
    pub(super) queue_listener: Option<Arc<dyn MessageQueueListener>>,
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
