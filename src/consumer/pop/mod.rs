//! POP consumption (RocketMQ 5.x). [`SimpleConsumer`]: the application asks for messages
//! with [`receive`](SimpleConsumer::receive), and each stays invisible to the group for the
//! time it asked; [`ack`](SimpleConsumer::ack) ends it, or it comes back once that time is
//! over; [`change_invisible_duration`](SimpleConsumer::change_invisible_duration) moves the
//! time; [`ack_batch`](SimpleConsumer::ack_batch) acks many with one request per broker,
//! and [`wait_for_messages`](SimpleConsumer::wait_for_messages) waits for messages
//! without taking them. The broker keeps the group's progress: there are no queues, offsets or rebalance
//! on this side, and any number of consumers share a topic (the shape of the Java 5 gRPC
//! `SimpleConsumer`, over the remoting requests the Java 5.3 push consumer's POP mode
//! sends).
//!
//! A 4.x broker has no POP: every call there is an
//! [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) error.

mod consumer_inner;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::info;
use parking_lot::Mutex;

use super::allocate::AllocateAveragely;
use super::rebalance::RebalanceImpl;
use super::subscription::{build_subscription_data, MessageSelector};
use super::{ConsumeFromWhere, ConsumerConfig, MessageModel};
use crate::client::validators::{check_group, check_topic};
use crate::client::{namespace, ClientOptions, ConsumerInner, MQClientInstance, ServiceState};
use crate::client::{PopStatus, MASTER_ID};
use crate::error::{Error, ErrorKind, Result};
use crate::message::MessageExt;
use crate::protocol::pop::{
    AckMessageRequestHeader, BatchAckMessageRequestBody, ChangeInvisibleTimeRequestHeader,
    ExtraInfo, NotificationRequestHeader, PopMessageRequestHeader,
};

/// Most messages one `receive` asks for (the broker refuses more than 32).
pub const MAX_RECEIVE: usize = 32;
/// Shortest invisible duration (Java 5.3 push consumer `MIN_POP_INVISIBLE_TIME`, 5 s).
pub const MIN_INVISIBLE_DURATION: Duration = Duration::from_secs(5);
/// Longest invisible duration accepted here: 12 h (a check point lives in the broker's
/// timer until then).
pub const MAX_INVISIBLE_DURATION: Duration = Duration::from_secs(12 * 3600);

/// Longest `await_duration`: a receive's deadline is this plus the API timeout.
pub const MAX_AWAIT_DURATION: Duration = Duration::from_secs(3600);

/// Builder for [`SimpleConsumer`].
#[derive(Debug)]
pub struct SimpleConsumerBuilder {
    group: String,
    client: ClientOptions,
    subscriptions: Vec<(String, MessageSelector)>,
    await_duration: Duration,
    consume_from_where: ConsumeFromWhere,
}

