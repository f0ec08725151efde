//! `rocketmq_blocking._native`: the crate's clients for the Python package beside it
//! (`python/rocketmq_blocking`), which keeps the policy (the close guard, the exit hook,
//! what a listener's return value means) and the public classes.
//!
//! Every call that may block (a send, a poll, a start, a shutdown) releases the GIL, and
//! the crate's threads take it only around Python code (a listener, an async send's
//! callback), so no call waits for a thread that waits for the GIL it holds. Messages
//! cross as tuples the Python layer turns into its dataclasses, except in the producers'
//! sends, which read its `Message` and make its `SendResult` here (`objects.rs`) and
//! guard themselves against `free` (the `calls` gate). Errors are raised as the
//! Python layer's subclasses of `RocketMQError`, one per kind (made by the factory
//! registered with `set_error_class`).

mod deferred;
mod log_bridge;
mod objects;
/// The stats snapshots' JSON, shared with the C library so both give the same shape.
#[path = "../../ffi/src/stats_json.rs"]
mod stats_json;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use rmq::{
    Admin, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus, ErrorKind, MessageExt,
    MessageModel, MessageQueue, MessageSelector, SelectMessageQueueByHash, SendStatus, TopicConfig,
};
use rocketmq_blocking as rmq;

/// What makes the Python errors raised: `make(kind, message, response_code, retriable)`
/// returns the exception (of the kind's class).
static ERROR_CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The C ABI's name of an error kind, which the Python API has always reported.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Timeout => "RMQ_TIMEOUT",
        ErrorKind::Connect => "RMQ_CONNECT",
        ErrorKind::ConnectionClosed => "RMQ_CONNECTION_CLOSED",
        ErrorKind::Response => "RMQ_RESPONSE",
        ErrorKind::Decode => "RMQ_DECODE",
        ErrorKind::InvalidArgument => "RMQ_INVALID_ARGUMENT",
        ErrorKind::State => "RMQ_STATE",
        ErrorKind::Overloaded => "RMQ_OVERLOADED",
        ErrorKind::NoRoute => "RMQ_NO_ROUTE",
        ErrorKind::Io => "RMQ_IO",
        ErrorKind::Config => "RMQ_CONFIG",
        ErrorKind::Tls => "RMQ_TLS",
        ErrorKind::Unsupported => "RMQ_UNSUPPORTED",
        _ => "RMQ_OTHER",
    }
}

/// A Python error of kind `kind`, made by the registered factory.
fn py_error(
    py: Python<'_>,
    kind: &str,
    message: String,
    response_code: Option<i32>,
    retriable: bool,
) -> PyErr {
    let Some(make) = ERROR_CLASS.get(py) else {
        return PyRuntimeError::new_err(format!("{kind}: {message}"));
    };
    match make.call1(py, (kind, message, response_code, retriable)) {
        Ok(e) => PyErr::from_value(e.into_bound(py)),
        Err(e) => e,
    }
}

fn to_py(py: Python<'_>, e: rmq::Error) -> PyErr {
    to_py_ref(py, &e)
}

fn to_py_ref(py: Python<'_>, e: &rmq::Error) -> PyErr {
    // The alternate form: the message and its causes on one line.
    py_error(
        py,
        kind_name(e.kind()),
        format!("{e:#}"),
        e.response_code().map(|c| c.0),
        e.is_retriable(),
    )
}

trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for rmq::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// The client options from the Python layer (its `CLIENT_OPTIONS`, already checked
/// there): a dict of option name to value, with the ACL keys as one `credentials` tuple
/// `(access_key, secret_key, security_token)` and `tls` as `(ca_file, client_cert,
/// client_key, verify_server_name)`.
type Common<'py> = Bound<'py, PyDict>;

/// [`Common`] as the library's `ClientOptions`: one arm per option.
fn client_options(options: &Common<'_>) -> PyResult<rmq::ClientOptions> {
    let ms = |v: &Bound<'_, PyAny>| v.extract::<u64>().map(Duration::from_millis);
    let mut o = rmq::ClientOptions::new();
    for (key, v) in options.iter() {
        let key: String = key.extract()?;
        o = match key.as_str() {
            "namesrv" => o.namesrv_addr(v.extract::<String>()?),
            "instance_name" => o.instance_name(v.extract::<String>()?),
            "unit_name" => o.unit_name(v.extract::<String>()?),
            "namespace" => o.namespace(v.extract::<String>()?),
            "client_ip" => o.client_ip(v.extract::<String>()?),
            "vip_channel" => o.vip_channel(v.extract::<bool>()?),
            "credentials" => {
                let (ak, sk, token): (String, String, Option<String>) = v.extract()?;
                let mut c = rmq::Credentials::new(ak, sk);
                if let Some(t) = token {
                    c = c.with_security_token(t);
                }
                o.credentials(c)
            }
            "tls" => {
                let (ca_file, cert, key, verify): (
                    Option<String>,
                    Option<String>,
                    Option<String>,
                    bool,
                ) = v.extract()?;
                let mut t = rmq::TlsConfig::new().verify_server_name(verify);
                if let Some(ca) = ca_file {
                    t = t.ca_file(ca);
                }
                if let (Some(cert), Some(key)) = (cert, key) {
                    t = t.client_cert(cert, key);
                }
                o.tls(t)
            }
            "api_timeout_ms" => o.api_timeout(ms(&v)?),
            "connect_timeout_ms" => o.connect_timeout(ms(&v)?),
            "poll_name_server_interval_ms" => o.poll_name_server_interval(ms(&v)?),
            "heartbeat_interval_ms" => o.heartbeat_interval(ms(&v)?),
            "max_frame_size" => o.max_frame_size(v.extract::<usize>()?),
            "async_permits" => o.async_permits(v.extract::<usize>()?),
            "callback_threads" => o.callback_threads(v.extract::<usize>()?),
            "shutdown_timeout_ms" => o.shutdown_timeout(ms(&v)?),
            "serialize_type" => o.serialize_type(match v.extract::<String>()?.as_str() {
                "json" => rmq::SerializeType::Json,
                "rocketmq" => rmq::SerializeType::RocketMq,
                other => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "serialize_type must be \"json\" or \"rocketmq\", not {other:?}"
                    )))
                }
            }),
            other => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "unknown client option {other:?}"
                )))
            }
        };
    }
    Ok(o)
}

/// Registers what makes the errors raised (the package's `_error`, which picks the
/// subclass of `RocketMQError` of each kind).
#[pyfunction]
fn set_error_class(py: Python<'_>, make: Py<PyAny>) {
    // A second registration (a reloaded package) keeps the first factory.
    let _ = ERROR_CLASS.set(py, make);
}

/// The least severe library records forwarded to `logging`, as a Python level (the
/// default is `WARNING`).
#[pyfunction]
fn set_log_level(level: i32) {
    log_bridge::set_level(level);
}

/// The library's version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Creates `topic` with `queues` read and write queues on every master broker.
#[pyfunction]
fn create_topic(py: Python<'_>, common: Common<'_>, topic: &str, queues: u32) -> PyResult<()> {
    let b = Admin::builder().client_options(client_options(&common)?);
    py.detach(|| {
        b.start()?
            .create_topic(&TopicConfig::new(topic, queues))
            .map(drop)
    })
    .or_raise(py)
}

/// A message from the Python layer's tuple `(topic, body, tags, keys, properties,
/// delay_level, deliver_time_ms, delivery_delay_ms)`.
type MessageTuple<'py> = (
    String,
    Bound<'py, PyBytes>,
    Option<String>,
    Vec<String>,
    HashMap<String, String>,
    Option<u32>,
    Option<u64>,
    Option<u64>,
);

