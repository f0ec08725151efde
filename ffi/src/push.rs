//! The push consumer (Java `DefaultMQPushConsumer`): a builder with a concurrent or an
//! orderly listener callback, then `rmq_push_consumer_builder_start`.
//!
//! Thread safety: an `rmq_push_consumer` may be used from any thread, by several at
//! once; `rmq_push_consumer_free` needs it exclusively. The listener runs on the crate's
//! consume threads, several at once for a concurrent listener (one per queue at a time
//! for an orderly one), so it and its userdata must be thread-safe.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rocketmq_blocking::{
    ConsumeConcurrentlyContext, ConsumeContext, ConsumeFromWhere, ConsumeHook, ConsumeHookStatus,
    ConsumeOrderlyContext, ConsumeOrderlyStatus, ConsumeStatus, MessageExt, MessageModel,
    MessageSelector, PushConsumer, PushConsumerBuilder, ReconsumeDelay,
};

use crate::common::{self, Gate, HasSlot, Slot};
use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message_ext, rmq_message_queue, rmq_queue_list, Ref};
use crate::options::rmq_client_options;
use crate::util::{
    copy_to_buf, handle, handle_mut, out, out_handle, str_arg, take_handle, Userdata,
};

/// What a listener answers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_consume_status {
    /// Consumed: the offset moves past these messages.
    RMQ_CONSUME_SUCCESS = 0,
    /// Concurrent: deliver these again later (Java `RECONSUME_LATER`). Orderly: suspend
    /// the queue a moment and deliver them again (Java `SUSPEND_CURRENT_QUEUE_A_MOMENT`).
    RMQ_CONSUME_LATER = 1,
}

/// The message model (`rmq_*_builder_message_model`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_message_model {
    /// Each message goes to one consumer of the group (the default).
    RMQ_CLUSTERING = 0,
    /// Each message goes to every consumer of the group.
    RMQ_BROADCASTING = 1,
}

/// Where a group without a stored offset starts (`rmq_*_builder_consume_from`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_consume_from {
    /// From the end of each queue (the default).
    RMQ_CONSUME_FROM_LAST_OFFSET = 0,
    /// From the first message still stored.
    RMQ_CONSUME_FROM_FIRST_OFFSET = 1,
    /// From the first message stored at or after a timestamp.
    RMQ_CONSUME_FROM_TIMESTAMP = 2,
}

/// A listener: gets `count` messages of one queue and the call's context (both borrowed
/// for the call; copy what you keep) and returns an `rmq_consume_status` as an
/// `int32_t` (other values count as `RMQ_CONSUME_LATER`). Runs on a crate consume thread.
pub type rmq_consume_callback = Option<
    extern "C" fn(
        userdata: *mut c_void,
        messages: *const *const rmq_message_ext,
        count: usize,
        context: *mut rmq_consume_context,
    ) -> i32,
>;

/// One listener call's context (Java `ConsumeConcurrentlyContext` /
/// `ConsumeOrderlyContext`): the queue, and what to do with the messages. Valid only
/// during the call, on the listener's thread.
pub struct rmq_consume_context {
    queue: rmq_message_queue,
    kind: ContextKind,
}

enum ContextKind {
    Concurrent(*mut ConsumeConcurrentlyContext),
    Orderly(*mut ConsumeOrderlyContext),
}

fn concurrent<'a>(
    c: *mut rmq_consume_context,
) -> Result<&'a mut ConsumeConcurrentlyContext, rmq_result> {
    match handle_mut(c, "context")?.kind {
        // SAFETY: the pointer is to the crate's context on the stack of the listener
        // call that made this `rmq_consume_context`, which the header says lives only
        // for that call; the call holds the only reference while C runs.
        ContextKind::Concurrent(p) => Ok(unsafe { &mut *p }),
        ContextKind::Orderly(_) => Err(fail(
            rmq_result::RMQ_STATE,
            "not a concurrent listener's context",
        )),
    }
}

