//! `CProducer.h`: the common, orderly and transaction producers of the 2.x API, on a
//! rocketmq-blocking [`Producer`] / [`TransactionProducer`].
//!
//! Settings are recorded on the handle and applied by `StartProducer`; a setting changed
//! on a running producer takes effect at its next start (after `ShutdownProducer`).
//! `ShutdownProducer` completes every pending async send (its callback sees the failure)
//! and then waits for running callbacks; no callback of the producer runs after it (or
//! `DestroyProducer`) returns. `DestroyProducer` of a running producer shuts it down
//! first; a destroyed handle is `NULL_POINTER` from then on.

use std::any::Any;
use std::ffi::{c_char, c_int, c_long, c_longlong, c_void};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use rocketmq_blocking::{
    Error, LocalTransactionState, Message, MessageExt, MessageQueue, Producer,
    SelectMessageQueueByHash, SendResult, SendStatus, TransactionListener, TransactionProducer,
};

use crate::gate::Gate;
use crate::message::{CBatchMessage, CMessage, Lent};
use crate::registry::{self, Obj};
use crate::settings::{self, positive, Configurable, Settings};
use crate::{c_str, copy_into, guard, guard_value, status, CResult, Failure};

/// `typedef struct CProducer CProducer;`
pub struct CProducer {
    _private: [u8; 0],
}

/// `CSendResult` (`CSendResult.h`).
#[repr(C)]
pub struct CSendResult {
    pub sendStatus: c_int,
    pub msgId: [c_char; 256],
    pub offset: c_longlong,
}

/// `CMQException` (`CMQException.h`).
#[repr(C)]
pub struct CMQException {
    pub error: c_int,
    pub line: c_int,
    pub file: [c_char; 256],
    pub msg: [c_char; 512],
    pub r#type: [c_char; 128],
}

pub type QueueSelectorCallback =
    Option<extern "C" fn(size: c_int, msg: *mut CMessage, arg: *mut c_void) -> c_int>;
pub type CSendSuccessCallback = Option<extern "C" fn(result: CSendResult)>;
pub type CSendExceptionCallback = Option<extern "C" fn(e: CMQException)>;
pub type COnSendSuccessCallback =
    Option<extern "C" fn(result: CSendResult, msg: *mut CMessage, user: *mut c_void)>;
pub type COnSendExceptionCallback =
    Option<extern "C" fn(e: CMQException, msg: *mut CMessage, user: *mut c_void)>;
/// Returns a `CTransactionStatus` (0 commit, 1 rollback, 2 unknown).
pub type CLocalTransactionCheckerCallback =
    Option<extern "C" fn(producer: *mut CProducer, msg: *mut CMessage, data: *mut c_void) -> c_int>;
/// Returns a `CTransactionStatus`.
pub type CLocalTransactionExecutorCallback =
    Option<extern "C" fn(producer: *mut CProducer, msg: *mut CMessage, data: *mut c_void) -> c_int>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Common,
    Orderly,
    Transaction,
}

/// The producer's own settings beside the common ones, applied at start.
#[derive(Default, Clone)]
struct ProducerSettings {
    client: Settings,
    send_timeout_ms: Option<u64>,
    compress_level: Option<u32>,
    max_message_size: Option<usize>,
}

enum Running {
    Plain(Producer),
    Tx(TransactionProducer),
}

impl Running {
    fn producer(&self) -> &Producer {
        match self {
            Running::Plain(p) => p,
            Running::Tx(t) => t.producer(),
        }
    }

    fn shutdown(&self) {
        match self {
            Running::Plain(p) => p.shutdown(),
            Running::Tx(t) => t.shutdown(),
        }
    }
}

/// A registered producer.
pub(crate) struct ProducerHandle {
    kind: Kind,
    checker: CLocalTransactionCheckerCallback,
    checker_data: usize,
    settings: Mutex<ProducerSettings>,
    running: Mutex<Option<Arc<Running>>>,
    gate: Arc<Gate>,
}

impl Configurable for ProducerHandle {
    fn settings(&self) -> MappedMutexGuard<'_, Settings> {
        MutexGuard::map(self.settings.lock(), |s| &mut s.client)
    }
}