impl SimpleConsumerBuilder {
    /// What every client shares: name servers, instance name, namespace, credentials, TLS,
    /// timeouts (default [`ClientOptions::new`]).
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.client = options;
        self
    }

    /// Subscribes `topic` with a tag expression (`"*"`, `"a || b"`).
    pub fn subscribe(
        mut self,
        topic: impl Into<String>,
        tag_expression: impl Into<String>,
    ) -> Self {
        self.subscriptions
            .push((topic.into(), MessageSelector::by_tag(tag_expression)));
        self
    }

    /// [`subscribe`](Self::subscribe) with a tag or SQL92 selector.
    pub fn subscribe_with(mut self, topic: impl Into<String>, selector: MessageSelector) -> Self {
        self.subscriptions.push((topic.into(), selector));
        self
    }

    /// How long a `receive` waits at the broker when nothing is there (default 5 s, at
    /// most an hour; the Java gRPC client's `awaitDuration`). Zero answers at once.
    pub fn await_duration(mut self, d: Duration) -> Self {
        self.await_duration = d;
        self
    }

    /// Where a group the broker has no progress for starts: the first stored message
    /// ([`ConsumeFromWhere::FirstOffset`]) or, for every other value, the
    /// last (default, as Java's `ConsumeInitMode`).
    pub fn consume_from_where(mut self, w: ConsumeFromWhere) -> Self {
        self.consume_from_where = w;
        self
    }

    /// Checks the configuration, registers with the shared client instance (starting it
    /// if it is new) and returns the running consumer.
    pub fn start(self) -> Result<SimpleConsumer> {
        check_group(&self.group)?;
        if self.subscriptions.is_empty() {
            return Err(Error::invalid_argument(
                "a simple consumer needs at least one subscription",
            ));
        }
        if self.await_duration > MAX_AWAIT_DURATION {
            return Err(Error::invalid_argument(format!(
                "await_duration of {:?} is over {MAX_AWAIT_DURATION:?}",
                self.await_duration
            )));
        }
        // At most an hour in ms: fits.
        let await_ms = self.await_duration.as_millis() as i64;
        let cc = ConsumerConfig::new(
            self.client,
            &self.group,
            MessageModel::Clustering,
            std::path::Path::new(""),
        )?;
        let mut subs = Vec::new();
        for (topic, selector) in &self.subscriptions {
            check_topic(topic)?;
            let wrapped = cc.wrap(topic);
            subs.push((
                wrapped.clone(),
                build_subscription_data(&wrapped, selector)?,
            ));
        }
        let instance = crate::client::manager::get_or_create_instance(&cc.config)?;
        // Only its subscription table and the routes' readable queues are used: the
        // broker assigns POP messages, there is no rebalance here.
        let rebalance = RebalanceImpl::new(
            &cc.group,
            MessageModel::Clustering,
            Box::new(AllocateAveragely),
            instance.clone(),
        );
        rebalance.subscriptions.write().extend(subs);
        let inner = Arc::new(SimpleImpl {
            group: cc.group,
            namespace: cc.namespace,
            instance: instance.clone(),
            rebalance,
            await_ms,
            init_mode: match self.consume_from_where {
                ConsumeFromWhere::FirstOffset => 0,
                _ => 1,
            },
            consume_from_where: self.consume_from_where,
            next: AtomicUsize::new(0),
            state: Mutex::new(ServiceState::Running),
        });
        let me: Arc<dyn ConsumerInner> = inner.clone();
        if !instance.register_consumer(&inner.group, me) {
            return Err(Error::state(format!(
                "the consumer group {} is already registered in client {}",
                inner.group,
                instance.client_id()
            )));
        }
        if let Err(e) = instance.start() {
            instance.unregister_consumer(&inner.group);
            return Err(e);
        }
        for t in inner.rebalance.subscribed_topics() {
            if let Err(e) = instance.update_topic_route(&t) {
                log::warn!("{}: route of {t}: {e}", inner.group);
            }
        }
        instance.send_heartbeat_to_all_brokers_with_lock();
        info!(
            "simple consumer {} started on client {}",
            inner.group,
            instance.client_id()
        );
        Ok(SimpleConsumer { inner })
    }
}

/// A message [`SimpleConsumer::receive`] returned, with the receipt that acks it.
pub struct ReceivedMessage {
    message: MessageExt,
    receipt: ExtraInfo,
    /// The topic with namespace, as the broker knows it.
    topic: String,
}

impl std::fmt::Debug for ReceivedMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedMessage")
            .field("message", &self.message)
            .field("receipt_handle", &self.receipt.encode())
            .finish()
    }
}

impl ReceivedMessage {
    /// The message.
    pub fn message(&self) -> &MessageExt {
        &self.message
    }

    /// The message, without its receipt (it can no longer be acked).
    pub fn into_message(self) -> MessageExt {
        self.message
    }

    /// The receipt as the broker's text (Java `POP_CK`, the gRPC client's receipt
    /// handle); it changes with every [`SimpleConsumer::change_invisible_duration`].
    #[doc(alias = "POP_CK")]
    pub fn receipt_handle(&self) -> String {
        self.receipt.encode()
    }

    /// When the message becomes visible to the group again unless acked.
    pub fn next_visible_time(&self) -> SystemTime {
        let ms = self
            .receipt
            .pop_time
            .saturating_add(self.receipt.invisible_time);
        UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

/// A POP consumer the application receives from (the Java 5 gRPC client's
/// `SimpleConsumer`, over remoting). Dropping it shuts it down.
pub struct SimpleConsumer {
    inner: Arc<SimpleImpl>,
}

impl std::fmt::Debug for SimpleConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleConsumer")
            .field("group", &self.inner.group)
            .field("client_id", &self.inner.instance.client_id())
            .finish_non_exhaustive()
    }
}

struct SimpleImpl {
    group: String,
    namespace: Option<String>,
    instance: Arc<MQClientInstance>,
    rebalance: RebalanceImpl,
    await_ms: i64,
    /// Java `ConsumeInitMode`: 0 from the first message, 1 from the last.
    init_mode: i32,
    consume_from_where: ConsumeFromWhere,
    /// Round robin over (topic, broker) pairs.
    next: AtomicUsize,
    state: Mutex<ServiceState>,
}

