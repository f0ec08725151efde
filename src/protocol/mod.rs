//! The remoting protocol: frames, `RemotingCommand`, header encodings, codes, typed
//! headers and the JSON bodies the core client reads.
//!
//! Invariant: nothing here does I/O, and nothing here panics on bytes from the network.

pub mod admin;
#[cfg(any(test, feature = "unstable-internals"))]
mod borrowed;
mod codes;
mod command;
pub mod consumer_admin;
mod ext;
pub mod header;
pub mod heartbeat;
pub mod json;
mod json_header;
pub mod pop;
mod queue;
mod route;
pub mod transaction;

use std::fmt;

#[cfg(any(test, feature = "unstable-internals"))]
pub use borrowed::{ExtFieldsRef, RemotingCommandRef, INLINE_FIELDS};
#[cfg(feature = "unstable-internals")]
pub use codes::LanguageCode;
pub use codes::{Perm, RequestCode, ResponseCode, SerializeType};
#[doc(hidden)]
pub use command::write_binary_text;
pub use command::{frame_len, next_opaque, RemotingCommand, CURRENT_VERSION, DEFAULT_MAX_FRAME};
pub(crate) use command::{Reader, RequestHead, ONEWAY_FLAG};
pub(crate) use ext::int_bytes;
pub use ext::ExtFields;
#[cfg(feature = "unstable-internals")]
pub use ext::ExtText;
pub use header::{CommandHeader, ExtValue, ToExt, WriteHeader};
#[cfg(any(test, feature = "unstable-internals"))]
pub use header::{ExtValueRef, ReadHeaderRef};
pub use queue::MessageQueue;
pub(crate) use queue::{QueueRef, QueueWire};
#[cfg(any(test, feature = "unstable-internals"))]
pub use route::route_to_json;
pub use route::{
    decode_cluster_info, decode_route, BrokerData, ClusterInfo, QueueData, TopicRouteData,
    MAX_QUEUES_PER_BROKER,
};
#[cfg(feature = "unstable-internals")]
pub use route::{MAX_ROUTE_BROKERS, MAX_ROUTE_QUEUES};

/// Bytes that could not be decoded. Converted into [`crate::Error`] of kind `Decode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    message: String,
}

impl DecodeError {
    /// A decode error with a message saying what was wrong.
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            message: message.into(),
        }
    }

    /// The message, for the crate's `Error` (the conversion lives in `error.rs`: `protocol`
    /// sits below `error` and does not import it).
    pub(crate) fn into_message(self) -> String {
        self.message
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}
