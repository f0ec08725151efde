//! The producer's engine (Java `DefaultMQProducerImpl`): start-up, route lookup, the
//! send loop with retries, and response processing.

mod async_send;
mod auto_batch;
mod batch;
mod producer_inner;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, warn};
use parking_lot::{Mutex, RwLock};

use self::batch::Records;
use super::latency_fault::FaultStrategy;
use super::observe::{Observer, SendMode};
use super::transaction::TransactionEnv;
use super::{ProducerOptions, SendAsyncError, SendResult, SendStatus};
use crate::client::validators::{
    check_body, check_group, check_send_topic, CLIENT_INNER_PRODUCER_GROUP, DEFAULT_PRODUCER_GROUP,
};
use crate::client::{
    manager, namespace, ClientConfig, MQClientInstance, ProducerInner, ServiceState,
    TopicPublishInfo,
};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{self, property, sys_flag, Message, MessageQueue};
use crate::protocol::header::{ExtValue, SendMessageRequestHeaderV2Ref};
use crate::protocol::{
    next_opaque, RemotingCommand, RequestCode, RequestHead, ResponseCode, ONEWAY_FLAG,
};
use crate::remoting::{InvokeCallback, Outgoing, RemotingClient};
use crate::trace::{TraceDispatcher, TraceRecord, TraceType};
use crate::util;
use crate::util::{NameMap, ShortText};

pub(super) type SendCallback = Box<dyn FnOnce(Result<SendResult>) + Send + 'static>;

use crate::client::validators::is_retry_topic;

/// The region of a send whose response names none or an empty one (Java
/// `MixAll.DEFAULT_TRACE_REGION_ID`, `processSendResponse`).
const DEFAULT_REGION: &str = "DefaultRegion";

/// A message made ready for the wire once, reused by every attempt.
struct Prepared<'a> {
    /// The topic as sent (with the namespace).
    topic: Arc<str>,
    /// The topic as the user named it: the same `Arc` as `topic` without a namespace, so
    /// that the result's queue shares it.
    user_topic: Arc<str>,
    body: Cow<'a, [u8]>,
    /// A sync batch's messages, encoded straight into each attempt's frame; `body` is
    /// then empty.
    records: Option<Records<'a>>,
    properties: String,
    sys_flag: i32,
    flag: i32,
    msg_id: SendId,
    batch: bool,
    /// A reply to a request (`SEND_REPLY_MESSAGE_V2`).
    reply: bool,
    reconsume_times: Option<i32>,
    max_reconsume_times: Option<i32>,
    /// When it was prepared (Unix milliseconds), from one clock read: its made id's
    /// time, and its first attempt's born timestamp when the route was cached.
    born_ms: i64,
}

/// When an attempt began, for its budget, latency and trace, and its born timestamp:
/// the first attempt's are the send's own, read once when it began (or after its route
/// lookup: `publish_info_for`).
#[derive(Clone, Copy)]
struct Begun {
    at: Instant,
    born_ms: i64,
}

impl Begun {
    /// The first attempt of a send that began at `begin` (`p` prepared then).
    fn first(p: &Prepared<'_>, begin: Instant) -> Begun {
        Begun {
            at: begin,
            born_ms: p.born_ms,
        }
    }

    /// A re-send, beginning now.
    fn now() -> Begun {
        Begun {
            at: Instant::now(),
            born_ms: util::now_millis(),
        }
    }
}

/// The id a send reports (`UNIQ_KEY`).
enum SendId {
    /// Made for this send and written last into its properties: the id is the property
    /// string's last `len` bytes (no string of its own until the result).
    Tail(usize),
    /// The message's own, or a batch's ids joined by `,`.
    Given(String),
}

