//! The simple consumer (POP, RocketMQ 5.x): receive messages that stay invisible to the
//! group for a time, ack each, or move its invisible time. On a 4.x broker every call is
//! `RMQ_UNSUPPORTED`.
//!
//! Thread safety: an `rmq_simple_consumer` may be used from several threads at once (as
//! the Rust type); `rmq_simple_consumer_free` needs it exclusively. A
//! `rmq_received_list` and the messages in it may be used from several threads too (each
//! message's receipt is behind a lock); `rmq_received_list_free` needs the list
//! exclusively, and ends every pointer `rmq_received_list_get` gave out. It calls no C
//! callbacks.

use std::ffi::c_char;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rocketmq_blocking::{MessageSelector, ReceivedMessage, SimpleConsumer, SimpleConsumerBuilder};

use crate::common::{self, HasSlot, Slot};
use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{out_of_range, rmq_message_ext};
use crate::options::rmq_client_options;
use crate::push::consume_from;
use crate::util::{copy_to_buf, handle, handle_array, out, out_handle, str_arg, take_handle};

/// Options of a simple consumer before it starts.
pub struct rmq_simple_consumer_builder {
    slot: Slot<SimpleConsumerBuilder>,
}

impl HasSlot for rmq_simple_consumer_builder {
    type B = SimpleConsumerBuilder;
    fn slot(&mut self) -> &mut Slot<SimpleConsumerBuilder> {
        &mut self.slot
    }
}

/// A started simple consumer.
pub struct rmq_simple_consumer {
    inner: SimpleConsumer,
}

/// One received message and its receipt.
pub struct rmq_received_message {
    /// A copy of the message for `rmq_received_message_message` (bodies are shared, not
    /// copied), so that the receipt can change under its lock while C reads the message.
    view: rmq_message_ext,
    received: Mutex<ReceivedMessage>,
}

impl rmq_received_message {
    fn lock(&self) -> MutexGuard<'_, ReceivedMessage> {
        // A panic while the lock was held cannot leave the receipt half-written.
        self.received.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one `rmq_simple_consumer_receive` returned.
pub struct rmq_received_list {
    items: Vec<rmq_received_message>,
}

/// Starts building a simple consumer of `group` (defaults: 5 s await at the broker,
/// a group without progress starts at the last message). Subscribe at least once.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_new(
    group: *const c_char,
    group_len: usize,
    builder_out: *mut *mut rmq_simple_consumer_builder,
) -> rmq_result {
    guard(|| {
        let group = str_arg(group, group_len, "group")?;
        out_handle(
            builder_out,
            rmq_simple_consumer_builder {
                slot: Slot(Some(SimpleConsumer::builder(group))),
            },
        )
    })
}

/// The client options every client shares, copied from `options`.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_client_options(
    b: *mut rmq_simple_consumer_builder,
    options: *const rmq_client_options,
) -> rmq_result {
    crate::options::set_client_options(b, options)
}

/// Subscribes to `topic` with a tag expression.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_subscribe(
    b: *mut rmq_simple_consumer_builder,
    topic: *const c_char,
    topic_len: usize,
    expression: *const c_char,
    expression_len: usize,
) -> rmq_result {
    common::configure(
        b,
        || {
            Ok((
                str_arg(topic, topic_len, "topic")?,
                str_arg(expression, expression_len, "expression")?,
            ))
        },
        |b, (t, e)| b.subscribe(t, e),
    )
}

/// Subscribes to `topic` with an SQL92 filter.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_subscribe_sql(
    b: *mut rmq_simple_consumer_builder,
    topic: *const c_char,
    topic_len: usize,
    sql: *const c_char,
    sql_len: usize,
) -> rmq_result {
    common::configure(
        b,
        || {
            Ok((
                str_arg(topic, topic_len, "topic")?,
                str_arg(sql, sql_len, "sql")?,
            ))
        },
        |b, (t, sql)| b.subscribe_with(t, MessageSelector::by_sql(sql)),
    )
}

/// How long a receive waits at the broker when nothing is there (default 5000 ms).
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_await_duration(
    b: *mut rmq_simple_consumer_builder,
    await_ms: u64,
) -> rmq_result {
    common::set(b, |b| b.await_duration(Duration::from_millis(await_ms)))
}

/// Where a group without progress starts (an `rmq_consume_from`: first or last; a
/// timestamp means last here).
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_consume_from(
    b: *mut rmq_simple_consumer_builder,
    from: i32,
) -> rmq_result {
    common::configure(b, || consume_from(from, 0), |b, f| b.consume_from_where(f))
}

/// Starts the consumer. The builder is consumed, whatever the result.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_start(
    b: *mut rmq_simple_consumer_builder,
    consumer_out: *mut *mut rmq_simple_consumer,
) -> rmq_result {
    guard(|| {
        let mut owned = take_handle(b)
            .ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "builder is NULL"))?;
        let c = owned.slot.take()?.start().map_err(err)?;
        out_handle(consumer_out, rmq_simple_consumer { inner: c })
    })
}

/// Frees a builder that was not started. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_builder_free(b: *mut rmq_simple_consumer_builder) {
    guard_void(|| drop(take_handle(b)));
}

fn consumer<'a>(c: *const rmq_simple_consumer) -> Result<&'a SimpleConsumer, rmq_result> {
    Ok(&handle(c, "consumer")?.inner)
}

