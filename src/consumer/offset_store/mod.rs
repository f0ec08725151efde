//! Consumer offsets (Java `OffsetStore`): kept in memory, persisted to the broker
//! (clustering, [`RemoteBrokerOffsetStore`]) or to a local file (broadcasting,
//! [`LocalFileOffsetStore`]) by job 4 and on shutdown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::warn;
use parking_lot::Mutex;

use super::process_queue::ProcessQueue;
use super::ConsumeFromWhere;
use crate::client::MQClientInstance;
use crate::error::{Error, Result};
use crate::message::MessageQueue;
use crate::protocol::consumer_admin::ProcessQueueInfo;

mod local;
mod remote;

#[cfg(feature = "unstable-internals")]
pub(crate) use local::parse_offsets_file;
pub(crate) use local::{default_local_offset_dir, local_store_path, LocalFileOffsetStore};
pub(crate) use remote::RemoteBrokerOffsetStore;

pub(crate) const BROKER_TIMEOUT: Duration = Duration::from_millis(5000);

/// Where a read of the offset store looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOffsetType {
    /// Memory only.
    ReadFromMemory,
    /// The broker or file (and remember it).
    ReadFromStore,
    /// Memory, else the store.
    #[allow(dead_code)] // Java's third mode, kept for the reset-offset requests of issue 12
    MemoryFirstThenStore,
}

/// What a read found (Java's -1 / -2 sentinels as a type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOffset {
    /// An offset.
    Found(i64),
    /// The group has no offset for the queue.
    NotFound,
    /// The store could not be asked (the queue is skipped this round).
    Failed,
}

/// What a write of many offsets did: `Err((not written, the first one's error))`.
pub(crate) type Written = std::result::Result<(), (usize, Error)>;

/// Offsets of one consumer group.
pub(crate) trait OffsetStore: Send + Sync {
    fn load(&self) -> Result<()>;
    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool);
    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset;
    fn persist_all(&self, mqs: &HashSet<MessageQueue>);
    /// Writes the offsets of `mqs` through and waits until they are written or `deadline`
    /// passes, whichever is first (shutdown, `commit_sync`): the remote store sends every
    /// commit at once, so a broker that stops reading costs the deadline once, not a
    /// timeout per queue. Forgets nothing. A failure names how many offsets were not
    /// written, with the first one's error.
    fn persist_until(&self, mqs: &HashSet<MessageQueue>, _deadline: Instant) -> Written {
        // The local file is written at once, with nothing to wait for.
        self.persist_all(mqs);
        Ok(())
    }
    /// Sets the offsets of a commit and writes exactly these through, as
    /// [`persist_until`](Self::persist_until) waits for them.
    fn commit_until(&self, offsets: &[(MessageQueue, i64)], deadline: Instant) -> Written {
        for (mq, offset) in offsets {
            self.update_offset(mq, *offset, false);
        }
        let mqs: HashSet<MessageQueue> = offsets.iter().map(|(mq, _)| mq.clone()).collect();
        self.persist_until(&mqs, deadline)
    }
    fn persist(&self, mq: &MessageQueue);
    fn remove_offset(&self, mq: &MessageQueue);
    /// Sync write of one offset to where it lives (used by seek/commit of lite pull).
    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()>;
    fn offsets(&self) -> HashMap<MessageQueue, i64>;
    /// Whether a start offset computed from `ConsumeFromWhere` is kept at once. The local
    /// file does, so that a queue that stays idle until a restart is in the file and does
    /// not restart at its end, skipping what came meanwhile. The broker's store keeps Java's
    /// behaviour: a group's offset appears there once it consumes.
    fn keeps_start_offsets(&self) -> bool {
        false
    }
}

