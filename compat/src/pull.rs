//! `CPullConsumer.h`: the pull consumer of the 2.x API, on an [`Admin`] (the topic's
//! queues, a queue's min and max offsets) and a [`LitePullConsumer`] in assign mode, which
//! `Pull` points at the queue and offset asked for (`seek`) before it waits for the batch.
//! Nothing is committed: as with the original, the application keeps its offsets.
//!
//! `Pull` answers `E_OFFSET_ILLEGAL` (next offset: the nearest valid one) for an offset
//! outside the queue's `[min, max]`, `E_NO_NEW_MSG` at the end of the queue or when
//! nothing came within 3 s, `E_NO_MATCHED_MSG` when what came did not match the tag
//! expression (the next offset moves past it), `E_FOUND` with up to `maxNums` messages,
//! and `E_BROKER_TIMEOUT` for every failure (bad arguments too; the reason is
//! `GetLatestErrorMessage`). Pulls of one consumer run one at a time. The messages of a
//! result are lent until `ReleasePullResult`, which accepts a result once.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_long, c_longlong, c_void};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use rocketmq_blocking::{
    Admin, Error, LitePullConsumer, LitePullOptions, MessageExt, MessageQueue,
};

use crate::message::{self, CMessage, Lent};
use crate::registry::{self, Obj};
use crate::settings::{self, Configurable, Settings};
use crate::{c_str, copy_into, guard, guard_value, status, CResult, Failure};

/// `typedef struct CPullConsumer CPullConsumer;`
pub struct CPullConsumer {
    _private: [u8; 0],
}

/// `CMessageQueue` (`CMessageQueue.h`).
#[repr(C)]
pub struct CMessageQueue {
    pub topic: [c_char; 512],
    pub brokerName: [c_char; 256],
    pub queueId: c_int,
}

/// `CPullStatus`.
pub mod pull_status {
    pub const E_FOUND: i32 = 0;
    pub const E_NO_NEW_MSG: i32 = 1;
    pub const E_NO_MATCHED_MSG: i32 = 2;
    pub const E_OFFSET_ILLEGAL: i32 = 3;
    pub const E_BROKER_TIMEOUT: i32 = 4;
}

/// `CPullResult` (`CPullResult.h`).
#[repr(C)]
pub struct CPullResult {
    pub pullStatus: c_int,
    pub nextBeginOffset: c_longlong,
    pub minOffset: c_longlong,
    pub maxOffset: c_longlong,
    pub msgFoundList: *mut *mut CMessage,
    pub size: c_int,
    pub pData: *mut c_void,
}

/// What a started pull consumer runs on.
struct Started {
    admin: Admin,
    lite: LitePullConsumer,
    /// The queue the lite consumer is assigned now.
    assigned: Option<MessageQueue>,
}

/// A registered pull consumer.
pub(crate) struct PullHandle {
    settings: Mutex<Settings>,
    /// Also serialises pulls.
    started: Mutex<Option<Started>>,
}

#[no_mangle]
pub extern "C" fn CreatePullConsumer(groupId: *const c_char) -> *mut CPullConsumer {
    guard_value(std::ptr::null_mut(), || {
        let h = Arc::new(PullHandle {
            settings: Mutex::new(Settings::new(groupId)?),
            started: Mutex::new(None),
        });
        let p = Arc::as_ptr(&h) as *mut CPullConsumer;
        registry::insert(p as usize, Obj::Pull(h));
        Ok(p)
    })
}

impl Configurable for PullHandle {
    fn settings(&self) -> MappedMutexGuard<'_, Settings> {
        MutexGuard::map(self.settings.lock(), |s| s)
    }
}

/// Shuts the consumer down if started, then frees it (results not yet released stay
/// valid until `ReleasePullResult`).
#[no_mangle]
pub extern "C" fn DestroyPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        let h = registry::pull(consumer, "consumer")?;
        registry::remove(consumer.cast());
        shutdown(&h);
        Ok(())
    })
}

fn shutdown(h: &PullHandle) {
    if let Some(s) = h.started.lock().take() {
        s.lite.shutdown();
    }
}

