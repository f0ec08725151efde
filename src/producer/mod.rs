//! The producer (Java `DefaultMQProducer` facade over `DefaultMQProducerImpl`).
//!
//! ```no_run
//! use rocketmq_blocking::{Message, Producer};
//!
//! let options = rocketmq_blocking::ClientOptions::new().namesrv_addr("127.0.0.1:9876");
//! let producer = Producer::builder("my_group").client_options(options).start()?;
//! let result = producer.send(&Message::new("TopicTest", "hello").with_tags("TagA"))?;
//! println!("{} stored at queue {} offset {}", result.msg_id(), result.message_queue().queue_id(), result.queue_offset());
//! producer.shutdown();
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! Sends come in three modes: [`send`](Producer::send) blocks until the broker stored the
//! message (retrying on another broker up to `retries` times within
//! the send timeout), [`send_async`](Producer::send_async) returns at once and calls back
//! on the callback pool, [`send_oneway`](Producer::send_oneway) expects no answer.

mod latency_fault;
mod observe;
mod request;
mod send;
mod trace_sender;
mod transaction;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;

#[cfg(feature = "unstable-internals")]
use crate::client::MQClientInstance;
use crate::client::{ClientConfig, ClientOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{CompressionType, Message, MessageExt, MessageQueue};
use crate::protocol::heartbeat::java_string_hash;
use crate::util::ShortText;

pub use observe::{SendContext, SendHook, SendMode};
pub use request::{create_reply_message, reply_topic};
use send::ProducerImpl;
pub(crate) use trace_sender::start_trace;
pub use transaction::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionProducerBuilder,
    TransactionSendResult,
};

/// Outcome of a stored send (Java `SendStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Stored.
    #[doc(alias = "SEND_OK")]
    Ok,
    /// Stored, but the broker's synchronous flush timed out.
    FlushDiskTimeout,
    /// Stored, but the synchronous replication timed out.
    FlushSlaveTimeout,
    /// Stored, but no slave is available for synchronous replication.
    SlaveNotAvailable,
}

/// What the broker answered to a send (Java `SendResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    pub(crate) send_status: SendStatus,
    /// The ids inline (no allocation) unless a batch's are joined.
    pub(crate) msg_id: ShortText,
    pub(crate) offset_msg_id: ShortText,
    pub(crate) message_queue: MessageQueue,
    pub(crate) queue_offset: i64,
    pub(crate) transaction_id: Option<ShortText>,
    /// Borrowed for the default region: no allocation per send.
    pub(crate) region_id: std::borrow::Cow<'static, str>,
    pub(crate) trace_on: bool,
}

impl SendResult {
    /// Whether and how the message was stored.
    pub fn send_status(&self) -> SendStatus {
        self.send_status
    }

    /// The client-side id (`UNIQ_KEY`); for a batch, the ids joined by `,` (Java `msgId`).
    pub fn msg_id(&self) -> &str {
        &self.msg_id
    }

    /// The broker-side id: store host and commit log offset (Java `offsetMsgId`).
    pub fn offset_msg_id(&self) -> &str {
        &self.offset_msg_id
    }

    /// The queue the message went to.
    pub fn message_queue(&self) -> &MessageQueue {
        &self.message_queue
    }

    /// Offset in the consume queue (of the first message of a batch).
    pub fn queue_offset(&self) -> i64 {
        self.queue_offset
    }

    /// The transaction id, if the broker returned one.
    pub fn transaction_id(&self) -> Option<&str> {
        self.transaction_id.as_deref()
    }

    /// The broker's region (`MSG_REGION`, default `DefaultRegion`).
    pub fn region_id(&self) -> &str {
        &self.region_id
    }

    /// Whether message trace is on at the broker (`TRACE_ON`).
    pub fn trace_on(&self) -> bool {
        self.trace_on
    }
}

