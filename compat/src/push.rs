//! `CPushConsumer.h`: the push consumer of the 2.x API on a rocketmq-blocking
//! [`PushConsumer`], concurrent or orderly after the callback registered.
//!
//! The callback is called once per message, as the original did: a batch
//! (`SetPushConsumerMessageBatchMaxSize`) is acknowledged when the callback returned
//! `E_CONSUME_SUCCESS` for each of its messages, and the first other answer retries the
//! batch (concurrent: later, through the retry topic; orderly: after a pause, in order).
//! The `CMessageExt*` it gets is valid during the call only. `ShutdownPushConsumer` and
//! `DestroyPushConsumer` wait for callbacks that are running (except the caller's own,
//! when called from inside one) and no callback runs after they return; messages not yet
//! given to the callback are delivered again later. Settings apply at
//! `StartPushConsumer`, except `Subscribe`, which a running consumer takes at once.

use std::ffi::{c_char, c_int, c_long};
use std::sync::Arc;

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use rocketmq_blocking::{
    ConsumeOrderlyStatus, ConsumeStatus, Error, MessageExt, MessageModel, PushConsumer,
};

use crate::gate::Gate;
use crate::message::{CMessage, Lent};
use crate::registry::{self, Obj};
use crate::settings::{self, positive, Configurable, Settings};
use crate::{c_str, guard, guard_value, status, CResult, Failure};

/// `typedef struct CPushConsumer CPushConsumer;`
pub struct CPushConsumer {
    _private: [u8; 0],
}

/// Returns a `CConsumeStatus` (0 success, 1 reconsume later).
pub type MessageCallBack =
    Option<extern "C" fn(consumer: *mut CPushConsumer, msg: *mut CMessage) -> c_int>;

#[derive(Clone, Default)]
struct PushSettings {
    client: Settings,
    broadcasting: bool,
    threads: Option<usize>,
    batch: Option<usize>,
    max_cache: Option<usize>,
    max_cache_mib: Option<u64>,
    subscriptions: Vec<(String, String)>,
}

/// The registered callback and whether it is the orderly one.
type Callback = Option<(
    extern "C" fn(*mut CPushConsumer, *mut CMessage) -> c_int,
    bool,
)>;

/// A registered push consumer.
pub(crate) struct PushHandle {
    settings: Mutex<PushSettings>,
    callback: Arc<Mutex<Callback>>,
    running: Mutex<Option<Arc<PushConsumer>>>,
    gate: Arc<Gate>,
}

impl Configurable for PushHandle {
    fn settings(&self) -> MappedMutexGuard<'_, Settings> {
        MutexGuard::map(self.settings.lock(), |s| &mut s.client)
    }
}

impl PushHandle {
    fn shutdown(&self) {
        self.gate.close_and_wait();
        let r = self.running.lock().take();
        if let Some(c) = r {
            c.shutdown();
        }
    }
}

/// A push consumer of `groupId` (clustering, consuming from the last offset of a new
/// group, as the original); NULL for a NULL or non-UTF-8 group.
#[no_mangle]
pub extern "C" fn CreatePushConsumer(groupId: *const c_char) -> *mut CPushConsumer {
    guard_value(std::ptr::null_mut(), || {
        let s = PushSettings {
            client: Settings::new(groupId)?,
            ..PushSettings::default()
        };
        let h = Arc::new(PushHandle {
            settings: Mutex::new(s),
            callback: Arc::new(Mutex::new(None)),
            running: Mutex::new(None),
            gate: Arc::new(Gate::default()),
        });
        let p = Arc::as_ptr(&h) as *mut CPushConsumer;
        registry::insert(p as usize, Obj::Push(h));
        Ok(p)
    })
}

/// Shuts the consumer down if it runs, then frees it.
#[no_mangle]
pub extern "C" fn DestroyPushConsumer(consumer: *mut CPushConsumer) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        registry::remove(consumer.cast());
        h.shutdown();
        Ok(())
    })
}