fn message(py: Python<'_>, t: MessageTuple<'_>) -> PyResult<rmq::Message> {
    let (topic, body, tags, keys, properties, delay_level, deliver_at, delay) = t;
    let mut m = rmq::Message::new(topic, body.as_bytes().to_vec());
    if let Some(tags) = tags {
        m.set_tags(tags);
    }
    if !keys.is_empty() {
        m.set_keys(keys);
    }
    for (k, v) in properties {
        m.put_user_property(k, v).or_raise(py)?;
    }
    set_delays(&mut m, delay_level, deliver_at, delay);
    Ok(m)
}

/// Sets a message's delay level and timer (milliseconds since the epoch, or after the
/// store) where given.
fn set_delays(
    m: &mut rmq::Message,
    delay_level: Option<u32>,
    deliver_at: Option<u64>,
    delay: Option<u64>,
) {
    if let Some(level) = delay_level {
        m.set_delay_time_level(level);
    }
    // A timer message (5.x brokers); the send checks the time against the broker's limits.
    if let Some(ms) = deliver_at {
        m.set_deliver_time(UNIX_EPOCH + Duration::from_millis(ms));
    }
    if let Some(ms) = delay {
        m.set_delivery_delay(Duration::from_millis(ms));
    }
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The Python layer's value of a send status.
fn status_code(s: SendStatus) -> i32 {
    match s {
        SendStatus::Ok => 0,
        SendStatus::FlushDiskTimeout => 1,
        SendStatus::FlushSlaveTimeout => 2,
        SendStatus::SlaveNotAvailable => 3,
    }
}

/// `(msg_id, offset_msg_id, broker_name, queue_id, queue_offset, status)`.
fn send_result<'py>(py: Python<'py>, r: &rmq::SendResult) -> PyResult<Bound<'py, PyTuple>> {
    let status = status_code(r.send_status());
    let q = r.message_queue();
    (
        r.msg_id(),
        r.offset_msg_id(),
        q.broker_name(),
        q.queue_id(),
        r.queue_offset(),
        status,
    )
        .into_pyobject(py)
}

/// A received message as `PushConsumer.send_message_back` passes it: `(topic,
/// broker_name, queue_id, queue_offset, body, properties, store_host, commit_log_offset,
/// reconsume_times)`, the properties all of them, the system's included.
type SentBackTuple<'py> = (
    String,
    String,
    i32,
    i64,
    Bound<'py, PyBytes>,
    HashMap<String, String>,
    String,
    i64,
    u32,
);

/// The reply to a request message, made when the request arrives (the library builds
/// a reply only from the message as received): [`rmq::create_reply_message`] without
/// its body, which `Producer.send_reply` sets.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct ReplyTemplate {
    message: rmq::Message,
}

/// The reply template of `m` if it is a request (it has a correlation id and is no
/// reply itself).
fn reply_template(m: &MessageExt) -> Option<ReplyTemplate> {
    m.property("CORRELATION_ID")?;
    if m.property("MSG_TYPE") == Some("reply") {
        return None;
    }
    rmq::create_reply_message(m, Vec::new())
        .ok()
        .map(|message| ReplyTemplate { message })
}

/// `(msg_id, topic, tags, keys, body, queue_id, queue_offset, reconsume_times,
/// born_timestamp_ms, store_timestamp_ms, properties, broker_name, commit_log_offset,
/// store_host, reply)`; the properties are all of them, system ones included (Java
/// `getProperties`); `store_host` is `ip:port`; `reply` is a [`ReplyTemplate`] for a
/// request, else `None`.
fn received<'py>(py: Python<'py>, m: &MessageExt) -> PyResult<Bound<'py, PyTuple>> {
    let properties = PyDict::new(py);
    for (k, v) in m.properties() {
        properties.set_item(k, v)?;
    }
    let reply = reply_template(m).map(|t| Bound::new(py, t)).transpose()?;
    // Past the twelve items a tuple converts by itself.
    let head = (
        m.msg_id(),
        m.topic(),
        m.tags(),
        m.keys().collect::<Vec<_>>(),
        PyBytes::new(py, m.body()),
        m.queue_id(),
        m.queue_offset(),
        m.reconsume_times(),
        millis(m.born_timestamp()),
        millis(m.store_timestamp()),
        properties,
        m.broker_name(),
    )
        .into_pyobject(py)?;
    let tail = (m.commit_log_offset(), m.store_host().to_string(), reply).into_pyobject(py)?;
    PyTuple::new(py, head.iter().chain(tail.iter()).collect::<Vec<_>>())
}

/// `(topic, body, tags, keys, properties, None, None, None)`, the form of a Python
/// `Message`; the properties are all of them, system ones included (`UNIQ_KEY`: the
/// message id, the `TIMER_*` ones of a timer message).
fn message_tuple<'py>(py: Python<'py>, m: &rmq::Message) -> PyResult<Bound<'py, PyTuple>> {
    let properties = PyDict::new(py);
    for (k, v) in m.properties() {
        properties.set_item(k, v)?;
    }
    (
        m.topic(),
        PyBytes::new(py, m.body()),
        m.tags(),
        m.keys().collect::<Vec<_>>(),
        properties,
        py.None(),
        py.None(),
        py.None(),
    )
        .into_pyobject(py)
}

fn received_list<'py>(py: Python<'py>, msgs: &[MessageExt]) -> PyResult<Bound<'py, PyList>> {
    let items = msgs
        .iter()
        .map(|m| received(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

thread_local! {
    /// The gates whose callback this thread is running now.
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Counts one client's Python callbacks that are running or still to come (listener
/// calls, async sends' callbacks) and closes the door on new ones, so that `free` returns
/// only once no callback of the client runs Python code.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    idle: Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    /// Passes alive: callbacks running or still to come.
    admitted: usize,
    /// Passes inside their callback now.
    running: usize,
    /// `free` stopped waiting for passes that had not started: they never will.
    abandoned: bool,
}

/// One admitted callback; dropping it leaves the gate.
struct Pass(Arc<Gate>);

impl Gate {
    fn enter(gate: &Arc<Gate>) -> Option<Pass> {
        let mut s = gate.state.lock();
        if s.closed {
            return None;
        }
        s.admitted += 1;
        Some(Pass(gate.clone()))
    }

    fn id(&self) -> usize {
        self as *const Gate as usize
    }

    /// Closes the gate and waits for the admitted passes to leave; those that have not
    /// started when `bound` expires never will. From inside one of its own callbacks it
    /// does not wait (it would wait for itself).
    fn close_and_wait(&self, bound: Option<Duration>) {
        let mut s = self.state.lock();
        s.closed = true;
        let me = self.id();
        if INSIDE
            .try_with(|v| v.borrow().contains(&me))
            .unwrap_or(false)
        {
            return;
        }
        let deadline = bound.map(|b| Instant::now() + b);
        while s.admitted > 0 {
            match deadline {
                Some(d) if Instant::now() >= d => {
                    s.abandoned = true;
                    while s.running > 0 {
                        self.idle.wait(&mut s);
                    }
                    return;
                }
                Some(d) => {
                    self.idle.wait_until(&mut s, d);
                }
                None => self.idle.wait(&mut s),
            }
        }
    }
}

impl Pass {
    /// Runs `f` as a callback of this pass's gate; `None`, without running it, once
    /// `free` has stopped waiting for it.
    fn call<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let gate: &Gate = &self.0;
        {
            let mut s = gate.state.lock();
            if s.abandoned {
                return None;
            }
            s.running += 1;
        }
        struct Leave<'a>(&'a Gate);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let me = self.0.id();
                let _ = INSIDE.try_with(|v| {
                    let mut v = v.borrow_mut();
                    if let Some(i) = v.iter().rposition(|&g| g == me) {
                        v.remove(i);
                    }
                });
                let mut s = self.0.state.lock();
                s.running -= 1;
                self.0.idle.notify_all();
            }
        }
        let _leave = Leave(gate);
        let _ = INSIDE.try_with(|v| v.borrow_mut().push(gate.id()));
        Some(f())
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.admitted -= 1;
        self.0.idle.notify_all();
    }
}