/// Producer settings, with Java's defaults (Java `DefaultMQProducer` fields). Set them on
/// the [`ProducerBuilder`], or all at once with [`ProducerBuilder::options`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProducerOptions {
    /// Topic the broker copies for auto-created topics (Java `createTopicKey`, `TBW102`).
    #[doc(alias = "createTopicKey")]
    pub create_topic_key: String,
    /// Queues of an auto-created topic (Java `defaultTopicQueueNums`, 4).
    #[doc(alias = "defaultTopicQueueNums")]
    pub default_topic_queues: u32,
    /// Budget of one send, retries included (Java `sendMsgTimeout`, 3 s).
    #[doc(alias = "sendMsgTimeout")]
    pub send_timeout: Duration,
    /// Bodies of at least this many bytes are zlib-compressed (Java
    /// `compressMsgBodyOverHowmuch`, 4096).
    #[doc(alias = "compressMsgBodyOverHowmuch")]
    pub compress_over: usize,
    /// zlib level 0..=9 (Java `rocketmq.message.compressLevel`, 5).
    pub compress_level: u32,
    /// Record a trace of every send in the trace topic (Java `enableMsgTrace`, false).
    #[doc(alias = "enableMsgTrace")]
    pub enable_msg_trace: bool,
    /// The trace topic when tracing (Java `customizedTraceTopic`; default
    /// `RMQ_SYS_TRACE_TOPIC`).
    #[doc(alias = "customizedTraceTopic")]
    pub trace_topic: Option<String>,
    /// How bodies are compressed (Java 5.x `compressType`, zlib). LZ4 and Zstandard
    /// bodies are read by Java 5.x consumers and this crate's, not by Java 4.x ones.
    #[doc(alias = "compressType")]
    pub compress_type: CompressionType,
    /// Extra attempts of a sync send, on another broker where there is one (Java
    /// `retryTimesWhenSendFailed`, 2).
    #[doc(alias = "retryTimesWhenSendFailed")]
    pub retries: u32,
    /// Re-sends of an async send after a transport failure (Java
    /// `retryTimesWhenSendAsyncFailed`, 2).
    #[doc(alias = "retryTimesWhenSendAsyncFailed")]
    pub async_retries: u32,
    /// Retry on another broker when the broker stored the message but answered a status
    /// other than [`SendStatus::Ok`] (Java `retryAnotherBrokerWhenNotStoreOK`, false).
    #[doc(alias = "retryAnotherBrokerWhenNotStoreOK")]
    pub retry_when_not_stored: bool,
    /// Largest body, checked before compression (Java `maxMessageSize`, 4 MiB).
    #[doc(alias = "maxMessageSize")]
    pub max_message_size: usize,
    /// Avoid slow or failing brokers for a while (Java `sendLatencyFaultEnable`, false).
    #[doc(alias = "sendLatencyFaultEnable")]
    pub latency_fault_tolerance: bool,
    /// A topic not sent to for this long leaves the producer's route cache, and its route
    /// is no longer refreshed (10 min; Java keeps every topic forever). The next send to
    /// it looks its route up again.
    pub idle_topic_timeout: Duration,
    /// Gather single sends into batches (Java 5 `autoBatch`, false): a message that can be
    /// batched waits up to [`batch_max_delay`](Self::batch_max_delay) for others of its
    /// topic (and queue, when the caller chose one), and each caller still gets its own
    /// [`SendResult`] or error. See [`ProducerBuilder::auto_batch`].
    #[doc(alias = "autoBatch")]
    pub auto_batch: bool,
    /// Longest a message waits for its batch to fill (Java `batchMaxDelayMs`, 10 ms;
    /// 1 ms..=30 s).
    #[doc(alias = "batchMaxDelayMs")]
    pub batch_max_delay: Duration,
    /// A batch is sent once its bodies reach this many bytes; a body of at least this
    /// size is sent alone (Java `batchMaxBytes`, 32 KiB; 1..=2 MiB).
    #[doc(alias = "batchMaxBytes")]
    pub batch_max_bytes: usize,
    /// Bodies held in unsent batches at most, over all topics; a message that would
    /// exceed it is sent alone at once, as Java does (Java `totalBatchMaxBytes`, 32 MiB).
    #[doc(alias = "totalBatchMaxBytes")]
    pub total_batch_max_bytes: usize,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            create_topic_key: crate::client::validators::AUTO_CREATE_TOPIC_KEY_TOPIC.to_string(),
            default_topic_queues: 4,
            send_timeout: Duration::from_millis(3000),
            compress_over: 4096,
            compress_level: 5,
            compress_type: CompressionType::Zlib,
            enable_msg_trace: false,
            trace_topic: None,
            retries: 2,
            async_retries: 2,
            retry_when_not_stored: false,
            max_message_size: 4 * 1024 * 1024,
            latency_fault_tolerance: false,
            idle_topic_timeout: Duration::from_secs(600),
            auto_batch: false,
            batch_max_delay: Duration::from_millis(10),
            batch_max_bytes: 32 * 1024,
            total_batch_max_bytes: 32 * 1024 * 1024,
        }
    }
}