impl Prepared<'_> {
    /// The id the send reports.
    fn msg_id(&self) -> &str {
        match &self.msg_id {
            SendId::Tail(len) => {
                let from = self.properties.len().saturating_sub(*len);
                self.properties.get(from..).unwrap_or_default()
            }
            SendId::Given(id) => id,
        }
    }

    fn into_owned(mut self) -> Result<Prepared<'static>> {
        let body = match self.records.take() {
            Some(records) => records.to_vec()?,
            None => std::mem::take(&mut self.body).into_owned(),
        };
        Ok(self.with_body(body))
    }

    /// The body's length as sent.
    fn body_len(&self) -> usize {
        self.records.as_ref().map_or(self.body.len(), |r| r.len)
    }

    /// Whether the body is the message's own (not compressed): then the message can give
    /// it up instead of it being copied.
    fn borrows_body(&self) -> bool {
        matches!(self.body, Cow::Borrowed(_))
    }

    /// The same send with `body` (and no records) as its body.
    fn with_body(self, body: Vec<u8>) -> Prepared<'static> {
        Prepared {
            body: Cow::Owned(body),
            records: None,
            topic: self.topic,
            user_topic: self.user_topic,
            properties: self.properties,
            sys_flag: self.sys_flag,
            flag: self.flag,
            msg_id: self.msg_id,
            batch: self.batch,
            reply: self.reply,
            reconsume_times: self.reconsume_times,
            max_reconsume_times: self.max_reconsume_times,
            born_ms: self.born_ms,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sync,
    Oneway,
}

/// The producer's engine.
///
/// Its locks (`state`, `instance`, `publish_table`) are each taken alone, never nested,
/// and none is held across a send or a call into the client instance.
pub(super) struct ProducerImpl {
    group: String,
    namespace: Option<String>,
    config: ClientConfig,
    options: ProducerOptions,
    state: Mutex<ServiceState>,
    instance: RwLock<Option<Arc<MQClientInstance>>>,
    publish_table: RwLock<NameMap<String, PublishEntry>>,
    fault: FaultStrategy,
    /// The trace of every send, with `enable_msg_trace`.
    trace: RwLock<Option<Arc<TraceDispatcher>>>,
    /// The check pool of a transactional producer.
    transaction: Option<Arc<TransactionEnv>>,
    /// Send counters and send hooks.
    pub(super) observer: Observer,
    /// Request hooks given to the builder, registered on the client instance as soon as
    /// `start` has it, before its first request.
    start_request_hooks: Mutex<Vec<Arc<dyn crate::RequestHook>>>,
    /// The open batches, with `auto_batch`.
    batcher: Option<auto_batch::Accumulator>,
}

/// A topic's publish info and when it was last sent to.
struct PublishEntry {
    info: Arc<TopicPublishInfo>,
    /// Set by sends, cleared by the sweep that records `last_used`: read before it is
    /// written, so concurrent sends to a busy topic do not all write one cache line.
    used: AtomicBool,
    /// Written under the table's write lock by the sweep.
    last_used: Instant,
}

impl PublishEntry {
    fn new(info: Arc<TopicPublishInfo>) -> Self {
        PublishEntry {
            info,
            used: AtomicBool::new(true),
            last_used: Instant::now(),
        }
    }

    fn mark_used(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }
}

impl ProducerImpl {
    pub(super) fn new(
        group: String,
        config: ClientConfig,
        options: ProducerOptions,
    ) -> Result<Arc<Self>> {
        Self::with_transaction(group, config, options, None)
    }

    /// A producer whose broker checks go to `transaction`'s pool.
    pub(super) fn with_transaction(
        group: String,
        mut config: ClientConfig,
        options: ProducerOptions,
        transaction: Option<Arc<TransactionEnv>>,
    ) -> Result<Arc<Self>> {
        check_group(&group)?;
        if group == DEFAULT_PRODUCER_GROUP {
            return Err(Error::invalid_argument(format!(
                "the producer group {DEFAULT_PRODUCER_GROUP} is reserved; choose another"
            )));
        }
        let ns = config.namespace();
        let group = namespace::wrap(ns.as_deref(), &group);
        if group != CLIENT_INNER_PRODUCER_GROUP {
            config.change_instance_name_to_pid();
        }
        let batcher = options
            .auto_batch
            .then(|| auto_batch::Accumulator::new(&options));
        Ok(Arc::new(ProducerImpl {
            batcher,
            group,
            namespace: ns,
            fault: FaultStrategy::new(options.latency_fault_tolerance),
            config,
            options,
            state: Mutex::new(ServiceState::CreateJust),
            instance: RwLock::new(None),
            publish_table: RwLock::new(NameMap::default()),
            trace: RwLock::new(None),
            transaction,
            observer: Observer::default(),
            start_request_hooks: Mutex::new(Vec::new()),
        }))
    }

    pub(super) fn group(&self) -> &str {
        &self.group
    }

    /// The builder's request hooks, for `start` to register.
    pub(super) fn add_start_request_hooks(&self, hooks: Vec<Arc<dyn crate::RequestHook>>) {
        self.start_request_hooks.lock().extend(hooks);
    }

