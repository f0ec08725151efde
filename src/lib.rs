//! A synchronous, thread-based client for Apache RocketMQ that speaks the broker's native
//! "remoting" protocol, with no async runtime. It follows the Java client 4.9.x and talks
//! to 4.9.x and 5.x name servers and brokers.
//!
//! # Produce
//!
//! A [`Producer`] (Java `DefaultMQProducer`) sends and waits for the broker
//! ([`send`](Producer::send)), sends with a callback ([`send_async`](Producer::send_async)),
//! or sends without an answer ([`send_oneway`](Producer::send_oneway)):
//!
//! ```no_run
//! use rocketmq_blocking::{ClientOptions, Message, Producer};
//!
//! let options = ClientOptions::new().namesrv_addr("127.0.0.1:9876");
//! let producer = Producer::builder("my_group").client_options(options).start()?;
//! let r = producer.send(&Message::new("TopicTest", "hello").with_tags("TagA"))?;
//! println!("stored as {} at {} offset {}", r.msg_id(), r.message_queue(), r.queue_offset());
//! producer.shutdown();
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! What every client shares (name servers, instance name, namespace, credentials, TLS,
//! timeouts) is one [`ClientOptions`] value (Java `ClientConfig`) that any builder takes
//! whole; each builder adds its client's own settings. [`ClientOptions::new`] reads the
//! name servers from `NAMESRV_ADDR` when it is set, as the Java tools do, and every
//! setting starts from Java's default. A builder's `start` returns the running client.
//!
//! # Consume with a listener
//!
//! A [`PushConsumer`] (Java `DefaultMQPushConsumer`) pulls for you and calls your listener
//! on its consume pool. The listener answers [`ConsumeStatus::Success`], or
//! [`ConsumeStatus::ReconsumeLater`] to have the messages delivered again later:
//!
//! ```no_run
//! use rocketmq_blocking::{ClientOptions, ConsumeFromWhere, ConsumeStatus, PushConsumer};
//!
//! let consumer = PushConsumer::builder("my_consumer_group")
//!     .client_options(ClientOptions::new().namesrv_addr("127.0.0.1:9876"))
//!     .subscribe("TopicTest", "TagA || TagB")
//!     .consume_from_where(ConsumeFromWhere::FirstOffset)
//!     .listener(|msgs, _ctx| {
//!         for m in msgs {
//!             println!("{} {:?}", m.msg_id(), String::from_utf8_lossy(m.body()));
//!         }
//!         ConsumeStatus::Success
//!     })
//!     .start()?;
//! // ... later:
//! consumer.shutdown();
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! # Consume by polling
//!
//! A [`LitePullConsumer`] (Java `DefaultLitePullConsumer`) fills a bounded cache in the
//! background; your thread takes from it with [`poll`](LitePullConsumer::poll). Queues come
//! from the group's rebalance ([`subscribe`](LitePullConsumerBuilder::subscribe)) or from you
//! ([`assign`](LitePullConsumer::assign), with [`seek`](LitePullConsumer::seek) and
//! [`pause`](LitePullConsumer::pause)):
//!
//! ```no_run
//! use rocketmq_blocking::{ClientOptions, LitePullConsumer};
//!
//! let consumer = LitePullConsumer::builder("my_pull_group")
//!     .client_options(ClientOptions::new().namesrv_addr("127.0.0.1:9876"))
//!     .subscribe("TopicTest", "*")
//!     .start()?;
//! for m in consumer.poll()? {
//!     println!("{} at offset {}", m.msg_id(), m.queue_offset());
//! }
//! consumer.shutdown();
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! With a RocketMQ 5.x broker, a [`SimpleConsumer`] takes messages by POP: the broker
//! keeps the group's progress, each message stays invisible to the group until you
//! [`ack`](SimpleConsumer::ack) it or its invisible time passes (then it comes again), and
//! any number of consumers share a topic. A 4.x broker answers
//! [`ErrorKind::Unsupported`]:
//!
//! ```no_run
//! use std::time::Duration;
//! use rocketmq_blocking::{ClientOptions, SimpleConsumer};
//!
//! let consumer = SimpleConsumer::builder("my_pop_group")
//!     .client_options(ClientOptions::new().namesrv_addr("127.0.0.1:9876"))
//!     .subscribe("TopicTest", "*")
//!     .start()?;
//! for m in consumer.receive(16, Duration::from_secs(30))? {
//!     println!("{}", m.message().msg_id());
//!     consumer.ack(&m)?;
//! }
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! # Ordering
//!
//! Messages of one queue are stored in order. To keep related messages in order, send them
//! to one queue ([`Producer::send_with_selector`] with [`SelectMessageQueueByHash`], which
//! picks the queue as Java's does for the same key) and consume with an
//! [orderly listener](PushConsumerBuilder::orderly_listener): one call per queue at a time,
//! with the queue locked at the broker while this consumer holds it.
//!
//! # Transactions
//!
//! A [`TransactionProducer`] (Java `TransactionMQProducer`) sends a half message, runs
//! your local transaction and commits or rolls the message back; a transaction left
//! unknown is settled when the broker asks your [`TransactionListener`] later:
//!
//! ```no_run
//! use rocketmq_blocking::{ClientOptions, LocalTransactionState, Message, MessageExt, Producer};
//!
//! let execute = |_: &Message, _: &dyn std::any::Any| LocalTransactionState::CommitMessage;
//! let check = |_: &MessageExt| LocalTransactionState::CommitMessage;
//! let producer = Producer::builder("tx_group")
//!     .client_options(ClientOptions::new().namesrv_addr("127.0.0.1:9876"))
//!     .transactional((execute, check))
//!     .start()?;
//! producer.send_in_transaction(&Message::new("TopicTest", "order 1"), &())?;
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! # TLS
//!
//! A cluster that requires TLS (Java servers with `tls.server.mode=enforcing`) needs a
//! [`TlsConfig`] in the client options ([`tls`](ClientOptions::tls)); it covers the name
//! servers and the brokers. The
//! handshake runs on the I/O thread like every other byte, bounded by the connect timeout:
//!
//! ```no_run
//! use rocketmq_blocking::{ClientOptions, Producer, TlsConfig};
//!
//! let tls = TlsConfig::new().ca_file("ca.pem").client_cert("client.pem", "client.key");
//! let options = ClientOptions::new().namesrv_addr("10.0.0.1:9876").tls(tls);
//! let producer = Producer::builder("g").client_options(options).start()?;
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! # Errors
//!
//! Every fallible call returns [`Error`]: [`kind`](Error::kind) says what failed,
//! [`response_code`](Error::response_code) and [`remark`](Error::remark) carry the broker's
//! answer, [`is_timeout`](Error::is_timeout) and [`timeout_phase`](Error::timeout_phase)
//! say which part of a call ran out of time, and [`is_retriable`](Error::is_retriable)
//! says whether trying again (usually on another broker) may help. Bad input (names, sizes,
//! addresses) is an [`ErrorKind::InvalidArgument`] before anything is sent; a client with no
//! name server to ask fails `start` with an [`ErrorKind::Config`] error that says how to set
//! one. `Display` shows the message; the cause (an I/O error, say) is `source()`, and
//! `{:#}` prints both on one line.
//!
//! # Threads and shutdown
//!
//! Clients of one client id (`ip@instance`) share one client instance: one I/O thread owns
//! every connection, timer threads run route refresh, heartbeats and offset persistence, and
//! small pools run async callbacks and listeners. Every client method takes `&self`; share a
//! client by reference or in an `Arc`. `shutdown` (and `Drop`, which calls it) unregisters
//! from the brokers, persists consumer offsets, and stops the shared threads when the last
//! client of the instance is gone.
//!
//! # For Java users
//!
//! | Java | here |
//! |---|---|
//! | `DefaultMQProducer` | [`Producer`], built with [`Producer::builder`] |
//! | `DefaultMQPushConsumer` | [`PushConsumer`] |
//! | `DefaultLitePullConsumer` | [`LitePullConsumer`] |
//! | 5.x `SimpleConsumer` (gRPC client), `receive` / `ack` / `changeInvisibleDuration` | [`SimpleConsumer`] over remoting: [`receive`](SimpleConsumer::receive), [`ack`](SimpleConsumer::ack), [`change_invisible_duration`](SimpleConsumer::change_invisible_duration) |
//! | `DefaultMQAdminExt` (a part) | [`Admin`] |
//! | `ClientConfig` (`setNamesrvAddr`, `setInstanceName`, `setNamespace`, ...) | [`ClientOptions`], given to a builder's `client_options` |
//! | `new X(...)` then `start()` | `X::builder(...)`, settings, then `start()`, which returns the running client |
//! | `queryMessage` / `queryMessageByUniqKey`, `examineConsumeStats`, `resetOffsetByTimestamp` | [`Admin::query_messages`] with [`MessageQuery`], [`Admin::consume_stats`], [`Admin::reset_offset`] |
//! | `MessageListenerConcurrently` | [`PushConsumerBuilder::listener`] |
//! | `MessageListenerOrderly` | [`PushConsumerBuilder::orderly_listener`] |
//! | `ConsumeConcurrentlyStatus.CONSUME_SUCCESS` / `RECONSUME_LATER` | [`ConsumeStatus::Success`] / [`ConsumeStatus::ReconsumeLater`] |
//! | `ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT` | [`ConsumeOrderlyStatus::Suspend`] |
//! | `ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET` / `FIRST_OFFSET` / `TIMESTAMP` + `consumeTimestamp` | [`ConsumeFromWhere::LastOffset`] / [`FirstOffset`](ConsumeFromWhere::FirstOffset) / [`Timestamp`](ConsumeFromWhere::Timestamp) |
//! | `context.setDelayLevelWhenNextConsume(n)` (0, n, -1) | [`ConsumeConcurrentlyContext::set_reconsume_delay`] with [`ReconsumeDelay`] |
//! | `context.setAckIndex(i)` | [`ConsumeConcurrentlyContext::set_ack_index`] |
//! | `maxReconsumeTimes = -1` | [`PushConsumerOptions::max_reconsume_times`] `= None` |
//! | `sendMsgTimeout`, `retryTimesWhenSendFailed`, `compressMsgBodyOverHowmuch`, `sendLatencyFaultEnable` | [`ProducerOptions::send_timeout`], [`retries`](ProducerOptions::retries), [`compress_over`](ProducerOptions::compress_over), [`latency_fault_tolerance`](ProducerOptions::latency_fault_tolerance) |
//! | `SendStatus.SEND_OK` | [`SendStatus::Ok`] |
//! | `TransactionMQProducer`, `TransactionListener`, `sendMessageInTransaction(msg, arg)` | [`TransactionProducer`] (from [`ProducerBuilder::transactional`]), [`TransactionListener`], [`TransactionProducer::send_in_transaction`] |
//! | `LocalTransactionState.COMMIT_MESSAGE` / `ROLLBACK_MESSAGE` / `UNKNOW` | [`LocalTransactionState::CommitMessage`] / [`RollbackMessage`](LocalTransactionState::RollbackMessage) / [`Unknown`](LocalTransactionState::Unknown) |
//! | `MessageExt.getMsgId()` (`MessageClientExt`) | [`MessageExt::msg_id`] |
//! | `MQClientException`, `MQBrokerException`, `RemotingException` | [`Error`] with its [`ErrorKind`] |
//! | `new AclClientRPCHook(new SessionCredentials(ak, sk))` passed to a client's constructor | [`Credentials`] in the client options ([`ClientOptions::credentials`]) |
//! | `setUseTLS(true)`, `tls.client.trustCertPath`, `tls.client.certPath` / `keyPath` | [`ClientOptions::tls`] with a [`TlsConfig`]: [`ca_file`](TlsConfig::ca_file), [`client_cert`](TlsConfig::client_cert) |
//! | `tls.test.mode.enable=true` (trust any server) | [`TlsConfig::danger_accept_any_server_certificate`] |
//!
//! Rustdoc's search finds the Java names too: items carry them as aliases.
//!
//! # Features
//!
//! - `testkit`: `testkit::Cluster`, a launcher for a real local Apache
//!   RocketMQ name server and broker from the Maven Central jars (JDK 17 and Maven needed),
//!   for your own tests as a dev-dependency.
//! - `cli`: the `rmq` command-line tool (`cargo run --features cli --bin rmq -- --help`).
//! - `unstable-internals`: the internal layers (codec, remoting, client instance) for the
//!   tool, the benches and the fuzz targets. Not covered by semver.
#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) labels feature-gated items with their feature; not
// with `unstable-internals`, which only chooses between a public and a private module path.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(feature, values("unstable-internals")))))]
// `unsafe` belongs in the FFI layer only: the `ffi/` crate, never this one.
#![deny(unsafe_code)]
// A lock guard in a `match`/`if let` scrutinee lives to the end of the block, across what
// the arms do (network calls, user code): keep such temporaries out of scrutinees.
#![warn(clippy::significant_drop_in_scrutinee)]
// Every public type has `Debug`; the internals (behind a feature) are not held to it.
#![cfg_attr(
    not(feature = "unstable-internals"),
    warn(missing_debug_implementations)
)]

