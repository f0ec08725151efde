//! `CPullConsumer.h`: the pull consumer of the 2.x API. The handle and its settings work;
//! `FetchSubscriptionMessageQueues` and `Pull` are not implemented yet and return
//! `Not_Support` (a `CPullResult` with `E_BROKER_TIMEOUT` for `Pull`), saying so in
//! `GetLatestErrorMessage`.

use std::ffi::{c_char, c_int, c_long, c_longlong, c_void, CString};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::message::CMessage;
use crate::producer::Settings;
use crate::registry::{self, Obj};
use crate::{c_str, guard, guard_value, logs, set_error, status, CResult, Failure};

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

#[derive(Default)]
struct PullSettings {
    client: Settings,
    group_c: CString,
}

/// A registered pull consumer.
pub(crate) struct PullHandle {
    settings: Mutex<PullSettings>,
    started: Mutex<bool>,
}

#[no_mangle]
pub extern "C" fn CreatePullConsumer(groupId: *const c_char) -> *mut CPullConsumer {
    guard_value(std::ptr::null_mut(), || {
        let group = c_str(groupId, "groupId")?;
        let mut s = PullSettings::default();
        s.client.group = group.to_string();
        s.group_c = CString::new(group).map_err(|_| Failure::bad("groupId has a NUL"))?;
        let h = Arc::new(PullHandle {
            settings: Mutex::new(s),
            started: Mutex::new(false),
        });
        let p = Arc::as_ptr(&h) as *mut CPullConsumer;
        registry::insert(p as usize, Obj::Pull(h));
        Ok(p)
    })
}

#[no_mangle]
pub extern "C" fn DestroyPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        registry::pull(consumer, "consumer")?;
        registry::remove(consumer.cast());
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn StartPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        let h = registry::pull(consumer, "consumer")?;
        *h.started.lock() = true;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn ShutdownPullConsumer(consumer: *mut CPullConsumer) -> c_int {
    guard(|| {
        let h = registry::pull(consumer, "consumer")?;
        *h.started.lock() = false;
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

fn set(consumer: *mut CPullConsumer, f: impl FnOnce(&mut PullSettings) -> CResult<()>) -> c_int {
    guard(|| {
        let h = registry::pull(consumer, "consumer")?;
        let mut s = h.settings.lock();
        f(&mut s)
    })
}

#[no_mangle]
pub extern "C" fn SetPullConsumerGroupID(
    consumer: *mut CPullConsumer,
    groupId: *const c_char,
) -> c_int {
    set(consumer, |s| {
        let g = c_str(groupId, "groupId")?;
        s.group_c = CString::new(g).map_err(|_| Failure::bad("groupId has a NUL"))?;
        s.client.group = g.to_string();
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn GetPullConsumerGroupID(consumer: *mut CPullConsumer) -> *const c_char {
    guard_value(std::ptr::null(), || {
        let h = registry::pull(consumer, "consumer")?;
        let s = h.settings.lock();
        Ok(s.group_c.as_ptr())
    })
}

#[no_mangle]
pub extern "C" fn SetPullConsumerNameServerAddress(
    consumer: *mut CPullConsumer,
    namesrv: *const c_char,
) -> c_int {
    set(consumer, |s| {
        s.client.namesrv = Some(c_str(namesrv, "namesrv")?.to_string());
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SetPullConsumerNameServerDomain(
    consumer: *mut CPullConsumer,
    domain: *const c_char,
) -> c_int {
    set(consumer, |s| {
        s.client.domain = Some(c_str(domain, "domain")?.to_string());
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SetPullConsumerSessionCredentials(
    consumer: *mut CPullConsumer,
    accessKey: *const c_char,
    secretKey: *const c_char,
    channel: *const c_char,
) -> c_int {
    set(consumer, |s| {
        let ak = c_str(accessKey, "accessKey")?;
        let sk = c_str(secretKey, "secretKey")?;
        c_str(channel, "channel")?;
        s.client.credentials = Some((ak.to_string(), sk.to_string()));
        Ok(())
    })
}

/// Accepted and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPullConsumerLogPath(
    consumer: *mut CPullConsumer,
    logPath: *const c_char,
) -> c_int {
    set(consumer, |_| c_str(logPath, "logPath").map(|_| ()))
}

/// Checked and ignored: this library writes no log files.
#[no_mangle]
pub extern "C" fn SetPullConsumerLogFileNumAndSize(
    consumer: *mut CPullConsumer,
    fileNum: c_int,
    fileSize: c_long,
) -> c_int {
    set(consumer, |_| logs::check_files(fileNum, fileSize as i64))
}

/// Sets the process-wide maximum level of the Rust `log` facade.
#[no_mangle]
pub extern "C" fn SetPullConsumerLogLevel(consumer: *mut CPullConsumer, level: c_int) -> c_int {
    set(consumer, |_| logs::set_level(level))
}

const NOT_YET: &str = "the pull consumer's FetchSubscriptionMessageQueues and Pull are not supported by this librocketmq yet; use the push consumer";

/// Not supported yet: `Not_Support`, `*mqs` NULL and `*size` 0.
#[no_mangle]
pub extern "C" fn FetchSubscriptionMessageQueues(
    consumer: *mut CPullConsumer,
    topic: *const c_char,
    mqs: *mut *mut CMessageQueue,
    size: *mut c_int,
) -> c_int {
    guard(|| {
        registry::pull(consumer, "consumer")?;
        c_str(topic, "topic")?;
        if mqs.is_null() || size.is_null() {
            return Err(Failure::bad("mqs or size is NULL"));
        }
        // SAFETY: both out-pointers were checked not NULL; the caller passes writable ones.
        unsafe {
            mqs.write(std::ptr::null_mut());
            size.write(0);
        }
        Err(Failure::new(status::Not_Support, NOT_YET))
    })
}

/// Frees what `FetchSubscriptionMessageQueues` returned (nothing yet): OK for NULL.
#[no_mangle]
pub extern "C" fn ReleaseSubscriptionMessageQueue(mqs: *mut CMessageQueue) -> c_int {
    if mqs.is_null() {
        return status::OK;
    }
    set_error("mqs was not returned by FetchSubscriptionMessageQueues");
    status::NULL_POINTER
}

/// Not supported yet: `E_BROKER_TIMEOUT` with no messages, and `Not_Support` in
/// `GetLatestErrorMessage`.
#[no_mangle]
pub extern "C" fn Pull(
    consumer: *mut CPullConsumer,
    mq: *const CMessageQueue,
    subExpression: *const c_char,
    offset: c_longlong,
    maxNums: c_int,
) -> CPullResult {
    let _ = (consumer, mq, subExpression, offset, maxNums);
    set_error(NOT_YET);
    CPullResult {
        pullStatus: pull_status::E_BROKER_TIMEOUT,
        nextBeginOffset: offset,
        minOffset: 0,
        maxOffset: 0,
        msgFoundList: std::ptr::null_mut(),
        size: 0,
        pData: std::ptr::null_mut(),
    }
}

/// Frees a pull result's messages (none yet): OK.
#[no_mangle]
pub extern "C" fn ReleasePullResult(pullResult: CPullResult) -> c_int {
    let _ = pullResult;
    status::OK
}