/// Receives up to `max` (1..=32) messages, each invisible to the group for
/// `invisible_ms` (5 s..=12 h); waits up to the await duration when nothing is there.
/// `*list_out` is a new list (possibly empty) to free with `rmq_received_list_free`.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_receive(
    c: *const rmq_simple_consumer,
    max: usize,
    invisible_ms: u64,
    list_out: *mut *mut rmq_received_list,
) -> rmq_result {
    guard(|| {
        let msgs = consumer(c)?
            .receive(max, Duration::from_millis(invisible_ms))
            .map_err(err)?;
        let items = msgs
            .into_iter()
            .map(|m| rmq_received_message {
                view: rmq_message_ext::owned(m.message().clone()),
                received: Mutex::new(m),
            })
            .collect();
        out_handle(list_out, rmq_received_list { items })
    })
}

/// Acks a received message: the group never gets it again.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_ack(
    c: *const rmq_simple_consumer,
    message: *const rmq_received_message,
) -> rmq_result {
    guard(|| {
        let m = handle(message, "message")?;
        consumer(c)?.ack(&m.lock()).map_err(err)
    })
}

/// Acks `count` received messages (from any lists) with one BATCH_ACK_MESSAGE per
/// broker and topic; a broker before 5.1.1 gets single acks. Every message is tried;
/// the first error is returned. A message may appear more than once.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_ack_batch(
    c: *const rmq_simple_consumer,
    messages: *const *const rmq_received_message,
    count: usize,
) -> rmq_result {
    guard(|| {
        let mut ms = handle_array(messages, count, "messages")?;
        // Each lock once: the same message twice would deadlock on its own lock.
        ms.sort_by_key(|m| std::ptr::from_ref(*m) as usize);
        ms.dedup_by_key(|m| std::ptr::from_ref(*m) as usize);
        let guards: Vec<MutexGuard<'_, ReceivedMessage>> = ms.iter().map(|m| m.lock()).collect();
        consumer(c)?
            .ack_batch(guards.iter().map(|g| &**g))
            .map_err(err)
    })
}

/// Waits up to `timeout_ms` (at most an hour) until a subscribed topic has a message
/// the group could receive, without taking it (NOTIFICATION); `*has_messages` says
/// whether one came. 0 asks without waiting.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_wait_for_messages(
    c: *const rmq_simple_consumer,
    timeout_ms: u64,
    has_messages: *mut bool,
) -> rmq_result {
    guard(|| {
        let has = consumer(c)?
            .wait_for_messages(Duration::from_millis(timeout_ms))
            .map_err(err)?;
        out(has_messages, has)
    })
}

/// Makes a received message visible again `invisible_ms` (5 s..=12 h) from now and
/// gives it its new receipt.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_change_invisible_duration(
    c: *const rmq_simple_consumer,
    message: *const rmq_received_message,
    invisible_ms: u64,
) -> rmq_result {
    guard(|| {
        let m = handle(message, "message")?;
        consumer(c)?
            .change_invisible_duration(&mut m.lock(), Duration::from_millis(invisible_ms))
            .map_err(err)
    })
}

/// Unregisters the consumer. Idempotent; the handle must still be freed.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_shutdown(c: *const rmq_simple_consumer) -> rmq_result {
    guard(|| {
        consumer(c)?.shutdown();
        Ok(())
    })
}

/// Shuts down (if not yet) and frees the consumer. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_simple_consumer_free(c: *mut rmq_simple_consumer) {
    guard_void(|| {
        if let Some(c) = take_handle(c) {
            c.inner.shutdown();
        }
    });
}

/// The number of messages in the list.
#[no_mangle]
pub extern "C" fn rmq_received_list_len(
    list: *const rmq_received_list,
    len: *mut usize,
) -> rmq_result {
    guard(|| out(len, handle(list, "list")?.items.len()))
}

/// The message at `index`, owned by the list (valid until the list is freed).
#[no_mangle]
pub extern "C" fn rmq_received_list_get(
    list: *const rmq_received_list,
    index: usize,
    message: *mut *const rmq_received_message,
) -> rmq_result {
    guard(|| {
        let items = &handle(list, "list")?.items;
        let m = items
            .get(index)
            .ok_or_else(|| out_of_range(index, items.len()))?;
        out(message, m as *const rmq_received_message)
    })
}

/// Frees the list and its messages. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_received_list_free(list: *mut rmq_received_list) {
    guard_void(|| drop(take_handle(list)));
}

/// The message itself (read it with the `rmq_message_ext_*` functions), owned by the
/// received message.
#[no_mangle]
pub extern "C" fn rmq_received_message_message(
    message: *const rmq_received_message,
    ext: *mut *const rmq_message_ext,
) -> rmq_result {
    guard(|| {
        let m = handle(message, "message")?;
        out(ext, &m.view as *const rmq_message_ext)
    })
}

/// Writes the receipt (the broker's text; it changes with every
/// `rmq_simple_consumer_change_invisible_duration`) into `buf`, NUL-terminated.
#[no_mangle]
pub extern "C" fn rmq_received_message_receipt_handle(
    message: *const rmq_received_message,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let r = handle(message, "message")?.lock().receipt_handle();
        copy_to_buf(r.as_bytes(), buf, len, written, true)
    })
}
