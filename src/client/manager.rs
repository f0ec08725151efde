//! `MQClientManager`: one shared [`MQClientInstance`] per client id in this process.
//!
//! The table holds weak references: the producers and consumers using an instance keep
//! it alive, and dropping the last of them ends it (its `Drop` stops its threads).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use super::config::ClientConfig;
use super::instance::{MQClientInstance, ServiceState};
use crate::error::Result;

/// Client id → instance. No strong reference to an instance is ever dropped while this
/// lock is held: dropping the last one runs the instance's `Drop`, which takes the lock.
fn table() -> &'static Mutex<HashMap<String, Weak<MQClientInstance>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Weak<MQClientInstance>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The instance for `config`'s client id, created on first use (Java
/// `MQClientManager.getOrCreateMQClientInstance`). Clients with the same id share it; an
/// instance that is shut down or failed to start is replaced by a new one.
pub fn get_or_create_instance(config: &ClientConfig) -> Result<Arc<MQClientInstance>> {
    let id = config.client_id();
    // Declared before the guard so that it is dropped after it (see `table`).
    let mut stale: Option<Arc<MQClientInstance>> = None;
    let mut t = table().lock();
    t.retain(|_, w| w.strong_count() > 0);
    if let Some(i) = t.get(&id).and_then(Weak::upgrade) {
        match i.state() {
            ServiceState::CreateJust | ServiceState::Running => return Ok(i),
            ServiceState::ShutdownAlready | ServiceState::StartFailed => stale = Some(i),
        }
    }
    let instance = MQClientInstance::new(config.clone())?;
    t.insert(id, Arc::downgrade(&instance));
    drop(t);
    drop(stale);
    Ok(instance)
}

/// Forgets `instance` (called by its shutdown, a failed start and its `Drop`); a newer
/// instance under the same id stays.
pub(crate) fn remove(client_id: &str, instance: &MQClientInstance) {
    let mut t = table().lock();
    if t.get(client_id)
        .is_some_and(|w| std::ptr::eq(w.as_ptr(), instance))
    {
        t.remove(client_id);
    }
}

/// Number of live instances (for tests and diagnostics).
pub fn instance_count() -> usize {
    table()
        .lock()
        .values()
        .filter(|w| w.strong_count() > 0)
        .count()
}