/// The queue the messages come from, borrowed from the context.
#[no_mangle]
pub extern "C" fn rmq_consume_context_queue(
    c: *const rmq_consume_context,
    queue: *mut *const rmq_message_queue,
) -> rmq_result {
    guard(|| {
        out(
            queue,
            &handle(c, "context")?.queue as *const rmq_message_queue,
        )
    })
}

/// Concurrent listeners: messages up to `index` count as consumed even when the call
/// returns `RMQ_CONSUME_LATER`; the rest are delivered again (Java `setAckIndex`).
#[no_mangle]
pub extern "C" fn rmq_consume_context_set_ack_index(
    c: *mut rmq_consume_context,
    index: usize,
) -> rmq_result {
    guard(|| {
        concurrent(c)?.set_ack_index(index);
        Ok(())
    })
}

/// Concurrent listeners: the delay level of the next delivery after `RMQ_CONSUME_LATER`
/// (Java `setDelayLevelWhenNextConsume`): 0 the broker's choice, -1 straight to the
/// dead-letter queue, 1.. a delay level.
#[no_mangle]
pub extern "C" fn rmq_consume_context_set_delay_level(
    c: *mut rmq_consume_context,
    level: i32,
) -> rmq_result {
    guard(|| {
        let delay = match level {
            0 => ReconsumeDelay::Broker,
            -1 => ReconsumeDelay::DeadLetter,
            l if l > 0 => ReconsumeDelay::Level(l as u32),
            l => {
                return Err(fail(
                    rmq_result::RMQ_INVALID_ARGUMENT,
                    format!("delay level {l}"),
                ))
            }
        };
        concurrent(c)?.set_reconsume_delay(delay);
        Ok(())
    })
}

/// Orderly listeners: how long the queue pauses after `RMQ_CONSUME_LATER` (Java
/// `setSuspendCurrentQueueTimeMillis`).
#[no_mangle]
pub extern "C" fn rmq_consume_context_set_suspend_ms(
    c: *mut rmq_consume_context,
    ms: u64,
) -> rmq_result {
    guard(|| match handle_mut(c, "context")?.kind {
        ContextKind::Orderly(p) => {
            // SAFETY: as in `concurrent`: the crate's context of the running call.
            let ctx = unsafe { &mut *p };
            ctx.set_suspend_time(Duration::from_millis(ms));
            Ok(())
        }
        ContextKind::Concurrent(_) => Err(fail(
            rmq_result::RMQ_STATE,
            "not an orderly listener's context",
        )),
    })
}

/// Options of a push consumer before it starts.
pub struct rmq_push_consumer_builder {
    slot: Slot<PushConsumerBuilder>,
    gate: Arc<Gate>,
}

impl HasSlot for rmq_push_consumer_builder {
    type B = PushConsumerBuilder;
    fn slot(&mut self) -> &mut Slot<PushConsumerBuilder> {
        &mut self.slot
    }
}

/// A started push consumer.
pub struct rmq_push_consumer {
    inner: PushConsumer,
    /// Listener calls in flight; closed by `_free`.
    gate: Arc<Gate>,
}

pub(crate) fn message_model(m: i32) -> Result<MessageModel, rmq_result> {
    match m {
        0 => Ok(MessageModel::Clustering),
        1 => Ok(MessageModel::Broadcasting),
        _ => Err(fail(
            rmq_result::RMQ_INVALID_ARGUMENT,
            format!("message model {m}"),
        )),
    }
}

pub(crate) fn consume_from(from: i32, timestamp_ms: i64) -> Result<ConsumeFromWhere, rmq_result> {
    match from {
        0 => Ok(ConsumeFromWhere::LastOffset),
        1 => Ok(ConsumeFromWhere::FirstOffset),
        2 => Ok(ConsumeFromWhere::Timestamp(
            UNIX_EPOCH + Duration::from_millis(u64::try_from(timestamp_ms).unwrap_or(0)),
        )),
        _ => Err(fail(
            rmq_result::RMQ_INVALID_ARGUMENT,
            format!("consume-from {from}"),
        )),
    }
}

