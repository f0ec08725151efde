//! `RemotingCommandRef`, a decoded frame that borrows from the frame's bytes.
//!
//! With the `ROCKETMQ` binary header every key, value, the remark and the body are slices
//! of the frame, and up to [`INLINE_FIELDS`] fields sit in an inline array: decoding one
//! allocates nothing. A JSON header escapes its strings (the properties always hold
//! `\u0001`), so its fields are unescaped into an owned [`ExtFields`] as
//! [`RemotingCommand::decode`] does; the body is still borrowed.
//!
//! Both decoders accept exactly the frames [`RemotingCommand::decode`] accepts, with the
//! same content ([`RemotingCommandRef::to_owned`] is equal to it; the frame fuzz target
//! and the tests here check it). The input is hostile: every length is checked against
//! what is left, and what spills past the inline array is bounded by the frame's size.

use std::borrow::Cow;

use super::codes::{LanguageCode, SerializeType};
use super::command::{split_binary_header, split_frame, RemotingCommand};
use super::ext::ExtFields;
use super::header::ReadHeaderRef;
use super::{json_header, DecodeError};

/// Fields a binary header holds without allocating (SEND_MESSAGE_V2 has 14, plus room
/// for the ACL or namespace fields a hook may add).
pub const INLINE_FIELDS: usize = 16;

/// A decoded frame borrowing its strings and body from the frame bytes.
#[derive(Debug, Clone)]
pub struct RemotingCommandRef<'a> {
    /// Request code in a request, response code in a response.
    pub code: i32,
    /// Sender's language.
    pub language: LanguageCode,
    /// Sender's protocol version.
    pub version: i32,
    /// Request id; a response carries its request's.
    pub opaque: i32,
    /// Bit 0: response; bit 1: oneway.
    pub flag: i32,
    /// The body: the rest of the frame after the header.
    pub body: &'a [u8],
    /// Header encoding of the frame.
    pub serialize_type: SerializeType,
    remark: Option<Cow<'a, str>>,
    ext_fields: ExtFieldsRef<'a>,
}

impl<'a> RemotingCommandRef<'a> {
    /// Decodes one frame *without* its 4-byte length prefix (what
    /// [`frame_len`](super::frame_len) measured), borrowing from it.
    pub fn decode(frame: &'a [u8]) -> Result<Self, DecodeError> {
        let (ty, header, body) = split_frame(frame)?;
        match ty {
            SerializeType::RocketMq => {
                let h = split_binary_header(header)?;
                let mut cmd = RemotingCommandRef {
                    code: h.code,
                    language: h.language,
                    version: h.version,
                    opaque: h.opaque,
                    flag: h.flag,
                    body,
                    serialize_type: ty,
                    remark: h.remark.map(Cow::Borrowed),
                    ext_fields: ExtFieldsRef(Repr::Frame(Fields::new())),
                };
                // Filled in place: the inline array is not moved once more.
                if let Repr::Frame(fields) = &mut cmd.ext_fields.0 {
                    decode_binary_ext_ref(h.ext, fields)?;
                }
                Ok(cmd)
            }
            SerializeType::Json => {
                let cmd = json_header::decode(header)?;
                Ok(RemotingCommandRef {
                    code: cmd.code,
                    language: cmd.language,
                    version: cmd.version,
                    opaque: cmd.opaque,
                    flag: cmd.flag,
                    body,
                    serialize_type: ty,
                    remark: cmd.remark.map(Cow::Owned),
                    ext_fields: ExtFieldsRef(Repr::Owned(cmd.ext_fields)),
                })
            }
        }
    }

    /// Free text; the error reason in failed responses.
    pub fn remark(&self) -> Option<&str> {
        self.remark.as_deref()
    }

