//! `rmq send`: sends one message (or `--count` copies) and prints what the broker answered.
//!
//! stdout gets one JSON line per acknowledged message (oneway sends have no
//! acknowledgement, so they get a `{"queued":true,...}` line) and a final summary line.
//! Everything is checked before the producer starts, so bad input sends nothing.
//!
//! With `--transaction`, each message is sent in a transaction by a transactional
//! producer: `commit` and `rollback` end it in the local transaction, `check` leaves it
//! unknown and commits when the broker asks (a broker checks every
//! `transactionCheckInterval`, 30 s on 5.x and 60 s on 4.9 by default, so `check` waits up
//! to `--check-timeout`). Each line then has the `localTransactionState`, and each
//! check a `{"checked":...}` line.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, RecvTimeoutError};
use rocketmq_blocking::client::validators::{check_body, check_send_topic};
use rocketmq_blocking::message::uniq;
use rocketmq_blocking::protocol::SerializeType;
use rocketmq_blocking::remoting::Semaphore;
use rocketmq_blocking::ProducerOptions;
use rocketmq_blocking::{
    LocalTransactionState, Message, MessageExt, Producer, SendResult, SendStatus,
    TransactionProducer, TransactionSendResult,
};

use crate::{namesrv, parse_seconds, start_producer, CliResult, Mode};

/// Async sends allowed in flight at once.
const ASYNC_WINDOW: usize = 256;

#[derive(clap::Args)]
pub(crate) struct SendArgs {
    #[command(flatten)]
    topic: crate::TopicArg,
    /// Message tag (`TAGS`; mqadmin sendMessage's `-c`).
    #[arg(short = 'c', long)]
    tag: Option<String>,
    /// Message key (`KEYS`); repeat for several.
    #[arg(short = 'k', long = "key", value_name = "KEY")]
    pub(crate) keys: Vec<String>,
    /// User property; repeat for several.
    #[arg(long = "prop", value_name = "K=V", value_parser = parse_prop)]
    props: Vec<(String, String)>,
    /// Message body text (mqadmin sendMessage's `-p`).
    #[arg(short = 'p', long, conflicts_with = "body_file")]
    body: Option<String>,
    /// Read the body from this file (bytes as they are).
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,
    /// How many copies of the message to send.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) count: u64,
    /// Send mode.
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    pub(crate) mode: Mode,
    /// Producer group.
    #[arg(long, default_value = "rmq_cli_producer")]
    pub(crate) group: String,
    /// Send in a transaction (sync sends only) ended by the local transaction (`commit`,
    /// `rollback`) or left unknown and committed by the broker's check (`check`).
    #[arg(long, value_enum, value_name = "END", conflicts_with = "mode")]
    pub(crate) transaction: Option<TransactionEnd>,
    /// With `--transaction check`: how long to wait for the broker's checks.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds, default_value = "120")]
    check_timeout: Duration,
}

/// How `--transaction` ends each transaction.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub(crate) enum TransactionEnd {
    /// The local transaction commits.
    Commit,
    /// The local transaction rolls back.
    Rollback,
    /// The local transaction says unknown; the checker commits when the broker asks.
    Check,
}

/// `k=v` → `(k, v)`; the value may contain `=`, the key may not be empty.
fn parse_prop(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected K=V with a non-empty key, got {s:?}")),
    }
}

/// The message every send uses, built from the arguments; any bad input is an error here.
pub(crate) fn build_message(args: &SendArgs) -> Result<Message, String> {
    check_send_topic(args.topic.name()).map_err(|e| e.to_string())?;
    let body = match (&args.body, &args.body_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => std::fs::read(path)
            .map_err(|e| format!("cannot read --body-file {}: {e}", path.display()))?,
        (None, None) => return Err("no message body: pass --body TEXT or --body-file FILE".into()),
    };
    check_body(body.len(), ProducerOptions::default().max_message_size)
        .map_err(|e| e.to_string())?;
    let mut msg = Message::new(args.topic.name(), body);
    if let Some(tag) = &args.tag {
        if tag.trim().is_empty() {
            return Err("--tag must not be blank".into());
        }
        msg.set_tags(tag.as_str());
    }
    // Keys travel joined by spaces, so a key with a space would come back as two.
    if let Some(bad) = args.keys.iter().find(|k| k.is_empty() || k.contains(' ')) {
        return Err(format!(
            "--key {bad:?} must be non-empty and without spaces"
        ));
    }
    if !args.keys.is_empty() {
        msg.set_keys(&args.keys);
    }
    for (k, v) in &args.props {
        msg.put_user_property(k.as_str(), v.as_str())
            .map_err(|e| format!("--prop {k}={v}: {e}"))?;
    }
    Ok(msg)
}