/// Starts building a push consumer of `group` (Java defaults: clustering, from the last
/// offset, 20 consume threads, batches of 1). Needs a listener and a subscription.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_new(
    group: *const c_char,
    group_len: usize,
    builder_out: *mut *mut rmq_push_consumer_builder,
) -> rmq_result {
    guard(|| {
        let group = str_arg(group, group_len, "group")?;
        out_handle(
            builder_out,
            rmq_push_consumer_builder {
                slot: Slot(Some(PushConsumer::builder(group))),
                gate: Arc::default(),
            },
        )
    })
}

/// The client options every client shares (name servers, instance name, namespace,
/// credentials, TLS, timeouts), copied from `options`.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_client_options(
    b: *mut rmq_push_consumer_builder,
    options: *const rmq_client_options,
) -> rmq_result {
    crate::options::set_client_options(b, options)
}

/// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_subscribe(
    b: *mut rmq_push_consumer_builder,
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

/// Subscribes to `topic` with an SQL92 filter over properties (the broker needs
/// `enablePropertyFilter=true`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_subscribe_sql(
    b: *mut rmq_push_consumer_builder,
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

/// Clustering or broadcasting (an `rmq_message_model`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_message_model(
    b: *mut rmq_push_consumer_builder,
    model: i32,
) -> rmq_result {
    common::configure(b, || message_model(model), |b, m| b.message_model(m))
}

/// Where to start without a stored offset (an `rmq_consume_from`); `timestamp_ms` is
/// used with `RMQ_CONSUME_FROM_TIMESTAMP`.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_consume_from(
    b: *mut rmq_push_consumer_builder,
    from: i32,
    timestamp_ms: i64,
) -> rmq_result {
    common::configure(
        b,
        || consume_from(from, timestamp_ms),
        |b, f| b.consume_from_where(f),
    )
}

/// The consume pool's size (Java `consumeThreadMin`/`Max`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_consume_threads(
    b: *mut rmq_push_consumer_builder,
    min: usize,
    max: usize,
) -> rmq_result {
    common::set(b, |b| b.consume_thread_min(min).consume_thread_max(max))
}

/// Most messages per listener call (Java `consumeMessageBatchMaxSize`, default 1).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_consume_batch_max_size(
    b: *mut rmq_push_consumer_builder,
    n: usize,
) -> rmq_result {
    common::set(b, |b| b.consume_message_batch_max_size(n))
}

/// Most messages per pull (Java `pullBatchSize`, default 32).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_pull_batch_size(
    b: *mut rmq_push_consumer_builder,
    n: usize,
) -> rmq_result {
    common::set(b, |b| b.pull_batch_size(n))
}

/// Deliveries before a message goes to the dead-letter queue (default 16).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_max_reconsume_times(
    b: *mut rmq_push_consumer_builder,
    n: u32,
) -> rmq_result {
    common::set(b, |b| b.max_reconsume_times(n))
}

/// How long the crate's shutdown lets listeners finish before it stops recording offsets
/// (Java `awaitTerminationMillisWhenShutdown`, default 0). Independently of this,
/// `rmq_push_consumer_free` returns only after every listener call has returned.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_await_termination_ms(
    b: *mut rmq_push_consumer_builder,
    ms: u64,
) -> rmq_result {
    common::set(b, |b| {
        b.await_termination_when_shutdown(Duration::from_millis(ms))
    })
}

/// `on` non-zero (the default): queues are allocated here. Zero: the consumer takes its
/// queues from a 5.x broker (QUERY_ASSIGNMENT) and consumes each as the broker says, by
/// pull or by POP once an operator switched the group (`mqadmin setConsumeMode -m POP`);
/// a 4.x broker cannot assign, and the allocation then stays here (Java
/// `setClientRebalance`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_client_rebalance(
    b: *mut rmq_push_consumer_builder,
    on: i32,
) -> rmq_result {
    common::set(b, |b| b.client_rebalance(on != 0))
}

