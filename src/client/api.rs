//! Typed requests to name servers and brokers (Java `MQClientAPIImpl`).
//!
//! Each method builds one request, invokes it through the remoting client and turns the
//! response into a typed value or an [`Error`] carrying the response code and remark.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::message::MessageQueue;
use crate::protocol::admin::{
    decode_consume_stats, decode_subscription_groups, decode_topic_list, ConsumeStats,
    SubscriptionGroupConfig,
};
use crate::protocol::consumer_admin::decode_reset_offsets;
use crate::protocol::header::{
    ConsumerSendMsgBackRequestHeader, CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerListByGroupRequestHeader, GetRouteInfoRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryMessageRequestHeader, QueryMessageResponseHeader,
    QueueOffsetRequestHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use crate::protocol::{
    json, ClusterInfo, DecodeError, Perm, RemotingCommand, RequestCode, ResponseCode,
    TopicRouteData,
};
use crate::protocol::{QueueRef, QueueWire};
use crate::remoting::RemotingClient;

/// Settings of a topic to create (Java `TopicConfig`). [`TopicConfig::new`] gives a
/// read/write topic; change the fields you need.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicConfig {
    /// Topic name.
    pub topic_name: String,
    /// Readable queues (Java default 16). At most `i32::MAX` (Java's `int`): creating a
    /// topic with more is an `InvalidArgument` error.
    pub read_queue_nums: u32,
    /// Writable queues (Java default 16), at most `i32::MAX` too.
    pub write_queue_nums: u32,
    /// What the topic allows (default [`Perm::READ_WRITE`]).
    pub perm: Perm,
    /// Topic system flag.
    pub topic_sys_flag: i32,
    /// Ordered topic.
    pub order: bool,
}