/// Runs `f` as a call on the client `calls` guards: the "closed" error once its `free`
/// began, which waits for the calls inside (except one on its own thread).
fn guarded<R>(calls: &Arc<Gate>, py: Python<'_>, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    let closed = || py_error(py, "RMQ_STATE", "the client is closed".into(), None, false);
    let pass = Gate::enter(calls).ok_or_else(closed)?;
    pass.call(f).unwrap_or_else(|| Err(closed()))
}

/// Calls `f` with the GIL, printing what it raises as unraisable (the Python layer's
/// callbacks catch everything themselves); `None` when the interpreter is gone.
fn call_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> PyResult<R>) -> Option<R> {
    Python::try_attach(|py| match f(py) {
        Ok(r) => Some(r),
        Err(e) => {
            e.write_unraisable(py, None);
            None
        }
    })
    .flatten()
}

/// A snapshot's JSON with `errors` (Python hooks that raised) added to its
/// `hook_panics`: what the Python layer's `stats()` parses.
fn stats_with_hook_errors(mut v: serde_json::Value, errors: &AtomicU64) -> String {
    let panics = v["hook_panics"].as_u64().unwrap_or(0);
    v["hook_panics"] = serde_json::Value::from(panics + errors.load(Ordering::Relaxed));
    v.to_string()
}

/// A Python send hook: the Python layer's `before(message_tuple)` returns the properties
/// to add (`None` when the user's hook raised, already logged there), `after(message,
/// result, error)` returns whether the user's hook ran without raising. Each call passes
/// the producer's gate, so `free` waits for it.
struct PySendHook {
    before: Py<PyAny>,
    after: Py<PyAny>,
    gate: Arc<Gate>,
    errors: Arc<AtomicU64>,
}

impl PySendHook {
    fn failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

impl rmq::SendHook for PySendHook {
    fn before_send(&self, ctx: &mut rmq::SendContext<'_>) {
        let Some(pass) = Gate::enter(&self.gate) else {
            return;
        };
        let props = pass
            .call(|| {
                call_python(|py| {
                    let m = message_tuple(py, ctx.message())?;
                    self.before
                        .call1(py, (m,))?
                        .extract::<Option<HashMap<String, String>>>(py)
                })
            })
            .flatten();
        let Some(Some(props)) = props else {
            return self.failed();
        };
        for (k, v) in props {
            if let Err(e) = ctx.message_mut().put_user_property(k, v) {
                log::warn!("a Python send hook's property was refused: {e}");
                self.failed();
            }
        }
    }

    fn after_send(
        &self,
        ctx: &rmq::SendContext<'_>,
        result: Result<Option<&rmq::SendResult>, &rmq::Error>,
    ) {
        let Some(pass) = Gate::enter(&self.gate) else {
            return;
        };
        let ok = pass
            .call(|| {
                call_python(|py| {
                    let m = message_tuple(py, ctx.message())?;
                    let (r, e) = match result {
                        Ok(r) => (r.map(|r| send_result(py, r)).transpose()?, None),
                        Err(e) => (None, Some(to_py_ref(py, e).into_value(py))),
                    };
                    self.after.call1(py, (m, r, e))?.extract::<bool>(py)
                })
            })
            .flatten();
        if ok != Some(true) {
            self.failed();
        }
    }
}

/// A Python consume hook: the Python layer's `before(messages)` and `after(messages,
/// status)` return whether the user's hook ran without raising; `status` is 0 success,
/// 1 reconsume later, 2 suspend, 3 failed (the C header's `rmq_consume_hook_status`).
struct PyConsumeHook {
    before: Py<PyAny>,
    after: Py<PyAny>,
    gate: Arc<Gate>,
    errors: Arc<AtomicU64>,
}

impl PyConsumeHook {
    fn run(&self, msgs: &[MessageExt], status: Option<i32>) {
        let Some(pass) = Gate::enter(&self.gate) else {
            return;
        };
        let ok = pass
            .call(|| {
                call_python(|py| {
                    let list = received_list(py, msgs)?;
                    let r = match status {
                        None => self.before.call1(py, (list,))?,
                        Some(s) => self.after.call1(py, (list, s))?,
                    };
                    r.extract::<bool>(py)
                })
            })
            .flatten();
        if ok != Some(true) {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl rmq::ConsumeHook for PyConsumeHook {
    fn before_consume(&self, ctx: &rmq::ConsumeContext<'_>) {
        self.run(ctx.messages(), None);
    }

    fn after_consume(&self, ctx: &rmq::ConsumeContext<'_>) {
        let status = match ctx.status() {
            Some(rmq::ConsumeHookStatus::Success) => 0,
            Some(rmq::ConsumeHookStatus::ReconsumeLater) => 1,
            Some(rmq::ConsumeHookStatus::SuspendCurrentQueue) => 2,
            _ => 3,
        };
        self.run(ctx.messages(), Some(status));
    }
}

/// `(before, after)` callables of a hook, from the Python layer.
type HookPair = (Py<PyAny>, Py<PyAny>);

/// Auto-batching on, with `(batch_max_delay_ms, batch_max_bytes, total_batch_max_bytes)`
/// where given (Java's defaults where `None`).
type AutoBatch = (Option<u64>, Option<usize>, Option<usize>);

/// A started producer.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct Producer {
    inner: rmq::Producer,
    /// The sends inside the library (they take no Python-level guard).
    calls: Arc<Gate>,
    /// Async sends whose callback has not run yet, and send hooks running.
    pending: Arc<Gate>,
    send_timeout: Duration,
    /// Python send hooks that raised.
    hook_errors: Arc<AtomicU64>,
}

#[pymethods]
impl Producer {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        group: String,
        common: Common<'_>,
        send_timeout_ms: Option<u64>,
        retries: Option<u32>,
        send_hook: Option<HookPair>,
        trace: Trace,
        auto_batch: Option<AutoBatch>,
    ) -> PyResult<Self> {
        let mut b = traced(
            rmq::Producer::builder(group).client_options(client_options(&common)?),
            trace,
        );
        if let Some(ms) = send_timeout_ms {
            b = b.send_timeout(Duration::from_millis(ms));
        }
        if let Some(r) = retries {
            b = b.retries(r);
        }
        if let Some((delay_ms, max_bytes, total_max_bytes)) = auto_batch {
            b = b.auto_batch(true);
            if let Some(ms) = delay_ms {
                b = b.batch_max_delay(Duration::from_millis(ms));
            }
            if let Some(n) = max_bytes {
                b = b.batch_max_bytes(n);
            }
            if let Some(n) = total_max_bytes {
                b = b.total_batch_max_bytes(n);
            }
        }
        let pending = Arc::<Gate>::default();
        let hook_errors = Arc::<AtomicU64>::default();
        if let Some((before, after)) = send_hook {
            b = b.send_hook(Arc::new(PySendHook {
                before,
                after,
                gate: pending.clone(),
                errors: hook_errors.clone(),
            }));
        }
        let inner = py.detach(|| b.start()).or_raise(py)?;
        let send_timeout = inner.options().send_timeout;
        Ok(Producer {
            inner,
            calls: Arc::default(),
            pending,
            send_timeout,
            hook_errors,
        })
    }

    /// The producer's stats snapshot as JSON (`stats_json.rs`), Python hook errors
    /// counted in `hook_panics`.
    fn stats(&self) -> String {
        stats_with_hook_errors(stats_json::producer(&self.inner.stats()), &self.hook_errors)
    }

    /// `(sent, failed, dropped)` of the message trace, `None` when it is off.
    fn trace_stats(&self) -> Option<(u64, u64, u64)> {
        self.inner.trace_stats().map(trace_tuple)
    }

    /// Sends and waits for the broker; the send result's tuple. With `queue`, to that
    /// queue and no other; with `key`, to the queue Java's `SelectMessageQueueByHash`
    /// picks for it, so messages of one key keep their order.
    #[pyo3(signature = (m, queue=None, key=None))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        m: &Bound<'py, PyAny>,
        queue: Option<QueueTuple>,
        key: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(&self.calls, py, || {
            send_sync(py, &self.inner, m, queue, key)
        })
    }