/// The in-memory part of a read: `Some` when memory answers for `ty`.
fn read_memory(
    table: &Mutex<HashMap<MessageQueue, i64>>,
    mq: &MessageQueue,
    ty: ReadOffsetType,
) -> Option<ReadOffset> {
    if ty == ReadOffsetType::ReadFromStore {
        return None;
    }
    match table.lock().get(mq) {
        Some(o) => Some(ReadOffset::Found(*o)),
        None if ty == ReadOffsetType::ReadFromMemory => Some(ReadOffset::NotFound),
        None => None,
    }
}

fn update_in(
    table: &Mutex<HashMap<MessageQueue, i64>>,
    mq: &MessageQueue,
    offset: i64,
    increase_only: bool,
) {
    let mut t = table.lock();
    match t.get_mut(mq) {
        Some(cur) if increase_only => *cur = (*cur).max(offset),
        Some(cur) => *cur = offset,
        None => {
            t.insert(mq.clone(), offset);
        }
    }
}

/// Keeps an offset read from the store unless the table has one for `mq` already: a
/// commit made meanwhile (or not yet persisted) is newer than what the store said, and
/// a read that overwrote it would have the next persist write the older offset back.
fn keep_read(table: &Mutex<HashMap<MessageQueue, i64>>, mq: &MessageQueue, offset: i64) {
    table.lock().entry(mq.clone()).or_insert(offset);
}

/// The store a consumer of `model` uses: the broker's (clustering) or a local file
/// (broadcasting), loaded.
pub(crate) fn open_store(
    model: crate::protocol::heartbeat::MessageModel,
    instance: &Arc<MQClientInstance>,
    dir: &Path,
    group: &str,
) -> Result<Box<dyn OffsetStore>> {
    use crate::protocol::heartbeat::MessageModel;
    let store: Box<dyn OffsetStore> = match model {
        MessageModel::Clustering => Box::new(RemoteBrokerOffsetStore::new(instance.clone(), group)),
        MessageModel::Broadcasting => {
            Box::new(LocalFileOffsetStore::new(dir, instance.client_id(), group)?)
        }
    };
    store.load()?;
    Ok(store)
}

/// What the admin tool shows of held queues: each one's process-queue info, with the
/// offset `store` holds for it in memory (-1 when none) as its commit offset.
pub(crate) fn queue_infos(
    store: &dyn OffsetStore,
    held: Vec<(MessageQueue, Arc<ProcessQueue>)>,
) -> BTreeMap<MessageQueue, ProcessQueueInfo> {
    held.into_iter()
        .map(|(mq, pq)| {
            let commit = match store.read_offset(&mq, ReadOffsetType::ReadFromMemory) {
                ReadOffset::Found(o) => o,
                _ => -1,
            };
            let info = pq.info(commit);
            (mq, info)
        })
        .collect()
}

/// The offsets `store` holds for the queues of `topic`.
pub(crate) fn offsets_of_topic(
    store: &dyn OffsetStore,
    topic: &str,
) -> BTreeMap<MessageQueue, i64> {
    store
        .offsets()
        .into_iter()
        .filter(|(mq, _)| mq.topic == topic.into())
        .collect()
}

/// Java `computePullFromWhereWithException`: the stored offset, else the start position
/// `from` names (retry topics always start at 0 or the end). `None` skips the queue this
/// round (the store or the broker could not be asked).
pub(crate) fn compute_start_offset(
    instance: &MQClientInstance,
    store: &dyn OffsetStore,
    from: ConsumeFromWhere,
    mq: &MessageQueue,
) -> Option<i64> {
    match store.read_offset(mq, ReadOffsetType::ReadFromStore) {
        ReadOffset::Found(o) if o >= 0 => return Some(o),
        ReadOffset::Failed => return None,
        _ => {}
    }
    let retry = crate::client::validators::is_retry_topic(&mq.topic);
    let addr = instance
        .find_broker_address_in_publish(&mq.broker_name)
        .or_else(|| {
            let _ = instance.update_topic_route(&mq.topic);
            instance.find_broker_address_in_publish(&mq.broker_name)
        });
    let ask = |f: &dyn Fn(&str) -> Result<i64>| -> Option<i64> {
        let addr = addr.as_deref()?;
        f(addr).map_err(|e| warn!("start offset of {mq}: {e}")).ok()
    };
    let api = instance.api();
    let start = match from {
        ConsumeFromWhere::FirstOffset => Some(0),
        ConsumeFromWhere::Timestamp(t) if !retry => {
            let timestamp = crate::util::millis_since_epoch(t);
            ask(&|a| api.search_offset(a, mq, timestamp, BROKER_TIMEOUT))
        }
        ConsumeFromWhere::Timestamp(_) => {
            ask(&|a| api.get_queue_offset(a, mq, true, BROKER_TIMEOUT))
        }
        _ if retry => Some(0),
        _ => ask(&|a| api.get_queue_offset(a, mq, true, BROKER_TIMEOUT)),
    };
    if let Some(o) = start.filter(|_| store.keeps_start_offsets()) {
        store.update_offset(mq, o, false);
    }
    start
}

