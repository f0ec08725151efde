//! The live handles: every pointer this library hands to C (clients, messages, batches,
//! the messages lent to callbacks) is the address of an `Arc` it keeps here until the
//! handle is destroyed. A call first looks its pointer up: NULL, a destroyed handle or a
//! handle of another type is an error, never a dereference. The lookup clones the `Arc`,
//! so a handle destroyed by another thread mid-call stays alive until that call ends.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::message::{Batch, Msg};
use crate::producer::ProducerHandle;
use crate::pull::PullHandle;
use crate::push::PushHandle;
use crate::{CResult, Failure};

/// A live handle.
#[derive(Clone)]
pub(crate) enum Obj {
    Producer(Arc<ProducerHandle>),
    Push(Arc<PushHandle>),
    Pull(Arc<PullHandle>),
    Msg(Arc<Msg>),
    Batch(Arc<Batch>),
}

fn table() -> &'static Mutex<HashMap<usize, Obj>> {
    static TABLE: OnceLock<Mutex<HashMap<usize, Obj>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers `obj` under `addr` (the address of its `Arc`'s value).
pub(crate) fn insert(addr: usize, obj: Obj) {
    table().lock().insert(addr, obj);
}

/// Removes the handle at `p`, returning it (None when it is not live).
pub(crate) fn remove(p: *const c_void) -> Option<Obj> {
    table().lock().remove(&(p as usize))
}

/// The handle at `p`, if live.
pub(crate) fn get(p: *const c_void) -> Option<Obj> {
    if p.is_null() {
        return None;
    }
    table().lock().get(&(p as usize)).cloned()
}

/// Typed lookups: `what` names the argument in the error.
macro_rules! typed {
    ($name:ident, $variant:ident, $ty:ty) => {
        pub(crate) fn $name<T>(p: *const T, what: &str) -> CResult<Arc<$ty>> {
            match get(p.cast()) {
                Some(Obj::$variant(h)) => Ok(h),
                Some(_) => Err(Failure::bad(format!("{what} is a handle of another type"))),
                None if p.is_null() => Err(Failure::bad(format!("{what} is NULL"))),
                None => Err(Failure::bad(format!(
                    "{what} is not a live handle (destroyed, or never made by this library)"
                ))),
            }
        }
    };
}

typed!(producer, Producer, ProducerHandle);
typed!(push, Push, PushHandle);
typed!(pull, Pull, PullHandle);
typed!(msg, Msg, Msg);
typed!(batch, Batch, Batch);
