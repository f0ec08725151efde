//! `rmq consume`: a consumer process that prints every message it receives.
//!
//! stdout gets one JSON line per message and a final `{"consumed":N}` line. A message is
//! acknowledged only after its line is written and flushed, so a process killed at any
//! moment has printed everything its group will not deliver again: a kill can cause
//! duplicates, never a gap in the output. The fault tests count on that.
//!
//! The push consumer (default): the consume threads only render lines and hand them to
//! the main thread, the one writer of stdout (so lines never interleave), then wait until
//! it says they are out before the listener returns success. With `--count N` exactly N
//! messages are printed and acknowledged: shutdown waits (up to [`SHUTDOWN_WAIT`]) for
//! the listeners whose lines are out to return, so their offsets are committed, and a
//! listener that gets a message beyond the count holds it until shutdown has begun, then
//! asks for a retry, which a consumer shutting down leaves uncommitted in its queue
//! (rather than acknowledging it unseen or sending it to the retry topic).
//!
//! `--lite-pull`: a lite pull consumer with auto-commit, polled by the main thread, which
//! prints a batch before it polls again (the next poll is what commits a batch). When
//! the count is reached (or stdout breaks) in the middle of a batch, the queue is moved
//! back to the first message not printed, so the final commit (`commit_sync`, before
//! shutdown, which commits only what was confirmed) leaves it to the
//! group.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use clap::{value_parser, ValueEnum};
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};
use rocketmq_blocking::client::validators::check_topic;
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::{ConsumeFromWhere, LitePullConsumer, MessageModel, MessageSelector};
use rocketmq_blocking::{MessageExt, MessageQueue, PushConsumer};

use crate::{namesrv, parse_seconds, push_consumer, CliResult};
use rocketmq_blocking::ClientOptions;

/// How often a listener holding a message beyond `--count` checks whether shutdown began.
const RELEASE_POLL: Duration = Duration::from_millis(20);

/// How long shutdown waits for running listeners (`await_termination_when_shutdown`).
/// Without a wait, a listener told its lines are out could return after shutdown stopped
/// recording offsets, and its printed messages would come again. Listeners return within
/// microseconds of being told (holders as soon as shutdown begins), unless `--delay`
/// holds them.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Longest single `poll` of the lite pull loop, so that the deadline is checked often.
const POLL_SLICE: Duration = Duration::from_millis(500);

/// Most listener hand-overs the printer writes with one flush.
const PRINT_GROUP: usize = 256;

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    #[command(flatten)]
    topic: crate::TopicArg,
    /// Consumer group.
    #[arg(short = 'g', long)]
    group: String,
    /// Tag expression (`*`, `TagA || TagB`) [default: *].
    #[arg(long, conflicts_with = "sql")]
    expr: Option<String>,
    /// SQL92 filter over message properties (the broker needs `enablePropertyFilter=true`).
    #[arg(long)]
    sql: Option<String>,
    /// Stop after this many messages.
    #[arg(long, value_parser = value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after this many seconds (counted from the start of the command).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Broadcasting: every consumer of the group gets every message (offsets kept locally).
    #[arg(long)]
    broadcast: bool,
    /// Orderly: one thread per queue at a time, in queue order.
    #[arg(long)]
    orderly: bool,
    /// A lite pull consumer with auto-commit (Java `DefaultLitePullConsumer`) instead of a
    /// push consumer: each polled batch is printed before the next poll commits it.
    #[arg(long, conflicts_with_all = ["orderly", "sql"])]
    lite_pull: bool,
    /// Wait this long after printing each message before acknowledging it (a slow
    /// consumer; the fault tests kill one in the middle of a batch).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    delay: Option<Duration>,
    /// Where a group without stored offsets starts.
    #[arg(long, value_enum, default_value_t = StartAt::Last)]
    from: StartAt,
    /// Print the consumer's figures once a second on stderr, one JSON line each
    /// (`{"stats":{"consumed","consumedPerSec","cached","lag","p99Ms",...}}`).
    #[arg(long)]
    stats: bool,
}

/// Start position of a new group (Java `ConsumeFromWhere`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StartAt {
    /// `CONSUME_FROM_FIRST_OFFSET`: everything the broker still holds.
    First,
    /// `CONSUME_FROM_LAST_OFFSET`: only what arrives from now on.
    Last,
}