fn millis(d: Duration, what: &str) -> Result<i64> {
    if !(MIN_INVISIBLE_DURATION..=MAX_INVISIBLE_DURATION).contains(&d) {
        return Err(Error::invalid_argument(format!(
            "{what} of {d:?} is outside {MIN_INVISIBLE_DURATION:?}..={MAX_INVISIBLE_DURATION:?}"
        )));
    }
    // At most 12 h in ms: fits.
    Ok(d.as_millis() as i64)
}

impl SimpleConsumer {
    /// A builder for a consumer of `group`.
    pub fn builder(group: impl Into<String>) -> SimpleConsumerBuilder {
        SimpleConsumerBuilder {
            group: group.into(),
            client: ClientOptions::new(),
            subscriptions: Vec::new(),
            await_duration: Duration::from_secs(5),
            consume_from_where: ConsumeFromWhere::default(),
        }
    }

    /// The consumer group (with namespace).
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// Up to `max` (1..=32) messages of one subscribed topic from one broker, taken in
    /// turn, each invisible to the group for `invisible_duration` (5 s..=12 h). Waits up
    /// to the builder's `await_duration` at the broker when nothing is there, then
    /// returns an empty list. On a 4.x broker: an [`ErrorKind::Unsupported`] error.
    pub fn receive(
        &self,
        max: usize,
        invisible_duration: Duration,
    ) -> Result<Vec<ReceivedMessage>> {
        let inner = &self.inner;
        inner.check_running()?;
        if !(1..=MAX_RECEIVE).contains(&max) {
            return Err(Error::invalid_argument(format!(
                "receive: max of {max} is outside 1..={MAX_RECEIVE}"
            )));
        }
        let invisible = millis(invisible_duration, "receive: invisible duration")?;
        let (topic, broker) = inner.next_target()?;
        let addr = inner.broker_addr(&broker, &topic)?;
        let sub = inner
            .rebalance
            .subscriptions
            .read()
            .get(&topic)
            .cloned()
            .ok_or_else(|| Error::state(format!("{topic} is not subscribed")))?;
        let header = PopMessageRequestHeader {
            consumer_group: inner.group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_msg_nums: max as i32,
            invisible_time: invisible,
            poll_time: inner.await_ms,
            born_time: crate::util::now_millis(),
            init_mode: inner.init_mode,
            exp_type: Some(sub.expression_type.clone()),
            exp: Some(sub.sub_string.clone()),
            order: Some(false),
            attempt_id: None,
            broker_name: Some(broker.clone()),
        };
        let timeout = Duration::from_millis(inner.await_ms.unsigned_abs())
            + inner.instance.config().mq_client_api_timeout();
        let result = inner
            .instance
            .api()
            .pop_message(&addr, &broker, &header, timeout)
            .map_err(|e| e.context(format!("receive from {topic}")))?;
        if result.status == PopStatus::PollingFull {
            log::debug!("{}: {broker} has too many pops waiting", inner.group);
        }
        let plain = namespace::unwrap(inner.namespace.as_deref(), &topic);
        Ok(result
            .messages
            .into_iter()
            .map(|(mut message, receipt)| {
                message.message.set_topic(plain.as_str());
                ReceivedMessage {
                    message,
                    receipt,
                    topic: topic.clone(),
                }
            })
            .collect())
    }

    /// Ends the message's invisibility for good: the group never gets it again. After
    /// its invisible time has passed (it may be with another consumer then) the broker
    /// may refuse, a [`Response`](ErrorKind::Response) error.
    pub fn ack(&self, msg: &ReceivedMessage) -> Result<()> {
        self.inner.check_running()?;
        self.inner.ack_one(msg)
    }