impl ProducerHandle {
    /// The running producer, or `failure` (the calling function's status).
    fn running(&self, failure: i32) -> CResult<Arc<Running>> {
        self.running
            .lock()
            .clone()
            .ok_or_else(|| Failure::new(failure, "the producer is not started"))
    }

    fn shutdown(&self) {
        let r = self.running.lock().take();
        if let Some(r) = r {
            r.shutdown();
        }
        self.gate.close_and_wait();
    }
}

fn create(
    group: *const c_char,
    kind: Kind,
    checker: CLocalTransactionCheckerCallback,
    data: *mut c_void,
) -> *mut CProducer {
    guard_value(std::ptr::null_mut(), || {
        let h = Arc::new(ProducerHandle {
            kind,
            checker,
            checker_data: data as usize,
            settings: Mutex::new(ProducerSettings {
                client: Settings::new(group)?,
                ..ProducerSettings::default()
            }),
            running: Mutex::new(None),
            gate: Arc::new(Gate::default()),
        });
        let p = Arc::as_ptr(&h) as *mut CProducer;
        registry::insert(p as usize, Obj::Producer(h));
        Ok(p)
    })
}

#[no_mangle]
pub extern "C" fn CreateProducer(groupId: *const c_char) -> *mut CProducer {
    create(groupId, Kind::Common, None, std::ptr::null_mut())
}

/// A producer for ordered sends. The same as `CreateProducer` here: order comes from the
/// queue a send picks (`SendMessageOrderly*`), which either kind may do.
#[no_mangle]
pub extern "C" fn CreateOrderlyProducer(groupId: *const c_char) -> *mut CProducer {
    create(groupId, Kind::Orderly, None, std::ptr::null_mut())
}

/// A transaction producer: `callback` answers the broker's checks of transactions whose
/// outcome it did not get (on a check thread, with `userData`); NULL `callback` is NULL.
#[no_mangle]
pub extern "C" fn CreateTransactionProducer(
    groupId: *const c_char,
    callback: CLocalTransactionCheckerCallback,
    userData: *mut c_void,
) -> *mut CProducer {
    if callback.is_none() {
        crate::set_error("callback is NULL");
        return std::ptr::null_mut();
    }
    create(groupId, Kind::Transaction, callback, userData)
}

/// Shuts the producer down if it runs, then frees it.
#[no_mangle]
pub extern "C" fn DestroyProducer(producer: *mut CProducer) -> c_int {
    guard(|| {
        let h = registry::producer(producer, "producer")?;
        registry::remove(producer.cast());
        h.shutdown();
        Ok(())
    })
}

/// The local transaction and the broker's check, calling the C callbacks.
struct TxListener {
    producer: usize,
    checker: CLocalTransactionCheckerCallback,
    data: usize,
    gate: Arc<Gate>,
}

/// The executor of one `SendMessageTransaction`, passed as the transaction's argument.
struct Exec {
    callback: CLocalTransactionExecutorCallback,
    data: usize,
}

fn tx_state(v: c_int) -> LocalTransactionState {
    match v {
        0 => LocalTransactionState::CommitMessage,
        1 => LocalTransactionState::RollbackMessage,
        _ => LocalTransactionState::Unknown,
    }
}

impl TransactionListener for TxListener {
    fn execute_local_transaction(&self, msg: &Message, arg: &dyn Any) -> LocalTransactionState {
        let Some(Exec {
            callback: Some(cb),
            data,
        }) = arg.downcast_ref::<Exec>()
        else {
            return LocalTransactionState::Unknown;
        };
        // Runs on the caller's thread, inside its SendMessageTransaction: no gate needed.
        let lent = Lent::plain(msg.clone());
        tx_state(cb(
            self.producer as *mut CProducer,
            lent.0,
            *data as *mut c_void,
        ))
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let Some(cb) = self.checker else {
            return LocalTransactionState::Unknown;
        };
        self.gate
            .run(|| {
                let lent = Lent::received(msg.clone());
                tx_state(cb(
                    self.producer as *mut CProducer,
                    lent.0,
                    self.data as *mut c_void,
                ))
            })
            .unwrap_or(LocalTransactionState::Unknown)
    }
}