    /// The header fields.
    pub fn ext_fields(&self) -> &ExtFieldsRef<'a> {
        &self.ext_fields
    }

    /// Decodes the typed borrowed header from the fields; its strings borrow from `self`.
    pub fn decode_header<'b, H: ReadHeaderRef<'b>>(&'b self) -> Result<H, DecodeError> {
        match &self.ext_fields.0 {
            // The usual case gets a plain slice iterator: the header's one-pass match
            // then runs without the chained iterators' per-entry branches.
            Repr::Frame(fields) if fields.spill.is_empty() => {
                H::read_fields(fields.inline[..fields.len].iter().copied())
            }
            _ => H::read_fields(self.ext_fields.iter()),
        }
    }

    /// The owned command, equal to what [`RemotingCommand::decode`] gives for the frame.
    pub fn to_owned(&self) -> RemotingCommand {
        let ext_fields = match &self.ext_fields.0 {
            Repr::Owned(ext) => ext.clone(),
            Repr::Frame(fields) => {
                let mut ext = ExtFields::with_capacity(fields.len(), fields.text_len());
                for (k, v) in fields.iter() {
                    ext.insert(k, v);
                }
                ext
            }
        };
        let mut cmd = RemotingCommand::from_header(
            self.code,
            self.language,
            self.version,
            self.opaque,
            self.flag,
            self.remark.as_deref().map(str::to_string),
            ext_fields,
        );
        cmd.body = self.body.to_vec();
        cmd.serialize_type = self.serialize_type;
        cmd
    }
}

/// The header fields of a [`RemotingCommandRef`].
///
/// A binary header may repeat a key (Java's `HashMap` keeps the last value): [`get`] and
/// the typed headers take the last one, [`iter`] yields every entry in frame order.
///
/// [`get`]: ExtFieldsRef::get
/// [`iter`]: ExtFieldsRef::iter
#[derive(Debug, Clone)]
pub struct ExtFieldsRef<'a>(Repr<'a>);

// The large variant is the point: its fields sit inline instead of in an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
enum Repr<'a> {
    Frame(Fields<'a>),
    Owned(ExtFields),
}

impl<'a> ExtFieldsRef<'a> {
    /// The value of `key` (the last one if the frame repeats it).
    pub fn get(&self, key: &str) -> Option<&str> {
        match &self.0 {
            Repr::Frame(fields) => fields
                .as_slices()
                .into_iter()
                .rev()
                .flat_map(|s| s.iter().rev())
                .find(|(k, _)| *k == key)
                .map(|&(_, v)| v),
            Repr::Owned(ext) => ext.get(key),
        }
    }

    /// Every entry, in frame order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let (frame, owned) = match &self.0 {
            Repr::Frame(fields) => (Some(fields.iter()), None),
            Repr::Owned(ext) => (None, Some(ext.iter())),
        };
        frame
            .into_iter()
            .flatten()
            .chain(owned.into_iter().flatten())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Frame(fields) => fields.len(),
            Repr::Owned(ext) => ext.len(),
        }
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Key/value slices of the frame: the first [`INLINE_FIELDS`] inline, the rest spilled.
#[derive(Debug, Clone)]
struct Fields<'a> {
    inline: [(&'a str, &'a str); INLINE_FIELDS],
    len: usize,
    spill: Vec<(&'a str, &'a str)>,
}

impl<'a> Fields<'a> {
    fn new() -> Self {
        Fields {
            inline: [("", ""); INLINE_FIELDS],
            len: 0,
            spill: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, key: &'a str, value: &'a str) {
        match self.inline.get_mut(self.len) {
            Some(slot) => {
                *slot = (key, value);
                self.len += 1;
            }
            None => self.spill.push((key, value)),
        }
    }

    fn as_slices(&self) -> [&[(&'a str, &'a str)]; 2] {
        [&self.inline[..self.len], &self.spill]
    }

    fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.inline[..self.len]
            .iter()
            .chain(self.spill.iter())
            .copied()
    }

    fn len(&self) -> usize {
        self.len + self.spill.len()
    }

    fn text_len(&self) -> usize {
        self.iter().map(|(k, v)| k.len() + v.len()).sum()
    }
}

