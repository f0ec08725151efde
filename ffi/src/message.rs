//! Messages to send (`rmq_message`), received messages (`rmq_message_ext`), queues,
//! lists of both, and send results.
//!
//! Thread safety: none of these handles may be used from two threads at once; a handle
//! that is only read (getters) may be moved between threads. Borrowed views (handed to a
//! callback, or returned by a `_get`) live as long as the call or the owning handle.

use std::ffi::c_char;
use std::time::{SystemTime, UNIX_EPOCH};

use rocketmq_blocking::{Message, MessageExt, MessageQueue, SendResult, SendStatus};

use crate::error::{err, guard, guard_void, rmq_result};
use crate::util::{
    bytes_arg, handle, handle_mut, out, out_handle, out_opt_str, out_str, str_arg, take_handle,
};

/// Owned by the handle, or borrowed from the crate for the length of a callback.
pub(crate) enum Ref<T> {
    Owned(T),
    Borrowed(*const T),
}

impl<T> Ref<T> {
    pub(crate) fn get(&self) -> &T {
        match self {
            Ref::Owned(t) => t,
            // SAFETY: a borrowed view is built from a reference that outlives every use
            // of the view: the views live on the stack of the callback that made them,
            // and the header says a callback's views are valid only during the call.
            Ref::Borrowed(p) => unsafe { &**p },
        }
    }
}

/// A message to send: topic, tags, keys, properties and body.
pub struct rmq_message {
    pub(crate) inner: Ref<Message>,
}

impl rmq_message {
    pub(crate) fn borrowed(m: &Message) -> rmq_message {
        rmq_message {
            inner: Ref::Borrowed(m),
        }
    }

    fn owned_mut(&mut self) -> Result<&mut Message, rmq_result> {
        match &mut self.inner {
            Ref::Owned(m) => Ok(m),
            Ref::Borrowed(_) => Err(crate::error::fail(
                rmq_result::RMQ_STATE,
                "a message borrowed in a callback is read-only",
            )),
        }
    }
}

/// A received message (Java `MessageExt`): the message plus where and when it was stored.
pub struct rmq_message_ext {
    pub(crate) inner: Ref<MessageExt>,
}

impl rmq_message_ext {
    pub(crate) fn owned(m: MessageExt) -> rmq_message_ext {
        rmq_message_ext {
            inner: Ref::Owned(m),
        }
    }
}

/// Frees a received message the caller owns (a reply of `rmq_producer_request`); never
/// one borrowed in a callback or held by a message list. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_message_ext_free(m: *mut rmq_message_ext) {
    guard_void(|| drop(take_handle(m)));
}

/// The reply to `request` (a message a consumer received) carrying `body`, for any
/// producer to send (Java `MessageUtil.createReplyMessage`); `*message_out` is a new
/// message to free with `rmq_message_free`. `RMQ_INVALID_ARGUMENT` for a message that is
/// not a request.
#[no_mangle]
pub extern "C" fn rmq_create_reply_message(
    request: *const rmq_message_ext,
    body: *const u8,
    body_len: usize,
    message_out: *mut *mut rmq_message,
) -> rmq_result {
    guard(|| {
        let request = handle(request, "request")?.inner.get();
        let body = bytes_arg(body, body_len, "body")?;
        let reply = rocketmq_blocking::create_reply_message(request, body.to_vec()).map_err(err)?;
        out_handle(
            message_out,
            rmq_message {
                inner: Ref::Owned(reply),
            },
        )
    })
}

/// A queue of a topic on a broker (Java `MessageQueue`).
pub struct rmq_message_queue {
    pub(crate) inner: MessageQueue,
}

/// A list of queues, from `rmq_producer_fetch_queues` or `rmq_admin_topic_queues`.
pub struct rmq_queue_list {
    pub(crate) items: Vec<rmq_message_queue>,
}

/// The messages of one `rmq_lite_pull_consumer_poll`.
pub struct rmq_message_list {
    pub(crate) items: Vec<rmq_message_ext>,
}

/// What the broker answered to a send (Java `SendResult`).
pub struct rmq_send_result {
    pub(crate) inner: SendResult,
    pub(crate) queue: rmq_message_queue,
}

impl rmq_send_result {
    pub(crate) fn new(r: SendResult) -> rmq_send_result {
        let queue = rmq_message_queue {
            inner: r.message_queue().clone(),
        };
        rmq_send_result { inner: r, queue }
    }
}