impl TopicConfig {
    /// A read/write topic with `queues` read and write queues.
    pub fn new(topic: impl Into<String>, queues: u32) -> Self {
        TopicConfig {
            topic_name: topic.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: Perm::READ_WRITE,
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
        let response = self
            .remoting
            .invoke_namesrv_sync(route_request(topic), timeout)?;
        route_of(topic, &response)
    }

    /// GET_ROUTEINFO_BY_TOPIC of every topic, all sent at once to one name server; the
    /// answers in the order of `topics`. `Err` when no name server can be chosen.
    pub(crate) fn get_topic_route_infos(
        &self,
        topics: &[String],
        timeout: Duration,
    ) -> Result<Vec<Result<TopicRouteData>>> {
        let requests = topics.iter().map(|t| route_request(t)).collect();
        let answers = self.remoting.invoke_namesrv_all(requests, timeout)?;
        Ok(topics
            .iter()
            .zip(answers)
            .map(|(topic, answer)| {
                answer
                    .map_err(|e| e.context(format!("route of topic {topic}")))
                    .and_then(|response| route_of(topic, &response))
            })
            .collect())
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn get_broker_cluster_info(&self, timeout: Duration) -> Result<ClusterInfo> {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
        let response = self.remoting.invoke_namesrv_sync(request, timeout)?;
        expect_success(&response)?;
        crate::protocol::decode_cluster_info(&response.body)
            .map_err(|e| Error::from(e).context("cluster info"))
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker.
    pub fn create_topic(
        &self,
        broker_addr: &str,
        default_topic: &str,
        config: &TopicConfig,
        timeout: Duration,
    ) -> Result<()> {
        // Java's `int` on the wire: a count past it is the caller's error, not a clamp.
        let count = |n: u32, what: &str| {
            i32::try_from(n).map_err(|_| {
                Error::invalid_argument(format!(
                    "{what} of {} is {n}, more than {}",
                    config.topic_name,
                    i32::MAX
                ))
            })
        };
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: default_topic.to_string(),
            read_queue_nums: count(config.read_queue_nums, "read queues")?,
            write_queue_nums: count(config.write_queue_nums, "write queues")?,
            perm: config.perm.bits(),
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
    mq_set: Vec<QueueRef<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LockBatchResponse {
    // Java's getter `getLockOKMQSet` gives this spelling, not camelCase's `lockOkMqSet`.
    #[serde(default, rename = "lockOKMQSet")]
    lock_ok_mq_set: Vec<QueueWire>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerIdList {
    #[serde(default)]
    consumer_id_list: Vec<String>,
}

/// LOCK_BATCH_MQ's answer: the queues the broker locked.
pub(crate) fn decode_lock_batch_response(
    body: &[u8],
) -> std::result::Result<Vec<MessageQueue>, DecodeError> {
    let r: LockBatchResponse = json::from_slice(body)?;
    Ok(r.lock_ok_mq_set
        .into_iter()
        .map(MessageQueue::from)
        .collect())
}

/// GET_CONSUMER_LIST_BY_GROUP's answer: the group's client ids.
pub(crate) fn decode_consumer_id_list(
    body: &[u8],
) -> std::result::Result<Vec<String>, DecodeError> {
    let r: ConsumerIdList = json::from_slice(body)?;
    Ok(r.consumer_id_list)
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
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            broker_name: Some(mq.broker_name.to_string()),
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
        let request = update_offset_request(group, mq, offset);
        if oneway {
            return self.remoting.invoke_oneway(addr, request, timeout);
        }
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))
    }

    /// UPDATE_CONSUMER_OFFSET of one queue, acknowledged: `done` gets the broker's answer
    /// on the callback pool. `Err` when the request could not be queued (`done` never
    /// runs then).
    pub(crate) fn update_consumer_offset_async(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
        timeout: Duration,
        done: impl FnOnce(Result<()>) + Send + 'static,
    ) -> Result<()> {
        let request = update_offset_request(group, mq, offset);
        let peer = addr.to_string();
        self.remoting
            .invoke_async(addr, request, timeout, move |r| {
                done(
                    r.and_then(|response| {
                        expect_success(&response).map_err(|e| e.with_addr(&peer))
                    }),
                )
            })
            .map_err(|e| e.into_parts().0)
    }

    /// UPDATE_CONSUMER_OFFSET of many queues, each to its broker's address, all sent at
    /// once and answered by `deadline` (a broker that stops reading costs the deadline
    /// once, not a timeout per queue). The results are in the order of `commits`.
    pub(crate) fn update_consumer_offsets_until(
        &self,
        group: &str,
        commits: &[(String, MessageQueue, i64)],
        deadline: std::time::Instant,
    ) -> Vec<Result<()>> {
        let requests = commits
            .iter()
            .map(|(addr, mq, offset)| (addr.clone(), update_offset_request(group, mq, *offset)))
            .collect();
        self.remoting
            .invoke_all(requests, deadline)
            .into_iter()
            .zip(commits)
            .map(|(r, (addr, _, _))| {
                r.and_then(|response| expect_success(&response).map_err(|e| e.with_addr(addr)))
            })
            .collect()
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
        Ok(decode_consumer_id_list(&response.body)?)
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
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            broker_name: Some(mq.broker_name.to_string()),
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
            topic: mq.topic.to_string(),
            queue_id: mq.queue_id,
            timestamp,
            broker_name: Some(mq.broker_name.to_string()),
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
            mq_set: mqs.iter().map(QueueRef).collect(),
        })
        .map_err(|e| Error::invalid_argument(format!("encoding the lock request: {e}")))?;
        let request = RemotingCommand::request(RequestCode::LOCK_BATCH_MQ).with_body(body);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr))?;
        Ok(decode_lock_batch_response(&response.body)?)
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
            mq_set: mqs.iter().map(QueueRef).collect(),
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

/// The ext field that makes QUERY_MESSAGE a unique-key query (Java
/// `MixAll.UNIQUE_MSG_QUERY_FLAG`).
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// Admin requests to brokers and name servers (Java `MQClientAPIImpl` for `MQAdminImpl`
/// and `DefaultMQAdminExtImpl`).
impl MQClientAPI {
    /// QUERY_MESSAGE to one broker: its index header and the concatenated stored
    /// messages, or `None` when the broker found nothing (QUERY_NOT_FOUND).
    pub fn query_message(
        &self,
        addr: &str,
        header: &QueryMessageRequestHeader,
        unique_key: bool,
        timeout: Duration,
    ) -> Result<Option<(QueryMessageResponseHeader, Vec<u8>)>> {
        let mut request = RemotingCommand::request_with_header(RequestCode::QUERY_MESSAGE, header);
        request.ext_fields.insert(
            UNIQUE_MSG_QUERY_FLAG,
            if unique_key { "true" } else { "false" },
        );
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        if response.code == ResponseCode::QUERY_NOT_FOUND.0 {
            return Ok(None);
        }
        expect_success(&response).map_err(|e| {
            e.with_addr(addr)
                .context(format!("query {} in {}", header.key, header.topic))
        })?;
        let index = response.decode_header::<QueryMessageResponseHeader>()?;
        Ok(Some((index, response.body)))
    }

