//! `MQClientInstance`: the per-client-id core that producers and consumers of one process
//! share. It owns the remoting client, the route and broker tables, and the timer thread
//! that runs the five periodic jobs of the Java client:
//!
//! 1. name-server address fetch over HTTP (only when no address was configured),
//! 2. route refresh for every published and subscribed topic,
//! 3. offline-broker cleanup + heartbeat to all brokers,
//! 4. consumer-offset persistence,
//! 5. consumer thread-pool adjustment.
//!
//! No lock is held while calling into a producer or consumer: the callee list is copied
//! (the `Arc`s cloned) and the lock released first. The lock order is on the struct.
//!
//! Rooms: this file holds the struct, its state and the traits producers and consumers
//! implement for it; `lifecycle.rs` start, shutdown and registration; `routes.rs` the
//! name-server address, routes and broker lookups; `heartbeat.rs` heartbeats and the
//! offline-broker cleanup; `services.rs` the pull and rebalance services;
//! `processors.rs` the table of broker-initiated requests and their handlers.

mod heartbeat;
mod lifecycle;
mod processors;
mod routes;
mod services;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Weak};
use std::time::Duration;

use log::debug;
use parking_lot::{Mutex, RwLock};

use super::api::MQClientAPI;
use super::config::ClientConfig;
use super::route::TopicPublishInfo;
use crate::error::Result;
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::consumer_admin::{ConsumeMessageDirectlyResult, ConsumerRunningInfo};
use crate::protocol::heartbeat::ConsumerData;
use crate::protocol::transaction::CheckTransactionStateRequestHeader;
use crate::protocol::TopicRouteData;
use crate::remoting::RemotingClient;
use crate::scheduler::ScheduledExecutor;
use crate::util::NameMap;
use routes::RouteRequests;
use services::ConsumerServices;

/// Life cycle of a service (Java `ServiceState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceState {
    /// Created, not started.
    CreateJust,
    /// Started.
    Running,
    /// Shut down.
    ShutdownAlready,
    /// Start failed; the object cannot be used.
    StartFailed,
}

/// What the instance needs from a producer (Java `MQProducerInner`).
pub(crate) trait ProducerInner: Send + Sync {
    fn publish_topics(&self) -> Vec<String>;
    fn is_publish_topic_need_update(&self, topic: &str) -> bool;
    fn update_topic_publish_info(&self, topic: &str, info: Arc<TopicPublishInfo>);
    /// A broker at `addr` asks how a transaction of this producer's group ended
    /// (CHECK_TRANSACTION_STATE). Called on the processor pool: it must only queue the
    /// check, never run user code. Producers that are not transactional ignore it.
    fn check_transaction_state(
        &self,
        addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        let _ = (msg, header);
        debug!("broker {addr} checks a transaction of a producer that has no checker");
    }
}