    /// The queues of `topic` a send can go to: `(topic, broker_name, queue_id)` tuples.
    fn fetch_queues(&self, py: Python<'_>, topic: &str) -> PyResult<Vec<(String, String, i32)>> {
        let qs = py
            .detach(|| self.inner.fetch_publish_message_queues(topic))
            .or_raise(py)?;
        Ok(qs.iter().map(queue_tuple).collect())
    }

    fn send_oneway<'py>(&self, py: Python<'py>, m: &Bound<'py, PyAny>) -> PyResult<()> {
        guarded(&self.calls, py, || send_oneway(py, &self.inner, m))
    }

    fn send_batch<'py>(
        &self,
        py: Python<'py>,
        ms: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(&self.calls, py, || send_batch(py, &self.inner, &ms))
    }

    /// Sends without waiting; `done(result, error)` runs later on a library thread with
    /// the send result's tuple or the error (the other `None`). When this raises,
    /// `done` is never called.
    fn send_async<'py>(
        &self,
        py: Python<'py>,
        m: &Bound<'py, PyAny>,
        done: Py<PyAny>,
    ) -> PyResult<()> {
        guarded(&self.calls, py, || {
            let m = objects::message_of(py, m)?;
            let pass = self.enter_pending(py)?;
            let callback = completion(pass, done, "send_async", objects::send_result_of);
            py.detach(|| self.inner.send_async(m, callback))
                .map_err(|e| to_py(py, e.into()))
        })
    }

    /// Sends `m` as a request and waits up to `timeout_ms` for its reply; the reply's
    /// received-message tuple.
    fn request<'py>(
        &self,
        py: Python<'py>,
        m: MessageTuple<'py>,
        timeout_ms: u64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let m = message(py, m)?;
        let reply = py
            .detach(|| self.inner.request(&m, Duration::from_millis(timeout_ms)))
            .or_raise(py)?;
        received(py, &reply)
    }

    /// [`request`](Self::request) without waiting: `done(reply, error)` runs later on a
    /// library thread with the reply's received-message tuple or the error (the other
    /// `None`). When this raises, `done` is never called.
    fn request_async<'py>(
        &self,
        py: Python<'py>,
        m: MessageTuple<'py>,
        timeout_ms: u64,
        done: Py<PyAny>,
    ) -> PyResult<()> {
        let m = message(py, m)?;
        let pass = self.enter_pending(py)?;
        let callback = completion(pass, done, "request_async", |py, reply: &MessageExt| {
            Ok(received(py, reply)?.into_any())
        });
        py.detach(|| {
            self.inner
                .request_async(m, Duration::from_millis(timeout_ms), callback)
        })
        .or_raise(py)
    }

    /// Sends the reply `template` stands for, with `body`.
    fn send_reply<'py>(
        &self,
        py: Python<'py>,
        template: &Bound<'py, ReplyTemplate>,
        body: &[u8],
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut m = template.get().message.clone();
        m.set_body(body.to_vec());
        let r = py.detach(|| self.inner.send(&m)).or_raise(py)?;
        send_result(py, &r)
    }

    /// Shuts down, then waits (up to the send timeout plus 10 s) for the callbacks of
    /// async sends in flight; callbacks that have not started by then never run.
    fn free(&self, py: Python<'_>) {
        py.detach(|| {
            self.calls.close_and_wait(None);
            self.inner.shutdown();
            self.pending
                .close_and_wait(Some(self.send_timeout + Duration::from_secs(10)));
        })
    }
}

impl Producer {
    /// A pass for a callback to come, or the "shutting down" error.
    fn enter_pending(&self, py: Python<'_>) -> PyResult<Pass> {
        Gate::enter(&self.pending).ok_or_else(|| {
            py_error(
                py,
                "RMQ_STATE",
                "the producer is shutting down".into(),
                None,
                false,
            )
        })
    }
}

/// A sync send of `p` (see `Producer.send`), shared with the transaction producer.
fn send_sync<'py>(
    py: Python<'py>,
    p: &rmq::Producer,
    m: &Bound<'py, PyAny>,
    queue: Option<QueueTuple>,
    key: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = objects::message_of(py, m)?;
    let r = py
        .detach(|| match (queue, key) {
            (Some(q), _) => p.send_to_queue(&m, &queue_of(q)),
            (None, Some(key)) => p.send_with_selector(&m, &SelectMessageQueueByHash, &key),
            (None, None) => p.send(&m),
        })
        .or_raise(py)?;
    objects::send_result_of(py, &r)
}

fn send_oneway<'py>(py: Python<'py>, p: &rmq::Producer, m: &Bound<'py, PyAny>) -> PyResult<()> {
    let m = objects::message_of(py, m)?;
    py.detach(|| p.send_oneway(&m)).or_raise(py)
}

fn send_batch<'py>(
    py: Python<'py>,
    p: &rmq::Producer,
    ms: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let ms = ms
        .iter()
        .map(|m| objects::message_of(py, m))
        .collect::<PyResult<Vec<_>>>()?;
    let r = py.detach(|| p.send_batch(&ms)).or_raise(py)?;
    objects::send_result_of(py, &r)
}

/// The library's callback of an async call that calls `done(value, error)` (the other
/// `None`) through `pass`, with `value` made by `to_value`; a callback that comes after
/// `free` gave up waiting is only reported.
fn completion<T: Send + 'static>(
    pass: Pass,
    done: Py<PyAny>,
    what: &'static str,
    to_value: impl for<'py> FnOnce(Python<'py>, &T) -> PyResult<Bound<'py, PyAny>> + Send + 'static,
) -> impl FnOnce(rmq::Result<T>) + Send {
    move |r: rmq::Result<T>| {
        deferred::run(move |py| {
            let called = pass.call(|| {
                let call = || -> PyResult<()> {
                    let args = match r {
                        Ok(v) => (to_value(py, &v)?, py.None().into_bound(py)),
                        Err(e) => (
                            py.None().into_bound(py),
                            to_py(py, e).into_value(py).into_bound(py).into_any(),
                        ),
                    };
                    done.call1(py, args)?;
                    drop(done);
                    Ok(())
                };
                if let Err(e) = call() {
                    objects::callback_raised(py, what, e);
                }
            });
            if called.is_none() {
                rmq_log_late_callback();
            }
        })
    }
}

/// `(trace_enabled, trace_topic)` as the Python layer passes them: a topic turns the
/// trace on.
type Trace = (bool, Option<String>);

/// `b` with the message trace as the Python layer asked.
fn traced(b: rmq::ProducerBuilder, trace: Trace) -> rmq::ProducerBuilder {
    match trace {
        (_, Some(topic)) => b.trace_topic(topic),
        (on, None) => b.enable_msg_trace(on),
    }
}

fn trace_tuple(t: rmq::TraceStats) -> (u64, u64, u64) {
    (t.sent, t.failed, t.dropped)
}

fn rmq_log_late_callback() {
    // Not through `log`: nothing here installs a logger; the Python layer documents this.
    eprintln!("rocketmq_blocking: an async send ended after close() gave up waiting for it: its callback is not called");
}

/// A state from the Python layer's `LocalTransactionState` value: 0 commit, 1 roll
/// back, anything else unknown.
fn transaction_state(v: i64) -> rmq::LocalTransactionState {
    match v {
        0 => rmq::LocalTransactionState::CommitMessage,
        1 => rmq::LocalTransactionState::RollbackMessage,
        _ => rmq::LocalTransactionState::Unknown,
    }
}

fn transaction_state_value(s: rmq::LocalTransactionState) -> i64 {
    match s {
        rmq::LocalTransactionState::CommitMessage => 0,
        rmq::LocalTransactionState::RollbackMessage => 1,
        rmq::LocalTransactionState::Unknown => 2,
    }
}

