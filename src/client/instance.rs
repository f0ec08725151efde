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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Mutex, RwLock};

use super::api::MQClientAPI;
use super::config::ClientConfig;
use super::route::{self, TopicPublishInfo};
use super::validators::{AUTO_CREATE_TOPIC_KEY_TOPIC, CLIENT_INNER_PRODUCER_GROUP};
use super::{http, manager, namespace};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{property, MessageExt, MessageQueue};
use crate::protocol::consumer_admin::{
    self, prop, ConsumeMessageDirectlyResult, ConsumerRunningInfo,
};
use crate::protocol::heartbeat::{ConsumerData, HeartbeatData, ProducerData};
use crate::protocol::transaction::CheckTransactionStateRequestHeader;
use crate::protocol::{RemotingCommand, RequestCode, ResponseCode, TopicRouteData};
use crate::remoting::RemotingClient;
use crate::scheduler::ScheduledExecutor;
use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

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

/// Java's initial delays of the five jobs.
const FETCH_NAMESRV_INITIAL_DELAY: Duration = Duration::from_secs(10);
const ROUTE_INITIAL_DELAY: Duration = Duration::from_millis(10);
const HEARTBEAT_INITIAL_DELAY: Duration = Duration::from_millis(1000);
const PERSIST_INITIAL_DELAY: Duration = Duration::from_secs(10);
const LOCK_TIMEOUT: Duration = Duration::from_millis(3000);
/// Topics whose routes one step of the periodic refresh requests at once, under one hold
/// of the name-server lock (other lookups wait for one batch, not for the round).
const ROUTE_BATCH: usize = 256;
/// The least time between two heartbeats that new broker connections ask for.
/// The least time a shutdown gives its threads to be joined, even past its deadline.
pub(crate) const JOIN_GRACE: Duration = Duration::from_millis(500);
const CONNECT_HEARTBEAT_SPACING: Duration = Duration::from_secs(1);

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
    broker_addr_table: RwLock<HashMap<String, BTreeMap<i64, String>>>,
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
    me: Weak<MQClientInstance>,
}

/// A job that waits for a route fetched on the timer.
pub(crate) type AfterRoute = Box<dyn FnOnce() + Send + 'static>;

/// Routes wanted by threads that must not fetch them (callback, pull): one fetch on the
/// client timer serves every request made before it.
#[derive(Default)]
struct RouteRequests {
    topics: HashSet<String>,
    /// Run on the callback pool once the fetch is over, whatever its outcome.
    then: Vec<AfterRoute>,
    /// A fetch is scheduled and has not taken the requests yet.
    scheduled: bool,
}

/// The pull and rebalance services (Java `PullMessageService`, `RebalanceService`):
/// threads `rmq-pull` and `rmq-rebalance`, and the `rmq-pull-delay` timer for delayed
/// pulls and consume retries.
struct ConsumerServices {
    pull_tx: crossbeam_channel::Sender<Box<dyn PullTask>>,
    rebalance_tx: crossbeam_channel::Sender<()>,
    /// Jobs for the rebalance thread between its rounds (see
    /// [`MQClientInstance::run_on_rebalance_thread`]).
    rebalance_jobs: crossbeam_channel::Sender<RebalanceJob>,
    delay: ScheduledExecutor,
    threads: Vec<Worker>,
}

impl ConsumerServices {
    /// Stops the delay timer (its pending pulls hold senders), closes both channels, which
    /// ends both loops, and joins the threads (by `deadline`, never the calling one).
    fn stop(self, deadline: Instant) {
        let ConsumerServices {
            pull_tx,
            rebalance_tx,
            rebalance_jobs,
            delay,
            threads,
        } = self;
        delay.shutdown_until(deadline);
        drop(pull_tx);
        drop(rebalance_tx);
        drop(rebalance_jobs);
        worker::join_all_until(threads, deadline, "consumer services");
    }
}

/// The process's threads, one `id name` a line: what Java's thread dump is to an
/// operator asking `consumerStatus -s`.
fn thread_listing() -> String {
    let mut out = String::from("Threads of this process (id name):\n");
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        out.push_str("(no /proc on this system)\n");
        return out;
    };
    let mut names: Vec<(u64, String)> = tasks
        .flatten()
        .filter_map(|t| {
            let id = t.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((id, name.trim_end().to_string()))
        })
        .collect();
    names.sort();
    for (id, name) in names {
        out.push_str(&format!("{id} {name}\n"));
    }
    out
}

/// How long the rebalance service waits between rounds (Java
/// `rocketmq.client.rebalance.waitInterval`).
pub const REBALANCE_WAIT_INTERVAL: Duration = Duration::from_secs(20);

/// A job run on the rebalance thread between rounds.
type RebalanceJob = Box<dyn FnOnce() + Send + 'static>;