#[cfg(test)]
mod tests {
    use super::local::{encode_offsets, read_offsets_file, write_temp};
    use super::remote::InFlight;
    use super::*;
    use crate::error::ErrorKind;
    use std::path::PathBuf;

    #[test]
    fn a_commit_waits_for_job_4s_writes_in_flight_until_they_are_answered_or_its_deadline() {
        let f = Arc::new(InFlight::default());
        assert!(f.wait_idle(Instant::now()), "nothing in flight");
        f.add(2);
        assert!(f.busy());
        let start = Instant::now();
        assert!(!f.wait_idle(start + Duration::from_millis(50)));
        assert!(start.elapsed() >= Duration::from_millis(50));
        let answers = {
            let f = f.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                f.done();
                f.done();
            })
        };
        assert!(f.wait_idle(Instant::now() + Duration::from_secs(10)));
        assert!(!f.busy());
        answers.join().unwrap();
    }

    use crate::protocol::TopicRouteData;
    use crate::protocol::{BrokerData, QueueData, RemotingCommand, RequestCode, ResponseCode};
    use crate::testkit::fault_peer::{Fault, FaultPeer, Responder};

    /// GET_MAX_OFFSET's answer from [`broker_answering`].
    const MAX_OFFSET: i64 = 100;

    /// A broker whose QUERY_CONSUMER_OFFSET answer is `query` (SUCCESS with offset 42)
    /// and whose every other answer is SUCCESS with offset [`MAX_OFFSET`].
    fn broker_answering(query: ResponseCode) -> FaultPeer {
        FaultPeer::start(Fault::Respond(Responder::new(move |req| {
            let (code, offset) = if req.code == RequestCode::QUERY_CONSUMER_OFFSET.0 {
                (query, 42)
            } else {
                (ResponseCode::SUCCESS, MAX_OFFSET)
            };
            let mut r = RemotingCommand::response(code, 0, None);
            if code == ResponseCode::SUCCESS {
                r.ext_fields.insert("offset", offset.to_string());
            }
            r
        })))
        .unwrap()
    }

    /// A client instance (not started) whose name server routes every topic to broker
    /// `b` at `broker_addr`; the name server must outlive it.
    fn instance_routing_to(broker_addr: &str) -> (FaultPeer, Arc<MQClientInstance>) {
        let route = TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "b".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: crate::protocol::Perm::READ_WRITE,
                ..Default::default()
            }],
            broker_datas: vec![BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: [(0, broker_addr.to_string())].into_iter().collect(),
            }],
            ..Default::default()
        };
        let namesrv = FaultPeer::start(Fault::Answer(
            serde_json::to_vec(&crate::protocol::route_to_json(&route)).unwrap(),
        ))
        .unwrap();
        let config = crate::client::ClientOptions::new()
            .namesrv_addr(namesrv.addr())
            .instance_name(format!("offsets-{}", crate::util::random_u64()))
            .into_config();
        (namesrv, MQClientInstance::new(config).unwrap())
    }

    #[test]
    fn a_failed_offset_query_skips_the_queue_instead_of_starting_at_the_end() {
        let mq = MessageQueue::new("T", "b", 0);
        for (what, broker) in [
            ("SYSTEM_ERROR", broker_answering(ResponseCode::SYSTEM_ERROR)),
            (
                "SERVICE_NOT_AVAILABLE",
                broker_answering(ResponseCode::SERVICE_NOT_AVAILABLE),
            ),
            (
                "a connection closed",
                FaultPeer::start(Fault::CloseOnRequest).unwrap(),
            ),
        ] {
            let (_namesrv, instance) = instance_routing_to(broker.addr());
            let store = RemoteBrokerOffsetStore::new(instance.clone(), "g");
            assert_eq!(
                store.read_offset(&mq, ReadOffsetType::ReadFromStore),
                ReadOffset::Failed,
                "{what}"
            );
            for from in [ConsumeFromWhere::LastOffset, ConsumeFromWhere::FirstOffset] {
                assert_eq!(
                    compute_start_offset(&instance, &store, from, &mq),
                    None,
                    "{what}, {from:?}: the queue must be retried, not started"
                );
            }
            instance.shutdown();
        }
    }

    #[test]
    fn an_offset_the_broker_does_not_have_starts_where_consume_from_where_says() {
        let mq = MessageQueue::new("T", "b", 0);
        let broker = broker_answering(ResponseCode::QUERY_NOT_FOUND);
        let (_namesrv, instance) = instance_routing_to(broker.addr());
        let store = RemoteBrokerOffsetStore::new(instance.clone(), "g");
        assert_eq!(
            store.read_offset(&mq, ReadOffsetType::ReadFromStore),
            ReadOffset::NotFound
        );
        let start = |from| compute_start_offset(&instance, &store, from, &mq);
        assert_eq!(start(ConsumeFromWhere::LastOffset), Some(MAX_OFFSET));
        assert_eq!(start(ConsumeFromWhere::FirstOffset), Some(0));
        instance.shutdown();

        let broker = broker_answering(ResponseCode::SUCCESS);
        let (_namesrv, instance) = instance_routing_to(broker.addr());
        let store = RemoteBrokerOffsetStore::new(instance.clone(), "g");
        assert_eq!(
            compute_start_offset(&instance, &store, ConsumeFromWhere::LastOffset, &mq),
            Some(42),
            "a stored offset wins"
        );
        instance.shutdown();
    }

    /// A read from the broker does not replace an offset committed in memory meanwhile
    /// (a lite pull queue's first start-offset read came after `commit(…, true)` and the
    /// next write sent the broker's older offset back).
    #[test]
    fn a_read_from_the_broker_keeps_an_offset_committed_in_memory() {
        let mq = MessageQueue::new("T", "b", 0);
        let broker = broker_answering(ResponseCode::SUCCESS);
        let (_namesrv, instance) = instance_routing_to(broker.addr());
        let store = RemoteBrokerOffsetStore::new(instance.clone(), "g");
        store.update_offset(&mq, 7, false);
        assert_eq!(
            store.read_offset(&mq, ReadOffsetType::ReadFromStore),
            ReadOffset::Found(42),
            "what the broker holds"
        );
        assert_eq!(store.offsets().get(&mq), Some(&7), "the newer commit stays");
        // A queue with nothing in memory takes what the broker holds.
        let other = MessageQueue::new("T", "b", 1);
        store.read_offset(&other, ReadOffsetType::ReadFromStore);
        assert_eq!(store.offsets().get(&other), Some(&42));
        instance.shutdown();
    }

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "rmq-offsets-{}-{}",
            std::process::id(),
            crate::util::random_u64()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn persisting_an_empty_set_keeps_every_remote_offset() {
        // Nothing listens on the name server: an attempt to send would fail, not hang.
        let config = crate::client::ClientOptions::new()
            .namesrv_addr("127.0.0.1:1")
            .instance_name(format!("empty-persist-{}", crate::util::random_u64()))
            .into_config();
        let instance = MQClientInstance::new(config).unwrap();
        let s = RemoteBrokerOffsetStore::new(instance, "g");
        let a = MessageQueue::new("T", "b", 0);
        s.update_offset(&a, 7, false);
        s.persist_all(&HashSet::new());
        assert_eq!(s.offsets().get(&a), Some(&7));
    }

    #[test]
    fn local_store_round_trips_in_the_java_format_and_keeps_a_backup() {
        let d = dir();
        let s = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g").unwrap();
        let a = MessageQueue::new("T", "b", 0);
        let b = MessageQueue::new("T", "b", 1);
        s.update_offset(&a, 5, true);
        s.update_offset(&a, 3, true);
        assert_eq!(
            s.read_offset(&a, ReadOffsetType::ReadFromMemory),
            ReadOffset::Found(5),
            "increase only"
        );
        s.update_offset(&b, 9, false);
        let set: HashSet<_> = [a.clone(), b.clone()].into_iter().collect();
        s.persist_all(&set);
        let text = std::fs::read_to_string(s.path()).unwrap();
        assert_eq!(
            text,
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:9}}"#
        );
        s.update_offset(&a, 6, true);
        s.persist_all(&set);
        assert!(s.path().with_extension("json.bak").exists());

        let again = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g").unwrap();
        again.load().unwrap();
        assert_eq!(
            again.read_offset(&a, ReadOffsetType::ReadFromMemory),
            ReadOffset::Found(6)
        );
        // A broken main file falls back to the backup (which holds 5).
        std::fs::write(again.path(), "{garbage").unwrap();
        let third = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g").unwrap();
        assert_eq!(
            third.read_offset(&a, ReadOffsetType::ReadFromStore),
            ReadOffset::Found(5)
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn java_pretty_printed_files_are_read() {
        let d = dir();
        let s = LocalFileOffsetStore::new(&d, "c", "g").unwrap();
        std::fs::create_dir_all(s.path().parent().unwrap()).unwrap();
        std::fs::write(
            s.path(),
            "{\n\t\"offsetTable\":{{\n\t\t\t\"brokerName\":\"broker-a\",\n\t\t\t\"queueId\":3,\n\t\t\t\"topic\":\"TopicTest\"\n\t\t}:1234\n\t}\n}",
        )
        .unwrap();
        s.load().unwrap();
        let mq = MessageQueue::new("TopicTest", "broker-a", 3);
        assert_eq!(
            s.read_offset(&mq, ReadOffsetType::MemoryFirstThenStore),
            ReadOffset::Found(1234)
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_persist_of_some_queues_keeps_every_other_queue_in_the_file() {
        let d = dir();
        let s = LocalFileOffsetStore::new(&d, "c", "g").unwrap();
        let (a, b, c) = (
            MessageQueue::new("T", "broker-a", 0),
            MessageQueue::new("T", "broker-b", 0),
            MessageQueue::new("U", "broker-a", 1),
        );
        s.update_offset(&a, 5, false);
        s.update_offset(&b, 9, false);
        s.update_offset(&c, 2, false);
        s.persist_all(&[a.clone(), b.clone(), c.clone()].into_iter().collect());
        // broker-b went away (push) / only `a` was polled (lite pull): `b` and `c` are
        // not held now, but their offsets must survive.
        s.remove_offset(&b);
        s.update_offset(&a, 7, false);
        s.persist_all(&[a.clone()].into_iter().collect());
        s.persist(&a);
        s.update_consume_offset_to_store(&a, 8).unwrap();

        let again = LocalFileOffsetStore::new(&d, "c", "g").unwrap();
        again.load().unwrap();
        let found: BTreeMap<_, _> = again.offsets().into_iter().collect();
        let want: BTreeMap<_, _> = [(a, 8), (b, 9), (c, 2)].into_iter().collect();
        assert_eq!(found, want, "lost queues: {}", want.len() - found.len());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn concurrent_persists_do_not_interleave_and_none_is_undone() {
        let d = dir();
        let s = Arc::new(LocalFileOffsetStore::new(&d, "c", "g").unwrap());
        let mqs: Vec<MessageQueue> = (0..4).map(|i| MessageQueue::new("T", "b", i)).collect();
        let all: HashSet<MessageQueue> = mqs.iter().cloned().collect();
        // Each writer raises its own queue's offset and persists every queue; once its
        // persist returned, the file must hold at least that offset (a persist that
        // lands later must not carry an older snapshot), and must always parse.
        let writers: Vec<_> = mqs
            .iter()
            .cloned()
            .map(|mq| {
                let (s, all) = (s.clone(), all.clone());
                std::thread::spawn(move || {
                    let (mut undone, mut torn) = (0, 0);
                    for i in 1..=300 {
                        s.update_offset(&mq, i, false);
                        s.persist_all(&all);
                        match read_offsets_file(s.path()) {
                            Ok(Some(t)) if t.get(&mq).is_some_and(|o| *o >= i) => {}
                            Ok(_) => undone += 1,
                            Err(_) => torn += 1,
                        }
                    }
                    (undone, torn)
                })
            })
            .collect();
        let (mut undone, mut torn) = (0, 0);
        for w in writers {
            let (u, t) = w.join().unwrap();
            undone += u;
            torn += t;
        }
        assert_eq!(
            (undone, torn),
            (0, 0),
            "(persists undone by a later write of an older snapshot, unreadable files) of 1200"
        );
        let on_disk = read_offsets_file(s.path()).unwrap().unwrap();
        assert!(
            mqs.iter().all(|mq| on_disk.get(mq) == Some(&300)),
            "{on_disk:?}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_crash_between_writing_and_renaming_leaves_the_old_file_whole() {
        let d = dir();
        let s = LocalFileOffsetStore::new(&d, "c", "g").unwrap();
        let a = MessageQueue::new("T", "b", 0);
        s.update_offset(&a, 5, false);
        s.persist(&a);
        // The next write gets as far as its temp file, then the process dies.
        s.update_offset(&a, 6, false);
        let text = encode_offsets(&[(a.clone(), 6)].into_iter().collect()).unwrap();
        let tmp = write_temp(&text[..text.len() / 2], s.path()).unwrap();
        assert!(tmp.exists());

        let after = LocalFileOffsetStore::new(&d, "c", "g").unwrap();
        after.load().unwrap();
        assert_eq!(
            after.read_offset(&a, ReadOffsetType::ReadFromMemory),
            ReadOffset::Found(5)
        );
        // The leftover temp file does not stand in the way of the next write.
        after.update_offset(&a, 7, false);
        after.update_consume_offset_to_store(&a, 7).unwrap();
        assert!(!tmp.exists());
        assert_eq!(
            read_offsets_file(after.path()).unwrap().unwrap().get(&a),
            Some(&7)
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn names_that_would_leave_the_offset_directory_are_invalid_arguments() {
        let d = dir();
        let escaping = [
            ("../../etc", "g"),
            ("1.2.3.4@../../etc", "g"),
            ("..", "g"),
            (".", "g"),
            ("", "g"),
            ("/etc", "g"),
            ("c", "../../etc"),
            ("c", "ns/../../g"),
            ("c", ".."),
            ("c", "a\\..\\..\\b"),
            ("c", "nul\0"),
        ];
        for (client_id, group) in escaping {
            match LocalFileOffsetStore::new(&d, client_id, group) {
                Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}"),
                Ok(s) => panic!("{client_id:?} / {group:?} accepted: {}", s.path().display()),
            }
        }
        // Dots inside a name are ordinary (IP addresses, `..%g`).
        let ok = LocalFileOffsetStore::new(&d, "10.0.0.1@1234#5@unit", "..%g").unwrap();
        assert_eq!(ok.path(), d.join("10.0.0.1@1234#5@unit/..%g/offsets.json"));
        assert!(!d.exists(), "nothing was written");
    }
}