/// POP mode: how long a popped message stays invisible to the group unless acked, in ms
/// (5,000..=300,000; Java `popInvisibleTime`, 60,000), messages per pop (1..=32; Java
/// `popBatchNums`, 32) and messages of a queue waiting for their ack before its pops
/// pause (Java `popThresholdForQueue`, 96). Checked when the consumer starts.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_pop_options(
    b: *mut rmq_push_consumer_builder,
    invisible_ms: u64,
    batch_nums: u32,
    threshold_for_queue: usize,
) -> rmq_result {
    common::set(b, |b| {
        b.pop_invisible_time(Duration::from_millis(invisible_ms))
            .pop_batch_nums(batch_nums)
            .pop_threshold_for_queue(threshold_for_queue)
    })
}

/// POP mode: acks what the listener calls of one pop consumed with one
/// BATCH_ACK_MESSAGE per broker (default false, as Java's push consumer; a broker
/// before 5.1.1 gets single acks).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_pop_batch_ack(
    b: *mut rmq_push_consumer_builder,
    enable: bool,
) -> rmq_result {
    common::set(b, |b| b.pop_batch_ack(enable))
}

/// Records a trace of every listener call in `RMQ_SYS_TRACE_TOPIC`, or in `trace_topic`
/// when it is not NULL (Java `enableMsgTrace`, `customizedTraceTopic`).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_trace(
    b: *mut rmq_push_consumer_builder,
    trace_topic: *const c_char,
    trace_topic_len: usize,
) -> rmq_result {
    common::set_trace(b, trace_topic, trace_topic_len)
}

/// Calls `callback` for the messages, several queues at once (Java
/// `MessageListenerConcurrently`). `userdata` goes to every call, on the consume threads.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_listener(
    b: *mut rmq_push_consumer_builder,
    callback: rmq_consume_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let h = handle_mut(b, "builder")?;
        let f = callback.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "callback is NULL"))?;
        let (gate, ud) = (h.gate.clone(), Userdata(userdata));
        h.slot.update(|b| {
            b.listener(move |msgs, ctx| {
                match call(
                    &gate,
                    f,
                    ud,
                    msgs,
                    ctx.message_queue().clone(),
                    ContextKind::Concurrent(ctx),
                ) {
                    Some(0) => ConsumeStatus::Success,
                    _ => ConsumeStatus::ReconsumeLater,
                }
            })
        })
    })
}

/// Calls `callback` for one queue at a time, in queue order (Java
/// `MessageListenerOrderly`); the queue is locked at the broker while held.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_orderly_listener(
    b: *mut rmq_push_consumer_builder,
    callback: rmq_consume_callback,
    userdata: *mut c_void,
) -> rmq_result {
    guard(|| {
        let h = handle_mut(b, "builder")?;
        let f = callback.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "callback is NULL"))?;
        let (gate, ud) = (h.gate.clone(), Userdata(userdata));
        h.slot.update(|b| {
            b.orderly_listener(move |msgs, ctx| {
                match call(
                    &gate,
                    f,
                    ud,
                    msgs,
                    ctx.message_queue().clone(),
                    ContextKind::Orderly(ctx),
                ) {
                    Some(0) => ConsumeOrderlyStatus::Success,
                    _ => ConsumeOrderlyStatus::Suspend,
                }
            })
        })
    })
}

/// What a push consumer's listener returned, as a consume hook's `after` sees it (Rust
/// `ConsumeHookStatus`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_consume_hook_status {
    /// Acknowledged.
    RMQ_CONSUME_HOOK_SUCCESS = 0,
    /// Concurrent listener: to be consumed again later.
    RMQ_CONSUME_HOOK_RECONSUME_LATER = 1,
    /// Orderly listener: the queue pauses and the batch comes again.
    RMQ_CONSUME_HOOK_SUSPEND = 2,
    /// The listener failed otherwise (the batch is retried as if it failed).
    RMQ_CONSUME_HOOK_FAILED = 3,
}

