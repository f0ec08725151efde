//! The transactional producer (Java `TransactionMQProducer` and the transaction half of
//! `DefaultMQProducerImpl`): half messages, the local transaction, END_TRANSACTION, and
//! the check pool that answers the brokers' CHECK_TRANSACTION_STATE.
//!
//! ```no_run
//! use rocketmq_blocking::{LocalTransactionState, Message, TransactionProducer};
//!
//! let execute = |_msg: &Message, _arg: &dyn std::any::Any| LocalTransactionState::CommitMessage;
//! let check = |_msg: &rocketmq_blocking::MessageExt| LocalTransactionState::CommitMessage;
//! let producer = TransactionProducer::builder("tx_group", (execute, check))
//!     .client_options(rocketmq_blocking::ClientOptions::new().namesrv_addr("127.0.0.1:9876"))
//!     .start()?;
//! let r = producer.send_in_transaction(&Message::new("TopicTest", "order 1"), &())?;
//! println!("{} {:?}", r.send_result().msg_id(), r.local_transaction_state());
//! # Ok::<(), rocketmq_blocking::Error>(())
//! ```
//!
//! A transaction goes as in Java: the message is sent as a half message (the prepared
//! flag, `TRAN_MSG` and `PGROUP`), which consumers do not see; the local transaction runs
//! on the caller's thread; its outcome goes to the broker that stored the half message
//! as a oneway END_TRANSACTION. A commit makes the message visible, a rollback discards
//! it, and "unknown" leaves it to the broker, which asks a producer of the group later
//! (every `transactionCheckInterval`, once the half message is `transactionTimeOut` old,
//! at most `transactionCheckMax` times). Those checks arrive on the client instance's
//! processor pool, which only queues them here: the checker runs on this producer's own
//! bounded pool (`rmq-tx-check-N`), and a check that finds the pool full is dropped and
//! counted, as Java's executor rejects it; the broker asks again.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::{Producer, ProducerBuilder, ProducerOptions, SendResult, SendStatus};
use crate::client::{namespace, ClientOptions, MQClientInstance};
use crate::error::{Error, ErrorKind, Result};
use crate::message::{self, property, sys_flag, Message, MessageExt};
use crate::protocol::transaction::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
};
use crate::protocol::{RemotingCommand, RequestCode};
use crate::remoting::ThreadPool;
use crate::trace::{TraceDispatcher, TraceRecord};

/// How a local transaction ended, as the application reports it (Java
/// `LocalTransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// Commit: the message becomes visible to consumers.
    #[doc(alias = "COMMIT_MESSAGE")]
    CommitMessage,
    /// Roll back: the message is discarded.
    #[doc(alias = "ROLLBACK_MESSAGE")]
    RollbackMessage,
    /// Not known yet: the broker asks again later (Java `UNKNOW`).
    #[doc(alias = "UNKNOW")]
    Unknown,
}

impl LocalTransactionState {
    /// The Java name (`LocalTransactionState.name()`), as trace records carry it.
    fn java_name(self) -> &'static str {
        match self {
            LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
            LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
            LocalTransactionState::Unknown => "UNKNOW",
        }
    }

    /// The `commitOrRollback` value of END_TRANSACTION (Java `MessageSysFlag`).
    fn wire(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => sys_flag::TRANSACTION_COMMIT,
            LocalTransactionState::RollbackMessage => sys_flag::TRANSACTION_ROLLBACK,
            LocalTransactionState::Unknown => sys_flag::TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application's side of a transaction (Java `TransactionListener`).
///
/// A pair of closures `(execute, check)` is a listener:
/// `Fn(&Message, &dyn Any) -> LocalTransactionState` and
/// `Fn(&MessageExt) -> LocalTransactionState`.
///
/// A panic in either is caught: the transaction's state is then
/// [`Unknown`](LocalTransactionState::Unknown), as Java treats an exception, and the
/// broker asks again.
pub trait TransactionListener: Send + Sync + 'static {
    /// Runs the local transaction of the half message `msg` just stored, on the thread
    /// of [`TransactionProducer::send_in_transaction`]; `arg` is that call's argument
    /// (Java's `Object arg`: downcast it). `msg` carries its id (`UNIQ_KEY`) and
    /// [`transaction_id`](Message::transaction_id).
    fn execute_local_transaction(&self, msg: &Message, arg: &dyn Any) -> LocalTransactionState;

    /// Tells a broker how the transaction of `msg` ended, when it asks (the local
    /// transaction said unknown, or its answer was lost). Runs on the check pool.
    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

impl<E, C> TransactionListener for (E, C)
where
    E: Fn(&Message, &dyn Any) -> LocalTransactionState + Send + Sync + 'static,
    C: Fn(&MessageExt) -> LocalTransactionState + Send + Sync + 'static,
{
    fn execute_local_transaction(&self, msg: &Message, arg: &dyn Any) -> LocalTransactionState {
        (self.0)(msg, arg)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        (self.1)(msg)
    }
}

/// What [`TransactionProducer::send_in_transaction`] did (Java `TransactionSendResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSendResult {
    send_result: SendResult,
    local_transaction_state: LocalTransactionState,
}

