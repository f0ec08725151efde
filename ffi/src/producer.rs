//! The producer (Java `DefaultMQProducer`): a builder handle for the options, then
//! `rmq_producer_builder_start`.
//!
//! Thread safety: an `rmq_producer` may be used from any number of threads at once (every
//! send takes it as `const`); only `rmq_producer_free` needs it exclusively, after every
//! other call on it has returned. A builder is for one thread at a time.
//!
//! Transactions (Java `TransactionMQProducer`) have their own handle,
//! `rmq_transaction_producer` (`transaction.rs`), built the same way.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::{
    Message, MessageQueue, Producer, ProducerBuilder, SendContext, SendHook, SendResult,
};

use crate::common::{self, Gate, HasSlot, Slot};
use crate::error::{err, err_ref, fail, guard, guard_void, rmq_result};
use crate::message::{
    rmq_message, rmq_message_ext, rmq_message_queue, rmq_queue_list, rmq_send_result, Ref,
};
use crate::options::rmq_client_options;
use crate::util::{
    copy_to_buf, handle, handle_array, handle_mut, out_handle, str_arg, take_handle, Userdata,
};

/// Options of a producer before it starts.
pub struct rmq_producer_builder {
    slot: Slot<ProducerBuilder>,
    /// The producer's gate, made here so that send hooks given to the builder pass it.
    gate: Arc<Gate>,
}

impl HasSlot for rmq_producer_builder {
    type B = ProducerBuilder;
    fn slot(&mut self) -> &mut Slot<ProducerBuilder> {
        &mut self.slot
    }
}

/// A started producer.
pub struct rmq_producer {
    inner: Producer,
    /// Async sends whose callback has not run yet, and send hooks running.
    pending: Arc<Gate>,
    send_timeout: Duration,
}

/// Called once per async send with its outcome, on one of the crate's callback threads.
/// `result` is `RMQ_OK` with `send_result` borrowed for
/// the call, or an error code with `send_result` NULL and the error text in
/// `rmq_last_error` on that thread. Must not block for long: it holds a callback thread.
pub type rmq_send_callback = Option<
    extern "C" fn(userdata: *mut c_void, result: rmq_result, send_result: *const rmq_send_result),
>;

/// Picks a queue for `message` among `count` queues (Java `MessageQueueSelector`):
/// returns an index below `count`, or a negative number to fail the send with
/// `RMQ_INVALID_ARGUMENT`. Runs on the sending thread, during the send call.
pub type rmq_queue_selector = Option<
    extern "C" fn(
        userdata: *mut c_void,
        queues: *const *const rmq_message_queue,
        count: usize,
        message: *const rmq_message,
    ) -> i64,
>;

/// Starts building a producer of `group` with Java's defaults (send timeout 3 s, 2
/// retries, 4 MiB max size, compression over 4 KiB). The name servers come from
/// `NAMESRV_ADDR` unless `rmq_producer_builder_namesrv` is called.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_new(
    group: *const c_char,
    group_len: usize,
    builder_out: *mut *mut rmq_producer_builder,
) -> rmq_result {
    guard(|| {
        let group = str_arg(group, group_len, "group")?;
        out_handle(
            builder_out,
            rmq_producer_builder {
                slot: Slot(Some(Producer::builder(group))),
                gate: Arc::default(),
            },
        )
    })
}

/// The client options every client shares (name servers, instance name, namespace,
/// credentials, TLS, timeouts), copied from `options`.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_client_options(
    b: *mut rmq_producer_builder,
    options: *const rmq_client_options,
) -> rmq_result {
    crate::options::set_client_options(b, options)
}

/// The timeout of one send, in milliseconds (default 3000).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_send_timeout_ms(
    b: *mut rmq_producer_builder,
    ms: u64,
) -> rmq_result {
    common::set(b, |b| b.send_timeout(Duration::from_millis(ms)))
}

/// Retries of a failed sync send (default 2).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_retries(
    b: *mut rmq_producer_builder,
    retries: u32,
) -> rmq_result {
    common::set(b, |b| b.retries(retries))
}

/// Retries of a failed async send (default 2).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_async_retries(
    b: *mut rmq_producer_builder,
    retries: u32,
) -> rmq_result {
    common::set(b, |b| b.async_retries(retries))
}

/// The largest body accepted, in bytes (default 4 MiB).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_max_message_size(
    b: *mut rmq_producer_builder,
    bytes: usize,
) -> rmq_result {
    common::set(b, |b| b.max_message_size(bytes))
}

/// Bodies larger than this many bytes are compressed (default 4096).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_compress_over(
    b: *mut rmq_producer_builder,
    bytes: usize,
) -> rmq_result {
    common::set(b, |b| b.compress_over(bytes))
}