/// `rmq_send_result_status`: Java `SendStatus`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_send_status {
    RMQ_SEND_OK = 0,
    RMQ_SEND_FLUSH_DISK_TIMEOUT = 1,
    RMQ_SEND_FLUSH_SLAVE_TIMEOUT = 2,
    RMQ_SEND_SLAVE_NOT_AVAILABLE = 3,
}

pub(crate) fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---- rmq_message ----

/// Creates a message for `topic` with `body` (copied; `body` may be NULL when
/// `body_len` is 0). Free it with `rmq_message_free`; a send does not take it.
#[no_mangle]
pub extern "C" fn rmq_message_new(
    topic: *const c_char,
    topic_len: usize,
    body: *const u8,
    body_len: usize,
    message_out: *mut *mut rmq_message,
) -> rmq_result {
    guard(|| {
        let topic = str_arg(topic, topic_len, "topic")?;
        let body = bytes_arg(body, body_len, "body")?;
        out_handle(
            message_out,
            rmq_message {
                inner: Ref::Owned(Message::new(topic, body.to_vec())),
            },
        )
    })
}

/// Frees a message made by `rmq_message_new`. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_message_free(message: *mut rmq_message) {
    guard_void(|| drop(take_handle(message)));
}

/// Sets the tags (one tag, as Java `setTags`; consumers filter on it).
#[no_mangle]
pub extern "C" fn rmq_message_set_tags(
    message: *mut rmq_message,
    tags: *const c_char,
    tags_len: usize,
) -> rmq_result {
    guard(|| {
        let m = handle_mut(message, "message")?.owned_mut()?;
        m.set_tags(str_arg(tags, tags_len, "tags")?);
        Ok(())
    })
}

/// Sets the keys: one or more, separated by spaces (Java `setKeys`).
#[no_mangle]
pub extern "C" fn rmq_message_set_keys(
    message: *mut rmq_message,
    keys: *const c_char,
    keys_len: usize,
) -> rmq_result {
    guard(|| {
        let m = handle_mut(message, "message")?.owned_mut()?;
        m.set_keys(
            str_arg(keys, keys_len, "keys")?
                .split(' ')
                .filter(|k| !k.is_empty()),
        );
        Ok(())
    })
}

/// Sets the body (copied).
#[no_mangle]
pub extern "C" fn rmq_message_set_body(
    message: *mut rmq_message,
    body: *const u8,
    body_len: usize,
) -> rmq_result {
    guard(|| {
        let m = handle_mut(message, "message")?.owned_mut()?;
        m.set_body(bytes_arg(body, body_len, "body")?.to_vec());
        Ok(())
    })
}

/// Adds a user property (Java `putUserProperty`); reserved names are `RMQ_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn rmq_message_put_property(
    message: *mut rmq_message,
    name: *const c_char,
    name_len: usize,
    value: *const c_char,
    value_len: usize,
) -> rmq_result {
    guard(|| {
        let m = handle_mut(message, "message")?.owned_mut()?;
        let name = str_arg(name, name_len, "name")?;
        let value = str_arg(value, value_len, "value")?;
        m.put_user_property(name, value).map_err(err)
    })
}

/// Sets the delay level (1 = 1 s ... 18 = 2 h with the broker's default levels).
#[no_mangle]
pub extern "C" fn rmq_message_set_delay_level(message: *mut rmq_message, level: u32) -> rmq_result {
    guard(|| {
        handle_mut(message, "message")?
            .owned_mut()?
            .set_delay_time_level(level);
        Ok(())
    })
}

/// A timer message (5.x brokers): delivered at `deliver_time_ms`, milliseconds since the
/// Unix epoch, to the broker's 1 s precision. A 4.x broker delivers it at once. Sending
/// refuses a time over 10 minutes in the past and a timer with a delay level
/// (`RMQ_INVALID_ARGUMENT`); the broker refuses one beyond its maximum delay, 3 days by
/// default (`RMQ_RESPONSE`).
#[no_mangle]
pub extern "C" fn rmq_message_set_deliver_time_ms(
    message: *mut rmq_message,
    deliver_time_ms: u64,
) -> rmq_result {
    guard(|| {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(deliver_time_ms);
        handle_mut(message, "message")?
            .owned_mut()?
            .set_deliver_time(at);
        Ok(())
    })
}

