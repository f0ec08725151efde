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
//! println!("stored as {} at {} offset {}", r.msg_id, r.message_queue, r.queue_offset);
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

pub mod admin;
pub mod client;
pub mod consumer;
pub mod error;
pub mod message;
pub mod producer;
pub mod protocol;
pub mod remoting;
pub mod scheduler;
#[cfg(feature = "testkit")]
pub mod testkit;
mod util;

pub use consumer::{ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer};
pub use error::{Error, ErrorKind, Result, TimeoutPhase};
pub use message::{Message, MessageExt, MessageQueue};
pub use producer::{Producer, SendAsyncError, SendResult, SendStatus};