/// Gathers single sends into batches (Rust `ProducerBuilder::auto_batch`, Java 5
/// `setAutoBatch`; default off): sync and async sends of messages that can be batched
/// wait up to the batch delay for others of their topic (and queue, when one was
/// chosen) and go as one batch; each send still gets its own `rmq_send_result` or error.
/// `rmq_producer_free` sends the batches still open first.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_auto_batch(
    b: *mut rmq_producer_builder,
    on: bool,
) -> rmq_result {
    common::set(b, |b| b.auto_batch(on))
}

/// Longest wait for a batch to fill, in milliseconds (Java `batchMaxDelayMs`, default
/// 10; 1..=30000, checked by `rmq_producer_builder_start`).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_batch_max_delay_ms(
    b: *mut rmq_producer_builder,
    ms: u64,
) -> rmq_result {
    common::set(b, |b| b.batch_max_delay(Duration::from_millis(ms)))
}

/// Bytes of bodies that send a batch at once; a body this large goes alone (Java
/// `batchMaxBytes`, default 32 KiB; 1..=2 MiB, checked by `rmq_producer_builder_start`).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_batch_max_bytes(
    b: *mut rmq_producer_builder,
    bytes: usize,
) -> rmq_result {
    common::set(b, |b| b.batch_max_bytes(bytes))
}

/// Bytes of bodies held in unsent batches at most; past it, messages go alone (Java
/// `totalBatchMaxBytes`, default 32 MiB; not 0).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_total_batch_max_bytes(
    b: *mut rmq_producer_builder,
    bytes: usize,
) -> rmq_result {
    common::set(b, |b| b.total_batch_max_bytes(bytes))
}

/// Records a trace of every send in `RMQ_SYS_TRACE_TOPIC`, or in `trace_topic` when it is
/// not NULL (Java `enableMsgTrace`, `customizedTraceTopic`).
#[no_mangle]
pub extern "C" fn rmq_producer_builder_trace(
    b: *mut rmq_producer_builder,
    trace_topic: *const c_char,
    trace_topic_len: usize,
) -> rmq_result {
    common::set_trace(b, trace_topic, trace_topic_len)
}

/// A message about to be sent, as a send hook's `before` callback sees it: pass it to
/// `rmq_send_hook_context_put_property` to add a property. Valid during the call only.
pub struct rmq_send_hook_context {
    message: *mut Message,
}

/// Runs before each message is sent (Rust `SendHook::before_send`, Java
/// `SendMessageHook.sendMessageBefore`), on the sending thread, with the message
/// (read-only view, topic without namespace) and a context to add properties with. A
/// batch runs it once per message.
pub type rmq_send_hook_before = Option<
    extern "C" fn(
        userdata: *mut c_void,
        message: *const rmq_message,
        context: *mut rmq_send_hook_context,
    ),
>;

/// Runs once the outcome of a send is known (Rust `SendHook::after_send`): on the
/// sending thread for sync and one-way sends, on a callback thread for async ones.
/// `result` is `RMQ_OK` with `send_result` borrowed for the call (NULL for a one-way
/// send, which has no answer), or an error code with the text in `rmq_last_error` on
/// that thread. `message` is the message as sent (properties added included).
pub type rmq_send_hook_after = Option<
    extern "C" fn(
        userdata: *mut c_void,
        message: *const rmq_message,
        result: rmq_result,
        send_result: *const rmq_send_result,
    ),
>;

/// A C send hook: each call passes the producer's gate, so that `rmq_producer_free`
/// waits for hooks running and none runs after it returned.
struct CSendHook {
    before: rmq_send_hook_before,
    after: rmq_send_hook_after,
    ud: Userdata,
    gate: Arc<Gate>,
}

impl SendHook for CSendHook {
    fn before_send(&self, ctx: &mut SendContext<'_>) {
        let (Some(f), Some(pass)) = (self.before, Gate::enter(&self.gate)) else {
            return;
        };
        let m: *mut Message = ctx.message_mut();
        let view = rmq_message {
            inner: Ref::Borrowed(m),
        };
        let mut hc = rmq_send_hook_context { message: m };
        pass.call(|| f(self.ud.0, &view, &mut hc));
    }

    fn after_send(
        &self,
        ctx: &SendContext<'_>,
        result: std::result::Result<Option<&SendResult>, &rocketmq_blocking::Error>,
    ) {
        let (Some(f), Some(pass)) = (self.after, Gate::enter(&self.gate)) else {
            return;
        };
        let view = rmq_message::borrowed(ctx.message());
        match result {
            Ok(Some(r)) => {
                let sr = rmq_send_result::new(r.clone());
                pass.call(|| f(self.ud.0, &view, rmq_result::RMQ_OK, &sr));
            }
            Ok(None) => {
                pass.call(|| f(self.ud.0, &view, rmq_result::RMQ_OK, std::ptr::null()));
            }
            Err(e) => {
                let code = err_ref(e);
                pass.call(|| f(self.ud.0, &view, code, std::ptr::null()));
            }
        }
    }
}

