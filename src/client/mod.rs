//! The client core shared by producers and consumers: typed API calls, configuration,
//! the client instance and its manager.

mod api;

pub(crate) use api::expect_success;
pub use api::{MQClientAPI, TopicConfig};
