//! Measurements for `rmq bench`: counters and a latency histogram shared by the sending
//! threads and the callback pool, a once-a-second progress line, and this process's CPU
//! time and peak memory as Linux reports them in `/proc/self`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use parking_lot::Mutex;

static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Records "now" as the process start; `main` calls it before anything else.
pub(crate) fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

fn process_start() -> Instant {
    *PROCESS_START.get_or_init(Instant::now)
}

/// Latencies are kept in microseconds from 1 µs to 10 min with 3 significant digits
/// (0.1 % error), which covers any send timeout.
const HIST_MAX_US: u64 = 600_000_000;
/// Errors printed as they happen; the rest are only counted.
const ERRORS_SHOWN: usize = 5;

/// Counters and latencies of one run. Every method takes `&self`: senders and callbacks
/// record concurrently.
pub(crate) struct Recorder {
    ok: AtomicU64,
    failed: AtomicU64,
    hist: Mutex<Histogram<u64>>,
    first_ack: OnceLock<FirstAck>,
    errors_seen: AtomicUsize,
    first_error: OnceLock<String>,
}

impl Recorder {
    pub(crate) fn new() -> Result<Recorder, String> {
        let hist = Histogram::new_with_bounds(1, HIST_MAX_US, 3)
            .map_err(|e| format!("latency histogram: {e}"))?;
        Ok(Recorder {
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            hist: Mutex::new(hist),
            first_ack: OnceLock::new(),
            errors_seen: AtomicUsize::new(0),
            first_error: OnceLock::new(),
        })
    }

    /// `messages` were acknowledged by one call that took `latency`.
    pub(crate) fn ok(&self, messages: u64, latency: Duration) {
        self.first_ack.get_or_init(|| FirstAck {
            since_start: process_start().elapsed(),
            epoch_us: epoch_us(),
        });
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        self.hist.lock().saturating_record(us);
        self.ok.fetch_add(messages, Ordering::Relaxed);
    }

    /// One message each, of these latencies, recorded under one lock (a consumer's batch).
    pub(crate) fn ok_each(&self, latencies: &[Duration]) {
        if latencies.is_empty() {
            return;
        }
        self.first_ack.get_or_init(|| FirstAck {
            since_start: process_start().elapsed(),
            epoch_us: epoch_us(),
        });
        let mut h = self.hist.lock();
        for latency in latencies {
            let us = u64::try_from(latency.as_micros())
                .unwrap_or(u64::MAX)
                .max(1);
            h.saturating_record(us);
        }
        drop(h);
        self.ok.fetch_add(latencies.len() as u64, Ordering::Relaxed);
    }

    /// `messages` failed; `why` is shown for the first few failures.
    pub(crate) fn failed(&self, messages: u64, why: &dyn std::fmt::Display) {
        self.count_failed(messages);
        self.note_error(why);
    }

    /// Counts failures whose reason was (or will be) reported through [`Self::note_error`].
    pub(crate) fn count_failed(&self, messages: u64) {
        self.failed.fetch_add(messages, Ordering::Relaxed);
    }

    /// Shows an error without counting it.
    pub(crate) fn note_error(&self, why: &dyn std::fmt::Display) {
        let n = self.errors_seen.fetch_add(1, Ordering::Relaxed);
        if n == 0 {
            let _ = self.first_error.set(why.to_string());
        }
        if n < ERRORS_SHOWN {
            eprintln!("rmq: send failed: {why}");
        } else if n == ERRORS_SHOWN {
            eprintln!("rmq: more send failures; only counting them from now on");
        }
    }