/// The broker id of a group's master (Java `MixAll.MASTER_ID`).
pub(crate) const MASTER_ID: i64 = 0;

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
            broker_addr_table: RwLock::new(HashMap::new()),
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
    pub fn waiting_requests(&self) -> usize {
        self.replies.len()
    }

    /// Replies dropped because no request waited for them (late, or not ours).
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

    /// Current state.
    pub fn state(&self) -> ServiceState {
        *self.state.lock()
    }

    /// Starts the jobs. A running instance stays running (producers and consumers share
    /// it); a failed or shut-down one is a state error.
    ///
    /// A failed start stops what it started and removes the instance from the manager.
    pub fn start(&self) -> Result<()> {
        if !self.may_start(self.state())? {
            return Ok(());
        }
        // The HTTP fetch runs before the state lock is taken: no lock is held across I/O.
        if self.config.namesrv_addr.is_none() {
            if let Err(e) = self.fetch_name_server_addr() {
                warn!(
                    "fetching name-server addresses from {}: {e}",
                    self.config.name_server_address_url
                );
            }
        }
        let mut state = self.state.lock();
        if !self.may_start(*state)? {
            return Ok(()); // another user started it meanwhile
        }
        match self
            .start_scheduled_tasks()
            .and_then(|exec| Ok((exec, self.start_consumer_services()?)))
        {
            Ok((exec, services)) => {
                *self.scheduler.lock() = Some(exec);
                *self.services.lock() = Some(services);
                self.register_processors();
                self.register_connect_listener();
                *state = ServiceState::Running;
                info!("client instance {} started", self.client_id);
                Ok(())
            }
            Err(e) => {
                *state = ServiceState::StartFailed;
                drop(state);
                manager::remove(&self.client_id, self);
                self.stop_threads(Instant::now() + self.config.remoting.shutdown_timeout);
                Err(e.context(format!("starting client instance {}", self.client_id)))
            }
        }
    }

    /// Whether `start` has work to do in `state`: false when running, an error when failed
    /// or shut down.
    fn may_start(&self, state: ServiceState) -> Result<bool> {
        match state {
            ServiceState::CreateJust => Ok(true),
            ServiceState::Running => Ok(false),
            ServiceState::StartFailed => Err(Error::state(format!(
                "client instance {} failed to start before",
                self.client_id
            ))),
            ServiceState::ShutdownAlready => Err(Error::state(format!(
                "client instance {} is shut down",
                self.client_id
            ))),
        }
    }

    fn start_scheduled_tasks(&self) -> Result<ScheduledExecutor> {
        let exec = ScheduledExecutor::new("rmq-client-timer", 1)?;
        let c = &self.config;
        if c.namesrv_addr.is_none() {
            let me = self.me.clone();
            exec.schedule_at_fixed_rate(
                "fetch-namesrv-addr",
                FETCH_NAMESRV_INITIAL_DELAY.min(c.fetch_name_server_interval),
                c.fetch_name_server_interval,
                move || with(&me, |i| i.fetch_name_server_addr().map(|_| ())),
            )?;
        }
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "update-topic-routes",
            ROUTE_INITIAL_DELAY,
            c.poll_name_server_interval,
            move || {
                with(&me, |i| {
                    i.update_topic_route_info_from_name_server();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "clean-offline-broker-and-heartbeat",
            HEARTBEAT_INITIAL_DELAY.min(c.heartbeat_broker_interval),
            c.heartbeat_broker_interval,
            move || {
                with(&me, |i| {
                    i.clean_offline_broker();
                    i.send_heartbeat_to_all_brokers_with_lock();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "persist-consumer-offsets",
            PERSIST_INITIAL_DELAY.min(c.persist_consumer_offset_interval),
            c.persist_consumer_offset_interval,
            move || {
                with(&me, |i| {
                    i.persist_all_consumer_offsets();
                    Ok(())
                })
            },
        )?;
        let me = self.me.clone();
        exec.schedule_at_fixed_rate(
            "adjust-thread-pool",
            c.adjust_thread_pool_interval,
            c.adjust_thread_pool_interval,
            move || {
                with(&me, |i| {
                    i.adjust_thread_pool();
                    Ok(())
                })
            },
        )?;
        Ok(exec)
    }

    /// Stops the jobs and the remoting client once no producer or consumer uses the
    /// instance any more, and removes it from the manager. Java `shutdown`.
    pub fn shutdown(&self) {
        self.shutdown_until(Instant::now() + self.config.remoting.shutdown_timeout);
    }

    /// [`shutdown`](Self::shutdown), joining the threads by `deadline` (a client's own
    /// shutdown passes the deadline its other steps shared). The threads get at least
    /// [`JOIN_GRACE`] even when the deadline has passed: once told to stop they end in
    /// milliseconds, and a thread left behind would outlive its client.
    pub(crate) fn shutdown_until(&self, deadline: Instant) {
        if !self.consumers.read().is_empty() || !self.producers.read().is_empty() {
            return;
        }
        let mut state = self.state.lock();
        if *state == ServiceState::ShutdownAlready {
            return;
        }
        *state = ServiceState::ShutdownAlready;
        drop(state);
        manager::remove(&self.client_id, self);
        self.stop_threads(deadline.max(Instant::now() + JOIN_GRACE));
        info!("client instance {} shut down", self.client_id);
    }

    /// Stops the timer, the consumer services and the remoting client, joining their
    /// threads (never the calling one) by one deadline: a thread still running then (a
    /// stuck callback) is left behind with a warning. Idempotent.
    fn stop_threads(&self, deadline: Instant) {
        // Waiting requests end now, each exactly once, before the timer that would time
        // them out stops.
        self.replies.fail_all(|| {
            Error::state(format!(
                "client instance {} shut down before the reply came",
                self.client_id
            ))
        });
        // Take each out first: a guard held across the joins would deadlock with a
        // service thread that needs the same lock to finish its current step.
        let scheduler = self.scheduler.lock().take();
        if let Some(exec) = scheduler {
            exec.shutdown_until(deadline);
        }
        // Jobs waiting for a route the stopped timer will not fetch run now, while the
        // callback pool still takes them (each owns a callback that must run once).
        self.release_route_requests();
        let services = self.services.lock().take();
        if let Some(services) = services {
            services.stop(deadline);
        }
        self.remoting().shutdown_until(deadline);
    }

    // --- registration ----------------------------------------------------------

    /// Registers a producer; false if the group is already registered here.
    pub(crate) fn register_producer(&self, group: &str, producer: Arc<dyn ProducerInner>) -> bool {
        let mut p = self.producers.write();
        if p.contains_key(group) {
            return false;
        }
        p.insert(group.to_string(), producer);
        true
    }

    /// Unregisters a producer locally and at every broker, within `deadline` when given.
    pub(crate) fn unregister_producer_until(&self, group: &str, deadline: Option<Instant>) {
        self.producers.write().remove(group);
        self.unregister_client(Some(group), None, deadline);
    }

    /// Registers a consumer; false if the group is already registered here.
    pub(crate) fn register_consumer(&self, group: &str, consumer: Arc<dyn ConsumerInner>) -> bool {
        let mut c = self.consumers.write();
        if c.contains_key(group) {
            return false;
        }
        c.insert(group.to_string(), consumer);
        true
    }

    /// Unregisters a consumer locally and at every broker.
    pub(crate) fn unregister_consumer(&self, group: &str) {
        self.unregister_consumer_until(group, None);
    }

    /// [`unregister_consumer`](Self::unregister_consumer) within `deadline`: a broker not
    /// asked by then forgets the consumer when the instance's connections close.
    pub(crate) fn unregister_consumer_until(&self, group: &str, deadline: Option<Instant>) {
        self.consumers.write().remove(group);
        self.unregister_client(None, Some(group), deadline);
    }

    fn unregister_client(
        &self,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
        deadline: Option<Instant>,
    ) {
        let addrs: Vec<String> = self
            .broker_addr_table
            .read()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect();
        for addr in addrs {
            let mut timeout = self.config.mq_client_api_timeout;
            if let Some(d) = deadline {
                timeout = timeout.min(d.saturating_duration_since(Instant::now()));
                if timeout.is_zero() {
                    warn!("no time left to unregister {} at {addr}", self.client_id);
                    continue;
                }
            }
            if let Err(e) = self.api.unregister_client(
                &addr,
                &self.client_id,
                producer_group,
                consumer_group,
                timeout,
            ) {
                warn!("unregister client {} at {addr}: {e}", self.client_id);
            }
        }
    }

    // --- job 1 -----------------------------------------------------------------

    /// Asks the HTTP address server for name-server addresses and adopts a changed answer.
    /// Returns the answer.
    pub fn fetch_name_server_addr(&self) -> Result<String> {
        let url = &self.config.name_server_address_url;
        let (status, body) = http::get(url, self.config.mq_client_api_timeout)?;
        if status != 200 {
            return Err(Error::new(
                ErrorKind::Response,
                format!("address server {url} answered HTTP {status}"),
            ));
        }
        let addrs = http::clear_new_line(&body);
        if addrs.is_empty() {
            return Err(Error::new(
                ErrorKind::Response,
                format!("address server {url} answered nothing"),
            ));
        }
        let mut last = self.fetched_namesrv_addr.lock();
        if last.as_deref() != Some(addrs.as_str()) {
            info!("name-server address changed: {:?} -> {addrs}", *last);
            self.remoting()
                .update_name_server_address_list(&super::config::parse_namesrv_list(&addrs));
            *last = Some(addrs.clone());
        }
        Ok(addrs)
    }

    // --- job 2 -----------------------------------------------------------------

    /// Refreshes the route of every published and subscribed topic.
    pub fn update_topic_route_info_from_name_server(&self) {
        let mut topics: HashSet<String> = HashSet::new();
        for c in self.consumer_list() {
            for s in c.consumer_data().subscription_data_set {
                topics.insert(s.topic);
            }
        }
        for p in self.producer_list() {
            topics.extend(p.publish_topics());
        }
        self.forget_routes_not_in(&topics);
        let topics: Vec<String> = topics.into_iter().collect();
        for batch in topics.chunks(ROUTE_BATCH) {
            self.update_routes(batch);
        }
    }

    /// Refreshes the routes of `topics` as [`update_topic_route`](Self::update_topic_route)
    /// does one's, with every request sent at once: under the name-server lock the
    /// batch's requests go out together and the changed routes are stored, then they are
    /// handed out with no lock held. A route round of 5,000 topics one request at a time
    /// (Java) took longer than a second here.
    fn update_routes(&self, topics: &[String]) {
        // Asked before the lock is taken: it calls into producers and consumers.
        let needed: Vec<bool> = topics
            .iter()
            .map(|t| self.is_need_update_topic_route_info(t))
            .collect();
        let stored = {
            let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
                debug!(
                    "route refresh of {} topics: the name-server lock is busy",
                    topics.len()
                );
                return;
            };
            let timeout = self.config.mq_client_api_timeout;
            let routes = match self.api.get_topic_route_infos(topics, timeout) {
                Ok(r) => r,
                Err(e) => {
                    debug!("route refresh of {} topics: {e}", topics.len());
                    return;
                }
            };
            let mut stored = Vec::new();
            for ((topic, route), needed) in topics.iter().zip(routes).zip(needed) {
                match route {
                    Ok(route) => {
                        if let Some((route, new_addr)) = self.store_route(topic, route, needed) {
                            stored.push((topic, route, new_addr));
                        }
                    }
                    Err(e) => debug!("route refresh of {topic}: {e}"),
                }
            }
            stored
        };
        for (topic, route, new_addr) in stored {
            self.publish_route(topic, route, new_addr);
        }
    }

    /// Drops the cached routes of topics no producer sends to and no consumer subscribes,
    /// so that the table shrinks with use (Java's only grows); their brokers then go with
    /// the offline-broker cleanup. A topic needed again is looked up again.
    fn forget_routes_not_in(&self, in_use: &HashSet<String>) {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            return;
        };
        self.route_table.write().retain(|topic, _| {
            let keep = in_use.contains(topic);
            if !keep {
                debug!("route of {topic}: no producer or consumer uses it; forgotten");
            }
            keep
        });
    }

    /// Fetches the route of `topic` and, if it changed (or a user needs it), updates the
    /// broker table and every producer's and consumer's view. Returns whether it did.
    pub fn update_topic_route(&self, topic: &str) -> Result<bool> {
        self.update_route_inner(topic, None)
    }

    /// Like [`update_topic_route`](Self::update_topic_route) but from the TBW102 route,
    /// with the queue counts capped at `default_queue_nums`: the broker creates the topic
    /// on first send (Java `isDefault = true`).
    pub(crate) fn update_topic_route_from_default(
        &self,
        topic: &str,
        default_queue_nums: i32,
    ) -> Result<bool> {
        self.update_route_inner(topic, Some(default_queue_nums))
    }

    fn update_route_inner(&self, topic: &str, default_queue_nums: Option<i32>) -> Result<bool> {
        // Asked before the name-server lock is taken: it calls into producers and consumers.
        let needed = self.is_need_update_topic_route_info(topic);
        let route = self.fetch_and_store_route(topic, default_queue_nums, needed)?;
        match route {
            Some((route, new_addr)) => {
                self.publish_route(topic, route, new_addr);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Under the name-server lock: fetches the route of `topic` and, if it changed (or
    /// `needed`), stores it and the broker addresses. Returns the stored route and
    /// whether it names an address the instance did not know for a broker name it knew.
    fn fetch_and_store_route(
        &self,
        topic: &str,
        default_queue_nums: Option<i32>,
        needed: bool,
    ) -> Result<Option<(TopicRouteData, bool)>> {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            return Err(Error::timeout(crate::TimeoutPhase::Lock, LOCK_TIMEOUT)
                .context(format!("route refresh of {topic}")));
        };
        let timeout = self.config.mq_client_api_timeout;
        let route = match default_queue_nums {
            Some(n) => {
                let mut r = self
                    .api
                    .get_topic_route_info(AUTO_CREATE_TOPIC_KEY_TOPIC, timeout)?;
                for qd in &mut r.queue_datas {
                    let q = n.min(qd.read_queue_nums);
                    qd.read_queue_nums = q;
                    qd.write_queue_nums = q;
                }
                r
            }
            None => self.api.get_topic_route_info(topic, timeout)?,
        };
        Ok(self.store_route(topic, route, needed))
    }

    /// Under the name-server lock: stores the fetched `route` of `topic` and the broker
    /// addresses if it changed (or `needed`). Returns the stored route and whether it
    /// names an address the instance did not know for a broker name it knew.
    fn store_route(
        &self,
        topic: &str,
        route: TopicRouteData,
        needed: bool,
    ) -> Option<(TopicRouteData, bool)> {
        let changed = {
            let table = self.route_table.read();
            match table.get(topic) {
                Some(old) => old.sorted() != route.sorted(),
                None => true,
            }
        } || needed;
        if !changed {
            return None;
        }
        info!("route of topic {topic} changed: {route:?}");
        let new_addr = {
            let mut brokers = self.broker_addr_table.write();
            // Only for a broker name already known: a first route is followed by the
            // heartbeat of whoever starts, and a new name by the rebalance that adds its
            // queues.
            let known = |addr: &String| brokers.values().any(|m| m.values().any(|a| a == addr));
            let new_addr = route.broker_datas.iter().any(|bd| {
                brokers.contains_key(&bd.broker_name) && bd.broker_addrs.values().any(|a| !known(a))
            });
            for bd in &route.broker_datas {
                brokers.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
            new_addr
        };
        self.route_table
            .write()
            .insert(topic.to_string(), route.clone());
        Some((route, new_addr))
    }

    /// Hands `route` to every producer and consumer, with no lock held (Java does this
    /// under its name-server lock). A concurrent refresh may have stored a newer route and
    /// handed it out before this call gets here, so after handing out, the stored route is
    /// compared with what was handed out and, if it differs, handed out too: the last
    /// update any user receives is the stored route. `new_addr`: the route names a broker
    /// address the instance did not know.
    fn publish_route(&self, topic: &str, mut route: TopicRouteData, mut new_addr: bool) {
        loop {
            let mut publish = route::to_publish_info(topic, &route);
            publish.have_topic_router_info = true;
            let publish = Arc::new(publish);
            let subscribe = route::to_subscribe_info(topic, &route);
            for p in self.producer_list() {
                p.update_topic_publish_info(topic, publish.clone());
            }
            let consumers = self.consumer_list();
            let mut queues_added = false;
            for c in &consumers {
                queues_added |= c.update_topic_subscribe_info(topic, &subscribe);
            }
            // A broker came (back) for a subscribed topic, or an address it did not know
            // serves a group it has (a master restarted while its slave stayed, a slave
            // promoted by the controller): register with it (a heartbeat on the timer, not
            // on whoever refreshed the route) and rebalance now. Java waits for the next
            // heartbeat (30 s) and rebalance (20 s), and such a broker refuses pulls of a
            // group it does not know (SUBSCRIPTION_NOT_EXIST) until then.
            if queues_added || (new_addr && !consumers.is_empty()) {
                self.request_heartbeat();
                self.rebalance_immediately();
            }
            match self.route_table.read().get(topic) {
                Some(stored) if *stored != route => route = stored.clone(),
                _ => return,
            }
            // The refresh that stored the newer route reports its own new addresses.
            new_addr = false;
        }
    }

    /// The registered producers, copied so that no lock is held while calling them.
    fn producer_list(&self) -> Vec<Arc<dyn ProducerInner>> {
        self.producers.read().values().cloned().collect()
    }

    /// The registered consumers, copied so that no lock is held while calling them.
    fn consumer_list(&self) -> Vec<Arc<dyn ConsumerInner>> {
        self.consumers.read().values().cloned().collect()
    }

    /// Java `isNeedUpdateTopicRouteInfo`: some user lacks usable info for `topic`.
    fn is_need_update_topic_route_info(&self, topic: &str) -> bool {
        self.producer_list()
            .iter()
            .any(|p| p.is_publish_topic_need_update(topic))
            || self
                .consumer_list()
                .iter()
                .any(|c| c.is_subscribe_topic_need_update(topic))
    }

    /// The cached route of `topic`.
    pub fn topic_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.route_table.read().get(topic).cloned()
    }

    // --- job 3 -----------------------------------------------------------------

    /// Drops broker addresses that no cached route mentions any more.
    pub fn clean_offline_broker(&self) {
        let Some(_guard) = self.namesrv_lock.try_lock_for(LOCK_TIMEOUT) else {
            warn!("clean_offline_broker: name-server lock not acquired");
            return;
        };
        let live: HashSet<String> = self
            .route_table
            .read()
            .values()
            .flat_map(|r| {
                r.broker_datas
                    .iter()
                    .flat_map(|b| b.broker_addrs.values().cloned())
            })
            .collect();
        let mut table = self.broker_addr_table.write();
        table.retain(|name, addrs| {
            addrs.retain(|id, addr| {
                let keep = live.contains(addr);
                if !keep {
                    info!("broker {name} id {id} at {addr} is offline; removed");
                }
                keep
            });
            !addrs.is_empty()
        });
    }

    /// Sends a heartbeat unless one is already being sent (Java
    /// `sendHeartbeatToAllBrokerWithLock`).
    pub fn send_heartbeat_to_all_brokers_with_lock(&self) {
        let heartbeat = self.prepare_heartbeat_data();
        match self.heartbeat_lock.try_lock() {
            Some(_g) => self.send_heartbeat_to_all_brokers(heartbeat),
            None => warn!("heartbeat skipped: another one is in progress"),
        }
    }

    /// Sends a heartbeat, waiting for one in progress to finish first: after a rebalance
    /// the broker must learn the new subscription version before the next pulls carry it.
    pub(crate) fn send_heartbeat_to_all_brokers_waiting(&self) {
        let heartbeat = self.prepare_heartbeat_data();
        let _g = self.heartbeat_lock.lock();
        self.send_heartbeat_to_all_brokers(heartbeat);
    }

    /// Sends a heartbeat soon, on the client timer rather than the calling thread: callers
    /// on the callback pool (a pull answered SUBSCRIPTION_NOT_LATEST) must not block on the
    /// network. Requests made before it goes out are served by that one heartbeat.
    pub(crate) fn request_heartbeat(&self) {
        self.request_heartbeat_in(Duration::ZERO);
    }

    /// Fetches the route of `topic` soon, on the client timer rather than the calling
    /// thread (callback and pull threads must not wait for the name server, Java's
    /// callback executor does), then runs `then` on the callback pool, whatever the
    /// fetch's outcome. Requests made before the fetch starts are served by it.
    pub(crate) fn request_route(&self, topic: &str, then: Option<AfterRoute>) {
        let mut requests = self.route_requests.lock();
        requests.topics.insert(topic.to_string());
        requests.then.extend(then);
        if requests.scheduled {
            return;
        }
        requests.scheduled = true;
        drop(requests);
        let me = self.me.clone();
        let scheduled = self.scheduler.lock().as_ref().map(|s| {
            s.schedule_once("route-now", Duration::ZERO, move || {
                with(&me, |i| {
                    i.serve_route_requests();
                    Ok(())
                })
            })
        });
        if !matches!(scheduled, Some(Ok(_))) {
            // Not running: nothing is fetched; the waiting jobs find what is cached.
            self.release_route_requests();
        }
    }

    /// Drops the requested routes unfetched and lets their waiting jobs go.
    fn release_route_requests(&self) {
        let waiting = {
            let mut requests = self.route_requests.lock();
            requests.scheduled = false;
            requests.topics.clear();
            std::mem::take(&mut requests.then)
        };
        self.run_after_route(waiting);
    }

    /// On the timer: fetches the requested routes, then lets their waiting jobs go.
    fn serve_route_requests(&self) {
        let (topics, waiting) = {
            let mut requests = self.route_requests.lock();
            requests.scheduled = false;
            (
                std::mem::take(&mut requests.topics),
                std::mem::take(&mut requests.then),
            )
        };
        let topics: Vec<String> = topics.into_iter().collect();
        for batch in topics.chunks(ROUTE_BATCH) {
            self.update_routes(batch);
        }
        self.run_after_route(waiting);
    }

    /// Runs each job on the callback pool, or here once the pool is shut down: each owns
    /// a callback that must run once.
    fn run_after_route(&self, jobs: Vec<AfterRoute>) {
        for job in jobs {
            let slot = Arc::new(Mutex::new(Some(job)));
            let queued = slot.clone();
            let accepted = self.remoting().execute_callback(move || {
                let job = queued.lock().take();
                if let Some(job) = job {
                    job();
                }
            });
            if !accepted {
                let job = slot.lock().take();
                if let Some(job) = job {
                    job();
                }
            }
        }
    }

    /// Runs `job` on the client timer after `delay`: work that waits for brokers or the
    /// name server (an offset written after an illegal one), which must not hold up the
    /// pull-delay timer every consumer's delayed pulls share. Dropped when not running.
    pub(crate) fn schedule_on_client_timer(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) {
        let guard = self.scheduler.lock();
        if let Some(s) = guard.as_ref() {
            let _ = s.schedule_once(name, delay, move || {
                job();
                Ok(())
            });
        }
    }

    /// [`request_heartbeat`](Self::request_heartbeat), sent after `delay`.
    fn request_heartbeat_in(&self, delay: Duration) {
        if self.heartbeat_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.me.clone();
        let scheduled = self.scheduler.lock().as_ref().map(|s| {
            s.schedule_once("heartbeat-now", delay, move || {
                with(&me, |i| {
                    i.heartbeat_requested.store(false, Ordering::Release);
                    i.send_heartbeat_to_all_brokers_waiting();
                    Ok(())
                })
            })
        });
        if !matches!(scheduled, Some(Ok(_))) {
            // Not running: nothing to send, and the next request may try again.
            self.heartbeat_requested.store(false, Ordering::Release);
        }
    }

    /// Sends `heartbeat`; called with `heartbeat_lock` held. The data was gathered before
    /// the lock (gathering calls into the consumers), so a heartbeat gathered later may
    /// have gone out first: then this one is older and is not sent.
    fn send_heartbeat_to_all_brokers(&self, (seq, data): (u64, HeartbeatData)) {
        if self.heartbeat_sent.load(Ordering::Acquire) > seq {
            debug!("heartbeat skipped: a newer one went out meanwhile");
            return;
        }
        self.heartbeat_sent.store(seq, Ordering::Release);
        let no_consumer = data.consumer_data_set.is_empty();
        if no_consumer && self.producers.read().is_empty() {
            debug!("heartbeat skipped: no producer and no consumer");
            return;
        }
        let body = match serde_json::to_vec(&data) {
            Ok(b) => b,
            Err(e) => {
                warn!("encoding the heartbeat: {e}");
                return;
            }
        };
        let times = self.heartbeat_times.fetch_add(1, Ordering::Relaxed);
        let targets: Vec<(String, i64, String)> = self
            .broker_addr_table
            .read()
            .iter()
            .flat_map(|(name, addrs)| {
                addrs
                    .iter()
                    .map(move |(id, a)| (name.clone(), *id, a.clone()))
            })
            .collect();
        for (name, id, addr) in targets {
            // Without consumers only masters need to know us.
            if no_consumer && id != 0 {
                continue;
            }
            match self
                .api
                .send_heartbeat(&addr, body.clone(), self.config.mq_client_api_timeout)
            {
                Ok(version) => {
                    self.broker_version_table
                        .write()
                        .entry(name.clone())
                        .or_default()
                        .insert(addr.clone(), version);
                    if times % 20 == 0 {
                        info!("heartbeat to broker {name} {addr} ok (broker version {version})");
                    }
                }
                Err(e) => warn!("heartbeat to broker {name} {addr} failed: {e}"),
            }
        }
    }

    /// The heartbeat body and its sequence number, gathered without holding a lock.
    fn prepare_heartbeat_data(&self) -> (u64, HeartbeatData) {
        let seq = self.heartbeat_gathered.fetch_add(1, Ordering::AcqRel) + 1;
        let mut producer_data_set: Vec<ProducerData> = self
            .producers
            .read()
            .keys()
            .map(|g| ProducerData {
                group_name: g.clone(),
            })
            .collect();
        // Java's instance always has its inner producer registered.
        if !producer_data_set
            .iter()
            .any(|p| p.group_name == CLIENT_INNER_PRODUCER_GROUP)
        {
            producer_data_set.push(ProducerData {
                group_name: CLIENT_INNER_PRODUCER_GROUP.to_string(),
            });
        }
        let consumer_data_set = self
            .consumer_list()
            .iter()
            .map(|c| c.consumer_data())
            .collect();
        let data = HeartbeatData {
            client_id: self.client_id.clone(),
            consumer_data_set,
            producer_data_set,
        };
        (seq, data)
    }

    /// The version a broker reported in its last heartbeat response.
    pub fn broker_version(&self, broker_name: &str, addr: &str) -> Option<i32> {
        self.broker_version_table
            .read()
            .get(broker_name)
            .and_then(|m| m.get(addr).copied())
    }

    // --- jobs 4 and 5 ----------------------------------------------------------

    fn persist_all_consumer_offsets(&self) {
        for c in self.consumer_list() {
            c.persist_consumer_offset();
        }
    }

    fn adjust_thread_pool(&self) {
        for c in self.consumer_list() {
            c.adjust_thread_pool();
        }
    }

    // --- consumer services ------------------------------------------------------

    fn start_consumer_services(&self) -> Result<ConsumerServices> {
        let delay = ScheduledExecutor::new("rmq-pull-delay", 1)?;
        let (pull_tx, pull_rx) = crossbeam_channel::unbounded::<Box<dyn PullTask>>();
        let (rebalance_tx, rebalance_rx) = crossbeam_channel::bounded::<()>(1);
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded::<RebalanceJob>();
        // Both loops run each job under `run_caught`: a panicking job is logged and the
        // service goes on (every consumer of the instance depends on it).
        let pull = worker::spawn("rmq-pull", move || {
            for task in pull_rx.iter() {
                worker::run_caught("a pull task", || task.pull());
            }
        })
        .map_err(|e| Error::io("starting the pull service", e))?;
        let me = self.me.clone();
        let rebalance = worker::spawn("rmq-rebalance", move || {
            // Jobs run between rounds and do not push the next periodic round back.
            let mut next_round = Instant::now() + REBALANCE_WAIT_INTERVAL;
            loop {
                let wait = next_round.saturating_duration_since(Instant::now());
                crossbeam_channel::select! {
                    recv(rebalance_rx) -> r => if r.is_err() { return },
                    recv(jobs_rx) -> job => {
                        let Ok(job) = job else { return };
                        worker::run_caught("a rebalance-thread job", job);
                        continue;
                    }
                    default(wait) => {}
                }
                let Some(instance) = me.upgrade() else { return };
                worker::run_caught("a rebalance round", || instance.do_rebalance());
                next_round = Instant::now() + REBALANCE_WAIT_INTERVAL;
            }
        });
        let threads = match rebalance {
            Ok(r) => vec![pull, r],
            Err(e) => {
                drop(pull_tx); // ends the pull thread
                worker::join_all([pull], JOIN_TIMEOUT, "consumer services");
                return Err(Error::io("starting the rebalance service", e));
            }
        };
        Ok(ConsumerServices {
            pull_tx,
            rebalance_tx,
            rebalance_jobs: jobs_tx,
            delay,
            threads,
        })
    }

    /// Hands a pull request to the pull service now.
    pub(crate) fn execute_pull_request_immediately(&self, request: impl PullTask + 'static) {
        if let Some(s) = self.services.lock().as_ref() {
            let _ = s.pull_tx.send(Box::new(request));
        }
    }

    /// Hands a pull request to the pull service after `delay`.
    pub(crate) fn execute_pull_request_later(
        &self,
        request: impl PullTask + 'static,
        delay: Duration,
    ) {
        let guard = self.services.lock();
        let Some(s) = guard.as_ref() else { return };
        let tx = s.pull_tx.clone();
        let request: Box<dyn PullTask> = Box::new(request);
        if let Err(e) = s.delay.schedule_once("pull-later", delay, move || {
            let _ = tx.send(request);
            Ok(())
        }) {
            debug!("pull request dropped: {e}");
        }
    }

    /// Runs `job` on the pull-delay timer after `delay` (consume retries, lock refresh).
    pub(crate) fn schedule_later(
        &self,
        name: &str,
        delay: Duration,
        job: impl FnOnce() + Send + 'static,
    ) {
        let guard = self.services.lock();
        if let Some(s) = guard.as_ref() {
            let _ = s.delay.schedule_once(name, delay, move || {
                job();
                Ok(())
            });
        }
    }

    /// Wakes the rebalance service (Java `rebalanceImmediately`).
    /// Runs `job` on the rebalance thread before its next round: for broker calls that
    /// decide where a queue starts (Java runs `computePullFromWhere` there), which must
    /// not hold up the pull-delay timer that every consumer's delayed pulls share. False
    /// when the services are stopped (the job is dropped).
    pub(crate) fn run_on_rebalance_thread(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let guard = self.services.lock();
        guard
            .as_ref()
            .is_some_and(|s| s.rebalance_jobs.send(Box::new(job)).is_ok())
    }

    pub fn rebalance_immediately(&self) {
        if let Some(s) = self.services.lock().as_ref() {
            let _ = s.rebalance_tx.try_send(());
        }
    }

    /// One rebalance round for every consumer. A consumer whose rebalance panics is
    /// logged and the others still run.
    pub fn do_rebalance(&self) {
        let consumers: Vec<(String, Arc<dyn ConsumerInner>)> = self
            .consumers
            .read()
            .iter()
            .map(|(g, c)| (g.clone(), c.clone()))
            .collect();
        for (group, c) in consumers {
            worker::run_caught(format_args!("the rebalance of group {group}"), || {
                c.do_rebalance()
            });
        }
    }

    /// Java 5.x `onChannelActive`: a new connection to a broker gets a heartbeat at once
    /// (requested, so it goes out on the timer). A broker forgets a client's consumers and
    /// producers when a connection of the client closes, and until it hears from it again
    /// refuses the group's pulls (SUBSCRIPTION_NOT_EXIST); without this, a connection
    /// lost and made again stopped consumption until the next periodic heartbeat (30 s).
    /// These heartbeats are spaced by `CONNECT_HEARTBEAT_SPACING`: a peer that accepts
    /// and closes every connection (a proxy whose broker is down) would otherwise make
    /// each heartbeat's own connection ask for the next one, without pause.
    fn register_connect_listener(&self) {
        let me = self.me.clone();
        let last: Mutex<Option<Instant>> = Mutex::new(None);
        self.remoting().set_connect_listener(move |addr| {
            let Some(i) = me.upgrade() else { return };
            let is_broker = i
                .broker_addr_table
                .read()
                .values()
                .any(|m| m.values().any(|a| a == addr));
            if !is_broker {
                return;
            }
            let now = Instant::now();
            let at = {
                let mut last = last.lock();
                let at = last.map_or(now, |t| (t + CONNECT_HEARTBEAT_SPACING).max(now));
                *last = Some(at);
                at
            };
            debug!("new connection to broker {addr}: heartbeat");
            i.request_heartbeat_in(at - now);
        });
    }

    fn register_processors(&self) {
        // The admin tool's requests about a consumer, relayed by a broker (Java
        // `ClientRemotingProcessor`). They run on the processor pool.
        for code in [
            RequestCode::GET_CONSUMER_RUNNING_INFO,
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT,
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET,
            RequestCode::CONSUME_MESSAGE_DIRECTLY,
        ] {
            let me = self.me.clone();
            self.remoting().register_processor(
                code,
                Arc::new(move |addr: &str, req: RemotingCommand| {
                    let i = me.upgrade()?;
                    i.process_admin_request(addr, req)
                }),
            );
        }
        // Replies to this client's requests, pushed by the broker that took them.
        let me = self.me.clone();
        self.remoting().register_processor(
            RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT,
            Arc::new(move |addr: &str, req: RemotingCommand| {
                let i = me.upgrade()?;
                Some(super::process_reply(&i, addr, &req))
            }),
        );
        let me = self.me.clone();
        self.remoting().register_processor(
            RequestCode::CHECK_TRANSACTION_STATE,
            Arc::new(move |addr: &str, req: RemotingCommand| {
                if let Some(i) = me.upgrade() {
                    i.process_check_transaction_state(addr, req);
                }
                None
            }),
        );
        let me = self.me.clone();
        self.remoting().register_processor(
            crate::protocol::RequestCode::NOTIFY_CONSUMER_IDS_CHANGED,
            Arc::new(move |addr: &str, req: crate::protocol::RemotingCommand| {
                let group = req
                    .ext_fields
                    .get("consumerGroup")
                    .unwrap_or_default()
                    .to_string();
                info!("broker {addr} says the consumers of group {group} changed; rebalancing");
                if let Some(i) = me.upgrade() {
                    i.rebalance_immediately();
                }
                None
            }),
        );
    }

    /// A broker's CHECK_TRANSACTION_STATE (oneway; Java
    /// `ClientRemotingProcessor.checkTransactionState`): the half message is decoded and
    /// handed to the producer of its group (`PGROUP`), which queues the check; the answer
    /// is that producer's END_TRANSACTION. A request that cannot be read is logged and
    /// dropped: the broker checks again.
    fn process_check_transaction_state(&self, addr: &str, req: RemotingCommand) {
        let header: CheckTransactionStateRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => {
                warn!("broker {addr}: a transaction check whose header cannot be read: {e}");
                return;
            }
        };
        let msg = crate::message::decode_messages(&req.body, Default::default())
            .ok()
            .and_then(|v| v.into_iter().next());
        let Some(mut msg) = msg else {
            warn!("broker {addr}: a transaction check whose message cannot be decoded");
            return;
        };
        if let Some(ns) = self.config.namespace() {
            let topic = namespace::unwrap(Some(&ns), msg.topic());
            msg.message.set_topic(topic);
        }
        if let Some(id) = msg.property(property::UNIQ_KEY).filter(|id| !id.is_empty()) {
            let id = id.to_string();
            msg.message.set_transaction_id(Some(id));
        }
        let Some(group) = msg.property(property::PGROUP).map(str::to_string) else {
            warn!("broker {addr}: a transaction check of a message without a producer group");
            return;
        };
        let producer = self.producers.read().get(&group).cloned();
        match producer {
            Some(p) => p.check_transaction_state(addr, msg, header),
            None => {
                debug!("broker {addr} checks a transaction of group {group}, which is not here")
            }
        }
    }

    /// Answers one admin request about a consumer of this instance; `None` for a oneway
    /// request (the offset reset).
    fn process_admin_request(&self, addr: &str, req: RemotingCommand) -> Option<RemotingCommand> {
        let ext = |k: &str| req.ext_fields.get(k).unwrap_or_default().to_string();
        let code = RequestCode(req.code);
        // The reset and the status name the group `group`, the others `consumerGroup`.
        let group = match code {
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET
            | RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => ext("group"),
            _ => ext("consumerGroup"),
        };
        let consumer = self.consumers.read().get(&group).cloned();
        let Some(consumer) = consumer else {
            if code == RequestCode::RESET_CONSUMER_CLIENT_OFFSET {
                info!("broker {addr} resets offsets of group {group}, which is not here");
                return None;
            }
            return Some(RemotingCommand::response(
                ResponseCode::SYSTEM_ERROR,
                req.opaque,
                Some(format!(
                    "The Consumer Group <{group}> not exist in this consumer"
                )),
            ));
        };
        let answer = |body: std::result::Result<Vec<u8>, crate::protocol::DecodeError>| {
            Some(match body {
                Ok(b) => {
                    let mut r = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None);
                    r.body = b;
                    r
                }
                Err(e) => RemotingCommand::response(
                    ResponseCode::SYSTEM_ERROR,
                    req.opaque,
                    Some(e.to_string()),
                ),
            })
        };
        match code {
            RequestCode::GET_CONSUMER_RUNNING_INFO => {
                let mut info = consumer.running_info();
                self.add_running_info_properties(&mut info);
                if ext("jstackEnable") == "true" {
                    info.jstack = Some(thread_listing());
                }
                answer(info.encode())
            }
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => answer(
                consumer_admin::encode_consumer_status(&consumer.offsets_of(&ext("topic"))),
            ),
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET => {
                let topic = ext("topic");
                let offsets = match consumer_admin::decode_reset_offsets(&req.body) {
                    Ok(o) => o,
                    Err(e) => {
                        warn!("broker {addr}: an offset reset of {group} that cannot be read: {e}");
                        return None;
                    }
                };
                info!(
                    "broker {addr} resets {} queue offsets of topic {topic} for group {group}",
                    offsets.len()
                );
                consumer.reset_offset(&topic, &offsets);
                None
            }
            RequestCode::CONSUME_MESSAGE_DIRECTLY => {
                let msg = crate::message::decode_messages(&req.body, Default::default())
                    .ok()
                    .and_then(|v| v.into_iter().next());
                let Some(msg) = msg else {
                    return Some(RemotingCommand::response(
                        ResponseCode::SYSTEM_ERROR,
                        req.opaque,
                        Some("the message to consume cannot be decoded".into()),
                    ));
                };
                match consumer.consume_message_directly(msg, &ext("brokerName")) {
                    Some(result) => answer(result.encode()),
                    None => Some(RemotingCommand::response(
                        ResponseCode::SYSTEM_ERROR,
                        req.opaque,
                        Some(format!(
                            "The Consumer Group <{group}> not exist in this consumer"
                        )),
                    )),
                }
            }
            _ => None,
        }
    }

    /// The properties Java's `MQClientInstance.consumerRunningInfo` adds.
    fn add_running_info_properties(&self, info: &mut ConsumerRunningInfo) {
        let p = &mut info.properties;
        p.insert(
            prop::NAMESERVER_ADDR.into(),
            self.remoting().name_server_address_list().join(";"),
        );
        p.insert(
            prop::CLIENT_VERSION.into(),
            crate::protocol::CURRENT_VERSION.to_string(),
        );
        p.insert("clientId".into(), self.client_id.clone());
    }

    /// Java `findBrokerAddressInSubscribe`: the address of `broker_id` in `broker_name`,
    /// else (for a slave id) the next slave, else — unless `only_this` — any address.
    pub fn find_broker_address_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this: bool,
    ) -> Option<FindBrokerResult> {
        let table = self.broker_addr_table.read();
        let map = table.get(broker_name)?;
        if let Some(a) = map.get(&broker_id) {
            return Some(FindBrokerResult {
                addr: a.clone(),
                slave: broker_id != 0,
            });
        }
        if broker_id != 0 {
            if let Some(a) = map.get(&(broker_id + 1)) {
                return Some(FindBrokerResult {
                    addr: a.clone(),
                    slave: true,
                });
            }
        }
        if only_this {
            return None;
        }
        map.iter().next().map(|(id, a)| FindBrokerResult {
            addr: a.clone(),
            slave: *id != 0,
        })
    }

    /// Client ids of `group`'s consumers, asked from a broker serving `topic` (Java
    /// `findConsumerIdList`).
    pub fn find_consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        let pick = |i: &MQClientInstance| -> Option<String> {
            let route = i.route_table.read().get(topic).cloned()?;
            let n = route.broker_datas.len();
            if n == 0 {
                return None;
            }
            let bd = &route.broker_datas[(crate::util::random_u64() % n as u64) as usize];
            bd.select_addr().map(str::to_string)
        };
        let addr = match pick(self) {
            Some(a) => a,
            None => {
                self.update_topic_route(topic)?;
                pick(self).ok_or_else(|| {
                    Error::new(
                        ErrorKind::NoRoute,
                        format!("no broker serves topic {topic}"),
                    )
                })?
            }
        };
        self.api
            .get_consumer_id_list(&addr, group, self.config.mq_client_api_timeout)
    }

    // --- lookups ----------------------------------------------------------------

    /// The master address of `broker_name` (Java `findBrokerAddressInPublish`).
    pub fn find_broker_address_in_publish(&self, broker_name: &str) -> Option<String> {
        self.broker_addr_table
            .read()
            .get(broker_name)
            .and_then(|m| m.get(&0).cloned())
    }

    /// Broker names and their addresses, as known now.
    pub fn broker_addresses(&self) -> HashMap<String, BTreeMap<i64, String>> {
        self.broker_addr_table.read().clone()
    }

    /// Whether `addr` is in the broker table.
    pub fn knows_broker_addr(&self, addr: &str) -> bool {
        self.broker_addr_table
            .read()
            .values()
            .any(|m| m.values().any(|a| a == addr))
    }

    /// True when a route error means the topic does not exist.
    pub(crate) fn is_topic_not_exist(e: &Error) -> bool {
        e.response_code() == Some(ResponseCode::TOPIC_NOT_EXIST)
    }
}

impl Drop for MQClientInstance {
    /// The last user is gone (its own threads hold only weak references): stop every
    /// thread, bounded, and never joining the current one — the last reference may be
    /// dropped on one of them.
    fn drop(&mut self) {
        *self.state.get_mut() = ServiceState::ShutdownAlready;
        manager::remove(&self.client_id, self);
        self.stop_threads(Instant::now() + self.config.remoting.shutdown_timeout);
        debug!("client instance {} dropped", self.client_id);
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

#[cfg(test)]
mod tests {
    /// The admin requests of [`ConsumerInner`], for test consumers that never get them.
    macro_rules! no_admin_answers {
        () => {
            fn running_info(&self) -> ConsumerRunningInfo {
                ConsumerRunningInfo::default()
            }
            fn offsets_of(&self, _: &str) -> BTreeMap<MessageQueue, i64> {
                BTreeMap::new()
            }
            fn reset_offset(&self, _: &str, _: &HashMap<MessageQueue, i64>) {}
            fn consume_message_directly(
                &self,
                _: MessageExt,
                _: &str,
            ) -> Option<ConsumeMessageDirectlyResult> {
                None
            }
        };
    }

    use super::*;
    use crate::protocol::heartbeat::{ConsumeFromWhere, ConsumeType, MessageModel};
    use crate::protocol::{frame_len, RemotingCommand, DEFAULT_MAX_FRAME};
    use crate::protocol::{BrokerData, QueueData};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::AtomicUsize;
    use std::sync::OnceLock;

    fn unique(prefix: &str) -> String {
        format!(
            "{prefix}-{}-{}",
            std::process::id(),
            crate::util::random_u64()
        )
    }

    /// A name server on loopback that answers every request on one connection with
    /// SUCCESS and `body`.
    fn fake_namesrv(body: Vec<u8>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                while let Ok(Some(n)) = frame_len(&buf, DEFAULT_MAX_FRAME) {
                    if buf.len() < 4 + n {
                        break;
                    }
                    let frame: Vec<u8> = buf.drain(..4 + n).collect();
                    let Ok(req) = RemotingCommand::decode(&frame[4..]) else {
                        return;
                    };
                    let ok = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None)
                        .with_body(body.clone());
                    if s.write_all(&ok.to_frame()).is_err() {
                        return;
                    }
                }
            }
        });
        addr
    }

    /// A producer and consumer that record every call made into them while one of the
    /// instance's locks is held.
    #[derive(Default)]
    struct Probe {
        instance: OnceLock<Weak<MQClientInstance>>,
        published: AtomicUsize,
        held: Mutex<Vec<String>>,
    }

    impl Probe {
        fn check(&self, call: &str) {
            let Some(i) = self.instance.get().and_then(Weak::upgrade) else {
                return;
            };
            let mut held = Vec::new();
            if i.namesrv_lock.try_lock().is_none() {
                held.push("namesrv_lock");
            }
            if i.heartbeat_lock.try_lock().is_none() {
                held.push("heartbeat_lock");
            }
            if i.producers.try_write().is_none() {
                held.push("producers");
            }
            if i.consumers.try_write().is_none() {
                held.push("consumers");
            }
            if i.route_table.try_write().is_none() {
                held.push("route_table");
            }
            if i.broker_addr_table.try_write().is_none() {
                held.push("broker_addr_table");
            }
            if !held.is_empty() {
                self.held.lock().push(format!("{call} under {held:?}"));
            }
        }
    }

    impl ProducerInner for Probe {
        fn publish_topics(&self) -> Vec<String> {
            self.check("publish_topics");
            vec!["T".to_string()]
        }
        fn is_publish_topic_need_update(&self, _: &str) -> bool {
            self.check("is_publish_topic_need_update");
            false
        }
        fn update_topic_publish_info(&self, _: &str, _: Arc<TopicPublishInfo>) {
            self.check("update_topic_publish_info");
            self.published.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl ConsumerInner for Probe {
        no_admin_answers!();
        fn consumer_data(&self) -> ConsumerData {
            self.check("consumer_data");
            ConsumerData {
                group_name: "cg".into(),
                consume_type: ConsumeType::ConsumePassively,
                message_model: MessageModel::Clustering,
                consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                subscription_data_set: Vec::new(),
                unit_mode: false,
            }
        }
        fn update_topic_subscribe_info(&self, _: &str, _: &HashSet<MessageQueue>) -> bool {
            self.check("update_topic_subscribe_info");
            false
        }
        fn is_subscribe_topic_need_update(&self, _: &str) -> bool {
            self.check("is_subscribe_topic_need_update");
            false
        }
        fn persist_consumer_offset(&self) {
            self.check("persist_consumer_offset");
        }
        fn adjust_thread_pool(&self) {
            self.check("adjust_thread_pool");
        }
        fn do_rebalance(&self) {
            self.check("do_rebalance");
        }
    }

    /// A producer that records the transaction checks handed to it.
    #[derive(Default)]
    struct CheckRecorder(Mutex<Vec<(String, MessageExt, CheckTransactionStateRequestHeader)>>);

    impl ProducerInner for CheckRecorder {
        fn publish_topics(&self) -> Vec<String> {
            Vec::new()
        }
        fn is_publish_topic_need_update(&self, _: &str) -> bool {
            false
        }
        fn update_topic_publish_info(&self, _: &str, _: Arc<TopicPublishInfo>) {}
        fn check_transaction_state(
            &self,
            addr: &str,
            msg: MessageExt,
            header: CheckTransactionStateRequestHeader,
        ) {
            self.0.lock().push((addr.to_string(), msg, header));
        }
    }

    #[test]
    fn a_transaction_check_goes_to_the_producer_of_its_group_and_garbage_is_dropped() {
        let config = ClientConfig::builder()
            .namesrv_addr("127.0.0.1:1")
            .namespace("ns")
            .instance_name(unique("tx-check"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        let (a, b) = (
            Arc::new(CheckRecorder::default()),
            Arc::new(CheckRecorder::default()),
        );
        assert!(instance.register_producer("ns%pg_a", a.clone()));
        assert!(instance.register_producer("ns%pg_b", b.clone()));
        let half = |group: &str| {
            let mut m = MessageExt::default();
            m.message.set_topic("ns%Orders");
            m.message.set_body("half");
            m.message.put_property(property::PGROUP, group);
            m.message.put_property(property::UNIQ_KEY, "ID-1");
            m.message.put_property(property::TRAN_MSG, "true");
            crate::message::encode_message_ext(&m).unwrap()
        };
        let check = |body: Vec<u8>, with_offsets: bool| {
            let mut req = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE);
            req.ext_fields.insert("commitLogOffset", "4096");
            if with_offsets {
                req.ext_fields.insert("tranStateTableOffset", "7");
            }
            req.ext_fields.insert("transactionId", "ID-1");
            req.body = body;
            req
        };
        instance.process_check_transaction_state("127.0.0.1:10911", check(half("ns%pg_a"), true));
        // Dropped: a body that is no message, a header without its offsets, a group
        // that has no producer here, no group at all.
        instance.process_check_transaction_state("b", check(b"\x00\x00garbage".to_vec(), true));
        instance.process_check_transaction_state("b", check(half("ns%pg_a"), false));
        instance.process_check_transaction_state("b", check(half("ns%pg_other"), true));
        let mut no_group = MessageExt::default();
        no_group.message.set_topic("T");
        let no_group = crate::message::encode_message_ext(&no_group).unwrap();
        instance.process_check_transaction_state("b", check(no_group, true));

        let got = a.0.lock().clone();
        assert_eq!(got.len(), 1, "{got:?}");
        let (addr, msg, header) = &got[0];
        assert_eq!(addr, "127.0.0.1:10911");
        // The user sees the topic without the namespace, and the id as transaction id.
        assert_eq!(msg.topic(), "Orders");
        assert_eq!(msg.message().transaction_id(), Some("ID-1"));
        assert_eq!(msg.body(), b"half");
        assert_eq!(
            (header.commit_log_offset, header.tran_state_table_offset),
            (4096, 7)
        );
        assert!(b.0.lock().is_empty());
        instance.producers.write().clear();
        instance.shutdown();
    }

    #[test]
    fn no_lock_is_held_while_calling_into_producers_and_consumers() {
        let route = TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "b".into(),
                read_queue_nums: 2,
                write_queue_nums: 2,
                perm: 6,
                ..Default::default()
            }],
            broker_datas: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                // Nothing listens there: heartbeats fail at once.
                broker_addrs: [(0, "127.0.0.1:1".to_string())].into_iter().collect(),
            }],
            ..Default::default()
        };
        let namesrv = fake_namesrv(serde_json::to_vec(&route).unwrap());
        let config = ClientConfig::builder()
            .namesrv_addr(namesrv)
            .instance_name(unique("locks"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        let probe = Arc::new(Probe::default());
        let _ = probe.instance.set(Arc::downgrade(&instance));
        assert!(instance.register_producer("pg", probe.clone()));
        assert!(instance.register_consumer("cg", probe.clone()));

        assert!(instance.update_topic_route("T").unwrap(), "a new route");
        assert_eq!(probe.published.load(Ordering::SeqCst), 1);
        instance.update_topic_route_info_from_name_server();
        instance.send_heartbeat_to_all_brokers_waiting();
        instance.send_heartbeat_to_all_brokers_with_lock();
        instance.persist_all_consumer_offsets();
        instance.adjust_thread_pool();
        instance.do_rebalance();
        let held = probe.held.lock().clone();
        assert!(held.is_empty(), "{held:?}");
        instance.producers.write().clear();
        instance.consumers.write().clear();
        instance.shutdown();
    }

    /// A pull task that runs `f`.
    struct Task<F>(F);

    impl<F: FnOnce() + Send> PullTask for Task<F> {
        fn pull(self: Box<Self>) {
            (self.0)()
        }
    }

    #[test]
    fn the_pull_and_rebalance_services_survive_a_panicking_job() {
        let config = ClientConfig::builder()
            .namesrv_addr(fake_namesrv(b"{}".to_vec()))
            .instance_name(unique("panics"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        instance.execute_pull_request_immediately(Task(|| panic!("a pull task that panics")));
        let t = tx.clone();
        instance.execute_pull_request_immediately(Task(move || t.send("pulled").unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("pulled"));

        /// A consumer whose rebalance panics, or reports on `tx`.
        struct Rebalancing(Option<crossbeam_channel::Sender<&'static str>>);
        impl ConsumerInner for Rebalancing {
            fn consumer_data(&self) -> ConsumerData {
                unreachable!("no heartbeat in this test")
            }
            fn update_topic_subscribe_info(&self, _: &str, _: &HashSet<MessageQueue>) -> bool {
                false
            }
            fn is_subscribe_topic_need_update(&self, _: &str) -> bool {
                false
            }
            fn persist_consumer_offset(&self) {}
            fn adjust_thread_pool(&self) {}
            no_admin_answers!();
            fn do_rebalance(&self) {
                match &self.0 {
                    Some(tx) => tx.send("rebalanced").unwrap(),
                    None => panic!("a rebalance that panics"),
                }
            }
        }
        assert!(instance.register_consumer("a", Arc::new(Rebalancing(None))));
        assert!(instance.register_consumer("b", Arc::new(Rebalancing(Some(tx)))));
        for _ in 0..2 {
            // Each round reaches "b", whatever the order: the thread lives on.
            instance.rebalance_immediately();
            assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("rebalanced"));
        }
        instance.consumers.write().clear();
        instance.shutdown();
    }

    /// A route of one queue on broker "b" at `addrs` (broker id, address).
    #[cfg(feature = "testkit")]
    fn route_of_b(addrs: &[(i64, &str)]) -> TopicRouteData {
        TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "b".into(),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                ..Default::default()
            }],
            broker_datas: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: addrs.iter().map(|(i, a)| (*i, a.to_string())).collect(),
            }],
            ..Default::default()
        }
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_requested_heartbeat_goes_out_on_the_timer_not_on_the_calling_thread() {
        use crate::testkit::fault::{Fault, FaultPeer};
        // A broker that takes 1.5 s to answer anything.
        let broker = FaultPeer::start(Fault::SlowAnswer(Duration::from_millis(1500))).unwrap();
        let route = route_of_b(&[(0, broker.addr())]);
        let config = ClientConfig::builder()
            .namesrv_addr(fake_namesrv(serde_json::to_vec(&route).unwrap()))
            .instance_name(unique("hb_request"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        let probe = Arc::new(Probe::default());
        assert!(instance.register_producer("pg", probe.clone()));
        assert!(instance.update_topic_route("T").unwrap());
        let asked = std::time::Instant::now();
        for _ in 0..100 {
            instance.request_heartbeat();
        }
        // A callback thread asking for a heartbeat is not held for the broker's 1.5 s.
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "{:?}",
            asked.elapsed()
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while broker.accepted() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            broker.accepted(),
            1,
            "the heartbeat went out, on one connection"
        );
        instance.producers.write().clear();
        instance.shutdown();
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_requested_route_is_fetched_on_the_timer_and_its_jobs_run_after_it() {
        use crate::protocol::RequestCode;
        use crate::testkit::fault::{Fault, FaultPeer, Responder};
        // A name server that holds each route request until released (or 20 s).
        let route = serde_json::to_vec(&route_of_b(&[(0, "127.0.0.1:1")])).unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let (release, held) = crossbeam_channel::bounded::<()>(0);
        let counter = asked.clone();
        let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
            if req.request_code() == RequestCode::GET_ROUTEINFO_BY_TOPIC
                && req.ext_fields.get("topic") == Some("T")
            {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = held.recv_timeout(Duration::from_secs(20));
            }
            RemotingCommand::response(ResponseCode::SUCCESS, 0, None).with_body(route.clone())
        })))
        .unwrap();
        let config = ClientConfig::builder()
            .namesrv_addr(namesrv.addr())
            .instance_name(unique("route_request"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        // A producer of "T" keeps the route in use (routes nobody uses are forgotten).
        assert!(instance.register_producer("pg", Arc::new(Probe::default())));
        let (ran_tx, ran) = crossbeam_channel::unbounded();
        let asking = std::time::Instant::now();
        for _ in 0..100 {
            let (tx, i) = (ran_tx.clone(), instance.clone());
            instance.request_route(
                "T",
                Some(Box::new(move || {
                    let thread = std::thread::current().name().unwrap_or("").to_string();
                    let _ = tx.send((thread, i.topic_route("T").is_some()));
                })),
            );
        }
        // The caller (a callback or the pull thread) is not held by the name server.
        let took = asking.elapsed();
        assert!(took < Duration::from_millis(500), "{took:?}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while asked.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ran.try_recv().is_err(), "a job ran before the route came");
        drop(release);
        for _ in 0..100 {
            let (thread, routed) = ran.recv_timeout(Duration::from_secs(10)).unwrap();
            assert!(thread.starts_with("rmq-callback"), "ran on {thread}");
            assert!(routed, "a job ran before the route was stored");
        }
        // One fetch took the requests made before it; one more at most the rest (and the
        // periodic refresh, which may have come due meanwhile, one).
        let fetches = asked.load(Ordering::SeqCst);
        assert!((1..=3).contains(&fetches), "{fetches} route requests");
        instance.producers.write().clear();
        instance.shutdown();
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_new_address_for_a_known_broker_gets_a_heartbeat_at_once() {
        use crate::testkit::fault::{Fault, FaultPeer, Responder};
        let ok = || {
            Fault::Respond(Responder::new(|_| {
                RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
            }))
        };
        let (master, slave) = (
            FaultPeer::start(ok()).unwrap(),
            FaultPeer::start(ok()).unwrap(),
        );
        let route_with = |addrs: &[(i64, &str)]| serde_json::to_vec(&route_of_b(addrs)).unwrap();
        // The name server answers with whatever route `current` holds.
        let current = Arc::new(Mutex::new(route_with(&[(1, slave.addr())])));
        let answer = current.clone();
        let namesrv = FaultPeer::start(Fault::Respond(Responder::new(move |_| {
            RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
                .with_body(answer.lock().clone())
        })))
        .unwrap();
        let config = ClientConfig::builder()
            .namesrv_addr(namesrv.addr())
            .instance_name(unique("new_addr"))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        let probe = Arc::new(Probe::default());
        assert!(instance.register_consumer("cg", probe.clone()));
        // A producer of "T" keeps the route in use (routes nobody uses are forgotten).
        assert!(instance.register_producer("pg", probe.clone()));
        assert!(instance.update_topic_route("T").unwrap());
        // The periodic heartbeat's first round (1 s after start) reaches the slave; the next
        // is 30 s away.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while slave.accepted() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(slave.accepted(), 1, "the first periodic heartbeat");
        // The master comes back (or a slave is promoted): its address is new for "b".
        *current.lock() = route_with(&[(0, master.addr()), (1, slave.addr())]);
        assert!(instance.update_topic_route("T").unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while master.accepted() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Without it the heartbeat waits for the 30 s period, and the broker refuses the
        // group's pulls (SUBSCRIPTION_NOT_EXIST) until then.
        assert_eq!(master.accepted(), 1, "a heartbeat went to the new address");
        instance.consumers.write().clear();
        instance.producers.write().clear();
        instance.shutdown();
    }

    #[test]
    fn start_fetches_name_server_addresses_without_holding_the_state_lock() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/rocketmq/nsaddr", l.local_addr().unwrap());
        let (asked_tx, asked) = crossbeam_channel::bounded(1);
        let (answer, answer_rx) = crossbeam_channel::bounded::<()>(1);
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            asked_tx.send(()).unwrap();
            // Answers only when the test has looked at the lock.
            let _ = answer_rx.recv_timeout(Duration::from_secs(10));
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n127.0.0.1:19876\n");
        });
        let config = ClientConfig::builder()
            .no_namesrv_addr()
            .name_server_address_url(url)
            .instance_name(unique("http"))
            .mq_client_api_timeout(Duration::from_secs(10))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        let starting = instance.clone();
        let starter = std::thread::spawn(move || starting.start());
        asked.recv_timeout(Duration::from_secs(5)).unwrap();
        // The fetch waits for the answer now; the state must be free to read.
        let free = instance
            .state
            .try_lock_for(Duration::from_millis(500))
            .map(|s| *s);
        answer.send(()).unwrap();
        assert_eq!(
            free,
            Some(ServiceState::CreateJust),
            "start holds the state lock across the HTTP fetch"
        );
        starter.join().unwrap().unwrap();
        server.join().unwrap();
        assert_eq!(instance.state(), ServiceState::Running);
        assert_eq!(
            instance.remoting().name_server_address_list(),
            vec!["127.0.0.1:19876".to_string()]
        );
        instance.shutdown();
        assert_eq!(instance.state(), ServiceState::ShutdownAlready);
    }

    #[cfg(feature = "testkit")]
    /// A client instance with producer `pg` whose route of `T` leads to `broker`.
    fn instance_routed_to(broker: &str, name: &str) -> (Arc<MQClientInstance>, Arc<Probe>) {
        let route = route_of_b(&[(0, broker)]);
        let config = ClientConfig::builder()
            .namesrv_addr(fake_namesrv(serde_json::to_vec(&route).unwrap()))
            .instance_name(unique(name))
            .build();
        let instance = MQClientInstance::new(config).unwrap();
        instance.start().unwrap();
        let probe = Arc::new(Probe::default());
        assert!(instance.register_producer("pg", probe.clone()));
        assert!(instance.update_topic_route("T").unwrap());
        (instance, probe)
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_new_connection_to_a_broker_gets_a_heartbeat_at_once() {
        use crate::protocol::RequestCode;
        use crate::testkit::fault::{Fault, FaultPeer, Responder};
        let heartbeats = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = heartbeats.clone();
        let broker = FaultPeer::start(Fault::Respond(Responder::new(move |req| {
            if req.request_code() == RequestCode::HEART_BEAT {
                h.fetch_add(1, Ordering::SeqCst);
            }
            RemotingCommand::response(ResponseCode::SUCCESS, 0, None)
        })))
        .unwrap();
        let (instance, _probe) = instance_routed_to(broker.addr(), "hb_connect");
        let count = || heartbeats.load(Ordering::SeqCst);
        let wait_for_more_than = |n: usize| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while count() <= n && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            count() > n
        };
        // The first periodic heartbeat (1 s after start) opens the connection.
        assert!(wait_for_more_than(0));
        std::thread::sleep(Duration::from_secs(2));
        let before = count();
        // The connection is lost and made again by the next request: a broker forgets a
        // client whose connection closed, so the new one needs a heartbeat now, not at
        // the next periodic one (30 s away).
        instance.remoting().close_connection(broker.addr(), "test");
        let _ = instance.remoting().invoke_sync(
            broker.addr(),
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            Duration::from_secs(3),
        );
        assert!(
            wait_for_more_than(before),
            "no heartbeat on the new connection"
        );
        instance.producers.write().clear();
        instance.shutdown();
    }

    #[cfg(feature = "testkit")]
    #[test]
    fn a_broker_that_closes_every_connection_gets_about_one_heartbeat_a_second() {
        use crate::testkit::fault::{Fault, FaultPeer};
        let broker = FaultPeer::start(Fault::CloseOnRequest).unwrap();
        let (instance, _probe) = instance_routed_to(broker.addr(), "hb_storm");
        instance.request_heartbeat();
        std::thread::sleep(Duration::from_secs(3));
        // Each heartbeat connects, which asks for the next one: spaced, not a storm.
        let connections = broker.accepted();
        assert!(
            (1..=8).contains(&connections),
            "{connections} connections in 3 s"
        );
        instance.producers.write().clear();
        instance.shutdown();
    }
}
