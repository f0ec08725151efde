//! A synchronous, thread-based client for Apache RocketMQ.
pub mod client;
pub mod error;
pub mod message;
pub mod protocol;
pub mod remoting;
pub mod scheduler;
#[cfg(feature = "testkit")]
pub mod testkit;
mod util;

pub use error::{Error, ErrorKind, Result, TimeoutPhase};