/// Starts the producer with the settings made so far. A running producer is
/// `PRODUCER_START_FAILED` (as the original's second `start()`).
#[no_mangle]
pub extern "C" fn StartProducer(producer: *mut CProducer) -> c_int {
    guard(|| {
        let h = registry::producer(producer, "producer")?;
        let mut running = h.running.lock();
        if running.is_some() {
            return Err(Failure::new(
                status::PRODUCER_START_FAILED,
                "the producer is already started",
            ));
        }
        let s = h.settings.lock().clone();
        let mut b = Producer::builder(s.client.group.clone())
            .client_options(s.client.client_options())
            .enable_msg_trace(s.client.trace);
        if let Some(t) = s.send_timeout_ms {
            b = b.send_timeout(Duration::from_millis(t));
        }
        if let Some(l) = s.compress_level {
            b = b.compress_level(l);
        }
        if let Some(m) = s.max_message_size {
            b = b.max_message_size(m);
        }
        let fail = |e: Error| Failure::new(status::PRODUCER_START_FAILED, e.to_string());
        h.gate.open();
        let r = if h.kind == Kind::Transaction {
            let listener = TxListener {
                producer: producer as usize,
                checker: h.checker,
                data: h.checker_data,
                gate: h.gate.clone(),
            };
            Running::Tx(b.transactional(listener).start().map_err(fail)?)
        } else {
            Running::Plain(b.start().map_err(fail)?)
        };
        *running = Some(Arc::new(r));
        Ok(())
    })
}

/// Shuts the producer down (OK when it is not running). Pending async sends complete with
/// an error first; no callback of the producer runs after this returns.
#[no_mangle]
pub extern "C" fn ShutdownProducer(producer: *mut CProducer) -> c_int {
    guard(|| {
        registry::producer(producer, "producer")?.shutdown();
        Ok(())
    })
}

/// A static version string ("DefaultVersion" for a bad handle, as the original).
#[no_mangle]
pub extern "C" fn ShowProducerVersion(producer: *mut CProducer) -> *const c_char {
    match registry::producer(producer, "producer") {
        Ok(_) => crate::VERSION.as_ptr(),
        Err(_) => c"DefaultVersion".as_ptr(),
    }
}

fn set(producer: *mut CProducer, f: impl FnOnce(&mut ProducerSettings) -> CResult<()>) -> c_int {
    guard(|| {
        let h = registry::producer(producer, "producer")?;
        let mut s = h.settings.lock();
        f(&mut s)
    })
}

#[no_mangle]
pub extern "C" fn SetProducerNameServerAddress(
    producer: *mut CProducer,
    namesrv: *const c_char,
) -> c_int {
    settings::namesrv(registry::producer(producer, "producer"), namesrv)
}

/// The HTTP name-server address server (`http://<domain>:8080/rocketmq/nsaddr`, or the
/// URL given); used when no name-server address is set.
#[no_mangle]
pub extern "C" fn SetProducerNameServerDomain(
    producer: *mut CProducer,
    domain: *const c_char,
) -> c_int {
    settings::domain(registry::producer(producer, "producer"), domain)
}

#[no_mangle]
pub extern "C" fn SetProducerGroupName(
    producer: *mut CProducer,
    groupName: *const c_char,
) -> c_int {
    settings::group(registry::producer(producer, "producer"), groupName)
}

#[no_mangle]
pub extern "C" fn SetProducerInstanceName(
    producer: *mut CProducer,
    instanceName: *const c_char,
) -> c_int {
    settings::instance(registry::producer(producer, "producer"), instanceName)
}

/// ACL credentials. `onsChannel` is checked and otherwise unused: the broker's ACL signs
/// only the access key and secret.
#[no_mangle]
pub extern "C" fn SetProducerSessionCredentials(
    producer: *mut CProducer,
    accessKey: *const c_char,
    secretKey: *const c_char,
    onsChannel: *const c_char,
) -> c_int {
    settings::credentials(
        registry::producer(producer, "producer"),
        accessKey,
        secretKey,
        onsChannel,
    )
}

/// Accepted and ignored: this library writes no log files (it logs through Rust's `log`).
#[no_mangle]
pub extern "C" fn SetProducerLogPath(producer: *mut CProducer, logPath: *const c_char) -> c_int {
    settings::log_path(registry::producer(producer, "producer"), logPath)
}