impl ProducerOptions {
    /// Refuses settings outside Java's ranges before anything starts.
    fn check(&self) -> Result<()> {
        if self.compress_level > 9 {
            return Err(Error::invalid_argument(format!(
                "compress level {} is not in 0..=9",
                self.compress_level
            )));
        }
        // Java's checks (`ProduceAccumulator.batchMaxDelayMs`, `batchMaxBytes`,
        // `totalBatchMaxBytes`), made whether or not auto-batching is on.
        if self.batch_max_delay < Duration::from_millis(1)
            || self.batch_max_delay > Duration::from_secs(30)
        {
            return Err(Error::invalid_argument(format!(
                "batch max delay {:?} is not in 1 ms..=30 s",
                self.batch_max_delay
            )));
        }
        if self.batch_max_bytes == 0 || self.batch_max_bytes > 2 * 1024 * 1024 {
            return Err(Error::invalid_argument(format!(
                "batch max bytes {} is not in 1..=2 MiB",
                self.batch_max_bytes
            )));
        }
        if self.total_batch_max_bytes == 0 {
            return Err(Error::invalid_argument(
                "total batch max bytes must be greater than 0",
            ));
        }
        Ok(())
    }
}

/// Builder for [`Producer`]: `Producer::builder(group)`, the client-wide
/// [`ClientOptions`], the producer's own settings, then [`start`](Self::start).
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    group: String,
    client: ClientOptions,
    options: ProducerOptions,
    send_hooks: crate::util::Hooks<dyn SendHook>,
    request_hooks: crate::util::Hooks<dyn crate::RequestHook>,
}

impl ProducerBuilder {
    /// What every client shares: name servers, instance name, namespace, credentials, TLS,
    /// timeouts (default [`ClientOptions::new`]).
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// Adds a hook called around every send, from the first one on (Java
    /// `registerSendMessageHook`); see [`SendHook`]. [`Producer::register_send_hook`] adds
    /// one to a running producer.
    #[doc(alias = "registerSendMessageHook")]
    pub fn send_hook(mut self, hook: Arc<dyn SendHook>) -> Self {
        self.send_hooks.0.push(hook);
        self
    }

    /// Adds a hook called around every request of the client instance, from the first
    /// route query and heartbeat on (Java `RPCHook`); see [`RequestHook`](crate::RequestHook).
    pub fn request_hook(mut self, hook: Arc<dyn crate::RequestHook>) -> Self {
        self.request_hooks.0.push(hook);
        self
    }

    /// The producer with this builder's hooks in place.
    fn with_hooks(
        producer: Producer,
        send_hooks: crate::util::Hooks<dyn SendHook>,
        request_hooks: crate::util::Hooks<dyn crate::RequestHook>,
    ) -> Producer {
        for hook in send_hooks.0 {
            producer.register_send_hook(hook);
        }
        producer.inner.add_start_request_hooks(request_hooks.0);
        producer
    }

    /// Turns this producer into a transactional one whose transactions `listener` runs
    /// and checks (Java `TransactionMQProducer`), with every setting made so far.
    #[doc(alias = "TransactionMQProducer")]
    pub fn transactional(self, listener: impl TransactionListener) -> TransactionProducerBuilder {
        TransactionProducerBuilder::new(self, std::sync::Arc::new(listener))
    }

    /// All producer options at once.
    pub fn options(mut self, options: ProducerOptions) -> Self {
        self.options = options;
        self
    }

    crate::util::option_setters! {
        /// Budget of one send, retries included (Java `sendMsgTimeout`, 3 s).
        send_timeout: Duration;
        /// Extra attempts of a sync send (Java `retryTimesWhenSendFailed`, 2).
        retries: u32;
        /// Re-sends of an async send after a transport failure (Java 2).
        async_retries: u32;
        /// Compress bodies of at least this many bytes (Java 4096).
        compress_over: usize;
        /// zlib level 0..=9 (Java 5).
        compress_level: u32;
        /// zlib (default), LZ4 or Zstandard (Java 5.x `compressType`).
        compress_type: CompressionType;
        /// Trace every send in the trace topic (Java `enableMsgTrace`).
        enable_msg_trace: bool;
        /// Largest body (Java 4 MiB).
        max_message_size: usize;
        /// Queues of auto-created topics (Java 4).
        default_topic_queues: u32;
        /// Latency fault tolerance (Java false).
        latency_fault_tolerance: bool;
        /// Retry on another broker when not stored OK (Java false).
        retry_when_not_stored: bool;
        /// Forget a topic's route after this long without a send to it (10 min).
        idle_topic_timeout: Duration;
        /// Longest wait for a batch to fill with `auto_batch` (Java `batchMaxDelayMs`,
        /// 10 ms; 1 ms..=30 s).
        batch_max_delay: Duration;
        /// Bytes of bodies that send a batch at once with `auto_batch` (Java
        /// `batchMaxBytes`, 32 KiB; 1..=2 MiB).
        batch_max_bytes: usize;
        /// Bytes of bodies held in unsent batches at most (Java `totalBatchMaxBytes`,
        /// 32 MiB).
        total_batch_max_bytes: usize;
    }

