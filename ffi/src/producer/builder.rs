//! The producer's builder handle: Java's producer options, the send hook, and the start
//! that turns it into an `rmq_producer`.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::{Message, Producer, SendContext, SendHook, SendResult};

use super::*;
use crate::common::{self, Gate, Slot};
use crate::error::{err, err_ref, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message, rmq_send_result, Ref};
use crate::options::rmq_client_options;
use crate::util::{handle_mut, out_handle, str_arg, take_handle, Userdata};

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