/// `PULLCONSUMER_START_FAILED` when already started or the configuration is refused.
#[no_mangle]
pub extern "C" fn StartPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        let h = registry::pull(consumer, "consumer")?;
        let mut started = h.started.lock();
        let fail = |e: Error| Failure::new(status::PULLCONSUMER_START_FAILED, e.to_string());
        if started.is_some() {
            return Err(Failure::new(
                status::PULLCONSUMER_START_FAILED,
                "the consumer is already started",
            ));
        }
        let s = h.settings.lock();
        let admin = Admin::builder()
            .client_options(s.client_options())
            .start()
            .map_err(fail)?;
        let mut o = LitePullOptions::default();
        o.auto_commit = false;
        o.pull_batch_size = 32;
        o.broker_suspend_max_time = Duration::from_secs(1);
        let lite = LitePullConsumer::builder(s.group.clone())
            .client_options(s.client_options())
            .options(o)
            .start()
            .map_err(fail)?;
        *started = Some(Started {
            admin,
            lite,
            assigned: None,
        });
        Ok(())
    })
}

/// OK when not started.
#[no_mangle]
pub extern "C" fn ShutdownPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        shutdown(&*registry::pull(consumer, "consumer")?);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn ShowPullConsumerVersion(consumer: *mut CPullConsumer) -> *const c_char {
    match registry::pull(consumer, "consumer") {
        Ok(_) => crate::VERSION.as_ptr(),
        Err(_) => std::ptr::null(),
    }
}

#[no_mangle]
pub extern "C" fn SetPullConsumerGroupID(
    consumer: *mut CPullConsumer,
    groupId: *const c_char,
) -> c_int {
    settings::group(registry::pull(consumer, "consumer"), groupId)
}

#[no_mangle]
pub extern "C" fn GetPullConsumerGroupID(consumer: *mut CPullConsumer) -> *const c_char {
    settings::group_id(registry::pull(consumer, "consumer"))
}

#[no_mangle]
pub extern "C" fn SetPullConsumerNameServerAddress(
    consumer: *mut CPullConsumer,
    namesrv: *const c_char,
) -> c_int {
    settings::namesrv(registry::pull(consumer, "consumer"), namesrv)
}

#[no_mangle]
pub extern "C" fn SetPullConsumerNameServerDomain(
    consumer: *mut CPullConsumer,
    domain: *const c_char,
) -> c_int {
    settings::domain(registry::pull(consumer, "consumer"), domain)
}

#[no_mangle]
pub extern "C" fn SetPullConsumerSessionCredentials(
    consumer: *mut CPullConsumer,
    accessKey: *const c_char,
    secretKey: *const c_char,
    channel: *const c_char,
) -> c_int {
    settings::credentials(
        registry::pull(consumer, "consumer"),
        accessKey,
        secretKey,
        channel,
    )
}

/// Accepted and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPullConsumerLogPath(
    consumer: *mut CPullConsumer,
    logPath: *const c_char,
) -> c_int {
    settings::log_path(registry::pull(consumer, "consumer"), logPath)
}

/// Checked and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPullConsumerLogFileNumAndSize(
    consumer: *mut CPullConsumer,
    fileNum: c_int,
    fileSize: c_long,
) -> c_int {
    settings::log_files(registry::pull(consumer, "consumer"), fileNum, fileSize)
}

/// Sets the process-wide maximum level of the Rust `log` facade; the first call installs
/// a logger printing to standard error (see `logs`).
#[no_mangle]
pub extern "C" fn SetPullConsumerLogLevel(consumer: *mut CPullConsumer, level: c_int) -> c_int {
    settings::log_level(registry::pull(consumer, "consumer"), level)
}

/// The queue arrays handed out by `FetchSubscriptionMessageQueues`: address and length.
fn queue_arrays() -> &'static Mutex<Vec<(usize, usize)>> {
    static ARRAYS: OnceLock<Mutex<Vec<(usize, usize)>>> = OnceLock::new();
    ARRAYS.get_or_init(Default::default)
}

