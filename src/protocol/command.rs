//! `RemotingCommand` and its frame codec.
//!
//! A frame is `[len: i32][mark: i32][header][body]` where `len` counts everything after
//! itself and `mark` holds the serialize type in its top byte and the header length in the
//! low 24 bits. The header is either fastjson-style JSON or the `ROCKETMQ` binary layout;
//! both are decoded on every frame because brokers answer some paths in their own default.
//!
//! Decoding never panics and never allocates more than the frame it was given: every
//! length is checked against what is left.

use std::sync::atomic::{AtomicI32, Ordering};

use super::codes::{LanguageCode, RequestCode, ResponseCode, SerializeType};
use super::ext::{int_bytes, ExtFields, ExtText};
use super::header::{CommandHeader, WriteHeader};
use super::{json_header, DecodeError};

/// The `version` we send: Java's `MQVersion.Version.V4_9_8.ordinal()`. Name servers answer
/// route queries in standard JSON to versions ≥ 401 (V4_9_4).
pub const CURRENT_VERSION: i32 = 409;

/// The default largest frame accepted (Java `com.rocketmq.remoting.frameMaxLength`).
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

const RESPONSE_FLAG: i32 = 1;
pub(crate) const ONEWAY_FLAG: i32 = 1 << 1;
const MAX_HEADER_LEN: usize = 0x00FF_FFFF;
/// code(2) language(1) version(2) opaque(4) flag(4) remark len(4) ext len(4).
const BINARY_FIXED_LEN: usize = 21;

static NEXT_OPAQUE: AtomicI32 = AtomicI32::new(0);

/// A fresh request id; wraps around like Java's `AtomicInteger`.
pub fn next_opaque() -> i32 {
    NEXT_OPAQUE.fetch_add(1, Ordering::Relaxed)
}