/// A timer message (5.x brokers) delivered `delay_ms` after the broker stores it; as
/// `rmq_message_set_deliver_time_ms` otherwise.
#[no_mangle]
pub extern "C" fn rmq_message_set_delivery_delay_ms(
    message: *mut rmq_message,
    delay_ms: u64,
) -> rmq_result {
    guard(|| {
        handle_mut(message, "message")?
            .owned_mut()?
            .set_delivery_delay(std::time::Duration::from_millis(delay_ms));
        Ok(())
    })
}

fn message_str(
    message: *const rmq_message,
    data: *mut *const c_char,
    len: *mut usize,
    f: impl FnOnce(&Message) -> Option<&str>,
) -> rmq_result {
    guard(|| out_opt_str(f(handle(message, "message")?.inner.get()), data, len))
}

/// The topic, borrowed from the message (not NUL-terminated).
#[no_mangle]
pub extern "C" fn rmq_message_topic(
    message: *const rmq_message,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    message_str(message, data, len, |m| Some(m.topic()))
}

/// The tags; `*data` is NULL when the message has none.
#[no_mangle]
pub extern "C" fn rmq_message_tags(
    message: *const rmq_message,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    message_str(message, data, len, |m| m.tags())
}

/// The keys as one string, separated by spaces; `*data` is NULL when there are none.
#[no_mangle]
pub extern "C" fn rmq_message_keys(
    message: *const rmq_message,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    message_str(message, data, len, |m| m.property("KEYS"))
}

/// The body, borrowed from the message.
#[no_mangle]
pub extern "C" fn rmq_message_body(
    message: *const rmq_message,
    data: *mut *const u8,
    len: *mut usize,
) -> rmq_result {
    guard(|| {
        let b = handle(message, "message")?.inner.get().body();
        out(data, b.as_ptr())?;
        out(len, b.len())
    })
}

/// The value of a property (user or system); `*data` is NULL when absent.
#[no_mangle]
pub extern "C" fn rmq_message_property(
    message: *const rmq_message,
    name: *const c_char,
    name_len: usize,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| {
        let name = str_arg(name, name_len, "name")?;
        out_opt_str(
            handle(message, "message")?.inner.get().property(name),
            data,
            len,
        )
    })
}

// ---- rmq_message_ext ----

fn ext<'a>(m: *const rmq_message_ext) -> Result<&'a MessageExt, rmq_result> {
    Ok(handle(m, "message")?.inner.get())
}

fn ext_str(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
    f: impl FnOnce(&MessageExt) -> Option<&str>,
) -> rmq_result {
    guard(|| out_opt_str(f(ext(m)?), data, len))
}

fn ext_i64(
    m: *const rmq_message_ext,
    v: *mut i64,
    f: impl FnOnce(&MessageExt) -> i64,
) -> rmq_result {
    guard(|| out(v, f(ext(m)?)))
}

/// The topic of a received message.
#[no_mangle]
pub extern "C" fn rmq_message_ext_topic(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| Some(m.topic()))
}

/// The tags; `*data` is NULL when there are none.
#[no_mangle]
pub extern "C" fn rmq_message_ext_tags(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| m.tags())
}

/// The keys, separated by spaces; `*data` is NULL when there are none.
#[no_mangle]
pub extern "C" fn rmq_message_ext_keys(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| m.property("KEYS"))
}

/// The message id (Java `getMsgId`: the producer's UNIQ_KEY when set).
#[no_mangle]
pub extern "C" fn rmq_message_ext_msg_id(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| Some(m.msg_id()))
}

/// The offset message id (store host and commit-log offset).
#[no_mangle]
pub extern "C" fn rmq_message_ext_offset_msg_id(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| Some(m.offset_msg_id()))
}

/// The broker the message was read from.
#[no_mangle]
pub extern "C" fn rmq_message_ext_broker_name(
    m: *const rmq_message_ext,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    ext_str(m, data, len, |m| Some(m.broker_name()))
}

/// A property's value; `*data` is NULL when absent.
#[no_mangle]
pub extern "C" fn rmq_message_ext_property(
    m: *const rmq_message_ext,
    name: *const c_char,
    name_len: usize,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| {
        let name = str_arg(name, name_len, "name")?;
        out_opt_str(ext(m)?.property(name), data, len)
    })
}

/// The number of properties of a received message (system properties such as `KEYS`,
/// `TAGS` and `UNIQ_KEY` included), for `rmq_message_ext_property_at`.
#[no_mangle]
pub extern "C" fn rmq_message_ext_property_count(
    m: *const rmq_message_ext,
    count: *mut usize,
) -> rmq_result {
    guard(|| out(count, ext(m)?.properties().len()))
}