/// The topic's readable queues in a new array (`*size` entries; NULL and 0 on failure),
/// for `ReleaseSubscriptionMessageQueue`.
#[no_mangle]
pub extern "C" fn FetchSubscriptionMessageQueues(
    consumer: *mut CPullConsumer,
    topic: *const c_char,
    mqs: *mut *mut CMessageQueue,
    size: *mut c_int,
) -> c_int {
    guard(|| {
        if mqs.is_null() || size.is_null() {
            return Err(Failure::bad("mqs or size is NULL"));
        }
        // SAFETY: both out-pointers were checked not NULL; the caller passes writable ones.
        unsafe {
            mqs.write(std::ptr::null_mut());
            size.write(0);
        }
        let h = registry::pull(consumer, "consumer")?;
        let topic = c_str(topic, "topic")?;
        let started = h.started.lock();
        let s = started.as_ref().ok_or_else(|| {
            Failure::new(
                status::PULLCONSUMER_FETCH_MQ_FAILED,
                "the consumer is not started",
            )
        })?;
        let route = s
            .admin
            .topic_route(topic)
            .map_err(|e| Failure::new(status::PULLCONSUMER_FETCH_MQ_FAILED, e.to_string()))?;
        let mut list: Vec<CMessageQueue> = Vec::new();
        for q in &route.queue_datas {
            for id in 0..q.read_queue_nums {
                let mut mq = CMessageQueue {
                    topic: [0; 512],
                    brokerName: [0; 256],
                    queueId: c_int::try_from(id).unwrap_or(c_int::MAX),
                };
                copy_into(&mut mq.topic, topic);
                copy_into(&mut mq.brokerName, &q.broker_name);
                list.push(mq);
            }
        }
        let n = c_int::try_from(list.len())
            .map_err(|_| Failure::new(status::PULLCONSUMER_FETCH_MQ_FAILED, "too many queues"))?;
        let len = list.len();
        let p = Box::into_raw(list.into_boxed_slice()) as *mut CMessageQueue;
        queue_arrays().lock().push((p as usize, len));
        // SAFETY: checked not NULL above.
        unsafe {
            mqs.write(p);
            size.write(n);
        }
        Ok(())
    })
}

/// Frees an array of `FetchSubscriptionMessageQueues`, once; anything else is
/// `NULL_POINTER` (and left alone).
#[no_mangle]
pub extern "C" fn ReleaseSubscriptionMessageQueue(mqs: *mut CMessageQueue) -> c_int {
    guard(|| {
        let mut arrays = queue_arrays().lock();
        let i = arrays
            .iter()
            .position(|&(p, _)| p == mqs as usize)
            .ok_or_else(|| {
                Failure::bad(
                    "mqs is not an array of FetchSubscriptionMessageQueues (or was released)",
                )
            })?;
        let (p, len) = arrays.swap_remove(i);
        // SAFETY: `p` and `len` are a boxed slice this module leaked and has not freed (it
        // was still listed).
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                p as *mut CMessageQueue,
                len,
            ))
        });
        Ok(())
    })
}

/// The lent messages of one pull result (`pData`).
struct PullData {
    msgs: Box<[*mut CMessage]>,
}

/// The live `pData` of pull results.
fn pull_datas() -> &'static Mutex<HashSet<usize>> {
    static DATAS: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    DATAS.get_or_init(Default::default)
}

fn result(status: i32, next: i64, min: i64, max: i64) -> CPullResult {
    CPullResult {
        pullStatus: status,
        nextBeginOffset: next,
        minOffset: min,
        maxOffset: max,
        msgFoundList: std::ptr::null_mut(),
        size: 0,
        pData: std::ptr::null_mut(),
    }
}

/// Whether `tags` matches a tag expression (`*`, empty, or `A || B`).
fn tag_matches(expr: &str, tags: Option<&str>) -> bool {
    let expr = expr.trim();
    if expr.is_empty() || expr == "*" {
        return true;
    }
    let Some(tags) = tags else {
        return false;
    };
    expr.split("||").any(|t| t.trim() == tags)
}

