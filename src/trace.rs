//! Message trace (Java `enableMsgTrace`, `AsyncTraceDispatcher`, `TraceDataEncoder`).
//!
//! A producer or push consumer built with tracing on records, for every message it sends
//! or consumes, a trace record in Java's text format: `Pub` after a send, `SubBefore` and
//! `SubAfter` around a listener call. Records go into a bounded queue and one thread per
//! traced client (`rmq-trace`) batches them (up to 100 records or 500 ms, at most 128,000
//! bytes a message) and sends them asynchronously to the trace topic
//! (`RMQ_SYS_TRACE_TOPIC` unless another is given), keyed by message id and keys, so that
//! `mqadmin queryMsgTraceById` and the dashboard read them as they read Java's.
//!
//! Tracing never blocks or fails the traced call: a full queue drops the record and counts
//! it ([`TraceDispatcher::dropped`]); a failed trace send is logged and counted.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use log::{debug, warn};
use parking_lot::Mutex;

use crate::error::Result;
use crate::message::{property, Message, MessageExt};
use crate::util::worker::{self, Worker};

/// What the dispatcher sends its trace messages with: the traced client's inner producer.
/// `producer` implements it (and starts dispatchers, `producer::start_trace`), so this
/// module sits below the clients it traces and imports none of them.
pub(crate) trait TraceSender: Send + 'static {
    /// Sends `msg` and waits for the broker's answer.
    fn send_sync(&self, msg: &Message) -> Result<()>;
    /// Queues `msg`; `done` runs once with the outcome, unless this returns `Err`.
    fn send_async(&self, msg: Message, done: Box<dyn FnOnce(Result<()>) + Send>) -> Result<()>;
    /// Stops the sender; called once, after the last batch.
    fn shutdown(&self);
}

/// The default trace topic (Java `TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// Records waiting to be sent at most (Java `queueSize`).
const QUEUE_SIZE: usize = 2048;
/// Records per trace message at most (Java `batchSize`).
const BATCH_SIZE: usize = 100;
/// Bytes of a trace message at most (Java `maxMsgSize`).
const MAX_MSG_SIZE: usize = 128_000;
/// How long a record may wait for its batch to fill (Java `waitTimeThresholdMil`).
const FLUSH_INTERVAL: Duration = Duration::from_millis(500);
const CONTENT: char = '\u{1}';
const FIELD: char = '\u{2}';

/// Java `TraceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceType {
    Pub,
    SubBefore,
    SubAfter,
    /// A transaction's end as the producer told the broker (Java `EndTransaction`).
    EndTransaction,
}

/// What a trace record says of one message (Java `TraceBean` and `TraceContext`).
#[derive(Debug, Clone)]
pub(crate) struct TraceRecord {
    pub(crate) kind: TraceType,
    /// ms since the epoch: the send's or the listener call's start.
    pub(crate) timestamp: i64,
    pub(crate) region_id: String,
    /// The producer or consumer group, without namespace.
    pub(crate) group: String,
    pub(crate) topic: String,
    pub(crate) msg_id: String,
    pub(crate) offset_msg_id: String,
    pub(crate) tags: String,
    /// Space-separated, as in `KEYS`.
    pub(crate) keys: String,
    pub(crate) store_host: String,
    pub(crate) body_len: usize,
    pub(crate) cost_ms: i64,
    /// Java `MessageType` ordinal: 0 normal, 1 transaction half, 3 delayed.
    pub(crate) msg_type: u8,
    pub(crate) success: bool,
    /// The id that ties a `SubBefore` to its `SubAfter`.
    pub(crate) request_id: String,
    pub(crate) retry_times: u32,
    /// Java `ConsumeReturnType` ordinal: 0 success, 1 time out, 2 exception, 4 failed.
    pub(crate) context_code: u8,
    /// EndTransaction: the transaction's id, the state sent (Java `LocalTransactionState`
    /// name) and whether it answered a broker's check.
    pub(crate) transaction_id: String,
    pub(crate) transaction_state: &'static str,
    pub(crate) from_transaction_check: bool,
}

impl TraceRecord {
    /// A record of `kind` for the message with these properties.
    pub(crate) fn new(kind: TraceType, group: &str, topic: &str, msg: &Message) -> TraceRecord {
        TraceRecord {
            kind,
            timestamp: crate::util::now_millis(),
            region_id: msg
                .property(property::MSG_REGION)
                .unwrap_or("DefaultRegion")
                .to_string(),
            group: group.to_string(),
            topic: topic.to_string(),
            msg_id: String::new(),
            offset_msg_id: String::new(),
            tags: msg.tags().unwrap_or_default().to_string(),
            keys: msg.property(property::KEYS).unwrap_or_default().to_string(),
            store_host: String::new(),
            body_len: msg.body().len(),
            cost_ms: 0,
            msg_type: if msg.delay_time_level().is_some() {
                3
            } else {
                0
            },
            success: true,
            request_id: String::new(),
            retry_times: 0,
            context_code: 0,
            transaction_id: String::new(),
            transaction_state: "",
            from_transaction_check: false,
        }
    }