// The internal layers are crate-private unless the `unstable-internals` feature is on (for
// the `rmq` tool, the benches, the fuzz targets and the codec tests; not covered by semver).
// Dead-code detection is on in the default build: what only those users call is itself
// behind `#[cfg(feature = "unstable-internals")]` (or `any(test, ..)`), item by item, and
// the few tables kept whole on purpose (Java's codes, flags and property names) say so
// with a `reason`.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod client;
#[cfg(not(feature = "unstable-internals"))]
mod client;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod message;
#[cfg(not(feature = "unstable-internals"))]
mod message;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod protocol;
#[cfg(not(feature = "unstable-internals"))]
mod protocol;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod remoting;
#[cfg(not(feature = "unstable-internals"))]
mod remoting;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod scheduler;
#[cfg(not(feature = "unstable-internals"))]
mod scheduler;

// Thin wrappers over crate-private decoders of what a peer sends, for the fuzz targets.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod fuzzing;

mod admin;
mod consumer;
mod error;
mod producer;
mod stats;
#[cfg(feature = "testkit")]
pub mod testkit;
mod trace;
mod util;

pub use admin::{
    Admin, AdminBuilder, Connection, ConsumerConnection, MessageQuery, QueryResult, ResetTarget,
    TopicOffset, TopicStats,
};
pub use client::{ClientOptions, TopicConfig};
pub use consumer::{
    AllocateAveragely, AllocateAveragelyByCircle, AllocateByConfig, AllocateByMachineRoom,
    AllocateConsistentHash, AllocateMachineRoomNearby, AllocateStrategy,
    ConsumeConcurrentlyContext, ConsumeContext, ConsumeFromWhere, ConsumeHook, ConsumeHookStatus,
    ConsumeOrderlyContext, ConsumeOrderlyStatus, ConsumeStatus, LitePullConsumer,
    LitePullConsumerBuilder, LitePullOptions, MessageModel, MessageQueueListener, MessageSelector,
    PushConsumer, PushConsumerBuilder, PushConsumerOptions, ReceivedMessage, ReconsumeDelay,
    SimpleConsumer, SimpleConsumerBuilder, TopicQueueChangeListener,
};
pub use error::{Error, ErrorKind, Result, TimeoutPhase};
pub use message::{CompressionType, Message, MessageExt, MessageQueue};
pub use producer::{
    create_reply_message, reply_topic, JavaHashCode, MessageQueueSelector, Producer,
    ProducerBuilder, ProducerOptions, SelectMessageQueueByHash, SendAsyncError, SendContext,
    SendFuture, SendHook, SendMode, SendResult, SendStatus,
};
pub use producer::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionProducerBuilder,
    TransactionSendResult,
};
pub use protocol::admin::{ConsumeStats, QueueProgress, SubscriptionGroupConfig};
pub use protocol::pop::MessageRequestMode;
pub use protocol::{
    BrokerData, ClusterInfo, Perm, QueueData, ResponseCode, SerializeType, TopicRouteData,
};
pub use remoting::Credentials;
pub use remoting::TlsConfig;
pub use remoting::{RequestContext, RequestHook, ResponseContext};
pub use stats::{
    ClientStats, ConsumerStats, LatencyHistogram, ProducerStats, QueueStats, TopicConsumeStats,
    TopicSendStats,
};
pub use trace::{TraceStats, RMQ_SYS_TRACE_TOPIC};

// The Rust snippets of the README and of the security guide compile (and the ones not
// marked `no_run` run) with `cargo test`, as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/security.md")]
struct SecurityGuideDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/observability.md")]
struct ObservabilityGuideDoctests;