/// How long `Pull` waits for messages that exist (below the max offset) to arrive.
const PULL_WAIT: Duration = Duration::from_secs(3);

fn pull(
    consumer: *mut CPullConsumer,
    mq: *const CMessageQueue,
    expr: *const c_char,
    offset: i64,
    max_nums: c_int,
) -> CResult<CPullResult> {
    let h = registry::pull(consumer, "consumer")?;
    if mq.is_null() {
        return Err(Failure::bad("mq is NULL"));
    }
    // SAFETY: checked not NULL; the caller passes a valid CMessageQueue for the call.
    let cmq = unsafe { &*mq };
    let topic = c_str(cmq.topic.as_ptr(), "mq->topic")?;
    let broker = c_str(cmq.brokerName.as_ptr(), "mq->brokerName")?;
    let expr = c_str(expr, "subExpression")?;
    let max_nums = usize::try_from(max_nums)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Failure::bad(format!("maxNums {max_nums} is not positive")))?;
    let queue = MessageQueue::new(topic, broker, cmq.queueId);
    let fail = |e: Error| Failure::new(status::PULLCONSUMER_FETCH_MESSAGE_FAILED, e.to_string());
    let mut started = h.started.lock();
    let s = started.as_mut().ok_or_else(|| {
        Failure::new(
            status::PULLCONSUMER_FETCH_MESSAGE_FAILED,
            "the consumer is not started",
        )
    })?;
    let min = s.admin.min_offset(&queue).map_err(fail)?;
    let max = s.admin.max_offset(&queue).map_err(fail)?;
    if offset < min || offset > max {
        let next = offset.clamp(min, max);
        return Ok(result(pull_status::E_OFFSET_ILLEGAL, next, min, max));
    }
    if offset == max {
        return Ok(result(pull_status::E_NO_NEW_MSG, offset, min, max));
    }
    if s.assigned.as_ref() != Some(&queue) {
        s.lite.assign(std::slice::from_ref(&queue)).map_err(fail)?;
        s.assigned = Some(queue.clone());
    }
    s.lite.seek(&queue, offset).map_err(fail)?;
    // Batches of this queue from `offset` on, until one came or the wait ended. A batch
    // pulled before the seek may still come first: its offsets are below `offset` or
    // belong to another position, and are skipped.
    let deadline = Instant::now() + PULL_WAIT;
    let mut fetched: Vec<MessageExt> = Vec::new();
    while fetched.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let batch = s.lite.poll_timeout(left).map_err(fail)?;
        fetched.extend(
            batch
                .into_iter()
                .filter(|m| m.message_queue() == queue && m.queue_offset() >= offset),
        );
    }
    fetched.sort_by_key(MessageExt::queue_offset);
    fetched.dedup_by_key(|m| m.queue_offset());
    // Only the run contiguous from `offset`, so nothing in between is skipped.
    let mut expect = offset;
    fetched.retain(|m| {
        let keep = m.queue_offset() == expect;
        if keep {
            expect += 1;
        }
        keep
    });
    if fetched.is_empty() {
        return Ok(result(pull_status::E_NO_NEW_MSG, offset, min, max));
    }
    let mut next = offset;
    let mut found = Vec::new();
    for m in fetched {
        if found.len() == max_nums {
            break;
        }
        next = m.queue_offset() + 1;
        if tag_matches(expr, m.tags()) {
            found.push(Lent::received(m));
        }
    }
    if found.is_empty() {
        return Ok(result(pull_status::E_NO_MATCHED_MSG, next, min, max));
    }
    let msgs: Box<[*mut CMessage]> = found
        .into_iter()
        .map(|l| {
            let p = l.0;
            std::mem::forget(l);
            p
        })
        .collect();
    let size = c_int::try_from(msgs.len()).unwrap_or(c_int::MAX);
    let data = Box::new(PullData { msgs });
    let list = data.msgs.as_ptr() as *mut *mut CMessage;
    let pdata = Box::into_raw(data);
    pull_datas().lock().insert(pdata as usize);
    Ok(CPullResult {
        pullStatus: pull_status::E_FOUND,
        nextBeginOffset: next,
        minOffset: min,
        maxOffset: max,
        msgFoundList: list,
        size,
        pData: pdata.cast(),
    })
}