/// Runs before each listener call (Rust `ConsumeHook::before_consume`, Java
/// `ConsumeMessageHook.consumeMessageBefore`) on the consume thread, with the messages
/// and their queue, borrowed for the call.
pub type rmq_consume_hook_before = Option<
    extern "C" fn(
        userdata: *mut c_void,
        messages: *const *const rmq_message_ext,
        count: usize,
        queue: *const rmq_message_queue,
    ),
>;

/// Runs after each listener call (Rust `ConsumeHook::after_consume`) on the consume
/// thread, with the same messages and the listener's outcome.
pub type rmq_consume_hook_after = Option<
    extern "C" fn(
        userdata: *mut c_void,
        messages: *const *const rmq_message_ext,
        count: usize,
        queue: *const rmq_message_queue,
        status: rmq_consume_hook_status,
    ),
>;

/// A C consume hook; each call passes the consumer's gate like the listener.
struct CConsumeHook {
    before: rmq_consume_hook_before,
    after: rmq_consume_hook_after,
    ud: Userdata,
    gate: Arc<Gate>,
}

impl CConsumeHook {
    /// Calls `f` with views of the context's messages and queue, through the gate.
    fn with_views(
        &self,
        ctx: &ConsumeContext<'_>,
        f: impl FnOnce(*const *const rmq_message_ext, usize, *const rmq_message_queue),
    ) {
        let Some(pass) = Gate::enter(&self.gate) else {
            return;
        };
        let views: Vec<rmq_message_ext> = ctx
            .messages()
            .iter()
            .map(|m| rmq_message_ext {
                inner: Ref::Borrowed(m),
            })
            .collect();
        let ptrs: Vec<*const rmq_message_ext> = views.iter().map(|v| v as *const _).collect();
        let queue = rmq_message_queue {
            inner: ctx.queue().clone(),
        };
        pass.call(|| f(ptrs.as_ptr(), ptrs.len(), &queue));
    }
}

impl ConsumeHook for CConsumeHook {
    fn before_consume(&self, ctx: &ConsumeContext<'_>) {
        if let Some(f) = self.before {
            self.with_views(ctx, |m, n, q| f(self.ud.0, m, n, q));
        }
    }

    fn after_consume(&self, ctx: &ConsumeContext<'_>) {
        let Some(f) = self.after else { return };
        let status = match ctx.status() {
            Some(ConsumeHookStatus::Success) => rmq_consume_hook_status::RMQ_CONSUME_HOOK_SUCCESS,
            Some(ConsumeHookStatus::ReconsumeLater) => {
                rmq_consume_hook_status::RMQ_CONSUME_HOOK_RECONSUME_LATER
            }
            Some(ConsumeHookStatus::SuspendCurrentQueue) => {
                rmq_consume_hook_status::RMQ_CONSUME_HOOK_SUSPEND
            }
            _ => rmq_consume_hook_status::RMQ_CONSUME_HOOK_FAILED,
        };
        self.with_views(ctx, |m, n, q| f(self.ud.0, m, n, q, status));
    }
}

/// Adds a consume hook (Rust `PushConsumerBuilder::consume_hook`): `before` and `after`
/// (either may be NULL, not both) run around every listener call, with `userdata`, on
/// the consume thread. `rmq_push_consumer_free` waits for them like for the listener.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_consume_hook(
    b: *mut rmq_push_consumer_builder,
    before: rmq_consume_hook_before,
    after: rmq_consume_hook_after,
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
        let hook = Arc::new(CConsumeHook {
            before,
            after,
            ud: Userdata(userdata),
            gate: h.gate.clone(),
        });
        h.slot.update(|b| b.consume_hook(hook))
    })
}

type ListenerFn = extern "C" fn(
    *mut c_void,
    *const *const rmq_message_ext,
    usize,
    *mut rmq_consume_context,
) -> i32;

