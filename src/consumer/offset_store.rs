//! Consumer offsets (Java `OffsetStore`): kept in memory, persisted to the broker
//! (clustering, [`RemoteBrokerOffsetStore`]) or to a local file (broadcasting,
//! [`LocalFileOffsetStore`]) by job 4 and on shutdown.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Condvar, Mutex};

use super::process_queue::ProcessQueue;
use super::ConsumeFromWhere;
use crate::client::{MQClientInstance, MASTER_ID};
use crate::error::{Error, ErrorKind, Result};
use crate::message::MessageQueue;
use crate::protocol::consumer_admin::ProcessQueueInfo;
use crate::protocol::{json, DecodeError};

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

/// Clustering: offsets live on the broker (Java `RemoteBrokerOffsetStore`).
pub(crate) struct RemoteBrokerOffsetStore {
    instance: Arc<MQClientInstance>,
    group: String,
    table: Mutex<HashMap<MessageQueue, i64>>,
    /// Held by each write to the broker from its snapshot of `table` until it is sent (a
    /// commit: until the broker answered). The broker applies offset updates on a pool of
    /// threads, in any order, so two writes in flight at once (job 4's and a commit's)
    /// could leave the older offset last: one write at a time, and a commit waits for
    /// job 4's answers before it sends.
    writes: Mutex<()>,
    /// Job 4's writes still waiting for their answers (sent async, so that a slow broker
    /// does not hold the timer thread).
    in_flight: Arc<InFlight>,
}

/// A count of writes waiting for their answers, and a signal when it falls to 0.
#[derive(Default)]
struct InFlight {
    count: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    fn busy(&self) -> bool {
        *self.count.lock() > 0
    }

    fn add(&self, n: usize) {
        *self.count.lock() += n;
    }

    fn done(&self) {
        let mut c = self.count.lock();
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until nothing is in flight or `deadline`; whether nothing is.
    fn wait_idle(&self, deadline: Instant) -> bool {
        let mut c = self.count.lock();
        while *c > 0 {
            if self.idle.wait_until(&mut c, deadline).timed_out() {
                return *c == 0;
            }
        }
        true
    }
}

impl RemoteBrokerOffsetStore {
    pub(crate) fn new(instance: Arc<MQClientInstance>, group: &str) -> Self {
        RemoteBrokerOffsetStore {
            instance,
            group: group.to_string(),
            table: Mutex::new(HashMap::new()),
            writes: Mutex::new(()),
            in_flight: Arc::default(),
        }
    }

