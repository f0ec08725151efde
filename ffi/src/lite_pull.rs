//! The lite pull consumer (Java `DefaultLitePullConsumer`): subscribe or assign, then
//! poll into a message list.
//!
//! Thread safety: an `rmq_lite_pull_consumer` may be used from several threads at once
//! (as the Rust type); `rmq_lite_pull_consumer_free` needs it exclusively. It calls no C
//! callbacks.

use std::collections::HashMap;
use std::ffi::c_char;
use std::time::Duration;

use rocketmq_blocking::{LitePullConsumer, LitePullConsumerBuilder, MessageQueue, MessageSelector};

use crate::common::{self, HasSlot, Slot};
use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message_ext, rmq_message_list, rmq_message_queue, rmq_queue_list, Ref};
use crate::options::rmq_client_options;
use crate::push::{consume_from, message_model};
use crate::util::{copy_to_buf, handle, handle_array, out, out_handle, str_arg, take_handle};

/// Options of a lite pull consumer before it starts.
pub struct rmq_lite_pull_consumer_builder {
    slot: Slot<LitePullConsumerBuilder>,
}

impl HasSlot for rmq_lite_pull_consumer_builder {
    type B = LitePullConsumerBuilder;
    fn slot(&mut self) -> &mut Slot<LitePullConsumerBuilder> {
        &mut self.slot
    }
}

/// A started lite pull consumer.
pub struct rmq_lite_pull_consumer {
    inner: LitePullConsumer,
}

/// Starts building a lite pull consumer of `group` (Java defaults: auto-commit every
/// 5 s, clustering, from the last offset). Subscribe here, or `assign` after start.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_new(
    group: *const c_char,
    group_len: usize,
    builder_out: *mut *mut rmq_lite_pull_consumer_builder,
) -> rmq_result {
    guard(|| {
        let group = str_arg(group, group_len, "group")?;
        out_handle(
            builder_out,
            rmq_lite_pull_consumer_builder {
                slot: Slot(Some(LitePullConsumer::builder(group))),
            },
        )
    })
}

/// The client options every client shares (name servers, instance name, namespace,
/// credentials, TLS, timeouts), copied from `options`.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_client_options(
    b: *mut rmq_lite_pull_consumer_builder,
    options: *const rmq_client_options,
) -> rmq_result {
    crate::options::set_client_options(b, options)
}

/// Subscribes to `topic` with a tag expression; queues come from the group's rebalance.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_subscribe(
    b: *mut rmq_lite_pull_consumer_builder,
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
pub extern "C" fn rmq_lite_pull_consumer_builder_subscribe_sql(
    b: *mut rmq_lite_pull_consumer_builder,
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

/// Whether consumed offsets are committed in the background (default true); without,
/// call `rmq_lite_pull_consumer_commit`.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_auto_commit(
    b: *mut rmq_lite_pull_consumer_builder,
    on: bool,
) -> rmq_result {
    common::set(b, |b| b.auto_commit(on))
}

/// Clustering or broadcasting (an `rmq_message_model`).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_message_model(
    b: *mut rmq_lite_pull_consumer_builder,
    model: i32,
) -> rmq_result {
    common::configure(b, || message_model(model), |b, m| b.message_model(m))
}

/// Where to start without a stored offset (an `rmq_consume_from`).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_consume_from(
    b: *mut rmq_lite_pull_consumer_builder,
    from: i32,
    timestamp_ms: i64,
) -> rmq_result {
    common::configure(
        b,
        || consume_from(from, timestamp_ms),
        |b, f| b.consume_from_where(f),
    )
}

/// Most messages per pull, and so per poll (default 10).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_pull_batch_size(
    b: *mut rmq_lite_pull_consumer_builder,
    n: usize,
) -> rmq_result {
    common::set(b, |b| b.pull_batch_size(n))
}

/// Records a trace of every message `poll` returns in `RMQ_SYS_TRACE_TOPIC`, or in
/// `trace_topic` when it is not NULL (Java `enableMsgTrace`).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_trace(
    b: *mut rmq_lite_pull_consumer_builder,
    trace_topic: *const c_char,
    trace_topic_len: usize,
) -> rmq_result {
    common::set_trace(b, trace_topic, trace_topic_len)
}

/// Starts the consumer. The builder is consumed, whatever the result.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_start(
    b: *mut rmq_lite_pull_consumer_builder,
    consumer_out: *mut *mut rmq_lite_pull_consumer,
) -> rmq_result {
    guard(|| {
        let mut owned = take_handle(b)
            .ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "builder is NULL"))?;
        let c = owned.slot.take()?.start().map_err(err)?;
        out_handle(consumer_out, rmq_lite_pull_consumer { inner: c })
    })
}

/// Frees a builder that was not started. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_builder_free(b: *mut rmq_lite_pull_consumer_builder) {
    guard_void(|| drop(take_handle(b)));
}