/// One request or response of the remoting protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    /// Request code in a request, response code in a response.
    pub code: i32,
    /// Sender's language.
    pub language: LanguageCode,
    /// Sender's protocol version ([`CURRENT_VERSION`] for us).
    pub version: i32,
    /// Request id; a response carries its request's.
    pub opaque: i32,
    /// Bit 0: response; bit 1: oneway.
    pub flag: i32,
    /// Free text; the error reason in failed responses.
    pub remark: Option<String>,
    /// Header fields.
    pub ext_fields: ExtFields,
    /// Body bytes; empty when there is none.
    pub body: Vec<u8>,
    /// Header encoding used on the wire (set from the frame when decoding).
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A request with a fresh opaque and no fields.
    pub fn request(code: RequestCode) -> Self {
        RemotingCommand {
            code: code.0,
            language: LanguageCode::RUST,
            version: CURRENT_VERSION,
            opaque: next_opaque(),
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Vec::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A request whose fields come from a typed header.
    pub fn request_with_header(code: RequestCode, header: &impl WriteHeader) -> Self {
        let mut cmd = RemotingCommand::request(code);
        header.write_header(&mut cmd.ext_fields);
        cmd
    }

    /// A response to the request with `opaque`.
    pub fn response(code: ResponseCode, opaque: i32, remark: Option<String>) -> Self {
        RemotingCommand {
            code: code.0,
            language: LanguageCode::RUST,
            version: CURRENT_VERSION,
            opaque,
            flag: RESPONSE_FLAG,
            remark,
            ext_fields: ExtFields::new(),
            body: Vec::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// Sets the body (builder style).
    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    /// Whether this frame is a response.
    pub fn is_response(&self) -> bool {
        self.flag & RESPONSE_FLAG != 0
    }

    /// Whether this request expects no response.
    pub fn is_oneway(&self) -> bool {
        self.flag & ONEWAY_FLAG != 0
    }

    /// Marks this request as oneway.
    pub fn mark_oneway(&mut self) {
        self.flag |= ONEWAY_FLAG;
    }

    /// The code read as a response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode(self.code)
    }

    /// The code read as a request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode(self.code)
    }

    /// A command as a header decoder read it; [`RemotingCommand::decode`] sets the body
    /// and the serialize type.
    pub(super) fn from_header(
        code: i32,
        language: LanguageCode,
        version: i32,
        opaque: i32,
        flag: i32,
        remark: Option<String>,
        ext_fields: ExtFields,
    ) -> Self {
        RemotingCommand {
            code,
            language,
            version,
            opaque,
            flag,
            remark,
            ext_fields,
            body: Vec::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// Decodes the typed header from the fields.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, DecodeError> {
        H::read_from(&self.ext_fields)
    }

    /// Appends the whole frame (length prefix included) to `buf`.
    ///
    /// A code that does not fit the binary header's i16 is sent with a JSON header: the
    /// peer reads the type per frame, so this is always understood.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        self.encode_with_body(&self.body, buf);
    }

    /// [`encode`](Self::encode) with `body` in place of `self.body`.
    fn encode_with_body(&self, body: &[u8], buf: &mut Vec<u8>) {
        let Ok(()) = self.encode_with_body_from(buf, append(body));
    }

    /// [`encode`](Self::encode) with the body `write_body` appends in place of `self.body`.
    fn encode_with_body_from<E>(
        &self,
        buf: &mut Vec<u8>,
        write_body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = buf.len();
        buf.extend_from_slice(&[0u8; 8]); // length + header mark, back-filled
        let ty = match self.serialize_type {
            SerializeType::RocketMq if i16::try_from(self.code).is_ok() => {
                self.encode_binary_header(buf);
                SerializeType::RocketMq
            }
            _ => {
                json_header::encode(self, buf);
                SerializeType::Json
            }
        };
        finish_frame(buf, start, ty, write_body)
    }

    /// Appends a request frame (length prefix included) straight from a typed header: the
    /// same bytes as `request_with_header(code, header)` with this `opaque`, `flag` and
    /// body, encoded with [`to_frame`](Self::to_frame), but with the ROCKETMQ header the
    /// fields go from the header to `buf` without an [`ExtFields`] between them.
    pub fn encode_request(
        code: RequestCode,
        header: &impl WriteHeader,
        opaque: i32,
        flag: i32,
        body: &[u8],
        ty: SerializeType,
        buf: &mut Vec<u8>,
    ) {
        let head = RequestHead {
            code,
            opaque,
            flag,
            ty,
        };
        let Ok(()) = Self::encode_request_from(head, header, body.len(), buf, append(body));
    }

    /// [`encode_request`](Self::encode_request) with the body `write_body` appends to the
    /// frame, `body_len` bytes, instead of one copied in: a batch is encoded straight
    /// into its frame. On an error `buf` holds part of a frame.
    pub(crate) fn encode_request_from<E>(
        head: RequestHead,
        header: &impl WriteHeader,
        body_len: usize,
        buf: &mut Vec<u8>,
        write_body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let RequestHead {
            code,
            opaque,
            flag,
            ty,
        } = head;
        let code16 = match (i16::try_from(code.0), ty) {
            (Ok(c), SerializeType::RocketMq) => c.to_be_bytes(),
            // The JSON header (and codes beyond i16) through the fields and the usual
            // writer.
            _ => {
                let mut cmd = RemotingCommand::request_with_header(code, header);
                cmd.opaque = opaque;
                cmd.flag = flag;
                cmd.serialize_type = SerializeType::Json;
                buf.reserve(8 + cmd.header_len_hint() + body_len);
                return cmd.encode_with_body_from(buf, write_body);
            }
        };
        let start = buf.len();
        buf.reserve(8 + BINARY_FIXED_LEN + header.binary_ext_len_hint() + body_len);
        buf.extend_from_slice(&[0u8; 8]); // length + header mark, back-filled
        let [c0, c1] = code16;
        let [v0, v1] = (CURRENT_VERSION as i16).to_be_bytes();
        let [o0, o1, o2, o3] = opaque.to_be_bytes();
        let [f0, f1, f2, f3] = flag.to_be_bytes();
        // No remark; the ext length is back-filled.
        let lang = LanguageCode::RUST.0;
        buf.extend_from_slice(&[
            c0, c1, lang, v0, v1, o0, o1, o2, o3, f0, f1, f2, f3, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let ext_at = buf.len();
        header.write_binary_ext(buf);
        let ext_len = (buf.len() - ext_at) as u32;
        buf[ext_at - 4..ext_at].copy_from_slice(&ext_len.to_be_bytes());
        finish_frame(buf, start, SerializeType::RocketMq, write_body)
    }

    /// The encoded frame as a new vector.
    pub fn to_frame(&self) -> Vec<u8> {
        self.to_frame_in(Vec::new())
    }

    /// [`to_frame`](Self::to_frame) in `buf` (emptied first): its capacity is reused.
    pub(crate) fn to_frame_in(&self, mut buf: Vec<u8>) -> Vec<u8> {
        buf.clear();
        buf.reserve(8 + self.header_len_hint() + self.body.len());
        self.encode(&mut buf);
        buf
    }

    /// The binary header's exact length; room for the JSON one unless much is escaped.
    fn header_len_hint(&self) -> usize {
        let remark = self.remark.as_ref().map_or(0, String::len);
        let fields = self.ext_fields.text_len();
        match self.serialize_type {
            SerializeType::RocketMq => {
                BINARY_FIXED_LEN + remark + fields + 6 * self.ext_fields.len()
            }
            // The property separators are control characters, escaped in six bytes.
            SerializeType::Json => {
                160 + remark
                    + fields
                    + 16 * self.ext_fields.len()
                    + 5 * self.ext_fields.control_chars()
            }
        }
    }

    fn encode_binary_header(&self, buf: &mut Vec<u8>) {
        // Caller checked that the code fits.
        buf.extend_from_slice(&(self.code as i16).to_be_bytes());
        buf.push(self.language.0);
        buf.extend_from_slice(&(self.version.clamp(0, i16::MAX as i32) as i16).to_be_bytes());
        buf.extend_from_slice(&self.opaque.to_be_bytes());
        buf.extend_from_slice(&self.flag.to_be_bytes());
        match &self.remark {
            Some(r) if !r.is_empty() => {
                buf.extend_from_slice(&(r.len() as i32).to_be_bytes());
                buf.extend_from_slice(r.as_bytes());
            }
            _ => buf.extend_from_slice(&0i32.to_be_bytes()),
        }
        let len_at = buf.len();
        buf.extend_from_slice(&0i32.to_be_bytes());
        for (k, v) in self.ext_fields.iter_bytes() {
            write_binary_entry(buf, k, v);
        }
        let ext_len = (buf.len() - len_at - 4) as i32;
        buf[len_at..len_at + 4].copy_from_slice(&ext_len.to_be_bytes());
    }

    /// Decodes one frame *without* its 4-byte length prefix (what [`frame_len`] measured).
    pub fn decode(frame: &[u8]) -> Result<RemotingCommand, DecodeError> {
        let (ty, header, body) = split_frame(frame)?;
        let mut cmd = match ty {
            SerializeType::Json => json_header::decode(header)?,
            SerializeType::RocketMq => decode_binary_header(header)?,
        };
        cmd.serialize_type = ty;
        cmd.body = body.to_vec();
        Ok(cmd)
    }
}

/// A body writer for [`finish_frame`] that copies `body` in.
fn append(body: &[u8]) -> impl FnOnce(&mut Vec<u8>) -> Result<(), std::convert::Infallible> + '_ {
    move |buf| {
        buf.extend_from_slice(body);
        Ok(())
    }
}

/// What a request frame carries besides its header and body
/// ([`RemotingCommand::encode_request_from`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestHead {
    pub(crate) code: RequestCode,
    pub(crate) opaque: i32,
    pub(crate) flag: i32,
    pub(crate) ty: SerializeType,
}

/// Appends the body `write_body` writes to the frame begun at `start` (with a placeholder
/// for its length prefix and header mark, its header ending the buffer), then back-fills
/// those two.
#[inline]
fn finish_frame<E>(
    buf: &mut Vec<u8>,
    start: usize,
    ty: SerializeType,
    write_body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let header_len = buf.len() - start - 8;
    write_body(buf)?;
    let total = buf.len() - start - 4;
    // Lengths that do not fit are the caller's bug; the peer would reject the frame,
    // and the I/O layer checks frame size before queueing.
    let mark = (u32::from(ty.code()) << 24) | (header_len as u32 & MAX_HEADER_LEN as u32);
    buf[start..start + 4].copy_from_slice(&(total as u32).to_be_bytes());
    buf[start + 4..start + 8].copy_from_slice(&mark.to_be_bytes());
    Ok(())
}

/// One binary `extFields` entry: `[key len i16][key][value len i32][value]`.
#[inline]
pub(crate) fn write_binary_entry(buf: &mut Vec<u8>, k: &[u8], v: &[u8]) {
    // The binary layout cannot carry keys longer than i16; such a key is a bug in our
    // header definitions, not user input, so truncating is not an option: skip.
    let Ok(klen) = i16::try_from(k.len()) else {
        return;
    };
    let [l0, l1, l2, l3] = (v.len() as i32).to_be_bytes();
    // One-letter keys (most of SEND_MESSAGE_V2) with the value's length in one copy,
    // and one-letter values too.
    match (k, v) {
        (&[kb], &[vb]) => buf.extend_from_slice(&[0, 1, kb, 0, 0, 0, 1, vb]),
        (&[kb], _) => {
            buf.extend_from_slice(&[0, 1, kb, l0, l1, l2, l3]);
            buf.extend_from_slice(v);
        }
        _ => {
            buf.extend_from_slice(&klen.to_be_bytes());
            buf.extend_from_slice(k);
            buf.extend_from_slice(&[l0, l1, l2, l3]);
            buf.extend_from_slice(v);
        }
    }
}

/// One binary `extFields` entry from a typed header's value, integers formatted in place
/// (`command_header!`'s borrowed twins).
#[doc(hidden)]
#[inline]
pub fn write_binary_text(buf: &mut Vec<u8>, key: &str, value: ExtText<'_>) {
    let mut digits = [0u8; 20];
    let v: &[u8] = match value {
        ExtText::Str(s) => s.as_bytes(),
        ExtText::Int(n @ 0..=9) => &[b'0' + n as u8],
        ExtText::Int(n) => int_bytes(n, &mut digits),
        ExtText::Bool(true) => b"true",
        ExtText::Bool(false) => b"false",
    };
    write_binary_entry(buf, key.as_bytes(), v);
}

/// A frame without its length prefix split into its header type, header and body.
pub(super) fn split_frame(frame: &[u8]) -> Result<(SerializeType, &[u8], &[u8]), DecodeError> {
    let mut r = Reader::new(frame);
    let mark = r.u32()?;
    let header_len = (mark & MAX_HEADER_LEN as u32) as usize;
    let ty_code = (mark >> 24) as u8;
    let header = r.bytes(header_len)?;
    let body = r.rest();
    let ty = SerializeType::from_code(ty_code)
        .ok_or_else(|| DecodeError::new(format!("unknown serialize type {ty_code}")))?;
    Ok((ty, header, body))
}

/// The fixed fields of a binary header, its remark and its `extFields` block.
pub(super) struct BinaryHeader<'a> {
    pub(super) code: i32,
    pub(super) language: LanguageCode,
    pub(super) version: i32,
    pub(super) opaque: i32,
    pub(super) flag: i32,
    pub(super) remark: Option<&'a str>,
    pub(super) ext: &'a [u8],
}

