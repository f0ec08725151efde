//! `MQClientManager`: one shared [`MQClientInstance`] per client id in this process.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::config::ClientConfig;
use super::instance::{MQClientInstance, ServiceState};
use crate::error::Result;

fn table() -> &'static Mutex<HashMap<String, Arc<MQClientInstance>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<MQClientInstance>>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The instance for `config`'s client id, created on first use (Java
/// `MQClientManager.getOrCreateMQClientInstance`). Clients with the same id share it.
pub fn get_or_create_instance(config: &ClientConfig) -> Result<Arc<MQClientInstance>> {
    let id = config.client_id();
    let mut t = table().lock();
    if let Some(i) = t.get(&id) {
        if i.state() != ServiceState::ShutdownAlready {
            return Ok(i.clone());
        }
    }
    let instance = MQClientInstance::new(config.clone())?;
    t.insert(id, instance.clone());
    Ok(instance)
}

/// Forgets `instance` (called by its shutdown); a newer instance under the same id stays.
pub(crate) fn remove(client_id: &str, instance: &MQClientInstance) {
    let mut t = table().lock();
    if t.get(client_id)
        .is_some_and(|i| std::ptr::eq(i.as_ref(), instance))
    {
        t.remove(client_id);
    }
}

/// Number of live instances (for tests and diagnostics).
pub fn instance_count() -> usize {
    table().lock().len()
}
