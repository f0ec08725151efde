//! Typed requests to name servers and brokers (Java `MQClientAPIImpl`).
//!
//! Each method builds one request, invokes it through the remoting client and turns the
//! response into a typed value or an [`Error`] carrying the response code and remark.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::protocol::header::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, UnregisterClientRequestHeader,
};
use crate::protocol::{
    json, perm, ClusterInfo, RemotingCommand, RequestCode, ResponseCode, TopicRouteData,
};
use crate::remoting::RemotingClient;

/// Settings of a topic to create (Java `TopicConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// Topic name.
    pub topic_name: String,
    /// Readable queues (Java default 16).
    pub read_queue_nums: i32,
    /// Writable queues (Java default 16).
    pub write_queue_nums: i32,
    /// Permission bits (default read + write).
    pub perm: i32,
    /// Topic system flag.
    pub topic_sys_flag: i32,
    /// Ordered topic.
    pub order: bool,
}

impl TopicConfig {
    /// A read/write topic with `queues` read and write queues.
    pub fn new(topic: impl Into<String>, queues: i32) -> Self {
        TopicConfig {
            topic_name: topic.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: perm::READ | perm::WRITE,
            topic_sys_flag: 0,
            order: false,
        }
    }
}

/// Typed calls over a [`RemotingClient`].
#[derive(Clone)]
pub struct MQClientAPI {
    remoting: Arc<RemotingClient>,
}

impl MQClientAPI {
    /// Wraps a remoting client.
    pub fn new(remoting: Arc<RemotingClient>) -> Self {
        MQClientAPI { remoting }
    }

    /// The remoting client underneath.
    pub fn remoting(&self) -> &Arc<RemotingClient> {
        &self.remoting
    }

    /// GET_ROUTEINFO_BY_TOPIC. An unknown topic is an error with code `TOPIC_NOT_EXIST`.
    pub fn get_topic_route_info(&self, topic: &str, timeout: Duration) -> Result<TopicRouteData> {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_string(),
            accept_standard_json_only: Some(true),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
        let response = self.remoting.invoke_namesrv_sync(request, timeout)?;
        expect_success(&response).map_err(|e| e.context(format!("route of topic {topic}")))?;
        json::from_slice(&response.body)
            .map_err(|e| Error::from(e).context(format!("route of topic {topic}")))
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn get_broker_cluster_info(&self, timeout: Duration) -> Result<ClusterInfo> {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
        let response = self.remoting.invoke_namesrv_sync(request, timeout)?;
        expect_success(&response)?;
        json::from_slice(&response.body).map_err(|e| Error::from(e).context("cluster info"))
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker.
    pub fn create_topic(
        &self,
        broker_addr: &str,
        default_topic: &str,
        config: &TopicConfig,
        timeout: Duration,
    ) -> Result<()> {
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: default_topic.to_string(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: "SINGLE_TAG".to_string(),
            topic_sys_flag: Some(config.topic_sys_flag),
            order: config.order,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
        let response = self.remoting.invoke_sync(broker_addr, request, timeout)?;
        expect_success(&response).map_err(|e| {
            e.with_addr(broker_addr)
                .context(format!("create topic {}", config.topic_name))
        })
    }
}

impl MQClientAPI {
    /// HEART_BEAT with a JSON `HeartbeatData` body; returns the broker's version.
    pub fn send_heartbeat(&self, addr: &str, body: Vec<u8>, timeout: Duration) -> Result<i32> {
        let request = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr).context("heartbeat"))?;
        Ok(response.version)
    }

    /// UNREGISTER_CLIENT for a producer or consumer group.
    pub fn unregister_client(
        &self,
        addr: &str,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        timeout: Duration,
    ) -> Result<()> {
        let header = UnregisterClientRequestHeader {
            client_id: client_id.to_string(),
            producer_group: producer_group.map(str::to_string),
            consumer_group: consumer_group.map(str::to_string),
        };
        let request = RemotingCommand::request_with_header(RequestCode::UNREGISTER_CLIENT, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr).context("unregister client"))
    }
}

/// `Ok` for SUCCESS, else an error with the response's code and remark.
pub(crate) fn expect_success(response: &RemotingCommand) -> Result<()> {
    if response.code == ResponseCode::SUCCESS.0 {
        Ok(())
    } else {
        Err(Error::response(
            response.response_code(),
            response.remark.as_deref(),
        ))
    }
}