/// Adds a send hook (Rust `ProducerBuilder::send_hook`): `before` and `after` (either
/// may be NULL, not both) run around every send of the producer, with `userdata`, on
/// the threads their types say. `rmq_producer_free` waits for hooks running, and none
/// runs once it returned. A hook may be added more than once; they run in that order.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_send_hook(
    b: *mut rmq_producer_builder,
    before: rmq_send_hook_before,
    after: rmq_send_hook_after,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let h = handle_mut(b, "builder")?;
        if before.is_none() && after.is_none() {
            return Err(fail(
                rmq_result::RMQ_NULL_PARAMETER,
                "before and after are both NULL",
            ));
        }
        let hook = Arc::new(CSendHook {
            before,
            after,
            ud: Userdata(userdata),
            gate: h.gate.clone(),
        });
        h.slot.update(|b| b.send_hook(hook))
    })
}

/// Adds a user property to the message a send hook's `before` callback sees (reserved
/// names are `RMQ_INVALID_ARGUMENT`): the property is sent with the message.
#[no_mangle]
pub extern "C" fn rmq_send_hook_context_put_property(
    context: *mut rmq_send_hook_context,
    name: *const c_char,
    name_len: usize,
    value: *const c_char,
    value_len: usize,
) -> rmq_result {
    guard(|| {
        let c = handle_mut(context, "context")?;
        let name = str_arg(name, name_len, "name")?;
        let value = str_arg(value, value_len, "value")?;
        // The context lives on the stack of `before_send`, which holds the message
        // exclusively for the call; no view of it is read during this one.
        handle_mut(c.message, "message")?
            .put_user_property(name, value)
            .map_err(err)
    })
}

/// Starts the producer. The builder is consumed, whatever the result: free it only if
/// this was not called.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_start(
    b: *mut rmq_producer_builder,
    producer_out: *mut *mut rmq_producer,
) -> rmq_result {
    guard(|| {
        let mut owned = take_handle(b)
            .ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "builder is NULL"))?;
        let p = owned.slot.take()?.start().map_err(err)?;
        let send_timeout = p.options().send_timeout;
        out_handle(
            producer_out,
            rmq_producer {
                inner: p,
                pending: owned.gate.clone(),
                send_timeout,
            },
        )
    })
}

/// Frees a builder that was not started. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_producer_builder_free(b: *mut rmq_producer_builder) {
    guard_void(|| drop(take_handle(b)));
}

fn producer<'a>(p: *const rmq_producer) -> Result<&'a rmq_producer, rmq_result> {
    handle(p, "producer")
}

/// Writes the producer's figures (Rust `Producer::stats`) as JSON into `buf`,
/// NUL-terminated; `*written` is its length. With `RMQ_BUFFER_TOO_SMALL`, `*written` is
/// the length needed (call again with a buffer of at least `*written + 1`). Counters are
/// monotonic from the client's start; latencies are in microseconds (`*_us` keys); the
/// shape is documented in docs/observability.md ("From C and Python"). Cheap enough to
/// call every second, from any thread.
#[no_mangle]
pub extern "C" fn rmq_producer_stats_json(
    p: *const rmq_producer,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let json = crate::stats_json::producer(&producer(p)?.inner.stats()).to_string();
        copy_to_buf(json.as_bytes(), buf, len, written, true)
    })
}

fn msg<'a>(m: *const rmq_message) -> Result<&'a Message, rmq_result> {
    Ok(handle(m, "message")?.inner.get())
}

fn give_result(
    r: rocketmq_blocking::Result<rocketmq_blocking::SendResult>,
    result_out: *mut *mut rmq_send_result,
) -> Result<(), rmq_result> {
    let r = r.map_err(err)?;
    if result_out.is_null() {
        return Ok(()); // the caller does not want the result
    }
    out_handle(result_out, rmq_send_result::new(r))
}

/// Sends and waits for the broker (retrying on another broker as configured). On
/// success `*result_out` is a new send result to free with `rmq_send_result_free`
/// (`result_out` may be NULL when not needed).
#[no_mangle]
pub extern "C" fn rmq_producer_send(
    p: *const rmq_producer,
    message: *const rmq_message,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        give_result(p.inner.send(msg(message)?), result_out)
    })
}

/// Like `rmq_producer_send`, bounded by `timeout_ms` instead of the builder's timeout.
#[no_mangle]
pub extern "C" fn rmq_producer_send_with_timeout(
    p: *const rmq_producer,
    message: *const rmq_message,
    timeout_ms: u64,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        give_result(
            p.inner
                .send_timeout(msg(message)?, Duration::from_millis(timeout_ms)),
            result_out,
        )
    })
}

/// Sends to one queue (no retry on another queue).
#[no_mangle]
pub extern "C" fn rmq_producer_send_to_queue(
    p: *const rmq_producer,
    message: *const rmq_message,
    queue: *const rmq_message_queue,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        give_result(
            p.inner.send_to_queue(msg(message)?, queue_ref(queue)?),
            result_out,
        )
    })
}

