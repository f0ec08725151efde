//! `librocketmq`: the C API of Apache rocketmq-client-cpp 2.x (the 2.2.0 headers
//! `CProducer.h`, `CPushConsumer.h`, `CPullConsumer.h`, `CMessage.h`, ... in `include/`)
//! on top of rocketmq-blocking, so that programs and bindings written for that library
//! (the official Python client `rocketmq-client-python` 2.0.0 among them) run unchanged.
//!
//! Same names, signatures, struct layouts and status codes as 2.2.0; what differs is
//! safety where the original crashed. Every handle the library hands out is registered
//! (`registry`): a call with NULL, a destroyed handle or a handle of the wrong type gets
//! `NULL_POINTER` (or NULL/0 from a getter) instead of undefined behaviour, and a destroy
//! of a running client shuts it down first. Callbacks into C pass a gate (`gate`) that
//! `Shutdown*`/`Destroy*` close and wait on, so no callback runs after they return. No
//! panic crosses into C (`guard`). A function that cannot be honoured returns
//! `Not_Support` (500) and says why in `GetLatestErrorMessage`.
//!
//! Layers: this module (status codes, last error, C strings, panic boundary), `registry`,
//! `gate`, `settings` (what every client is configured with, and its common setters),
//! then `message` (CMessage, CMessageExt, CBatchMessage), `producer`, `push`, `pull`.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
// The C entry points take raw pointers but are safe `extern "C" fn`s, as in the ffi crate:
// C callers cannot see `unsafe`, and every pointer is checked before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod gate;
pub mod message;
pub mod producer;
pub mod pull;
pub mod push;
mod registry;
mod settings;

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The status codes of `CCommon.h` (`CStatus`), as `int`.
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// A NULL, destroyed, mistyped or otherwise unusable argument.
    pub const NULL_POINTER: i32 = 1;
    /// Allocation failed (never returned: Rust aborts on allocation failure).
    pub const MALLOC_FAILED: i32 = 2;
    /// Starting (or configuring) a producer failed.
    pub const PRODUCER_START_FAILED: i32 = 10;
    /// A sync send failed.
    pub const PRODUCER_SEND_SYNC_FAILED: i32 = 11;
    /// A oneway send failed.
    pub const PRODUCER_SEND_ONEWAY_FAILED: i32 = 12;
    /// An orderly send failed.
    pub const PRODUCER_SEND_ORDERLY_FAILED: i32 = 13;
    /// An async send could not be queued.
    pub const PRODUCER_SEND_ASYNC_FAILED: i32 = 14;
    /// An orderly async send could not be queued.
    pub const PRODUCER_SEND_ORDERLYASYNC_FAILED: i32 = 15;
    /// A transactional send failed.
    pub const PRODUCER_SEND_TRANSACTION_FAILED: i32 = 16;
    /// Starting a push consumer failed.
    pub const PUSHCONSUMER_START_FAILED: i32 = 20;
    /// Starting a pull consumer failed.
    pub const PULLCONSUMER_START_FAILED: i32 = 30;
    /// Fetching the queues of a topic failed.
    pub const PULLCONSUMER_FETCH_MQ_FAILED: i32 = 31;
    /// A pull failed.
    pub const PULLCONSUMER_FETCH_MESSAGE_FAILED: i32 = 32;
    /// The function cannot be honoured by this library (the reason is the last error).
    pub const Not_Support: i32 = 500;
}

/// What a failed call returns: a status code and the text for `GetLatestErrorMessage`.
pub(crate) struct Failure {
    pub(crate) status: i32,
    pub(crate) text: String,
}

impl Failure {
    pub(crate) fn new(status: i32, text: impl Into<String>) -> Failure {
        Failure {
            status,
            text: text.into(),
        }
    }

    /// `NULL_POINTER` for an argument that cannot be used.
    pub(crate) fn bad(text: impl Into<String>) -> Failure {
        Failure::new(status::NULL_POINTER, text)
    }
}

pub(crate) type CResult<T> = Result<T, Failure>;

thread_local! {
    /// The text `GetLatestErrorMessage` returns on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `text` as this thread's latest error.
pub(crate) fn set_error(text: &str) {
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = c;
        }
    });
}

/// Runs `f` behind the panic boundary: its status, or the failure's (recorded as the
/// latest error); a panic is `NULL_POINTER` with the panic's text.
pub(crate) fn guard(f: impl FnOnce() -> CResult<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => status::OK,
        Ok(Err(e)) => {
            set_error(&e.text);
            e.status
        }
        Err(payload) => {
            set_error(&format!(
                "panic at the C boundary: {}",
                panic_text(&payload)
            ));
            status::NULL_POINTER
        }
    }
}