    /// Where the group's offsets of `mq` are read and written (Java 4.9
    /// `RemoteBrokerOffsetStore`): the master, else, once a fresh route still has no
    /// master, any broker of the group, so a slave keeps the offsets while its master is
    /// down (the master gets them again with the first persist after it is back).
    fn offset_addr(&self, mq: &MessageQueue) -> Result<String> {
        let found = self
            .instance
            .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, true)
            .or_else(|| {
                let _ = self.instance.update_topic_route(&mq.topic);
                self.instance
                    .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, false)
            });
        found.map(|f| f.addr).ok_or_else(|| {
            Error::new(
                ErrorKind::NoRoute,
                format!("the broker {} does not exist", mq.broker_name),
            )
        })
    }

    /// Writes one offset and waits for the broker's answer, after those of job 4; the
    /// caller holds `writes`.
    fn push(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let addr = self.offset_addr(mq)?;
        self.in_flight.wait_idle(Instant::now() + BROKER_TIMEOUT);
        self.instance.api().update_consumer_offset(
            &addr,
            &self.group,
            mq,
            offset,
            false,
            BROKER_TIMEOUT,
        )
    }

    /// What `table` holds for `mqs`, and the queues it holds an offset for besides.
    fn snapshot(
        &self,
        mqs: &HashSet<MessageQueue>,
    ) -> (Vec<(MessageQueue, i64)>, Vec<MessageQueue>) {
        let t = self.table.lock();
        let snapshot = t
            .iter()
            .filter(|(mq, _)| mqs.contains(*mq))
            .map(|(mq, o)| (mq.clone(), *o))
            .collect();
        let unused = t.keys().filter(|mq| !mqs.contains(*mq)).cloned().collect();
        (snapshot, unused)
    }

    fn forget(&self, unused: Vec<MessageQueue>) {
        if unused.is_empty() {
            return;
        }
        let mut t = self.table.lock();
        for mq in unused {
            t.remove(&mq);
            debug!("forgot the offset of {mq}: no longer assigned");
        }
    }

    /// The broker address of each offset of `snapshot`; those without one are counted in
    /// `failed`, the first one's error kept in `first`.
    fn addresses(
        &self,
        snapshot: Vec<(MessageQueue, i64)>,
        deadline: Instant,
        failed: &mut usize,
        first: &mut Option<Error>,
    ) -> Vec<(String, MessageQueue, i64)> {
        let mut commits = Vec::with_capacity(snapshot.len());
        let mut refreshed: HashSet<String> = HashSet::new();
        for (mq, offset) in snapshot {
            let cached = |mq: &MessageQueue| {
                self.instance
                    .find_broker_address_in_subscribe(&mq.broker_name, MASTER_ID, false)
                    .map(|f| f.addr)
            };
            let mut addr = cached(&mq);
            // A queue assigned a moment ago can be committed before anything pulled it, so
            // before its route is here: one name-server round trip per topic, while the
            // deadline has not passed.
            if addr.is_none() && Instant::now() < deadline && refreshed.insert(mq.topic.to_string())
            {
                let _ = self.instance.update_topic_route(&mq.topic);
                addr = cached(&mq);
            }
            match addr {
                Some(addr) => commits.push((addr, mq, offset)),
                None => {
                    warn!(
                        "{}: no address of {} to commit {offset} for {mq}",
                        self.group, mq.broker_name
                    );
                    *failed += 1;
                    first.get_or_insert_with(|| {
                        Error::new(
                            ErrorKind::NoRoute,
                            format!("no address of the broker {}", mq.broker_name),
                        )
                    });
                }
            }
        }
        commits
    }
}

impl OffsetStore for RemoteBrokerOffsetStore {
    fn load(&self) -> Result<()> {
        Ok(())
    }

    fn persist_until(&self, mqs: &HashSet<MessageQueue>, deadline: Instant) -> Written {
        let _writing = self.writes.lock();
        // Job 4's older offsets land before these.
        self.in_flight.wait_idle(deadline);
        let (snapshot, _) = self.snapshot(mqs);
        let (mut failed, mut first) = (0, None);
        let commits = self.addresses(snapshot, deadline, &mut failed, &mut first);
        let results =
            self.instance
                .api()
                .update_consumer_offsets_until(&self.group, &commits, deadline);
        for (r, (_, mq, offset)) in results.into_iter().zip(&commits) {
            if let Err(e) = r {
                warn!("{}: committing {offset} for {mq}: {e}", self.group);
                failed += 1;
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err((failed, e)),
            None => Ok(()),
        }
    }

    fn update_offset(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        update_in(&self.table, mq, offset, increase_only);
    }

    fn read_offset(&self, mq: &MessageQueue, ty: ReadOffsetType) -> ReadOffset {
        if let Some(r) = read_memory(&self.table, mq, ty) {
            return r;
        }
        let addr = match self.offset_addr(mq) {
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
            // Only QUERY_NOT_FOUND means "no offset" (Java 5.x `OffsetNotFoundException`,
            // -1). Any other answer, a timeout or a lost connection is a failure (-2): the
            // queue is retried next round. Taking a broker error for "no offset", as 4.9.x
            // does, would start the queue at its end and skip the backlog.
            Ok(None) => ReadOffset::NotFound,
            Err(e) => {
                warn!("reading the offset of {mq} for {}: {e}", self.group);
                ReadOffset::Failed
            }
        }
    }

    /// Writes the offsets of `mqs` and forgets those of other queues. An empty set does
    /// nothing, as in Java: a consumer holding no queue for a moment (every queue dropped,
    /// a rebalance in between) must not wipe the offsets it still has to persist.
    ///
    /// Java sends these oneway. Here the broker answers each, on the callback pool, so
    /// that a commit written through can wait for them (see `writes`); a round whose
    /// predecessor is still unanswered, or that meets a commit being written, is skipped:
    /// the next round, or the commit, writes the offsets.
    fn persist_all(&self, mqs: &HashSet<MessageQueue>) {
        if mqs.is_empty() {
            return;
        }
        let Some(_writing) = self.writes.try_lock() else {
            debug!(
                "{}: a commit is being written; persisting next round",
                self.group
            );
            return;
        };
        if self.in_flight.busy() {
            debug!(
                "{}: the last persist is unanswered; persisting next round",
                self.group
            );
            return;
        }
        let (snapshot, unused) = self.snapshot(mqs);
        let (mut failed, mut first) = (0, None);
        let deadline = Instant::now() + BROKER_TIMEOUT;
        let commits = self.addresses(snapshot, deadline, &mut failed, &mut first);
        self.in_flight.add(commits.len());
        for (addr, mq, offset) in commits {
            let in_flight = self.in_flight.clone();
            let (group, queue) = (self.group.clone(), mq.clone());
            let sent = self.instance.api().update_consumer_offset_async(
                &addr,
                &self.group,
                &mq,
                offset,
                BROKER_TIMEOUT,
                move |r| {
                    if let Err(e) = r {
                        warn!("{group}: persisting the offset {offset} of {queue}: {e}");
                    }
                    in_flight.done();
                },
            );
            if let Err(e) = sent {
                warn!(
                    "{}: persisting the offset {offset} of {mq}: {e}",
                    self.group
                );
                self.in_flight.done();
            }
        }
        if let Some(e) = first {
            warn!("{}: {failed} offsets were not persisted ({e})", self.group);
        }
        self.forget(unused);
    }

    fn persist(&self, mq: &MessageQueue) {
        let _writing = self.writes.lock();
        let offset = self.table.lock().get(mq).copied();
        if let Some(offset) = offset {
            if let Err(e) = self.push(mq, offset) {
                warn!("persisting the offset {offset} of {mq}: {e}");
            }
        }
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }

    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let _writing = self.writes.lock();
        self.push(mq, offset)
    }