/// Calls the C callback for each message of a batch; `true` when all succeeded.
fn deliver(msgs: &[MessageExt], callback: &Mutex<Callback>, gate: &Gate, consumer: usize) -> bool {
    for m in msgs {
        let Some((cb, _)) = *callback.lock() else {
            return false;
        };
        let lent = Lent::received(m.clone());
        match gate.run(|| cb(consumer as *mut CPushConsumer, lent.0)) {
            Some(0) => {}
            _ => return false,
        }
    }
    true
}

#[no_mangle]
pub extern "C" fn StartPushConsumer(consumer: *mut CPushConsumer) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        let mut running = h.running.lock();
        let fail = |t: String| Failure::new(status::PUSHCONSUMER_START_FAILED, t);
        if running.is_some() {
            return Err(fail("the consumer is already started".into()));
        }
        let Some((_, orderly)) = *h.callback.lock() else {
            return Err(fail(
                "no message callback: call RegisterMessageCallback(Orderly) first".into(),
            ));
        };
        let s = h.settings.lock().clone();
        let mut b = PushConsumer::builder(s.client.group.clone())
            .client_options(s.client.client_options())
            .enable_msg_trace(s.client.trace)
            .message_model(if s.broadcasting {
                MessageModel::Broadcasting
            } else {
                MessageModel::Clustering
            });
        for (topic, expr) in &s.subscriptions {
            b = b.subscribe(topic.clone(), expr.clone());
        }
        if let Some(n) = s.threads {
            b = b.consume_thread_min(n).consume_thread_max(n);
        }
        if let Some(n) = s.batch {
            b = b.consume_message_batch_max_size(n);
        }
        if let Some(n) = s.max_cache {
            b = b.pull_threshold_for_queue(n);
        }
        if let Some(n) = s.max_cache_mib {
            b = b.pull_threshold_size_for_queue_mib(n);
        }
        let (cb, gate, me) = (h.callback.clone(), h.gate.clone(), consumer as usize);
        b = if orderly {
            b.orderly_listener(move |msgs, _| {
                if deliver(msgs, &cb, &gate, me) {
                    ConsumeOrderlyStatus::Success
                } else {
                    ConsumeOrderlyStatus::Suspend
                }
            })
        } else {
            b.listener(move |msgs, _| {
                if deliver(msgs, &cb, &gate, me) {
                    ConsumeStatus::Success
                } else {
                    ConsumeStatus::ReconsumeLater
                }
            })
        };
        h.gate.open();
        let c = b.start().map_err(|e: Error| fail(e.to_string()))?;
        *running = Some(Arc::new(c));
        Ok(())
    })
}

/// Stops consuming (OK when not running); see the module text for running callbacks.
#[no_mangle]
pub extern "C" fn ShutdownPushConsumer(consumer: *mut CPushConsumer) -> c_int {
    guard(|| {
        registry::push(consumer, "consumer")?.shutdown();
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn ShowPushConsumerVersion(consumer: *mut CPushConsumer) -> *const c_char {
    match registry::push(consumer, "consumer") {
        Ok(_) => crate::VERSION.as_ptr(),
        Err(_) => std::ptr::null(),
    }
}

fn set(consumer: *mut CPushConsumer, f: impl FnOnce(&mut PushSettings) -> CResult<()>) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        let mut s = h.settings.lock();
        f(&mut s)
    })
}

#[no_mangle]
pub extern "C" fn SetPushConsumerGroupID(
    consumer: *mut CPushConsumer,
    groupId: *const c_char,
) -> c_int {
    settings::group(registry::push(consumer, "consumer"), groupId)
}

/// The group; valid until the group is set again or the consumer destroyed.
#[no_mangle]
pub extern "C" fn GetPushConsumerGroupID(consumer: *mut CPushConsumer) -> *const c_char {
    settings::group_id(registry::push(consumer, "consumer"))
}

#[no_mangle]
pub extern "C" fn SetPushConsumerNameServerAddress(
    consumer: *mut CPushConsumer,
    namesrv: *const c_char,
) -> c_int {
    settings::namesrv(registry::push(consumer, "consumer"), namesrv)
}

/// See `SetProducerNameServerDomain`.
#[no_mangle]
pub extern "C" fn SetPushConsumerNameServerDomain(
    consumer: *mut CPushConsumer,
    domain: *const c_char,
) -> c_int {
    settings::domain(registry::push(consumer, "consumer"), domain)
}

