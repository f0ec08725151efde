//! `ExtFields`, the string fields of a header, and the integer text they carry.
//!
//! Every request builds one and every frame decodes one, so the set keeps all its keys
//! and values in one `String` with their byte ranges beside it: two allocations per set
//! instead of two per field.

use std::fmt;
use std::ops::Range;

/// Header fields (`extFields`): string keys and values in insertion order.
///
/// Inserting a key that exists replaces its value in place, as Java's `HashMap` does when
/// a frame repeats a key.
#[derive(Clone, Default)]
pub struct ExtFields {
    /// Keys and values back to back; replaced or removed entries leave unused text behind.
    text: String,
    /// Per entry: key start and end, value start and end, in `text`.
    spans: Vec<[usize; 4]>,
    /// One bit per [`key_bit`] of every key held: a clear bit proves a key absent.
    bits: u64,
}

/// A cheap hash of a key to one of 64 bits; the one-letter keys of SEND_MESSAGE_V2 and
/// the dozen keys of other headers mostly land on distinct bits.
#[inline]
fn key_bit(key: &[u8]) -> u64 {
    let first = u32::from(key.first().copied().unwrap_or(0));
    let last = u32::from(key.last().copied().unwrap_or(0));
    let h = (key.len() as u32).wrapping_mul(31) + first + (last << 2);
    1 << (h & 63)
}

/// Equal when both hold the same key/value pairs, in any order (Java uses a `HashMap`).
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The text form of one header value, produced by [`ExtValue::to_ext`](super::ExtValue)
/// and formatted straight into the field set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtText<'a> {
    /// A string, as is.
    Str(&'a str),
    /// An integer in decimal (Java `Long.toString`).
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
}

impl ExtText<'_> {
    /// The most bytes the text can take.
    pub fn max_len(&self) -> usize {
        match self {
            ExtText::Str(s) => s.len(),
            ExtText::Int(_) => 20,
            ExtText::Bool(_) => 5,
        }
    }
}

impl ExtFields {
    /// An empty set.
    pub fn new() -> Self {
        ExtFields::default()
    }

    /// An empty set with room for `entries` fields of `text` bytes in all.
    pub fn with_capacity(entries: usize, text: usize) -> Self {
        ExtFields {
            text: String::with_capacity(text),
            spans: Vec::with_capacity(entries),
            bits: 0,
        }
    }

    /// Makes room for `entries` more fields of `text` more bytes.
    pub fn reserve(&mut self, entries: usize, text: usize) {
        self.text.reserve(text);
        self.spans.reserve(entries);
    }

    /// Writes typed header fields (`command_header!`): each present value under its key,
    /// with room made for all of them first.
    #[doc(hidden)]
    #[inline]
    pub fn write_fields(&mut self, fields: &[(&str, Option<ExtText<'_>>)]) {
        let text = fields
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, ExtText::max_len))
            .sum();
        self.reserve(fields.len(), text);
        for &(k, v) in fields {
            if let Some(v) = v {
                self.insert_text(k, v);
            }
        }
    }

    /// A set whose keys and values are ranges of `text` (decoders), added by
    /// [`commit_key_value`].
    ///
    /// [`commit_key_value`]: ExtFields::commit_key_value
    pub(crate) fn from_text(text: String, entries: usize) -> Self {
        ExtFields {
            text,
            spans: Vec::with_capacity(entries),
            bits: 0,
        }
    }

    fn key_at(&self, span: &[usize; 4]) -> &str {
        &self.text[span[0]..span[1]]
    }

    fn value_at(&self, span: &[usize; 4]) -> &str {
        &self.text[span[2]..span[3]]
    }

    #[inline]
    fn position(&self, key: &[u8]) -> Option<usize> {
        if self.bits & key_bit(key) == 0 {
            return None;
        }
        self.find(key)
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        let text = self.text.as_bytes();
        self.spans
            .iter()
            .position(|s| s[1] - s[0] == key.len() && &text[s[0]..s[1]] == key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self.position(key.as_bytes())?;
        Some(self.value_at(&self.spans[i]))
    }

    /// Sets `key` to `value`, replacing an earlier value.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.insert_text(key.as_ref(), ExtText::Str(value.as_ref()));
    }

    /// Sets `key` to the text of `value`, replacing an earlier value.
    #[inline]
    pub fn insert_text(&mut self, key: &str, value: ExtText<'_>) {
        let start = self.text.len();
        push_short(&mut self.text, key);
        let mid = self.text.len();
        match value {
            ExtText::Str(s) => push_short(&mut self.text, s),
            ExtText::Int(n) => push_int(&mut self.text, n),
            ExtText::Bool(b) => self.text.push_str(if b { "true" } else { "false" }),
        }
        self.commit(start, mid);
    }