    /// The EndTransaction record of the half message `msg` (its id `msg_id`) whose end,
    /// `state`, the producer `group` sent to the broker at `broker_addr` (Java
    /// `EndTransactionTraceHookImpl`; message type `Trans_msg_Commit` whatever the state,
    /// as there).
    pub(crate) fn end_transaction(
        group: &str,
        msg: &Message,
        msg_id: &str,
        broker_addr: &str,
        state: &'static str,
        from_check: bool,
    ) -> TraceRecord {
        let mut r = TraceRecord::new(TraceType::EndTransaction, group, msg.topic(), msg);
        r.msg_id = msg_id.to_string();
        r.store_host = broker_addr.to_string();
        r.msg_type = 2;
        r.transaction_id = msg
            .property(property::UNIQ_KEY)
            .unwrap_or(msg_id)
            .to_string();
        r.transaction_state = state;
        r.from_transaction_check = from_check;
        r
    }

    /// Appends the record in Java's format (`TraceDataEncoder.encoderFromContextBean`).
    fn encode_into(&self, out: &mut String) {
        use std::fmt::Write;
        let c = CONTENT;
        // Writing to a String cannot fail.
        let _ = match self.kind {
            TraceType::Pub => write!(
                out,
                "Pub{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{FIELD}",
                self.timestamp,
                self.region_id,
                self.group,
                self.topic,
                self.msg_id,
                self.tags,
                self.keys,
                self.store_host,
                self.body_len,
                self.cost_ms,
                self.msg_type,
                self.offset_msg_id,
                self.success
            ),
            TraceType::SubBefore => write!(
                out,
                "SubBefore{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{FIELD}",
                self.timestamp,
                self.region_id,
                self.group,
                self.request_id,
                self.msg_id,
                self.retry_times,
                self.keys
            ),
            TraceType::SubAfter => write!(
                out,
                "SubAfter{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{FIELD}",
                self.request_id,
                self.msg_id,
                self.cost_ms,
                self.success,
                self.keys,
                self.context_code,
                self.timestamp,
                self.group
            ),
            TraceType::EndTransaction => write!(
                out,
                "EndTransaction{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{c}{}{FIELD}",
                self.timestamp,
                self.region_id,
                self.group,
                self.topic,
                self.msg_id,
                self.tags,
                self.keys,
                self.store_host,
                self.msg_type,
                self.transaction_id,
                self.transaction_state,
                self.from_transaction_check
            ),
        };
    }

    /// The keys the trace message is indexed by: the message id and the message's keys.
    fn index_keys(&self, into: &mut BTreeSet<String>) {
        if !self.msg_id.is_empty() {
            into.insert(self.msg_id.clone());
        }
        into.extend(
            self.keys
                .split(property::KEY_SEPARATOR)
                .filter(|k| !k.is_empty())
                .map(str::to_string),
        );
    }
}

/// Records `SubBefore` for a listener call (or a poll) on `msgs` of consumer `group`
/// (without namespace; Java `ConsumeMessageTraceHookImpl.consumeMessageBefore`); returns
/// the request id that ties them to their `SubAfter`.
pub(crate) fn consume_before(trace: &TraceDispatcher, group: &str, msgs: &[MessageExt]) -> String {
    let request_id = crate::message::uniq::create_uniq_id();
    for m in msgs {
        let mut r = TraceRecord::new(TraceType::SubBefore, group, m.topic(), m.message());
        r.msg_id = m.msg_id().to_string();
        r.request_id = request_id.clone();
        r.retry_times = m.reconsume_times();
        trace.record(r);
    }
    request_id
}

/// Records `SubAfter` for the call `consume_before` started `began`: the cost is shared by
/// the batch's messages, as Java reports it. `panicked` tells an exception from a failure
/// (Java `ConsumeReturnType`: SUCCESS 0, EXCEPTION 2, FAILED 4).
pub(crate) fn consume_after(
    trace: &TraceDispatcher,
    group: &str,
    request_id: &str,
    msgs: &[MessageExt],
    began: Instant,
    success: bool,
    panicked: bool,
) {
    let cost = began.elapsed().as_millis() as i64 / msgs.len().max(1) as i64;
    let code = match (success, panicked) {
        (true, _) => 0,
        (false, true) => 2,
        (false, false) => 4,
    };
    for m in msgs {
        let mut r = TraceRecord::new(TraceType::SubAfter, group, m.topic(), m.message());
        r.msg_id = m.msg_id().to_string();
        r.request_id = request_id.to_string();
        r.cost_ms = cost;
        r.success = success;
        r.context_code = code;
        trace.record(r);
    }
}