/// What the instance needs from a consumer (Java `MQConsumerInner`).
pub(crate) trait ConsumerInner: Send + Sync {
    fn consumer_data(&self) -> ConsumerData;
    /// True when the consumer subscribes `topic` and queues were added to it.
    fn update_topic_subscribe_info(&self, topic: &str, info: &HashSet<MessageQueue>) -> bool;
    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool;
    fn persist_consumer_offset(&self);
    fn adjust_thread_pool(&self);
    fn do_rebalance(&self);
    /// What GET_CONSUMER_RUNNING_INFO shows of this consumer (Java
    /// `MQConsumerInner.consumerRunningInfo`); the instance adds its own properties.
    fn running_info(&self) -> ConsumerRunningInfo;
    /// The offsets this consumer holds for `topic` (GET_CONSUMER_STATUS_FROM_CLIENT).
    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64>;
    /// Moves the held queues of `topic` that `offsets` names to those offsets
    /// (RESET_CONSUMER_CLIENT_OFFSET, sent by `mqadmin resetOffsetByTime`).
    fn reset_offset(&self, topic: &str, offsets: &HashMap<MessageQueue, i64>);
    /// Runs the listener on `msg` and reports how it went (CONSUME_MESSAGE_DIRECTLY);
    /// None when this consumer has no listener to run.
    fn consume_message_directly(
        &self,
        msg: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult>;
}

/// A unit of work for the pull service (Java `PullRequest` as `PullMessageService` sees
/// it). The consumer defines what a pull is; the instance only queues and runs it, so
/// `client/` knows nothing of consumer types.
pub(crate) trait PullTask: Send {
    /// Runs the pull on the pull thread. It must not block: pulls are async.
    fn pull(self: Box<Self>);
}

/// How long a route refresh or the offline-broker cleanup waits for the name-server lock.
const LOCK_TIMEOUT: Duration = Duration::from_millis(3000);

/// The shared client core (Java `MQClientInstance`).
///
/// Lock order, where two are held at once: `state` → `scheduler`, `services` (start);
/// `namesrv_lock` → `route_table` → `broker_addr_table` (route refresh, offline-broker
/// cleanup); `heartbeat_lock` → `producers`, `broker_addr_table`, `broker_version_table`
/// (each taken and released in turn; the heartbeat body is gathered before the lock).
/// `fetched_namesrv_addr` is taken alone, after the HTTP fetch, never around it. No lock
/// is held while calling into a producer or consumer (`ProducerInner`, `ConsumerInner`),
/// nor across a join.
///
/// Producers and consumers hold it by `Arc`; its own threads hold only `Weak`s, so
/// dropping the last user ends it: `Drop` stops its threads and its remoting client.
pub struct MQClientInstance {
    client_id: String,
    config: ClientConfig,
    api: MQClientAPI,
    state: Mutex<ServiceState>,
    producers: RwLock<HashMap<String, Arc<dyn ProducerInner>>>,
    consumers: RwLock<HashMap<String, Arc<dyn ConsumerInner>>>,
    route_table: RwLock<HashMap<String, TopicRouteData>>,
    /// Broker name → broker id → address.
    broker_addr_table: RwLock<NameMap<String, BTreeMap<u64, Arc<str>>>>,
    /// Broker name → address → version reported in the heartbeat response.
    broker_version_table: RwLock<HashMap<String, HashMap<String, i32>>>,
    namesrv_lock: Mutex<()>,
    heartbeat_lock: Mutex<()>,
    heartbeat_times: AtomicU64,
    /// Sequence numbers of heartbeats: the last one gathered, and the last one sent
    /// (written under `heartbeat_lock`).
    heartbeat_gathered: AtomicU64,
    heartbeat_sent: AtomicU64,
    /// A heartbeat was asked for with [`MQClientInstance::request_heartbeat`] and has not
    /// gone out yet: later requests ride along with it.
    heartbeat_requested: AtomicBool,
    /// Routes asked for with [`MQClientInstance::request_route`], fetched on the timer.
    /// Taken alone, never across a fetch or a job.
    route_requests: Mutex<RouteRequests>,
    /// The last answer of the HTTP address server.
    fetched_namesrv_addr: Mutex<Option<String>>,
    scheduler: Mutex<Option<ScheduledExecutor>>,
    services: Mutex<Option<ConsumerServices>>,
    /// Requests of this client's producers waiting for replies.
    replies: super::ReplyTable,
    /// Heartbeats, route refreshes, rebalances, request hook panics (`stats()`).
    counters: crate::stats::ClientCounters,
    me: Weak<MQClientInstance>,
}

/// The broker id of a group's master (Java `MixAll.MASTER_ID`).
pub(crate) const MASTER_ID: u64 = 0;

/// A broker address for pulls and offsets (Java `FindBrokerResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindBrokerResult {
    /// `ip:port`.
    pub addr: String,
    /// Whether it is a slave.
    pub slave: bool,
}