fn consumer<'a>(c: *const rmq_lite_pull_consumer) -> Result<&'a LitePullConsumer, rmq_result> {
    Ok(&handle(c, "consumer")?.inner)
}

/// Writes the consumer's figures (Rust `LitePullConsumer::stats`) as JSON into `buf`,
/// NUL-terminated; `*written` is its length. With `RMQ_BUFFER_TOO_SMALL`, `*written` is
/// the length needed (call again with a buffer of at least `*written + 1`). Counters are
/// monotonic from the client's start; latencies are in microseconds (`*_us` keys); the
/// shape is documented in docs/observability.md ("From C and Python"). Cheap enough to
/// call every second, from any thread.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_stats_json(
    c: *const rmq_lite_pull_consumer,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let json = crate::stats_json::consumer(&consumer(c)?.stats()).to_string();
        copy_to_buf(json.as_bytes(), buf, len, written, true)
    })
}

/// `qs` as a new `rmq_queue_list` in `*list_out`.
fn out_queue_list(
    list_out: *mut *mut rmq_queue_list,
    qs: Vec<MessageQueue>,
) -> Result<(), rmq_result> {
    let items = qs
        .into_iter()
        .map(|inner| rmq_message_queue { inner })
        .collect();
    out_handle(list_out, rmq_queue_list { items })
}

fn queues(qs: *const *const rmq_message_queue, n: usize) -> Result<Vec<MessageQueue>, rmq_result> {
    Ok(handle_array(qs, n, "queues")?
        .into_iter()
        .map(|q| q.inner.clone())
        .collect())
}

/// Waits up to `timeout_ms` for messages; `*list_out` is a new list (possibly empty) to
/// free with `rmq_message_list_free`.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_poll(
    c: *const rmq_lite_pull_consumer,
    timeout_ms: u64,
    list_out: *mut *mut rmq_message_list,
) -> rmq_result {
    guard(|| {
        let msgs = consumer(c)?
            .poll_timeout(Duration::from_millis(timeout_ms))
            .map_err(err)?;
        let items = msgs
            .into_iter()
            .map(|m| rmq_message_ext {
                inner: Ref::Owned(m),
            })
            .collect();
        out_handle(list_out, rmq_message_list { items })
    })
}

/// Consumes exactly these queues (instead of a subscription).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_assign(
    c: *const rmq_lite_pull_consumer,
    queues_in: *const *const rmq_message_queue,
    count: usize,
) -> rmq_result {
    guard(|| consumer(c)?.assign(&queues(queues_in, count)?).map_err(err))
}

/// The readable queues of `topic`, sorted, from the name server (Java
/// `fetchMessageQueues`): what `rmq_lite_pull_consumer_assign` takes. A topic may have
/// more or fewer readable queues than writable ones (`rmq_producer_fetch_queues`).
/// `*list_out` is a new list to free with `rmq_queue_list_free`.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_fetch_message_queues(
    c: *const rmq_lite_pull_consumer,
    topic: *const c_char,
    topic_len: usize,
    list_out: *mut *mut rmq_queue_list,
) -> rmq_result {
    guard(|| {
        let c = consumer(c)?;
        let topic = str_arg(topic, topic_len, "topic")?;
        out_queue_list(list_out, c.fetch_message_queues(topic).map_err(err)?)
    })
}

/// Commits `offsets[i]` (the next message to consume) for `queues_in[i]`, `count` of
/// each (Java `commit(Map<MessageQueue, Long>, boolean)`); with `persist`, written to the
/// broker before this returns. Every queue must be held and every offset at least 0, or
/// nothing is committed (`RMQ_STATE` / `RMQ_INVALID_ARGUMENT`).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_commit_offsets(
    c: *const rmq_lite_pull_consumer,
    queues_in: *const *const rmq_message_queue,
    offsets: *const i64,
    count: usize,
    persist: bool,
) -> rmq_result {
    guard(|| {
        let c = consumer(c)?;
        let qs = queues(queues_in, count)?;
        let offsets = crate::util::slice_arg(offsets, count, "offsets")?;
        let map: HashMap<MessageQueue, i64> = qs.into_iter().zip(offsets.iter().copied()).collect();
        c.commit(&map, persist).map_err(err)
    })
}

/// Subscribes a running consumer to one more topic with a tag expression (Java
/// `subscribe` after `start`); its queues are taken at once.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_subscribe(
    c: *const rmq_lite_pull_consumer,
    topic: *const c_char,
    topic_len: usize,
    expression: *const c_char,
    expression_len: usize,
) -> rmq_result {
    guard(|| {
        let c = consumer(c)?;
        let topic = str_arg(topic, topic_len, "topic")?;
        let expression = str_arg(expression, expression_len, "expression")?;
        c.subscribe(topic, expression).map_err(err)
    })
}

