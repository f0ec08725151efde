//! The property map of a message, kept compact.
//!
//! A pulled message carries half a dozen properties. As a `BTreeMap<String, String>` that is
//! a dozen or more allocations per message, which is most of what decoding a pull costs.
//! Here the names and values live in one string and a sorted index points into it: two
//! allocations per message, whatever the number of properties.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use super::codec::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

/// Byte ranges of one property inside [`Properties::text`].
#[derive(Clone, Copy)]
struct Entry {
    name: (u32, u32),
    value: (u32, u32),
}

/// A sorted map of property names to values.
#[derive(Clone, Default)]
pub(crate) struct Properties {
    /// Names and values, in any order; bytes no entry points at are garbage.
    text: String,
    /// Sorted by name, names unique.
    entries: Vec<Entry>,
}

/// Spare room [`Properties::parse`] leaves for the properties a consumer adds.
const PARSE_HEADROOM_BYTES: usize = 96;
const PARSE_HEADROOM_ENTRIES: usize = 3;

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

fn span(r: Range<usize>) -> (u32, u32) {
    // `text` never exceeds u32: a property string on the wire is at most i16 long, and
    // `insert` compacts before it grows past what live entries need.
    (r.start as u32, r.end as u32)
}

impl Properties {
    fn slice(&self, (start, end): (u32, u32)) -> &str {
        // Entries only ever point at char boundaries of `text`.
        self.text
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// Where `name` is, or where it would go.
    fn find(&self, name: &str) -> Result<usize, usize> {
        match self.position(name) {
            Some(i) => Ok(i),
            // Where a new name goes (MIN_OFFSET, MAX_OFFSET, CONSUME_START_TIME on every
            // pulled message): first bytes first, as the parse sorts.
            None => Err(self.entries.partition_point(|e| {
                let (have, want) = (self.name_bytes(e), name.as_bytes());
                match (have.first(), want.first()) {
                    (Some(x), Some(y)) if x != y => x < y,
                    _ => have < want,
                }
            })),
        }
    }

    /// A message has about ten properties and most names differ in length, so a scan that
    /// compares lengths first beats a binary search of byte-wise comparisons. Names of one
    /// length (KEYS, TAGS, WAIT; MIN_OFFSET, MAX_OFFSET) mostly differ in their first or
    /// last byte, compared before the whole name.
    fn position(&self, name: &str) -> Option<usize> {
        let want = name.as_bytes();
        let (Some(first), Some(last)) = (want.first(), want.last()) else {
            return self.entries.iter().position(|e| e.name.0 == e.name.1);
        };
        let text = self.text.as_bytes();
        self.entries.iter().position(|e| {
            (e.name.1 - e.name.0) as usize == want.len()
                && text.get(e.name.0 as usize) == Some(first)
                && text.get(e.name.1 as usize - 1) == Some(last)
                && self.name_bytes(e) == want
        })
    }

    fn name_bytes(&self, e: &Entry) -> &[u8] {
        self.text
            .as_bytes()
            .get(e.name.0 as usize..e.name.1 as usize)
            .unwrap_or_default()
    }

    /// Parses Java's property string (see [`super::string_to_properties`] for the rules):
    /// one copy of the text, then an index over it.
    pub(crate) fn parse(wire: &str) -> Properties {
        // A consumer adds MIN_OFFSET, MAX_OFFSET and CONSUME_START_TIME to every pulled
        // message; room for them now saves growing both buffers per message.
        let mut text = String::with_capacity(wire.len() + PARSE_HEADROOM_BYTES);
        text.push_str(wire);
        let mut entries = Vec::with_capacity(wire.len() / 16 + PARSE_HEADROOM_ENTRIES);
        let bytes = wire.as_bytes();
        let mut at = 0;
        while at <= bytes.len() {
            // Both separators are ASCII, so these byte positions are char boundaries.
            let end =
                memchr(PROPERTY_SEPARATOR as u8, &bytes[at..]).map_or(bytes.len(), |i| at + i);
            if let Some(i) = memchr(NAME_VALUE_SEPARATOR as u8, &bytes[at..end]) {
                if i > 0 && at + i + 1 < end {
                    entries.push(Entry {
                        name: span(at..at + i),
                        value: span(at + i + 1..end),
                    });
                }
            }
            at = end + 1;
        }
        // A stable sort keeps repeated names in wire order, so keeping the last of each
        // run is Java's "the last value wins".
        let name = |e: &Entry| &bytes[e.name.0 as usize..e.name.1 as usize];
        // Names are short and mostly differ in their first byte: compared before the
        // whole names (a memcmp call each), the same order.
        entries.sort_by(|a, b| {
            let (a, b) = (name(a), name(b));
            match (a.first(), b.first()) {
                (Some(x), Some(y)) if x != y => x.cmp(y),
                _ => a.cmp(b),
            }
        });
        entries.dedup_by(|later, earlier| {
            let same = name(later) == name(earlier);
            if same {
                *earlier = *later;
            }
            same
        });
        Properties { text, entries }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        // A miss (most lookups on the send path) needs no insertion point.
        self.position(name)
            .map(|i| self.slice(self.entries[i].value))
    }

    /// Names and values, sorted by name.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone {
        self.entries
            .iter()
            .map(|e| (self.slice(e.name), self.slice(e.value)))
    }