pub(crate) fn run(namesrv_arg: &Option<String>, args: SendArgs) -> CliResult {
    let msg = build_message(&args)?;
    let addr = namesrv(namesrv_arg)?;
    if let Some(end) = args.transaction {
        return send_in_transactions(&addr, &args, &msg, end);
    }
    let producer = start_producer(
        crate::client_options(&addr, SerializeType::from_env()),
        &args.group,
        |b| b,
    )?;
    let started = Instant::now();
    let (sent, failed) = match args.mode {
        Mode::Sync => send_sync(&producer, &msg, args.count),
        Mode::Async => send_async(&producer, &msg, args.count),
        Mode::Oneway => send_oneway(&producer, &msg, args.count),
    };
    let elapsed = started.elapsed();
    // Shutting down unregisters from the brokers with a sync request on the same
    // connections, so oneway frames queued before it are written first.
    producer.shutdown();
    // Numbers only, so no escaping to worry about.
    println!(
        "{{\"sent\":{sent},\"failed\":{failed},\"elapsedMs\":{}}}",
        elapsed.as_millis()
    );
    if failed > 0 {
        return Err(format!("{failed} of {} sends failed", args.count).into());
    }
    Ok(())
}

/// `--transaction`: `count` transactions of a transactional producer, then (for
/// `check`) the wait for the broker to ask about each.
fn send_in_transactions(
    addr: &str,
    args: &SendArgs,
    msg: &Message,
    end: TransactionEnd,
) -> CliResult {
    let local = match end {
        TransactionEnd::Commit => LocalTransactionState::CommitMessage,
        TransactionEnd::Rollback => LocalTransactionState::RollbackMessage,
        TransactionEnd::Check => LocalTransactionState::Unknown,
    };
    // The checker commits (for `commit` and `rollback` a check comes only when the
    // END_TRANSACTION was lost: answer what the local transaction said) and reports
    // each check here, to be printed by this thread.
    let (checked_tx, checked_rx) = unbounded::<String>();
    let answer = if end == TransactionEnd::Check {
        LocalTransactionState::CommitMessage
    } else {
        local
    };
    let listener = (
        move |_: &Message, _: &dyn std::any::Any| local,
        move |m: &MessageExt| {
            let _ = checked_tx.send(m.msg_id().to_string());
            answer
        },
    );
    let producer = TransactionProducer::builder(&args.group, listener)
        .client_options(crate::client_options(addr, SerializeType::from_env()))
        .start()?;
    let started = Instant::now();
    let (mut sent, mut failed) = (0u64, 0u64);
    let mut open = std::collections::HashSet::new();
    for i in 1..=args.count {
        match producer.send_in_transaction(msg, &()) {
            Ok(r) => {
                print_transaction_ack(&r);
                if r.local_transaction_state() == LocalTransactionState::Unknown {
                    open.insert(r.send_result().msg_id().to_string());
                }
                sent += 1;
            }
            Err(e) => {
                eprintln!("rmq: transaction {i}/{} failed: {e}", args.count);
                failed += 1;
            }
        }
    }
    let deadline = Instant::now() + args.check_timeout;
    while !open.is_empty() {
        match checked_rx.recv_deadline(deadline) {
            Ok(id) => {
                if open.remove(&id) {
                    let line = serde_json::json!({"checked": true, "msgId": id, "state": state_name(answer)});
                    println!("{line}");
                }
            }
            Err(_) => {
                eprintln!(
                    "rmq: the broker did not check {} transactions within {:?}",
                    open.len(),
                    args.check_timeout
                );
                failed += open.len() as u64;
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    // END_TRANSACTION is oneway: shutting down unregisters with a sync request on the
    // same connection, so the ends queued before it are written first.
    producer.shutdown();
    println!(
        "{{\"sent\":{sent},\"failed\":{failed},\"elapsedMs\":{}}}",
        elapsed.as_millis()
    );
    if failed > 0 {
        return Err(format!("{failed} of {} transactions failed", args.count).into());
    }
    Ok(())
}

/// A transaction's line: the acknowledgement and how the local transaction ended.
fn print_transaction_ack(r: &TransactionSendResult) {
    let s = r.send_result();
    let line = serde_json::json!({
        "status": status_name(s.send_status()),
        "msgId": s.msg_id(),
        "offsetMsgId": s.offset_msg_id(),
        "broker": s.message_queue().broker_name(),
        "queue": s.message_queue().queue_id(),
        "queueOffset": s.queue_offset(),
        "localTransactionState": state_name(r.local_transaction_state()),
    });
    println!("{line}");
}

/// Java's `SendStatus` constant, as the JSON lines print it (the library's types have no
/// serde impls).
fn status_name(s: SendStatus) -> &'static str {
    match s {
        SendStatus::Ok => "SEND_OK",
        SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
        SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
        SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
    }
}

/// Java's `LocalTransactionState` constant (`UNKNOW` is Java's spelling).
fn state_name(s: LocalTransactionState) -> &'static str {
    match s {
        LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
        LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
        LocalTransactionState::Unknown => "UNKNOW",
    }
}

/// One acknowledged message; the JSON line is this struct, in this field order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Ack<'a> {
    status: &'static str,
    msg_id: &'a str,
    offset_msg_id: &'a str,
    broker: &'a str,
    queue: i32,
    queue_offset: i64,
}