    fn offsets(&self) -> HashMap<MessageQueue, i64> {
        self.table.lock().clone()
    }
}

/// Broadcasting: offsets live in `<dir>/<clientId>/<group>/offsets.json` (Java
/// `LocalFileOffsetStore`), in the fastjson form Java reads: MessageQueue objects as keys.
///
/// Unlike Java, a persist merges: the file keeps every queue it ever held, so a queue
/// not held at the moment (its broker restarting, a lite pull queue not polled yet)
/// keeps its offset instead of restarting at the consume-from position. Writes are
/// atomic (temp file, fsync, rename) and one at a time.
///
/// Lock order: `file`, then `table`. `file` is held across the write: it is the
/// one-writer lock, and a merge and its write are one step, so a later write never
/// carries an older snapshot.
pub(crate) struct LocalFileOffsetStore {
    path: PathBuf,
    /// Offsets of the queues the consumer works on.
    table: Mutex<HashMap<MessageQueue, i64>>,
    /// Everything the file holds: loaded, then merged into by each persist.
    file: Mutex<BTreeMap<MessageQueue, i64>>,
}

/// `name` as one directory name: not empty, no path separator (either kind, on every
/// platform), not `.` or `..`, nothing the platform reads as a root or prefix. `what`
/// names it in the error.
fn check_path_component(what: &str, name: &str) -> Result<()> {
    use std::path::Component;
    let bad = |why: &str| {
        Err(Error::invalid_argument(format!(
            "the {what} {name:?} cannot name an offset directory: {why}"
        )))
    };
    if name.contains(['/', '\\']) {
        return bad("it contains a path separator");
    }
    if name.contains('\0') {
        return bad("it contains NUL");
    }
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(n)), None) if n == std::ffi::OsStr::new(name) => Ok(()),
        (None, _) => bad("it is empty"),
        _ => bad("it is `.`, `..` or a path prefix"),
    }
}

