//! What `mqadmin consumerConnection` and `topicStatus` show, and a queue's earliest store
//! time: GET_CONSUMER_CONNECTION_LIST, GET_TOPIC_STATS_INFO and GET_EARLIEST_MSG_STORETIME,
//! their answers' types and decoders.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use serde::Deserialize;

use super::{decode_connection_set, Admin, Connection};
use crate::client::expect_success;
use crate::client::validators::{check_group, check_topic, retry_topic};
use crate::error::{Error, ErrorKind, Result};
use crate::message::MessageQueue;
use crate::protocol::header::{EarliestMsgStoreTimeResponseHeader, QueueOffsetRequestHeader};
use crate::protocol::{json, DecodeError, RemotingCommand, RequestCode, ResponseCode};
use crate::util::time_from_millis;

/// The online consumers of a group as the brokers see them (Java `ConsumerConnection`,
/// what `mqadmin consumerConnection` prints).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerConnection {
    /// One per client connected under the group, sorted by client id.
    pub connections: Vec<Connection>,
    /// The group's subscriptions: topic → expression (`*`, `TagA || TagB`, SQL92).
    pub subscriptions: BTreeMap<String, String>,
    /// `CONSUME_PASSIVELY` (push), `CONSUME_ACTIVELY` (pull), `CONSUME_POP` (5.x).
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: String,
    /// Java's constant name, as `CONSUME_FROM_LAST_OFFSET`.
    pub consume_from_where: String,
}

/// The offsets of one queue of a topic (Java `TopicOffset`, a line of `mqadmin
/// topicStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicOffset {
    /// The first offset still stored.
    pub min_offset: i64,
    /// Where the next message will be stored.
    pub max_offset: i64,
    /// Store time of the queue's last message, if it has one.
    pub last_update: Option<SystemTime>,
}

/// The queues of a topic with their offsets (Java `TopicStatsTable`), merged from every
/// broker of the topic, sorted by broker name and queue id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicStats {
    /// Per queue.
    pub queues: BTreeMap<MessageQueue, TopicOffset>,
}

impl TopicStats {
    /// Messages stored in the topic now: the sum over its queues of `max - min`.
    pub fn stored(&self) -> u64 {
        self.queues
            .values()
            .map(|o| u64::try_from(o.max_offset.saturating_sub(o.min_offset)).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }
}

/// GET_CONSUMER_CONNECTION_LIST's answer.
pub(crate) fn decode_consumer_connection(
    body: &[u8],
) -> std::result::Result<ConsumerConnection, DecodeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Sub {
        #[serde(default)]
        sub_string: String,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        subscription_table: HashMap<String, Sub>,
        #[serde(default)]
        consume_type: Option<String>,
        #[serde(default)]
        message_model: Option<String>,
        #[serde(default)]
        consume_from_where: Option<String>,
    }
    let mut connections = decode_connection_set(body)?;
    connections.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    let b: Body = json::from_slice(body)?;
    Ok(ConsumerConnection {
        connections,
        subscriptions: b
            .subscription_table
            .into_iter()
            .map(|(t, s)| (t, s.sub_string))
            .collect(),
        consume_type: b.consume_type.unwrap_or_default(),
        message_model: b.message_model.unwrap_or_default(),
        consume_from_where: b.consume_from_where.unwrap_or_default(),
    })
}

/// GET_TOPIC_STATS_INFO's answer.
pub(crate) fn decode_topic_stats(body: &[u8]) -> std::result::Result<TopicStats, DecodeError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Offset {
        #[serde(default)]
        min_offset: i64,
        #[serde(default)]
        max_offset: i64,
        #[serde(default)]
        last_update_timestamp: i64,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        #[serde(default)]
        offset_table: HashMap<String, Offset>,
    }
    let b: Body = json::from_slice(body)?;
    let mut queues = BTreeMap::new();
    for (k, o) in b.offset_table {
        queues.insert(
            json::parse_queue_key(&k)?,
            TopicOffset {
                min_offset: o.min_offset,
                max_offset: o.max_offset,
                last_update: (o.last_update_timestamp > 0)
                    .then(|| time_from_millis(o.last_update_timestamp)),
            },
        );
    }
    Ok(TopicStats { queues })
}

