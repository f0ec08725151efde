//! Consumer offsets (Java `OffsetStore`): kept in memory, persisted to the broker
//! (clustering, [`RemoteBrokerOffsetStore`]) or to a local file (broadcasting,
//! [`LocalFileOffsetStore`]) by job 4 and on shutdown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info, warn};
use parking_lot::Mutex;

use super::ConsumeFromWhere;
use crate::client::MQClientInstance;
use crate::error::{Error, ErrorKind, Result};
use crate::message::MessageQueue;
use crate::protocol::json;

const BROKER_TIMEOUT: Duration = Duration::from_millis(5000);

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

/// Offsets of one consumer group.
pub(crate) trait OffsetStore: Send + Sync {
    fn load(&self) -> Result<()>;
    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool);
    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset;
    fn persist_all(&self, mqs: &HashSet<MessageQueue>);
    fn persist(&self, mq: &MessageQueue);
    fn remove_offset(&self, mq: &MessageQueue);
    /// Sync write of one offset to where it lives (used by seek/commit of lite pull).
    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()>;
    fn offsets(&self) -> HashMap<MessageQueue, i64>;
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

/// Clustering: offsets live on the broker (Java `RemoteBrokerOffsetStore`).
pub(crate) struct RemoteBrokerOffsetStore {
    instance: Arc<MQClientInstance>,
    group: String,
    table: Mutex<HashMap<MessageQueue, i64>>,
}

impl RemoteBrokerOffsetStore {
    pub(crate) fn new(instance: Arc<MQClientInstance>, group: &str) -> Self {
        RemoteBrokerOffsetStore {
            instance,
            group: group.to_string(),
            table: Mutex::new(HashMap::new()),
        }
    }

    fn master_addr(&self, mq: &MessageQueue) -> Result<String> {
        if let Some(a) = self
            .instance
            .find_broker_address_in_publish(&mq.broker_name)
        {
            return Ok(a);
        }
        let _ = self.instance.update_topic_route(&mq.topic);
        self.instance
            .find_broker_address_in_publish(&mq.broker_name)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NoRoute,
                    format!("the broker {} does not exist", mq.broker_name),
                )
            })
    }

    fn push(&self, mq: &MessageQueue, offset: i64, oneway: bool) -> Result<()> {
        let addr = self.master_addr(mq)?;
        self.instance.api().update_consumer_offset(
            &addr,
            &self.group,
            mq,
            offset,
            oneway,
            BROKER_TIMEOUT,
        )
    }
}

impl OffsetStore for RemoteBrokerOffsetStore {
    fn load(&self) -> Result<()> {
        Ok(())
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        update_in(&self.table, mq, offset, increase_only);
    }

    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset {
        if let Some(r) = read_memory(&self.table, mq, ty) {
            return r;
        }
        let addr = match self.master_addr(mq) {
            Ok(a) => a,
            Err(e) => {
                warn!("reading the offset of {mq}: {e}");
                return ReadOffset::Failed;
            }
        };
        match self
            .instance
            .api()
            .query_consumer_offset(&addr, &self.group, mq, BROKER_TIMEOUT)
        {
            Ok(Some(o)) => {
                update_in(&self.table, mq, o, false);
                ReadOffset::Found(o)
            }
            Ok(None) => ReadOffset::NotFound,
            // A broker error code means "no usable offset" for Java too (-1).
            Err(e) if e.kind() == ErrorKind::Response => ReadOffset::NotFound,
            Err(e) => {
                warn!("reading the offset of {mq}: {e}");
                ReadOffset::Failed
            }
        }
    }

    /// Pushes the offsets of `mqs` (oneway) and forgets those of other queues. An empty
    /// set does nothing, as in Java: a consumer holding no queue for a moment (every queue
    /// dropped, a rebalance in between) must not wipe the offsets it still has to persist.
    fn persist_all(&self, mqs: &HashSet<MessageQueue>) {
        if mqs.is_empty() {
            return;
        }
        let snapshot: Vec<(MessageQueue, i64)> = self
            .table
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let mut unused = Vec::new();
        for (mq, offset) in snapshot {
            if mqs.contains(&mq) {
                if let Err(e) = self.push(&mq, offset, true) {
                    warn!(
                        "persisting the offset {offset} of {mq} for {}: {e}",
                        self.group
                    );
                }
            } else {
                unused.push(mq);
            }
        }
        let mut t = self.table.lock();
        for mq in unused {
            t.remove(&mq);
            debug!("forgot the offset of {mq}: no longer assigned");
        }
    }

    fn persist(&self, mq: &MessageQueue) {
        let offset = self.table.lock().get(mq).copied();
        if let Some(offset) = offset {
            if let Err(e) = self.push(mq, offset, false) {
                warn!("persisting the offset {offset} of {mq}: {e}");
            }
        }
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }

    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.push(mq, offset, false)
    }

    fn offsets(&self) -> HashMap<MessageQueue, i64> {
        self.table.lock().clone()
    }
}

/// Broadcasting: offsets live in `<dir>/<clientId>/<group>/offsets.json` (Java
/// `LocalFileOffsetStore`), in the fastjson form Java reads: MessageQueue objects as keys.
pub(crate) struct LocalFileOffsetStore {
    path: PathBuf,
    table: Mutex<HashMap<MessageQueue, i64>>,
}

