//! The pending table: requests waiting for their responses, by opaque, with a deadline each.
//!
//! Owned by the I/O thread alone (no lock). Completing an entry leaves its deadline in the
//! heap; such stale deadlines are skipped when they come due, and the heap is rebuilt from
//! the live entries when stale ones outnumber them, so it stays bounded by the requests in
//! flight rather than by the requests sent during one timeout.
//!
//! Public (hidden) so that `benches/pending.rs` can measure it; not part of the API.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use mio::Token;

/// One request waiting for its response.
#[derive(Debug)]
pub struct PendingEntry<W> {
    /// The connection the request went out on.
    pub token: Token,
    /// When the request fails with a timeout.
    pub deadline: Instant,
    /// The whole budget, for the timeout message.
    pub timeout: Duration,
    /// Who waits.
    pub waiter: W,
}

/// Opaques (and the consumer's batch ids, and the I/O loop's connection tokens) are
/// consecutive small integers the client picks, never the peer: a multiply spreads them
/// over the hash's high bits (which the table's control bytes use) at a fraction of
/// SipHash's cost.
#[derive(Default)]
pub struct OpaqueHasher(u64);

impl Hasher for OpaqueHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_i32(&mut self, n: i32) {
        self.0 = u64::from(n as u32).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A map keyed by client-chosen integers (opaques, tokens), hashed by [`OpaqueHasher`].
pub(crate) type OpaqueMap<K, V> = HashMap<K, V, BuildHasherDefault<OpaqueHasher>>;

/// Requests in flight, by opaque, and their deadlines in time order.
pub struct PendingTable<W> {
    entries: OpaqueMap<i32, PendingEntry<W>>,
    deadlines: BinaryHeap<Reverse<(Instant, i32)>>,
}

impl<W> Default for PendingTable<W> {
    fn default() -> Self {
        PendingTable {
            entries: HashMap::default(),
            deadlines: BinaryHeap::new(),
        }
    }
}

/// The heap is rebuilt only past this many entries, so small tables never pay for it.
const MIN_COMPACT: usize = 1024;

impl<W> PendingTable<W> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a request; returns the entry it displaced, which can only happen when
    /// an opaque is reused while still pending (after 2^32 requests).
    pub fn insert(&mut self, opaque: i32, entry: PendingEntry<W>) -> Option<PendingEntry<W>> {
        if self.deadlines.len() >= MIN_COMPACT && self.deadlines.len() > 2 * self.entries.len() {
            self.compact();
        }
        self.deadlines.push(Reverse((entry.deadline, opaque)));
        self.entries.insert(opaque, entry)
    }

    /// Takes the entry a response completes.
    pub fn complete(&mut self, opaque: i32) -> Option<PendingEntry<W>> {
        self.entries.remove(&opaque)
    }