    /// Gathers single sends into batches (Java 5 `setAutoBatch`, off by default).
    ///
    /// `send`, `send_timeout`, `send_to_queue`, `send_with_selector` and the `send_async`
    /// family put a message that can be batched into the open batch of its topic (and of
    /// its queue, when the caller chose one), which goes to the broker as one
    /// `SEND_BATCH_MESSAGE` when its bodies reach `batch_max_bytes` or after
    /// `batch_max_delay`. Every caller still gets its own [`SendResult`] (its own message
    /// id and queue offset) or the batch's error, and its own hooks and counts; messages
    /// to one queue keep their order. Messages go alone, as without auto-batching, when
    /// they carry a delay level or a timer, are transactional, replies, retries or
    /// already bound to a producer group, would be compressed, are at least
    /// `batch_max_bytes` long, or when `total_batch_max_bytes` are already held.
    /// Shutdown sends the batches still open before it returns. Oneway sends are never
    /// batched.
    #[doc(alias = "setAutoBatch")]
    pub fn auto_batch(mut self, on: bool) -> Self {
        self.options.auto_batch = on;
        self
    }

    /// Checks the configuration and creates a producer that is not started yet.
    fn build(self) -> Result<Producer> {
        let config: ClientConfig = self.client.into_config();
        self.options.check()?;
        let inner = ProducerImpl::new(self.group, config, self.options)?;
        Ok(Self::with_hooks(
            Producer { inner },
            self.send_hooks,
            self.request_hooks,
        ))
    }

    /// Traces every send in `topic` instead of `RMQ_SYS_TRACE_TOPIC`, and turns tracing on
    /// (Java `customizedTraceTopic`).
    pub fn trace_topic(mut self, topic: impl Into<String>) -> Self {
        self.options.enable_msg_trace = true;
        self.options.trace_topic = Some(topic.into());
        self
    }

    /// Like `build` with a finished client configuration (used for the
    /// consumers' retry producer, which must share their client id).
    pub(crate) fn build_with_config(self, config: ClientConfig) -> Result<Producer> {
        let inner = ProducerImpl::new(self.group, config, self.options)?;
        Ok(Producer { inner })
    }

    /// The engine of a [`TransactionProducer`], whose checks go to `env`'s pool.
    fn build_transactional(self, env: Arc<transaction::TransactionEnv>) -> Result<Producer> {
        let config = self.client.into_config();
        self.options.check()?;
        let inner = ProducerImpl::with_transaction(self.group, config, self.options, Some(env))?;
        Ok(Self::with_hooks(
            Producer { inner },
            self.send_hooks,
            self.request_hooks,
        ))
    }

    /// Checks the configuration, registers with the shared client instance (starting it
    /// if it is new) and returns the running producer (Java `new DefaultMQProducer`,
    /// then `start()`).
    #[doc(alias = "DefaultMQProducer")]
    pub fn start(self) -> Result<Producer> {
        let p = self.build()?;
        p.start()?;
        Ok(p)
    }
}

/// A producer. Cheap to share by reference across threads; every method takes `&self`.
/// Dropping it shuts it down.
pub struct Producer {
    inner: Arc<ProducerImpl>,
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("group", &self.inner.group())
            .field("client_id", &self.inner.client_id())
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// A builder for a producer of `group`.
    pub fn builder(group: impl Into<String>) -> ProducerBuilder {
        ProducerBuilder {
            group: group.into(),
            client: ClientOptions::new(),
            options: ProducerOptions::default(),
            send_hooks: Default::default(),
            request_hooks: Default::default(),
        }
    }

    /// Registers with the shared client instance and starts it. Starting twice, or after
    /// shutdown, is a state error.
    pub(crate) fn start(&self) -> Result<()> {
        self.inner.start()
    }