/// The property at `index` (in name order): its name and value, borrowed from the
/// message. `RMQ_OUT_OF_RANGE` past the last one.
#[no_mangle]
pub extern "C" fn rmq_message_ext_property_at(
    m: *const rmq_message_ext,
    index: usize,
    name: *mut *const c_char,
    name_len: *mut usize,
    value: *mut *const c_char,
    value_len: *mut usize,
) -> rmq_result {
    guard(|| {
        let m = ext(m)?;
        let count = m.properties().len();
        let (k, v) = m
            .properties()
            .nth(index)
            .ok_or_else(|| out_of_range(index, count))?;
        out_str(k, name, name_len)?;
        out_str(v, value, value_len)
    })
}

/// The body, borrowed from the message.
#[no_mangle]
pub extern "C" fn rmq_message_ext_body(
    m: *const rmq_message_ext,
    data: *mut *const u8,
    len: *mut usize,
) -> rmq_result {
    guard(|| {
        let b = ext(m)?.body();
        out(data, b.as_ptr())?;
        out(len, b.len())
    })
}

/// The queue id within the broker.
#[no_mangle]
pub extern "C" fn rmq_message_ext_queue_id(
    m: *const rmq_message_ext,
    queue_id: *mut i32,
) -> rmq_result {
    guard(|| out(queue_id, ext(m)?.queue_id()))
}

/// The offset within the queue.
#[no_mangle]
pub extern "C" fn rmq_message_ext_queue_offset(
    m: *const rmq_message_ext,
    offset: *mut i64,
) -> rmq_result {
    ext_i64(m, offset, |m| m.queue_offset())
}

/// The commit-log offset.
#[no_mangle]
pub extern "C" fn rmq_message_ext_commit_log_offset(
    m: *const rmq_message_ext,
    offset: *mut i64,
) -> rmq_result {
    ext_i64(m, offset, |m| m.commit_log_offset())
}

/// How often the message was delivered again.
#[no_mangle]
pub extern "C" fn rmq_message_ext_reconsume_times(
    m: *const rmq_message_ext,
    times: *mut u32,
) -> rmq_result {
    guard(|| out(times, ext(m)?.reconsume_times()))
}

/// When the producer made the message, in milliseconds since the Unix epoch.
#[no_mangle]
pub extern "C" fn rmq_message_ext_born_timestamp_ms(
    m: *const rmq_message_ext,
    ms: *mut i64,
) -> rmq_result {
    ext_i64(m, ms, |m| millis(m.born_timestamp()))
}

/// When the broker stored the message, in milliseconds since the Unix epoch.
#[no_mangle]
pub extern "C" fn rmq_message_ext_store_timestamp_ms(
    m: *const rmq_message_ext,
    ms: *mut i64,
) -> rmq_result {
    ext_i64(m, ms, |m| millis(m.store_timestamp()))
}

// ---- rmq_message_queue and lists ----

/// Creates a queue handle (for `rmq_producer_send_to_queue`, lite pull `assign`/`seek`).
#[no_mangle]
pub extern "C" fn rmq_message_queue_new(
    topic: *const c_char,
    topic_len: usize,
    broker_name: *const c_char,
    broker_name_len: usize,
    queue_id: i32,
    queue_out: *mut *mut rmq_message_queue,
) -> rmq_result {
    guard(|| {
        let topic = str_arg(topic, topic_len, "topic")?;
        let broker = str_arg(broker_name, broker_name_len, "broker_name")?;
        out_handle(
            queue_out,
            rmq_message_queue {
                inner: MessageQueue::new(topic, broker, queue_id),
            },
        )
    })
}

/// Frees a queue made by `rmq_message_queue_new`. NULL is a no-op. Queues borrowed from a
/// list or a send result are freed with their owner, never with this.
#[no_mangle]
pub extern "C" fn rmq_message_queue_free(queue: *mut rmq_message_queue) {
    guard_void(|| drop(take_handle(queue)));
}

/// The queue's topic.
#[no_mangle]
pub extern "C" fn rmq_message_queue_topic(
    q: *const rmq_message_queue,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| out_str(handle(q, "queue")?.inner.topic(), data, len))
}

/// The queue's broker name.
#[no_mangle]
pub extern "C" fn rmq_message_queue_broker_name(
    q: *const rmq_message_queue,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| out_str(handle(q, "queue")?.inner.broker_name(), data, len))
}