    /// Records the entry whose key is `text[start..mid]` and value `text[mid..]`.
    #[inline]
    pub(crate) fn commit(&mut self, start: usize, mid: usize) {
        self.commit_key_value(start..mid, mid..self.text.len());
    }

    /// Records the entry whose key and value are these ranges of the text; their ends
    /// must be char boundaries.
    #[inline(always)]
    pub(crate) fn commit_key_value(&mut self, key: Range<usize>, value: Range<usize>) {
        let span = [key.start, key.end, value.start, value.end];
        let key = &self.text.as_bytes()[key];
        let bit = key_bit(key);
        if self.bits & bit != 0 {
            if let Some(i) = self.find(key) {
                self.spans[i] = span;
                return;
            }
        }
        self.bits |= bit;
        self.spans.push(span);
    }

    /// The text buffer, for decoders that append a key and a value and then [`commit`].
    ///
    /// [`commit`]: ExtFields::commit
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// Removes `key`, returning its value.
    #[cfg(test)]
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key.as_bytes())?;
        let span = self.spans.remove(i);
        Some(self.value_at(&span).to_string())
    }

    /// Iterates over the fields in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|s| (self.key_at(s), self.value_at(s)))
    }

    /// The fields as bytes, for encoders (no char-boundary checks).
    pub(crate) fn iter_bytes(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let text = self.text.as_bytes();
        self.spans
            .iter()
            .map(move |s| (&text[s[0]..s[1]], &text[s[2]..s[3]]))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of all keys and values (an upper bound: replaced values may be counted).
    pub(crate) fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Control characters in the keys and values (each is six bytes in JSON: `\u0001`).
    pub(crate) fn control_chars(&self) -> usize {
        self.text.bytes().filter(|b| *b < 0x20).count()
    }
}

/// `push_str`, without a `memcpy` call for the one-letter keys and values that most
/// SEND_MESSAGE_V2 fields are.
#[inline(always)]
fn push_short(out: &mut String, s: &str) {
    match s.as_bytes() {
        &[b] => out.push(char::from(b)), // one byte: ASCII
        _ => out.push_str(s),
    }
}

/// "00" to "99", for writing two digits per division.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// The decimal digits of `n` (with a `-` if negative), written into the end of `buf`.
#[inline]
pub(crate) fn int_bytes(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut u = n.unsigned_abs();
    while u >= 100 {
        let pair = (u % 100) as usize * 2;
        u /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if u >= 10 {
        let pair = u as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + u as u8;
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Appends `n` in decimal, as `n.to_string()` would, without the formatting machinery.
#[inline]
pub(crate) fn push_int(out: &mut String, n: i64) {
    if let Ok(d @ 0..=9) = u8::try_from(n) {
        out.push(char::from(b'0' + d)); // most queue ids, flags and counts
        return;
    }
    // Only ASCII digits and '-' were written, so this cannot fail.
    if let Ok(s) = std::str::from_utf8(int_bytes(n, &mut [0; 20])) {
        out.push_str(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_like_to_string() {
        for n in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            409,
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let mut s = String::from("x");
            push_int(&mut s, n);
            assert_eq!(s, format!("x{n}"));
        }
    }

    #[test]
    fn insert_replaces_in_place_and_remove_forgets() {
        let mut e = ExtFields::new();
        e.insert("a", "1");
        e.insert_text("bb", ExtText::Int(-2));
        e.insert_text("c", ExtText::Bool(true));
        e.insert("a", "one");
        assert_eq!(
            e.iter().collect::<Vec<_>>(),
            [("a", "one"), ("bb", "-2"), ("c", "true")]
        );
        assert_eq!(e.remove("bb"), Some("-2".to_string()));
        assert_eq!(e.remove("bb"), None);
        assert_eq!(e.get("bb"), None);
        e.insert("bb", "");
        assert_eq!(e.get("bb"), Some(""));
        assert_eq!(e.len(), 3);
        assert_eq!(format!("{e:?}"), r#"{"a": "one", "c": "true", "bb": ""}"#);
    }

    #[test]
    fn keys_sharing_a_bit_are_told_apart() {
        let mut e = ExtFields::new();
        // Enough keys that several share a bit.
        let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        for (i, k) in keys.iter().enumerate() {
            e.insert(k, i.to_string());
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(e.get(k), Some(i.to_string().as_str()));
        }
        assert_eq!(e.get("k200"), None);
        assert_eq!(e.get(""), None);
        e.insert("", "empty key");
        assert_eq!(e.get(""), Some("empty key"));
    }

    #[test]
    fn equality_ignores_order() {
        let mut a = ExtFields::new();
        a.insert("x", "1");
        a.insert("y", "2");
        let mut b = ExtFields::with_capacity(2, 8);
        b.insert("y", "2");
        b.insert("x", "1");
        assert_eq!(a, b);
        b.insert("x", "3");
        assert_ne!(a, b);
    }
}