/// One listener call through the gate: `None` once `_free` closed it (the messages then
/// come again, to this group's next consumer).
fn call(
    gate: &Arc<Gate>,
    f: ListenerFn,
    ud: Userdata,
    msgs: &[MessageExt],
    mq: rocketmq_blocking::MessageQueue,
    kind: ContextKind,
) -> Option<i32> {
    let pass = Gate::enter(gate)?;
    let views: Vec<rmq_message_ext> = msgs
        .iter()
        .map(|m| rmq_message_ext {
            inner: Ref::Borrowed(m),
        })
        .collect();
    let ptrs: Vec<*const rmq_message_ext> = views.iter().map(|v| v as *const _).collect();
    let mut ctx = rmq_consume_context {
        queue: rmq_message_queue { inner: mq },
        kind,
    };
    pass.call(|| f(ud.0, ptrs.as_ptr(), ptrs.len(), &mut ctx))
}

/// Starts the consumer. The builder is consumed, whatever the result.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_start(
    b: *mut rmq_push_consumer_builder,
    consumer_out: *mut *mut rmq_push_consumer,
) -> rmq_result {
    guard(|| {
        let mut owned = take_handle(b)
            .ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "builder is NULL"))?;
        let c = owned.slot.take()?.start().map_err(err)?;
        out_handle(
            consumer_out,
            rmq_push_consumer {
                inner: c,
                gate: owned.gate.clone(),
            },
        )
    })
}

/// Frees a builder that was not started. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_builder_free(b: *mut rmq_push_consumer_builder) {
    guard_void(|| drop(take_handle(b)));
}

/// Subscribes a running consumer to one more topic (tag expression).
#[no_mangle]
pub extern "C" fn rmq_push_consumer_subscribe(
    c: *const rmq_push_consumer,
    topic: *const c_char,
    topic_len: usize,
    expression: *const c_char,
    expression_len: usize,
) -> rmq_result {
    guard(|| {
        let c = handle(c, "consumer")?;
        c.inner
            .subscribe(
                str_arg(topic, topic_len, "topic")?,
                str_arg(expression, expression_len, "expression")?,
            )
            .map_err(err)
    })
}

/// Drops a running consumer's subscription to `topic`.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_unsubscribe(
    c: *const rmq_push_consumer,
    topic: *const c_char,
    topic_len: usize,
) -> rmq_result {
    guard(|| {
        handle(c, "consumer")?
            .inner
            .unsubscribe(str_arg(topic, topic_len, "topic")?)
            .map_err(err)
    })
}

/// Stops pulling, persists the offsets and unregisters (Java `shutdown`). Listener calls
/// already running go on; messages whose call had not returned are delivered again.
/// Idempotent; the handle must still be freed.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_shutdown(c: *const rmq_push_consumer) -> rmq_result {
    guard(|| {
        handle(c, "consumer")?.inner.shutdown();
        Ok(())
    })
}

/// Sends a message this consumer received back to the broker, to come again after
/// `delay_level` (Java `sendMessageBack`; 0: the broker chooses by its reconsume count,
/// 1.. a delay level, below 0 straight to the dead-letter queue).
/// May be called from inside the listener.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_send_message_back(
    c: *const rmq_push_consumer,
    message: *const rmq_message_ext,
    delay_level: i32,
) -> rmq_result {
    guard(|| {
        let c = handle(c, "consumer")?;
        let m = handle(message, "message")?.inner.get();
        // The broker reads every negative level as "dead-letter queue", so all of them
        // keep meaning what they meant when this took the raw level.
        let delay = match u32::try_from(delay_level) {
            Ok(0) => ReconsumeDelay::Broker,
            Ok(l) => ReconsumeDelay::Level(l),
            Err(_) => ReconsumeDelay::DeadLetter,
        };
        c.inner.send_message_back(m, delay).map_err(err)
    })
}

/// Stops pulling (Java `suspend`): what is cached is still consumed, the queues stay the
/// consumer's; `rmq_push_consumer_resume` pulls again.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_suspend(c: *const rmq_push_consumer) -> rmq_result {
    guard(|| {
        handle(c, "consumer")?.inner.suspend();
        Ok(())
    })
}

