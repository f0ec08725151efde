//! The producer (Java `DefaultMQProducer`): a builder handle for the options, then
//! `rmq_producer_builder_start`.
//!
//! Thread safety: an `rmq_producer` may be used from any number of threads at once (every
//! send takes it as `const`); only `rmq_producer_free` needs it exclusively, after every
//! other call on it has returned. A builder is for one thread at a time.
//!
//! Transactions (Java `TransactionMQProducer`) have their own handle,
//! `rmq_transaction_producer` (`transaction.rs`), built the same way.

mod builder;
mod send_async;

pub use builder::*;
pub use send_async::*;

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::{Message, MessageQueue, Producer, ProducerBuilder};

use crate::common::{Gate, HasSlot, Slot};
use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message, rmq_message_queue, rmq_send_result};
use crate::util::{copy_to_buf, handle, out_handle, take_handle, Userdata};
use send_async::batch_arg;

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
pub(crate) mod tests;