    pub(crate) fn insert(&mut self, name: &str, value: &str) {
        if self.text.len() + name.len() + value.len() > u32::MAX as usize / 2 {
            self.compact();
        }
        let start = self.text.len();
        self.text.push_str(value);
        let value = span(start..self.text.len());
        match self.find(name) {
            Ok(i) => self.entries[i].value = value,
            Err(i) => {
                let start = self.text.len();
                self.text.push_str(name);
                let name = span(start..self.text.len());
                self.entries.insert(i, Entry { name, value });
            }
        }
        // Replacing values over and over must not grow the text without bound.
        if self.text.len() > 64 && self.text.len() > 2 * self.live_len() {
            self.compact();
        }
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.find(name).ok()?;
        let e = self.entries.remove(i);
        Some(self.slice(e.value).to_string())
    }

    fn live_len(&self) -> usize {
        self.entries
            .iter()
            .map(|e| (e.name.1 - e.name.0 + e.value.1 - e.value.0) as usize)
            .sum()
    }

    /// Rewrites the text with only what the entries point at.
    fn compact(&mut self) {
        let mut fresh = Properties {
            text: String::with_capacity(self.live_len()),
            entries: Vec::with_capacity(self.entries.len()),
        };
        for (name, value) in self.iter() {
            let at = fresh.text.len();
            fresh.text.push_str(name);
            fresh.text.push_str(value);
            fresh.entries.push(Entry {
                name: span(at..at + name.len()),
                value: span(at + name.len()..fresh.text.len()),
            });
        }
        *self = fresh;
    }
}

impl From<BTreeMap<String, String>> for Properties {
    fn from(map: BTreeMap<String, String>) -> Self {
        let mut p = Properties::default();
        for (k, v) in &map {
            p.insert(k, v);
        }
        p
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Properties {}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::string_to_properties;
    use proptest::prelude::*;

    fn as_map(p: &Properties) -> BTreeMap<String, String> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_follows_java() {
        let p = Properties::parse("B\u{1}2\u{2}A\u{1}1\u{2}\u{1}x\u{2}C\u{1}\u{2}B\u{1}3\u{2}");
        assert_eq!(p.iter().collect::<Vec<_>>(), [("A", "1"), ("B", "3")]);
        assert_eq!(p.get("B"), Some("3"));
        assert_eq!(p.get("C"), None);
        assert_eq!(p.iter().len(), 2);
    }

    #[test]
    fn insert_replace_remove() {
        let mut p = Properties::default();
        p.insert("WAIT", "true");
        p.insert("KEYS", "k");
        p.insert("WAIT", "false");
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [("KEYS", "k"), ("WAIT", "false")]
        );
        assert_eq!(p.remove("KEYS").as_deref(), Some("k"));
        assert_eq!(p.remove("KEYS"), None);
        assert_eq!(p.iter().collect::<Vec<_>>(), [("WAIT", "false")]);
    }

    #[test]
    fn replacing_a_value_forever_stays_small() {
        let mut p = Properties::default();
        p.insert("NAME", "v");
        for i in 0..10_000 {
            p.insert("CONSUME_START_TIME", &i.to_string());
        }
        assert_eq!(p.get("CONSUME_START_TIME"), Some("9999"));
        assert!(p.text.len() < 200, "{}", p.text.len());
    }

    proptest! {
        #[test]
        fn same_as_the_map_decoder(s in "[AB\u{1}\u{2}é]{0,40}") {
            let p = Properties::parse(&s);
            prop_assert_eq!(as_map(&p), string_to_properties(&s));
        }

        #[test]
        fn same_as_a_map_under_edits(ops in proptest::collection::vec(("[a-d]{1,2}", "[x-z]{0,3}", any::<bool>()), 0..60)) {
            let mut p = Properties::default();
            let mut m = BTreeMap::new();
            for (k, v, put) in ops {
                if put {
                    p.insert(&k, &v);
                    m.insert(k, v);
                } else {
                    prop_assert_eq!(p.remove(&k), m.remove(&k));
                }
                prop_assert_eq!(as_map(&p), m.clone());
            }
            prop_assert_eq!(Properties::from(m.clone()), p);
        }
    }
}
