//! Small helpers shared across modules.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) mod worker;

/// A map from names (topics, broker names, addresses) looked up on every send.
///
/// SipHash cost about 6% of a sync send's instructions for its three lookups; foldhash is
/// several times cheaper on short strings and still seeds every map at random, so keys from
/// a hostile name server cannot be chosen to collide in advance.
pub(crate) type NameMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Builder setters that assign `self.options.<name>`.
macro_rules! option_setters {
    ($($(#[$m:meta])* $name:ident: $ty:ty;)*) => {$(
        $(#[$m])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.options.$name = value;
            self
        }
    )*};
}
pub(crate) use option_setters;

/// Hooks a builder collects for its client, in registration order.
pub(crate) struct Hooks<T: ?Sized>(pub(crate) Vec<std::sync::Arc<T>>);

impl<T: ?Sized> Default for Hooks<T> {
    fn default() -> Self {
        Hooks(Vec::new())
    }
}

impl<T: ?Sized> Clone for Hooks<T> {
    fn clone(&self) -> Self {
        Hooks(self.0.clone())
    }
}

impl<T: ?Sized> std::fmt::Debug for Hooks<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} hook(s)", self.0.len())
    }
}

/// A random number good enough for start indexes and shuffles (not for cryptography).
pub(crate) fn random_u64() -> u64 {
    // Each RandomState carries fresh keys; mixing in the clock varies it across processes.
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Fisher–Yates shuffle (Java `Collections.shuffle`).
pub(crate) fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = (random_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// `t` in milliseconds since the Unix epoch (negative before it), as Java's timestamps.
pub(crate) fn millis_since_epoch(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |m| -m),
    }
}

/// The time `millis` after the Unix epoch (before it when negative).
pub(crate) fn time_from_millis(millis: i64) -> SystemTime {
    let d = std::time::Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH.checked_add(d).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH)
    }
}

/// Milliseconds since the Unix epoch (Java `System.currentTimeMillis`).
pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_keeps_every_element() {
        let mut v: Vec<u32> = (0..50).collect();
        shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(random_u64(), random_u64());
    }
}