/// One transaction callback: `f` with the GIL, through `gate`; unknown when the gate is
/// closed, the callback failed or the interpreter is finalizing (the Python layer's
/// callbacks catch and log what the user's code raises).
fn transaction_callback(
    gate: &Arc<Gate>,
    f: impl for<'py> FnOnce(Python<'py>) -> PyResult<i64>,
) -> rmq::LocalTransactionState {
    let Some(pass) = Gate::enter(gate) else {
        return rmq::LocalTransactionState::Unknown;
    };
    pass.call(|| call_python(f))
        .flatten()
        .map_or(rmq::LocalTransactionState::Unknown, transaction_state)
}

/// A started transactional producer.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct TransactionProducer {
    inner: rmq::TransactionProducer,
    /// The sends inside the library (they take no Python-level guard).
    calls: Arc<Gate>,
    /// Local transactions and checks running or about to.
    gate: Arc<Gate>,
}

#[pymethods]
impl TransactionProducer {
    /// `execute(message_tuple, arg)` runs a local transaction, `check(received_tuple)`
    /// answers a broker's check; both return a state's value (0, 1 or 2).
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        group: String,
        execute: Py<PyAny>,
        check: Py<PyAny>,
        common: Common<'_>,
        send_timeout_ms: Option<u64>,
        retries: Option<u32>,
        trace: Trace,
    ) -> PyResult<Self> {
        let mut b = traced(
            rmq::Producer::builder(group).client_options(client_options(&common)?),
            trace,
        );
        if let Some(ms) = send_timeout_ms {
            b = b.send_timeout(Duration::from_millis(ms));
        }
        if let Some(r) = retries {
            b = b.retries(r);
        }
        let gate = Arc::<Gate>::default();
        let (g1, g2) = (gate.clone(), gate.clone());
        let on_execute = move |m: &rmq::Message, arg: &dyn std::any::Any| {
            transaction_callback(&g1, |py| {
                let arg = arg
                    .downcast_ref::<Py<PyAny>>()
                    .map_or_else(|| py.None(), |a| a.clone_ref(py));
                execute
                    .call1(py, (message_tuple(py, m)?, arg))?
                    .extract::<i64>(py)
            })
        };
        let on_check = move |m: &MessageExt| {
            transaction_callback(&g2, |py| {
                check.call1(py, (received(py, m)?,))?.extract::<i64>(py)
            })
        };
        let b = b.transactional((on_execute, on_check));
        let inner = py.detach(|| b.start()).or_raise(py)?;
        Ok(TransactionProducer {
            inner,
            calls: Arc::default(),
            gate,
        })
    }

    /// `(sent, failed, dropped)` of the message trace, `None` when it is off.
    fn trace_stats(&self) -> Option<(u64, u64, u64)> {
        self.inner.producer().trace_stats().map(trace_tuple)
    }

    /// An ordinary send, as `Producer.send` (Java's `TransactionMQProducer` is a producer).
    #[pyo3(signature = (m, queue=None, key=None))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        m: &Bound<'py, PyAny>,
        queue: Option<QueueTuple>,
        key: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(&self.calls, py, || {
            send_sync(py, self.inner.producer(), m, queue, key)
        })
    }

    fn send_oneway<'py>(&self, py: Python<'py>, m: &Bound<'py, PyAny>) -> PyResult<()> {
        guarded(&self.calls, py, || {
            send_oneway(py, self.inner.producer(), m)
        })
    }

    fn send_batch<'py>(
        &self,
        py: Python<'py>,
        ms: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(&self.calls, py, || {
            send_batch(py, self.inner.producer(), &ms)
        })
    }

    /// Sends the half message, runs the local transaction with `arg` on this thread and
    /// ends the transaction; `(send result tuple, state value)`.
    fn send_in_transaction<'py>(
        &self,
        py: Python<'py>,
        m: MessageTuple<'py>,
        arg: Py<PyAny>,
    ) -> PyResult<(Bound<'py, PyTuple>, i64)> {
        let m = message(py, m)?;
        let r = py
            .detach(|| self.inner.send_in_transaction(&m, &arg))
            .or_raise(py)?;
        Ok((
            send_result(py, r.send_result())?,
            transaction_state_value(r.local_transaction_state()),
        ))
    }

    /// Shuts down (the checks queued run first) and returns once no callback runs.
    fn free(&self, py: Python<'_>) {
        py.detach(|| {
            self.calls.close_and_wait(None);
            self.inner.shutdown();
            self.gate.close_and_wait(None);
        })
    }
}

fn consume_from(from_first: bool) -> ConsumeFromWhere {
    if from_first {
        ConsumeFromWhere::FirstOffset
    } else {
        ConsumeFromWhere::LastOffset
    }
}

/// What a listener call came to, as the Python layer's `on_messages(messages, queue)`
/// returns it: `(status, ack_index, delay_level, suspend_ms)`, status 0 to acknowledge,
/// the rest the consume context's settings (`None`: left as they were).
/// `(client_rebalance, pop_invisible_time_ms, pop_batch_nums, pop_batch_ack)` of a push
/// consumer.
type PopMode = (bool, Option<u64>, Option<u32>, bool);

type ListenerAnswer = (i64, Option<i64>, Option<i64>, Option<u64>);

/// One listener call: its answer, or `None` when there is none (an exception, a closed
/// gate, a finalizing interpreter, an answer of the wrong shape), which means "again
/// later".
fn listen(
    gate: &Arc<Gate>,
    on_messages: &Py<PyAny>,
    msgs: &[MessageExt],
    queue: QueueTuple,
) -> Option<ListenerAnswer> {
    let pass = Gate::enter(gate)?;
    pass.call(|| {
        call_python(|py| {
            let answer = on_messages.call1(py, (received_list(py, msgs)?, queue))?;
            answer.extract::<ListenerAnswer>(py)
        })
    })
    .flatten()
}

/// A delay level as the Python layer gives it: 0 the broker's choice, below 0 straight
/// to the dead-letter queue, a level otherwise (Java `delayLevelWhenNextConsume`).
fn reconsume_delay(level: i64) -> rmq::ReconsumeDelay {
    match level {
        0 => rmq::ReconsumeDelay::Broker,
        l if l < 0 => rmq::ReconsumeDelay::DeadLetter,
        l => rmq::ReconsumeDelay::Level(u32::try_from(l).unwrap_or(u32::MAX)),
    }
}

/// A concurrent listener's answer applied to its context (Java's `ackIndex` and
/// `delayLevelWhenNextConsume`): success with a negative ack index consumes none.
fn concurrent_status(
    answer: Option<ListenerAnswer>,
    ctx: &mut rmq::ConsumeConcurrentlyContext,
) -> ConsumeStatus {
    let Some((status, ack_index, delay, _)) = answer else {
        return ConsumeStatus::ReconsumeLater;
    };
    if let Some(level) = delay {
        ctx.set_reconsume_delay(reconsume_delay(level));
    }
    match (status, ack_index) {
        (0, None) => ConsumeStatus::Success,
        (0, Some(i)) => match usize::try_from(i) {
            Ok(i) => {
                ctx.set_ack_index(i);
                ConsumeStatus::Success
            }
            Err(_) => ConsumeStatus::ReconsumeLater,
        },
        _ => ConsumeStatus::ReconsumeLater,
    }
}

/// An orderly listener's answer applied to its context (Java
/// `suspendCurrentQueueTimeMillis`).
fn orderly_status(
    answer: Option<ListenerAnswer>,
    ctx: &mut rmq::ConsumeOrderlyContext,
) -> ConsumeOrderlyStatus {
    let Some((status, _, _, suspend_ms)) = answer else {
        return ConsumeOrderlyStatus::Suspend;
    };
    if let Some(ms) = suspend_ms {
        ctx.set_suspend_time(Duration::from_millis(ms));
    }
    if status == 0 {
        ConsumeOrderlyStatus::Success
    } else {
        ConsumeOrderlyStatus::Suspend
    }
}