    /// Unregisters from the brokers and stops the client instance if nothing else uses
    /// it. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown()
    }

    /// [`shutdown`](Self::shutdown) with every step done by `deadline` (a consumer's
    /// shutdown passes its own deadline to the producer it sends retries with).
    pub(crate) fn shutdown_until(&self, deadline: std::time::Instant) {
        self.inner.shutdown_until(deadline)
    }

    /// The producer group (with namespace).
    pub fn group(&self) -> &str {
        self.inner.group()
    }

    /// The client id of the shared client instance (`ip@instance[@unit]`), as brokers and
    /// the admin tool list it.
    pub fn client_id(&self) -> String {
        self.inner.client_id()
    }

    /// The options in effect.
    pub fn options(&self) -> &ProducerOptions {
        self.inner.options()
    }

    /// The shared client instance while the producer runs (`None` before start and after
    /// shutdown): its cached routes, broker table and remoting client, for diagnostics and
    /// tests (Java `getDefaultMQProducerImpl().getMqClientFactory()`).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn client_instance(&self) -> Option<Arc<MQClientInstance>> {
        self.inner.client_instance()
    }

    /// Sends and waits for the broker, within the default send timeout.
    pub fn send(&self, msg: &Message) -> Result<SendResult> {
        self.inner.send_sync(msg, self.inner.options().send_timeout)
    }

    /// Sends and waits for the broker, within `timeout` (retries included).
    pub fn send_timeout(&self, msg: &Message, timeout: Duration) -> Result<SendResult> {
        self.inner.send_sync(msg, timeout)
    }

    /// Sends to one queue, once (no retry).
    pub fn send_to_queue(&self, msg: &Message, mq: &MessageQueue) -> Result<SendResult> {
        self.inner
            .send_to_queue(msg, mq, self.inner.options().send_timeout)
    }

    /// Sends to the queue `selector` picks, once (ordered messages).
    pub fn send_with_selector<A: ?Sized>(
        &self,
        msg: &Message,
        selector: &impl MessageQueueSelector<A>,
        arg: &A,
    ) -> Result<SendResult> {
        let timeout = self.inner.options().send_timeout;
        let mq = self
            .inner
            .select_queue(msg, |mqs| selector.select(mqs, msg, arg))?;
        self.inner.send_to_queue(msg, &mq, timeout)
    }

    /// Sends messages of one topic as one batch (`SEND_BATCH_MESSAGE`).
    pub fn send_batch(&self, msgs: &[Message]) -> Result<SendResult> {
        self.inner
            .send_batch(msgs, self.inner.options().send_timeout)
    }

    /// [`send_batch`](Self::send_batch) within `timeout` (retries included).
    pub fn send_batch_timeout(&self, msgs: &[Message], timeout: Duration) -> Result<SendResult> {
        self.inner.send_batch(msgs, timeout)
    }

    /// Sends a batch to one queue of its topic, once (no retry).
    pub fn send_batch_to_queue(&self, msgs: &[Message], mq: &MessageQueue) -> Result<SendResult> {
        self.inner
            .send_batch_to_queue(msgs, mq, self.inner.options().send_timeout)
    }

    /// [`send_batch`](Self::send_batch) without waiting (Java `send(Collection<Message>,
    /// SendCallback)`): `callback` runs on the callback pool with the batch's result,
    /// exactly once if this returns `Ok`, as for [`send_async`](Self::send_async). An `Err`
    /// means nothing was sent and `callback` never runs: an invalid batch (empty, several
    /// topics, a delayed or retry-topic message), no route, or a producer not running.
    pub fn send_batch_async(
        &self,
        msgs: &[Message],
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> Result<()> {
        let timeout = self.inner.options().send_timeout;
        self.inner
            .send_batch_async(msgs, None, timeout, Box::new(callback))
    }

    /// [`send_batch_async`](Self::send_batch_async) to one queue of the batch's topic;
    /// re-sends after a transport failure go to the same queue.
    pub fn send_batch_async_to_queue(
        &self,
        msgs: &[Message],
        mq: &MessageQueue,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> Result<()> {
        let timeout = self.inner.options().send_timeout;
        self.inner
            .send_batch_async(msgs, Some(mq), timeout, Box::new(callback))
    }

    /// Sends without waiting; `callback` runs on the callback pool with the result.
    ///
    /// The contract, as crossbeam's `send` and rdkafka's `BaseProducer::send` have it:
    ///
    /// - If this returns `Ok`, the message is queued and `callback` runs **exactly once**:
    ///   with the broker's answer, a timeout after the send timeout, the connection's
    ///   error, or a shut-down error if the producer shuts down first. Transport failures
    ///   are re-sent to another broker up to `async_retries` times
    ///   before the callback sees them.
    /// - If it returns `Err`, nothing was sent: `callback` has not run and never will (it
    ///   is dropped), and the message comes back in the [`SendAsyncError`], for the caller
    ///   to retry or report. That happens for an invalid message, a topic without a route,
    ///   a producer that is not running, an in-flight limit that stayed full for the send
    ///   timeout, or a broker address that cannot be used.
    pub fn send_async(
        &self,
        msg: Message,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> std::result::Result<(), SendAsyncError> {
        let timeout = self.inner.options().send_timeout;
        self.inner
            .send_async(msg, None, timeout, Box::new(callback))
    }

    /// [`send_async`](Self::send_async) to one queue: the same contract, and re-sends after
    /// a transport failure go to the same queue.
    pub fn send_async_to_queue(
        &self,
        msg: Message,
        mq: &MessageQueue,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> std::result::Result<(), SendAsyncError> {
        let timeout = self.inner.options().send_timeout;
        self.inner
            .send_async(msg, Some(mq), timeout, Box::new(callback))
    }

    /// [`send_async`](Self::send_async) to the queue `selector` picks (ordered messages);
    /// the selector runs on the caller's thread before anything is queued.
    pub fn send_async_with_selector<A: ?Sized>(
        &self,
        msg: Message,
        selector: &impl MessageQueueSelector<A>,
        arg: &A,
        callback: impl FnOnce(Result<SendResult>) + Send + 'static,
    ) -> std::result::Result<(), SendAsyncError> {
        let mq = match self
            .inner
            .select_queue(&msg, |mqs| selector.select(mqs, &msg, arg))
        {
            Ok(mq) => mq,
            Err(e) => return Err(SendAsyncError::new(e, msg)),
        };
        self.send_async_to_queue(msg, &mq, callback)
    }

    /// [`send_async`](Self::send_async) with a handle to wait on instead of a callback;
    /// the same contract: `Ok` means the future completes, `Err` returns the message.
    pub fn send_async_future(
        &self,
        msg: Message,
    ) -> std::result::Result<SendFuture, SendAsyncError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let timeout = self.inner.options().send_timeout;
        self.inner.send_async(
            msg,
            None,
            timeout,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        Ok(SendFuture { rx })
    }

    /// Sends once, expecting no answer; returns when the request is queued for writing.
    pub fn send_oneway(&self, msg: &Message) -> Result<()> {
        self.inner.send_oneway(msg)
    }

    /// Sends once to one queue, expecting no answer.
    pub fn send_oneway_to_queue(&self, msg: &Message, mq: &MessageQueue) -> Result<()> {
        self.inner.send_oneway_to_queue(msg, mq)
    }

    /// Sends once to the queue `selector` picks, expecting no answer.
    pub fn send_oneway_with_selector<A: ?Sized>(
        &self,
        msg: &Message,
        selector: &impl MessageQueueSelector<A>,
        arg: &A,
    ) -> Result<()> {
        let mq = self
            .inner
            .select_queue(msg, |mqs| selector.select(mqs, msg, arg))?;
        self.inner.send_oneway_to_queue(msg, &mq)
    }

    /// Sends `msg` as a request and waits for its reply, all within `timeout` (Java
    /// `request(msg, timeout)`). A consumer of the topic answers with a message made by
    /// [`create_reply_message`]; the broker pushes that reply to this client. No reply in
    /// time is a [`Timeout`](crate::ErrorKind::Timeout) error, and a reply that comes after
    /// it is dropped.
    pub fn request(&self, msg: &Message, timeout: Duration) -> Result<MessageExt> {
        self.inner.request_reply(msg, timeout)
    }

    /// [`request`](Self::request) without waiting: `callback` runs exactly once on the
    /// callback pool, with the reply, the send's failure, the timeout or the shutdown of
    /// the client, unless this returns `Err` (nothing sent; `callback` dropped unrun).
    pub fn request_async(
        &self,
        msg: Message,
        timeout: Duration,
        callback: impl FnOnce(Result<MessageExt>) + Send + 'static,
    ) -> Result<()> {
        self.inner
            .request_reply_async(msg, timeout, Box::new(callback))
    }

    /// What the message trace did so far; `None` when the producer does not trace.
    pub fn trace_stats(&self) -> Option<crate::TraceStats> {
        self.inner.trace_stats()
    }

    /// The producer's figures now: per topic, messages and bytes sent, failures by kind
    /// and the send latency; async sends in flight; the client instance's connections,
    /// heartbeats and route refreshes. Cheap: a read of atomics, no network call.
    pub fn stats(&self) -> crate::ProducerStats {
        let client = self
            .inner
            .client_instance()
            .map(|i| i.client_stats())
            .unwrap_or_default();
        self.inner
            .observer
            .counters
            .snapshot(self.inner.group(), client)
    }

    /// Adds a hook called around every send of this producer; hooks run in registration
    /// order. See [`SendHook`] for where they run.
    pub fn register_send_hook(&self, hook: Arc<dyn SendHook>) {
        self.inner.observer.register(hook)
    }

    /// Adds a hook called around every request of this producer's client instance (Java
    /// `RPCHook`), which every client with the same client id shares; requests sent before
    /// it is registered do not see it ([`ProducerBuilder::request_hook`] sees them all). A
    /// state error after shutdown.
    pub fn register_request_hook(&self, hook: Arc<dyn crate::RequestHook>) -> Result<()> {
        let instance = self.inner.instance()?;
        instance.register_request_hook(hook);
        Ok(())
    }

    /// Writable queues of `topic`, from the name server.
    pub fn fetch_publish_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        self.inner.fetch_publish_message_queues(topic)
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.inner.shutdown();
    }
}

/// A message that [`Producer::send_async`] did not queue, and why (crossbeam's
/// `SendError<T>`, rdkafka's `(KafkaError, BaseRecord)`).
///
/// The callback given with the message has not run and never will. The message is the
/// caller's again, unchanged, to send again or to report:
///
/// ```no_run
/// # use rocketmq_blocking::{Message, Producer};
/// # let options = rocketmq_blocking::ClientOptions::new().namesrv_addr("127.0.0.1:9876");
/// # let producer = Producer::builder("g").client_options(options).start()?;
/// let msg = Message::new("TopicTest", "hello");
/// if let Err(e) = producer.send_async(msg, |r| println!("{r:?}")) {
///     eprintln!("not sent: {}", e.error());
///     let msg = e.into_message();
///     // ... retry later with `msg`
/// #   drop(msg);
/// }
/// # Ok::<(), rocketmq_blocking::Error>(())
/// ```
///
/// `?` turns it into the plain [`Error`] (dropping the message). `Debug` shows the body's
/// length only, as [`Message`]'s does.
pub struct SendAsyncError {
    error: Error,
    /// Boxed so that `Result<(), SendAsyncError>` stays two words on the hot path; the
    /// allocation is made only on failure.
    message: Box<Message>,
}

impl SendAsyncError {
    pub(crate) fn new(error: Error, message: Message) -> Self {
        SendAsyncError {
            error,
            message: Box::new(message),
        }
    }

    /// Why the message was not queued.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The message, unchanged.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The message, unchanged, for another try.
    pub fn into_message(self) -> Message {
        *self.message
    }

    /// The error and the message.
    pub fn into_parts(self) -> (Error, Message) {
        (self.error, *self.message)
    }
}

impl std::fmt::Debug for SendAsyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendAsyncError")
            .field("error", &self.error)
            .field("message", &self.message)
            .finish()
    }
}