/// Splits a binary header, checking every length; the block is left to decode.
pub(super) fn split_binary_header(header: &[u8]) -> Result<BinaryHeader<'_>, DecodeError> {
    if header.len() < BINARY_FIXED_LEN {
        return Err(DecodeError::new(format!(
            "binary header of {} bytes is shorter than {BINARY_FIXED_LEN}",
            header.len()
        )));
    }
    let mut r = Reader::new(header);
    let code = i32::from(r.i16()?);
    let language = LanguageCode(r.u8()?);
    let version = i32::from(r.i16()?);
    let opaque = r.i32()?;
    let flag = r.i32()?;
    let remark_len = r.len_i32()?;
    let remark = if remark_len > 0 {
        Some(r.str(remark_len)?)
    } else {
        None
    };
    let ext_len = r.len_i32()?;
    let ext = r.bytes(ext_len)?;
    if !r.is_empty() {
        return Err(DecodeError::new(format!(
            "{} trailing bytes after the binary header",
            r.remaining()
        )));
    }
    Ok(BinaryHeader {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext,
    })
}

/// Measures the frame at the start of `buf`.
///
/// Returns `Ok(None)` until the 4-byte prefix is complete, then `Ok(Some(n))` where `n` is
/// the length of the frame after the prefix. A length below the 4-byte header mark or above
/// `max_frame` is an error: the connection must be closed.
pub fn frame_len(buf: &[u8], max_frame: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len < 4 {
        return Err(DecodeError::new(format!("frame length {len} is too small")));
    }
    let len = len as usize;
    if len > max_frame {
        return Err(DecodeError::new(format!(
            "frame length {len} exceeds the maximum {max_frame}"
        )));
    }
    Ok(Some(len))
}

