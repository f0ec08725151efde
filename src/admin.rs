//! Administrative calls the CLI, examples and tests need (a small part of Java's
//! `MQAdminExt`): cluster info, routes, and creating a topic on every master broker.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::expect_success;
use crate::client::validators::{check_topic, AUTO_CREATE_TOPIC_KEY_TOPIC};
use crate::client::{ClientConfig, ClientConfigBuilder, MQClientAPI, TopicConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{decode_messages, decode_offset_msg_id, DecodeOptions, MessageExt};
use crate::protocol::header::{
    OffsetResponseHeader, QueueOffsetRequestHeader, ViewMessageRequestHeader,
};
use crate::protocol::{ClusterInfo, RemotingCommand, RequestCode, TopicRouteData};
use crate::remoting::RemotingClient;

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

/// Builder for [`Admin`]: `Admin::builder()`, settings, then [`build`](Self::build) or
/// [`start`](Self::start).
#[derive(Debug, Clone)]
pub struct AdminBuilder {
    client: ClientConfigBuilder,
    timeout: Duration,
}

impl AdminBuilder {
    crate::util::client_setters!();

    /// Timeout of each admin call (default 6 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Checks the configuration and creates the admin; it connects on first use.
    pub fn build(self) -> Result<Admin> {
        let config = self.client.build();
        let list = config.namesrv_addr_list();
        if list.is_empty() {
            return Err(Error::invalid_argument(
                "no name-server address: set one on the builder or in NAMESRV_ADDR",
            ));
        }
        let remoting = Arc::new(RemotingClient::new(config.remoting().clone())?);
        remoting.update_name_server_address_list(&list);
        Ok(Admin {
            api: MQClientAPI::new(remoting),
            timeout: self.timeout,
        })
    }

    /// [`build`](Self::build), then one call to the name server (cluster info) so that an
    /// unreachable name server is an error here rather than on first use.
    pub fn start(self) -> Result<Admin> {
        let admin = self.build()?;
        admin.cluster_info()?;
        Ok(admin)
    }
}

impl Admin {
    /// A builder, with the name servers of `NAMESRV_ADDR` if it is set.
    pub fn builder() -> AdminBuilder {
        AdminBuilder {
            client: ClientConfig::builder(),
            timeout: Duration::from_secs(6),
        }
    }

    /// An admin for the `;`-separated name servers; it connects on first use.
    pub fn new(namesrv_addr: &str) -> Result<Admin> {
        Admin::builder().namesrv_addr(namesrv_addr).build()
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
        let masters = self.master_addrs()?;
        if masters.is_empty() {
            return Err(Error::new(
                ErrorKind::NoRoute,
                "the cluster has no master broker",
            ));
        }
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

    /// GET_MAX_OFFSET of one queue on one broker.
    pub fn max_offset(&self, broker_addr: &str, topic: &str, queue_id: i32) -> Result<i64> {
        let header = QueueOffsetRequestHeader {
            topic: topic.to_string(),
            queue_id,
            broker_name: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header);
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
            for q in 0..qd.read_queue_nums {
                total += self.max_offset(addr, topic, q)?;
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
        let body: ConnectionSet = crate::protocol::json::from_slice(&response.body)?;
        Ok(body.connection_set)
    }
}

/// One client connection as a broker reports it (Java `Connection`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// Client id.
    pub client_id: String,
    /// Remote address.
    #[serde(default)]
    pub client_addr: String,
    /// Language name (`JAVA`, `RUST`, ...).
    #[serde(default)]
    pub language: String,
    /// Protocol version.
    #[serde(default)]
    pub version: i32,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConnectionSet {
    #[serde(default)]
    connection_set: Vec<Connection>,
}
