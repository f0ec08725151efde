//! Result codes, the per-thread last error, and the panic boundary every entry point runs in.

use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rocketmq_blocking::{Error, ErrorKind};

use crate::util::{copy_to_buf, out};

/// What a call returned. `RMQ_OK` is success; the codes up to `RMQ_TLS`, and
/// `RMQ_UNSUPPORTED` (added after `RMQ_OTHER`), are the crate's `ErrorKind`s, the rest are
/// failures of the C boundary itself. After a failure, `rmq_last_error` holds the text and
/// `rmq_last_response_code` the broker's code (for `RMQ_RESPONSE` and `RMQ_UNSUPPORTED`),
/// on the thread that made the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_result {
    RMQ_OK = 0,
    /// A deadline passed (connect, permit, lock or response).
    RMQ_TIMEOUT = 1,
    /// A TCP connection could not be established.
    RMQ_CONNECT = 2,
    /// The connection closed while the request was pending.
    RMQ_CONNECTION_CLOSED = 3,
    /// The broker or name server answered with an error code (`rmq_last_response_code`).
    RMQ_RESPONSE = 4,
    /// Bytes from the network could not be decoded.
    RMQ_DECODE = 5,
    /// An argument was rejected before anything was sent (names, sizes, addresses).
    RMQ_INVALID_ARGUMENT = 6,
    /// The handle is not in a state that allows the call (not started, shut down).
    RMQ_STATE = 7,
    /// Too many requests in flight.
    RMQ_OVERLOADED = 8,
    /// No route to the topic is known.
    RMQ_NO_ROUTE = 9,
    /// A local I/O error.
    RMQ_IO = 10,
    /// The client is not configured for the call (no name-server address, for one).
    RMQ_CONFIG = 11,
    /// The TLS layer failed.
    RMQ_TLS = 12,
    /// An error of a kind this version of the C ABI does not name.
    RMQ_OTHER = 13,
    /// The broker does not offer the request (POP on a 4.x broker);
    /// `rmq_last_response_code` is REQUEST_CODE_NOT_SUPPORTED (3).
    RMQ_UNSUPPORTED = 14,
    /// A required pointer (handle, string, out-parameter) was NULL.
    RMQ_NULL_PARAMETER = 100,
    /// A panic was caught at the boundary; the handle may be unusable.
    RMQ_PANIC = 101,
    /// A string argument was not valid UTF-8.
    RMQ_INVALID_UTF8 = 102,
    /// The caller's buffer was too small; `*written` holds the size needed.
    RMQ_BUFFER_TOO_SMALL = 103,
    /// An index was past the end.
    RMQ_OUT_OF_RANGE = 104,
}

impl rmq_result {
    fn of_kind(kind: ErrorKind) -> rmq_result {
        use rmq_result::*;
        match kind {
            ErrorKind::Timeout => RMQ_TIMEOUT,
            ErrorKind::Connect => RMQ_CONNECT,
            ErrorKind::ConnectionClosed => RMQ_CONNECTION_CLOSED,
            ErrorKind::Response => RMQ_RESPONSE,
            ErrorKind::Decode => RMQ_DECODE,
            ErrorKind::InvalidArgument => RMQ_INVALID_ARGUMENT,
            ErrorKind::State => RMQ_STATE,
            ErrorKind::Overloaded => RMQ_OVERLOADED,
            ErrorKind::NoRoute => RMQ_NO_ROUTE,
            ErrorKind::Io => RMQ_IO,
            ErrorKind::Config => RMQ_CONFIG,
            ErrorKind::Tls => RMQ_TLS,
            ErrorKind::Unsupported => RMQ_UNSUPPORTED,
            _ => RMQ_OTHER,
        }
    }
}

struct LastError {
    text: String,
    response_code: Option<i32>,
}

thread_local! {
    static LAST: RefCell<LastError> = const {
        RefCell::new(LastError { text: String::new(), response_code: None })
    };
}

fn record(text: String, response_code: Option<i32>) {
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = LastError {
                text,
                response_code,
            }
        }
    });
}

/// Records a boundary failure (`code` with `text`) as this thread's last error.
pub(crate) fn fail(code: rmq_result, text: impl Into<String>) -> rmq_result {
    record(text.into(), None);
    code
}

/// Records a crate error as this thread's last error and maps its kind.
pub(crate) fn err(e: Error) -> rmq_result {
    err_ref(&e)
}