    pub(super) fn options(&self) -> &ProducerOptions {
        &self.options
    }

    pub(super) fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(super) fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub(super) fn client_id(&self) -> String {
        self.config.client_id()
    }

    pub(super) fn start(self: &Arc<Self>) -> Result<()> {
        let mut state = self.state.lock();
        if *state != ServiceState::CreateJust {
            return Err(Error::state(format!(
                "producer {} is {:?}; it can be started once",
                self.group, *state
            )));
        }
        // Marked failed until it runs, so that a second start is refused; the lock is
        // released before the instance starts, which may fetch name-server addresses
        // over HTTP (no lock is held across I/O).
        *state = ServiceState::StartFailed;
        drop(state);
        if let Some(acc) = &self.batcher {
            acc.start(&self.group)?;
        }
        let instance = manager::get_or_create_instance(&self.config)?;
        for hook in std::mem::take(&mut *self.start_request_hooks.lock()) {
            instance.register_request_hook(hook);
        }
        let me: Arc<dyn ProducerInner> = self.clone();
        if !instance.register_producer(&self.group, me) {
            return Err(Error::state(format!(
                "the producer group {} is already registered in client {}; choose another name",
                self.group,
                instance.client_id()
            )));
        }
        // Route refresh (job 2) starts from the auto-create topic's route.
        self.publish_table.write().insert(
            self.options.create_topic_key.clone(),
            PublishEntry::new(Arc::new(TopicPublishInfo::default())),
        );
        if let Err(e) = instance.start() {
            instance.unregister_producer_until(&self.group, None);
            return Err(e);
        }
        *self.instance.write() = Some(instance.clone());
        *self.state.lock() = ServiceState::Running;
        *self.trace.write() = super::start_trace(
            self.options.enable_msg_trace,
            &self.group,
            self.config.clone(),
            self.options.trace_topic.as_deref(),
        );
        instance.send_heartbeat_to_all_brokers_with_lock();
        debug!(
            "producer {} started on client {}",
            self.group,
            instance.client_id()
        );
        Ok(())
    }

    pub(super) fn shutdown(&self) {
        self.shutdown_until(Instant::now() + self.config.remoting.shutdown_timeout);
    }

    /// Shuts down with everything — the trace, the unregistration at each broker and the
    /// client instance's threads — done by `deadline`, so a broker that stops reading
    /// costs the deadline once.
    pub(super) fn shutdown_until(&self, deadline: Instant) {
        if *self.state.lock() == ServiceState::Running {
            // While the producer still runs, so that the batches can be sent.
            self.flush_auto_batches(deadline);
        }
        let mut state = self.state.lock();
        if *state != ServiceState::Running {
            if *state == ServiceState::CreateJust {
                *state = ServiceState::ShutdownAlready;
            }
            return;
        }
        *state = ServiceState::ShutdownAlready;
        drop(state);
        let trace = self.trace.write().take();
        if let Some(t) = trace {
            t.shutdown_until(deadline);
        }
        let instance = self.instance.write().take();
        if let Some(instance) = instance {
            instance.unregister_producer_until(&self.group, Some(deadline));
            instance.shutdown_until(deadline);
        }
        debug!("producer {} shut down", self.group);
    }

    pub(crate) fn client_instance(&self) -> Option<Arc<MQClientInstance>> {
        self.instance.read().clone()
    }

    pub(super) fn instance(&self) -> Result<Arc<MQClientInstance>> {
        if *self.state.lock() != ServiceState::Running {
            return Err(Error::state(format!(
                "producer {} is not running",
                self.group
            )));
        }
        self.instance
            .read()
            .clone()
            .ok_or_else(|| Error::state(format!("producer {} is not running", self.group)))
    }

    // --- preparing messages ------------------------------------------------------

    fn check_message(&self, msg: &Message) -> Result<()> {
        check_send_topic(msg.topic())?;
        self.check_message_content(msg)
    }

    /// What [`check_message`](Self::check_message) checks besides the topic.
    fn check_message_content(&self, msg: &Message) -> Result<()> {
        msg.check_timer(std::time::SystemTime::now)
            .map_err(|e| e.context(format!("message to {}", msg.topic())))?;
        check_body(msg.body().len(), self.options.max_message_size)
            .map_err(|e| e.context(format!("message to {}", msg.topic())))
    }