impl From<StartAt> for ConsumeFromWhere {
    fn from(s: StartAt) -> Self {
        match s {
            StartAt::First => ConsumeFromWhere::FirstOffset,
            StartAt::Last => ConsumeFromWhere::LastOffset,
        }
    }
}

pub(crate) fn run(namesrv_arg: &Option<String>, args: ConsumeArgs) -> CliResult {
    let began = Instant::now();
    check_topic(args.topic.name())?;
    if args.sql.as_deref().is_some_and(|sql| sql.trim().is_empty()) {
        return Err("--sql must not be blank".into());
    }
    let addr = namesrv(namesrv_arg)?;
    let deadline = args.timeout.map(|t| began + t);
    let out = Printer::new(BufWriter::new(std::io::stdout().lock()));
    let out = if args.lite_pull {
        run_lite_pull(&addr, &args, deadline, out)?
    } else {
        run_push(&addr, &args, deadline, out)?
    };
    if let Some(e) = out.broken {
        return Err(format!("cannot write to stdout: {e}").into());
    }
    let mut w = out.out;
    writeln!(w, "{{\"consumed\":{}}}", out.printed)?;
    w.flush()?;
    Ok(())
}

fn message_model(args: &ConsumeArgs) -> MessageModel {
    if args.broadcast {
        MessageModel::Broadcasting
    } else {
        MessageModel::Clustering
    }
}

fn announce(args: &ConsumeArgs) {
    eprintln!(
        "rmq: consuming {} as {} ({}{}, new groups start from the {} offset)",
        args.topic.name(),
        args.group,
        if args.broadcast {
            "broadcasting"
        } else {
            "clustering"
        },
        if args.orderly {
            ", orderly"
        } else if args.lite_pull {
            ", lite pull"
        } else {
            ""
        },
        if args.from == StartAt::First {
            "first"
        } else {
            "last"
        },
    );
}

fn run_push<W: Write>(
    addr: &str,
    args: &ConsumeArgs,
    deadline: Option<Instant>,
    mut out: Printer<W>,
) -> Result<Printer<W>, Box<dyn std::error::Error>> {
    let selector = match (&args.expr, &args.sql) {
        (_, Some(sql)) => MessageSelector::by_sql(sql.as_str()),
        (Some(expr), None) => MessageSelector::by_tag(expr.as_str()),
        (None, None) => MessageSelector::by_tag("*"),
    };
    let (lines_tx, lines) = unbounded();
    let sink = Arc::new(Sink {
        count: args.count,
        delay: args.delay,
        claimed: AtomicU64::new(0),
        lines: lines_tx,
        consumer: OnceLock::new(),
    });
    let listener = {
        let sink = sink.clone();
        move |msgs: &[MessageExt], mq: &MessageQueue| sink.deliver(msgs, mq)
    };
    let consumer = push_consumer(
        crate::client_options(addr, SerializeType::from_env()),
        &args.group,
        args.orderly,
        listener,
    )
    .subscribe_with(args.topic.name(), selector)
    .message_model(message_model(args))
    .consume_from_where(args.from.into())
    .await_termination_when_shutdown(SHUTDOWN_WAIT)
    .start()?;
    let consumer = Arc::new(consumer);
    let _ = sink.consumer.set(Arc::downgrade(&consumer));
    announce(args);
    let reporter = if args.stats {
        let c = Arc::downgrade(&consumer);
        let read = move || c.upgrade().map(|c| c.stats()).unwrap_or_default();
        Some(crate::consume_stats::Reporter::start(read)?)
    } else {
        None
    };

    while !out.done(args.count) {
        match next_lines(&lines, deadline) {
            Some(first) => out.print_group(first, &lines),
            None => break, // the timeout
        }
    }
    drop(reporter);
    shut_down_while_printing(&consumer, &lines, &mut out)?;
    Ok(out)
}