    pub(crate) fn acked(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    pub(crate) fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub(crate) fn first_error(&self) -> Option<&str> {
        self.first_error.get().map(String::as_str)
    }

    /// Time from process start to the first acknowledgement.
    pub(crate) fn first_ack(&self) -> Option<Duration> {
        self.first_ack.get().map(|f| f.since_start)
    }

    /// The wall clock at the first acknowledgement, in µs since the Unix epoch: a harness
    /// that notes the clock before starting this process subtracts it (the JVM's own start
    /// cannot be measured from inside, so the Java side reports the same way).
    pub(crate) fn first_ack_epoch_us(&self) -> Option<u64> {
        self.first_ack.get().map(|f| f.epoch_us)
    }

    /// p50, p90, p99, p99.9 and max latency in milliseconds (zeros when nothing was recorded).
    pub(crate) fn latency_ms(&self) -> Latency {
        let h = self.hist.lock();
        // Whole microseconds, shown as milliseconds with three decimals.
        let ms = |us: f64| (us.round()) / 1000.0;
        Latency {
            p50: ms(h.value_at_quantile(0.50) as f64),
            p90: ms(h.value_at_quantile(0.90) as f64),
            p99: ms(h.value_at_quantile(0.99) as f64),
            p999: ms(h.value_at_quantile(0.999) as f64),
            max: ms(h.max() as f64),
            mean: ms(h.mean()),
            calls: h.len(),
        }
    }
}

/// When the first acknowledgement (or consumed message) came.
#[derive(Debug, Clone, Copy)]
struct FirstAck {
    since_start: Duration,
    epoch_us: u64,
}

/// The wall clock in µs since the Unix epoch (0 if the clock is before it).
pub(crate) fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Latency summary in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
    /// Calls measured (a batch is one call).
    pub(crate) calls: u64,
}

/// What a progress line counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counting {
    /// Acknowledged sends, and failures.
    Sent,
    /// The same, for the warm-up before the measured sends.
    WarmUp,
    /// Consumed messages (a consumer has no failures to count).
    Consumed,
}

/// Prints the count and the last second's rate on stderr once a second until dropped.
pub(crate) struct Progress {
    // Declared before the handle so that it closes first when dropped.
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    pub(crate) fn start(recorder: Arc<Recorder>, counting: Counting) -> Result<Progress, String> {
        let (stop, stopped) = bounded::<()>(1);
        let begin = Instant::now();
        let handle = std::thread::Builder::new()
            .name("rmq-progress".into())
            .spawn(move || {
                let mut last = 0;
                let mut tick = begin;
                loop {
                    match stopped.recv_timeout(Duration::from_secs(1)) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return, // stop requested or the sender is gone
                    }
                    let now = Instant::now();
                    let acked = recorder.acked();
                    let rate = (acked - last) as f64 / (now - tick).as_secs_f64();
                    let at = (now - begin).as_secs_f64();
                    match counting {
                        Counting::Sent | Counting::WarmUp => eprintln!(
                            "[{at:>5.1}s] {}sent {acked}, failed {}, {rate:.0} msg/s",
                            if counting == Counting::WarmUp {
                                "warm-up: "
                            } else {
                                ""
                            },
                            recorder.failures()
                        ),
                        Counting::Consumed => {
                            eprintln!("[{at:>5.1}s] consumed {acked}, {rate:.0} msg/s")
                        }
                    }
                    (last, tick) = (acked, now);
                }
            })
            .map_err(|e| format!("cannot start the progress thread: {e}"))?;
        Ok(Progress {
            stop: Some(stop),
            handle: Some(handle),
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.try_send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// CPU time this process used so far.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct CpuTime {
    pub(crate) user: f64,
    pub(crate) sys: f64,
}

impl CpuTime {
    pub(crate) fn total(&self) -> f64 {
        self.user + self.sys
    }

    /// The CPU time used between `earlier` and this reading.
    pub(crate) fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: (self.user - earlier.user).max(0.0),
            sys: (self.sys - earlier.sys).max(0.0),
        }
    }
}

/// CPU seconds as a report shows them (two decimals).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct CpuSeconds {
    pub(crate) user: f64,
    pub(crate) sys: f64,
    pub(crate) total: f64,
}

impl From<CpuTime> for CpuSeconds {
    fn from(c: CpuTime) -> Self {
        CpuSeconds {
            user: round(c.user, 2),
            sys: round(c.sys, 2),
            total: round(c.total(), 2),
        }
    }
}