/// The queue id.
#[no_mangle]
pub extern "C" fn rmq_message_queue_id(
    q: *const rmq_message_queue,
    queue_id: *mut i32,
) -> rmq_result {
    guard(|| out(queue_id, handle(q, "queue")?.inner.queue_id()))
}

/// The number of queues in the list.
#[no_mangle]
pub extern "C" fn rmq_queue_list_len(list: *const rmq_queue_list, len: *mut usize) -> rmq_result {
    guard(|| out(len, handle(list, "list")?.items.len()))
}

/// The queue at `index`, borrowed from the list (valid until the list is freed).
#[no_mangle]
pub extern "C" fn rmq_queue_list_get(
    list: *const rmq_queue_list,
    index: usize,
    queue: *mut *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        let l = handle(list, "list")?;
        let q = l
            .items
            .get(index)
            .ok_or_else(|| out_of_range(index, l.items.len()))?;
        out(queue, q as *const rmq_message_queue)
    })
}

/// Frees a queue list and the queues borrowed from it. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_queue_list_free(list: *mut rmq_queue_list) {
    guard_void(|| drop(take_handle(list)));
}

pub(crate) fn out_of_range(index: usize, len: usize) -> rmq_result {
    crate::error::fail(
        rmq_result::RMQ_OUT_OF_RANGE,
        format!("index {index} of a list of {len}"),
    )
}

/// The number of messages in the list.
#[no_mangle]
pub extern "C" fn rmq_message_list_len(
    list: *const rmq_message_list,
    len: *mut usize,
) -> rmq_result {
    guard(|| out(len, handle(list, "list")?.items.len()))
}

/// The message at `index`, borrowed from the list (valid until the list is freed).
#[no_mangle]
pub extern "C" fn rmq_message_list_get(
    list: *const rmq_message_list,
    index: usize,
    message: *mut *const rmq_message_ext,
) -> rmq_result {
    guard(|| {
        let l = handle(list, "list")?;
        let m = l
            .items
            .get(index)
            .ok_or_else(|| out_of_range(index, l.items.len()))?;
        out(message, m as *const rmq_message_ext)
    })
}

/// Frees a message list and the messages borrowed from it. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_message_list_free(list: *mut rmq_message_list) {
    guard_void(|| drop(take_handle(list)));
}

// ---- rmq_send_result ----

/// The send status (`RMQ_SEND_OK` when stored as asked).
#[no_mangle]
pub extern "C" fn rmq_send_result_status(
    r: *const rmq_send_result,
    status: *mut rmq_send_status,
) -> rmq_result {
    guard(|| {
        let s = match handle(r, "send result")?.inner.send_status() {
            SendStatus::Ok => rmq_send_status::RMQ_SEND_OK,
            SendStatus::FlushDiskTimeout => rmq_send_status::RMQ_SEND_FLUSH_DISK_TIMEOUT,
            SendStatus::FlushSlaveTimeout => rmq_send_status::RMQ_SEND_FLUSH_SLAVE_TIMEOUT,
            SendStatus::SlaveNotAvailable => rmq_send_status::RMQ_SEND_SLAVE_NOT_AVAILABLE,
        };
        out(status, s)
    })
}

/// The message id (UNIQ_KEY), the one consumers see as `rmq_message_ext_msg_id`.
#[no_mangle]
pub extern "C" fn rmq_send_result_msg_id(
    r: *const rmq_send_result,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| out_str(handle(r, "send result")?.inner.msg_id(), data, len))
}

/// The offset message id.
#[no_mangle]
pub extern "C" fn rmq_send_result_offset_msg_id(
    r: *const rmq_send_result,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| out_str(handle(r, "send result")?.inner.offset_msg_id(), data, len))
}

/// The queue the message went to, borrowed from the result.
#[no_mangle]
pub extern "C" fn rmq_send_result_queue(
    r: *const rmq_send_result,
    queue: *mut *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        out(
            queue,
            &handle(r, "send result")?.queue as *const rmq_message_queue,
        )
    })
}

/// The offset in that queue.
#[no_mangle]
pub extern "C" fn rmq_send_result_queue_offset(
    r: *const rmq_send_result,
    offset: *mut i64,
) -> rmq_result {
    guard(|| out(offset, handle(r, "send result")?.inner.queue_offset()))
}