/// Runs a C selector over the topic's queues.
fn select(
    selector: rmq_queue_selector,
    userdata: Userdata,
) -> Result<impl Fn(&[MessageQueue], &Message, &()) -> Option<MessageQueue>, rmq_result> {
    let f = selector.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "selector is NULL"))?;
    Ok(move |mqs: &[MessageQueue], m: &Message, _: &()| {
        let views: Vec<rmq_message_queue> = mqs
            .iter()
            .map(|q| rmq_message_queue { inner: q.clone() })
            .collect();
        let ptrs: Vec<*const rmq_message_queue> = views.iter().map(|v| v as *const _).collect();
        let mview = rmq_message::borrowed(m);
        // On the sending thread, during the send: no gate (the caller holds the handle).
        let i = f(userdata.0, ptrs.as_ptr(), ptrs.len(), &mview);
        usize::try_from(i).ok().and_then(|i| mqs.get(i).cloned())
    })
}

/// Sends to the queue `selector` picks (Java `send(msg, selector, arg)`): keep related
/// messages in order by picking the same queue for the same key.
#[no_mangle]
pub extern "C" fn rmq_producer_send_with_selector(
    p: *const rmq_producer,
    message: *const rmq_message,
    selector: rmq_queue_selector,
    userdata: *mut c_void,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let s = select(selector, Userdata(userdata))?;
        give_result(
            p.inner.send_with_selector(msg(message)?, &s, &()),
            result_out,
        )
    })
}

/// Sends `count` messages of one topic as one batch (Java `send(Collection)`).
#[no_mangle]
pub extern "C" fn rmq_producer_send_batch(
    p: *const rmq_producer,
    messages: *const *const rmq_message,
    count: usize,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let msgs = batch_arg(messages, count)?;
        give_result(p.inner.send_batch(&msgs), result_out)
    })
}

/// Sends a batch to one queue.
#[no_mangle]
pub extern "C" fn rmq_producer_send_batch_to_queue(
    p: *const rmq_producer,
    messages: *const *const rmq_message,
    count: usize,
    queue: *const rmq_message_queue,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let msgs = batch_arg(messages, count)?;
        give_result(
            p.inner.send_batch_to_queue(&msgs, queue_ref(queue)?),
            result_out,
        )
    })
}

/// Sends without waiting for (or getting) an answer.
#[no_mangle]
pub extern "C" fn rmq_producer_send_oneway(
    p: *const rmq_producer,
    message: *const rmq_message,
) -> rmq_result {
    guard(|| producer(p)?.inner.send_oneway(msg(message)?).map_err(err))
}

/// Sends one way to one queue.
#[no_mangle]
pub extern "C" fn rmq_producer_send_oneway_to_queue(
    p: *const rmq_producer,
    message: *const rmq_message,
    queue: *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        producer(p)?
            .inner
            .send_oneway_to_queue(msg(message)?, queue_ref(queue)?)
            .map_err(err)
    })
}

fn queue_ref<'a>(q: *const rmq_message_queue) -> Result<&'a MessageQueue, rmq_result> {
    Ok(&handle(q, "queue")?.inner)
}

/// The wrapper the crate calls for an async send or request: admits itself at the
/// producer's gate when the call is queued, and leaves it after the C callback returned
/// (or when the crate drops it uncalled). `wrap` makes what C is given of a success.
fn gated_callback<T: Send + 'static, C: 'static>(
    p: &rmq_producer,
    callback: Option<extern "C" fn(*mut c_void, rmq_result, *const C)>,
    userdata: *mut c_void,
    what: &'static str,
    wrap: fn(T) -> C,
) -> Result<impl FnOnce(rocketmq_blocking::Result<T>) + Send + 'static, rmq_result> {
    let cb = callback.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "callback is NULL"))?;
    let pass = Gate::enter(&p.pending)
        .ok_or_else(|| fail(rmq_result::RMQ_STATE, "the producer is shutting down"))?;
    let ud = Userdata(userdata);
    Ok(move |r: rocketmq_blocking::Result<T>| {
        let ud = ud;
        // `None`: `rmq_producer_free` stopped waiting for this callback, and C may have
        // freed the userdata since.
        let called = match r {
            Ok(v) => {
                let v = wrap(v);
                pass.call(|| cb(ud.0, rmq_result::RMQ_OK, &v))
            }
            Err(e) => {
                let code = err(e);
                pass.call(|| cb(ud.0, code, std::ptr::null()))
            }
        };
        if called.is_none() {
            log::warn!(
                "an async {what} ended after rmq_producer_free gave up waiting for it: its callback is not called"
            );
        }
    })
}

/// [`gated_callback`] for an async send.
fn async_callback(
    p: &rmq_producer,
    callback: rmq_send_callback,
    userdata: *mut c_void,
) -> Result<
    impl FnOnce(rocketmq_blocking::Result<rocketmq_blocking::SendResult>) + Send + 'static,
    rmq_result,