/// Like `err`, for an error the crate keeps (a send hook's `after_send` sees one).
pub(crate) fn err_ref(e: &Error) -> rmq_result {
    // The alternate form: the message and its causes (an I/O error, for one) on one line.
    record(format!("{e:#}"), e.response_code().map(|c| c.0));
    rmq_result::of_kind(e.kind())
}

/// Runs one entry point: `Err(code)` and panics become result codes, so no panic crosses
/// into C (unwinding out of an `extern "C"` function aborts the process).
pub(crate) fn guard(f: impl FnOnce() -> Result<(), rmq_result>) -> rmq_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => rmq_result::RMQ_OK,
        Ok(Err(code)) => code,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown payload".to_string());
            fail(
                rmq_result::RMQ_PANIC,
                format!("panic caught at the C boundary: {what}"),
            )
        }
    }
}

/// For functions that cannot report a result (`_free`): runs `f`, swallowing a panic.
pub(crate) fn guard_void(f: impl FnOnce()) {
    let _ = guard(|| {
        f();
        Ok(())
    });
}

/// Copies the text of this thread's last error into `buf` (at most `len - 1` bytes and a
/// terminating NUL; truncated if longer) and sets `*written` to the bytes copied, NUL
/// excluded. Empty when no call on this thread has failed. A successful call does not
/// clear it (as with `errno`). Thread-safe: each thread has its own.
#[no_mangle]
pub extern "C" fn rmq_last_error(buf: *mut c_char, len: usize, written: *mut usize) -> rmq_result {
    guard(|| {
        let text = LAST.with(|l| l.try_borrow().map(|l| l.text.clone()).unwrap_or_default());
        let n = text.len().min(len.saturating_sub(1));
        // Cut at a character boundary so a truncated text stays UTF-8.
        let n = (0..=n)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        copy_to_buf(&text.as_bytes()[..n], buf, len, written, true)
    })
}

/// Sets `*present` to whether this thread's last error carried a broker or name-server
/// response code, and `*code` to that code (0 when absent). The codes are RocketMQ's
/// `ResponseCode`s (1 SYSTEM_ERROR, 17 TOPIC_NOT_EXIST, ...).
#[no_mangle]
pub extern "C" fn rmq_last_response_code(present: *mut bool, code: *mut i32) -> rmq_result {
    guard(|| {
        let c = LAST.with(|l| l.try_borrow().ok().and_then(|l| l.response_code));
        out(present, c.is_some())?;
        out(code, c.unwrap_or(0))
    })
}

/// Every `rmq_result`, for matching an integer from C against them.
pub(crate) const ALL_RESULTS: [rmq_result; 20] = {
    use rmq_result::*;
    [
        RMQ_OK,
        RMQ_TIMEOUT,
        RMQ_CONNECT,
        RMQ_CONNECTION_CLOSED,
        RMQ_RESPONSE,
        RMQ_DECODE,
        RMQ_INVALID_ARGUMENT,
        RMQ_STATE,
        RMQ_OVERLOADED,
        RMQ_NO_ROUTE,
        RMQ_IO,
        RMQ_CONFIG,
        RMQ_TLS,
        RMQ_OTHER,
        RMQ_UNSUPPORTED,
        RMQ_NULL_PARAMETER,
        RMQ_PANIC,
        RMQ_INVALID_UTF8,
        RMQ_BUFFER_TOO_SMALL,
        RMQ_OUT_OF_RANGE,
    ]
};