    /// GET_CONSUME_STATS on one broker: the group's progress in `topic`, or in every topic
    /// the broker has offsets of the group for.
    pub fn get_consume_stats(
        &self,
        addr: &str,
        group: &str,
        topic: Option<&str>,
        timeout: Duration,
    ) -> Result<ConsumeStats> {
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_string(),
            topic: topic.map(str::to_string),
        };
        let request = RemotingCommand::request_with_header(RequestCode::GET_CONSUME_STATS, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        let what = || format!("consume stats of {group}");
        expect_success(&response).map_err(|e| e.with_addr(addr).context(what()))?;
        decode_consume_stats(&response.body)
            .map_err(|e| Error::from(e).with_addr(addr).context(what()))
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server routes, sorted.
    pub fn get_topic_list(&self, timeout: Duration) -> Result<Vec<String>> {
        let request = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER);
        let response = self.remoting.invoke_namesrv_sync(request, timeout)?;
        expect_success(&response).map_err(|e| e.context("topic list"))?;
        decode_topic_list(&response.body).map_err(|e| Error::from(e).context("topic list"))
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG on one broker: its groups by name.
    pub fn get_all_subscription_groups(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<BTreeMap<String, SubscriptionGroupConfig>> {
        let request = RemotingCommand::request(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(addr).context("subscription groups"))?;
        decode_subscription_groups(&response.body).map_err(|e| {
            Error::from(e)
                .with_addr(addr)
                .context("subscription groups")
        })
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker.
    pub fn create_subscription_group(
        &self,
        addr: &str,
        config: &SubscriptionGroupConfig,
        timeout: Duration,
    ) -> Result<()> {
        let request = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(config.encode()?);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response).map_err(|e| {
            e.with_addr(addr)
                .context(format!("create subscription group {}", config.group_name))
        })
    }

    /// DELETE_TOPIC_IN_BROKER on one broker.
    pub fn delete_topic_in_broker(&self, addr: &str, topic: &str, timeout: Duration) -> Result<()> {
        let header = DeleteTopicRequestHeader {
            topic: topic.to_string(),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::DELETE_TOPIC_IN_BROKER, &header);
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        expect_success(&response)
            .map_err(|e| e.with_addr(addr).context(format!("delete topic {topic}")))
    }

    /// DELETE_TOPIC_IN_NAMESRV on one name server.
    pub fn delete_topic_in_namesrv(
        &self,
        namesrv_addr: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<()> {
        let header = DeleteTopicFromNamesrvRequestHeader {
            topic: topic.to_string(),
            cluster_name: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::DELETE_TOPIC_IN_NAMESRV, &header);
        let response = self.remoting.invoke_sync(namesrv_addr, request, timeout)?;
        expect_success(&response).map_err(|e| {
            e.with_addr(namesrv_addr)
                .context(format!("delete the route of {topic}"))
        })
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET on one broker: it moves the group's offsets in
    /// `topic` (`timestamp` -1: to the end) and tells the group's online consumers
    /// (RESET_CONSUMER_CLIENT_OFFSET). Returns the new offsets; a group with no consumer
    /// online is a CONSUMER_NOT_ONLINE response error.
    pub fn invoke_broker_to_reset_offset(
        &self,
        addr: &str,
        header: &ResetOffsetRequestHeader,
        timeout: Duration,
    ) -> Result<HashMap<MessageQueue, i64>> {
        let request = RemotingCommand::request_with_header(
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
            header,
        );
        let response = self.remoting.invoke_sync(addr, request, timeout)?;
        let what = || format!("reset offsets of {} in {}", header.group, header.topic);
        expect_success(&response).map_err(|e| e.with_addr(addr).context(what()))?;
        decode_reset_offsets(&response.body)
            .map_err(|e| Error::from(e).with_addr(addr).context(what()))
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

fn update_offset_request(group: &str, mq: &MessageQueue, offset: i64) -> RemotingCommand {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.to_string(),
        topic: mq.topic.to_string(),
        queue_id: mq.queue_id,
        commit_offset: offset,
        broker_name: Some(mq.broker_name.to_string()),
    };
    RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &header)
}

fn route_request(topic: &str) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.to_string(),
        accept_standard_json_only: Some(true),
    };
    RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header)
}

fn route_of(topic: &str, response: &RemotingCommand) -> Result<TopicRouteData> {
    expect_success(response).map_err(|e| e.context(format!("route of topic {topic}")))?;
    crate::protocol::decode_route(&response.body)
        .map_err(|e| Error::from(e).context(format!("route of topic {topic}")))
}