/// Shuts the push consumer down on another thread while this one goes on printing:
/// listeners that were running wait for their lines to be out, and shutdown stops
/// recording offsets only after they returned (or [`SHUTDOWN_WAIT`] passed). What they
/// hand over after shutdown began is printed too (their messages were claimed).
fn shut_down_while_printing<W: Write>(
    consumer: &PushConsumer,
    lines: &Receiver<Lines>,
    out: &mut Printer<W>,
) -> std::io::Result<()> {
    std::thread::scope(|scope| {
        let (stopped_tx, stopped) = bounded::<()>(0);
        std::thread::Builder::new()
            .name("rmq-shutdown".into())
            .spawn_scoped(scope, move || {
                consumer.shutdown();
                drop(stopped_tx);
            })?;
        loop {
            select! {
                recv(lines) -> first => match first {
                    Ok(first) => out.print_group(first, lines),
                    Err(_) => break,
                },
                recv(stopped) -> _ => break,
            }
        }
        Ok::<(), std::io::Error>(())
    })?;
    while let Ok(first) = lines.try_recv() {
        out.print_group(first, lines);
    }
    Ok(())
}

/// The next hand-over of a listener, or `None` once `deadline` passed (the sink holds a
/// sender, so the channel never disconnects while the consumer lives).
fn next_lines(lines: &Receiver<Lines>, deadline: Option<Instant>) -> Option<Lines> {
    match deadline {
        Some(d) => lines.recv_deadline(d).ok(),
        // Without a deadline this waits until the process is killed.
        None => lines.recv().ok(),
    }
}

fn run_lite_pull<W: Write>(
    addr: &str,
    args: &ConsumeArgs,
    deadline: Option<Instant>,
    mut out: Printer<W>,
) -> Result<Printer<W>, Box<dyn std::error::Error>> {
    let consumer = LitePullConsumer::builder(&args.group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(addr)
                .serialize_type(SerializeType::from_env()),
        )
        .message_model(message_model(args))
        .consume_from_where(args.from.into())
        .subscribe(args.topic.name(), args.expr.as_deref().unwrap_or("*"))
        .start()?;
    let consumer = Arc::new(consumer);
    announce(args);
    let reporter = if args.stats {
        let c = consumer.clone();
        Some(crate::consume_stats::Reporter::start(move || c.stats())?)
    } else {
        None
    };
    let mut rest: Option<MessageExt> = None;
    while rest.is_none() && !out.done(args.count) {
        let slice = deadline.map_or(POLL_SLICE, |d| {
            d.saturating_duration_since(Instant::now()).min(POLL_SLICE)
        });
        if slice.is_zero() {
            break;
        }
        // Auto-commit: this poll commits what the previous ones returned, all printed.
        let batch = consumer.poll_timeout(slice)?;
        rest = print_batch(&mut out, batch, args.count, args.delay);
    }
    if let Some(m) = rest {
        // The commit below commits where polling got to; move the queue back first, so
        // that what was not printed stays with the group.
        let mq = m.message_queue();
        if let Err(e) = consumer.seek(&mq, m.queue_offset()) {
            // A commit now would skip messages nobody printed: leave as a killed process
            // would, and the group gets them again from the last commit.
            eprintln!(
                "rmq: cannot move {mq} back to offset {}: {e}; exiting without a commit",
                m.queue_offset()
            );
            let _ = out.out.flush();
            std::process::exit(1);
        }
    }
    // Every batch the polls returned is printed (one cut by the count was moved back
    // above): confirm and commit them, since shutdown commits only what a later poll or a
    // commit confirmed.
    drop(reporter);
    consumer.commit_sync()?;
    consumer.shutdown();
    Ok(out)
}

/// Prints a polled batch, one flushed line per message; returns the first message not
/// printed (the count was reached or stdout broke), if any.
fn print_batch<W: Write>(
    out: &mut Printer<W>,
    batch: Vec<MessageExt>,
    count: Option<u64>,
    delay: Option<Duration>,
) -> Option<MessageExt> {
    for m in batch {
        if out.done(count) {
            return Some(m);
        }
        out.print(&[render(&m, &m.message_queue())]);
        if out.broken.is_some() {
            return Some(m);
        }
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
    }
    None
}

/// A listener's rendered messages, and where the printer answers whether they are out.
struct Lines {
    lines: Vec<String>,
    printed: Sender<bool>,
}

/// The one writer of stdout.
struct Printer<W: Write> {
    out: W,
    printed: u64,
    /// The first write error (a closed pipe): printing stops there.
    broken: Option<std::io::Error>,
}

impl<W: Write> Printer<W> {
    fn new(out: W) -> Self {
        Printer {
            out,
            printed: 0,
            broken: None,
        }
    }