/// A started push consumer.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct PushConsumer {
    inner: rmq::PushConsumer,
    /// Listener and consume hook calls running or about to.
    gate: Arc<Gate>,
    /// Python consume hooks that raised.
    hook_errors: Arc<AtomicU64>,
}

#[pymethods]
impl PushConsumer {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        group: String,
        topic: String,
        on_messages: Py<PyAny>,
        common: Common<'_>,
        expression: &str,
        sql: Option<String>,
        orderly: bool,
        broadcasting: bool,
        from_first: bool,
        threads: Option<(usize, usize)>,
        batch_max_size: Option<usize>,
        consume_hook: Option<HookPair>,
        trace: Trace,
        pop: PopMode,
    ) -> PyResult<Self> {
        let mut b = rmq::PushConsumer::builder(group).client_options(client_options(&common)?);
        let (client_rebalance, invisible_ms, batch, batch_ack) = pop;
        b = b
            .client_rebalance(client_rebalance)
            .pop_batch_ack(batch_ack);
        if let Some(ms) = invisible_ms {
            b = b.pop_invisible_time(Duration::from_millis(ms));
        }
        if let Some(n) = batch {
            b = b.pop_batch_nums(n);
        }
        b = match trace {
            (_, Some(topic)) => b.trace_topic(topic),
            (on, None) => b.enable_msg_trace(on),
        };
        b = match sql {
            Some(sql) => b.subscribe_with(topic, MessageSelector::by_sql(sql)),
            None => b.subscribe(topic, expression),
        };
        b = b.message_model(if broadcasting {
            MessageModel::Broadcasting
        } else {
            MessageModel::Clustering
        });
        b = b.consume_from_where(consume_from(from_first));
        if let Some((min, max)) = threads {
            b = b.consume_thread_min(min).consume_thread_max(max);
        }
        if let Some(n) = batch_max_size {
            b = b.consume_message_batch_max_size(n);
        }
        let gate = Arc::<Gate>::default();
        let hook_errors = Arc::<AtomicU64>::default();
        if let Some((before, after)) = consume_hook {
            b = b.consume_hook(Arc::new(PyConsumeHook {
                before,
                after,
                gate: gate.clone(),
                errors: hook_errors.clone(),
            }));
        }
        let g = gate.clone();
        b = if orderly {
            b.orderly_listener(move |msgs, ctx| {
                let answer = listen(&g, &on_messages, msgs, queue_tuple(ctx.message_queue()));
                orderly_status(answer, ctx)
            })
        } else {
            b.listener(move |msgs, ctx| {
                let answer = listen(&g, &on_messages, msgs, queue_tuple(ctx.message_queue()));
                concurrent_status(answer, ctx)
            })
        };
        let inner = py.detach(|| b.start()).or_raise(py)?;
        Ok(PushConsumer {
            inner,
            gate,
            hook_errors,
        })
    }

    /// The consumer's stats snapshot as JSON, Python hook errors counted in `hook_panics`.
    fn stats(&self) -> String {
        stats_with_hook_errors(stats_json::consumer(&self.inner.stats()), &self.hook_errors)
    }

    /// Subscribes to one more topic while running (or replaces a topic's expression):
    /// tags, or SQL92 with `sql`.
    fn subscribe(
        &self,
        py: Python<'_>,
        topic: &str,
        expression: &str,
        sql: Option<String>,
    ) -> PyResult<()> {
        let selector = match sql {
            Some(sql) => MessageSelector::by_sql(sql),
            None => MessageSelector::by_tag(expression),
        };
        py.detach(|| self.inner.subscribe_with(topic, selector))
            .or_raise(py)
    }

    fn unsubscribe(&self, py: Python<'_>, topic: &str) -> PyResult<()> {
        py.detach(|| self.inner.unsubscribe(topic)).or_raise(py)
    }

    fn subscriptions(&self) -> Vec<String> {
        self.inner.subscriptions()
    }

    fn assigned_queues(&self) -> Vec<QueueTuple> {
        self.inner
            .assigned_queues()
            .iter()
            .map(queue_tuple)
            .collect()
    }

    fn suspend(&self) {
        self.inner.suspend()
    }

    /// Sends a message this consumer received back for redelivery after `delay_level`
    /// (0: the broker picks by its reconsume count, 1.. a delay level, below 0 the
    /// dead-letter queue); `m` is [`SentBackTuple`].
    fn send_message_back(
        &self,
        py: Python<'_>,
        m: SentBackTuple<'_>,
        delay_level: i32,
    ) -> PyResult<()> {
        let (
            topic,
            broker_name,
            queue_id,
            queue_offset,
            body,
            properties,
            store_host,
            commit_log_offset,
            reconsume_times,
        ) = m;
        let store_host: std::net::SocketAddr = store_host.parse().map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "store_host must be ip:port, not {store_host:?}"
            ))
        })?;
        let m = MessageExt::rebuilt(
            &MessageQueue::new(topic, broker_name, queue_id),
            queue_offset,
            body.as_bytes().to_vec(),
            properties.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            store_host,
            commit_log_offset,
            reconsume_times,
        );
        // As the C library's: the broker reads every negative level as "dead-letter queue".
        let delay = match u32::try_from(delay_level) {
            Ok(0) => rmq::ReconsumeDelay::Broker,
            Ok(l) => rmq::ReconsumeDelay::Level(l),
            Err(_) => rmq::ReconsumeDelay::DeadLetter,
        };
        py.detach(|| self.inner.send_message_back(&m, delay))
            .or_raise(py)
    }

    fn resume(&self) {
        self.inner.resume()
    }

    /// `(sent, failed, dropped)` of the message trace, `None` when it is off.
    fn trace_stats(&self) -> Option<(u64, u64, u64)> {
        self.inner.trace_stats().map(trace_tuple)
    }

    /// Shuts down and returns once every listener call in flight has returned (from
    /// inside a listener of this consumer it does not wait for that call).
    fn free(&self, py: Python<'_>) {
        py.detach(|| {
            self.inner.shutdown();
            self.gate.close_and_wait(None);
        })
    }
}

/// A queue as the Python layer passes it: `(topic, broker_name, queue_id)`.
type QueueTuple = (String, String, i32);

fn queue_tuple(q: &MessageQueue) -> QueueTuple {
    (
        q.topic().to_string(),
        q.broker_name().to_string(),
        q.queue_id(),
    )
}

fn queue_of((topic, broker_name, queue_id): QueueTuple) -> MessageQueue {
    MessageQueue::new(topic, broker_name, queue_id)
}

fn queues_of(queues: Vec<QueueTuple>) -> Vec<MessageQueue> {
    queues.into_iter().map(queue_of).collect()
}

/// A started lite pull consumer.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct LitePullConsumer {
    inner: rmq::LitePullConsumer,
}

#[pymethods]
impl LitePullConsumer {
    #[new]
    fn new(
        py: Python<'_>,
        group: String,
        topic: Option<String>,
        common: Common<'_>,
        expression: &str,
        from_first: bool,
        auto_commit: bool,
    ) -> PyResult<Self> {
        let mut b = rmq::LitePullConsumer::builder(group)
            .client_options(client_options(&common)?)
            .consume_from_where(consume_from(from_first))
            .auto_commit(auto_commit);
        // No topic: queues come by `assign`.
        if let Some(topic) = topic {
            b = b.subscribe(topic, expression);
        }
        let inner = py.detach(|| b.start()).or_raise(py)?;
        Ok(LitePullConsumer { inner })
    }

    /// Waits up to `timeout_ms` for messages; a list of received-message tuples.
    /// The consumer's stats snapshot as JSON (`stats_json.rs`).
    fn stats(&self) -> String {
        stats_json::consumer(&self.inner.stats()).to_string()
    }