impl TransactionSendResult {
    /// The half message's send result.
    pub fn send_result(&self) -> &SendResult {
        &self.send_result
    }

    /// What was sent to the broker: the local transaction's outcome, `RollbackMessage`
    /// when the half message was stored with a status other than OK, `Unknown` when the
    /// local transaction panicked.
    pub fn local_transaction_state(&self) -> LocalTransactionState {
        self.local_transaction_state
    }

    /// The send result alone.
    pub fn into_send_result(self) -> SendResult {
        self.send_result
    }
}

/// The check pool and its settings; shared by the producer facade and its engine, which
/// the client instance calls with each check.
pub(super) struct TransactionEnv {
    listener: Arc<dyn TransactionListener>,
    min_threads: usize,
    max_threads: usize,
    hold_max: usize,
    /// Set from start to shutdown.
    pool: Mutex<Option<Arc<ThreadPool>>>,
    /// Checks dropped because the pool was full (or shut down).
    dropped: AtomicU64,
    /// Checks queued on the pool.
    accepted: AtomicU64,
}

impl TransactionEnv {
    fn start(&self) -> Result<()> {
        let pool = ThreadPool::new("rmq-tx-check", self.min_threads).map_err(|e| {
            Error::new(
                ErrorKind::State,
                format!("cannot start the transaction check pool: {e}"),
            )
        })?;
        *self.pool.lock() = Some(Arc::new(pool));
        Ok(())
    }

    fn shutdown(&self, deadline: Instant) {
        let pool = self.pool.lock().take();
        if let Some(pool) = pool {
            pool.shutdown_until(deadline);
        }
    }

    /// Queues a broker's check (Java `DefaultMQProducerImpl.checkTransactionState`, its
    /// executor's `submit`). Never blocks: a full pool drops the check.
    pub(super) fn submit(
        &self,
        instance: Arc<MQClientInstance>,
        group: String,
        trace: Option<CheckTrace>,
        addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        let Some(pool) = self.pool.lock().clone() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let check = Check {
            listener: self.listener.clone(),
            instance,
            group,
            trace,
            addr: addr.to_string(),
            msg,
            header,
        };
        // Java's executor adds a thread beyond its core size only when the queue is
        // full, with the check as its first task, and rejects past its maximum: the
        // queue never holds more than its bound.
        let mut job = move || check.run();
        if pool.waiting() >= self.hold_max {
            match pool.grow_with(self.max_threads, job) {
                Ok(()) => {
                    self.accepted.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(back) => job = back,
            }
        }
        match pool.try_execute(self.hold_max, job) {
            Ok(()) => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    warn!(
                        "a transaction check from {addr} was dropped ({why:?}: {} checks wait already); {n} dropped so far",
                        pool.waiting()
                    );
                }
            }
        }
    }

    fn queued(&self) -> usize {
        self.pool.lock().as_ref().map_or(0, |p| p.waiting())
    }
}

/// The time an END_TRANSACTION answering a check may wait to be written (Java 3 s).
const CHECK_ANSWER_TIMEOUT: Duration = Duration::from_millis(3000);

/// Where a check's answer is traced: the producer's trace and namespace (the record
/// names the topic without it).
pub(super) struct CheckTrace {
    pub(super) dispatcher: Arc<TraceDispatcher>,
    pub(super) namespace: Option<String>,
}

/// One broker check, run on the check pool.
struct Check {
    listener: Arc<dyn TransactionListener>,
    instance: Arc<MQClientInstance>,
    group: String,
    /// The producer's trace while it traces: the answer is recorded (EndTransaction).
    trace: Option<CheckTrace>,
    addr: String,
    msg: MessageExt,
    header: CheckTransactionStateRequestHeader,
}

