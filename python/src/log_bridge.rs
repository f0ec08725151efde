//! The library's `log` records, forwarded to Python's `logging`: a record logged as
//! `rocketmq_blocking::consumer::lite_pull` goes to the logger
//! `rocketmq_blocking.consumer.lite_pull`, with its level, file and line.
//!
//! The thread that logs never waits for the GIL: it may be the I/O thread, or hold a lock
//! of the library that a thread holding the GIL waits for. It only queues the record
//! (dropping it when the queue is full, and saying how many were dropped with the next
//! one); one thread of this module takes the GIL and hands the records to `logging`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};

use log::{Level, LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;

/// Records waiting for the forwarding thread.
const QUEUE: usize = 4096;

struct Owned {
    level: Level,
    target: String,
    message: String,
    file: Option<String>,
    line: Option<u32>,
}

struct Bridge {
    tx: SyncSender<Owned>,
    dropped: AtomicU64,
}

impl Log for Bridge {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut message = record.args().to_string();
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            message = format!("{message} ({dropped} earlier records dropped: the queue to Python's logging was full)");
        }
        let owned = Owned {
            level: record.level(),
            target: record.target().to_string(),
            message,
            file: record.file().map(str::to_string),
            line: record.line(),
        };
        match self.tx.try_send(owned) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
            }
            // The forwarding thread is gone (it never ends while the sender lives).
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn flush(&self) {}
}

/// Python's number for a level.
fn py_level(level: Level) -> i32 {
    match level {
        Level::Error => 40,
        Level::Warn => 30,
        Level::Info => 20,
        Level::Debug => 10,
        Level::Trace => 5,
    }
}

/// The least severe records forwarded for a Python level: `WARNING` (30) forwards
/// warnings and errors; above `ERROR`, nothing.
pub(crate) fn set_level(py_level: i32) {
    log::set_max_level(match py_level {
        i32::MIN..=5 => LevelFilter::Trace,
        6..=10 => LevelFilter::Debug,
        11..=20 => LevelFilter::Info,
        21..=30 => LevelFilter::Warn,
        31..=40 => LevelFilter::Error,
        _ => LevelFilter::Off,
    });
}

fn forward(py: Python<'_>, r: Owned) -> PyResult<()> {
    let name = r.target.replace("::", ".");
    let logger = py
        .import("logging")?
        .getattr("getLogger")?
        .call1((name.as_str(),))?;
    let level = py_level(r.level);
    if !logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        return Ok(());
    }
    let record = logger.call_method1(
        "makeRecord",
        (
            name.as_str(),
            level,
            r.file.as_deref().unwrap_or("(rust)"),
            r.line.unwrap_or(0),
            r.message,
            (),
            py.None(),
        ),
    )?;
    logger.call_method1("handle", (record,))?;
    Ok(())
}

fn run(rx: Receiver<Owned>) {
    for r in rx {
        // `None`: the interpreter is shutting down; the record is dropped.
        let _ = Python::try_attach(|py| {
            if let Err(e) = forward(py, r) {
                e.write_unraisable(py, None);
            }
        });
    }
}

/// Installs the bridge (once per process) at `WARNING`.
pub(crate) fn install() {
    let (tx, rx) = sync_channel(QUEUE);
    let bridge = Bridge {
        tx,
        dropped: AtomicU64::new(0),
    };
    // Another logger already installed (by this module, loaded twice): keep it.
    if log::set_boxed_logger(Box::new(bridge)).is_err() {
        return;
    }
    set_level(30);
    let spawned = std::thread::Builder::new()
        .name("rmq-py-log".into())
        .spawn(move || run(rx));
    if spawned.is_err() {
        // No thread, no forwarding: records would only fill the queue.
        log::set_max_level(LevelFilter::Off);
    }
}