/// `cpu 1.23 s (user 1.00, sys 0.23)`, or `cpu ?` when unknown.
pub(crate) fn human_cpu(cpu: Option<&CpuSeconds>) -> String {
    cpu.map_or("?".into(), |c| {
        format!("{:.2} s (user {:.2}, sys {:.2})", c.total, c.user, c.sys)
    })
}

/// `12.3 MiB`, or `?` when unknown.
pub(crate) fn human_rss(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// `v` rounded to `digits` decimals, to keep JSON lines readable.
pub(crate) fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// User and system CPU seconds of this process (`utime` and `stime` of `/proc/self/stat`).
pub(crate) fn cpu_time() -> Option<CpuTime> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (utime, stime) = parse_stat_times(&text)?;
    let tick = clock_ticks() as f64;
    Some(CpuTime {
        user: utime as f64 / tick,
        sys: stime as f64 / tick,
    })
}

/// Fields 14 and 15 (`utime`, `stime`, in clock ticks) of a `/proc/<pid>/stat` line.
fn parse_stat_times(stat: &str) -> Option<(u64, u64)> {
    // Field 2 is the command name in parentheses and may itself contain spaces or
    // parentheses, so count fields from the last ')': the next one is field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(14 - 3);
    let utime = fields.next()?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some((utime, stime))
}

/// Clock ticks per second (`getconf CLK_TCK`, asked once); 100 when it cannot be asked.
fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// Peak resident set size in KiB (`VmHWM` of `/proc/self/status`).
pub(crate) fn peak_rss_kib() -> Option<u64> {
    parse_vm_hwm(&std::fs::read_to_string("/proc/self/status").ok()?)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line["VmHWM:".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_are_fields_14_and_15_even_with_spaces_in_the_name() {
        let stat = "4242 (rmq (x) y) S 1 4242 4242 0 -1 4194304 500 0 0 0 1234 567 0 0 20 0 3 0 100 1000 200";
        assert_eq!(parse_stat_times(stat), Some((1234, 567)));
        assert_eq!(parse_stat_times("1 (a) S 1 2"), None);
        assert_eq!(parse_stat_times("no parenthesis"), None);
    }

    #[test]
    fn vm_hwm_is_read_in_kib() {
        let status = "Name:\trmq\nVmPeak:\t  9000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(12345));
        assert_eq!(parse_vm_hwm("Name:\trmq\n"), None);
    }

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        assert!(cpu_time().is_some());
        assert!(peak_rss_kib().is_some_and(|k| k > 0));
        assert!(clock_ticks() > 0);
    }

    #[test]
    fn cpu_time_since_an_earlier_reading_is_the_difference() {
        let earlier = CpuTime {
            user: 1.5,
            sys: 0.25,
        };
        let later = CpuTime {
            user: 4.0,
            sys: 0.75,
        };
        let d = later.since(&earlier);
        assert_eq!((d.user, d.sys, d.total()), (2.5, 0.5, 3.0));
        // Never negative, whatever order the readings come in.
        assert_eq!(earlier.since(&later).total(), 0.0);
    }

    #[test]
    fn recorder_counts_messages_and_reports_quantiles() {
        let r = Recorder::new().unwrap();
        for ms in 1..=100 {
            r.ok(2, Duration::from_millis(ms));
        }
        r.failed(3, &"boom");
        assert_eq!(r.acked(), 200);
        assert_eq!(r.failures(), 3);
        assert_eq!(r.first_error(), Some("boom"));
        let l = r.latency_ms();
        assert_eq!(l.calls, 100);
        assert!((l.p50 - 50.0).abs() < 0.1, "{l:?}");
        assert!((l.max - 100.0).abs() < 0.1, "{l:?}");
        assert!(r.first_ack().is_some());
        let first = r.first_ack_epoch_us().unwrap();
        assert!(first <= epoch_us() && first > epoch_us() - 60_000_000);
    }
}