    /// The earliest deadline still in the heap (possibly of a completed entry: waking
    /// for it early is harmless).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((d, _))| *d)
    }

    /// Takes the next entry whose deadline is at or before `now`, if any.
    pub fn pop_expired(&mut self, now: Instant) -> Option<(i32, PendingEntry<W>)> {
        while let Some(Reverse((deadline, opaque))) = self.deadlines.peek().copied() {
            if deadline > now {
                return None;
            }
            self.deadlines.pop();
            // The entry may be gone (answered) or re-registered with another deadline.
            if self
                .entries
                .get(&opaque)
                .is_some_and(|e| e.deadline == deadline)
            {
                if let Some(e) = self.entries.remove(&opaque) {
                    return Some((opaque, e));
                }
            }
        }
        None
    }

    /// Whether a request is pending on connection `token`.
    pub fn has_token(&self, token: Token) -> bool {
        self.entries.values().any(|e| e.token == token)
    }

    /// How many requests are pending on connection `token`.
    pub(crate) fn count_token(&self, token: Token) -> usize {
        self.entries.values().filter(|e| e.token == token).count()
    }

    /// Takes every entry pending on connection `token`.
    pub fn take_token(&mut self, token: Token) -> Vec<PendingEntry<W>> {
        let opaques: Vec<i32> = self
            .entries
            .iter()
            .filter(|(_, e)| e.token == token)
            .map(|(o, _)| *o)
            .collect();
        opaques
            .into_iter()
            .filter_map(|o| self.entries.remove(&o))
            .collect()
    }

    /// Takes every entry.
    pub fn take_all(&mut self) -> Vec<PendingEntry<W>> {
        self.deadlines.clear();
        self.entries.drain().map(|(_, e)| e).collect()
    }

    /// Number of pending requests.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is pending.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Deadlines held, stale ones included.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn deadlines_len(&self) -> usize {
        self.deadlines.len()
    }

    /// Drops the deadlines of completed entries.
    fn compact(&mut self) {
        let entries = &self.entries;
        self.deadlines
            .retain(|Reverse((d, o))| entries.get(o).is_some_and(|e| e.deadline == *d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(token: usize, deadline: Instant, waiter: u32) -> PendingEntry<u32> {
        PendingEntry {
            token: Token(token),
            deadline,
            timeout: Duration::from_secs(3),
            waiter,
        }
    }

    #[test]
    fn complete_takes_the_entry_once() {
        let now = Instant::now();
        let mut t = PendingTable::new();
        assert!(t.insert(7, entry(1, now, 70)).is_none());
        assert_eq!(t.len(), 1);
        assert_eq!(t.complete(7).map(|e| e.waiter), Some(70));
        assert!(t.complete(7).is_none());
        assert!(t.is_empty());
    }

    #[test]
    fn expiry_follows_deadlines_and_skips_answered_and_replaced_entries() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let mut t = PendingTable::new();
        t.insert(1, entry(1, now + ms(30), 1));
        t.insert(2, entry(1, now + ms(10), 2));
        t.insert(3, entry(2, now + ms(20), 3));
        t.insert(4, entry(2, now + ms(5), 4));
        assert_eq!(t.next_deadline(), Some(now + ms(5)));
        t.complete(4);
        // Opaque 3 reused with a later deadline: its first deadline is stale.
        let old = t.insert(3, entry(2, now + ms(40), 33));
        assert_eq!(old.map(|e| e.waiter), Some(3));
        assert!(t.pop_expired(now).is_none());
        let expired: Vec<u32> = std::iter::from_fn(|| t.pop_expired(now + ms(35)))
            .map(|(_, e)| e.waiter)
            .collect();
        assert_eq!(expired, [2, 1]);
        assert_eq!(t.next_deadline(), Some(now + ms(40)));
        assert_eq!(
            t.pop_expired(now + ms(40)).map(|(o, e)| (o, e.waiter)),
            Some((3, 33))
        );
        assert!(t.is_empty());
    }

    #[test]
    fn entries_of_one_connection_are_found_and_taken() {
        let now = Instant::now();
        let mut t = PendingTable::new();
        for o in 0..10 {
            t.insert(o, entry(o as usize % 2, now, o as u32));
        }
        assert!(t.has_token(Token(1)));
        assert_eq!(t.count_token(Token(1)), 5);
        let mut taken: Vec<u32> = t
            .take_token(Token(1))
            .into_iter()
            .map(|e| e.waiter)
            .collect();
        taken.sort_unstable();
        assert_eq!(taken, [1, 3, 5, 7, 9]);
        assert!(!t.has_token(Token(1)));
        assert_eq!(t.len(), 5);
        assert_eq!(t.take_all().len(), 5);
        assert!(t.is_empty());
        assert_eq!(t.deadlines_len(), 0);
    }

    #[test]
    fn answered_deadlines_do_not_pile_up() {
        let now = Instant::now();
        let mut t = PendingTable::new();
        for o in 0..100_000 {
            t.insert(o, entry(1, now + Duration::from_secs(3), 0));
            t.complete(o);
        }
        assert!(
            t.deadlines_len() <= 2 * MIN_COMPACT,
            "{}",
            t.deadlines_len()
        );
        // A live entry survives compaction and still expires.
        t.insert(-1, entry(1, now, 9));
        for o in 0..10_000 {
            t.insert(o, entry(1, now + Duration::from_secs(3), 0));
            t.complete(o);
        }
        assert_eq!(
            t.pop_expired(now).map(|(o, e)| (o, e.waiter)),
            Some((-1, 9))
        );
    }

    #[test]
    fn the_hasher_spreads_consecutive_opaques() {
        let high = |n: i32| {
            let mut h = OpaqueHasher::default();
            h.write_i32(n);
            h.finish() >> 57
        };
        let distinct: std::collections::HashSet<u64> = (0..128).map(high).collect();
        assert!(distinct.len() > 64, "{}", distinct.len());
        // Tokens hash through `write_usize`: spread the same way.
        let token = |n: usize| {
            let mut h = OpaqueHasher::default();
            std::hash::Hash::hash(&mio::Token(n), &mut h);
            h.finish() >> 57
        };
        let distinct: std::collections::HashSet<u64> = (0..128).map(token).collect();
        assert!(distinct.len() > 64, "{}", distinct.len());
    }
}