impl Check {
    /// Java `checkTransactionState`'s task: ask the checker (a panic is `Unknown`, with
    /// the panic in the remark), then answer the broker that asked.
    fn run(self) {
        let (state, remark) = match caught(|| self.listener.check_local_transaction(&self.msg)) {
            Ok(state) => (state, None),
            Err(why) => {
                warn!(
                        "the transaction checker of group {} panicked on message {}: {why}; answering unknown",
                        self.group,
                        self.msg.msg_id()
                    );
                (
                    LocalTransactionState::Unknown,
                    Some(format!("checkLocalTransactionState Exception: {why}")),
                )
            }
        };
        let h = &self.header;
        // Java answers with the message's UNIQ_KEY, else its broker-side id.
        let msg_id = self
            .msg
            .property(property::UNIQ_KEY)
            .unwrap_or(self.msg.msg_id())
            .to_string();
        let header = EndTransactionRequestHeader {
            topic: h.topic.clone(),
            producer_group: self.group.clone(),
            tran_state_table_offset: h.tran_state_table_offset,
            commit_log_offset: h.commit_log_offset,
            commit_or_rollback: state.wire(),
            from_transaction_check: true,
            msg_id,
            transaction_id: h.transaction_id.clone(),
            broker_name: h.broker_name.clone(),
        };
        if state != LocalTransactionState::CommitMessage {
            info!(
                "transaction check of group {}: {state:?} for {} ({})",
                self.group, header.msg_id, self.addr
            );
        }
        if let Some(trace) = &self.trace {
            // Java records the answer before it goes (`doExecuteEndTransactionHook`).
            let mut user = self.msg.message().clone();
            user.set_topic(namespace::unwrap(trace.namespace.as_deref(), user.topic()));
            trace.dispatcher.record(TraceRecord::end_transaction(
                &self.group,
                &user,
                &header.msg_id,
                &self.addr,
                state.java_name(),
                true,
            ));
        }
        let mut request =
            RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
        request.remark = remark;
        if let Err(e) =
            self.instance
                .remoting()
                .invoke_oneway(&self.addr, request, CHECK_ANSWER_TIMEOUT)
        {
            warn!(
                "answering the transaction check of {} to {}: {e}",
                header.msg_id, self.addr
            );
        }
    }
}

/// Runs user code, turning a panic into its message.
fn caught<R>(f: impl FnOnce() -> R) -> std::result::Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string())
    })
}

/// Builder for [`TransactionProducer`]: [`ProducerBuilder::transactional`] (every
/// producer setting made before it), or `TransactionProducer::builder(group, listener)`,
/// then the check pool's settings and [`start`](Self::start).
pub struct TransactionProducerBuilder {
    producer: ProducerBuilder,
    listener: Arc<dyn TransactionListener>,
    check_thread_pool_min_size: usize,
    check_thread_pool_max_size: usize,
    check_request_hold_max: usize,
}

impl fmt::Debug for TransactionProducerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionProducerBuilder")
            .field("producer", &self.producer)
            .field(
                "check_thread_pool_min_size",
                &self.check_thread_pool_min_size,
            )
            .field(
                "check_thread_pool_max_size",
                &self.check_thread_pool_max_size,
            )
            .field("check_request_hold_max", &self.check_request_hold_max)
            .finish_non_exhaustive()
    }
}

impl TransactionProducerBuilder {
    /// Java's check pool: one thread, 2,000 checks waiting.
    pub(super) fn new(
        producer: ProducerBuilder,
        listener: Arc<dyn TransactionListener>,
    ) -> TransactionProducerBuilder {
        TransactionProducerBuilder {
            producer,
            listener,
            check_thread_pool_min_size: 1,
            check_thread_pool_max_size: 1,
            check_request_hold_max: 2000,
        }
    }

    /// What every client shares (see [`ProducerBuilder::client_options`]).
    pub fn client_options(mut self, options: ClientOptions) -> Self {
        self.producer = self.producer.client_options(options);
        self
    }

    /// All producer options at once (see [`ProducerBuilder::options`]); the half message
    /// is sent with them.
    pub fn options(mut self, options: ProducerOptions) -> Self {
        self.producer = self.producer.options(options);
        self
    }

