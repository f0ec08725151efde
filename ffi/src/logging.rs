//! A `log` logger that forwards the crate's records to a C function.

use std::cell::Cell;
use std::ffi::{c_char, c_void};

use log::{Level, LevelFilter, Log, Metadata, Record};
use parking_lot::RwLock;

use crate::error::{fail, guard, rmq_result};
use crate::util::Userdata;

/// Receives one log record: `level` is 1 error, 2 warn, 3 info, 4 debug, 5 trace;
/// `target` (the Rust module) and `message` are borrowed for the call, not
/// NUL-terminated. Runs on whichever thread logs (the caller's, the I/O thread, timer and
/// consume threads), possibly on several at once. Calls into this library from it are
/// not logged.
pub type rmq_log_callback = Option<
    extern "C" fn(
        userdata: *mut c_void,
        level: i32,
        target: *const c_char,
        target_len: usize,
        message: *const c_char,
        message_len: usize,
    ),
>;

type LogFn = extern "C" fn(*mut c_void, i32, *const c_char, usize, *const c_char, usize);

static SINK: RwLock<Option<(LogFn, Userdata)>> = RwLock::new(None);

thread_local! {
    static LOGGING: Cell<bool> = const { Cell::new(false) };
}

struct CLogger;

static LOGGER: CLogger = CLogger;

impl Log for CLogger {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        SINK.read().is_some()
    }

    fn log(&self, record: &Record<'_>) {
        if LOGGING.with(|l| l.replace(true)) {
            return; // a record logged from inside the callback
        }
        // The read lock is held across the call, so `rmq_set_log_callback` returns only
        // when no thread still runs the callback it replaced.
        let sink = SINK.read();
        if let Some((f, ud)) = *sink {
            let msg = record.args().to_string();
            let target = record.target();
            f(
                ud.0,
                record.level() as i32,
                target.as_ptr().cast(),
                target.len(),
                msg.as_ptr().cast(),
                msg.len(),
            );
        }
        drop(sink);
        LOGGING.with(|l| l.set(false));
    }

    fn flush(&self) {}
}

fn level_filter(max_level: i32) -> LevelFilter {
    match max_level {
        i32::MIN..=0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

/// Sends the library's log records up to `max_level` (1 error ... 5 trace, 0 none) to
/// `callback` with `userdata`; NULL `callback` stops logging. May be called again to
/// change either; it returns once no thread runs the previous callback any more, so its
/// userdata may be freed then. `RMQ_STATE` when the process already has another `log`
/// logger (a Rust host that installed its own), or when called from inside the callback.
#[no_mangle]
pub extern "C" fn rmq_set_log_callback(
    callback: rmq_log_callback,
    userdata: *mut c_void,
    max_level: i32,
) -> rmq_result {
    guard(|| {
        if LOGGING.with(|l| l.get()) {
            return Err(fail(
                rmq_result::RMQ_STATE,
                "rmq_set_log_callback called from inside the log callback",
            ));
        }
        // Installing twice is fine for us: the second time fails with ours in place.
        let installed = log::set_logger(&LOGGER).is_ok()
            || std::ptr::eq(
                log::logger() as *const dyn Log as *const (),
                &LOGGER as *const CLogger as *const (),
            );
        if !installed {
            return Err(fail(
                rmq_result::RMQ_STATE,
                "another logger is installed in this process",
            ));
        }
        *SINK.write() = callback.map(|f| (f, Userdata(userdata)));
        log::set_max_level(if callback.is_some() {
            level_filter(max_level)
        } else {
            LevelFilter::Off
        });
        Ok(())
    })
}

// The levels C sees are the `log` crate's own numbers.
const _: () = assert!(Level::Error as i32 == 1 && Level::Trace as i32 == 5);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static SEEN: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn count(
        ud: *mut c_void,
        level: i32,
        _t: *const c_char,
        _tl: usize,
        m: *const c_char,
        ml: usize,
    ) {
        assert_eq!(ud as usize, 7);
        assert_eq!(level, 2);
        // SAFETY: the logger passes `ml` bytes of the formatted message at `m`.
        let msg = unsafe { std::slice::from_raw_parts(m.cast::<u8>(), ml) };
        assert_eq!(msg, b"warned 42");
        SEEN.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn records_up_to_the_level_reach_the_c_callback() {
        assert_eq!(
            rmq_set_log_callback(Some(count), 7 as *mut c_void, 2),
            rmq_result::RMQ_OK
        );
        log::warn!("warned {}", 42);
        log::info!("not at this level");
        assert_eq!(SEEN.load(Ordering::SeqCst), 1);
        assert_eq!(
            rmq_set_log_callback(None, std::ptr::null_mut(), 5),
            rmq_result::RMQ_OK
        );
        log::warn!("warned {}", 42);
        assert_eq!(SEEN.load(Ordering::SeqCst), 1);
    }
}