    /// [`ack`](Self::ack) of every message of `msgs`, with one BATCH_ACK_MESSAGE request
    /// per broker and topic (Java `MQClientAPIImpl.batchAckMessageAsync`, what the 5.x
    /// proxy sends with `enableBatchAck`). A broker before 5.1.1 refuses that request:
    /// the messages are then acked one by one. Every group is tried; the first error
    /// comes back. The broker does not say which entries it skipped (past their
    /// invisible time): those come back to the group as unacked ones do.
    #[doc(alias = "batchAckMessage")]
    pub fn ack_batch<'a, I>(&self, msgs: I) -> Result<()>
    where
        I: IntoIterator<Item = &'a ReceivedMessage>,
    {
        let inner = &self.inner;
        inner.check_running()?;
        let mut groups: Vec<((&str, &str), Vec<&ReceivedMessage>)> = Vec::new();
        for m in msgs {
            let key = (m.receipt.broker_name.as_str(), m.topic.as_str());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(m),
                None => groups.push((key, vec![m])),
            }
        }
        let mut first_error = None;
        for ((broker, topic), group) in groups {
            if let Err(e) = inner.ack_group(broker, topic, &group) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Waits up to `timeout` (at most an hour) until one of the subscribed topics has a
    /// message the group could [`receive`](Self::receive), without taking it: true then,
    /// false when the time passed with none (Java `MQClientAPIExt.notification`, the
    /// NOTIFICATION long polling of the 5.x proxy; asked of every broker of every topic at
    /// once). Another consumer of the group may take the message first. Zero asks without
    /// waiting. On a 4.x broker: an [`ErrorKind::Unsupported`] error.
    #[doc(alias = "notification")]
    pub fn wait_for_messages(&self, timeout: Duration) -> Result<bool> {
        let inner = &self.inner;
        inner.check_running()?;
        if timeout > MAX_AWAIT_DURATION {
            return Err(Error::invalid_argument(format!(
                "wait_for_messages: timeout of {timeout:?} is over {MAX_AWAIT_DURATION:?}"
            )));
        }
        let targets = inner.targets()?;
        // At most an hour in ms: fits.
        let poll_ms = timeout.as_millis() as i64;
        let deadline =
            std::time::Instant::now() + timeout + inner.instance.config().mq_client_api_timeout();
        let (tx, rx) = crossbeam_channel::bounded(targets.len());
        let mut asked = 0;
        let mut first_error = None;
        for (topic, broker) in &targets {
            let addr = match inner.broker_addr(broker, topic) {
                Ok(a) => a,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            let header = NotificationRequestHeader {
                consumer_group: inner.group.clone(),
                topic: topic.clone(),
                queue_id: -1,
                poll_time: poll_ms,
                born_time: crate::util::now_millis(),
                order: Some(false),
                attempt_id: None,
                broker_name: Some(broker.clone()),
            };
            let tx = tx.clone();
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let sent = inner
                .instance
                .api()
                .notification_async(&addr, &header, left, move |r| {
                    // Room for every answer: never blocks the callback pool.
                    let _ = tx.try_send(r);
                });
            match sent {
                Ok(()) => asked += 1,
                Err((e, _)) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let mut answered_false = false;
        for _ in 0..asked {
            match rx.recv_deadline(deadline) {
                Ok(Ok(r)) if r.has_msg => return Ok(true),
                Ok(Ok(_)) => answered_false = true,
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => break,
            }
        }
        match first_error {
            Some(e) if !answered_false => {
                Err(e.context(format!("wait for messages of group {}", inner.group)))
            }
            _ => Ok(false),
        }
    }

    /// Makes the message visible again `invisible_duration` (5 s..=12 h) from now,
    /// longer or shorter than before, and gives `msg` its new receipt: the old one no
    /// longer acks it.
    pub fn change_invisible_duration(
        &self,
        msg: &mut ReceivedMessage,
        invisible_duration: Duration,
    ) -> Result<()> {
        let inner = &self.inner;
        inner.check_running()?;
        let invisible = millis(invisible_duration, "change_invisible_duration")?;
        let r = &msg.receipt;
        let header = ChangeInvisibleTimeRequestHeader {
            consumer_group: inner.group.clone(),
            topic: r.real_topic(&msg.topic, &inner.group),
            queue_id: r.queue_id,
            extra_info: r.encode(),
            offset: r.queue_offset,
            invisible_time: invisible,
            broker_name: Some(r.broker_name.clone()),
        };
        let addr = inner.broker_addr(&r.broker_name, &msg.topic)?;
        let receipt = inner
            .instance
            .api()
            .change_invisible_time(
                &addr,
                &r.broker_name,
                &header,
                inner.instance.config().mq_client_api_timeout(),
            )
            .map_err(|e| {
                e.context(format!(
                    "change invisible duration of {}",
                    msg.message.msg_id()
                ))
            })?;
        msg.receipt = receipt;
        Ok(())
    }

    /// Unregisters and stops the client instance if nothing else uses it. Idempotent.
    pub fn shutdown(&self) {
        let inner = &self.inner;
        {
            let mut st = inner.state.lock();
            if *st != ServiceState::Running {
                return;
            }
            *st = ServiceState::ShutdownAlready;
        }
        let deadline =
            std::time::Instant::now() + inner.instance.config().remoting.shutdown_timeout;
        inner
            .instance
            .unregister_consumer_until(&inner.group, Some(deadline));
        inner.instance.shutdown_until(deadline);
        info!("simple consumer {} shut down", inner.group);
    }
}

impl Drop for SimpleConsumer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl SimpleImpl {
    /// ACK_MESSAGE of one received message.
    fn ack_one(&self, msg: &ReceivedMessage) -> Result<()> {
        let r = &msg.receipt;
        let header = AckMessageRequestHeader {
            consumer_group: self.group.clone(),
            topic: r.real_topic(&msg.topic, &self.group),
            queue_id: r.queue_id,
            extra_info: r.encode(),
            offset: r.queue_offset,
            broker_name: Some(r.broker_name.clone()),
        };
        let addr = self.broker_addr(&r.broker_name, &msg.topic)?;
        self.instance
            .api()
            .ack_message(
                &addr,
                &header,
                self.instance.config().mq_client_api_timeout(),
            )
            .map_err(|e| e.context(format!("ack of {}", msg.message.msg_id())))
    }

    /// One BATCH_ACK_MESSAGE of `msgs` (all of `broker` and `topic`), or single acks where
    /// the broker does not know that request or a receipt does not fit in one.
    fn ack_group(&self, broker: &str, topic: &str, msgs: &[&ReceivedMessage]) -> Result<()> {
        let receipts: Vec<ExtraInfo> = msgs.iter().map(|m| m.receipt.clone()).collect();
        let (body, alone) = BatchAckMessageRequestBody::new(&self.group, topic, &receipts);
        let mut singles: Vec<&ReceivedMessage> = msgs
            .iter()
            .zip(&receipts)
            .filter(|(_, r)| alone.iter().any(|a| std::ptr::eq(*a, *r)))
            .map(|(m, _)| *m)
            .collect();
        let mut first_error = None;
        if !body.acks.is_empty() {
            let addr = self.broker_addr(broker, topic)?;
            let timeout = self.instance.config().mq_client_api_timeout();
            match self.instance.api().batch_ack_message(&addr, &body, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Unsupported => {
                    log::debug!("{}: {broker} has no batch ack: {e}", self.group);
                    singles = msgs.to_vec();
                }
                Err(e) => {
                    first_error = Some(e.context(format!(
                        "batch ack of {} messages of {topic} at {broker}",
                        msgs.len()
                    )));
                }
            }
        }
        for m in singles {
            if let Err(e) = self.ack_one(m) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn check_running(&self) -> Result<()> {
        if *self.state.lock() == ServiceState::Running {
            Ok(())
        } else {
            Err(Error::state(format!(
                "the simple consumer {} is shut down",
                self.group
            )))
        }
    }

    /// The next (topic, broker) with readable queues, in turn; a topic without a route
    /// yet gets one first.
    fn next_target(&self) -> Result<(String, String)> {
        let mut targets = self.targets()?;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % targets.len();
        Ok(targets.swap_remove(i))
    }

    /// Every (topic, broker) with readable queues, at least one; a topic without a
    /// route yet gets one first.
    fn targets(&self) -> Result<Vec<(String, String)>> {
        let mut targets: Vec<(String, String)> = Vec::new();
        for topic in self.rebalance.subscribed_topics() {
            if self.rebalance.is_subscribe_topic_need_update(&topic) {
                if let Err(e) = self.instance.update_topic_route(&topic) {
                    log::debug!("{}: route of {topic}: {e}", self.group);
                }
            }
            let brokers: BTreeSet<String> = self
                .rebalance
                .topic_subscribe_info
                .read()
                .get(&topic)
                .map(|qs| qs.iter().map(|q| q.broker_name.to_string()).collect())
                .unwrap_or_default();
            targets.extend(brokers.into_iter().map(|b| (topic.clone(), b)));
        }
        if targets.is_empty() {
            return Err(Error::new(
                ErrorKind::NoRoute,
                format!(
                    "no readable queue of {:?} is known",
                    self.rebalance.subscribed_topics()
                ),
            ));
        }
        Ok(targets)
    }

    /// The master address of `broker`, refreshing `topic`'s route once if unknown.
    fn broker_addr(&self, broker: &str, topic: &str) -> Result<String> {
        if let Some(r) = self
            .instance
            .find_broker_address_in_subscribe(broker, MASTER_ID, true)
        {
            return Ok(r.addr);
        }
        let _ = self.instance.update_topic_route(topic);
        self.instance
            .find_broker_address_in_subscribe(broker, MASTER_ID, true)
            .map(|r| r.addr)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!("the address of broker {broker} is not known"),
                )
            })
    }
}