fn decode_binary_header(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let h = split_binary_header(header)?;
    let ext_fields = decode_binary_ext(h.ext)?;
    Ok(RemotingCommand::from_header(
        h.code,
        h.language,
        h.version,
        h.opaque,
        h.flag,
        h.remark.map(str::to_string),
        ext_fields,
    ))
}

/// The binary `extFields`: `[key len i16][key][value len i32][value]` repeated.
fn decode_binary_ext(block: &[u8]) -> Result<ExtFields, DecodeError> {
    // Every kept entry takes at least 8 bytes; the cap bounds what a hostile length buys.
    let entries = (block.len() / 8).min(32);
    if let Some(ext) = std::str::from_utf8(block)
        .ok()
        .filter(|text| text.is_ascii())
        .and_then(|text| decode_ascii_ext(text, entries))
    {
        return Ok(ext);
    }
    decode_checked_ext(block, entries)
}

/// Non-ASCII text, long lengths or a malformed block: field by field, with the errors.
fn decode_checked_ext(block: &[u8], entries: usize) -> Result<ExtFields, DecodeError> {
    let mut ext = ExtFields::with_capacity(entries, block.len());
    let mut r = Reader::new(block);
    while !r.is_empty() {
        let klen = r.len_i16()?;
        let key = r.bytes(klen)?;
        let vlen = r.len_i32()?;
        let value = r.bytes(vlen)?;
        let key = utf8(key)?;
        let value = utf8(value)?;
        // Java turns empty keys and values into nulls, which a HashMap then drops.
        if !key.is_empty() && !value.is_empty() {
            ext.insert(key, value);
        }
    }
    Ok(ext)
}