> {
    gated_callback(p, callback, userdata, "send", rmq_send_result::new)
}

/// Sends without blocking for the answer; `callback` gets the outcome later (see
/// `rmq_send_callback`). When this returns an error, the callback is never called.
/// `userdata` goes to the callback as is, on a crate thread. `rmq_producer_free` waits
/// for the callbacks of sends still in flight (see there).
#[no_mangle]
pub extern "C" fn rmq_producer_send_async(
    p: *const rmq_producer,
    message: *const rmq_message,
    callback: rmq_send_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let m = msg(message)?.clone();
        let f = async_callback(p, callback, userdata)?;
        p.inner.send_async(m, f).map_err(|e| err(e.into()))
    })
}

/// The messages of a batch, copied out of their handles.
fn batch_arg(
    messages: *const *const rmq_message,
    count: usize,
) -> Result<Vec<Message>, rmq_result> {
    Ok(handle_array(messages, count, "messages")?
        .into_iter()
        .map(|m| m.inner.get().clone())
        .collect())
}

/// Sends a batch of messages of one topic without blocking for the answer (Java
/// `send(Collection<Message>, SendCallback)`): `callback` gets the batch's one outcome
/// later, as for `rmq_producer_send_async`. When this returns an error (an empty batch,
/// several topics, no route...), nothing was sent and the callback is never called.
#[no_mangle]
pub extern "C" fn rmq_producer_send_batch_async(
    p: *const rmq_producer,
    messages: *const *const rmq_message,
    count: usize,
    callback: rmq_send_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let msgs = batch_arg(messages, count)?;
        let f = async_callback(p, callback, userdata)?;
        p.inner.send_batch_async(&msgs, f).map_err(err)
    })
}

/// Like `rmq_producer_send_async`, to one queue.
#[no_mangle]
pub extern "C" fn rmq_producer_send_async_to_queue(
    p: *const rmq_producer,
    message: *const rmq_message,
    queue: *const rmq_message_queue,
    callback: rmq_send_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let m = msg(message)?.clone();
        let q = queue_ref(queue)?.clone();
        let f = async_callback(p, callback, userdata)?;
        p.inner
            .send_async_to_queue(m, &q, f)
            .map_err(|e| err(e.into()))
    })
}

/// Like `rmq_producer_send_async`, to the queue `selector` picks; the selector runs on
/// the calling thread before this returns (with `selector_userdata`), the callback later
/// on a crate thread (with `userdata`).
#[no_mangle]
pub extern "C" fn rmq_producer_send_async_with_selector(
    p: *const rmq_producer,
    message: *const rmq_message,
    selector: rmq_queue_selector,
    selector_userdata: *mut c_void,
    callback: rmq_send_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let m = msg(message)?.clone();
        let s = select(selector, Userdata(selector_userdata))?;
        let f = async_callback(p, callback, userdata)?;
        p.inner
            .send_async_with_selector(m, &s, &(), f)
            .map_err(|e| err(e.into()))
    })
}

/// Sends one way to the queue `selector` picks (run on the calling thread).
#[no_mangle]
pub extern "C" fn rmq_producer_send_oneway_with_selector(
    p: *const rmq_producer,
    message: *const rmq_message,
    selector: rmq_queue_selector,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let s = select(selector, Userdata(userdata))?;
        p.inner
            .send_oneway_with_selector(msg(message)?, &s, &())
            .map_err(err)
    })
}

/// The queues of `topic` a producer can write to; free the list with `rmq_queue_list_free`.
#[no_mangle]
pub extern "C" fn rmq_producer_fetch_queues(
    p: *const rmq_producer,
    topic: *const c_char,
    topic_len: usize,
    list_out: *mut *mut rmq_queue_list,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let qs = p
            .inner
            .fetch_publish_message_queues(str_arg(topic, topic_len, "topic")?)
            .map_err(err)?;
        out_handle(
            list_out,
            rmq_queue_list {
                items: qs
                    .into_iter()
                    .map(|inner| rmq_message_queue { inner })
                    .collect(),
            },
        )
    })
}

/// Sends `message` as a request and waits up to `timeout_ms` for its reply (Java
/// `request`); `*reply_out` is a new message to free with `rmq_message_ext_free`. No
/// reply in time is `RMQ_TIMEOUT`. A responder answers with `rmq_create_reply_message`.
#[no_mangle]
pub extern "C" fn rmq_producer_request(
    p: *const rmq_producer,
    message: *const rmq_message,
    timeout_ms: u64,
    reply_out: *mut *mut rmq_message_ext,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let reply = p
            .inner
            .request(msg(message)?, Duration::from_millis(timeout_ms))
            .map_err(err)?;
        out_handle(reply_out, rmq_message_ext::owned(reply))
    })
}

