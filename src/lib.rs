//! A synchronous, thread-based client for Apache RocketMQ that speaks the broker's native
//! "remoting" protocol, with no async runtime.
//!
//! The paved path is [`Producer`] (Java `DefaultMQProducer`):
//!
//! ```no_run
//! use rocketmq_blocking::{Message, Producer};
//!
//! let producer = Producer::builder("my_group").namesrv_addr("127.0.0.1:9876").start()?;
//! let r = producer.send(&Message::new("TopicTest", "hello").with_tags("TagA"))?;
//! println!("stored as {} at {} offset {}", r.msg_id(), r.message_queue(), r.queue_offset());
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! Underneath, as in the Java client: producers and consumers of one client id share an
//! [`client::MQClientInstance`] (routes, heartbeats, the periodic jobs), which talks through
//! [`client::MQClientAPI`] to a [`remoting::RemotingClient`] whose single I/O thread owns
//! every connection. See `ARCHITECTURE.md` for the map.
//!
//! Feature `testkit` (on by default through `cli`) adds [`testkit::Cluster`], a launcher for a
//! real local RocketMQ name server and broker used by the tests and examples.
#![warn(missing_docs)]
// Every public type has `Debug`; the internals (behind a feature) are not held to it.
#![cfg_attr(
    not(feature = "unstable-internals"),
    warn(missing_debug_implementations)
)]

// The internal layers are crate-private unless the `unstable-internals` feature is on (for
// the `rmq` tool, the benches, the fuzz targets and the codec tests; not covered by semver).
// Without the feature, what only those users call shows as unused: hence the `allow`s.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod client;
#[cfg(not(feature = "unstable-internals"))]
#[allow(dead_code, unused_imports)]
mod client;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod message;
#[cfg(not(feature = "unstable-internals"))]
#[allow(dead_code, unused_imports)]
mod message;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod protocol;
#[cfg(not(feature = "unstable-internals"))]
#[allow(dead_code, unused_imports)]
mod protocol;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod remoting;
#[cfg(not(feature = "unstable-internals"))]
#[allow(dead_code, unused_imports)]
mod remoting;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod scheduler;
#[cfg(not(feature = "unstable-internals"))]
#[allow(dead_code, unused_imports)]
mod scheduler;

mod admin;
mod consumer;
mod error;
mod producer;
#[cfg(feature = "testkit")]
pub mod testkit;
mod util;

pub use admin::{Admin, AdminBuilder, Connection};
pub use client::TopicConfig;
pub use consumer::{
    AllocateAveragely, AllocateAveragelyByCircle, AllocateByConfig, AllocateByMachineRoom,
    AllocateConsistentHash, AllocateMachineRoomNearby, AllocateStrategy,
    ConsumeConcurrentlyContext, ConsumeFromWhere, ConsumeOrderlyContext, ConsumeOrderlyStatus,
    ConsumeStatus, LitePullConsumer, LitePullConsumerBuilder, LitePullOptions, MessageModel,
    MessageSelector, PushConsumer, PushConsumerBuilder, PushConsumerOptions, ReconsumeDelay,
};
pub use error::{Error, ErrorKind, Result, TimeoutPhase};
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::{
    JavaHashCode, MessageQueueSelector, Producer, ProducerBuilder, ProducerOptions,
    SelectMessageQueueByHash, SendFuture, SendResult, SendStatus,
};
pub use protocol::{
    BrokerData, ClusterInfo, QueueData, ResponseCode, SerializeType, TopicRouteData,
};
