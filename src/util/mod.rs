//! Small helpers shared across modules.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) mod worker;

/// A map from names (topics, broker names, addresses) looked up on every send.
///
/// SipHash cost about 6% of a sync send's instructions for its three lookups; with foldhash
/// they cost about half as much, and every map is still seeded at random, so names from a
/// hostile name server cannot be chosen to collide in advance.
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

/// `name` as a shared string, the last one kept per thread: a thread that sends to the
/// same topic again and again shares one string instead of allocating one per send (which
/// another thread, the callback pool's, would free).
pub(crate) fn shared_name(name: &str) -> std::sync::Arc<str> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<std::sync::Arc<str>>> =
            const { std::cell::RefCell::new(None) };
    }
    let kept = LAST.try_with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(kept) if **kept == *name => kept.clone(),
            _ => last.insert(std::sync::Arc::from(name)).clone(),
        }
    });
    // Only while the thread's locals are being torn down: a string of its own.
    kept.unwrap_or_else(|_| std::sync::Arc::from(name))
}

/// The longest [`ShortText`] kept inline: a message id of an IPv6 host (56 hex digits).
const SHORT_TEXT_INLINE: usize = 56;

/// A short text (a message id: 32 or 56 hex digits) kept inline, or a longer one (a
/// batch's ids joined) on the heap: a send result then allocates nothing for its ids.
#[derive(Clone)]
pub(crate) enum ShortText {
    Inline {
        len: u8,
        bytes: [u8; SHORT_TEXT_INLINE],
    },
    Heap(String),
}

impl ShortText {
    pub(crate) fn new(text: &str) -> ShortText {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= SHORT_TEXT_INLINE => {
                let mut bytes = [0u8; SHORT_TEXT_INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                ShortText::Inline { len, bytes }
            }
            _ => ShortText::Heap(text.to_string()),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            // Whole characters of a `str` were copied, so this never falls back.
            ShortText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            ShortText::Heap(s) => s,
        }
    }
}

impl From<&str> for ShortText {
    fn from(text: &str) -> ShortText {
        ShortText::new(text)
    }
}

impl std::ops::Deref for ShortText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ShortText {
    fn eq(&self, other: &ShortText) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ShortText {}

impl AsRef<str> for ShortText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for ShortText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for ShortText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
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
    fn a_thread_shares_its_last_name_and_only_that() {
        let a = shared_name("TopicA");
        let again = shared_name("TopicA");
        assert!(std::sync::Arc::ptr_eq(&a, &again), "the kept string");
        let b = shared_name("TopicB");
        assert_eq!(&*b, "TopicB");
        assert!(!std::sync::Arc::ptr_eq(&a, &b));
        // Only the last is kept: going back makes a new string, equal in text.
        let a2 = shared_name("TopicA");
        assert_eq!(a2, a);
        assert!(!std::sync::Arc::ptr_eq(&a, &a2));
        // A prefix or extension of the kept name is another name.
        assert_eq!(&*shared_name("TopicA2"), "TopicA2");
        assert_eq!(&*shared_name("Topic"), "Topic");
        // Another thread keeps its own.
        let other = std::thread::spawn(|| shared_name("Topic")).join().unwrap();
        assert!(!std::sync::Arc::ptr_eq(&other, &shared_name("Topic")));
    }

    #[test]
    fn short_text_keeps_any_text_whole_inline_or_not() {
        for text in [
            String::new(),
            "7F00000100002A9F00000000000004D2".to_string(),
            // 56 bytes of two-byte characters: inline.
            "é".repeat(28),
            // One byte past the inline room.
            "x".repeat(57),
            // A batch's ids.
            "A,B".repeat(100),
        ] {
            let short = ShortText::new(&text);
            assert_eq!(short.as_str(), text);
            assert_eq!(
                matches!(short, ShortText::Inline { .. }),
                text.len() <= SHORT_TEXT_INLINE,
                "{text}"
            );
            assert_eq!(&*short, text.as_str());
            assert_eq!(short.clone(), short);
            assert_eq!(short.to_string(), text);
            assert_eq!(format!("{short:?}"), format!("{text:?}"));
        }
        assert_ne!(ShortText::new("a"), ShortText::new("b"));
    }

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