/// Subscribes a running consumer to one more topic with an SQL92 filter.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_subscribe_sql(
    c: *const rmq_lite_pull_consumer,
    topic: *const c_char,
    topic_len: usize,
    sql: *const c_char,
    sql_len: usize,
) -> rmq_result {
    guard(|| {
        let c = consumer(c)?;
        let topic = str_arg(topic, topic_len, "topic")?;
        let sql = str_arg(sql, sql_len, "sql")?;
        c.subscribe_with(topic, MessageSelector::by_sql(sql))
            .map_err(err)
    })
}

/// Stops consuming `topic`: its queues are dropped before this returns, and no later
/// poll returns its messages. `RMQ_INVALID_ARGUMENT` if not subscribed.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_unsubscribe(
    c: *const rmq_lite_pull_consumer,
    topic: *const c_char,
    topic_len: usize,
) -> rmq_result {
    guard(|| {
        let c = consumer(c)?;
        c.unsubscribe(str_arg(topic, topic_len, "topic")?)
            .map_err(err)
    })
}

/// Commits the offsets of what was polled so far.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_commit(c: *const rmq_lite_pull_consumer) -> rmq_result {
    guard(|| consumer(c)?.commit_sync().map_err(err))
}

/// The committed offset of a queue; `*found` is false when the group has none.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_committed(
    c: *const rmq_lite_pull_consumer,
    queue: *const rmq_message_queue,
    found: *mut bool,
    offset: *mut i64,
) -> rmq_result {
    guard(|| {
        let o = consumer(c)?
            .committed(&handle(queue, "queue")?.inner)
            .map_err(err)?;
        out(found, o.is_some())?;
        out(offset, o.unwrap_or(-1))
    })
}

/// The queues this consumer holds now (assigned, or allocated by the rebalance of its
/// subscriptions); `*list_out` is a new list to free with `rmq_queue_list_free`.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_assignment(
    c: *const rmq_lite_pull_consumer,
    list_out: *mut *mut rmq_queue_list,
) -> rmq_result {
    guard(|| out_queue_list(list_out, consumer(c)?.assignment()))
}

/// The first offset of `queue` whose message was stored at or after `timestamp_ms`
/// (milliseconds since the Unix epoch), asked of the queue's broker: `seek` there to
/// consume from a point in time.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_offset_for_timestamp(
    c: *const rmq_lite_pull_consumer,
    queue: *const rmq_message_queue,
    timestamp_ms: u64,
    offset: *mut i64,
) -> rmq_result {
    guard(|| {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(timestamp_ms);
        let o = consumer(c)?
            .offset_for_timestamp(&handle(queue, "queue")?.inner, at)
            .map_err(err)?;
        out(offset, o)
    })
}

/// Moves the next poll of a held queue to `offset` (cached messages are dropped).
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_seek(
    c: *const rmq_lite_pull_consumer,
    queue: *const rmq_message_queue,
    offset: i64,
) -> rmq_result {
    guard(|| {
        consumer(c)?
            .seek(&handle(queue, "queue")?.inner, offset)
            .map_err(err)
    })
}

/// Seeks to the first stored message of a queue.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_seek_to_begin(
    c: *const rmq_lite_pull_consumer,
    queue: *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        consumer(c)?
            .seek_to_begin(&handle(queue, "queue")?.inner)
            .map_err(err)
    })
}

/// Seeks past the last stored message of a queue.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_seek_to_end(
    c: *const rmq_lite_pull_consumer,
    queue: *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        consumer(c)?
            .seek_to_end(&handle(queue, "queue")?.inner)
            .map_err(err)
    })
}

/// Stops pulling these queues until resumed.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_pause(
    c: *const rmq_lite_pull_consumer,
    queues_in: *const *const rmq_message_queue,
    count: usize,
) -> rmq_result {
    guard(|| {
        consumer(c)?.pause(&queues(queues_in, count)?);
        Ok(())
    })
}

/// Resumes paused queues.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_resume(
    c: *const rmq_lite_pull_consumer,
    queues_in: *const *const rmq_message_queue,
    count: usize,
) -> rmq_result {
    guard(|| {
        consumer(c)?.resume(&queues(queues_in, count)?);
        Ok(())
    })
}

/// Commits (with auto-commit), stops the background pulls and unregisters. Idempotent;
/// the handle must still be freed.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_shutdown(c: *const rmq_lite_pull_consumer) -> rmq_result {
    guard(|| {
        consumer(c)?.shutdown();
        Ok(())
    })
}

/// Shuts down (if not yet) and frees the consumer. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_lite_pull_consumer_free(c: *mut rmq_lite_pull_consumer) {
    guard_void(|| {
        if let Some(c) = take_handle(c) {
            c.inner.shutdown();
        }
    });
}
