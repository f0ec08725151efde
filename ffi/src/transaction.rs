//! The transactional producer (Java `TransactionMQProducer`): a builder with the two
//! callbacks of the local transaction, then `rmq_transaction_producer_builder_start`.
//!
//! Thread safety: an `rmq_transaction_producer` may be used from any number of threads at
//! once; only `rmq_transaction_producer_free` needs it exclusively. The execute callback
//! runs on the thread that called `rmq_transaction_producer_send`, during that call; the
//! check callback runs on the producer's check threads (`rmq-tx-check-N`) whenever a
//! broker asks, until `rmq_transaction_producer_free` returns.

use std::any::Any;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use rocketmq_blocking::{
    LocalTransactionState, Message, MessageExt, TransactionProducer, TransactionProducerBuilder,
};

use crate::common::{self, Gate, HasSlot, Slot};
use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message, rmq_message_ext, rmq_send_result, Ref};
use crate::options::rmq_client_options;
use crate::util::{handle, out, out_handle, str_arg, take_handle, Userdata};

/// How a local transaction ended (Java `LocalTransactionState`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_transaction_state {
    /// Deliver the message.
    RMQ_TRANSACTION_COMMIT = 0,
    /// Drop the message.
    RMQ_TRANSACTION_ROLLBACK = 1,
    /// Not known yet: the broker asks the check callback later (Java `UNKNOW`).
    RMQ_TRANSACTION_UNKNOWN = 2,
}

impl rmq_transaction_state {
    fn from_c(v: i32) -> LocalTransactionState {
        match v {
            0 => LocalTransactionState::CommitMessage,
            1 => LocalTransactionState::RollbackMessage,
            // Anything else, as Java treats an exception: the broker asks again.
            _ => LocalTransactionState::Unknown,
        }
    }

    fn to_c(s: LocalTransactionState) -> rmq_transaction_state {
        match s {
            LocalTransactionState::CommitMessage => rmq_transaction_state::RMQ_TRANSACTION_COMMIT,
            LocalTransactionState::RollbackMessage => {
                rmq_transaction_state::RMQ_TRANSACTION_ROLLBACK
            }
            LocalTransactionState::Unknown => rmq_transaction_state::RMQ_TRANSACTION_UNKNOWN,
        }
    }
}

/// Runs the local transaction of the half message just stored (borrowed for the call; its
/// id and transaction id are set) with the `arg` given to `rmq_transaction_producer_send`.
/// Returns an `rmq_transaction_state` value; any other value means unknown.
pub type rmq_transaction_execute_callback = Option<
    extern "C" fn(userdata: *mut c_void, message: *const rmq_message, arg: *mut c_void) -> i32,
>;

/// Answers a broker's question about a transaction that ended unknown (or whose answer was
/// lost): the half message is borrowed for the call. Returns an `rmq_transaction_state`
/// value; any other value means unknown. Runs on the producer's check threads.
pub type rmq_transaction_check_callback =
    Option<extern "C" fn(userdata: *mut c_void, message: *const rmq_message_ext) -> i32>;

/// Options of a transactional producer before it starts.
pub struct rmq_transaction_producer_builder {
    slot: Slot<TransactionProducerBuilder>,
    gate: Arc<Gate>,
}

impl HasSlot for rmq_transaction_producer_builder {
    type B = TransactionProducerBuilder;
    fn slot(&mut self) -> &mut Slot<TransactionProducerBuilder> {
        &mut self.slot
    }
}

/// A started transactional producer.
pub struct rmq_transaction_producer {
    inner: TransactionProducer,
    /// Callbacks running now; `_free` closes it and waits for them.
    gate: Arc<Gate>,
}

/// The C callbacks as the crate's `TransactionListener`. Each call goes through the gate,
/// so none starts after `_free` and `_free` waits for those running.
struct CListener {
    execute: extern "C" fn(*mut c_void, *const rmq_message, *mut c_void) -> i32,
    check: extern "C" fn(*mut c_void, *const rmq_message_ext) -> i32,
    userdata: Userdata,
    gate: Arc<Gate>,
}

/// The `arg` of one `rmq_transaction_producer_send`, handed back to the execute callback.
struct CArg(*mut c_void);

impl rocketmq_blocking::TransactionListener for CListener {
    fn execute_local_transaction(&self, msg: &Message, arg: &dyn Any) -> LocalTransactionState {
        let Some(pass) = Gate::enter(&self.gate) else {
            return LocalTransactionState::Unknown;
        };
        let arg = arg
            .downcast_ref::<CArg>()
            .map_or(std::ptr::null_mut(), |a| a.0);
        let view = rmq_message::borrowed(msg);
        let ud = self.userdata.0;
        pass.call(|| (self.execute)(ud, &view, arg)).map_or(
            LocalTransactionState::Unknown,
            rmq_transaction_state::from_c,
        )
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let Some(pass) = Gate::enter(&self.gate) else {
            return LocalTransactionState::Unknown;
        };
        let view = rmq_message_ext {
            inner: Ref::Borrowed(msg),
        };
        let ud = self.userdata.0;
        pass.call(|| (self.check)(ud, &view)).map_or(
            LocalTransactionState::Unknown,
            rmq_transaction_state::from_c,
        )
    }
}