impl MQClientInstance {
    pub(crate) fn new(config: ClientConfig) -> Result<Arc<Self>> {
        // The UNIQ_KEY prefix uses Java's `UtilAll.getIP` rule over this host's addresses.
        if let Ok(ifs) = if_addrs::get_if_addrs() {
            if let Some(ip) = crate::message::uniq::choose_client_ip(ifs.iter().map(|i| i.ip())) {
                crate::message::uniq::set_client_ip(ip);
            }
        }
        let remoting = Arc::new(RemotingClient::new(config.remoting.clone())?);
        remoting.update_name_server_address_list(&config.namesrv_addr_list());
        let client_id = config.client_id();
        Ok(Arc::new_cyclic(|me| MQClientInstance {
            client_id,
            api: MQClientAPI::new(remoting),
            config,
            state: Mutex::new(ServiceState::CreateJust),
            producers: RwLock::new(HashMap::new()),
            consumers: RwLock::new(HashMap::new()),
            route_table: RwLock::new(HashMap::new()),
            broker_addr_table: RwLock::new(NameMap::default()),
            broker_version_table: RwLock::new(HashMap::new()),
            namesrv_lock: Mutex::new(()),
            heartbeat_lock: Mutex::new(()),
            heartbeat_requested: AtomicBool::new(false),
            heartbeat_times: AtomicU64::new(0),
            heartbeat_gathered: AtomicU64::new(0),
            heartbeat_sent: AtomicU64::new(0),
            route_requests: Mutex::new(RouteRequests::default()),
            fetched_namesrv_addr: Mutex::new(None),
            scheduler: Mutex::new(None),
            services: Mutex::new(None),
            replies: super::ReplyTable::default(),
            counters: crate::stats::ClientCounters::default(),
            me: me.clone(),
        }))
    }

    /// `ip@instance[@unit]`.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The configuration the instance was created with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Requests waiting for their replies.
    pub(crate) fn replies(&self) -> &super::ReplyTable {
        &self.replies
    }

    /// Requests (`Producer::request`) waiting for their replies now.
    #[cfg(feature = "unstable-internals")]
    pub fn waiting_requests(&self) -> usize {
        self.replies.len()
    }

    /// Replies dropped because no request waited for them (late, or not ours).
    #[cfg(feature = "unstable-internals")]
    pub fn unmatched_replies(&self) -> u64 {
        self.replies.unmatched()
    }

    /// Typed API calls.
    pub fn api(&self) -> &MQClientAPI {
        &self.api
    }

    /// The remoting client.
    pub fn remoting(&self) -> &Arc<RemotingClient> {
        self.api.remoting()
    }

    /// The instance's figures now (connections from the remoting client).
    pub(crate) fn client_stats(&self) -> crate::stats::ClientStats {
        self.counters
            .snapshot(self.client_id.clone(), self.remoting().connection_counts())
    }

    /// Adds a user's request hook to the instance's remoting client; its panics are
    /// caught and counted in the instance's figures.
    pub(crate) fn register_request_hook(&self, hook: Arc<dyn crate::remoting::RequestHook>) {
        let panics = self.counters.hook_panics.clone();
        self.remoting()
            .register_rpc_hook(Arc::new(crate::remoting::UserRequestHook { hook, panics }));
    }

    /// Current state.
    pub fn state(&self) -> ServiceState {
        *self.state.lock()
    }

    /// The registered producers, copied so that no lock is held while calling them.
    fn producer_list(&self) -> Vec<Arc<dyn ProducerInner>> {
        self.producers.read().values().cloned().collect()
    }

    /// The registered consumers, copied so that no lock is held while calling them.
    fn consumer_list(&self) -> Vec<Arc<dyn ConsumerInner>> {
        self.consumers.read().values().cloned().collect()
    }
}

/// Runs `f` on the instance if it is still alive (jobs hold only a weak reference, so the
/// instance is not kept alive by its own timer).
fn with(
    me: &Weak<MQClientInstance>,
    f: impl FnOnce(&MQClientInstance) -> Result<()>,
) -> Result<()> {
    match me.upgrade() {
        Some(i) => f(&i),
        None => Ok(()),
    }
}
