//! Broadcasting: the offsets in a local file (Java `LocalFileOffsetStore`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use log::{info, warn};
use parking_lot::Mutex;

use super::*;
use crate::error::{Error, Result};
use crate::message::MessageQueue;
use crate::protocol::{json, DecodeError};

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
pub(super) fn encode_offsets(table: &BTreeMap<MessageQueue, i64>) -> Result<String> {
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

pub(super) fn read_offsets_file(path: &Path) -> Result<Option<BTreeMap<MessageQueue, i64>>> {
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
pub(super) fn write_temp(text: &str, path: &Path) -> Result<PathBuf> {
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
                    keep_read(&self.table, mq, *o);
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