/// Like [`guard`] for functions that return a value: `fallback` on failure or panic.
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> CResult<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_error(&e.text);
            fallback
        }
        Err(payload) => {
            set_error(&format!(
                "panic at the C boundary: {}",
                panic_text(&payload)
            ));
            fallback
        }
    }
}

pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown payload".to_string())
}

/// A C string argument as UTF-8; `what` names it in the error.
pub(crate) fn c_str<'a>(p: *const c_char, what: &str) -> CResult<&'a str> {
    if p.is_null() {
        return Err(Failure::bad(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (the API's contract for every
    // `const char*` argument) that stays valid for the call; we checked it is not NULL.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::bad(format!("{what} is not valid UTF-8")))
}

/// Copies `s` into the C array `dst` (NUL-terminated, truncated at a character
/// boundary), as the original's `strncpy(dst, s, N - 1)`.
pub(crate) fn copy_into(dst: &mut [c_char], s: &str) {
    let Some(room) = dst.len().checked_sub(1) else {
        return;
    };
    let mut n = s.len().min(room);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    for d in dst[n..].iter_mut() {
        *d = 0;
    }
}

/// The latest error of this thread (`CErrorMessage.h`): the text of the last call that
/// failed on it, "" when none has. The pointer stays valid until the next failing call on
/// this thread. The original keeps one global text; a per-thread one cannot be
/// overwritten by another thread between a failure and this call.
#[no_mangle]
pub extern "C" fn GetLatestErrorMessage() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.try_borrow().map(|l| l.as_ptr()).unwrap_or(c"".as_ptr()))
        .unwrap_or(c"".as_ptr())
}

/// The version every `Show*Version` returns.
pub(crate) const VERSION: &CStr =
    c"rocketmq-blocking-compat 0.1.0 (C API of rocketmq-client-cpp 2.2.0)";

/// Log settings of the 2.x API (`Set*LogPath`, `Set*LogFileNumAndSize`, `Set*LogLevel`).
/// The original wrote files under `~/logs/rocketmq-cpp`; this library writes no files: the
/// level is mapped onto the Rust `log` facade's maximum level, and the first level set
/// installs a logger writing to standard error (unless the process has a `log` logger
/// already). The path and file sizes are checked and otherwise ignored.
pub(crate) mod logs {
    use super::{CResult, Failure};

    /// Lines on standard error: `<level> <target>: <text>`.
    struct Stderr;

    impl log::Log for Stderr {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.level() <= log::max_level()
        }

        fn log(&self, record: &log::Record<'_>) {
            if self.enabled(record.metadata()) {
                eprintln!("{} {}: {}", record.level(), record.target(), record.args());
            }
        }

        fn flush(&self) {}
    }

    static STDERR: Stderr = Stderr;

    /// `CLogLevel` (1 = fatal ... 6 = trace) onto `log`'s maximum level.
    pub(crate) fn set_level(level: i32) -> CResult<()> {
        let filter = match level {
            1 | 2 => log::LevelFilter::Error,
            3 => log::LevelFilter::Warn,
            4 => log::LevelFilter::Info,
            5 => log::LevelFilter::Debug,
            6 | 7 => log::LevelFilter::Trace,
            _ => {
                return Err(Failure::bad(format!(
                    "log level {level} is not a CLogLevel"
                )))
            }
        };
        // Fails when a logger is installed already (ours or the application's): keep it.
        let _ = log::set_logger(&STDERR);
        log::set_max_level(filter);
        Ok(())
    }

    /// Checks the file count and size (accepted, no file logger).
    pub(crate) fn check_files(num: i32, size: std::ffi::c_long) -> CResult<()> {
        if num < 0 || size < 0 {
            return Err(Failure::bad(format!(
                "log file count {num} and size {size} must not be negative"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_into_truncates_at_a_character_boundary_and_terminates() {
        let mut buf = [1 as c_char; 4];
        copy_into(&mut buf, "aé€");
        // "a" (1 byte) + "é" (2 bytes) fit in 3; "€" does not.
        assert_eq!(buf[3], 0);
        assert_eq!(buf[0] as u8, b'a');
        let mut tiny = [7 as c_char; 1];
        copy_into(&mut tiny, "abc");
        assert_eq!(tiny[0], 0);
    }

    #[test]
    fn failures_are_the_latest_error_of_their_thread() {
        let st = guard(|| Err(Failure::new(status::Not_Support, "nope")));
        assert_eq!(st, status::Not_Support);
        // SAFETY: GetLatestErrorMessage returns a valid NUL-terminated string.
        let text = unsafe { CStr::from_ptr(GetLatestErrorMessage()) };
        assert_eq!(text.to_str().ok(), Some("nope"));
        let st = guard(|| panic!("boom"));
        assert_eq!(st, status::NULL_POINTER);
    }
}