impl std::fmt::Display for SendAsyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "message to {} not sent: {}",
            self.message.topic(),
            self.error
        )
    }
}

impl std::error::Error for SendAsyncError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Keeps the error and drops the message, for `?` in functions returning [`Result`].
impl From<SendAsyncError> for Error {
    fn from(e: SendAsyncError) -> Error {
        e.error
    }
}

/// The pending result of [`Producer::send_async_future`], named after crossbeam's
/// receive family: [`wait`](Self::wait), [`wait_timeout`](Self::wait_timeout),
/// [`try_wait`](Self::try_wait).
///
/// It is not a [`std::future::Future`]: this crate has no async runtime, and a thread
/// blocks on it. The send completes on its own whether or not anyone waits.
#[derive(Debug)]
pub struct SendFuture {
    rx: Receiver<Result<SendResult>>,
}

impl SendFuture {
    /// Blocks until the send completes. The producer always completes it (at the latest
    /// when the send timeout passes), so this does not hang.
    pub fn wait(self) -> Result<SendResult> {
        self.rx.recv().unwrap_or_else(|_| {
            Err(Error::state(
                "the producer shut down before the send completed",
            ))
        })
    }

    /// Blocks up to `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<SendResult> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                Err(Error::timeout(crate::TimeoutPhase::Response, timeout))
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(Error::state(
                "the producer shut down before the send completed",
            )),
        }
    }

    /// The result if it is there already, without blocking.
    pub fn try_wait(&self) -> Option<Result<SendResult>> {
        self.rx.try_recv().ok()
    }
}