/// Checked and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetProducerLogFileNumAndSize(
    producer: *mut CProducer,
    fileNum: c_int,
    fileSize: c_long,
) -> c_int {
    settings::log_files(registry::producer(producer, "producer"), fileNum, fileSize)
}

/// Sets the process-wide maximum level of the Rust `log` facade; the first call installs
/// a logger printing to standard error (see `logs`).
#[no_mangle]
pub extern "C" fn SetProducerLogLevel(producer: *mut CProducer, level: c_int) -> c_int {
    settings::log_level(registry::producer(producer, "producer"), level)
}

/// The budget of one send in milliseconds (positive).
#[no_mangle]
pub extern "C" fn SetProducerSendMsgTimeout(producer: *mut CProducer, timeout: c_int) -> c_int {
    set(producer, |s| {
        s.send_timeout_ms = Some(positive(timeout, "send timeout")? as u64);
        Ok(())
    })
}

/// zlib level 0..=9 of bodies over 4 KiB; -1 is zlib's default (6).
#[no_mangle]
pub extern "C" fn SetProducerCompressLevel(producer: *mut CProducer, level: c_int) -> c_int {
    set(producer, |s| {
        let l = match level {
            -1 => 6,
            0..=9 => level as u32,
            _ => {
                return Err(Failure::bad(format!(
                    "compress level {level} is not in -1..=9"
                )))
            }
        };
        s.compress_level = Some(l);
        Ok(())
    })
}

/// The largest body in bytes (positive).
#[no_mangle]
pub extern "C" fn SetProducerMaxMessageSize(producer: *mut CProducer, size: c_int) -> c_int {
    set(producer, |s| {
        s.max_message_size = Some(positive(size, "max message size")?);
        Ok(())
    })
}

/// `OPEN` (0) traces every send in `RMQ_SYS_TRACE_TOPIC`; `CLOSE` (1) does not.
#[no_mangle]
pub extern "C" fn SetProducerMessageTrace(producer: *mut CProducer, openTrace: c_int) -> c_int {
    settings::trace(registry::producer(producer, "producer"), openTrace)
}

fn send_status(s: SendStatus) -> c_int {
    match s {
        SendStatus::Ok => 0,
        SendStatus::FlushDiskTimeout => 1,
        SendStatus::FlushSlaveTimeout => 2,
        SendStatus::SlaveNotAvailable => 3,
    }
}

fn c_result(r: &SendResult) -> CSendResult {
    let mut c = CSendResult {
        sendStatus: send_status(r.send_status()),
        msgId: [0; 256],
        offset: r.queue_offset(),
    };
    copy_into(&mut c.msgId, r.msg_id());
    c
}