/// Called once per async request with its outcome, on one of the crate's callback
/// threads. `result` is `RMQ_OK` with `reply` borrowed for the call (copy what is needed:
/// it is freed when the callback returns), or an error code (`RMQ_TIMEOUT` for no reply
/// in time) with `reply` NULL and the error text in `rmq_last_error` on that thread.
/// Must not block for long: it holds a callback thread.
pub type rmq_request_callback =
    Option<extern "C" fn(userdata: *mut c_void, result: rmq_result, reply: *const rmq_message_ext)>;

/// Like `rmq_producer_request`, without waiting (Java `request(msg, callback, timeout)`):
/// `callback` gets the reply, the send's failure, the timeout after `timeout_ms` or the
/// producer's shutdown later (see `rmq_request_callback`), exactly once, behind the same
/// gate as `rmq_producer_send_async`: `rmq_producer_free` waits for it as for an async
/// send's. When this returns an error, the callback is never called.
#[no_mangle]
pub extern "C" fn rmq_producer_request_async(
    p: *const rmq_producer,
    message: *const rmq_message,
    timeout_ms: u64,
    callback: rmq_request_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let p = producer(p)?;
        let m = msg(message)?.clone();
        let f = request_callback(p, callback, userdata)?;
        p.inner
            .request_async(m, Duration::from_millis(timeout_ms), f)
            .map_err(err)
    })
}

/// [`gated_callback`] for an async request: C is given the reply.
fn request_callback(
    p: &rmq_producer,
    callback: rmq_request_callback,
    userdata: *mut c_void,
) -> Result<
    impl FnOnce(rocketmq_blocking::Result<rocketmq_blocking::MessageExt>) + Send + 'static,
    rmq_result,
> {
    gated_callback(p, callback, userdata, "request", rmq_message_ext::owned)
}

/// Shuts the producer down (unregisters from the brokers); later sends fail with
/// `RMQ_STATE`. Idempotent. The handle must still be freed.
#[no_mangle]
pub extern "C" fn rmq_producer_shutdown(p: *const rmq_producer) -> rmq_result {
    guard(|| {
        producer(p)?.inner.shutdown();
        Ok(())
    })
}