/// One pull of up to `maxNums` messages of `mq` from `offset`; see the module text.
#[no_mangle]
pub extern "C" fn Pull(
    consumer: *mut CPullConsumer,
    mq: *const CMessageQueue,
    subExpression: *const c_char,
    offset: c_longlong,
    maxNums: c_int,
) -> CPullResult {
    let timeout = result(pull_status::E_BROKER_TIMEOUT, offset, 0, 0);
    let mut out = None;
    let st = guard(|| {
        out = Some(pull(consumer, mq, subExpression, offset, maxNums)?);
        Ok(())
    });
    match out {
        Some(r) if st == status::OK => r,
        _ => timeout,
    }
}

/// Frees the messages of a pull result, once (a result without messages is OK); a result
/// released before, or not made by `Pull`, is `NULL_POINTER`.
#[no_mangle]
pub extern "C" fn ReleasePullResult(pullResult: CPullResult) -> c_int {
    guard(|| {
        if pullResult.pData.is_null() {
            return Ok(());
        }
        if !pull_datas().lock().remove(&(pullResult.pData as usize)) {
            return Err(Failure::bad(
                "pullResult was released before or not made by Pull",
            ));
        }
        // SAFETY: `pData` was made by `Box::into_raw` in `pull` and was still listed, so it
        // has not been freed.
        let data = unsafe { Box::from_raw(pullResult.pData.cast::<PullData>()) };
        for &m in data.msgs.iter() {
            message::release(m);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn tag_expressions_match_as_the_broker_filters_them() {
        assert!(tag_matches("*", None));
        assert!(tag_matches("", Some("A")));
        assert!(tag_matches("A || B", Some("B")));
        assert!(!tag_matches("A || B", Some("C")));
        assert!(!tag_matches("A", None));
    }

    #[test]
    fn pull_calls_with_bad_arguments_fail_without_touching_memory() {
        let r = Pull(null_mut(), null(), c"*".as_ptr(), 5, 8);
        assert_eq!(r.pullStatus, pull_status::E_BROKER_TIMEOUT);
        assert_eq!(r.nextBeginOffset, 5);
        assert!(r.msgFoundList.is_null());
        let c = CreatePullConsumer(c"g".as_ptr());
        let r = Pull(c, null(), c"*".as_ptr(), 0, 8);
        assert_eq!(r.pullStatus, pull_status::E_BROKER_TIMEOUT, "NULL queue");
        let mut mqs = null_mut();
        let mut n = 7;
        assert_eq!(
            FetchSubscriptionMessageQueues(c, c"T".as_ptr(), &mut mqs, &mut n),
            status::PULLCONSUMER_FETCH_MQ_FAILED,
            "not started"
        );
        assert!(mqs.is_null());
        assert_eq!(n, 0);
        assert_eq!(
            FetchSubscriptionMessageQueues(c, c"T".as_ptr(), null_mut(), &mut n),
            status::NULL_POINTER
        );
        let mut fake = CMessageQueue {
            topic: [0; 512],
            brokerName: [0; 256],
            queueId: 0,
        };
        assert_eq!(
            ReleaseSubscriptionMessageQueue(&mut fake),
            status::NULL_POINTER
        );
        let forged = CPullResult {
            pData: (&mut fake as *mut CMessageQueue).cast(),
            ..result(pull_status::E_FOUND, 0, 0, 0)
        };
        assert_eq!(ReleasePullResult(forged), status::NULL_POINTER);
        assert_eq!(
            ReleasePullResult(result(pull_status::E_NO_NEW_MSG, 0, 0, 0)),
            status::OK
        );
        assert_eq!(DestroyPullConsumer(c), status::OK);
        assert_eq!(DestroyPullConsumer(c), status::NULL_POINTER);
    }
}