    fn poll<'py>(&self, py: Python<'py>, timeout_ms: u64) -> PyResult<Bound<'py, PyList>> {
        let msgs = py
            .detach(|| self.inner.poll_timeout(Duration::from_millis(timeout_ms)))
            .or_raise(py)?;
        received_list(py, &msgs)
    }

    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.commit_sync()).or_raise(py)
    }

    /// Commits the given offsets (Java `commit(Map<MessageQueue, Long>, boolean)`).
    fn commit_offsets(
        &self,
        py: Python<'_>,
        offsets: Vec<(QueueTuple, i64)>,
        persist: bool,
    ) -> PyResult<()> {
        let map: std::collections::HashMap<MessageQueue, i64> =
            offsets.into_iter().map(|(q, o)| (queue_of(q), o)).collect();
        py.detach(|| self.inner.commit(&map, persist)).or_raise(py)
    }

    /// The readable queues of `topic` (Java `fetchMessageQueues`).
    fn fetch_message_queues(&self, py: Python<'_>, topic: &str) -> PyResult<Vec<QueueTuple>> {
        let qs = py
            .detach(|| self.inner.fetch_message_queues(topic))
            .or_raise(py)?;
        Ok(qs.iter().map(queue_tuple).collect())
    }

    fn subscribe(&self, py: Python<'_>, topic: &str, expression: &str) -> PyResult<()> {
        py.detach(|| self.inner.subscribe(topic, expression))
            .or_raise(py)
    }

    fn unsubscribe(&self, py: Python<'_>, topic: &str) -> PyResult<()> {
        py.detach(|| self.inner.unsubscribe(topic)).or_raise(py)
    }

    /// Takes these queues, `(topic, broker_name, queue_id)` tuples.
    fn assign(&self, py: Python<'_>, queues: Vec<QueueTuple>) -> PyResult<()> {
        let qs = queues_of(queues);
        py.detach(|| self.inner.assign(&qs)).or_raise(py)
    }

    fn assignment(&self) -> Vec<QueueTuple> {
        self.inner.assignment().iter().map(queue_tuple).collect()
    }

    fn seek(&self, py: Python<'_>, queue: QueueTuple, offset: i64) -> PyResult<()> {
        let q = queue_of(queue);
        py.detach(|| self.inner.seek(&q, offset)).or_raise(py)
    }

    fn seek_to_begin(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<()> {
        let q = queue_of(queue);
        py.detach(|| self.inner.seek_to_begin(&q)).or_raise(py)
    }

    fn seek_to_end(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<()> {
        let q = queue_of(queue);
        py.detach(|| self.inner.seek_to_end(&q)).or_raise(py)
    }

    fn committed(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<Option<i64>> {
        let q = queue_of(queue);
        py.detach(|| self.inner.committed(&q)).or_raise(py)
    }

    fn offset_for_timestamp(
        &self,
        py: Python<'_>,
        queue: QueueTuple,
        timestamp_ms: u64,
    ) -> PyResult<i64> {
        let q = queue_of(queue);
        let t = UNIX_EPOCH + Duration::from_millis(timestamp_ms);
        py.detach(|| self.inner.offset_for_timestamp(&q, t))
            .or_raise(py)
    }

    fn pause(&self, py: Python<'_>, queues: Vec<QueueTuple>) {
        let qs = queues_of(queues);
        py.detach(|| self.inner.pause(&qs))
    }

    fn resume(&self, py: Python<'_>, queues: Vec<QueueTuple>) {
        let qs = queues_of(queues);
        py.detach(|| self.inner.resume(&qs))
    }

    fn free(&self, py: Python<'_>) {
        py.detach(|| self.inner.shutdown())
    }
}

/// An admin client (Java `DefaultMQAdminExt`, in part).
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct NativeAdmin {
    inner: Admin,
}

#[pymethods]
impl NativeAdmin {
    #[new]
    fn new(py: Python<'_>, common: Common) -> PyResult<Self> {
        let b = Admin::builder().client_options(client_options(&common)?);
        let inner = py.detach(|| b.start()).or_raise(py)?;
        Ok(NativeAdmin { inner })
    }

    /// The queue's max offset (one past its last message) on its master.
    fn max_offset(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<i64> {
        let q = queue_of(queue);
        py.detach(|| self.inner.max_offset(&q)).or_raise(py)
    }

    fn min_offset(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<i64> {
        let q = queue_of(queue);
        py.detach(|| self.inner.min_offset(&q)).or_raise(py)
    }

    /// The offset of the first message stored at or after `timestamp_ms`.
    fn search_offset(&self, py: Python<'_>, queue: QueueTuple, timestamp_ms: u64) -> PyResult<i64> {
        let q = queue_of(queue);
        let at = UNIX_EPOCH + Duration::from_millis(timestamp_ms);
        py.detach(|| self.inner.search_offset(&q, at)).or_raise(py)
    }

    /// Moves `group`'s offsets in `topic`: to `timestamp_ms`, or with `None` to each
    /// queue's end (`earliest`: to its first message); the new offset of every queue.
    fn reset_offset(
        &self,
        py: Python<'_>,
        group: &str,
        topic: &str,
        timestamp_ms: Option<u64>,
        earliest: bool,
    ) -> PyResult<Vec<(QueueTuple, i64)>> {
        let target = match (timestamp_ms, earliest) {
            (_, true) => rmq::ResetTarget::Earliest,
            (Some(ms), false) => {
                rmq::ResetTarget::Timestamp(UNIX_EPOCH + Duration::from_millis(ms))
            }
            (None, false) => rmq::ResetTarget::Latest,
        };
        let moved = py
            .detach(|| self.inner.reset_offset(group, topic, target))
            .or_raise(py)?;
        Ok(moved.iter().map(|(q, o)| (queue_tuple(q), *o)).collect())
    }

    /// The messages of `topic` with `key` (at most `max`), as received-message tuples.
    fn query_messages<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        key: &str,
        max: u32,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let query = rmq::MessageQuery::by_key(topic, key).max(max);
        let r = py
            .detach(|| self.inner.query_messages(&query))
            .or_raise(py)?;
        r.messages.iter().map(|m| received(py, m)).collect()
    }

    /// The clients connected under producer `group`: `(client_id, address, language,
    /// version)`.
    fn producer_connections(
        &self,
        py: Python<'_>,
        group: &str,
    ) -> PyResult<Vec<(String, String, String, i32)>> {
        let conns = py
            .detach(|| self.inner.producer_connections(group))
            .or_raise(py)?;
        Ok(conns
            .into_iter()
            .map(|c| (c.client_id, c.client_addr, c.language, c.version))
            .collect())
    }

    /// Every subscription group the masters know: name → `(consume_enable, orderly,
    /// broadcast, retry_max_times)`.
    fn subscription_groups(
        &self,
        py: Python<'_>,
    ) -> PyResult<HashMap<String, (bool, bool, bool, u32)>> {
        let groups = py
            .detach(|| self.inner.subscription_groups())
            .or_raise(py)?;
        Ok(groups
            .into_iter()
            .map(|(name, g)| {
                let v = (
                    g.consume_enable,
                    g.consume_message_orderly,
                    g.consume_broadcast_enable,
                    g.retry_max_times,
                );
                (name, v)
            })
            .collect())
    }

    /// Creates (or updates) a subscription group on every master; the broker names.
    fn create_subscription_group(
        &self,
        py: Python<'_>,
        group: &str,
        orderly: bool,
        broadcast: bool,
        retry_max_times: Option<u32>,
    ) -> PyResult<Vec<String>> {
        let mut config = rmq::SubscriptionGroupConfig::new(group);
        config.consume_message_orderly = orderly;
        config.consume_broadcast_enable = broadcast;
        if let Some(n) = retry_max_times {
            config.retry_max_times = n;
        }
        py.detach(|| self.inner.create_subscription_group(&config))
            .or_raise(py)
    }

    /// Creates (or updates) `topic` on every master; the broker names.
    fn create_topic(&self, py: Python<'_>, topic: &str, queues: u32) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.create_topic(&TopicConfig::new(topic, queues)))
            .or_raise(py)
    }

    /// Deletes `topic` from every master and name server; the broker names.
    fn delete_topic(&self, py: Python<'_>, topic: &str) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.delete_topic(topic)).or_raise(py)
    }

    /// Sets how `group` consumes `topic` on every master: POP (`pop`) or PULL; the
    /// broker names.
    fn set_message_request_mode(
        &self,
        py: Python<'_>,
        topic: &str,
        group: &str,
        pop: bool,
        pop_share_queue_num: u32,
    ) -> PyResult<Vec<String>> {
        let mode = if pop {
            rmq::MessageRequestMode::Pop
        } else {
            rmq::MessageRequestMode::Pull
        };
        py.detach(|| {
            self.inner
                .set_message_request_mode(topic, group, mode, pop_share_queue_num)
        })
        .or_raise(py)
    }

    fn topic_list(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.topic_list()).or_raise(py)
    }

    fn total_max_offset(&self, py: Python<'_>, topic: &str) -> PyResult<i64> {
        py.detach(|| self.inner.total_max_offset(topic))
            .or_raise(py)
    }

    fn view_message<'py>(
        &self,
        py: Python<'py>,
        offset_msg_id: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let m = py
            .detach(|| self.inner.view_message(offset_msg_id))
            .or_raise(py)?;
        received(py, &m)
    }

    fn query_message_by_unique_key<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        msg_id: &str,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let m = py
            .detach(|| self.inner.query_message_by_unique_key(topic, msg_id))
            .or_raise(py)?;
        m.map(|m| received(py, &m)).transpose()
    }

    /// `(consume_tps, total_diff, [((topic, broker_name, queue_id), broker_offset,
    /// consumer_offset, pull_offset, last_timestamp_ms or None)])`.
    #[allow(clippy::type_complexity)]
    fn consume_stats(
        &self,
        py: Python<'_>,
        group: &str,
        topic: Option<&str>,
    ) -> PyResult<(
        f64,
        u64,
        Vec<((String, String, i32), i64, i64, i64, Option<i64>)>,
    )> {
        let s = py
            .detach(|| self.inner.consume_stats(group, topic))
            .or_raise(py)?;
        let queues = s
            .queues
            .values()
            .map(|q| {
                (
                    queue_tuple(&q.queue),
                    q.broker_offset,
                    q.consumer_offset,
                    q.pull_offset,
                    q.last_timestamp.map(millis),
                )
            })
            .collect();
        Ok((s.consume_tps, s.total_diff(), queues))
    }

    /// The online consumers of `group` as JSON (`stats_json::consumer_connection`).
    fn consumer_connections(&self, py: Python<'_>, group: &str) -> PyResult<String> {
        let c = py
            .detach(|| self.inner.consumer_connections(group))
            .or_raise(py)?;
        Ok(stats_json::consumer_connection(&c).to_string())
    }

    /// The queues of `topic` with their offsets as JSON (`stats_json::topic_stats`).
    fn topic_stats(&self, py: Python<'_>, topic: &str) -> PyResult<String> {
        let s = py.detach(|| self.inner.topic_stats(topic)).or_raise(py)?;
        Ok(stats_json::topic_stats(&s).to_string())
    }

    /// The store time (ms) of the first message of `queue`, None when it is empty.
    fn earliest_msg_store_time(&self, py: Python<'_>, queue: QueueTuple) -> PyResult<Option<i64>> {
        let q = queue_of(queue);
        let t = py
            .detach(|| self.inner.earliest_msg_store_time(&q))
            .or_raise(py)?;
        Ok(t.map(millis))
    }

    /// Nothing to wait for: the connections close when the last reference goes.
    fn free(&self) {}
}