/// Frees a send result. NULL is a no-op. (The one handed to an async callback is
/// borrowed and must not be freed.)
#[no_mangle]
pub extern "C" fn rmq_send_result_free(r: *mut rmq_send_result) {
    guard_void(|| drop(take_handle(r)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn a_message_keeps_what_c_sets_and_hands_it_back_borrowed() {
        let mut m = null_mut();
        assert_eq!(
            rmq_message_new(b"T".as_ptr().cast(), 1, b"hi".as_ptr(), 2, &mut m),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_message_set_tags(m, b"TagA".as_ptr().cast(), 4),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_message_set_keys(m, b"k1 k2".as_ptr().cast(), 5),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            rmq_message_put_property(m, b"a".as_ptr().cast(), 1, b"b".as_ptr().cast(), 1),
            rmq_result::RMQ_OK
        );
        let (mut p, mut n) = (null(), 0usize);
        rmq_message_tags(m, &mut p, &mut n);
        assert_eq!(n, 4);
        rmq_message_keys(m, &mut p, &mut n);
        assert_eq!(n, 5);
        rmq_message_property(m, b"a".as_ptr().cast(), 1, &mut p, &mut n);
        assert_eq!(n, 1);
        rmq_message_property(m, b"zz".as_ptr().cast(), 2, &mut p, &mut n);
        assert!(p.is_null());
        let (mut b, mut bn) = (null(), 0usize);
        rmq_message_body(m, &mut b, &mut bn);
        assert_eq!(bn, 2);
        rmq_message_free(m);
    }

    #[test]
    fn timer_setters_write_the_timer_properties() {
        let mut m = null_mut();
        rmq_message_new(b"T".as_ptr().cast(), 1, b"hi".as_ptr(), 2, &mut m);
        let prop = |m, name: &[u8]| {
            let (mut p, mut n) = (null(), 0usize);
            rmq_message_property(m, name.as_ptr().cast(), name.len(), &mut p, &mut n);
            // SAFETY: a property handed out is `n` bytes borrowed from the live message.
            (!p.is_null())
                .then(|| unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec())
        };
        assert_eq!(
            rmq_message_set_deliver_time_ms(m, 1_700_000_000_123),
            rmq_result::RMQ_OK
        );
        assert_eq!(
            prop(m, b"TIMER_DELIVER_MS").as_deref(),
            Some(&b"1700000000123"[..])
        );
        assert_eq!(
            rmq_message_set_delivery_delay_ms(m, 5000),
            rmq_result::RMQ_OK
        );
        assert_eq!(prop(m, b"TIMER_DELIVER_MS"), None);
        assert_eq!(prop(m, b"TIMER_DELAY_SEC").as_deref(), Some(&b"5"[..]));
        assert_eq!(
            rmq_message_set_delivery_delay_ms(null_mut(), 1),
            rmq_result::RMQ_NULL_PARAMETER
        );
        rmq_message_free(m);
    }

    #[test]
    fn null_handles_and_bad_strings_are_codes_not_crashes() {
        let (mut p, mut n) = (null(), 0usize);
        assert_eq!(
            rmq_message_topic(null(), &mut p, &mut n),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_message_set_tags(null_mut(), b"x".as_ptr().cast(), 1),
            rmq_result::RMQ_NULL_PARAMETER
        );
        let mut m = null_mut();
        assert_eq!(
            rmq_message_new(null(), 0, null(), 0, &mut m),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_message_new(b"\xff".as_ptr().cast(), 1, null(), 0, &mut m),
            rmq_result::RMQ_INVALID_UTF8
        );
        assert_eq!(
            rmq_message_new(b"T".as_ptr().cast(), 1, null(), 5, &mut m),
            rmq_result::RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_message_new(b"T".as_ptr().cast(), 1, null(), 0, null_mut()),
            rmq_result::RMQ_NULL_PARAMETER
        );
        let mut len = 0usize;
        assert_eq!(
            rmq_queue_list_len(null(), &mut len),
            rmq_result::RMQ_NULL_PARAMETER
        );
        rmq_message_free(null_mut());
        rmq_queue_list_free(null_mut());
    }

    #[test]
    fn list_indexes_past_the_end_are_out_of_range() {
        let list = rmq_queue_list {
            items: vec![rmq_message_queue {
                inner: MessageQueue::new("T", "b", 0),
            }],
        };
        let mut q = null();
        assert_eq!(rmq_queue_list_get(&list, 0, &mut q), rmq_result::RMQ_OK);
        let mut id = -1;
        rmq_message_queue_id(q, &mut id);
        assert_eq!(id, 0);
        assert_eq!(
            rmq_queue_list_get(&list, 1, &mut q),
            rmq_result::RMQ_OUT_OF_RANGE
        );
    }
}