/// Starts building a transactional producer of `group` (Java defaults: send timeout 3 s,
/// one check thread, 2000 checks waiting at most). Both callbacks are required;
/// `userdata` goes to every call of either. The name servers come from `NAMESRV_ADDR`
/// unless `rmq_transaction_producer_builder_namesrv` is called.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_builder_new(
    group: *const c_char,
    group_len: usize,
    execute: rmq_transaction_execute_callback,
    check: rmq_transaction_check_callback,
    userdata: *mut c_void,
    builder_out: *mut *mut rmq_transaction_producer_builder,
) -> rmq_result {
    guard(|| {
        let group = str_arg(group, group_len, "group")?;
        let execute =
            execute.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "execute is NULL"))?;
        let check = check.ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "check is NULL"))?;
        let gate = Arc::new(Gate::default());
        let listener = CListener {
            execute,
            check,
            userdata: Userdata(userdata),
            gate: gate.clone(),
        };
        out_handle(
            builder_out,
            rmq_transaction_producer_builder {
                slot: Slot(Some(TransactionProducer::builder(group, listener))),
                gate,
            },
        )
    })
}

/// The client options every client shares (name servers, instance name, namespace,
/// credentials, TLS, timeouts), copied from `options`.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_builder_client_options(
    b: *mut rmq_transaction_producer_builder,
    options: *const rmq_client_options,
) -> rmq_result {
    crate::options::set_client_options(b, options)
}

/// Check threads (Java `checkThreadPoolMinSize`/`MaxSize`, default 1 and 1) and the most
/// checks waiting for one (Java `checkRequestHoldMax`, default 2000); more are dropped
/// and asked again by the broker.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_builder_check_pool(
    b: *mut rmq_transaction_producer_builder,
    min_threads: usize,
    max_threads: usize,
    hold_max: usize,
) -> rmq_result {
    common::set(b, |b| {
        b.check_thread_pool_min_size(min_threads)
            .check_thread_pool_max_size(max_threads)
            .check_request_hold_max(hold_max)
    })
}

/// Starts the producer. The builder is consumed, whatever the result.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_builder_start(
    b: *mut rmq_transaction_producer_builder,
    producer_out: *mut *mut rmq_transaction_producer,
) -> rmq_result {
    guard(|| {
        let mut owned = take_handle(b)
            .ok_or_else(|| fail(rmq_result::RMQ_NULL_PARAMETER, "builder is NULL"))?;
        let gate = owned.gate.clone();
        let p = owned.slot.take()?.start().map_err(err)?;
        out_handle(producer_out, rmq_transaction_producer { inner: p, gate })
    })
}

/// Frees a builder that was not started. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_builder_free(b: *mut rmq_transaction_producer_builder) {
    guard_void(|| drop(take_handle(b)));
}

/// Sends `message` as a half message, runs the execute callback with `arg` on this
/// thread, and tells the broker its outcome (Java `sendMessageInTransaction`). A send that
/// fails is an error and the callback does not run. Otherwise this succeeds whatever the
/// callback says: `*state_out` (may be NULL) gets the state the broker was told, and
/// `*result_out` (may be NULL) a send result of the half message to free with
/// `rmq_send_result_free`.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_send(
    p: *const rmq_transaction_producer,
    message: *const rmq_message,
    arg: *mut c_void,
    state_out: *mut rmq_transaction_state,
    result_out: *mut *mut rmq_send_result,
) -> rmq_result {
    guard(|| {
        let p = handle(p, "producer")?;
        let m = handle(message, "message")?.inner.get();
        let r = p.inner.send_in_transaction(m, &CArg(arg)).map_err(err)?;
        if !state_out.is_null() {
            out(
                state_out,
                rmq_transaction_state::to_c(r.local_transaction_state()),
            )?;
        }
        if result_out.is_null() {
            return Ok(());
        }
        out_handle(result_out, rmq_send_result::new(r.into_send_result()))
    })
}

/// Check requests dropped because the check queue was full.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_dropped_checks(
    p: *const rmq_transaction_producer,
    count_out: *mut u64,
) -> rmq_result {
    guard(|| out(count_out, handle(p, "producer")?.inner.dropped_checks()))
}

/// Shuts the producer down; later sends fail with `RMQ_STATE`. Idempotent. The handle
/// must still be freed.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_shutdown(
    p: *const rmq_transaction_producer,
) -> rmq_result {
    guard(|| {
        handle(p, "producer")?.inner.shutdown();
        Ok(())
    })
}

/// Shuts down (if not yet) and frees the producer. Returns only after every callback in
/// flight has returned, and no callback starts after it, so the userdata may be freed
/// right after (from inside one of its own callbacks it does not wait for itself; from a
/// callback of another client it waits as from any thread). NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_transaction_producer_free(p: *mut rmq_transaction_producer) {
    guard_void(|| {
        if let Some(p) = take_handle(p) {
            p.gate.close_and_wait(None);
            p.inner.shutdown();
        }
    });
}