/// What a traced client's trace did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceStats {
    /// Trace messages the broker stored (each holds up to 100 records).
    pub sent: u64,
    /// Trace messages that could not be sent (logged).
    pub failed: u64,
    /// Records dropped because the queue (2,048 records) was full.
    pub dropped: u64,
}

/// One traced client's queue of records and the thread that sends them.
pub(crate) struct TraceDispatcher {
    tx: Mutex<Option<Sender<TraceRecord>>>,
    dropped: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    worker: Mutex<Option<Worker>>,
    topic: String,
}

impl std::fmt::Debug for TraceDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDispatcher")
            .field("topic", &self.topic)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl TraceDispatcher {
    /// Starts the dispatcher: `sender` (started, of the traced client's instance) sends
    /// the trace messages to `topic`.
    pub(crate) fn start(sender: Box<dyn TraceSender>, topic: String) -> Result<TraceDispatcher> {
        let (tx, rx) = bounded(QUEUE_SIZE);
        let dropped = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (t, s, f) = (topic.clone(), sent.clone(), failed.clone());
        let worker = worker::spawn("rmq-trace", move || run(rx, &*sender, t, s, f))
            .map_err(|e| crate::Error::io("starting the trace thread", e))?;
        Ok(TraceDispatcher {
            tx: Mutex::new(Some(tx)),
            dropped,
            sent,
            failed,
            worker: Mutex::new(Some(worker)),
            topic,
        })
    }

    /// Queues a record; never blocks: a full queue drops it (counted).
    pub(crate) fn record(&self, r: TraceRecord) {
        if r.topic == self.topic {
            return; // the trace of a trace message would trace itself
        }
        let tx = self.tx.lock();
        let Some(tx) = tx.as_ref() else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(r) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records dropped because the queue was full.
    fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// What the trace did so far.
    pub(crate) fn stats(&self) -> TraceStats {
        TraceStats {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped(),
        }
    }

    /// Sends what is queued (waiting for it up to `deadline`) and stops the thread.
    pub(crate) fn shutdown_until(&self, deadline: Instant) {
        // Closing the channel makes the thread flush what is left and return.
        self.tx.lock().take();
        let worker = self.worker.lock().take();
        if let Some(w) = worker {
            w.join_until(deadline, "trace dispatcher");
        }
    }
}

/// The trace thread: batches records and sends them until the channel closes.
fn run(
    rx: Receiver<TraceRecord>,
    producer: &dyn TraceSender,
    topic: String,
    sent: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let mut batch: Vec<TraceRecord> = Vec::with_capacity(BATCH_SIZE);
    let mut first_at = Instant::now();
    loop {
        let wait = if batch.is_empty() {
            FLUSH_INTERVAL
        } else {
            FLUSH_INTERVAL.saturating_sub(first_at.elapsed())
        };
        match rx.recv_timeout(wait) {
            Ok(r) => {
                if batch.is_empty() {
                    first_at = Instant::now();
                }
                batch.push(r);
                if batch.len() < BATCH_SIZE {
                    continue;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                flush(producer, &topic, &mut batch, &sent, &failed, true);
                producer.shutdown();
                return;
            }
        }
        flush(producer, &topic, &mut batch, &sent, &failed, false);
    }
}

/// Sends `batch` as trace messages of at most `MAX_MSG_SIZE` bytes; sync at the end, so
/// that shutdown returns after the last of them is stored.
fn flush(
    producer: &dyn TraceSender,
    topic: &str,
    batch: &mut Vec<TraceRecord>,
    sent: &Arc<AtomicU64>,
    failed: &Arc<AtomicU64>,
    last: bool,
) {
    let mut data = String::new();
    let mut keys = BTreeSet::new();
    for r in batch.drain(..) {
        let before = data.len();
        r.encode_into(&mut data);
        if data.len() > MAX_MSG_SIZE && before > 0 {
            let rest = data.split_off(before);
            send(
                producer,
                topic,
                std::mem::take(&mut data),
                &keys,
                sent,
                failed,
                last,
            );
            keys.clear();
            data = rest;
        }
        r.index_keys(&mut keys);
    }
    if !data.is_empty() {
        send(producer, topic, data, &keys, sent, failed, last);
    }
}

fn send(
    producer: &dyn TraceSender,
    topic: &str,
    data: String,
    keys: &BTreeSet<String>,
    sent: &Arc<AtomicU64>,
    failed: &Arc<AtomicU64>,
    sync: bool,
) {
    let mut msg = Message::new(topic, data.into_bytes());
    msg.set_keys(keys);
    if sync {
        match producer.send_sync(&msg) {
            Ok(_) => {
                sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                failed.fetch_add(1, Ordering::Relaxed);
                warn!("trace data to {topic} not sent: {e}");
            }
        }
        return;
    }
    let (s, f) = (sent.clone(), failed.clone());
    let done = Box::new(move |r: Result<()>| match r {
        Ok(()) => {
            s.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            f.fetch_add(1, Ordering::Relaxed);
            debug!("trace data not sent: {e}");
        }
    });
    if let Err(e) = producer.send_async(msg, done) {
        failed.fetch_add(1, Ordering::Relaxed);
        debug!("trace data not queued: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_records_without_blocking() {
        // No thread drains this one: the queue fills at 2,048 and the rest are dropped.
        let (tx, _rx) = bounded(QUEUE_SIZE);
        let d = TraceDispatcher {
            tx: Mutex::new(Some(tx)),
            dropped: Arc::default(),
            sent: Arc::default(),
            failed: Arc::default(),
            worker: Mutex::new(None),
            topic: RMQ_SYS_TRACE_TOPIC.into(),
        };
        let started = Instant::now();
        for _ in 0..3000 {
            d.record(record(TraceType::Pub));
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(d.stats().dropped, 3000 - QUEUE_SIZE as u64);
        // Records of the trace topic itself are not traced at all.
        let mut own = record(TraceType::Pub);
        own.topic = RMQ_SYS_TRACE_TOPIC.into();
        d.record(own);
        assert_eq!(d.stats().dropped, 3000 - QUEUE_SIZE as u64);
    }

    fn record(kind: TraceType) -> TraceRecord {
        let msg = Message::new("T", "body")
            .with_tags("TagA")
            .with_keys(["k1", "k2"]);
        let mut r = TraceRecord::new(kind, "G", "T", &msg);
        r.timestamp = 1_700_000_000_000;
        r.msg_id = "ID1".into();
        r.offset_msg_id = "OFF1".into();
        r.store_host = "127.0.0.1:10911".into();
        r.cost_ms = 7;
        r.request_id = "R1".into();
        r.retry_times = 2;
        r
    }

    #[test]
    fn records_are_encoded_as_java_encodes_them() {
        let mut s = String::new();
        record(TraceType::Pub).encode_into(&mut s);
        assert_eq!(
            s,
            "Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}G\u{1}T\u{1}ID1\u{1}TagA\u{1}k1 k2\u{1}\
             127.0.0.1:10911\u{1}4\u{1}7\u{1}0\u{1}OFF1\u{1}true\u{2}"
        );
        let mut s = String::new();
        record(TraceType::SubBefore).encode_into(&mut s);
        assert_eq!(
            s,
            "SubBefore\u{1}1700000000000\u{1}DefaultRegion\u{1}G\u{1}R1\u{1}ID1\u{1}2\u{1}k1 k2\u{2}"
        );
        let mut s = String::new();
        record(TraceType::SubAfter).encode_into(&mut s);
        assert_eq!(
            s,
            "SubAfter\u{1}R1\u{1}ID1\u{1}7\u{1}true\u{1}k1 k2\u{1}0\u{1}1700000000000\u{1}G\u{2}"
        );
        // Java `TraceDataEncoder`'s EndTransaction: 13 fields, the state by its Java name.
        let mut msg = Message::new("T", "body")
            .with_tags("TagA")
            .with_keys(["k1"]);
        msg.put_property(property::UNIQ_KEY, "UNIQ1");
        let mut end =
            TraceRecord::end_transaction("G", &msg, "UNIQ1", "127.0.0.1:10911", "UNKNOW", true);
        end.timestamp = 1_700_000_000_000;
        let mut s = String::new();
        end.encode_into(&mut s);
        assert_eq!(
            s,
            "EndTransaction\u{1}1700000000000\u{1}DefaultRegion\u{1}G\u{1}T\u{1}UNIQ1\u{1}TagA\u{1}\
             k1\u{1}127.0.0.1:10911\u{1}2\u{1}UNIQ1\u{1}UNKNOW\u{1}true\u{2}"
        );
        let mut keys = BTreeSet::new();
        record(TraceType::Pub).index_keys(&mut keys);
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["ID1", "k1", "k2"]);
    }
}