fn c_exception(e: &Error) -> CMQException {
    let mut c = CMQException {
        error: e.response_code().map_or(-1, |c| c.0),
        line: 0,
        file: [0; 256],
        msg: [0; 512],
        r#type: [0; 128],
    };
    copy_into(&mut c.msg, &e.to_string());
    copy_into(&mut c.file, "rocketmq-blocking");
    copy_into(&mut c.r#type, &format!("{:?}", e.kind()));
    c
}

/// Writes `r` to the caller's result.
fn write(result: *mut CSendResult, r: &SendResult) {
    // SAFETY: `result` was checked not NULL by `check_result`; the caller passes a
    // writable CSendResult (the API's contract).
    unsafe { result.write(c_result(r)) };
}

fn check_result(result: *mut CSendResult) -> CResult<()> {
    if result.is_null() {
        return Err(Failure::bad("result is NULL"));
    }
    Ok(())
}

/// The producer, its running engine and the message to send.
fn prepare(
    producer: *mut CProducer,
    msg: *mut CMessage,
    failure: i32,
) -> CResult<(Arc<ProducerHandle>, Arc<Running>, Message)> {
    let h = registry::producer(producer, "producer")?;
    let m = registry::msg(msg, "msg")?.message();
    let r = h.running(failure)?;
    Ok((h, r, m))
}

#[no_mangle]
pub extern "C" fn SendMessageSync(
    producer: *mut CProducer,
    msg: *mut CMessage,
    result: *mut CSendResult,
) -> c_int {
    guard(|| {
        check_result(result)?;
        let (_, r, m) = prepare(producer, msg, status::PRODUCER_SEND_SYNC_FAILED)?;
        let sent = r
            .producer()
            .send(&m)
            .map_err(|e| Failure::new(status::PRODUCER_SEND_SYNC_FAILED, e.to_string()))?;
        write(result, &sent);
        Ok(())
    })
}

/// Sends the batch's messages (one topic) as one batch.
#[no_mangle]
pub extern "C" fn SendBatchMessage(
    producer: *mut CProducer,
    batchMessage: *mut CBatchMessage,
    result: *mut CSendResult,
) -> c_int {
    guard(|| {
        check_result(result)?;
        let h = registry::producer(producer, "producer")?;
        let msgs = registry::batch(batchMessage, "batchMessage")?
            .msgs
            .lock()
            .clone();
        let r = h.running(status::PRODUCER_SEND_SYNC_FAILED)?;
        let sent = r
            .producer()
            .send_batch(&msgs)
            .map_err(|e| Failure::new(status::PRODUCER_SEND_SYNC_FAILED, e.to_string()))?;
        write(result, &sent);
        Ok(())
    })
}

/// Queues `m`; `done` gets the outcome on a callback thread, behind the gate.
fn send_async(
    h: &ProducerHandle,
    r: &Running,
    m: Message,
    mq: Option<MessageQueue>,
    failure: i32,
    done: impl FnOnce(Result<SendResult, Error>) + Send + 'static,
) -> CResult<()> {
    let gate = h.gate.clone();
    let cb = move |res: Result<SendResult, Error>| {
        let _ = gate.run(|| done(res));
    };
    let queued = match mq {
        Some(mq) => r.producer().send_async_to_queue(m, &mq, cb),
        None => r.producer().send_async(m, cb),
    };
    queued.map_err(|e| Failure::new(failure, e.error().to_string()))
}

/// `SendMessageAsync` and `SendMessageOrderlyAsync`: callbacks without the message or
/// user data; `selector` picks the queue when given.
fn send_plain_async(
    producer: *mut CProducer,
    msg: *mut CMessage,
    selector: Option<(QueueSelectorCallback, *mut c_void)>,
    on_ok: CSendSuccessCallback,
    on_err: CSendExceptionCallback,
    f: i32,
) -> c_int {
    guard(|| {
        let (Some(ok), Some(err)) = (on_ok, on_err) else {
            return Err(Failure::bad("a callback is NULL"));
        };
        let (h, r, m) = prepare(producer, msg, f)?;
        let mq = match selector {
            Some((sel, arg)) => Some(select_queue(&r, &m, sel, msg, arg, f)?),
            None => None,
        };
        send_async(&h, &r, m, mq, f, move |res| match res {
            Ok(s) => ok(c_result(&s)),
            Err(e) => err(c_exception(&e)),
        })
    })
}

/// Sends without waiting: `cSendSuccessCallback` or `cSendExceptionCallback` runs once on
/// a callback thread. If this returns an error, neither runs.
#[no_mangle]
pub extern "C" fn SendMessageAsync(
    producer: *mut CProducer,
    msg: *mut CMessage,
    cSendSuccessCallback: CSendSuccessCallback,
    cSendExceptionCallback: CSendExceptionCallback,
) -> c_int {
    send_plain_async(
        producer,
        msg,
        None,
        cSendSuccessCallback,
        cSendExceptionCallback,
        status::PRODUCER_SEND_ASYNC_FAILED,
    )
}

/// Like `SendMessageAsync`, the callbacks also getting `msg` (the caller's pointer: keep
/// the message alive until a callback ran) and `userData`.
#[no_mangle]
pub extern "C" fn SendAsync(
    producer: *mut CProducer,
    msg: *mut CMessage,
    cSendSuccessCallback: COnSendSuccessCallback,
    cSendExceptionCallback: COnSendExceptionCallback,
    userData: *mut c_void,
) -> c_int {
    guard(|| {
        let (Some(ok), Some(err)) = (cSendSuccessCallback, cSendExceptionCallback) else {
            return Err(Failure::bad("a callback is NULL"));
        };
        let (h, r, m) = prepare(producer, msg, status::PRODUCER_SEND_ASYNC_FAILED)?;
        let (mp, up) = (msg as usize, userData as usize);
        send_async(
            &h,
            &r,
            m,
            None,
            status::PRODUCER_SEND_ASYNC_FAILED,
            move |res| match res {
                Ok(s) => ok(c_result(&s), mp as *mut CMessage, up as *mut c_void),
                Err(e) => err(c_exception(&e), mp as *mut CMessage, up as *mut c_void),
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn SendMessageOneway(producer: *mut CProducer, msg: *mut CMessage) -> c_int {
    guard(|| {
        let (_, r, m) = prepare(producer, msg, status::PRODUCER_SEND_ONEWAY_FAILED)?;
        r.producer()
            .send_oneway(&m)
            .map_err(|e| Failure::new(status::PRODUCER_SEND_ONEWAY_FAILED, e.to_string()))
    })
}

/// The queue the C selector picks: `selector(size, msg, arg)` must return an index in
/// `0..size` (anything else fails the send instead of reading out of bounds).
fn select_queue(
    r: &Running,
    m: &Message,
    selector: QueueSelectorCallback,
    msg: *mut CMessage,
    arg: *mut c_void,
    failure: i32,
) -> CResult<MessageQueue> {
    let sel = selector.ok_or_else(|| Failure::bad("the queue selector is NULL"))?;
    let mqs = r
        .producer()
        .fetch_publish_message_queues(m.topic())
        .map_err(|e| Failure::new(failure, e.to_string()))?;
    let n = c_int::try_from(mqs.len()).unwrap_or(c_int::MAX);
    if n == 0 {
        return Err(Failure::new(
            failure,
            format!("topic {} has no queue", m.topic()),
        ));
    }
    let i = sel(n, msg, arg);
    usize::try_from(i)
        .ok()
        .and_then(|i| mqs.get(i).cloned())
        .ok_or_else(|| {
            Failure::new(
                failure,
                format!("the queue selector returned {i}, not an index in 0..{n}"),
            )
        })
}

/// Up to `attempts` sends by `send` (whose own failure, such as a bad selector, ends them at
/// once); the last send error as `failure`.
fn with_retries(
    attempts: c_int,
    failure: i32,
    mut send: impl FnMut() -> CResult<Result<SendResult, Error>>,
) -> CResult<SendResult> {
    let mut last = None;
    for _ in 0..attempts {
        match send()? {
            Ok(sent) => return Ok(sent),
            Err(e) => last = Some(e),
        }
    }
    Err(Failure::new(
        failure,
        last.map_or_else(|| "not sent".to_string(), |e| e.to_string()),
    ))
}

#[no_mangle]
pub extern "C" fn SendMessageOnewayOrderly(
    producer: *mut CProducer,
    msg: *mut CMessage,
    selector: QueueSelectorCallback,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        let f = status::PRODUCER_SEND_ONEWAY_FAILED;
        let (_, r, m) = prepare(producer, msg, f)?;
        let mq = select_queue(&r, &m, selector, msg, arg, f)?;
        r.producer()
            .send_oneway_to_queue(&m, &mq)
            .map_err(|e| Failure::new(f, e.to_string()))
    })
}

/// Sends to the queue `callback` picks; a failed send is tried again up to
/// `autoRetryTimes` more times (at most 16), the selector asked each time.
#[no_mangle]
pub extern "C" fn SendMessageOrderly(
    producer: *mut CProducer,
    msg: *mut CMessage,
    callback: QueueSelectorCallback,
    arg: *mut c_void,
    autoRetryTimes: c_int,
    result: *mut CSendResult,
) -> c_int {
    guard(|| {
        check_result(result)?;
        let f = status::PRODUCER_SEND_ORDERLY_FAILED;
        let (_, r, m) = prepare(producer, msg, f)?;
        let attempts = 1 + autoRetryTimes.clamp(0, 16);
        let sent = with_retries(attempts, f, || {
            let mq = select_queue(&r, &m, callback, msg, arg, f)?;
            Ok(r.producer().send_to_queue(&m, &mq))
        })?;
        write(result, &sent);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SendMessageOrderlyAsync(
    producer: *mut CProducer,
    msg: *mut CMessage,
    callback: QueueSelectorCallback,
    arg: *mut c_void,
    cSendSuccessCallback: CSendSuccessCallback,
    cSendExceptionCallback: CSendExceptionCallback,
) -> c_int {
    send_plain_async(
        producer,
        msg,
        Some((callback, arg)),
        cSendSuccessCallback,
        cSendExceptionCallback,
        status::PRODUCER_SEND_ORDERLYASYNC_FAILED,
    )
}

/// Sends to the queue of `shardingKey`: Java's `SelectMessageQueueByHash` (the key's
/// `String.hashCode()` modulo the queue count), so Java producers put the same key on the
/// same queue (the original used C++'s `std::hash`, which Java cannot reproduce). Up to 3
/// retries, as the original. The key is also the message's `__SHARDINGKEY` property.
#[no_mangle]
pub extern "C" fn SendMessageOrderlyByShardingKey(
    producer: *mut CProducer,
    msg: *mut CMessage,
    shardingKey: *const c_char,
    result: *mut CSendResult,
) -> c_int {
    guard(|| {
        check_result(result)?;
        let f = status::PRODUCER_SEND_ORDERLY_FAILED;
        let key = c_str(shardingKey, "shardingKey")?;
        let (_, r, mut m) = prepare(producer, msg, f)?;
        if !key.trim().is_empty() {
            m.put_user_property("__SHARDINGKEY", key)
                .map_err(|e| Failure::bad(e.to_string()))?;
        }
        let sent = with_retries(4, f, || {
            Ok(r.producer()
                .send_with_selector(&m, &SelectMessageQueueByHash, key))
        })?;
        write(result, &sent);
        Ok(())
    })
}

/// Sends `msg` as a half message, runs `callback` (on this thread, with `userData`) and
/// tells the broker its outcome. Only on a producer of `CreateTransactionProducer`.
#[no_mangle]
pub extern "C" fn SendMessageTransaction(
    producer: *mut CProducer,
    msg: *mut CMessage,
    callback: CLocalTransactionExecutorCallback,
    userData: *mut c_void,
    result: *mut CSendResult,
) -> c_int {
    guard(|| {
        check_result(result)?;
        if callback.is_none() {
            return Err(Failure::bad("callback is NULL"));
        }
        let f = status::PRODUCER_SEND_TRANSACTION_FAILED;
        let (_, r, m) = prepare(producer, msg, f)?;
        let Running::Tx(tx) = &*r else {
            return Err(Failure::new(
                f,
                "not a transaction producer (make it with CreateTransactionProducer)",
            ));
        };
        let exec = Exec {
            callback,
            data: userData as usize,
        };
        let sent = tx
            .send_in_transaction(&m, &exec)
            .map_err(|e| Failure::new(f, e.to_string()))?;
        write(result, sent.send_result());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn producer_calls_with_bad_handles_are_null_pointer() {
        assert!(CreateProducer(null()).is_null());
        assert!(CreateTransactionProducer(c"g".as_ptr(), None, null_mut()).is_null());
        let mut r = CSendResult {
            sendStatus: 0,
            msgId: [0; 256],
            offset: 0,
        };
        assert_eq!(
            SendMessageSync(null_mut(), null_mut(), &mut r),
            status::NULL_POINTER
        );
        assert_eq!(StartProducer(null_mut()), status::NULL_POINTER);
        let p = CreateProducer(c"g".as_ptr());
        assert_eq!(SendMessageSync(p, null_mut(), &mut r), status::NULL_POINTER);
        let m = crate::message::CreateMessage(c"T".as_ptr());
        assert_eq!(
            SendMessageSync(p, m, &mut r),
            status::PRODUCER_SEND_SYNC_FAILED,
            "not started"
        );
        assert_eq!(SendMessageSync(p, m, null_mut()), status::NULL_POINTER);
        assert_eq!(SetProducerSendMsgTimeout(p, 0), status::NULL_POINTER);
        assert_eq!(SetProducerCompressLevel(p, 10), status::NULL_POINTER);
        assert_eq!(SetProducerLogLevel(p, 4), status::OK);
        assert_eq!(SetProducerLogLevel(p, 99), status::NULL_POINTER);
        assert_eq!(ShutdownProducer(p), status::OK, "shutdown before start");
        assert_eq!(DestroyProducer(p), status::OK);
        assert_eq!(DestroyProducer(p), status::NULL_POINTER, "double destroy");
        assert_eq!(
            StartProducer(p),
            status::NULL_POINTER,
            "start after destroy"
        );
        assert_eq!(crate::message::DestroyMessage(m), status::OK);
    }
}