/// The name of a result code as a static NUL-terminated string ("RMQ_TIMEOUT"), and
/// "RMQ_UNKNOWN" for any value that is not an `rmq_result`: it takes an `int32_t`, so
/// whatever integer C holds is a valid argument.
#[no_mangle]
pub extern "C" fn rmq_result_name(result: i32) -> *const c_char {
    use rmq_result::*;
    // Compared as integers: a C value out of range must never become a Rust enum.
    let s: &'static [u8] = match ALL_RESULTS.into_iter().find(|&c| c as i32 == result) {
        Some(RMQ_OK) => b"RMQ_OK\0",
        Some(RMQ_TIMEOUT) => b"RMQ_TIMEOUT\0",
        Some(RMQ_CONNECT) => b"RMQ_CONNECT\0",
        Some(RMQ_CONNECTION_CLOSED) => b"RMQ_CONNECTION_CLOSED\0",
        Some(RMQ_RESPONSE) => b"RMQ_RESPONSE\0",
        Some(RMQ_DECODE) => b"RMQ_DECODE\0",
        Some(RMQ_INVALID_ARGUMENT) => b"RMQ_INVALID_ARGUMENT\0",
        Some(RMQ_STATE) => b"RMQ_STATE\0",
        Some(RMQ_OVERLOADED) => b"RMQ_OVERLOADED\0",
        Some(RMQ_NO_ROUTE) => b"RMQ_NO_ROUTE\0",
        Some(RMQ_IO) => b"RMQ_IO\0",
        Some(RMQ_CONFIG) => b"RMQ_CONFIG\0",
        Some(RMQ_TLS) => b"RMQ_TLS\0",
        Some(RMQ_OTHER) => b"RMQ_OTHER\0",
        Some(RMQ_UNSUPPORTED) => b"RMQ_UNSUPPORTED\0",
        Some(RMQ_NULL_PARAMETER) => b"RMQ_NULL_PARAMETER\0",
        Some(RMQ_PANIC) => b"RMQ_PANIC\0",
        Some(RMQ_INVALID_UTF8) => b"RMQ_INVALID_UTF8\0",
        Some(RMQ_BUFFER_TOO_SMALL) => b"RMQ_BUFFER_TOO_SMALL\0",
        Some(RMQ_OUT_OF_RANGE) => b"RMQ_OUT_OF_RANGE\0",
        None => b"RMQ_UNKNOWN\0",
    };
    s.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        let mut buf = [0 as c_char; 256];
        let mut n = 0usize;
        assert_eq!(
            rmq_last_error(buf.as_mut_ptr(), buf.len(), &mut n),
            rmq_result::RMQ_OK
        );
        let bytes: Vec<u8> = buf[..n].iter().map(|&c| c as u8).collect();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_panic_inside_an_entry_point_becomes_rmq_panic_with_its_message() {
        let r = guard(|| panic!("boom in the middle"));
        assert_eq!(r, rmq_result::RMQ_PANIC);
        assert!(last().contains("boom in the middle"), "{}", last());
    }

    #[test]
    fn crate_errors_map_their_kind_and_keep_the_response_code() {
        let e = Error::response(rocketmq_blocking::ResponseCode::TOPIC_NOT_EXIST, Some("no"));
        assert_eq!(err(e), rmq_result::RMQ_RESPONSE);
        let (mut present, mut code) = (false, 0);
        rmq_last_response_code(&mut present, &mut code);
        assert!(present);
        assert_eq!(code, 17);
        assert_eq!(
            err(Error::new(ErrorKind::InvalidArgument, "bad")),
            rmq_result::RMQ_INVALID_ARGUMENT
        );
        rmq_last_response_code(&mut present, &mut code);
        assert!(!present);
    }

    #[test]
    fn the_last_error_is_truncated_to_the_buffer_and_nul_terminated() {
        fail(rmq_result::RMQ_OTHER, "abcdefghij");
        let mut buf = [1 as c_char; 4];
        let mut n = 99usize;
        assert_eq!(
            rmq_last_error(buf.as_mut_ptr(), 4, &mut n),
            rmq_result::RMQ_OK
        );
        assert_eq!(n, 3);
        assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
        assert_eq!(
            rmq_last_error(std::ptr::null_mut(), 4, &mut n),
            rmq_result::RMQ_NULL_PARAMETER
        );
    }

    fn name(code: i32) -> String {
        // SAFETY: rmq_result_name returns a static NUL-terminated string for any value.
        let s = unsafe { std::ffi::CStr::from_ptr(rmq_result_name(code)) };
        s.to_str().expect("ASCII").to_string()
    }

    #[test]
    fn a_result_name_of_an_integer_no_code_has_is_rmq_unknown() {
        for code in ALL_RESULTS {
            assert_eq!(name(code as i32), format!("{code:?}"));
        }
        for v in [-1, 15, 99, 105, 9999, i32::MIN, i32::MAX] {
            assert_eq!(name(v), "RMQ_UNKNOWN", "{v}");
        }
    }

    #[test]
    fn each_thread_has_its_own_last_error() {
        fail(rmq_result::RMQ_OTHER, "main thread");
        std::thread::spawn(|| assert_eq!(last(), ""))
            .join()
            .unwrap();
        assert_eq!(last(), "main thread");
    }
}