/// Pulls again after `rmq_push_consumer_suspend`.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_resume(c: *const rmq_push_consumer) -> rmq_result {
    guard(|| {
        handle(c, "consumer")?.inner.resume();
        Ok(())
    })
}

/// The queues the consumer holds now (empty once shutdown has begun); `*list_out` is a
/// new list to free with `rmq_queue_list_free`.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_assigned_queues(
    c: *const rmq_push_consumer,
    list_out: *mut *mut rmq_queue_list,
) -> rmq_result {
    guard(|| {
        let items = handle(c, "consumer")?
            .inner
            .assigned_queues()
            .into_iter()
            .map(|inner| rmq_message_queue { inner })
            .collect();
        out_handle(list_out, rmq_queue_list { items })
    })
}

/// Writes the consumer's figures (Rust `PushConsumer::stats`) as JSON into `buf`,
/// NUL-terminated; `*written` is its length. With `RMQ_BUFFER_TOO_SMALL`, `*written` is
/// the length needed (call again with a buffer of at least `*written + 1`). Counters are
/// monotonic from the client's start; latencies are in microseconds (`*_us` keys); the
/// shape is documented in docs/observability.md ("From C and Python"). Cheap enough to
/// call every second, from any thread.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_stats_json(
    c: *const rmq_push_consumer,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let c = handle(c, "consumer")?;
        let json = crate::stats_json::consumer(&c.inner.stats()).to_string();
        copy_to_buf(json.as_bytes(), buf, len, written, true)
    })
}

/// Shuts down (if not yet) and frees the consumer. Returns only after every listener
/// call in flight has returned, so the userdata may be freed right after (called from
/// inside its own listener it cannot wait for itself, and does not; called from a
/// callback of another client it waits as from any thread). NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_push_consumer_free(c: *mut rmq_push_consumer) {
    guard_void(|| {
        if let Some(c) = take_handle(c) {
            c.inner.shutdown();
            c.gate.close_and_wait(None);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer::rmq_producer_free;
    use crate::producer::tests::{counting, failed, pending, probe, producer, Probe};
    use std::ptr::null_mut;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    /// A listener that frees another client, the producer in its userdata.
    extern "C" fn freeing_listener(
        ud: *mut c_void,
        _msgs: *const *const rmq_message_ext,
        _count: usize,
        _ctx: *mut rmq_consume_context,
    ) -> i32 {
        let p = probe(ud);
        rmq_producer_free(p.victim.swap(null_mut(), Ordering::SeqCst));
        p.freed.store(true, Ordering::SeqCst);
        rmq_consume_status::RMQ_CONSUME_SUCCESS as i32
    }

    #[test]
    fn a_push_listener_freeing_a_producer_waits_for_that_producers_send_callbacks() {
        let victim_probe = Arc::new(Probe::default());
        let victim = producer(3000);
        victim_probe.victim.store(victim, Ordering::SeqCst);
        victim_probe.release.store(true, Ordering::SeqCst);
        // An async send of the producer whose callback has not run yet.
        let slow = pending(victim, Some(counting), &victim_probe);
        // The callback runs once the free returned, or after 1 s, whichever is first: a
        // free that waits for it returns only after it ran.
        let vp = victim_probe.clone();
        let t = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(1);
            while !vp.freed.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            slow(failed());
        });
        // One listener call of a push consumer, through its gate, as the consume pool
        // makes it.
        let consumer_gate = Arc::new(Gate::default());
        let status = call(
            &consumer_gate,
            freeing_listener,
            Userdata(Arc::as_ptr(&victim_probe) as *mut c_void),
            &[],
            rocketmq_blocking::MessageQueue::new("t", "broker-a", 0),
            ContextKind::Concurrent(null_mut()),
        );
        assert_eq!(status, Some(0));
        t.join().unwrap();
        assert_eq!(victim_probe.calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            victim_probe.calls_after_free.load(Ordering::SeqCst),
            0,
            "a send callback of the freed producer ran after rmq_producer_free returned"
        );
    }
}