    /// Threads the check pool starts with (Java `checkThreadPoolMinSize`, 1).
    #[doc(alias = "checkThreadPoolMinSize")]
    pub fn check_thread_pool_min_size(mut self, threads: usize) -> Self {
        self.check_thread_pool_min_size = threads;
        self
    }

    /// Threads the check pool grows to when its queue is full (Java
    /// `checkThreadPoolMaxSize`, 1).
    #[doc(alias = "checkThreadPoolMaxSize")]
    pub fn check_thread_pool_max_size(mut self, threads: usize) -> Self {
        self.check_thread_pool_max_size = threads;
        self
    }

    /// Checks that may wait for a thread; beyond them a check is dropped and counted
    /// (Java `checkRequestHoldMax`, 2000).
    #[doc(alias = "checkRequestHoldMax")]
    pub fn check_request_hold_max(mut self, checks: usize) -> Self {
        self.check_request_hold_max = checks;
        self
    }

    /// Checks the configuration and creates a producer that is not started yet.
    fn build(self) -> Result<TransactionProducer> {
        let (min, max, hold) = (
            self.check_thread_pool_min_size,
            self.check_thread_pool_max_size,
            self.check_request_hold_max,
        );
        // Java's ThreadPoolExecutor and LinkedBlockingQueue refuse these.
        if min == 0 || max < min || hold == 0 {
            return Err(Error::invalid_argument(format!(
                "the check pool needs 1 <= min threads ({min}) <= max threads ({max}) and a queue of at least 1 ({hold})"
            )));
        }
        let env = Arc::new(TransactionEnv {
            listener: self.listener,
            min_threads: min,
            max_threads: max,
            hold_max: hold,
            pool: Mutex::new(None),
            dropped: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        });
        let producer = self.producer.build_transactional(env.clone())?;
        Ok(TransactionProducer { producer, env })
    }

    /// Checks the configuration, starts the check pool and the producer, and returns the
    /// running transactional producer (Java `new TransactionMQProducer`, then `start()`).
    pub fn start(self) -> Result<TransactionProducer> {
        let p = self.build()?;
        p.start()?;
        Ok(p)
    }
}

/// A transactional producer (Java `TransactionMQProducer`). Every method takes `&self`;
/// dropping it shuts it down. It sends ordinary messages too, through
/// [`producer`](Self::producer).
pub struct TransactionProducer {
    producer: Producer,
    env: Arc<TransactionEnv>,
}

impl fmt::Debug for TransactionProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("group", &self.producer.group())
            .field("client_id", &self.producer.client_id())
            .finish_non_exhaustive()
    }
}

impl TransactionProducer {
    /// A builder for a transactional producer of `group`, whose transactions `listener`
    /// runs and checks.
    pub fn builder(
        group: impl Into<String>,
        listener: impl TransactionListener,
    ) -> TransactionProducerBuilder {
        Producer::builder(group).transactional(listener)
    }

    /// Starts the check pool, then the producer (Java `initTransactionEnv`, then
    /// `start`): a check that comes right after the first heartbeat finds the pool.
    fn start(&self) -> Result<()> {
        self.env.start()?;
        if let Err(e) = self.producer.start() {
            self.env
                .shutdown(Instant::now() + crate::util::worker::JOIN_TIMEOUT);
            return Err(e);
        }
        Ok(())
    }

    /// Shuts the producer down, then the check pool (Java `destroyTransactionEnv`): the
    /// checks queued run and answer while the connections last; their answers are lost
    /// after that, and the brokers ask a producer of the group again. Idempotent.
    pub fn shutdown(&self) {
        let deadline = Instant::now() + self.producer.inner.config().remoting.shutdown_timeout;
        self.producer.shutdown();
        self.env.shutdown(deadline);
    }

    /// The producer group (with namespace).
    pub fn group(&self) -> &str {
        self.producer.group()
    }

    /// The client id of the shared client instance.
    pub fn client_id(&self) -> String {
        self.producer.client_id()
    }

    /// The producer underneath, for ordinary sends (Java's `TransactionMQProducer` is a
    /// `DefaultMQProducer`).
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// Broker checks dropped because `check_request_hold_max` checks were waiting
    /// already (Java's rejected executions), or because the producer was shutting down.
    pub fn dropped_checks(&self) -> u64 {
        self.env.dropped.load(Ordering::Relaxed)
    }