/// The usual block, all ASCII (short lengths, ASCII text): one copy of it holds every key
/// and value, and every index is a char boundary. `None` when a length does not fit.
fn decode_ascii_ext(text: &str, entries: usize) -> Option<ExtFields> {
    let b = text.as_bytes();
    let mut ext = ExtFields::from_text(text.to_string(), entries);
    let mut at = 0;
    while at < b.len() {
        // ASCII bytes have no sign bit: both lengths are non-negative.
        let klen = usize::from(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]));
        let key = at + 2..at + 2 + klen;
        let v = key.end + 4;
        let vlen = u32::from_be_bytes(b.get(key.end..v)?.try_into().ok()?) as usize;
        let end = v + vlen;
        if end > b.len() {
            return None;
        }
        if klen > 0 && vlen > 0 {
            ext.commit_key_value(key, v..end);
        }
        at = end;
    }
    Some(ext)
}

fn utf8(b: &[u8]) -> Result<&str, DecodeError> {
    std::str::from_utf8(b).map_err(|_| DecodeError::new("string is not UTF-8"))
}

/// A bounds-checked big-endian reader over a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.short(n));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    #[inline]
    pub(crate) fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    #[inline]
    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An i32 length that must be non-negative and fit in what is left.
    #[inline]
    pub(crate) fn len_i32(&mut self) -> Result<usize, DecodeError> {
        let n = self.i32()?;
        self.check_len(i64::from(n))
    }

    /// An i16 length that must be non-negative and fit in what is left.
    #[inline]
    pub(crate) fn len_i16(&mut self) -> Result<usize, DecodeError> {
        let n = self.i16()?;
        self.check_len(i64::from(n))
    }

    #[inline]
    fn check_len(&self, n: i64) -> Result<usize, DecodeError> {
        if n < 0 || n as u64 > self.remaining() as u64 {
            return Err(self.bad_len(n));
        }
        Ok(n as usize)
    }

    #[inline]
    pub(crate) fn str(&mut self, n: usize) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes(n)?).map_err(|_| DecodeError::new("string is not UTF-8"))
    }

    #[cold]
    fn short(&self, n: usize) -> DecodeError {
        DecodeError::new(format!(
            "need {n} bytes at offset {}, only {} left",
            self.pos,
            self.remaining()
        ))
    }

    #[cold]
    fn bad_len(&self, n: i64) -> DecodeError {
        DecodeError::new(format!(
            "length {n} at offset {} exceeds the {} bytes left",
            self.pos,
            self.remaining()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ty: SerializeType) -> RemotingCommand {
        let mut c = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC);
        c.opaque = 7;
        c.serialize_type = ty;
        c.ext_fields.insert("topic", "TopicTest");
        c.ext_fields.insert("i", "TAGS\u{1}a\u{2}KEYS\u{1}k\"\\");
        c.body = b"hello".to_vec();
        c
    }

    fn round_trip(c: &RemotingCommand) -> RemotingCommand {
        let frame = c.to_frame();
        let n = frame_len(&frame, DEFAULT_MAX_FRAME).unwrap().unwrap();
        assert_eq!(n + 4, frame.len());
        RemotingCommand::decode(&frame[4..]).unwrap()
    }

    proptest::proptest! {
        #[test]
        fn any_command_round_trips_in_both_header_encodings(
            code in -32768i32..32768,
            opaque in proptest::prelude::any::<i32>(),
            flag in 0i32..4,
            remark in proptest::option::of("[^\u{0}]{1,40}"),
            fields in proptest::collection::btree_map("[a-zA-Z]{1,12}", ".{1,30}", 0..8),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            binary in proptest::prelude::any::<bool>(),
        ) {
            let mut c = RemotingCommand::request(RequestCode(code));
            c.opaque = opaque;
            c.flag = flag;
            c.remark = remark;
            for (k, v) in fields {
                c.ext_fields.insert(k, v);
            }
            c.body = body;
            c.serialize_type = if binary { SerializeType::RocketMq } else { SerializeType::Json };
            let frame = c.to_frame();
            let n = frame_len(&frame, DEFAULT_MAX_FRAME).unwrap().unwrap();
            proptest::prop_assert_eq!(n + 4, frame.len());
            let back = RemotingCommand::decode(&frame[4..]).unwrap();
            proptest::prop_assert_eq!(back, c);
        }
    }

    #[test]
    fn json_header_matches_fastjson_shape() {
        let mut c = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC);
        c.opaque = 3;
        c.language = LanguageCode::JAVA;
        c.ext_fields.insert("topic", "TopicTest");
        let frame = c.to_frame();
        let header = &frame[8..];
        assert_eq!(
            std::str::from_utf8(header).unwrap(),
            r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":409}"#
        );
        assert_eq!(&frame[4..8], &(header.len() as u32).to_be_bytes());
    }

    #[test]
    fn control_characters_are_escaped_like_fastjson() {
        let mut buf = Vec::new();
        json_header::write_string(&mut buf, "A\u{1}B\u{2}\n\"".as_bytes());
        assert_eq!(
            std::str::from_utf8(&buf).unwrap(),
            r#""A\u0001B\u0002\n\"""#
        );
    }

    #[test]
    fn both_header_types_round_trip() {
        for ty in [SerializeType::Json, SerializeType::RocketMq] {
            let c = sample(ty);
            assert_eq!(round_trip(&c), c, "{ty:?}");
        }
    }

    #[test]
    fn direct_request_encoding_is_byte_for_byte_the_command_encoding() {
        use crate::protocol::header::{GetRouteInfoRequestHeader, SendMessageRequestHeaderV2Ref};
        let full = SendMessageRequestHeaderV2Ref {
            producer_group: "please_rename_unique_group_name",
            topic: "TopicTest",
            default_topic: "TBW102",
            default_topic_queue_nums: 4,
            queue_id: 13,
            sys_flag: -1,
            born_timestamp: 1_718_000_000_123,
            flag: i32::MIN,
            properties: Some("TAGS\u{1}Tag \"é\"\u{2}WAIT\u{1}true\u{2}"),
            reconsume_times: Some(16),
            unit_mode: true,
            max_reconsume_times: Some(-1),
            batch: true,
            broker_name: Some(""),
        };
        let bare = SendMessageRequestHeaderV2Ref {
            properties: None,
            reconsume_times: None,
            max_reconsume_times: None,
            broker_name: None,
            unit_mode: false,
            batch: false,
            sys_flag: 0,
            flag: 9,
            born_timestamp: 0,
            ..full
        };
        let long_value = "v".repeat(70_000);
        let long = SendMessageRequestHeaderV2Ref {
            properties: Some(&long_value),
            ..full
        };
        let route = GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: Some(true),
        };
        let bodies: [&[u8]; 3] = [b"", b"x", &[0xff; 300]];
        for ty in [SerializeType::RocketMq, SerializeType::Json] {
            for body in bodies {
                for (code, flag) in [
                    (RequestCode::SEND_MESSAGE_V2, 0),
                    (RequestCode::SEND_BATCH_MESSAGE, ONEWAY_FLAG),
                    (RequestCode(i32::from(i16::MAX) + 1), 0),
                ] {
                    let expected = |h: &dyn Fn() -> RemotingCommand| {
                        let mut cmd = h().with_body(body.to_vec());
                        cmd.opaque = 77;
                        cmd.flag = flag;
                        cmd.serialize_type = ty;
                        cmd.to_frame()
                    };
                    let direct = |h: &dyn Fn(&mut Vec<u8>)| {
                        // After other bytes: the frame is appended, not written at 0.
                        let mut buf = b"xyz".to_vec();
                        h(&mut buf);
                        buf.split_off(3)
                    };
                    for h in [&full, &bare, &long] {
                        assert_eq!(
                            direct(&|buf| RemotingCommand::encode_request(
                                code, h, 77, flag, body, ty, buf
                            )),
                            expected(&|| RemotingCommand::request_with_header(code, h)),
                            "{ty:?} {code:?} {h:?}"
                        );
                    }
                    // A header without a borrowed twin goes through its fields.
                    assert_eq!(
                        direct(&|buf| RemotingCommand::encode_request(
                            code, &route, 77, flag, body, ty, buf
                        )),
                        expected(&|| RemotingCommand::request_with_header(code, &route)),
                    );
                }
            }
        }
    }

    #[test]
    fn a_body_written_into_the_frame_is_the_frame_of_that_body_and_its_error_ends_it() {
        let route = crate::protocol::header::GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: None,
        };
        let body = [9u8; 5000];
        for ty in [SerializeType::RocketMq, SerializeType::Json] {
            for code in [
                RequestCode::SEND_BATCH_MESSAGE,
                RequestCode(i32::from(i16::MAX) + 1),
            ] {
                let mut expected = Vec::new();
                RemotingCommand::encode_request(code, &route, 5, 0, &body, ty, &mut expected);
                let head = RequestHead {
                    code,
                    opaque: 5,
                    flag: 0,
                    ty,
                };
                // The length is a hint for the buffer: a wrong one changes no byte.
                for hint in [body.len(), 0] {
                    let mut got = b"xy".to_vec();
                    let written: Result<(), &str> =
                        RemotingCommand::encode_request_from(head, &route, hint, &mut got, |b| {
                            b.extend_from_slice(&body[..1000]);
                            b.extend_from_slice(&body[1000..]);
                            Ok(())
                        });
                    assert_eq!(written, Ok(()));
                    assert_eq!(&got[2..], &expected[..], "{ty:?} {code:?} hint {hint}");
                }
                let failed = RemotingCommand::encode_request_from(
                    head,
                    &route,
                    body.len(),
                    &mut Vec::new(),
                    |_| Err("record 2 too big"),
                );
                assert_eq!(failed, Err("record 2 too big"));
            }
        }
    }

    #[test]
    fn binary_header_layout_is_java_layout() {
        let mut c = RemotingCommand::request(RequestCode(34));
        c.opaque = 0x01020304;
        c.serialize_type = SerializeType::RocketMq;
        c.ext_fields.insert("k", "vv");
        let f = c.to_frame();
        assert_eq!(f[4], 1, "serialize type byte");
        let h = &f[8..];
        assert_eq!(&h[0..2], &34i16.to_be_bytes());
        assert_eq!(h[2], 12, "RUST");
        assert_eq!(&h[3..5], &409i16.to_be_bytes());
        assert_eq!(&h[5..9], &[1, 2, 3, 4]);
        assert_eq!(&h[9..13], &0i32.to_be_bytes());
        assert_eq!(&h[13..17], &0i32.to_be_bytes(), "no remark");
        assert_eq!(&h[17..21], &9i32.to_be_bytes(), "ext map bytes");
        assert_eq!(&h[21..], &[0, 1, b'k', 0, 0, 0, 2, b'v', b'v']);
    }

    /// A binary extFields block from (key, value) pairs, repeats and empties included.
    fn ext_block(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (k, v) in pairs {
            b.extend_from_slice(&(k.len() as i16).to_be_bytes());
            b.extend_from_slice(k.as_bytes());
            b.extend_from_slice(&(v.len() as i32).to_be_bytes());
            b.extend_from_slice(v.as_bytes());
        }
        b
    }

    #[test]
    fn binary_ext_blocks_decode_alike_on_both_paths() {
        let long = "x".repeat(200); // a length byte above 127: not the ASCII path
        let cases: [&[(&str, &str)]; 4] = [
            &[("a", "1"), ("b", ""), ("", "c"), ("a", "2"), ("dd", "v")],
            &[("topic", "T"), ("i", &long)],
            &[("k", "caf\u{e9}"), ("\u{4e2d}", "v")],
            &[],
        ];
        for pairs in cases {
            let block = ext_block(pairs);
            let ext = decode_binary_ext(&block).unwrap();
            let mut expected = ExtFields::new();
            for (k, v) in pairs.iter().filter(|(k, v)| !k.is_empty() && !v.is_empty()) {
                expected.insert(k, v);
            }
            assert_eq!(ext, expected, "{pairs:?}");
            if let Ok(text) = std::str::from_utf8(&block) {
                if let Some(fast) = decode_ascii_ext(text, 4) {
                    assert_eq!(fast, expected, "{pairs:?}");
                    assert_eq!(
                        fast.iter().collect::<Vec<_>>(),
                        ext.iter().collect::<Vec<_>>()
                    );
                }
            }
        }
        assert_eq!(
            decode_binary_ext(&ext_block(&[("a", "1"), ("dd", "v")]))
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            [("a", "1"), ("dd", "v")]
        );
        // Random edits: whenever the ASCII walk answers, the checked path agrees.
        let seed = ext_block(&[("a", "grp"), ("b", "T"), ("i", "TAGS\u{1}x"), ("e", "3")]);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut answered = 0;
        for _ in 0..20_000 {
            let mut b = seed.clone();
            for _ in 0..2 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % b.len() as u64) as usize;
                b[at] = (x >> 32) as u8 & 0x7f;
            }
            let Ok(text) = std::str::from_utf8(&b) else {
                continue;
            };
            if let Some(fast) = decode_ascii_ext(text, 4) {
                answered += 1;
                assert_eq!(decode_checked_ext(&b, 4).ok(), Some(fast), "{b:?}");
            }
        }
        assert!(answered > 1_000, "{answered}");
        // Truncated blocks are errors on the slow path, whatever the fast path thought.
        let block = ext_block(&[("key", "value")]);
        for cut in 1..block.len() {
            assert!(decode_binary_ext(&block[..cut]).is_err(), "{cut}");
        }
    }

    #[test]
    fn a_code_too_big_for_binary_goes_as_json() {
        let mut c = RemotingCommand::request(RequestCode(200050));
        c.serialize_type = SerializeType::RocketMq;
        let back = round_trip(&c);
        assert_eq!(back.serialize_type, SerializeType::Json);
        assert_eq!(back.code, 200050);
    }

    #[test]
    fn binary_empty_values_become_absent_like_java() {
        let mut c = sample(SerializeType::RocketMq);
        c.ext_fields.insert("empty", "");
        c.remark = Some(String::new());
        let back = round_trip(&c);
        assert_eq!(back.ext_fields.get("empty"), None);
        assert_eq!(back.remark, None);
    }

    #[test]
    fn frame_len_rejects_bad_lengths() {
        assert_eq!(frame_len(&[0, 0, 0], 100).unwrap(), None);
        assert!(frame_len(&[0, 0, 0, 3], 100).is_err());
        assert!(frame_len(&[0xff, 0xff, 0xff, 0xff], 100).is_err());
        assert!(frame_len(&[0, 0, 0, 101], 100).is_err());
        assert_eq!(frame_len(&[0, 0, 0, 100], 100).unwrap(), Some(100));
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let cases: &[&[u8]] = &[
            &[],
            &[0, 0, 0],
            &[0, 0, 0, 10],                  // header longer than frame
            &[2, 0, 0, 0],                   // unknown serialize type
            &[0, 0, 0, 2, b'{', b'}'],       // JSON without code
            &[1, 0, 0, 5, 0, 1, 2, 3, 4],    // binary header too short
            &[0, 0, 0, 4, 0xff, 0xfe, 0, 0], // not JSON
        ];
        for c in cases {
            assert!(RemotingCommand::decode(c).is_err(), "{c:?}");
        }
        // Binary header whose remark length points past the end.
        let mut c = sample(SerializeType::RocketMq).to_frame();
        c[8 + 13..8 + 17].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(RemotingCommand::decode(&c[4..]).is_err());
        // Negative ext entry length.
        let mut c = sample(SerializeType::RocketMq).to_frame();
        c[8 + 21..8 + 23].copy_from_slice(&(-1i16).to_be_bytes());
        assert!(RemotingCommand::decode(&c[4..]).is_err());
    }

    #[test]
    fn json_header_tolerates_non_string_ext_values_and_unknown_keys() {
        let h = br#"{"code":0,"extFields":{"a":1,"b":true,"c":null},"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":479,"new":[1]}"#;
        let mut frame = (h.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(h);
        let c = RemotingCommand::decode(&frame).unwrap();
        assert_eq!(c.ext_fields.get("a"), Some("1"));
        assert_eq!(c.ext_fields.get("b"), Some("true"));
        assert_eq!(c.ext_fields.get("c"), None);
        assert!(c.is_response());
        assert_eq!(c.version, 479);
    }
}
