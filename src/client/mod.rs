//! The client core shared by producers and consumers: configuration, name checks,
//! typed API calls, routes, and the client instance with its manager.

mod api;
mod config;
pub(crate) mod http;
mod instance;
pub mod manager;
pub mod namespace;
mod pop_api;
mod reply;
mod route;
pub mod validators;

pub(crate) use api::expect_success;
#[cfg(feature = "unstable-internals")]
pub(crate) use api::{decode_consumer_id_list, decode_lock_batch_response};
pub use api::{MQClientAPI, TopicConfig};
#[cfg(feature = "unstable-internals")]
pub(crate) use config::parse_namesrv_list;
pub use config::{ClientConfig, ClientOptions};
pub(crate) use config::{DEFAULT_ADJUST_THREAD_POOL_INTERVAL, DEFAULT_PERSIST_OFFSET_INTERVAL};
pub(crate) use instance::{ConsumerInner, ProducerInner, PullTask, MASTER_ID};
pub use instance::{MQClientInstance, ServiceState};
#[cfg(feature = "unstable-internals")]
pub use pop_api::NotifyResult;
#[cfg(feature = "unstable-internals")]
pub use pop_api::PopResult;
#[cfg(not(feature = "unstable-internals"))]
pub(crate) use pop_api::PopResult;
pub use pop_api::PopStatus;
#[cfg(feature = "unstable-internals")]
pub(crate) use reply::decode_reply;
pub(crate) use reply::{process_reply, ReplyCallback, ReplyTable, Waiter};
#[cfg(feature = "unstable-internals")]
pub use route::to_subscribe_info;
#[cfg(not(feature = "unstable-internals"))]
pub(crate) use route::to_subscribe_info;
pub use route::{next_send_index, to_publish_info, TopicPublishInfo};