    /// Broker checks queued on the check pool since start.
    pub fn accepted_checks(&self) -> u64 {
        self.env.accepted.load(Ordering::Relaxed)
    }

    /// Checks waiting for a thread now (at most `check_request_hold_max`).
    pub fn queued_checks(&self) -> usize {
        self.env.queued()
    }

    /// Sends `msg` as a half message, runs the local transaction with `arg` and reports
    /// its outcome to the broker (Java `sendMessageInTransaction`).
    ///
    /// A send that fails is an error and nothing else happens: the local transaction
    /// does not run. Once the half message is stored, this returns `Ok` whatever the
    /// local transaction and the END_TRANSACTION do: a delay level on `msg` is ignored,
    /// a status other than OK rolls back, a panicking local transaction is
    /// [`Unknown`](LocalTransactionState::Unknown) (the broker checks it later), and an
    /// END_TRANSACTION that cannot be sent is logged — the broker checks that one too.
    pub fn send_in_transaction(
        &self,
        msg: &Message,
        arg: &dyn Any,
    ) -> Result<TransactionSendResult> {
        let inner = &self.producer.inner;
        let mut half = msg.clone();
        half.remove_property(property::DELAY);
        half.put_property(property::TRAN_MSG, "true");
        half.put_property(property::PGROUP, inner.group());
        // The id is set here, not in the send, so that the local transaction sees it.
        let id = message::uniq::set_uniq_id(&mut half).to_string();
        let sent = inner
            .send_sync(&half, inner.options().send_timeout)
            .map_err(|e| e.context("the half message of a transaction"))?;
        let (state, remark) = match sent.send_status {
            SendStatus::Ok => {
                if let Some(t) = &sent.transaction_id {
                    half.put_property(property::TRANSACTION_ID, t);
                }
                half.set_transaction_id(Some(id));
                match caught(|| self.env.listener.execute_local_transaction(&half, arg)) {
                    Ok(state) => (state, None),
                    Err(why) => {
                        warn!(
                            "the local transaction of {} panicked: {why}; its state is unknown",
                            sent.msg_id
                        );
                        (
                            LocalTransactionState::Unknown,
                            Some(format!("executeLocalTransactionBranch exception: {why}")),
                        )
                    }
                }
            }
            _ => (LocalTransactionState::RollbackMessage, None),
        };
        if let Err(e) = self.end_transaction(&half, &sent, state, remark) {
            warn!(
                "local transaction of {} ended {state:?}, but the broker could not be told: {e}",
                sent.msg_id
            );
        }
        Ok(TransactionSendResult {
            send_result: sent,
            local_transaction_state: state,
        })
    }

    /// END_TRANSACTION, oneway, to the broker that stored the half message (Java
    /// `endTransaction`).
    fn end_transaction(
        &self,
        half: &Message,
        sent: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<()> {
        let inner = &self.producer.inner;
        let instance = inner.instance()?;
        let (_, commit_log_offset) = message::decode_offset_msg_id(&sent.offset_msg_id)
            .map_err(|e| Error::new(ErrorKind::Decode, format!("the broker's message id: {e}")))?;
        let broker = &sent.message_queue.broker_name;
        let addr = instance
            .find_broker_address_in_publish(broker)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!("the broker {broker} is not known"),
                )
            })?;
        let header = EndTransactionRequestHeader {
            topic: Some(namespace::wrap(inner.namespace(), half.topic())),
            producer_group: inner.group().to_string(),
            tran_state_table_offset: sent.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.wire(),
            from_transaction_check: false,
            msg_id: sent.msg_id.to_string(),
            transaction_id: sent.transaction_id.as_deref().map(str::to_string),
            broker_name: Some(broker.to_string()),
        };
        if let Some(trace) = inner.tracer() {
            trace.record(TraceRecord::end_transaction(
                inner.group(),
                half,
                &sent.msg_id,
                &addr,
                state.java_name(),
                false,
            ));
        }
        debug!("END_TRANSACTION {state:?} of {} to {addr}", sent.msg_id);
        let mut request =
            RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
        request.remark = remark;
        instance
            .remoting()
            .invoke_oneway(&addr, request, inner.options().send_timeout)
    }
}

