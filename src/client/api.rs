//! Typed requests to name servers and brokers (Java `MQClientAPIImpl`).
//!
//! Each method builds one request, invokes it through the remoting client and turns the
//! response into a typed value or an [`Error`] carrying the response code and remark.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::message::MessageQueue;
use crate::protocol::header::{
    ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader,
    GetConsumerListByGroupRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueueOffsetRequestHeader, SearchOffsetRequestHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
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
    /// A read/write topic with `queues` read and write queues (at most `i32::MAX`).
    pub fn new(topic: impl Into<String>, queues: u32) -> Self {
        let queues = i32::try_from(queues).unwrap_or(i32::MAX);
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

/// LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LockBatchBody<'a> {
    consumer_group: &'a str,
    client_id: &'a str,
    mq_set: &'a [MessageQueue],
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LockBatchResponse {
    // Java's getter `getLockOKMQSet` gives this spelling, not camelCase's `lockOkMqSet`.
    #[serde(default, rename = "lockOKMQSet")]
    lock_ok_mq_set: Vec<MessageQueue>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerIdList {
    #[serde(default)]
    consumer_id_list: Vec<String>,
}

impl MQClientAPI {
    /// QUERY_CONSUMER_OFFSET. `Ok(None)` when the broker has no offset for the group
    /// (QUERY_NOT_FOUND).
    pub fn query_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<Option<i64>> {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            broker_name: Some(mq.broker_name.clone()),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::QUERY_CONSUMER_OFFSET, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        if response.code == ResponseCode::QUERY_NOT_FOUND.0 {
            return Ok(None);
        }
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        Ok(Some(
            response.decode_header::<OffsetResponseHeader>()?.offset,
        ))
    }

    /// UPDATE_CONSUMER_OFFSET, oneway (the periodic persist) or sync.
    pub fn update_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
        oneway: bool,
        timeout: Duration,
    ) -> Result<()> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            broker_name: Some(mq.broker_name.clone()),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &header);
        if oneway {
            return self.remoting.invoke_oneway(addr, request, timeout);
        }
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))
    }

    /// GET_CONSUMER_LIST_BY_GROUP: client ids of the group's consumers known to a broker.
    pub fn get_consumer_id_list(
        &self,
        addr: &str,
        group: &str,
        timeout: Duration,
    ) -> Result<Vec<String>> {
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_string(),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_CONSUMER_LIST_BY_GROUP, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        let body: ConsumerIdList = crate::protocol::json::from_slice(&response.body)?;
        Ok(body.consumer_id_list)
    }

    /// GET_MAX_OFFSET (`max = false`: GET_MIN_OFFSET) of one queue.
    pub fn get_queue_offset(
        &self,
        addr: &str,
        mq: &MessageQueue,
        max: bool,
        timeout: Duration,
    ) -> Result<i64> {
        let header = QueueOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            broker_name: Some(mq.broker_name.clone()),
        };
        let code = if max {
            RequestCode::GET_MAX_OFFSET
        } else {
            RequestCode::GET_MIN_OFFSET
        };
        let request = RemotingCommand::request_with_header(code, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        Ok(response.decode_header::<OffsetResponseHeader>()?.offset)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP.
    pub fn search_offset(
        &self,
        addr: &str,
        mq: &MessageQueue,
        timestamp: i64,
        timeout: Duration,
    ) -> Result<i64> {
        let header = SearchOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            timestamp,
            broker_name: Some(mq.broker_name.clone()),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        Ok(response.decode_header::<OffsetResponseHeader>()?.offset)
    }

    /// CONSUMER_SEND_MSG_BACK: hands a failed message back for a delayed retry (or the DLQ).
    pub fn consumer_send_message_back(
        &self,
        addr: &str,
        header: &ConsumerSendMsgBackRequestHeader,
        timeout: Duration,
    ) -> Result<()> {
        let request =
            RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr).context("send message back"))
    }

    /// LOCK_BATCH_MQ: returns the queues the broker locked for us.
    pub fn lock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        mqs: &[MessageQueue],
        timeout: Duration,
    ) -> Result<Vec<MessageQueue>> {
        let body = serde_json::to_vec(&LockBatchBody {
            consumer_group: group,
            client_id,
            mq_set: mqs,
        })
        .map_err(|e| Error::invalid_argument(format!("encoding the lock request: {e}")))?;
        let request = RemotingCommand::request(RequestCode::LOCK_BATCH_MQ).with_body(body);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        let r: LockBatchResponse = crate::protocol::json::from_slice(&response.body)?;
        Ok(r.lock_ok_mq_set)
    }

    /// UNLOCK_BATCH_MQ, oneway or sync.
    pub fn unlock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        mqs: &[MessageQueue],
        oneway: bool,
        timeout: Duration,
    ) -> Result<()> {
        let body = serde_json::to_vec(&LockBatchBody {
            consumer_group: group,
            client_id,
            mq_set: mqs,
        })
        .map_err(|e| Error::invalid_argument(format!("encoding the unlock request: {e}")))?;
        let request = RemotingCommand::request(RequestCode::UNLOCK_BATCH_MQ).with_body(body);
        if oneway {
            return self.remoting.invoke_oneway(addr, request, timeout);
        }
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))
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