fn print_ack(r: &SendResult) {
    let ack = Ack {
        status: status_name(r.send_status()),
        msg_id: r.msg_id(),
        offset_msg_id: r.offset_msg_id(),
        broker: r.message_queue().broker_name(),
        queue: r.message_queue().queue_id(),
        queue_offset: r.queue_offset(),
    };
    // Serialising strings and numbers cannot fail.
    if let Ok(line) = serde_json::to_string(&ack) {
        println!("{line}");
    }
}

/// Returns (sent, failed).
fn send_sync(producer: &Producer, msg: &Message, count: u64) -> (u64, u64) {
    let (mut sent, mut failed) = (0, 0);
    for i in 1..=count {
        match producer.send(msg) {
            Ok(r) => {
                print_ack(&r);
                sent += 1;
            }
            Err(e) => {
                eprintln!("rmq: send {i}/{count} failed: {e}");
                failed += 1;
            }
        }
    }
    (sent, failed)
}

fn send_async(producer: &Producer, msg: &Message, count: u64) -> (u64, u64) {
    let window = Semaphore::new(ASYNC_WINDOW);
    let timeout = producer.options().send_timeout;
    // Callbacks run on the producer's pool; results come back here to be printed in
    // one place.
    let (tx, rx) = unbounded();
    let (mut sent, mut failed, mut pending) = (0u64, 0u64, 0u64);
    for _ in 0..count {
        while let Ok(r) = rx.try_recv() {
            tally(r, &mut sent, &mut failed);
            pending -= 1;
        }
        // Every send completes within its timeout, so a slot frees up by then.
        let Some(permit) = window.acquire_until(Instant::now() + timeout * 2) else {
            eprintln!("rmq: no async send completed within {timeout:?}");
            failed += 1;
            continue;
        };
        let tx = tx.clone();
        let queued = producer.send_async(msg.clone(), move |r| {
            let _ = tx.send(r);
            drop(permit);
        });
        match queued {
            Ok(()) => pending += 1,
            Err(e) => {
                eprintln!("rmq: async send failed: {e}");
                failed += 1;
            }
        }
    }
    let deadline = Instant::now() + timeout + Duration::from_secs(5);
    while pending > 0 {
        match rx.recv_deadline(deadline) {
            Ok(r) => {
                tally(r, &mut sent, &mut failed);
                pending -= 1;
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                eprintln!("rmq: {pending} async sends got no result in time");
                failed += pending;
                break;
            }
        }
    }
    (sent, failed)
}

fn tally(r: rocketmq_blocking::Result<SendResult>, sent: &mut u64, failed: &mut u64) {
    match r {
        Ok(r) => {
            print_ack(&r);
            *sent += 1;
        }
        Err(e) => {
            eprintln!("rmq: async send failed: {e}");
            *failed += 1;
        }
    }
}

fn send_oneway(producer: &Producer, msg: &Message, count: u64) -> (u64, u64) {
    let (mut sent, mut failed) = (0, 0);
    for i in 1..=count {
        // Setting the id here (instead of letting the producer do it) is what lets us
        // print it: a oneway send returns nothing.
        let mut m = msg.clone();
        let id = uniq::set_uniq_id(&mut m).to_string();
        match producer.send_oneway(&m) {
            Ok(()) => {
                let line = serde_json::json!({"queued": true, "msgId": id, "topic": m.topic()});
                println!("{line}");
                sent += 1;
            }
            Err(e) => {
                eprintln!("rmq: send {i}/{count} failed: {e}");
                failed += 1;
            }
        }
    }
    (sent, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        args: SendArgs,
    }

    fn args(argv: &[&str]) -> SendArgs {
        let mut v = vec!["send"];
        v.extend_from_slice(argv);
        T::try_parse_from(v).unwrap().args
    }

    #[test]
    fn props_split_on_the_first_equals_sign() {
        assert_eq!(parse_prop("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_prop("a="), Ok(("a".into(), "".into())));
        assert!(parse_prop("=v").is_err());
        assert!(parse_prop("novalue").is_err());
    }

    #[test]
    fn a_full_message_is_built_from_the_arguments() {
        let a = args(&[
            "Orders", "--tag", "TagA", "--key", "k1", "--key", "k2", "--prop", "p=1", "--body",
            "hi",
        ]);
        let m = build_message(&a).unwrap();
        assert_eq!(m.topic(), "Orders");
        assert_eq!(m.body(), b"hi");
        assert_eq!(m.tags(), Some("TagA"));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["k1", "k2"]);
        assert_eq!(m.property("p"), Some("1"));
    }

    #[test]
    fn bad_input_is_rejected_before_sending() {
        for argv in [
            &["bad topic", "--body", "x"][..],
            &["T"],                                    // no body
            &["T", "--body", ""],                      // empty body
            &["T", "--body", "x", "--prop", "p="],     // blank value
            &["T", "--body", "x", "--prop", "TAGS=a"], // reserved name
            &["T", "--body", "x", "--key", "a b"],
            &["T", "--body-file", "/nonexistent/rmq-body"],
        ] {
            assert!(build_message(&args(argv)).is_err(), "{argv:?}");
        }
    }
}
