//! Administrative calls (a part of Java's `MQAdminExt`): cluster info, routes, topics
//! (create, list, delete), offsets (min, max, by time, reset), message lookups (by id, by
//! key, by unique key: `query.rs`), a group's progress and subscription groups.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

mod query;
mod stats;
pub use query::{MessageQuery, QueryResult};
pub use stats::{ConsumerConnection, TopicOffset, TopicStats};

use crate::client::expect_success;
use crate::client::validators::{
    check_group, check_topic, retry_topic, AUTO_CREATE_TOPIC_KEY_TOPIC,
};
use crate::client::{ClientOptions, MQClientAPI, TopicConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{
    decode_messages, decode_messages_lenient, decode_offset_msg_id, DecodeOptions, MessageExt,
    MessageQueue,
};
use crate::protocol::admin::{ConsumeStats, SubscriptionGroupConfig};
use crate::protocol::header::{
    OffsetResponseHeader, QueryMessageRequestHeader, QueueOffsetRequestHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader, ViewMessageRequestHeader,
};
use crate::protocol::pop::MessageRequestMode;
use crate::protocol::{ClusterInfo, RemotingCommand, RequestCode, ResponseCode, TopicRouteData};
use crate::remoting::RemotingClient;
use crate::util::{millis_since_epoch, time_from_millis};

/// Administrative calls (a small part of Java `DefaultMQAdminExt`): cluster info,
/// routes, topic creation, offsets, message lookup, connections. It has its own
/// connections, separate from any producer's or consumer's; dropping it closes them.
pub struct Admin {
    api: MQClientAPI,
    timeout: Duration,
}

impl fmt::Debug for Admin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admin")
            .field("namesrv", &self.api.remoting().name_server_address_list())
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Builder for [`Admin`]: `Admin::builder()`, the [`ClientOptions`], then
/// [`start`](Self::start).
#[derive(Debug, Clone)]
pub struct AdminBuilder {
    client: ClientOptions,
}

impl AdminBuilder {
    /// Name servers, credentials, TLS and the timeout of each admin call
    /// ([`api_timeout`](ClientOptions::api_timeout), 3 s); default [`ClientOptions::new`].
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// Checks the configuration and returns the admin (Java `new DefaultMQAdminExt`,
    /// then `start()`). It connects on first use: an unreachable name server is an error
    /// of the first call, and calls to a broker by address work without one.
    #[doc(alias = "DefaultMQAdminExt")]
    pub fn start(self) -> Result<Admin> {
        let config = self.client.into_config();
        let list = config.namesrv_addr_list();
        if list.is_empty() {
            // The same kind as the clients' (they also take an address server; this does not).
            return Err(Error::new(
                ErrorKind::Config,
                "no name server address: set `namesrv_addr` in the client options or the \
                 NAMESRV_ADDR environment variable",
            ));
        }
        let remoting = Arc::new(RemotingClient::new(config.remoting().clone())?);
        remoting.update_name_server_address_list(&list);
        Ok(Admin {
            api: MQClientAPI::new(remoting),
            timeout: config.mq_client_api_timeout(),
        })
    }
}

impl Admin {
    /// A builder, with the name servers of `NAMESRV_ADDR` if it is set.
    pub fn builder() -> AdminBuilder {
        AdminBuilder {
            client: ClientOptions::new(),
        }
    }

    /// The typed API underneath.
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn api(&self) -> &MQClientAPI {
        &self.api
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn cluster_info(&self) -> Result<ClusterInfo> {
        self.api.get_broker_cluster_info(self.timeout)
    }

    /// GET_ROUTEINFO_BY_TOPIC.
    pub fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        self.api.get_topic_route_info(topic, self.timeout)
    }

    /// Master addresses by broker name, from the cluster info.
    pub fn master_addrs(&self) -> Result<BTreeMap<String, String>> {
        Ok(self
            .cluster_info()?
            .broker_addr_table
            .into_iter()
            .filter_map(|(name, bd)| bd.master_addr().map(|a| (name, a.to_string())))
            .collect())
    }

    /// Creates (or updates) `config` on every master broker of the cluster, then waits
    /// until the name server routes it. Returns the broker names.
    pub fn create_topic(&self, config: &TopicConfig) -> Result<Vec<String>> {
        check_topic(&config.topic_name)?;
        let masters = self.masters()?;
        for addr in masters.values() {
            self.create_topic_on(addr, config)?;
        }
        self.wait_for_route(&config.topic_name, masters.len(), Duration::from_secs(10))?;
        Ok(masters.into_keys().collect())
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker.
    pub fn create_topic_on(&self, broker_addr: &str, config: &TopicConfig) -> Result<()> {
        check_topic(&config.topic_name)?;
        self.api.create_topic(
            broker_addr,
            AUTO_CREATE_TOPIC_KEY_TOPIC,
            config,
            self.timeout,
        )
    }

    /// Polls the name server until `topic` is routed to at least `brokers` brokers.
    pub fn wait_for_route(
        &self,
        topic: &str,
        brokers: usize,
        timeout: Duration,
    ) -> Result<TopicRouteData> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.topic_route(topic) {
                Ok(r) if r.queue_datas.len() >= brokers => return Ok(r),
                Ok(r) => Error::new(
                    ErrorKind::NoRoute,
                    format!(
                        "topic {topic} routed to {} of {brokers} brokers",
                        r.queue_datas.len()
                    ),
                ),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(last.context(format!("waiting for the route of {topic}")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// VIEW_MESSAGE_BY_ID: the stored message behind an offsetMsgId (store host + offset).
    pub fn view_message(&self, offset_msg_id: &str) -> Result<MessageExt> {
        let (host, offset) = decode_offset_msg_id(offset_msg_id)?;
        let addr = host.to_string();
        let header = ViewMessageRequestHeader { offset };
        let request =
            RemotingCommand::request_with_header(RequestCode::VIEW_MESSAGE_BY_ID, &header);
        let response = self
            .api
            .remoting()
            .invoke_sync(&addr, request, self.timeout)?;
        expect_success(&response).map_err(|e| {
            e.with_addr(&addr)
                .context(format!("view message {offset_msg_id}"))
        })?;
        decode_messages(&response.body, DecodeOptions::new().check_crc(true))?
            .into_iter()
            .next()
            .ok_or_else(|| Error::decode(format!("no message in the answer for {offset_msg_id}")))
    }

    /// GET_MAX_OFFSET of `mq`: where its next message will be stored. Asked of the master
    /// of `mq`'s broker, found in the topic's route (one name-server query per call: in a
    /// loop, look the address up once and use [`max_offset_on`](Self::max_offset_on)).
    pub fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let addr = self.master_of(mq)?;
        self.max_offset_on(&addr, mq)
    }

    /// GET_MAX_OFFSET of `mq`, asked of the broker at `broker_addr` (a master or a slave).
    pub fn max_offset_on(&self, broker_addr: &str, mq: &MessageQueue) -> Result<i64> {
        self.queue_offset(RequestCode::GET_MAX_OFFSET, broker_addr, mq)
    }

    /// GET_MIN_OFFSET of `mq`: its first offset still stored. Asked of the master of
    /// `mq`'s broker, as [`max_offset`](Self::max_offset).
    pub fn min_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let addr = self.master_of(mq)?;
        self.min_offset_on(&addr, mq)
    }

    /// GET_MIN_OFFSET of `mq`, asked of the broker at `broker_addr` (a master or a slave).
    pub fn min_offset_on(&self, broker_addr: &str, mq: &MessageQueue) -> Result<i64> {
        self.queue_offset(RequestCode::GET_MIN_OFFSET, broker_addr, mq)
    }

    fn queue_offset(&self, code: RequestCode, broker_addr: &str, mq: &MessageQueue) -> Result<i64> {
        check_topic(mq.topic())?;
        let header = QueueOffsetRequestHeader {
            topic: mq.topic().to_string(),
            queue_id: mq.queue_id(),
            broker_name: None,
        };
        self.offset_request(code, broker_addr, &header)
            .map_err(|e| e.context(format!("offset of {mq}")))
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of `mq`: the offset of a message stored about `time`.
    /// 5.x brokers answer the first one stored at `time` or later (the queue's max offset
    /// if none is); 4.x brokers the one stored closest to `time` (so the last message's
    /// offset for a time after all of them). Asked of the master of `mq`'s broker, as
    /// [`max_offset`](Self::max_offset).
    pub fn search_offset(&self, mq: &MessageQueue, time: SystemTime) -> Result<i64> {
        let addr = self.master_of(mq)?;
        self.search_offset_on(&addr, mq, time)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of `mq`, asked of the broker at `broker_addr`.
    pub fn search_offset_on(
        &self,
        broker_addr: &str,
        mq: &MessageQueue,
        time: SystemTime,
    ) -> Result<i64> {
        check_topic(mq.topic())?;
        let header = SearchOffsetRequestHeader {
            topic: mq.topic().to_string(),
            queue_id: mq.queue_id(),
            timestamp: millis_since_epoch(time),
            broker_name: None,
        };
        self.offset_request(
            RequestCode::SEARCH_OFFSET_BY_TIMESTAMP,
            broker_addr,
            &header,
        )
        .map_err(|e| e.context(format!("offset of {mq} by time")))
    }

    /// The master address of `mq`'s broker, from its topic's route (Java
    /// `findBrokerAddressInPublish` after a route update).
    fn master_of(&self, mq: &MessageQueue) -> Result<String> {
        check_topic(mq.topic())?;
        let route = self.topic_route(mq.topic())?;
        route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == mq.broker_name())
            .and_then(|b| b.master_addr())
            .map(str::to_string)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!(
                        "no master of {} in the route of {}",
                        mq.broker_name(),
                        mq.topic()
                    ),
                )
            })
    }

    fn offset_request(
        &self,
        code: RequestCode,
        broker_addr: &str,
        header: &impl crate::protocol::WriteHeader,
    ) -> Result<i64> {
        let request = RemotingCommand::request_with_header(code, header);
        let response = self
            .api
            .remoting()
            .invoke_sync(broker_addr, request, self.timeout)?;
        expect_success(&response).map_err(|e| e.with_addr(broker_addr))?;
        Ok(response.decode_header::<OffsetResponseHeader>()?.offset)
    }

    /// Sum of the max offsets of every queue of `topic`: messages stored so far.
    pub fn total_max_offset(&self, topic: &str) -> Result<i64> {
        let route = self.topic_route(topic)?;
        let mut total = 0;
        for qd in &route.queue_datas {
            let Some(addr) = route
                .broker_datas
                .iter()
                .find(|b| b.broker_name == qd.broker_name)
                .and_then(|b| b.master_addr())
            else {
                continue;
            };
            for q in queue_ids(qd.read_queue_nums) {
                let mq = MessageQueue::new(topic, &qd.broker_name, q);
                total += self.max_offset_on(addr, &mq)?;
            }
        }
        Ok(total)
    }

    /// GET_PRODUCER_CONNECTION_LIST: the clients connected under a producer group, from
    /// every master broker (a broker that does not know the group is skipped).
    pub fn producer_connections(&self, group: &str) -> Result<Vec<Connection>> {
        let mut all = Vec::new();
        for addr in self.master_addrs()?.values() {
            match self.producer_connections_on(addr, group) {
                Ok(conns) => all.extend(conns),
                Err(e) if e.kind() == ErrorKind::Response => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(all)
    }

    /// GET_PRODUCER_CONNECTION_LIST on one broker; a broker that does not know the group
    /// answers with an error code, returned as an [`ErrorKind::Response`] error.
    pub fn producer_connections_on(
        &self,
        broker_addr: &str,
        group: &str,
    ) -> Result<Vec<Connection>> {
        let mut request = RemotingCommand::request(RequestCode::GET_PRODUCER_CONNECTION_LIST);
        request.ext_fields.insert("producerGroup", group);
        let response = self
            .api
            .remoting()
            .invoke_sync(broker_addr, request, self.timeout)?;
        expect_success(&response).map_err(|e| {
            e.with_addr(broker_addr)
                .context(format!("producer connections of {group}"))
        })?;
        Ok(decode_connection_set(&response.body)?)
    }
}

/// The ids `0..n` of a broker's queues. `n` comes from a route, where it is Java's `int`.
fn queue_ids(n: u32) -> std::ops::Range<i32> {
    0..i32::try_from(n).unwrap_or(i32::MAX)
}

/// Where [`Admin::reset_offset`] moves a group's offsets in a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    /// Each queue's first message (mqadmin `resetOffsetByTime -s 0`).
    Earliest,
    /// Each queue's end: nothing stored so far is consumed (Java timestamp -1).
    Latest,
    /// The message stored at this time, per queue, as [`Admin::search_offset`] finds it.
    Timestamp(SystemTime),
}

impl ResetTarget {
    /// The `timestamp` the broker reads: ms since the epoch, -1 for the end.
    fn wire(self) -> i64 {
        match self {
            ResetTarget::Earliest => 0,
            ResetTarget::Latest => -1,
            ResetTarget::Timestamp(t) => millis_since_epoch(t).max(0),
        }
    }
}

/// Queries, progress, listings and deletions (Java `MQAdminImpl`, `DefaultMQAdminExtImpl`).
impl Admin {
    /// The brokers of `topic`'s route with the address to ask: the master, else a slave
    /// (Java `selectBrokerAddr`).
    fn brokers_of(&self, topic: &str) -> Result<Vec<(String, String)>> {
        let route = self.topic_route(topic)?;
        Ok(route
            .broker_datas
            .iter()
            .filter_map(|b| Some((b.broker_name.clone(), b.select_addr()?.to_string())))
            .collect())
    }

    /// QUERY_MESSAGE to every broker of the topic: the messages stored with the query's
    /// key (or unique key) within its time range, at most its maximum from each broker.
    /// A broker's index may name messages whose key only hashes alike; they are dropped,
    /// as Java does. A broker that finds nothing adds nothing; any other failure of a
    /// broker is the call's error. Records that do not decode are skipped (logged).
    pub fn query_messages(&self, query: &MessageQuery) -> Result<QueryResult> {
        query.check()?;
        let brokers = self.brokers_of(&query.topic)?;
        let (max_num, begin_timestamp, end_timestamp) = query.wire_range();
        let header = QueryMessageRequestHeader {
            topic: query.topic.clone(),
            key: query.key.clone(),
            max_num,
            begin_timestamp,
            end_timestamp,
        };
        let mut found = Vec::new();
        let mut index_last_update = 0;
        for (broker_name, addr) in &brokers {
            // Java allows three admin timeouts for this query (the broker reads its index).
            let Some((index, body)) =
                self.api
                    .query_message(addr, &header, query.unique, self.timeout * 3)?
            else {
                continue;
            };
            index_last_update = index_last_update.max(index.index_last_update_timestamp);
            let decoded = decode_messages_lenient(&body, DecodeOptions::new());
            if !decoded.skipped.is_empty() {
                log::warn!(
                    "query {} in {}: {} record(s) from {addr} did not decode, first: {}",
                    query.key,
                    query.topic,
                    decoded.skipped.len(),
                    decoded.skipped[0].error
                );
            }
            found.extend(decoded.messages.into_iter().map(|mut m| {
                m.broker_name = Arc::from(broker_name.as_str());
                m
            }));
        }
        Ok(QueryResult {
            index_last_update: (index_last_update > 0).then(|| time_from_millis(index_last_update)),
            messages: query::keep_matching(query, found),
        })
    }

    /// The message of `topic` whose unique key (the id `SendResult::msg_id` gives) is
    /// `id`, if a broker finds it (Java `queryMessageByUniqKey`).
    pub fn query_message_by_unique_key(&self, topic: &str, id: &str) -> Result<Option<MessageExt>> {
        Ok(self
            .query_messages(&MessageQuery::by_unique_key(topic, id))?
            .messages
            .into_iter()
            .next())
    }

    /// GET_CONSUME_STATS from every broker of the group's retry topic (which every broker
    /// that saw the group's heartbeat has): per queue the broker's and the group's offsets
    /// and the lag, for `topic` or for every topic the group has offsets in (Java
    /// `examineConsumeStats`, what `mqadmin consumerProgress` prints).
    pub fn consume_stats(&self, group: &str, topic: Option<&str>) -> Result<ConsumeStats> {
        check_group(group)?;
        if let Some(t) = topic {
            check_topic(t)?;
        }
        let mut all = ConsumeStats::default();
        for (_, addr) in self.brokers_of(&retry_topic(group))? {
            all.merge(
                self.api
                    .get_consume_stats(&addr, group, topic, self.timeout * 3)?,
            );
        }
        Ok(all)
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server knows (system
    /// topics and groups' retry topics included), sorted.
    pub fn topic_list(&self) -> Result<Vec<String>> {
        self.api.get_topic_list(self.timeout)
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG from every master broker: the subscription groups
    /// of the cluster by name (system groups included; a group on several brokers is
    /// listed once, with the settings of the first broker by name).
    pub fn subscription_groups(&self) -> Result<BTreeMap<String, SubscriptionGroupConfig>> {
        let mut all = BTreeMap::new();
        for addr in self.master_addrs()?.values() {
            for (name, config) in self.api.get_all_subscription_groups(addr, self.timeout)? {
                all.entry(name).or_insert(config);
            }
        }
        Ok(all)
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every master broker; returns the broker names.
    pub fn create_subscription_group(
        &self,
        config: &SubscriptionGroupConfig,
    ) -> Result<Vec<String>> {
        check_group(&config.group_name)?;
        let masters = self.masters()?;
        for addr in masters.values() {
            self.api
                .create_subscription_group(addr, config, self.timeout)?;
        }
        Ok(masters.into_keys().collect())
    }

    /// Sets how `group` consumes `topic` on every master broker (SET_MESSAGE_REQUEST_MODE,
    /// what `mqadmin setConsumeMode` sends; Java `setMessageRequestMode`): with
    /// [`MessageRequestMode::Pop`] up to `pop_share_queue_num + 1` consumers share each
    /// queue. Push consumers built with `client_rebalance(false)` follow it at their next
    /// rebalance. A 4.x broker does not know the request ([`ErrorKind::Unsupported`]).
    /// Returns the broker names.
    ///
    /// [`ErrorKind::Unsupported`]: crate::ErrorKind::Unsupported
    #[doc(alias = "setMessageRequestMode")]
    pub fn set_message_request_mode(
        &self,
        topic: &str,
        group: &str,
        mode: MessageRequestMode,
        pop_share_queue_num: u32,
    ) -> Result<Vec<String>> {
        check_topic(topic)?;
        check_group(group)?;
        let masters = self.masters()?;
        for addr in masters.values() {
            self.api.set_message_request_mode(
                addr,
                topic,
                group,
                mode,
                pop_share_queue_num,
                self.timeout,
            )?;
        }
        Ok(masters.into_keys().collect())
    }

    /// Deletes a topic: DELETE_TOPIC_IN_BROKER on every master broker, then
    /// DELETE_TOPIC_IN_NAMESRV on every name server (Java `mqadmin deleteTopic`), so its
    /// route disappears. Its stored messages go with the brokers' cleanup. Returns the
    /// broker names.
    pub fn delete_topic(&self, topic: &str) -> Result<Vec<String>> {
        check_topic(topic)?;
        let masters = self.masters()?;
        for addr in masters.values() {
            self.api.delete_topic_in_broker(addr, topic, self.timeout)?;
        }
        for namesrv in self.api.remoting().name_server_address_list() {
            self.api
                .delete_topic_in_namesrv(&namesrv, topic, self.timeout)?;
        }
        Ok(masters.into_keys().collect())
    }

    /// Moves `group`'s offsets in `topic` to `target` on every broker of the topic, as
    /// `mqadmin resetOffsetByTime` does: INVOKE_BROKER_TO_RESET_OFFSET, so the broker
    /// tells the group's running consumers (which then pull from there), forced (an offset
    /// may move forward or back). On a broker where no consumer of the group is online,
    /// the offsets are written directly (UPDATE_CONSUMER_OFFSET, Java's
    /// `resetOffsetByTimestampOld`), for the next consumer to start from. Returns the new
    /// offset of every queue.
    ///
    /// A 4.9 broker refuses the reset of a running group ("consumer group not exist", a
    /// `Response` error) until it holds the group's committed offset for every queue of the
    /// topic; a consumer sends those with its next persist (every 5 s) or pull, as Java's
    /// does. A 5.x broker resets on its own side and needs none.
    pub fn reset_offset(
        &self,
        group: &str,
        topic: &str,
        target: ResetTarget,
    ) -> Result<BTreeMap<MessageQueue, i64>> {
        check_group(group)?;
        check_topic(topic)?;
        let header = ResetOffsetRequestHeader {
            topic: topic.to_string(),
            group: group.to_string(),
            timestamp: target.wire(),
            is_force: true,
        };
        let route = self.topic_route(topic)?;
        let mut all = BTreeMap::new();
        for bd in &route.broker_datas {
            let Some(addr) = bd.select_addr() else {
                continue;
            };
            match self
                .api
                .invoke_broker_to_reset_offset(addr, &header, self.timeout)
            {
                Ok(offsets) => all.extend(offsets),
                Err(e) if e.response_code() == Some(ResponseCode::CONSUMER_NOT_ONLINE) => {
                    let queues = route
                        .queue_datas
                        .iter()
                        .filter(|q| q.broker_name == bd.broker_name)
                        .map(|q| q.read_queue_nums.max(q.write_queue_nums))
                        .max()
                        .unwrap_or(0);
                    for queue_id in queue_ids(queues) {
                        let mq = MessageQueue::new(topic, &bd.broker_name, queue_id);
                        let offset = match target {
                            ResetTarget::Earliest => self.min_offset_on(addr, &mq)?,
                            ResetTarget::Latest => self.max_offset_on(addr, &mq)?,
                            ResetTarget::Timestamp(t) => self.search_offset_on(addr, &mq, t)?,
                        };
                        self.api
                            .update_consumer_offset(addr, group, &mq, offset, false, self.timeout)
                            .map_err(|e| {
                                e.context(format!("reset offsets of {group} in {topic}"))
                            })?;
                        all.insert(mq, offset);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(all)
    }

    /// The master addresses by broker name, an error if there is none.
    fn masters(&self) -> Result<BTreeMap<String, String>> {
        let masters = self.master_addrs()?;
        if masters.is_empty() {
            return Err(Error::new(
                ErrorKind::NoRoute,
                "the cluster has no master broker",
            ));
        }
        Ok(masters)
    }
}

/// One client connection as a broker reports it (Java `Connection`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Connection {
    /// Client id.
    pub client_id: String,
    /// Remote address.
    pub client_addr: String,
    /// Language name (`JAVA`, `RUST`, ...).
    pub language: String,
    /// Protocol version.
    pub version: i32,
}

/// A `Connection` on the wire (fastjson's field names), kept out of the public type.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectionWire {
    client_id: String,
    #[serde(default)]
    client_addr: String,
    #[serde(default)]
    language: String,
    #[serde(default)]
    version: i32,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectionSet {
    #[serde(default)]
    connection_set: Vec<ConnectionWire>,
}

/// GET_PRODUCER_CONNECTION_LIST's answer (Java `ProducerConnection`).
pub(crate) fn decode_connection_set(
    body: &[u8],
) -> std::result::Result<Vec<Connection>, crate::protocol::DecodeError> {
    let b: ConnectionSet = crate::protocol::json::from_slice(body)?;
    Ok(b.connection_set
        .into_iter()
        .map(|w| Connection {
            client_id: w.client_id,
            client_addr: w.client_addr,
            language: w.language,
            version: w.version,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_with_more_queues_than_javas_int_is_refused_before_anything_is_sent() {
        // Nothing listens on port 1: the error must come before a connection is tried.
        let admin = Admin::builder()
            .client_options(crate::ClientOptions::new().namesrv_addr("127.0.0.1:1"))
            .start()
            .unwrap();
        let mut config = TopicConfig::new("T", u32::MAX);
        let e = admin.create_topic_on("127.0.0.1:1", &config).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("read queues of T"), "{e}");
        config.read_queue_nums = 8;
        let e = admin.create_topic_on("127.0.0.1:1", &config).unwrap_err();
        assert!(e.to_string().contains("write queues of T"), "{e}");
    }
}