/// Connections, topic stats, store times (Java `DefaultMQAdminExt`).
impl Admin {
    /// GET_CONSUMER_CONNECTION_LIST: the clients online in consumer `group`, their
    /// subscriptions and settings (Java `examineConsumerConnectionInfo`, `mqadmin
    /// consumerConnection`). Asked of every broker of the group's retry topic, the
    /// connections merged; a group online on no broker is a
    /// [`ResponseCode::CONSUMER_NOT_ONLINE`] error, as in Java.
    #[doc(alias = "examineConsumerConnectionInfo")]
    pub fn consumer_connections(&self, group: &str) -> Result<ConsumerConnection> {
        check_group(group)?;
        let mut all: Option<ConsumerConnection> = None;
        let mut last_err = None;
        for (_, addr) in self.brokers_of(&retry_topic(group))? {
            match self.consumer_connections_on(&addr, group) {
                Ok(c) => match &mut all {
                    None => all = Some(c),
                    Some(a) => {
                        for conn in c.connections {
                            if !a.connections.iter().any(|x| x.client_id == conn.client_id) {
                                a.connections.push(conn);
                            }
                        }
                        a.connections.sort_by(|x, y| x.client_id.cmp(&y.client_id));
                    }
                },
                Err(e) if e.kind() == ErrorKind::Response => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        match all {
            Some(c) if !c.connections.is_empty() => Ok(c),
            _ => Err(last_err.unwrap_or_else(|| {
                Error::response(
                    ResponseCode::CONSUMER_NOT_ONLINE,
                    Some(&format!("the consumer group {group} is not online")),
                )
            })),
        }
    }

    /// GET_CONSUMER_CONNECTION_LIST on one broker; a broker where the group is not online
    /// answers [`ResponseCode::CONSUMER_NOT_ONLINE`], an [`ErrorKind::Response`] error.
    pub fn consumer_connections_on(
        &self,
        broker_addr: &str,
        group: &str,
    ) -> Result<ConsumerConnection> {
        check_group(group)?;
        let mut request = RemotingCommand::request(RequestCode::GET_CONSUMER_CONNECTION_LIST);
        request.ext_fields.insert("consumerGroup", group);
        let response = self
            .api
            .remoting()
            .invoke_sync(broker_addr, request, self.timeout)?;
        let what = || format!("consumer connections of {group}");
        expect_success(&response).map_err(|e| e.with_addr(broker_addr).context(what()))?;
        decode_consumer_connection(&response.body)
            .map_err(|e| Error::from(e).with_addr(broker_addr).context(what()))
    }

    /// GET_TOPIC_STATS_INFO from every broker of `topic`: each queue's min and max
    /// offsets and last store time (Java `examineTopicStats`, `mqadmin topicStatus`).
    #[doc(alias = "examineTopicStats")]
    pub fn topic_stats(&self, topic: &str) -> Result<TopicStats> {
        check_topic(topic)?;
        let mut all = TopicStats::default();
        for (_, addr) in self.brokers_of(topic)? {
            all.queues.extend(self.topic_stats_on(&addr, topic)?.queues);
        }
        Ok(all)
    }

    /// GET_TOPIC_STATS_INFO on one broker.
    pub fn topic_stats_on(&self, broker_addr: &str, topic: &str) -> Result<TopicStats> {
        check_topic(topic)?;
        let mut request = RemotingCommand::request(RequestCode::GET_TOPIC_STATS_INFO);
        request.ext_fields.insert("topic", topic);
        let response = self
            .api
            .remoting()
            .invoke_sync(broker_addr, request, self.timeout)?;
        let what = || format!("stats of topic {topic}");
        expect_success(&response).map_err(|e| e.with_addr(broker_addr).context(what()))?;
        decode_topic_stats(&response.body)
            .map_err(|e| Error::from(e).with_addr(broker_addr).context(what()))
    }

    /// GET_EARLIEST_MSG_STORETIME of `mq`: the store time of its first message still
    /// stored, `None` for an empty queue (Java `earliestMsgStoreTime`, which answers -1
    /// there). Asked of the master of `mq`'s broker, as [`max_offset`](Self::max_offset).
    #[doc(alias = "earliestMsgStoreTime")]
    pub fn earliest_msg_store_time(&self, mq: &MessageQueue) -> Result<Option<SystemTime>> {
        let addr = self.master_of(mq)?;
        let header = QueueOffsetRequestHeader {
            topic: mq.topic().to_string(),
            queue_id: mq.queue_id(),
            broker_name: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::GET_EARLIEST_MSG_STORETIME, &header);
        let response = self
            .api
            .remoting()
            .invoke_sync(&addr, request, self.timeout)?;
        let what = || format!("earliest store time of {mq}");
        expect_success(&response).map_err(|e| e.with_addr(&addr).context(what()))?;
        let t = response
            .decode_header::<EarliestMsgStoreTimeResponseHeader>()
            .map_err(|e| Error::from(e).with_addr(&addr).context(what()))?
            .timestamp;
        Ok((t > 0).then(|| time_from_millis(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_connection_decodes_as_the_broker_writes_it() {
        let body = br#"{"connectionSet":[{"clientAddr":"127.0.0.1:5","clientId":"b@2","language":"JAVA","version":453},{"clientAddr":"127.0.0.1:4","clientId":"a@1","language":"RUST","version":453}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}}}"#;
        let c = decode_consumer_connection(body).unwrap();
        assert_eq!(c.connections.len(), 2);
        assert_eq!(c.connections[0].client_id, "a@1");
        assert_eq!(c.connections[0].language, "RUST");
        assert_eq!(c.subscriptions["T"], "*");
        assert_eq!(c.consume_type, "CONSUME_PASSIVELY");
        assert_eq!(c.message_model, "CLUSTERING");
        assert_eq!(c.consume_from_where, "CONSUME_FROM_LAST_OFFSET");
    }

    #[test]
    fn topic_stats_decode_fastjson_queue_keys() {
        let body = br#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":7,"minOffset":2},{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}"#;
        let s = decode_topic_stats(body).unwrap();
        let keys: Vec<i32> = s.queues.keys().map(|q| q.queue_id()).collect();
        assert_eq!(keys, [0, 1]);
        assert_eq!(s.stored(), 5);
        assert!(s.queues.values().next().unwrap().last_update.is_none());
        assert!(decode_topic_stats(b"{\"offsetTable\":{\"x\":1}}").is_err());
    }
}