/// Subscribes to `topic` with a tag expression (`*`, `TagA || TagB`); a running consumer
/// subscribes at once.
#[no_mangle]
pub extern "C" fn Subscribe(
    consumer: *mut CPushConsumer,
    topic: *const c_char,
    expression: *const c_char,
) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        let topic = c_str(topic, "topic")?;
        let expr = c_str(expression, "expression")?;
        let running = h.running.lock().clone();
        if let Some(c) = running {
            c.subscribe(topic, expr)
                .map_err(|e| Failure::new(status::PUSHCONSUMER_START_FAILED, e.to_string()))?;
        }
        let mut s = h.settings.lock();
        s.subscriptions.retain(|(t, _)| t != topic);
        s.subscriptions.push((topic.to_string(), expr.to_string()));
        Ok(())
    })
}

fn register(consumer: *mut CPushConsumer, cb: MessageCallBack, orderly: bool) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        let cb = cb.ok_or_else(|| Failure::bad("pCallback is NULL"))?;
        let mut c = h.callback.lock();
        if let Some((_, was)) = *c {
            if was != orderly && h.running.lock().is_some() {
                return Err(Failure::new(
                    status::Not_Support,
                    "a running consumer cannot switch between orderly and concurrent callbacks",
                ));
            }
        }
        *c = Some((cb, orderly));
        Ok(())
    })
}

/// The callback of a concurrent consumer (several calls at once, on the consume threads).
#[no_mangle]
pub extern "C" fn RegisterMessageCallback(
    consumer: *mut CPushConsumer,
    pCallback: MessageCallBack,
) -> c_int {
    register(consumer, pCallback, false)
}

/// The callback of an orderly consumer (one call per queue at a time, in queue order).
#[no_mangle]
pub extern "C" fn RegisterMessageCallbackOrderly(
    consumer: *mut CPushConsumer,
    pCallback: MessageCallBack,
) -> c_int {
    register(consumer, pCallback, true)
}

fn unregister(consumer: *mut CPushConsumer, orderly: bool) -> c_int {
    guard(|| {
        let h = registry::push(consumer, "consumer")?;
        let mut c = h.callback.lock();
        if matches!(*c, Some((_, o)) if o == orderly) {
            *c = None;
        }
        Ok(())
    })
}

/// Removes the orderly callback; messages that come later are retried (not lost).
#[no_mangle]
pub extern "C" fn UnregisterMessageCallbackOrderly(consumer: *mut CPushConsumer) -> c_int {
    unregister(consumer, true)
}

/// Removes the concurrent callback; messages that come later are retried (not lost).
#[no_mangle]
pub extern "C" fn UnregisterMessageCallback(consumer: *mut CPushConsumer) -> c_int {
    unregister(consumer, false)
}

/// `BROADCASTING` (0) or `CLUSTERING` (1).
#[no_mangle]
pub extern "C" fn SetPushConsumerMessageModel(
    consumer: *mut CPushConsumer,
    messageModel: c_int,
) -> c_int {
    set(consumer, |s| {
        s.broadcasting = match messageModel {
            0 => true,
            1 => false,
            _ => {
                return Err(Failure::bad(format!(
                    "message model {messageModel} is not a CMessageModel"
                )))
            }
        };
        Ok(())
    })
}

/// Consume threads (1..=1000).
#[no_mangle]
pub extern "C" fn SetPushConsumerThreadCount(
    consumer: *mut CPushConsumer,
    threadCount: c_int,
) -> c_int {
    set(consumer, |s| {
        s.threads = Some(positive(threadCount, "thread count")?);
        Ok(())
    })
}

/// Messages per batch (1..=1024).
#[no_mangle]
pub extern "C" fn SetPushConsumerMessageBatchMaxSize(
    consumer: *mut CPushConsumer,
    batchSize: c_int,
) -> c_int {
    set(consumer, |s| {
        s.batch = Some(positive(batchSize, "batch size")?);
        Ok(())
    })
}

/// Cached messages per queue before pulls pause (Java `pullThresholdForQueue`).
#[no_mangle]
pub extern "C" fn SetPushConsumerMaxCacheMessageSize(
    consumer: *mut CPushConsumer,
    maxCacheSize: c_int,
) -> c_int {
    set(consumer, |s| {
        s.max_cache = Some(positive(maxCacheSize, "max cache size")?);
        Ok(())
    })
}