/// The offsets file of `client_id` and `group` under `dir`; an `InvalidArgument` error
/// when either would leave `dir` (`../x`, `a/b`, `..`). Java joins them unchecked.
pub(crate) fn local_store_path(dir: &Path, client_id: &str, group: &str) -> Result<PathBuf> {
    check_path_component(
        "client id (client IP @ instance name [@ unit name])",
        client_id,
    )?;
    check_path_component("consumer group (with namespace)", group)?;
    Ok(dir.join(client_id).join(group).join("offsets.json"))
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
    /// A store of `group` for `client_id` under `dir`, nothing read or written yet;
    /// names that would leave `dir` are an `InvalidArgument` error.
    pub(crate) fn new(dir: &Path, client_id: &str, group: &str) -> Result<Self> {
        Ok(LocalFileOffsetStore {
            path: local_store_path(dir, client_id, group)?,
            table: Mutex::new(HashMap::new()),
            file: Mutex::new(BTreeMap::new()),
        })
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

    /// Merges the in-memory offsets of `mqs` into what the file holds and writes it,
    /// under the `file` lock (see the struct's lock order).
    fn merge_and_write<'a>(&self, mqs: impl IntoIterator<Item = &'a MessageQueue>) -> Result<()> {
        let mut file = self.file.lock();
        {
            let table = self.table.lock();
            for mq in mqs {
                if let Some(o) = table.get(mq) {
                    file.insert(mq.clone(), *o);
                }
            }
        }
        string_to_file(&encode_offsets(&file)?, &self.path)
    }
}

/// `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}`.
fn encode_offsets(table: &BTreeMap<MessageQueue, i64>) -> Result<String> {
    let mut s = String::from("{\"offsetTable\":");
    json::object_key_map(&mut s, table.iter())
        .map_err(|e| Error::invalid_argument(format!("encoding offsets: {e}")))?;
    s.push('}');
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
    parse_offsets_file(&bytes).map_err(|e| Error::from(e).context(path.display()))
}

/// The offsets an offsets file holds; `None` for a blank file.
pub(crate) fn parse_offsets_file(
    bytes: &[u8],
) -> std::result::Result<Option<BTreeMap<MessageQueue, i64>>, DecodeError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let w: OffsetWrapper = json::from_slice(bytes)?;
    let mut out = BTreeMap::new();
    for (k, v) in w.offset_table {
        out.insert(json::parse_queue_key(&k)?, v);
    }
    Ok(Some(out))
}

/// Java `MixAll.string2File`, made atomic: write `<file>.tmp` and fsync it, keep the old
/// content as `<file>.bak` (Java reads it when the file is broken), rename the new file
/// into place and fsync the directory. A crash at any point leaves the old file or the
/// new one, whole. Callers serialize (the store's `file` lock): one writer per path.
fn string_to_file(text: &str, path: &Path) -> Result<()> {
    let tmp = write_temp(text, path)?;
    if path.exists() {
        let bak = path.with_extension("json.bak");
        if let Err(e) = std::fs::copy(path, &bak) {
            // Only the fallback copy is stale; the write itself goes on.
            warn!("writing {}: {e}", bak.display());
        }
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| Error::io(format!("renaming to {}", path.display()), e))?;
    sync_dir(path)
}

/// The first step of [`string_to_file`]: `text` in `<file>.tmp`, on disk.
fn write_temp(text: &str, path: &Path) -> Result<PathBuf> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    };
    write().map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    Ok(tmp)
}

/// Makes a rename in `path`'s directory durable (Unix; elsewhere the rename is all).
fn sync_dir(path: &Path) -> Result<()> {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

impl OffsetStore for LocalFileOffsetStore {
    fn load(&self) -> Result<()> {
        if let Some(t) = self.read_file()? {
            let mut file = self.file.lock();
            let mut table = self.table.lock();
            for (mq, o) in t {
                table.insert(mq.clone(), o);
                file.insert(mq, o);
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

    /// Writes the offsets of `mqs`; the file keeps every other queue it holds.
    fn persist_all(&self, mqs: &HashSet<MessageQueue>) {
        if mqs.is_empty() {
            return;
        }
        if let Err(e) = self.merge_and_write(mqs) {
            warn!("persisting offsets to {}: {e}", self.path.display());
        }
    }

    fn persist(&self, mq: &MessageQueue) {
        if let Err(e) = self.merge_and_write([mq]) {
            warn!(
                "persisting the offset of {mq} to {}: {e}",
                self.path.display()
            );
        }
    }

    fn remove_offset(&self, mq: &MessageQueue) {
        self.table.lock().remove(mq);
    }

    fn update_consume_offset_to_store(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        self.update_offset(mq, offset, false);
        self.merge_and_write([mq])
    }

    fn offsets(&self) -> HashMap<MessageQueue, i64> {
        self.table.lock().clone()
    }

    fn keeps_start_offsets(&self) -> bool {
        true
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
    use super::*;

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
