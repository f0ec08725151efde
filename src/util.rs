//! Small helpers shared across modules.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) mod worker;

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

/// `namesrv_addr` and `client_config` for builders that hold `client: ClientConfigBuilder`.
macro_rules! client_setters {
    () => {
        /// Name-server addresses, `;`-separated (default: `NAMESRV_ADDR`).
        pub fn namesrv_addr(mut self, addr: impl Into<String>) -> Self {
            self.client = self.client.namesrv_addr(addr);
            self
        }

        /// Client settings (instance name, intervals, timeouts, remoting, ...).
        pub fn client_config(
            mut self,
            f: impl FnOnce(
                crate::client::ClientConfigBuilder,
            ) -> crate::client::ClientConfigBuilder,
        ) -> Self {
            self.client = f(self.client);
            self
        }
    };
}

pub(crate) use {client_setters, option_setters};

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