    /// The topic as sent and as the user named it (no allocation without a namespace).
    fn topics(&self, user: Arc<str>) -> (Arc<str>, Arc<str>) {
        match self.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) => (Arc::from(namespace::wrap(Some(ns), &user)), user),
            None => (user.clone(), user),
        }
    }

    fn prepare<'a>(&self, msg: &'a Message) -> Result<Prepared<'a>> {
        self.prepare_named(msg, util::shared_name(msg.topic()))
    }

    /// [`prepare`](Self::prepare) with the message's topic already shared (`user_topic`
    /// is `msg.topic()`).
    fn prepare_named<'a>(&self, msg: &'a Message, user_topic: Arc<str>) -> Result<Prepared<'a>> {
        self.check_message(msg)?;
        let (topic, user_topic) = self.topics(user_topic);
        let born_ms = util::now_millis();
        let created_id = match msg.property(property::UNIQ_KEY) {
            Some(_) => None,
            None => Some(message::uniq::new_uniq_id(born_ms)),
        };
        let created_id = created_id.as_deref();
        let made_id = created_id.map(|id| (property::UNIQ_KEY, id));
        let (mut reconsume_times, mut max_reconsume_times) = (None, None);
        let retry = is_retry_topic(&topic);
        let plain = self.namespace.is_none() && !retry;
        let properties = if plain {
            // The usual send changes nothing but the id: straight into the string.
            message::properties_to_string(msg.properties().chain(made_id))
        } else {
            // Room for the two the producer may add: no regrowth.
            let mut props: Vec<(&str, &str)> = Vec::with_capacity(msg.properties().len() + 2);
            props.extend(msg.properties());
            props.extend(made_id);
            if let Some(ns) = self.namespace.as_deref() {
                props.retain(|(k, _)| *k != property::INSTANCE_ID);
                props.push((property::INSTANCE_ID, ns));
            }
            if retry {
                // Java moves these two properties into the header for retry-topic sends.
                reconsume_times = take_int(&mut props, property::RECONSUME_TIME);
                max_reconsume_times = take_int(&mut props, property::MAX_RECONSUME_TIMES);
            }
            // Borrowed: the length pass clones the iterator, and a `Vec`'s own iterator
            // clones its elements into a new allocation.
            message::properties_to_string(props.iter().copied())
        };
        let mut flag_bits = 0;
        let body: Cow<'a, [u8]> = if msg.body().len() >= self.options.compress_over {
            let kind = self.options.compress_type;
            flag_bits |= sys_flag::COMPRESSED | kind.flag();
            Cow::Owned(kind.compress(msg.body(), self.options.compress_level))
        } else {
            Cow::Borrowed(msg.body())
        };
        if msg
            .property(property::TRAN_MSG)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            flag_bits |= sys_flag::TRANSACTION_PREPARED;
        }
        let msg_id = match created_id {
            // The usual send wrote its made id last.
            Some(id) if plain => SendId::Tail(id.len()),
            Some(id) => SendId::Given(id.to_string()),
            None => SendId::Given(
                msg.property(property::UNIQ_KEY)
                    .unwrap_or_default()
                    .to_string(),
            ),
        };
        Ok(Prepared {
            user_topic,
            topic,
            body,
            records: None,
            properties,
            sys_flag: flag_bits,
            flag: msg.flag(),
            msg_id,
            batch: false,
            reply: super::request::is_reply(msg),
            reconsume_times,
            max_reconsume_times,
            born_ms,
        })
    }

    // --- routes -----------------------------------------------------------------

    pub(super) fn trace_stats(&self) -> Option<crate::TraceStats> {
        self.trace.read().as_ref().map(|t| t.stats())
    }

    /// The trace dispatcher, while this producer traces.
    pub(super) fn tracer(&self) -> Option<Arc<TraceDispatcher>> {
        if !self.options.enable_msg_trace {
            return None;
        }
        self.trace.read().clone()
    }

    /// Records the trace of an acknowledged send (Java `SendMessageTraceHookImpl`).
    fn trace_send(&self, p: &Prepared<'_>, addr: &str, r: &SendResult, started: Instant) {
        // Every send passes here: untraced producers stop at a field read, not a lock.
        if !self.options.enable_msg_trace {
            return;
        }
        let trace = self.trace.read().clone();
        let Some(trace) = trace else { return };
        let mut msg = Message::new(&*p.user_topic, Vec::new());
        msg.set_properties_wire(&p.properties);
        let mut record = TraceRecord::new(TraceType::Pub, &self.group, &p.user_topic, &msg);
        record.timestamp = crate::util::now_millis() - started.elapsed().as_millis() as i64;
        record.cost_ms = started.elapsed().as_millis() as i64;
        record.body_len = p.body_len();
        record.msg_id = r.msg_id.to_string();
        record.offset_msg_id = r.offset_msg_id.to_string();
        record.store_host = addr.to_string();
        record.success = r.send_status == SendStatus::Ok;
        if p.sys_flag & sys_flag::TRANSACTION_PREPARED != 0 {
            record.msg_type = 1;
        }
        if !r.region_id.is_empty() {
            record.region_id = r.region_id.to_string();
        }
        trace.record(record);
    }

    /// Makes sure the route of `user_topic` is known; true when the instance had no route
    /// for it before (Java `request` then sends a heartbeat, so that the brokers know this
    /// client before a reply comes).
    pub(super) fn ensure_route_and_heartbeat(
        &self,
        instance: &MQClientInstance,
        user_topic: &str,
    ) -> Result<bool> {
        let topic = namespace::wrap(self.namespace.as_deref(), user_topic);
        let known = instance.topic_route(&topic).is_some();
        self.find_publish_info(instance, &topic)?;
        Ok(!known)
    }

    /// [`find_publish_info`](Self::find_publish_info) for the send of `p` begun at
    /// `begin`, and when its first attempt begins: then, when the route was cached (no
    /// clock read), else after the lookup (Java reads the clock before every attempt, so
    /// a lookup that outlasts the timeout ends the send before anything is sent).
    fn publish_info_for(
        &self,
        instance: &MQClientInstance,
        p: &Prepared<'_>,
        begin: Instant,
    ) -> Result<(Arc<TopicPublishInfo>, Begun)> {
        if let Some(info) = self.cached_publish_info(&p.topic) {
            return Ok((info, Begun::first(p, begin)));
        }
        let info = self.find_publish_info(instance, &p.topic)?;
        Ok((info, Begun::now()))
    }

    /// The cached publish info of `topic`, when it has queues.
    fn cached_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        let table = self.publish_table.read();
        let e = table.get(topic)?;
        e.mark_used();
        e.info.ok().then(|| e.info.clone())
    }

    /// Java `tryToFindTopicPublishInfo`: the cached info, else the topic's route, else the
    /// auto-create topic's route (the broker then creates the topic on first send).
    fn find_publish_info(
        &self,
        instance: &MQClientInstance,
        topic: &str,
    ) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.cached_publish_info(topic) {
            return Ok(info);
        }
        self.publish_table
            .write()
            .entry(topic.to_string())
            .or_insert_with(|| PublishEntry::new(Arc::new(TopicPublishInfo::default())));
        let mut cause = None;
        if let Err(e) = instance.update_topic_route(topic) {
            if !MQClientInstance::is_topic_not_exist(&e) {
                cause = Some(e);
            }
        }
        if let Some(e) = self.publish_table.read().get(topic) {
            if e.info.ok() || e.info.have_topic_router_info {
                return Ok(e.info.clone());
            }
        }
        if let Err(e) =
            instance.update_topic_route_from_default(topic, self.options.default_topic_queues)
        {
            if cause.is_none() && !MQClientInstance::is_topic_not_exist(&e) {
                cause = Some(e);
            }
        }
        match self.publish_table.read().get(topic) {
            Some(e) if e.info.ok() => Ok(e.info.clone()),
            _ => Err(match cause {
                // The name server could not be asked: say that, not "no route".
                Some(e) if e.kind().is_transport() => e.context(format!("no route info of topic {topic}")),
                _ => Error::new(
                    ErrorKind::NoRoute,
                    format!(
                        "no route info of topic {topic}: it does not exist and the broker does not auto-create topics"
                    ),
                ),
            }),
        }
    }

    fn broker_addr(
        &self,
        instance: &MQClientInstance,
        topic: &str,
        broker: &str,
    ) -> Result<Arc<str>> {
        if let Some(a) = instance.publish_address(broker) {
            return Ok(self.vip(a));
        }
        let _ = self.find_publish_info(instance, topic);
        instance
            .publish_address(broker)
            .map(|a| self.vip(a))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!("the broker {broker} does not exist"),
                )
            })
    }

    /// Java `MixAll.brokerVIPChannel`: the broker's fast port is `port - 2`.
    fn vip(&self, addr: Arc<str>) -> Arc<str> {
        if !self.config.vip_channel_enabled {
            return addr;
        }
        match addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        {
            Some((host, port)) if port > 2 => Arc::from(format!("{host}:{}", port - 2)),
            _ => addr,
        }
    }

    pub(super) fn fetch_publish_message_queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let instance = self.instance()?;
        let wrapped = namespace::wrap(self.namespace.as_deref(), topic);
        let route = instance
            .api()
            .get_topic_route_info(&wrapped, self.config.mq_client_api_timeout())?;
        Ok(crate::client::to_publish_info(&wrapped, &route)
            .message_queues
            .into_iter()
            .map(|mut mq| {
                mq.topic = namespace::unwrap(self.namespace.as_deref(), &mq.topic).into();
                mq
            })
            .collect())
    }

    // --- sending -----------------------------------------------------------------

    /// The request of one attempt. Unless hooks or ACL signing rewrite requests, the
    /// frame is encoded straight from the borrowed header and the body, with no
    /// `extFields` map and no copy of the body into a command between them.
    fn request(
        &self,
        remoting: &RemotingClient,
        p: &Prepared<'_>,
        mq: &MessageQueue,
        oneway: bool,
        born_ms: i64,
    ) -> Result<Outgoing> {
        let header = SendMessageRequestHeaderV2Ref {
            producer_group: &self.group,
            topic: &p.topic,
            default_topic: &self.options.create_topic_key,
            default_topic_queue_nums: i32::try_from(self.options.default_topic_queues)
                .unwrap_or(i32::MAX),
            queue_id: mq.queue_id,
            sys_flag: p.sys_flag,
            born_timestamp: born_ms,
            flag: p.flag,
            properties: Some(&p.properties),
            reconsume_times: Some(p.reconsume_times.unwrap_or(0)),
            unit_mode: self.config.unit_mode,
            max_reconsume_times: p.max_reconsume_times,
            batch: p.batch,
            broker_name: Some(&mq.broker_name),
        };
        let code = if p.batch {
            RequestCode::SEND_BATCH_MESSAGE
        } else if p.reply {
            RequestCode::SEND_REPLY_MESSAGE_V2
        } else {
            RequestCode::SEND_MESSAGE_V2
        };
        if remoting.rewrites_requests() {
            // The oneway entry marks a command itself; only a frame needs the flag here.
            let body = match &p.records {
                Some(records) => records.to_vec()?,
                None => p.body.to_vec(),
            };
            let cmd = RemotingCommand::request_with_header(code, &header).with_body(body);
            return Ok(Outgoing::Command(cmd));
        }
        let opaque = next_opaque();
        let flag = if oneway { ONEWAY_FLAG } else { 0 };
        let mut frame = remoting.frame_buffer();
        let ty = remoting.serialize_type();
        let head = RequestHead {
            code,
            opaque,
            flag,
            ty,
        };
        match &p.records {
            Some(records) => {
                RemotingCommand::encode_request_from(head, &header, records.len, &mut frame, |b| {
                    records.encode_into(b)
                })?
            }
            None => RemotingCommand::encode_request(
                code, &header, opaque, flag, &p.body, ty, &mut frame,
            ),
        }
        Ok(Outgoing::Frame {
            code,
            opaque,
            frame,
        })
    }

    fn process_response(
        p: &Prepared<'_>,
        mq: &MessageQueue,
        addr: &str,
        resp: RemotingCommand,
    ) -> Result<SendResult> {
        let status = match resp.response_code() {
            ResponseCode::SUCCESS => SendStatus::Ok,
            ResponseCode::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
            ResponseCode::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
            ResponseCode::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
            code => {
                return Err(Error::response(code, resp.remark.as_deref())
                    .with_addr(addr)
                    .context(format!("send to {mq}")))
            }
        };
        // One pass over the fields for the response header (`SendMessageResponseHeader`'s
        // keys) and the two properties Java reads beside it, instead of three.
        let mut fields: [Option<&str>; 6] = [None; 6];
        for (key, value) in resp.ext_fields.iter() {
            let at = match key {
                "msgId" => 0,
                "queueId" => 1,
                "queueOffset" => 2,
                "transactionId" => 3,
                property::MSG_REGION => 4,
                property::TRACE_ON => 5,
                _ => continue,
            };
            fields[at] = Some(value);
        }
        let [offset_msg_id, queue_id, queue_offset, transaction_id, region, trace_on] = fields;
        Ok(SendResult {
            send_status: status,
            msg_id: ShortText::new(p.msg_id()),
            offset_msg_id: ExtValue::from_ext(offset_msg_id, "msgId")?,
            // Shares the topic and broker name: no allocation.
            message_queue: MessageQueue {
                topic: p.user_topic.clone(),
                broker_name: mq.broker_name.clone(),
                queue_id: ExtValue::from_ext(queue_id, "queueId")?,
            },
            queue_offset: ExtValue::from_ext(queue_offset, "queueOffset")?,
            transaction_id: ExtValue::from_ext(transaction_id, "transactionId")?,
            region_id: match region {
                None | Some("" | DEFAULT_REGION) => Cow::Borrowed(DEFAULT_REGION),
                Some(region) => Cow::Owned(region.to_string()),
            },
            trace_on: trace_on != Some("false"),
        })
    }

    pub(super) fn send_sync(&self, msg: &Message, timeout: Duration) -> Result<SendResult> {
        self.observer
            .one(&self.group, SendMode::Sync, msg, |msg, begin| {
                if let Some(r) = self.send_auto_batched(msg, None, timeout) {
                    return r;
                }
                let p = self.prepare(msg)?;
                self.send_default(&p, Mode::Sync, timeout, begin)?
                    .ok_or_else(|| Error::state("sync send returned no result"))
            })
    }

    pub(super) fn send_oneway(&self, msg: &Message) -> Result<()> {
        self.observer
            .one(&self.group, SendMode::Oneway, msg, |msg, begin| {
                let p = self.prepare(msg)?;
                self.send_default(&p, Mode::Oneway, self.options.send_timeout, begin)
                    .map(|_| ())
            })
    }

    /// Java `sendDefaultImpl` for sync and oneway sends.
    fn send_default(
        &self,
        p: &Prepared<'_>,
        mode: Mode,
        timeout: Duration,
        begin: Instant,
    ) -> Result<Option<SendResult>> {
        let instance = self.instance()?;
        let (info, first) = self.publish_info_for(&instance, p, begin)?;
        let attempts = match mode {
            Mode::Sync => 1 + self.options.retries,
            Mode::Oneway => 1,
        };
        let mut last_broker: Option<Arc<str>> = None;
        let mut last_err: Option<Error> = None;
        let mut not_ok: Option<SendResult> = None;
        for attempt in 0..attempts {
            let Some(mq) = self.fault.select(&info, last_broker.as_deref()) else {
                break;
            };
            // The first attempt's clocks were read with the send or after its route
            // lookup; a re-send reads them again, once for the budget, latency and trace.
            let begun = if attempt == 0 { first } else { Begun::now() };
            let started = begun.at;
            let elapsed = started.saturating_duration_since(begin);
            if elapsed >= timeout {
                last_err = Some(
                    Error::timeout(crate::TimeoutPhase::Response, timeout).context("send call"),
                );
                break;
            }
            last_broker = Some(Arc::clone(&mq.broker_name));
            let result = self.send_kernel(&instance, p, &mq, mode, timeout - elapsed, begun);
            let latency = started.elapsed();
            match result {
                Ok(r) => {
                    self.fault.update(&mq.broker_name, latency, false);
                    match r {
                        Some(r)
                            if r.send_status != SendStatus::Ok
                                && self.options.retry_when_not_stored =>
                        {
                            not_ok = Some(r);
                            continue;
                        }
                        other => return Ok(other),
                    }
                }
                Err(e) => {
                    let retry = e.is_retriable();
                    self.fault.update(&mq.broker_name, latency, retry);
                    if !retry {
                        return Err(e);
                    }
                    warn!(
                        "send to {mq} failed, {}: {e}",
                        if mode == Mode::Sync {
                            "retrying"
                        } else {
                            "not retried"
                        }
                    );
                    last_err = Some(e);
                }
            }
        }
        if let Some(r) = not_ok {
            return Ok(Some(r));
        }
        Err(last_err
            .unwrap_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!("no writable queue of topic {}", p.user_topic),
                )
            })
            .context(format!(
                "send to topic {} ({} attempts at most)",
                p.user_topic, attempts
            )))
    }

    /// One attempt to one queue (Java `sendKernelImpl`), `begun` then with `timeout` left.
    fn send_kernel(
        &self,
        instance: &MQClientInstance,
        p: &Prepared<'_>,
        mq: &MessageQueue,
        mode: Mode,
        timeout: Duration,
        begun: Begun,
    ) -> Result<Option<SendResult>> {
        let addr = self.broker_addr(instance, &p.topic, &mq.broker_name)?;
        let remoting = instance.remoting();
        let request = self.request(remoting, p, mq, mode == Mode::Oneway, begun.born_ms)?;
        match mode {
            Mode::Sync => {
                let resp = remoting.invoke_sync_outgoing(&addr, request, begun.at, timeout)?;
                let r = Self::process_response(p, mq, &addr, resp)?;
                self.trace_send(p, &addr, &r, begun.at);
                Ok(Some(r))
            }
            Mode::Oneway => remoting
                .invoke_oneway_outgoing(&addr, request, timeout)
                .map(|_| None),
        }
    }

    /// Sends to `mq` once (Java `sendKernelImpl` via `send(msg, mq)`).
    pub(super) fn send_to_queue(
        &self,
        msg: &Message,
        mq: &MessageQueue,
        timeout: Duration,
    ) -> Result<SendResult> {
        self.observer
            .one(&self.group, SendMode::Sync, msg, |msg, begin| {
                check_queue_topic(msg.topic(), mq)?;
                if let Some(r) = self.send_auto_batched(msg, Some(mq), timeout) {
                    return r;
                }
                let p = self.prepare(msg)?;
                self.send_prepared_to_queue(&p, mq, Mode::Sync, timeout, begin)?
                    .ok_or_else(|| Error::state("sync send returned no result"))
            })
    }

    /// Sends to `mq` once, expecting no answer (Java `sendOneway(msg, mq)`).
    pub(super) fn send_oneway_to_queue(&self, msg: &Message, mq: &MessageQueue) -> Result<()> {
        self.observer
            .one(&self.group, SendMode::Oneway, msg, |msg, begin| {
                check_queue_topic(msg.topic(), mq)?;
                let p = self.prepare(msg)?;
                let timeout = self.options.send_timeout;
                self.send_prepared_to_queue(&p, mq, Mode::Oneway, timeout, begin)
                    .map(|_| ())
            })
    }

    /// One attempt to `mq`, for a send that began at `begin`.
    fn send_prepared_to_queue(
        &self,
        p: &Prepared<'_>,
        mq: &MessageQueue,
        mode: Mode,
        timeout: Duration,
        begin: Instant,
    ) -> Result<Option<SendResult>> {
        let instance = self.instance()?;
        let mut target = mq.clone();
        target.topic = p.topic.clone();
        self.send_kernel(&instance, p, &target, mode, timeout, Begun::first(p, begin))
    }

    /// The queue `select` picks among the topic's queues (topic without namespace).
    pub(super) fn select_queue(
        &self,
        msg: &Message,
        select: impl FnOnce(&[MessageQueue]) -> Option<MessageQueue>,
    ) -> Result<MessageQueue> {
        self.check_message(msg)?;
        let instance = self.instance()?;
        let topic = namespace::wrap(self.namespace.as_deref(), msg.topic());
        let info = self.find_publish_info(&instance, &topic)?;
        let user_queues: Vec<MessageQueue> = info
            .message_queues
            .iter()
            .map(|mq| {
                let mut mq = mq.clone();
                mq.topic = namespace::unwrap(self.namespace.as_deref(), &mq.topic).into();
                mq
            })
            .collect();
        select(&user_queues).ok_or_else(|| Error::invalid_argument("the selector chose no queue"))
    }
}

/// A message for `mq` must be of its topic (both without namespace).
fn check_queue_topic(topic: &str, mq: &MessageQueue) -> Result<()> {
    if mq.topic != topic.into() {
        return Err(Error::invalid_argument(format!(
            "the message topic {topic} differs from the queue's topic {}",
            mq.topic
        )));
    }
    Ok(())
}

fn take_int(props: &mut Vec<(&str, &str)>, key: &str) -> Option<i32> {
    let i = props.iter().position(|(k, _)| *k == key)?;
    props.remove(i).1.trim().parse().ok()
}

#[cfg(all(test, feature = "testkit"))]
mod tests;