    /// Whether printing is over: the count is reached or stdout is broken.
    fn done(&self, count: Option<u64>) -> bool {
        self.broken.is_some() || count.is_some_and(|n| self.printed >= n)
    }

    /// Writes and flushes `lines`; whether they are out.
    fn print(&mut self, lines: &[String]) -> bool {
        if self.broken.is_some() {
            return false;
        }
        let written = lines
            .iter()
            .try_for_each(|l| writeln!(self.out, "{l}"))
            .and_then(|()| self.out.flush());
        match written {
            Ok(()) => {
                self.printed += lines.len() as u64;
                true
            }
            Err(e) => {
                self.broken = Some(e);
                false
            }
        }
    }

    /// Prints `first` and whatever other listeners have handed over by now with one
    /// flush, then tells each of them whether its lines are out.
    fn print_group(&mut self, first: Lines, more: &Receiver<Lines>) {
        let mut group = vec![first];
        group.extend(more.try_iter().take(PRINT_GROUP - 1));
        let all: Vec<String> = group.iter_mut().flat_map(|g| g.lines.drain(..)).collect();
        let out = self.print(&all);
        for g in group {
            // A listener that gave up waiting has nothing left to answer.
            let _ = g.printed.send(out);
        }
    }
}

/// What the listener shares with the main thread.
struct Sink {
    count: Option<u64>,
    delay: Option<Duration>,
    /// Messages taken for printing so far; never more than `count`.
    claimed: AtomicU64,
    lines: Sender<Lines>,
    /// Set right after the start; listeners may run before that.
    consumer: OnceLock<Weak<PushConsumer>>,
}

impl Sink {
    /// The listener: renders each message it may take, hands them to the printer and
    /// succeeds once they are printed; a message beyond the count, or lines that could
    /// not be printed, are held back (see the module docs).
    fn deliver(&self, msgs: &[MessageExt], mq: &MessageQueue) -> bool {
        let mut lines = Vec::with_capacity(msgs.len());
        for m in msgs {
            if !self.claim() {
                break;
            }
            lines.push(render(m, mq));
        }
        let taken = lines.len();
        if taken > 0 && !self.print(lines) {
            self.wait_until_released(mq);
            return false;
        }
        if let Some(d) = self.delay {
            std::thread::sleep(d * taken as u32);
        }
        if taken < msgs.len() {
            self.wait_until_released(mq);
            return false;
        }
        true
    }

    /// Hands `lines` to the printer and waits for them to be written and flushed.
    fn print(&self, lines: Vec<String>) -> bool {
        let (printed, answer) = bounded(1);
        // The receiver lives until the end of `run`, after the consumer is shut down.
        self.lines.send(Lines { lines, printed }).is_ok() && answer.recv() == Ok(true)
    }

    /// Takes one of the `count` slots; always succeeds without a count.
    fn claim(&self) -> bool {
        match self.count {
            None => {
                self.claimed.fetch_add(1, Ordering::Relaxed);
                true
            }
            Some(n) => self
                .claimed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                    (c < n).then_some(c + 1)
                })
                .is_ok(),
        }
    }

    /// Returns once the consumer no longer holds `mq`, which is from the start of its
    /// shutdown: a retry asked after that leaves the messages uncommitted in their queue.
    /// The count was reached (or stdout broke), so the main thread is shutting the
    /// consumer down, and its wait for running listeners ends when this one returns.
    fn wait_until_released(&self, mq: &MessageQueue) {
        loop {
            if let Some(weak) = self.consumer.get() {
                match weak.upgrade() {
                    None => return,
                    Some(c) if !c.assigned_queues().contains(mq) => return,
                    Some(_) => {}
                }
            }
            std::thread::sleep(RELEASE_POLL);
        }
    }
}

/// One message as a JSON line; the fields in this order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    msg_id: &'a str,
    /// The broker's id of the stored message (store host and commit log offset).
    offset_msg_id: &'a str,
    topic: &'a str,
    tags: Option<&'a str>,
    keys: Vec<&'a str>,
    queue: Queue<'a>,
    queue_offset: i64,
    reconsume_times: u32,
    born_timestamp: i64,
    store_timestamp: i64,
    properties: BTreeMap<&'a str, &'a str>,
    body: Cow<'a, str>,
    /// `base64` when the body is not UTF-8; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    body_encoding: Option<&'static str>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Queue<'a> {
    broker: &'a str,
    queue_id: i32,
}