impl Drop for TransactionProducer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::bounded;

    fn env(listener: impl TransactionListener, max_threads: usize, hold: usize) -> TransactionEnv {
        let env = TransactionEnv {
            listener: Arc::new(listener),
            min_threads: 1,
            max_threads,
            hold_max: hold,
            pool: Mutex::new(None),
            dropped: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        };
        env.start().unwrap();
        env
    }

    /// Submits one check to `env` from an instance whose broker does not listen: the
    /// answers fail at once and are logged.
    fn submit_to(env: &TransactionEnv, instance: &Arc<MQClientInstance>) {
        let header = CheckTransactionStateRequestHeader {
            commit_log_offset: 1,
            tran_state_table_offset: 1,
            ..Default::default()
        };
        env.submit(
            instance.clone(),
            "pg".into(),
            None,
            "127.0.0.1:1",
            MessageExt::default(),
            header,
        );
    }

    fn offline_instance(name: &str) -> Arc<MQClientInstance> {
        let config = crate::client::ClientOptions::new()
            .namesrv_addr("127.0.0.1:1")
            .instance_name(name)
            .into_config();
        MQClientInstance::new(config).unwrap()
    }

    #[test]
    fn a_full_check_pool_drops_and_counts_and_grows_to_its_maximum_first() {
        let (entered_tx, entered_rx) = bounded::<()>(16);
        let (release_tx, release_rx) = bounded::<()>(0);
        let listener = (
            |_: &Message, _: &dyn Any| LocalTransactionState::Unknown,
            move |_: &MessageExt| {
                let _ = entered_tx.send(());
                let _ = release_rx.recv_timeout(Duration::from_secs(10));
                LocalTransactionState::Unknown
            },
        );
        let env = env(listener, 2, 2);
        let instance = offline_instance("tx-env-full");
        let submit = || submit_to(&env, &instance);
        submit();
        entered_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        // One running; two wait; the third finds the queue full and a second thread
        // starts for it; past that, every check is dropped.
        for _ in 0..10 {
            submit();
        }
        entered_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(env.accepted.load(Ordering::Relaxed), 4);
        assert_eq!(env.dropped.load(Ordering::Relaxed), 7);
        assert_eq!(env.queued(), 2, "the queue holds its bound, not one more");
        for _ in 0..4 {
            let _ = release_tx.send_timeout((), Duration::from_secs(5));
        }
        env.shutdown(Instant::now() + Duration::from_secs(5));
        // After shutdown a check is dropped, not run.
        submit();
        assert_eq!(env.dropped.load(Ordering::Relaxed), 8);
        instance.shutdown();
    }

    #[test]
    fn a_panicking_checker_leaves_its_one_thread_for_the_next_check() {
        let (done_tx, done_rx) = bounded::<usize>(4);
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        let listener = (
            |_: &Message, _: &dyn Any| LocalTransactionState::Unknown,
            move |_: &MessageExt| {
                let n = c.fetch_add(1, Ordering::SeqCst);
                if n == 0 {
                    panic!("the first check panics");
                }
                let _ = done_tx.send(n as usize);
                LocalTransactionState::CommitMessage
            },
        );
        let env = env(listener, 1, 10);
        let instance = offline_instance("tx-env-panic");
        for _ in 0..2 {
            submit_to(&env, &instance);
        }
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
        env.shutdown(Instant::now() + Duration::from_secs(5));
        instance.shutdown();
    }

    #[test]
    fn panics_become_their_message() {
        assert_eq!(caught(|| 3), Ok(3));
        assert_eq!(
            caught(|| -> i32 { panic!("static text") }),
            Err("static text".into())
        );
        assert_eq!(
            caught(|| -> i32 { panic!("formatted {}", 7) }),
            Err("formatted 7".into())
        );
    }

    #[test]
    fn a_check_pool_that_java_would_refuse_is_an_invalid_argument() {
        let l = (
            |_: &Message, _: &dyn Any| LocalTransactionState::Unknown,
            |_: &MessageExt| LocalTransactionState::Unknown,
        );
        for (min, max, hold) in [(0, 1, 1), (2, 1, 1), (1, 1, 0)] {
            let e = TransactionProducer::builder("g", l)
                .client_options(crate::ClientOptions::new().namesrv_addr("127.0.0.1:1"))
                .check_thread_pool_min_size(min)
                .check_thread_pool_max_size(max)
                .check_request_hold_max(hold)
                .build()
                .err()
                .unwrap();
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidArgument,
                "{min} {max} {hold}: {e}"
            );
        }
    }
}