/// Picks the queue of a send (Java `MessageQueueSelector`), e.g. to keep the messages of
/// one order on one queue. Closures `Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue>`
/// are selectors.
pub trait MessageQueueSelector<A: ?Sized> {
    /// The queue for `msg` among `mqs` (topic without namespace).
    fn select(&self, mqs: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue>;
}

impl<A: ?Sized, F> MessageQueueSelector<A> for F
where
    F: Fn(&[MessageQueue], &Message, &A) -> Option<MessageQueue>,
{
    fn select(&self, mqs: &[MessageQueue], msg: &Message, arg: &A) -> Option<MessageQueue> {
        self(mqs, msg, arg)
    }
}

/// Java `SelectMessageQueueByHash`: `abs(arg.hashCode() % n)`, with Java's `hashCode`, so
/// Rust and Java producers put the same key on the same queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct SelectMessageQueueByHash;

/// A value with Java's `hashCode`.
pub trait JavaHashCode {
    /// `hashCode()` as the Java type of the same value computes it.
    fn java_hash_code(&self) -> i32;
}

impl JavaHashCode for str {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}
impl JavaHashCode for String {
    fn java_hash_code(&self) -> i32 {
        java_string_hash(self)
    }
}
impl JavaHashCode for i32 {
    fn java_hash_code(&self) -> i32 {
        *self
    }
}
impl JavaHashCode for i64 {
    fn java_hash_code(&self) -> i32 {
        (*self ^ ((*self as u64) >> 32) as i64) as i32
    }
}

impl<A: JavaHashCode + ?Sized> MessageQueueSelector<A> for SelectMessageQueueByHash {
    fn select(&self, mqs: &[MessageQueue], _msg: &Message, arg: &A) -> Option<MessageQueue> {
        if mqs.is_empty() {
            return None;
        }
        let v = (arg.java_hash_code() % mqs.len() as i32).unsigned_abs() as usize;
        mqs.get(v).cloned()
    }
}

impl ErrorKind {
    /// Whether errors of this kind come from the transport (connect, closed, timeout, TLS).
    pub(crate) fn is_transport(self) -> bool {
        matches!(
            self,
            ErrorKind::Timeout | ErrorKind::Connect | ErrorKind::ConnectionClosed | ErrorKind::Tls
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|i| MessageQueue::new("T", "b", i)).collect()
    }