/// Cached MiB per queue before pulls pause (Java `pullThresholdSizeForQueue`). The
/// original returned `Not_Support`; this library honours it.
#[no_mangle]
pub extern "C" fn SetPushConsumerMaxCacheMessageSizeInMb(
    consumer: *mut CPushConsumer,
    maxCacheSizeInMb: c_int,
) -> c_int {
    set(consumer, |s| {
        s.max_cache_mib = Some(positive(maxCacheSizeInMb, "max cache size in MiB")? as u64);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SetPushConsumerInstanceName(
    consumer: *mut CPushConsumer,
    instanceName: *const c_char,
) -> c_int {
    settings::instance(registry::push(consumer, "consumer"), instanceName)
}

/// ACL credentials; `channel` is checked and otherwise unused (see the producer's).
#[no_mangle]
pub extern "C" fn SetPushConsumerSessionCredentials(
    consumer: *mut CPushConsumer,
    accessKey: *const c_char,
    secretKey: *const c_char,
    channel: *const c_char,
) -> c_int {
    settings::credentials(
        registry::push(consumer, "consumer"),
        accessKey,
        secretKey,
        channel,
    )
}

/// Accepted and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPushConsumerLogPath(
    consumer: *mut CPushConsumer,
    logPath: *const c_char,
) -> c_int {
    settings::log_path(registry::push(consumer, "consumer"), logPath)
}

/// Checked and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPushConsumerLogFileNumAndSize(
    consumer: *mut CPushConsumer,
    fileNum: c_int,
    fileSize: c_long,
) -> c_int {
    settings::log_files(registry::push(consumer, "consumer"), fileNum, fileSize)
}

/// Sets the process-wide maximum level of the Rust `log` facade; the first call installs
/// a logger printing to standard error (see `logs`).
#[no_mangle]
pub extern "C" fn SetPushConsumerLogLevel(consumer: *mut CPushConsumer, level: c_int) -> c_int {
    settings::log_level(registry::push(consumer, "consumer"), level)
}

/// `OPEN` (0) traces every callback in `RMQ_SYS_TRACE_TOPIC`; `CLOSE` (1) does not.
#[no_mangle]
pub extern "C" fn SetPushConsumerMessageTrace(
    consumer: *mut CPushConsumer,
    openTrace: c_int,
) -> c_int {
    settings::trace(registry::push(consumer, "consumer"), openTrace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    extern "C" fn ok(_: *mut CPushConsumer, _: *mut CMessage) -> c_int {
        0
    }

    #[test]
    fn push_consumer_calls_with_bad_handles_are_null_pointer() {
        assert!(CreatePushConsumer(null()).is_null());
        assert_eq!(StartPushConsumer(null_mut()), status::NULL_POINTER);
        let c = CreatePushConsumer(c"g1".as_ptr());
        // SAFETY: the group getter returns a NUL-terminated string owned by the consumer.
        let g = unsafe { std::ffi::CStr::from_ptr(GetPushConsumerGroupID(c)) };
        assert_eq!(g.to_str().ok(), Some("g1"));
        assert_eq!(
            StartPushConsumer(c),
            status::PUSHCONSUMER_START_FAILED,
            "no callback"
        );
        assert_eq!(RegisterMessageCallback(c, None), status::NULL_POINTER);
        assert_eq!(RegisterMessageCallback(c, Some(ok)), status::OK);
        assert_eq!(SetPushConsumerThreadCount(c, 0), status::NULL_POINTER);
        assert_eq!(SetPushConsumerMessageModel(c, 7), status::NULL_POINTER);
        assert_eq!(Subscribe(c, c"T".as_ptr(), null()), status::NULL_POINTER);
        assert_eq!(ShutdownPushConsumer(c), status::OK, "shutdown before start");
        assert_eq!(DestroyPushConsumer(c), status::OK);
        assert_eq!(
            DestroyPushConsumer(c),
            status::NULL_POINTER,
            "double destroy"
        );
        assert!(GetPushConsumerGroupID(c).is_null());
    }
}