/// One message of `SimpleConsumer.receive` with its receipt, which
/// `change_invisible_duration` replaces (hence the lock).
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct PopReceipt {
    inner: Mutex<rmq::ReceivedMessage>,
}

#[pymethods]
impl PopReceipt {
    /// The receipt as the broker's text.
    fn receipt_handle(&self) -> String {
        self.inner.lock().receipt_handle()
    }
}

/// A started simple (POP) consumer.
#[pyclass(frozen, module = "rocketmq_blocking._native")]
struct SimpleConsumer {
    inner: rmq::SimpleConsumer,
}

#[pymethods]
impl SimpleConsumer {
    #[new]
    fn new(
        py: Python<'_>,
        group: String,
        topic: String,
        common: Common<'_>,
        expression: &str,
        from_first: bool,
        await_ms: u64,
    ) -> PyResult<Self> {
        let b = rmq::SimpleConsumer::builder(group)
            .client_options(client_options(&common)?)
            .consume_from_where(consume_from(from_first))
            .await_duration(Duration::from_millis(await_ms))
            .subscribe(topic, expression);
        let inner = py.detach(|| b.start()).or_raise(py)?;
        Ok(SimpleConsumer { inner })
    }

    /// Up to `max` messages, each a (received-message tuple, receipt) pair.
    fn receive<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        invisible_ms: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let msgs = py
            .detach(|| self.inner.receive(max, Duration::from_millis(invisible_ms)))
            .or_raise(py)?;
        let items = msgs
            .into_iter()
            .map(|m| {
                let t = received(py, m.message())?;
                let r = Bound::new(
                    py,
                    PopReceipt {
                        inner: Mutex::new(m),
                    },
                )?;
                (t, r).into_pyobject(py)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    fn ack(&self, py: Python<'_>, receipt: &PopReceipt) -> PyResult<()> {
        py.detach(|| self.inner.ack(&receipt.inner.lock()))
            .or_raise(py)
    }

    /// Acks every receipt of `receipts` with batch requests; one given twice is acked
    /// once (its lock is taken once).
    fn ack_batch(&self, py: Python<'_>, receipts: Vec<Bound<'_, PopReceipt>>) -> PyResult<()> {
        let mut rs: Vec<&PopReceipt> = receipts.iter().map(|r| r.get()).collect();
        rs.sort_by_key(|r| std::ptr::from_ref(*r) as usize);
        rs.dedup_by_key(|r| std::ptr::from_ref(*r) as usize);
        py.detach(|| {
            let guards: Vec<_> = rs.iter().map(|r| r.inner.lock()).collect();
            self.inner.ack_batch(guards.iter().map(|g| &**g))
        })
        .or_raise(py)
    }

    fn wait_for_messages(&self, py: Python<'_>, timeout_ms: u64) -> PyResult<bool> {
        py.detach(|| {
            self.inner
                .wait_for_messages(Duration::from_millis(timeout_ms))
        })
        .or_raise(py)
    }

    fn change_invisible_duration(
        &self,
        py: Python<'_>,
        receipt: &PopReceipt,
        invisible_ms: u64,
    ) -> PyResult<()> {
        py.detach(|| {
            self.inner.change_invisible_duration(
                &mut receipt.inner.lock(),
                Duration::from_millis(invisible_ms),
            )
        })
        .or_raise(py)
    }

    fn free(&self, py: Python<'_>) {
        py.detach(|| self.inner.shutdown())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_error_class, m)?)?;
    m.add_function(wrap_pyfunction!(objects::set_classes, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(set_log_level, m)?)?;
    log_bridge::install();
    m.add_function(wrap_pyfunction!(create_topic, m)?)?;
    m.add_class::<Producer>()?;
    m.add_class::<TransactionProducer>()?;
    m.add_class::<ReplyTemplate>()?;
    m.add_class::<PushConsumer>()?;
    m.add_class::<LitePullConsumer>()?;
    m.add_class::<SimpleConsumer>()?;
    m.add_class::<PopReceipt>()?;
    m.add_class::<NativeAdmin>()?;
    Ok(())
}
