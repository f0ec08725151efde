//! Async sends and requests: the C callbacks pass the producer's gate, so that
//! `rmq_producer_free` waits for those still to come.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use rocketmq_blocking::Message;

use super::*;
use crate::common::Gate;
use crate::error::{err, fail, guard, rmq_result};
use crate::message::{
    rmq_message, rmq_message_ext, rmq_message_queue, rmq_queue_list, rmq_send_result,
};
use crate::util::{handle_array, out_handle, str_arg, Userdata};

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
pub(super) fn async_callback(
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
pub(super) fn batch_arg(
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
pub(super) fn request_callback(
    p: &rmq_producer,
    callback: rmq_request_callback,
    userdata: *mut c_void,
) -> Result<
    impl FnOnce(rocketmq_blocking::Result<rocketmq_blocking::MessageExt>) + Send + 'static,
    rmq_result,
> {
    gated_callback(p, callback, userdata, "request", rmq_message_ext::owned)
}
