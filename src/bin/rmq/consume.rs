//! `rmq consume`: a push consumer that prints every message it receives.
//!
//! stdout gets one JSON line per message and a final `{"consumed":N}` line. The consume
//! threads only render lines; the main thread is the one writer of stdout, so lines never
//! interleave. With `--count N` exactly N messages are printed and acknowledged: a listener
//! that gets a message beyond the count holds it until shutdown has dropped its queue, so
//! the consumer discards the answer and the message stays unacknowledged for the group
//! (rather than being acknowledged unseen or sent to the retry topic).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use clap::{value_parser, ValueEnum};
use crossbeam_channel::{unbounded, Receiver, Sender};
use rocketmq_blocking::client::validators::check_topic;
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::{ConsumeFromWhere, MessageModel, MessageSelector};
use rocketmq_blocking::{MessageExt, MessageQueue, PushConsumer};

use crate::{namesrv, parse_seconds, push_consumer, CliResult};

/// How often a listener holding a message beyond `--count` checks whether its queue is gone.
const RELEASE_POLL: Duration = Duration::from_millis(20);

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Topic to consume.
    topic: String,
    /// Consumer group.
    #[arg(long)]
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
    /// Where a group without stored offsets starts.
    #[arg(long, value_enum, default_value_t = StartAt::Last)]
    from: StartAt,
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
    check_topic(&args.topic)?;
    let selector = match (&args.expr, &args.sql) {
        (_, Some(sql)) if sql.trim().is_empty() => return Err("--sql must not be blank".into()),
        (_, Some(sql)) => MessageSelector::by_sql(sql.as_str()),
        (Some(expr), None) => MessageSelector::by_tag(expr.as_str()),
        (None, None) => MessageSelector::by_tag("*"),
    };
    let addr = namesrv(namesrv_arg)?;
    let model = if args.broadcast {
        MessageModel::Broadcasting
    } else {
        MessageModel::Clustering
    };

    let (lines_tx, lines) = unbounded();
    let sink = Arc::new(Sink {
        count: args.count,
        claimed: AtomicU64::new(0),
        lines: lines_tx,
        consumer: OnceLock::new(),
    });
    let listener = {
        let sink = sink.clone();
        move |msgs: &[MessageExt], mq: &MessageQueue| sink.deliver(msgs, mq)
    };
    let consumer = push_consumer(
        &addr,
        &args.group,
        SerializeType::from_env(),
        args.orderly,
        listener,
    )
    .subscribe_with(&args.topic, selector)
    .message_model(model)
    .consume_from_where(args.from.into())
    .start()?;
    let consumer = Arc::new(consumer);
    let _ = sink.consumer.set(Arc::downgrade(&consumer));
    eprintln!(
        "rmq: consuming {} as {} ({}{}, new groups start from the {} offset)",
        args.topic,
        args.group,
        if args.broadcast {
            "broadcasting"
        } else {
            "clustering"
        },
        if args.orderly { ", orderly" } else { "" },
        if args.from == StartAt::First {
            "first"
        } else {
            "last"
        },
    );

    let deadline = args.timeout.map(|t| began + t);
    let mut out = Printer {
        out: std::io::stdout().lock(),
        printed: 0,
        broken: None,
    };
    while args.count.map_or(true, |n| out.printed < n) && out.broken.is_none() {
        match next_line(&lines, deadline) {
            Some(line) => out.print(&line),
            None => break, // the timeout
        }
    }
    consumer.shutdown();
    // Listeners that were running during the shutdown may have rendered lines since; their
    // messages were claimed, so they are printed too.
    while let Ok(line) = lines.try_recv() {
        if out.broken.is_some() {
            break;
        }
        out.print(&line);
    }
    if let Some(e) = out.broken {
        return Err(format!("cannot write to stdout: {e}").into());
    }
    writeln!(out.out, "{{\"consumed\":{}}}", out.printed)?;
    Ok(())
}

/// The next rendered line, or `None` once `deadline` passed (the sink holds a sender,
/// so the channel never disconnects while the consumer lives).
fn next_line(lines: &Receiver<String>, deadline: Option<Instant>) -> Option<String> {
    match deadline {
        Some(d) => lines.recv_deadline(d).ok(),
        // Without a deadline this waits until the process is killed.
        None => lines.recv().ok(),
    }
}

/// The one writer of stdout.
struct Printer<W: Write> {
    out: W,
    printed: u64,
    /// The first write error (a closed pipe): printing stops there.
    broken: Option<std::io::Error>,
}

impl<W: Write> Printer<W> {
    fn print(&mut self, line: &str) {
        match writeln!(self.out, "{line}").and_then(|()| self.out.flush()) {
            Ok(()) => self.printed += 1,
            Err(e) => self.broken = Some(e),
        }
    }
}

/// What the listener shares with the main thread.
struct Sink {
    count: Option<u64>,
    /// Messages taken for printing so far; never more than `count`.
    claimed: AtomicU64,
    lines: Sender<String>,
    /// Set right after the start; listeners may run before that.
    consumer: OnceLock<Weak<PushConsumer>>,
}

impl Sink {
    /// The listener: renders and hands over each message it may take; a message beyond
    /// the count is held back (see the module docs).
    fn deliver(&self, msgs: &[MessageExt], mq: &MessageQueue) -> bool {
        for m in msgs {
            if !self.claim() {
                self.wait_until_released(mq);
                return false;
            }
            // The receiver lives until the end of `run`, after the consumer is shut down.
            let _ = self.lines.send(render(m, mq));
        }
        true
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

    /// Returns once the consumer no longer holds `mq`: after that the consumer ignores
    /// what the listener answers. The count was reached, so the main thread is shutting
    /// the consumer down, which drops every queue before it waits for the listeners.
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

fn render(m: &MessageExt, mq: &MessageQueue) -> String {
    let (body, body_encoding) = match std::str::from_utf8(m.body()) {
        Ok(text) => (Cow::Borrowed(text), None),
        Err(_) => (Cow::Owned(base64(m.body())), Some("base64")),
    };
    let line = Line {
        msg_id: m.msg_id(),
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
fn epoch_millis(t: std::time::SystemTime) -> i64 {
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

    #[test]
    fn a_writer_that_fails_stops_the_printer() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut p = Printer {
            out: Vec::new(),
            printed: 0,
            broken: None,
        };
        p.print("a");
        p.print("b");
        assert_eq!((p.printed, p.out.as_slice()), (2, &b"a\nb\n"[..]));
        let mut p = Printer {
            out: Closed,
            printed: 0,
            broken: None,
        };
        p.print("a");
        assert_eq!(p.printed, 0);
        assert!(p.broken.is_some());
    }
}