/// Shuts down (if not yet) and frees the producer, after the callbacks of async sends
/// and requests still in flight have run (the shutdown fails the requests still waiting
/// for a reply). It waits up to the send timeout plus 10 s for them; a callback that has
/// not started by then is never called (its outcome is lost), and one that has started
/// is waited for however long it takes. So once this returns
/// no callback of the producer runs or will run, and their userdata may be freed. The
/// one exception is a call from inside one of the producer's own callbacks, which does
/// not wait (it would wait for itself); a call from a callback of another client waits
/// as from any thread. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_producer_free(p: *mut rmq_producer) {
    guard_void(|| {
        if let Some(p) = take_handle(p) {
            // Pending requests fail when the instance stops, which runs their callbacks.
            p.inner.shutdown();
            p.pending
                .close_and_wait(Some(p.send_timeout + Duration::from_secs(10)));
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    //! `rmq_producer_free` against async-send callbacks still to come, without a broker:
    //! the wrapper `async_callback` builds is what the crate calls when a send ends.
    use super::*;
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

    /// What the C side of a test sees: its callbacks count here, and `freed` is set
    /// right after `rmq_producer_free` of `victim` returned (C would free userdata then).
    #[derive(Default)]
    pub(crate) struct Probe {
        pub(crate) victim: AtomicPtr<rmq_producer>,
        pub(crate) freed: AtomicBool,
        pub(crate) calls: AtomicUsize,
        pub(crate) calls_after_free: AtomicUsize,
        entered: AtomicBool,
        pub(crate) release: AtomicBool,
    }

    pub(crate) fn probe<'a>(ud: *mut c_void) -> &'a Probe {
        // SAFETY: every test passes a `Probe` that outlives the callbacks it is given to.
        unsafe { &*(ud as *const Probe) }
    }

    /// A send callback of the victim: counts, and counts again if it runs after the free.
    pub(crate) extern "C" fn counting(ud: *mut c_void, _r: rmq_result, _s: *const rmq_send_result) {
        let p = probe(ud);
        p.entered.store(true, Ordering::SeqCst);
        while !p.release.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        p.calls.fetch_add(1, Ordering::SeqCst);
        if p.freed.load(Ordering::SeqCst) {
            p.calls_after_free.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A started producer that needs no broker: nothing is sent.
    pub(crate) fn producer(send_timeout_ms: u64) -> *mut rmq_producer {
        let (mut b, mut p) = (null_mut(), null_mut());
        let group = format!("ffi_free_{}", std::process::id());
        assert_eq!(
            rmq_producer_builder_new(group.as_ptr().cast(), group.len(), &mut b),
            rmq_result::RMQ_OK
        );
        let addr = "127.0.0.1:1";
        let mut o = null_mut();
        assert_eq!(
            crate::options::rmq_client_options_new(&mut o),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            crate::options::rmq_client_options_namesrv_addr(o, addr.as_ptr().cast(), addr.len()),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_producer_builder_client_options(b, o),
            rmq_result::RMQ_OK
        );
        crate::options::rmq_client_options_free(o);
        assert_eq!(
            rmq_producer_builder_send_timeout_ms(b, send_timeout_ms),
            rmq_result::RMQ_OK
        );
        assert_eq!(rmq_producer_builder_start(b, &mut p), rmq_result::RMQ_OK);
        p
    }

    pub(crate) type Callback =
        Box<dyn FnOnce(rocketmq_blocking::Result<rocketmq_blocking::SendResult>) + Send>;

    /// An async send's callback as the crate holds it: admitted at the producer's gate.
    pub(crate) fn pending(p: *mut rmq_producer, cb: rmq_send_callback, probe: &Probe) -> Callback {
        let p = handle(p, "producer").expect("live producer");
        let ud = probe as *const Probe as *mut c_void;
        match async_callback(p, cb, ud) {
            Ok(f) => Box::new(f),
            Err(code) => panic!("not admitted: {code:?}"),
        }
    }

    pub(crate) fn failed() -> rocketmq_blocking::Result<rocketmq_blocking::SendResult> {
        Err(rocketmq_blocking::Error::new(
            rocketmq_blocking::ErrorKind::Timeout,
            "test",
        ))
    }

    #[test]
    fn after_the_free_bound_a_running_callback_is_waited_for_and_a_later_one_never_reaches_c() {
        let probe = Arc::new(Probe::default());
        let p = producer(100);
        let running = pending(p, Some(counting), &probe);
        let later = pending(p, Some(counting), &probe);
        let t = std::thread::spawn(move || running(failed()));
        while !probe.entered.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let pr = probe.clone();
        let pp = p as usize;
        let freer = std::thread::spawn(move || {
            rmq_producer_free(pp as *mut rmq_producer);
            pr.freed.store(true, Ordering::SeqCst);
        });
        // Past the bound (send timeout 100 ms + 10 s), with the first callback still in C:
        // nothing to await here but the time the bound takes.
        std::thread::sleep(Duration::from_millis(10_600));
        assert!(
            !probe.freed.load(Ordering::SeqCst),
            "rmq_producer_free returned while a callback of the producer was running"
        );
        probe.release.store(true, Ordering::SeqCst);
        t.join().unwrap();
        freer.join().unwrap();
        assert!(probe.freed.load(Ordering::SeqCst));
        // A send whose callback comes after the free: the crate still calls the wrapper,
        // which must not call C with the userdata C has freed by now.
        later(failed());
        assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            probe.calls_after_free.load(Ordering::SeqCst),
            0,
            "a callback reached C after rmq_producer_free returned"
        );
    }

    extern "C" fn count_request(ud: *mut c_void, r: rmq_result, reply: *const rmq_message_ext) {
        let p = probe(ud);
        assert_eq!(r == rmq_result::RMQ_OK, !reply.is_null());
        p.calls.fetch_add(1, Ordering::SeqCst);
        if p.freed.load(Ordering::SeqCst) {
            p.calls_after_free.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_async_request_needs_a_producer_a_message_and_a_callback() {
        let probe = Probe::default();
        let ud = &probe as *const Probe as *mut c_void;
        let p = producer(100);
        let mut m = null_mut();
        assert_eq!(
            crate::message::rmq_message_new(c"T".as_ptr(), 1, c"b".as_ptr().cast(), 1, &mut m),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_producer_request_async(std::ptr::null(), m, 1000, Some(count_request), ud),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_producer_request_async(p, std::ptr::null(), 1000, Some(count_request), ud),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_producer_request_async(p, m, 1000, None, ud),
            rmq_result::RMQ_NULL_PARAMETER
        );
        crate::message::rmq_message_free(m);
        rmq_producer_free(p);
        assert_eq!(probe.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn an_async_request_ending_after_the_free_never_reaches_c() {
        let probe = Probe::default();
        let ud = &probe as *const Probe as *mut c_void;
        let p = producer(100);
        let live = handle(p, "producer").expect("live producer");
        let Ok(done) = request_callback(live, Some(count_request), ud) else {
            panic!("not admitted");
        };
        let Ok(late) = request_callback(live, Some(count_request), ud) else {
            panic!("not admitted");
        };
        done(Err(rocketmq_blocking::Error::new(
            rocketmq_blocking::ErrorKind::Timeout,
            "test",
        )));
        assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
        // `late` holds the gate open: the free waits its bound (100 ms + 10 s), then
        // gives up on it.
        rmq_producer_free(p);
        probe.freed.store(true, Ordering::SeqCst);
        late(Err(rocketmq_blocking::Error::new(
            rocketmq_blocking::ErrorKind::Timeout,
            "test",
        )));
        assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
        assert_eq!(probe.calls_after_free.load(Ordering::SeqCst), 0);
    }
    extern "C" fn before_tag(
        ud: *mut c_void,
        _m: *const rmq_message,
        ctx: *mut rmq_send_hook_context,
    ) {
        probe(ud).calls.fetch_add(1, Ordering::SeqCst);
        let (k, v) = ("traceparent", "00-1-2-01");
        let r = rmq_send_hook_context_put_property(
            ctx,
            k.as_ptr().cast(),
            k.len(),
            v.as_ptr().cast(),
            v.len(),
        );
        assert_eq!(r, rmq_result::RMQ_OK);
        let reserved = "UNIQ_KEY";
        let r = rmq_send_hook_context_put_property(
            ctx,
            reserved.as_ptr().cast(),
            reserved.len(),
            v.as_ptr().cast(),
            v.len(),
        );
        assert_eq!(r, rmq_result::RMQ_INVALID_ARGUMENT);
    }

    extern "C" fn after_failed(
        ud: *mut c_void,
        m: *const rmq_message,
        r: rmq_result,
        sr: *const rmq_send_result,
    ) {
        let p = probe(ud);
        assert!(sr.is_null());
        let m = handle(m, "message").expect("a message view");
        if r != rmq_result::RMQ_OK && m.inner.get().property("traceparent") == Some("00-1-2-01") {
            p.calls_after_free.fetch_add(1, Ordering::SeqCst); // here: "failed, traced"
        }
    }

    /// A send hook and the stats JSON on a producer whose name server is dead: the hook
    /// runs before and after the failed send, and the JSON counts the failure.
    #[test]
    fn a_failed_send_runs_the_c_send_hook_and_counts_in_the_stats_json() {
        let probe = Probe::default();
        let ud = &probe as *const Probe as *mut c_void;
        let (mut b, mut p) = (null_mut(), null_mut());
        let (group, addr) = ("ffi_stats", "127.0.0.1:1");
        assert_eq!(
            rmq_producer_builder_new(group.as_ptr().cast(), group.len(), &mut b),
            rmq_result::RMQ_OK
        );
        let mut o = null_mut();
        assert_eq!(
            crate::options::rmq_client_options_new(&mut o),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            crate::options::rmq_client_options_namesrv_addr(o, addr.as_ptr().cast(), addr.len()),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_producer_builder_client_options(b, o),
            rmq_result::RMQ_OK
        );
        crate::options::rmq_client_options_free(o);
        assert_eq!(
            rmq_producer_builder_send_timeout_ms(b, 300),
            rmq_result::RMQ_OK
        );
        assert_eq!(rmq_producer_builder_retries(b, 0), rmq_result::RMQ_OK);
        assert_eq!(
            rmq_producer_builder_send_hook(b, None, None, ud),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_producer_builder_send_hook(b, Some(before_tag), Some(after_failed), ud),
            rmq_result::RMQ_OK
        );
        assert_eq!(rmq_producer_builder_start(b, &mut p), rmq_result::RMQ_OK);
        let mut m = null_mut();
        assert_eq!(
            crate::message::rmq_message_new(c"StatsT".as_ptr(), 6, c"b".as_ptr().cast(), 1, &mut m),
            rmq_result::RMQ_OK
        );
        assert_ne!(rmq_producer_send(p, m, null_mut()), rmq_result::RMQ_OK);
        assert_eq!(
            probe.calls.load(Ordering::SeqCst),
            1,
            "before_send ran once"
        );
        assert_eq!(
            probe.calls_after_free.load(Ordering::SeqCst),
            1,
            "after_send saw the failure and the property"
        );

        let (mut small, mut need) = ([0 as c_char; 4], 0usize);
        assert_eq!(
            rmq_producer_stats_json(p, small.as_mut_ptr(), small.len(), &mut need),
            rmq_result::RMQ_BUFFER_TOO_SMALL
        );
        let mut buf = vec![0 as c_char; need + 1];
        let mut written = 0usize;
        assert_eq!(
            rmq_producer_stats_json(p, buf.as_mut_ptr(), buf.len(), &mut written),
            rmq_result::RMQ_OK
        );
        assert_eq!(written, need);
        let bytes: Vec<u8> = buf[..written].iter().map(|c| *c as u8).collect();
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
        let t = &v["topics"]["StatsT"];
        assert_eq!(
            (t["messages_sent"].as_u64(), t["failed"].as_u64()),
            (Some(0), Some(1)),
            "{v}"
        );
        assert_eq!(
            t["failed_by_kind"]
                .as_object()
                .map(|o| o.values().filter_map(|n| n.as_u64()).sum::<u64>()),
            Some(1),
            "{v}"
        );
        assert_eq!(v["group"], "ffi_stats");
        assert_eq!(
            rmq_producer_stats_json(std::ptr::null(), buf.as_mut_ptr(), buf.len(), &mut written),
            rmq_result::RMQ_NULL_PARAMETER
        );
        crate::message::rmq_message_free(m);
        rmq_producer_free(p);
    }
}