pub(crate) fn render(m: &MessageExt, mq: &MessageQueue) -> String {
    let (body, body_encoding) = match std::str::from_utf8(m.body()) {
        Ok(text) => (Cow::Borrowed(text), None),
        Err(_) => (Cow::Owned(base64(m.body())), Some("base64")),
    };
    let line = Line {
        msg_id: m.msg_id(),
        offset_msg_id: m.offset_msg_id(),
        topic: m.topic(),
        tags: m.tags(),
        keys: m.keys().collect(),
        queue: Queue {
            broker: mq.broker_name(),
            queue_id: mq.queue_id(),
        },
        queue_offset: m.queue_offset(),
        reconsume_times: m.reconsume_times(),
        born_timestamp: epoch_millis(m.born_timestamp()),
        store_timestamp: epoch_millis(m.store_timestamp()),
        properties: m.message().properties().collect(),
        body,
        body_encoding,
    };
    // Strings, numbers and maps of strings always serialise.
    serde_json::to_string(&line).unwrap_or_default()
}

/// Milliseconds since the Unix epoch, as the JSON lines carry Java's timestamps.
pub(crate) fn epoch_millis(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        // A chunk of k bytes fills k + 1 sextets; the rest of the four are padding.
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want, "{input:?}");
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00, 0x01]), "//4AAQ==");
    }

    fn message(body: &[u8]) -> MessageExt {
        let mut m = MessageExt::default();
        m.set_stored(
            rocketmq_blocking::Message::new("T", body.to_vec())
                .with_tags("TagA")
                .with_keys(["k1", "k2"]),
            "",
            3,
            42,
            0,
        );
        m
    }

    #[test]
    fn a_line_carries_the_message_and_its_queue() {
        let mq = MessageQueue::new("T", "broker-a", 3);
        let v: serde_json::Value = serde_json::from_str(&render(&message(b"hi"), &mq)).unwrap();
        assert_eq!(v["topic"], "T");
        assert_eq!(v["tags"], "TagA");
        assert_eq!(v["keys"], serde_json::json!(["k1", "k2"]));
        assert_eq!(
            v["queue"],
            serde_json::json!({"broker": "broker-a", "queueId": 3})
        );
        assert_eq!(v["queueOffset"], 42);
        assert_eq!(v["reconsumeTimes"], 0);
        assert_eq!(v["properties"]["TAGS"], "TagA");
        assert_eq!(v["body"], "hi");
        assert!(v.get("bodyEncoding").is_none());
    }

    #[test]
    fn a_body_that_is_not_utf8_is_base64() {
        let mq = MessageQueue::new("T", "broker-a", 3);
        let v: serde_json::Value =
            serde_json::from_str(&render(&message(&[0xc3, 0x28]), &mq)).unwrap();
        assert_eq!(v["body"], "wyg=");
        assert_eq!(v["bodyEncoding"], "base64");
    }

    fn sink(count: Option<u64>) -> Sink {
        Sink {
            count,
            delay: None,
            claimed: AtomicU64::new(0),
            lines: unbounded().0,
            consumer: OnceLock::new(),
        }
    }

    #[test]
    fn claims_stop_at_the_count_even_across_threads() {
        let s = sink(Some(100));
        let taken = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        if s.claim() {
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(taken.into_inner(), 100);
        assert!(sink(None).claim());
    }

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_writer_that_fails_stops_the_printer() {
        let mut p = Printer::new(Vec::new());
        assert!(p.print(&strings(&["a"])));
        assert!(p.print(&strings(&["b", "c"])));
        assert_eq!((p.printed, p.out.as_slice()), (3, &b"a\nb\nc\n"[..]));
        assert!(!p.done(None) && p.done(Some(3)));
        let mut p = Printer::new(Closed);
        assert!(!p.print(&strings(&["a"])));
        assert_eq!(p.printed, 0);
        assert!(p.broken.is_some() && p.done(None));
    }

    /// A sink whose listener calls go to the returned receiver, on a consumer that is
    /// already gone (so a held-back message is released at once).
    fn sink_with_printer(count: Option<u64>) -> (Arc<Sink>, Receiver<Lines>) {
        let (lines, rx) = unbounded();
        let consumer = OnceLock::new();
        let _ = consumer.set(Weak::new());
        let s = Sink {
            count,
            delay: None,
            claimed: AtomicU64::new(0),
            lines,
            consumer,
        };
        (Arc::new(s), rx)
    }

    /// Calls the listener on another thread; its answer comes on the returned receiver.
    fn deliver_in_background(s: &Arc<Sink>, msgs: Vec<MessageExt>) -> Receiver<bool> {
        let (tx, rx) = bounded(1);
        let s = s.clone();
        std::thread::spawn(move || {
            let mq = MessageQueue::new("T", "broker-a", 3);
            let _ = tx.send(s.deliver(&msgs, &mq));
        });
        rx
    }

    #[test]
    fn a_listener_succeeds_only_once_its_lines_are_printed_and_flushed() {
        let (s, handed) = sink_with_printer(None);
        let answer = deliver_in_background(&s, vec![message(b"one"), message(b"two")]);
        let first = handed.recv_timeout(Duration::from_secs(10)).unwrap();
        // Nothing is printed yet, so the message must not be acknowledged yet: a kill now
        // would lose it from the output.
        assert!(answer.recv_timeout(Duration::from_millis(300)).is_err());
        let mut p = Printer::new(Vec::new());
        p.print_group(first, &handed);
        assert_eq!(answer.recv_timeout(Duration::from_secs(10)), Ok(true));
        assert_eq!(p.printed, 2);
        assert_eq!(String::from_utf8_lossy(&p.out).lines().count(), 2);
    }

    #[test]
    fn lines_that_cannot_be_printed_are_not_acknowledged() {
        let (s, handed) = sink_with_printer(None);
        let answer = deliver_in_background(&s, vec![message(b"one")]);
        let mut p = Printer::new(Closed);
        p.print_group(
            handed.recv_timeout(Duration::from_secs(10)).unwrap(),
            &handed,
        );
        assert_eq!(answer.recv_timeout(Duration::from_secs(10)), Ok(false));
        // A printer that is gone answers no one: the listener does not wait forever.
        let answer = deliver_in_background(&s, vec![message(b"two")]);
        drop(handed);
        assert_eq!(answer.recv_timeout(Duration::from_secs(10)), Ok(false));
    }

    #[test]
    fn the_printer_answers_every_listener_of_a_group() {
        let (s, handed) = sink_with_printer(Some(3));
        let answers: Vec<_> = (0..4)
            .map(|_| deliver_in_background(&s, vec![message(b"m")]))
            .collect();
        let mut p = Printer::new(Vec::new());
        while p.printed < 3 {
            let first = handed.recv_timeout(Duration::from_secs(10)).unwrap();
            p.print_group(first, &handed);
        }
        let mut got: Vec<bool> = answers
            .iter()
            .map(|a| a.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort();
        // The fourth is beyond the count: held back, never printed.
        assert_eq!(got, [false, true, true, true]);
        assert_eq!(p.printed, 3);
        assert!(handed.try_recv().is_err());
    }

    fn at(offset: i64) -> MessageExt {
        let mut m = MessageExt::default();
        m.set_stored(
            rocketmq_blocking::Message::new("T", format!("m{offset}").into_bytes()),
            "broker-a",
            1,
            offset,
            0,
        );
        m
    }

    #[test]
    fn a_lite_pull_batch_stops_at_the_count_and_names_the_first_message_not_printed() {
        let mut p = Printer::new(Vec::new());
        let batch = || (10..15).map(at).collect::<Vec<_>>();
        assert!(print_batch(&mut p, batch(), Some(7), None).is_none());
        let rest = print_batch(&mut p, batch(), Some(7), None).expect("the count came first");
        assert_eq!((rest.queue_offset(), p.printed), (12, 7));
        let text = String::from_utf8_lossy(&p.out).into_owned();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["queueOffset"], 11);
        assert_eq!(
            last["queue"],
            serde_json::json!({"broker": "broker-a", "queueId": 1})
        );

        let mut p = Printer::new(Closed);
        let rest = print_batch(&mut p, batch(), None, None).expect("stdout broke");
        assert_eq!((rest.queue_offset(), p.printed), (10, 0));
    }
}