    #[test]
    fn hash_selector_matches_java_arithmetic() {
        let m = Message::new("T", "x");
        // "order-1".hashCode() = -1207111310 in Java; % 8 = -6 → abs → 6.
        assert_eq!(java_string_hash("order-1"), -1207111310);
        assert_eq!(
            SelectMessageQueueByHash
                .select(&mqs(8), &m, "order-1")
                .unwrap()
                .queue_id,
            6
        );
        assert_eq!(
            SelectMessageQueueByHash
                .select(&mqs(8), &m, "order-3")
                .unwrap()
                .queue_id,
            4
        );
        assert_eq!(
            SelectMessageQueueByHash
                .select(&mqs(8), &m, &13i32)
                .unwrap()
                .queue_id,
            5
        );
        assert_eq!(
            SelectMessageQueueByHash
                .select(&mqs(8), &m, &-13i32)
                .unwrap()
                .queue_id,
            5
        );
        assert!(SelectMessageQueueByHash.select(&[], &m, &1i32).is_none());
        assert_eq!((1i64 << 32).java_hash_code(), 1);
    }

    #[test]
    fn closures_are_selectors() {
        let m = Message::new("T", "x");
        let last = |mqs: &[MessageQueue], _: &Message, _: &()| mqs.last().cloned();
        assert_eq!(last.select(&mqs(3), &m, &()).unwrap().queue_id, 2);
    }

    #[test]
    fn bad_group_is_rejected_before_anything_starts() {
        for g in ["", "bad group", "DEFAULT_PRODUCER"] {
            let e = Producer::builder(g)
                .client_options(crate::ClientOptions::new().namesrv_addr("127.0.0.1:1"))
                .build()
                .err()
                .unwrap();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{g}: {e}");
        }
        let e = Producer::builder("g")
            .compress_level(10)
            .build()
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