/// The binary `extFields` block, `[key len i16][key][value len i32][value]` repeated,
/// as slices of it. Empty keys and values are dropped, as Java's decoder does.
fn decode_binary_ext_ref<'a>(block: &'a [u8], fields: &mut Fields<'a>) -> Result<(), DecodeError> {
    // Usually the whole block is UTF-8 (short lengths are ASCII bytes): one check, then
    // each slice only needs char boundaries at its ends, which `str::get` checks. A slice
    // of valid UTF-8 is valid exactly when both its ends are boundaries.
    let text = std::str::from_utf8(block).ok();
    let field = |range: std::ops::Range<usize>| -> Result<&str, DecodeError> {
        let s = match text {
            Some(t) => t.get(range),
            None => block.get(range).and_then(|b| std::str::from_utf8(b).ok()),
        };
        s.ok_or_else(|| DecodeError::new("string is not UTF-8"))
    };
    let truncated = || DecodeError::new("binary extFields entry is truncated");
    let negative = || DecodeError::new("binary extFields length is negative");
    // Slice patterns instead of a cursor: each step's bounds check is the split itself.
    let (mut rest, mut at) = (block, 0usize);
    while let [k0, k1, tail @ ..] = rest {
        let klen = usize::try_from(i16::from_be_bytes([*k0, *k1])).map_err(|_| negative())?;
        let Some((_, [v0, v1, v2, v3, tail @ ..])) = tail.split_at_checked(klen) else {
            return Err(truncated());
        };
        let vlen =
            usize::try_from(i32::from_be_bytes([*v0, *v1, *v2, *v3])).map_err(|_| negative())?;
        let Some((_, tail)) = tail.split_at_checked(vlen) else {
            return Err(truncated());
        };
        let key_at = at + 2;
        let value_at = key_at + klen + 4;
        at = value_at + vlen;
        rest = tail;
        let key = field(key_at..key_at + klen)?;
        let value = field(value_at..at)?;
        if !key.is_empty() && !value.is_empty() {
            fields.push(key, value);
        }
    }
    if !rest.is_empty() {
        return Err(truncated());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::header::{SendMessageRequestHeaderV2, SendMessageRequestHeaderV2Ref};
    use crate::protocol::{frame_len, RequestCode, DEFAULT_MAX_FRAME};

    fn send_header(props: Option<&str>) -> SendMessageRequestHeaderV2Ref<'_> {
        SendMessageRequestHeaderV2Ref {
            producer_group: "group",
            topic: "Topic",
            default_topic: "TBW102",
            default_topic_queue_nums: 4,
            queue_id: 3,
            sys_flag: 0,
            born_timestamp: 1_718_000_000_123,
            flag: 0,
            properties: props,
            reconsume_times: Some(0),
            unit_mode: false,
            max_reconsume_times: None,
            batch: false,
            broker_name: Some("broker-a"),
        }
    }

    fn frame_of(cmd: &RemotingCommand) -> Vec<u8> {
        let f = cmd.to_frame();
        assert_eq!(frame_len(&f, DEFAULT_MAX_FRAME).unwrap(), Some(f.len() - 4));
        f
    }

    /// The borrowed decoder agrees with the owned one: both fail, or both give the same.
    fn agrees(frame: &[u8]) {
        let owned = RemotingCommand::decode(frame);
        let borrowed = RemotingCommandRef::decode(frame);
        match (&owned, &borrowed) {
            (Ok(o), Ok(b)) => assert_eq!(&b.to_owned(), o, "{frame:?}"),
            (Err(_), Err(_)) => {}
            _ => panic!("owned {owned:?} but borrowed {borrowed:?} for {frame:?}"),
        }
    }

    #[test]
    fn a_send_frame_decodes_borrowed_in_both_encodings() {
        let props = "TAGS\u{1}TagA\u{2}WAIT\u{1}true";
        for ty in [SerializeType::RocketMq, SerializeType::Json] {
            let mut cmd = RemotingCommand::request_with_header(
                RequestCode::SEND_MESSAGE_V2,
                &send_header(Some(props)),
            )
            .with_body(b"body".to_vec());
            cmd.serialize_type = ty;
            cmd.remark = Some("why".into());
            let f = frame_of(&cmd);
            let view = RemotingCommandRef::decode(&f[4..]).unwrap();
            assert_eq!(view.to_owned(), cmd, "{ty:?}");
            assert_eq!(view.body, b"body");
            assert_eq!(view.remark(), Some("why"));
            assert_eq!(view.ext_fields().get("i"), Some(props));
            assert_eq!(view.ext_fields().get("zz"), None);
            let h: SendMessageRequestHeaderV2Ref<'_> = view.decode_header().unwrap();
            assert_eq!(h, send_header(Some(props)));
            let owned: SendMessageRequestHeaderV2 = cmd.decode_header().unwrap();
            assert_eq!(owned.properties.as_deref(), h.properties);
            if ty == SerializeType::RocketMq {
                // Borrowed: the property text is the frame's own bytes.
                let at = h.properties.unwrap().as_ptr() as usize;
                let range = f.as_ptr() as usize..f.as_ptr() as usize + f.len();
                assert!(range.contains(&at));
            }
        }
    }

    #[test]
    fn repeated_keys_keep_the_last_value_and_many_fields_spill() {
        let mut cmd = RemotingCommand::request(RequestCode(10));
        cmd.serialize_type = SerializeType::RocketMq;
        for i in 0..40 {
            cmd.ext_fields.insert(format!("key{i}"), format!("v{i}"));
        }
        let mut f = frame_of(&cmd);
        // Rename key39 to key01 (same length): a repeat, later in the frame.
        let at = f.windows(5).rposition(|w| w == b"key39").unwrap();
        f[at..at + 5].copy_from_slice(b"key01");
        let view = RemotingCommandRef::decode(&f[4..]).unwrap();
        assert_eq!(view.ext_fields().len(), 40);
        assert_eq!(view.ext_fields().get("key01"), Some("v39"));
        assert_eq!(view.ext_fields().get("key38"), Some("v38"));
        assert_eq!(view.ext_fields().get("key0"), Some("v0"));
        agrees(&f[4..]);
    }

    #[test]
    fn a_missing_or_malformed_typed_field_is_an_error() {
        let mut cmd =
            RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &send_header(None));
        cmd.serialize_type = SerializeType::RocketMq;
        cmd.ext_fields.insert("e", "x3");
        let f = frame_of(&cmd);
        let view = RemotingCommandRef::decode(&f[4..]).unwrap();
        let e = view.decode_header::<SendMessageRequestHeaderV2Ref<'_>>();
        assert!(e.unwrap_err().to_string().contains("`e`"));
        cmd.ext_fields.remove("a");
        let f = frame_of(&cmd);
        let view = RemotingCommandRef::decode(&f[4..]).unwrap();
        let e = view.decode_header::<SendMessageRequestHeaderV2Ref<'_>>();
        assert!(e.unwrap_err().to_string().contains("`a`"));
    }

    #[test]
    fn truncated_and_corrupted_frames_are_errors_or_agree_with_the_owned_decoder() {
        let mut frames = Vec::new();
        for ty in [SerializeType::RocketMq, SerializeType::Json] {
            let mut cmd = RemotingCommand::request_with_header(
                RequestCode::SEND_MESSAGE_V2,
                &send_header(Some("TAGS\u{1}é\u{2}")),
            )
            .with_body(vec![7; 40]);
            cmd.serialize_type = ty;
            cmd.remark = Some("r".into());
            frames.push(frame_of(&cmd));
        }
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for f in &frames {
            let f = &f[4..];
            // Every truncation.
            for n in 0..f.len() {
                agrees(&f[..n]);
            }
            // Every byte of the header flipped to a few values.
            for i in 0..f.len().min(400) {
                for b in [0x00, 0x7f, 0x80, 0xff, f[i] ^ 1] {
                    let mut g = f.to_vec();
                    g[i] = b;
                    agrees(&g);
                }
            }
            // Random garbage over random spans.
            for _ in 0..2000 {
                let mut g = f.to_vec();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % g.len();
                    g[i] = next() as u8;
                }
                agrees(&g);
            }
        }
        for _ in 0..2000 {
            let n = (next() % 64) as usize;
            let g: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            agrees(&g);
        }
    }
}