/// Java's default directory: `${user.home}/.rocketmq_offsets`; `ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR`
/// overrides it as the system property `rocketmq.client.localOffsetStoreDir` does in Java.
pub fn default_local_offset_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".rocketmq_offsets")
}

impl LocalFileOffsetStore {
    pub(crate) fn new(dir: &Path, client_id: &str, group: &str) -> Self {
        LocalFileOffsetStore {
            path: dir.join(client_id).join(group).join("offsets.json"),
            table: Mutex::new(HashMap::new()),
        }
    }

    /// The file this store writes.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn read_file(&self) -> Result<Option<BTreeMap<MessageQueue, i64>>> {
        match read_offsets_file(&self.path) {
            Ok(Some(t)) => Ok(Some(t)),
            // Java falls back to the .bak copy when the file is missing, empty or broken.
            first => {
                let bak = self.path.with_extension("json.bak");
                match read_offsets_file(&bak) {
                    Ok(Some(t)) => {
                        info!("offsets read from the backup {}", bak.display());
                        Ok(Some(t))
                    }
                    _ => first,
                }
            }
        }
    }

    fn write_file(&self, table: &BTreeMap<MessageQueue, i64>) -> Result<()> {
        let text = encode_offsets(table)?;
        string_to_file(&text, &self.path)
    }
}

/// `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}`.
fn encode_offsets(table: &BTreeMap<MessageQueue, i64>) -> Result<String> {
    let mut s = String::from("{\"offsetTable\":{");
    for (i, (mq, off)) in table.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let key = serde_json::to_string(mq)
            .map_err(|e| Error::invalid_argument(format!("encoding {mq}: {e}")))?;
        s.push_str(&key);
        s.push(':');
        s.push_str(&off.to_string());
    }
    s.push_str("}}");
    Ok(s)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetWrapper {
    #[serde(default)]
    offset_table: HashMap<String, i64>,
}

fn read_offsets_file(path: &Path) -> Result<Option<BTreeMap<MessageQueue, i64>>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let w: OffsetWrapper =
        json::from_slice(&bytes).map_err(|e| Error::from(e).context(path.display()))?;
    let mut out = BTreeMap::new();
    for (k, v) in w.offset_table {
        out.insert(json::parse_object_key::<MessageQueue>(&k)?, v);
    }
    Ok(Some(out))
}

/// Java `MixAll.string2File`: write `<file>.tmp`, keep the old content as `<file>.bak`,
/// then move the new file into place.
fn string_to_file(text: &str, path: &Path) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    if path.exists() {
        let bak = path.with_extension("json.bak");
        std::fs::copy(path, &bak)
            .map_err(|e| Error::io(format!("writing {}", bak.display()), e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("renaming to {}", path.display()), e))
}

impl OffsetStore for LocalFileOffsetStore {
    fn load(&self) -> Result<()> {
        if let Some(t) = self.read_file()? {
            let mut table = self.table.lock();
            for (mq, o) in t {
                table.insert(mq, o);
            }
        }
        Ok(())
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        update_in(&self.table, mq, offset, increase_only);
    }

    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset {
        if let Some(r) = read_memory(&self.table, mq, ty) {
            return r;
        }
        match self.read_file() {
            Ok(Some(t)) => match t.get(mq) {
                Some(o) => {
                    update_in(&self.table, mq, *o, false);
                    ReadOffset::Found(*o)
                }
                None => ReadOffset::NotFound,
            },
            Ok(None) => ReadOffset::NotFound,
            Err(e) => {
                warn!("reading {}: {e}", self.path.display());
                ReadOffset::Failed
            }
        }
    }

    fn persist_all(&self, mqs: &HashSet<MessageQueue>) {
        if mqs.is_empty() {
            return;
        }
        let table: BTreeMap<MessageQueue, i64> = self
            .table
            .lock()
            .iter()
            .filter(|(k, _)| mqs.contains(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if let Err(e) = self.write_file(&table) {
            warn!("persisting offsets to {}: {e}", self.path.display());
        }
    }

    fn persist(&self, _mq: &MessageQueue) {
        let all: HashSet<MessageQueue> = self.table.lock().keys().cloned().collect();
        self.persist_all(&all);
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }

    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.update_offset(mq, offset, false);
        let table: BTreeMap<MessageQueue, i64> = self
            .table
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        self.write_file(&table)
    }

    fn offsets(&self) -> HashMap<MessageQueue, i64> {
        self.table.lock().clone()
    }
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
            Box::new(LocalFileOffsetStore::new(dir, instance.client_id(), group))
        }
    };
    store.load()?;
    Ok(store)
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
    match from {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let config = crate::client::ClientConfig::builder()
            .namesrv_addr("127.0.0.1:1")
            .instance_name(format!("empty-persist-{}", crate::util::random_u64()))
            .build();
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
        let s = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g");
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

        let again = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g");
        again.load().unwrap();
        assert_eq!(
            again.read_offset(&a, ReadOffsetType::ReadFromMemory),
            ReadOffset::Found(6)
        );
        // A broken main file falls back to the backup (which holds 5).
        std::fs::write(again.path(), "{garbage").unwrap();
        let third = LocalFileOffsetStore::new(&d, "1.2.3.4@DEFAULT", "g");
        assert_eq!(
            third.read_offset(&a, ReadOffsetType::ReadFromStore),
            ReadOffset::Found(5)
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn java_pretty_printed_files_are_read() {
        let d = dir();
        let s = LocalFileOffsetStore::new(&d, "c", "g");
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
}
