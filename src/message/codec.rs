//! Byte formats of messages: the stored record (pull bodies and friends), the batch
//! record (`SEND_BATCH_MESSAGE` bodies), the property string, offsetMsgIds and zlib bodies.
//!
//! Layouts follow Java's `MessageDecoder` (4.9.8, plus the 5.x V2 magic code). Decoders
//! check every length against what is left and against the record's `TOTALSIZE`. The
//! strict ones stop at the first malformed record with a [`DecodeError`] (unlike Java,
//! which silently returns the records before it); pulls use
//! [`decode_messages_lenient`], which skips and reports a record it cannot decode, so one
//! bad message can neither stall its queue nor take its neighbours with it.

use std::borrow::Cow;
#[cfg(any(test, feature = "unstable-internals"))]
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use flate2::write::ZlibEncoder;
use flate2::{Compression, Crc, Decompress, FlushDecompress, Status};

use super::{sys_flag, Message, MessageExt};
use crate::error::Error;
use crate::protocol::{DecodeError, Reader};

/// Magic code of a stored record with an i8 topic length (Java `MESSAGE_MAGIC_CODE`).
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic code of a stored record with an i16 topic length (5.x `MESSAGE_MAGIC_CODE_V2`).
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Default cap on one decompressed body (the remoting frame limit).
pub const DEFAULT_MAX_BODY_LEN: usize = 16 * 1024 * 1024;
/// Default cap on all bodies one [`decode_messages`] call decompresses.
pub const DEFAULT_MAX_TOTAL_BODY_LEN: usize = 256 * 1024 * 1024;
/// zlib level of Java's producer (`rocketmq.message.compressLevel`).
#[cfg(any(test, feature = "unstable-internals"))]
pub const DEFAULT_COMPRESS_LEVEL: u32 = 5;

pub(super) const NAME_VALUE_SEPARATOR: char = '\u{1}';
pub(super) const PROPERTY_SEPARATOR: char = '\u{2}';

/// Stored-record fields other than the two hosts, the body, the topic and the properties:
/// total, magic, crc, queue id, flag, queue offset, physical offset, sys flag, born
/// timestamp, store timestamp, reconsume times, prepared transaction offset.
const RECORD_FIXED_LEN: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 8;
/// The smallest possible record: IPv4 hosts, empty body, topic and properties (V1).
const RECORD_MIN_LEN: usize = RECORD_FIXED_LEN + 8 + 8 + 4 + 1 + 2;
/// Batch record: total, magic, crc, flag, body length, properties length.
const BATCH_FIXED_LEN: usize = 4 + 4 + 4 + 4 + 4 + 2;

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// What [`decode_messages`] does beyond parsing.
///
/// The default matches the 4.9.8 Java client: bodies are decompressed, CRCs are not
/// checked. Caps bound what a hostile body can make us allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// Decompress bodies whose `sysFlag` has [`sys_flag::COMPRESSED`] (default true).
    pub decompress: bool,
    /// Compare `crc32(stored body) & 0x7FFFFFFF` with `BODYCRC` (default false).
    pub check_crc: bool,
    /// Largest decompressed body accepted (default [`DEFAULT_MAX_BODY_LEN`]).
    pub max_body_len: usize,
    /// Largest sum of decompressed bodies in one call (default [`DEFAULT_MAX_TOTAL_BODY_LEN`]).
    pub max_total_body_len: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            decompress: true,
            check_crc: false,
            max_body_len: DEFAULT_MAX_BODY_LEN,
            max_total_body_len: DEFAULT_MAX_TOTAL_BODY_LEN,
        }
    }
}

impl DecodeOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`DecodeOptions::decompress`].
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn decompress(mut self, on: bool) -> Self {
        self.decompress = on;
        self
    }

    /// Sets [`DecodeOptions::check_crc`].
    pub fn check_crc(mut self, on: bool) -> Self {
        self.check_crc = on;
        self
    }

    /// Sets [`DecodeOptions::max_body_len`].
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn max_body_len(mut self, len: usize) -> Self {
        self.max_body_len = len;
        self
    }

    /// Sets [`DecodeOptions::max_total_body_len`].
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn max_total_body_len(mut self, len: usize) -> Self {
        self.max_total_body_len = len;
        self
    }
}

/// Java `messageProperties2String`: `name 0x01 value` joined by `0x02`, no trailing `0x02`.
///
/// The iterator is cloned once to measure the text: give it one that borrows (a `Vec`'s
/// own iterator copies the vector when cloned).
pub fn properties_to_string<'a, I>(properties: I) -> String
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
    I::IntoIter: Clone,
{
    let properties = properties.into_iter();
    // Exactly the length: one allocation, no regrowth.
    let len = properties
        .clone()
        .map(|(name, value)| name.len() + value.len() + 2)
        .sum::<usize>();
    let mut s = String::with_capacity(len.saturating_sub(1));
    for (name, value) in properties {
        if !s.is_empty() {
            s.push(PROPERTY_SEPARATOR);
        }
        s.push_str(name);
        s.push(NAME_VALUE_SEPARATOR);
        s.push_str(value);
    }
    s
}

/// Java `string2messageProperties`.
///
/// Splits on `0x02` and keeps a segment only when its first `0x01` is neither its first
/// nor its last character: empty names and values are dropped, and so is a trailing
/// `0x02` (which clients up to 4.9.0 send). The value may contain further `0x01`s. A
/// repeated name keeps the last value, as Java's `HashMap` does.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn string_to_properties(s: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let bytes = s.as_bytes();
    let mut start = 0;
    while start <= bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|&b| b == PROPERTY_SEPARATOR as u8)
            .map_or(bytes.len(), |i| start + i);
        let segment = &bytes[start..end];
        // Both separators are ASCII, so these byte positions are char boundaries.
        if let Some(i) = segment
            .iter()
            .position(|&b| b == NAME_VALUE_SEPARATOR as u8)
        {
            if i > 0 && i + 1 < segment.len() {
                map.insert(
                    s[start..start + i].to_string(),
                    s[start + i + 1..end].to_string(),
                );
            }
        }
        start = end + 1;
    }
    map
}

/// Decodes a body of concatenated stored records (pull, query, view-by-id,
/// check-transaction and consume-directly bodies).
///
/// Record layout (all big-endian): TOTALSIZE i32 (whole record), MAGICCODE i32
/// ([`MESSAGE_MAGIC_CODE`] or [`MESSAGE_MAGIC_CODE_V2`]), BODYCRC i32, QUEUEID i32,
/// FLAG i32, QUEUEOFFSET i64, PHYSICALOFFSET i64, SYSFLAG i32, BORNTIMESTAMP i64,
/// BORNHOST (4 or 16 address bytes, by [`sys_flag::BORNHOST_V6`], + i32 port),
/// STORETIMESTAMP i64, STOREHOST (likewise, [`sys_flag::STOREHOST_V6`]), RECONSUMETIMES
/// i32, PREPARED TRANSACTION OFFSET i64, BODY (i32 length + bytes), TOPIC (i8 length,
/// i16 with the V2 magic, + bytes), PROPERTIES (i16 length + [property string](string_to_properties)).
///
/// The offsetMsgId is computed from store host and commit log offset. A decompressed
/// body keeps [`sys_flag::COMPRESSED`] in `sys_flag`, as 4.9.8 does. Topic and properties
/// are read as UTF-8 with invalid sequences replaced, as Java's `new String` does, so one
/// odd producer cannot make a queue unreadable.
///
/// Errors: an unknown magic code, a negative length, a length beyond the record or the
/// body, fields that do not add up to TOTALSIZE, a port outside 0..=65535, a CRC mismatch
/// (when checked), a corrupt or oversized compressed body, or LZ4/ZSTD compression.
pub fn decode_messages(body: &[u8], opts: DecodeOptions) -> Result<Vec<MessageExt>, DecodeError> {
    decode_all(body, None, opts)
}

/// A stored record that [`decode_messages_lenient`] could not decode and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedRecord {
    /// Its index among the body's records.
    pub index: usize,
    /// Where it starts in the body.
    pub at: usize,
    /// How many bytes were skipped: its TOTALSIZE, or the rest of the body when
    /// TOTALSIZE cannot be a record's (the records after it are lost with it).
    pub len: usize,
    /// Its QUEUEOFFSET, when its framing is plausible (a known magic code or a TOTALSIZE
    /// that fits).
    pub queue_offset: Option<i64>,
    /// Why it could not be decoded.
    pub error: DecodeError,
}

/// What [`decode_messages_lenient`] found.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// The records that decoded, in order.
    pub messages: Vec<MessageExt>,
    /// The records that did not.
    pub skipped: Vec<SkippedRecord>,
}

/// [`decode_messages`] for pull bodies: what can be decoded is, and a record that cannot
/// be (a corrupt field, a CRC mismatch when checked, a body that does not inflate or
/// inflates past the caps, a compression type other than zlib) is skipped and reported.
///
/// A record with a plausible TOTALSIZE (at least the smallest record, within the body) is
/// skipped alone and decoding goes on after it. A TOTALSIZE that cannot be a record's
/// leaves no way to find the next record, so the rest of the body is skipped as one.
///
/// Java's `MessageDecoder.decodes` catches the decode exception of a record, drops it and
/// every record after it without a word, and the pull still moves to `nextBeginOffset`;
/// here the records after it survive when the framing allows, and every loss is reported.
pub fn decode_messages_lenient(body: &[u8], opts: DecodeOptions) -> Decoded {
    decode_lenient(body, None, opts)
}

fn decode_lenient(body: &[u8], shared: Option<&Arc<Vec<u8>>>, opts: DecodeOptions) -> Decoded {
    let mut r = Reader::new(body);
    let mut out = Decoded {
        messages: Vec::with_capacity(count_records(body)),
        skipped: Vec::new(),
    };
    let mut inflate_budget = opts.max_total_body_len;
    let mut topic = None;
    while !r.is_empty() {
        let at = r.position();
        let index = out.messages.len() + out.skipped.len();
        match decode_record(&mut r, shared, &opts, &mut inflate_budget, &mut topic) {
            Ok(m) => out.messages.push(m),
            Err(e) => {
                let rest = &body[at..];
                let len = record_len(rest).unwrap_or(rest.len());
                // The record lies within `rest`, so the reader is at most at its end.
                let _ = r.bytes((at + len).saturating_sub(r.position()));
                out.skipped.push(SkippedRecord {
                    index,
                    at,
                    len,
                    queue_offset: header_queue_offset(rest),
                    error: DecodeError::new(format!("message {index} at offset {at}: {e}")),
                });
            }
        }
    }
    out
}

/// The TOTALSIZE of the record `rest` starts with, if it can be a record's.
fn record_len(rest: &[u8]) -> Option<usize> {
    let size = rest.get(..4)?;
    let size = i32::from_be_bytes([size[0], size[1], size[2], size[3]]);
    usize::try_from(size)
        .ok()
        .filter(|&n| n >= RECORD_MIN_LEN && n <= rest.len())
}

/// QUEUEOFFSET of the record `rest` starts with (at the same place in both layouts), when
/// the record's framing is plausible: a known magic code or a TOTALSIZE that fits.
fn header_queue_offset(rest: &[u8]) -> Option<i64> {
    let magic = i32::from_be_bytes(rest.get(4..8)?.try_into().ok()?);
    if magic != MESSAGE_MAGIC_CODE && magic != MESSAGE_MAGIC_CODE_V2 && record_len(rest).is_none() {
        return None;
    }
    Some(i64::from_be_bytes(rest.get(20..28)?.try_into().ok()?))
}

/// [`decode_messages_lenient`] for a pull response the caller owns: uncompressed bodies
/// become windows into `body` instead of copies.
pub(crate) fn decode_messages_shared(body: Arc<Vec<u8>>, opts: DecodeOptions) -> Decoded {
    decode_lenient(&body, Some(&body), opts)
}

/// `shared`, when given, is the buffer `body` is.
fn decode_all(
    body: &[u8],
    shared: Option<&Arc<Vec<u8>>>,
    opts: DecodeOptions,
) -> Result<Vec<MessageExt>, DecodeError> {
    let mut r = Reader::new(body);
    let mut messages = Vec::with_capacity(count_records(body));
    let mut inflate_budget = opts.max_total_body_len;
    let mut topic = None;
    while !r.is_empty() {
        let at = r.position();
        let m =
            decode_record(&mut r, shared, &opts, &mut inflate_budget, &mut topic).map_err(|e| {
                DecodeError::new(format!("message {} at offset {at}: {e}", messages.len()))
            })?;
        messages.push(m);
    }
    Ok(messages)
}

/// How many records the TOTALSIZE chain of `body` announces (only a capacity: the
/// records are checked when decoded). Stops at the first size that cannot be a record.
fn count_records(body: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    while let Some(size) = body.get(at..at + 4) {
        let size = i32::from_be_bytes([size[0], size[1], size[2], size[3]]);
        match usize::try_from(size) {
            Ok(size) if size >= RECORD_MIN_LEN && at + size <= body.len() => {
                at += size;
                n += 1;
            }
            _ => break,
        }
    }
    n
}

/// `topic` is the previous record's topic: the records of a pull share one, and a record
/// with the same bytes shares its string.
fn decode_record(
    r: &mut Reader<'_>,
    shared: Option<&Arc<Vec<u8>>>,
    opts: &DecodeOptions,
    inflate_budget: &mut usize,
    topic: &mut Option<Arc<str>>,
) -> Result<MessageExt, DecodeError> {
    let store_size = r.i32()?;
    let total = usize::try_from(store_size)
        .ok()
        .filter(|&n| n >= RECORD_MIN_LEN)
        .ok_or_else(|| {
            DecodeError::new(format!(
                "TOTALSIZE {store_size} is below the smallest record ({RECORD_MIN_LEN})"
            ))
        })?;
    // Everything below reads from this slice, so no field can reach past TOTALSIZE.
    let rec_start = r.position();
    let mut rec = Reader::new(r.bytes(total - 4)?);
    let magic = rec.i32()?;
    let v2 = match magic {
        MESSAGE_MAGIC_CODE => false,
        MESSAGE_MAGIC_CODE_V2 => true,
        other => {
            return Err(DecodeError::new(format!(
                "unknown magic code {:#010X}",
                other as u32
            )))
        }
    };
    let body_crc = rec.i32()?;
    let queue_id = rec.i32()?;
    let flag = rec.i32()?;
    let queue_offset = rec.i64()?;
    let commit_log_offset = rec.i64()?;
    let sys_flag = rec.i32()?;
    let born_timestamp = rec.i64()?;
    let born_host = read_host(&mut rec, sys_flag & sys_flag::BORNHOST_V6 != 0)?;
    let store_timestamp = rec.i64()?;
    let store_host = read_host(&mut rec, sys_flag & sys_flag::STOREHOST_V6 != 0)?;
    let reconsume_times = rec.i32()?;
    let prepared_transaction_offset = rec.i64()?;

    let body_len = rec.len_i32()?;
    let body_start = rec_start + rec.position();
    let stored = rec.bytes(body_len)?;

    let topic_len = if v2 {
        rec.len_i16()?
    } else {
        let n = rec.i8()?;
        usize::try_from(n).map_err(|_| DecodeError::new(format!("negative topic length {n}")))?
    };
    let topic_bytes = rec.bytes(topic_len)?;
    let props_len = rec.len_i16()?;
    let properties = lossy(rec.bytes(props_len)?);
    if !rec.is_empty() {
        return Err(DecodeError::new(format!(
            "TOTALSIZE {store_size} leaves {} bytes after the properties",
            rec.remaining()
        )));
    }

    // An invalid UTF-8 topic (replaced lossily) never matches its bytes, so it is never
    // shared by mistake.
    let topic = match topic {
        Some(t) if t.as_bytes() == topic_bytes => t.clone(),
        _ => topic.insert(Arc::from(lossy(topic_bytes).as_ref())).clone(),
    };

    // Checked and inflated only once the whole record parsed, so a malformed record costs
    // no decompression. Java checks and inflates only non-empty bodies.
    if opts.check_crc && !stored.is_empty() {
        let crc = body_crc32(stored);
        if crc != body_crc {
            return Err(DecodeError::new(format!(
                "body CRC {crc} does not match BODYCRC {body_crc}"
            )));
        }
    }
    let mut message =
        if opts.decompress && sys_flag & sys_flag::COMPRESSED != 0 && !stored.is_empty() {
            let kind = CompressionType::from_sys_flag(sys_flag)?;
            let inflated = if *inflate_budget < opts.max_body_len {
                kind.decompress_capped(stored, *inflate_budget, || {
                    format!(
                        "the {} bytes left of the {} allowed for all bodies",
                        *inflate_budget, opts.max_total_body_len
                    )
                })?
            } else {
                let max = opts.max_body_len;
                kind.decompress_capped(stored, max, || format!("{max} bytes"))?
            };
            *inflate_budget -= inflated.len();
            Message::decoded(topic, inflated)
        } else if let Some(buf) = shared {
            Message::with_shared_body(topic, buf.clone(), body_start..body_start + stored.len())
        } else {
            Message::decoded(topic, stored.to_vec())
        };
    message.set_flag(flag);
    message.set_properties_wire(&properties);
    Ok(MessageExt {
        message,
        broker_name: no_broker_name(),
        queue_id,
        store_size,
        queue_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        offset_msg_id: std::sync::OnceLock::new(),
        commit_log_offset,
        body_crc,
        reconsume_times,
        prepared_transaction_offset,
    })
}

/// The empty broker name of a decoded message (the record has none; the pull sets it),
/// one string for all of them.
pub(crate) fn no_broker_name() -> Arc<str> {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::from("")).clone()
}

fn read_host(r: &mut Reader<'_>, v6: bool) -> Result<SocketAddr, DecodeError> {
    let ip = if v6 {
        let b: [u8; 16] = r
            .bytes(16)?
            .try_into()
            .map_err(|_| DecodeError::new("IPv6 address"))?;
        IpAddr::V6(Ipv6Addr::from(b))
    } else {
        let b: [u8; 4] = r
            .bytes(4)?
            .try_into()
            .map_err(|_| DecodeError::new("IPv4 address"))?;
        IpAddr::V4(Ipv4Addr::from(b))
    };
    let port = r.i32()?;
    let port = u16::try_from(port)
        .map_err(|_| DecodeError::new(format!("port {port} is out of range")))?;
    Ok(SocketAddr::new(ip, port))
}

/// How a body is compressed (Java 5.x `CompressionType`): bits 8–10 of `sysFlag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompressionType {
    /// A zlib stream (RFC 1950), as every Java client writes; type 3, or 0 from clients
    /// before 4.9.4.
    #[default]
    Zlib,
    /// An LZ4 frame (Java `LZ4FrameOutputStream`); type 1.
    Lz4,
    /// A Zstandard frame (Java `ZstdOutputStream`); type 2.
    Zstd,
}

impl CompressionType {
    /// The type a compressed message's `sysFlag` names; an unknown type is an error of
    /// kind [`ErrorKind::Decode`](crate::ErrorKind::Decode).
    pub fn of_flag(flag: i32) -> crate::Result<Self> {
        Ok(Self::from_sys_flag(flag)?)
    }

    /// [`of_flag`](Self::of_flag) for the decoders, which speak `DecodeError`.
    pub(crate) fn from_sys_flag(flag: i32) -> Result<Self, DecodeError> {
        match (flag & sys_flag::COMPRESSION_TYPE_MASK) >> 8 {
            0 | 3 => Ok(CompressionType::Zlib),
            1 => Ok(CompressionType::Lz4),
            2 => Ok(CompressionType::Zstd),
            n => Err(DecodeError::new(format!("unknown compression type {n}"))),
        }
    }

    /// The `sysFlag` bits of this type.
    pub fn flag(self) -> i32 {
        match self {
            CompressionType::Zlib => sys_flag::COMPRESSION_ZLIB,
            CompressionType::Lz4 => sys_flag::COMPRESSION_LZ4,
            CompressionType::Zstd => sys_flag::COMPRESSION_ZSTD,
        }
    }

    /// Compresses `body`; `level` matters to zlib only (0..=9). LZ4 writes a frame at
    /// lz4-java's default; Zstandard its fastest level, which Java's decoder reads like
    /// any other.
    pub fn compress(self, body: &[u8], level: u32) -> Vec<u8> {
        match self {
            CompressionType::Zlib => compress(body, level),
            CompressionType::Lz4 => {
                let mut enc =
                    lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(body.len() / 2 + 64));
                // Writes to a Vec cannot fail; an empty result would be refused by any
                // decoder rather than pass as a corrupt body.
                enc.write_all(body)
                    .map_err(|_| ())
                    .and_then(|()| enc.finish().map_err(|_| ()))
                    .unwrap_or_default()
            }
            CompressionType::Zstd => {
                ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
            }
        }
    }

    /// Decompresses `data`, failing when it is corrupt or truncated or would exceed
    /// `max_len` bytes (`cap` describes that limit in the error).
    pub(crate) fn decompress_capped(
        self,
        data: &[u8],
        max_len: usize,
        cap: impl FnOnce() -> String,
    ) -> Result<Vec<u8>, DecodeError> {
        if data.is_empty() {
            // A compressor always writes a header; lz4_flex would read nothing as nothing.
            return Err(DecodeError::new(format!("empty {self:?} body")));
        }
        let out = match self {
            CompressionType::Zlib => return inflate(data, max_len, cap),
            CompressionType::Lz4 => read_at_most(
                &mut lz4_flex::frame::FrameDecoder::new(data),
                max_len,
                "LZ4",
            )?,
            CompressionType::Zstd => {
                let mut d = ruzstd::decoding::StreamingDecoder::new(data)
                    .map_err(|e| DecodeError::new(format!("corrupt Zstandard body: {e}")))?;
                read_at_most(&mut d, max_len, "Zstandard")?
            }
        };
        if out.len() > max_len {
            return Err(DecodeError::new(format!(
                "decompressed body exceeds {}",
                cap()
            )));
        }
        Ok(out)
    }

    /// Decompresses a body of this type, failing past `max_len` bytes or on a corrupt or
    /// truncated body, with an error of kind [`ErrorKind::Decode`](crate::ErrorKind::Decode).
    pub fn decompress(self, data: &[u8], max_len: usize) -> crate::Result<Vec<u8>> {
        Ok(self.decompress_capped(data, max_len, || format!("{max_len} bytes"))?)
    }
}

/// Reads `r` to its end, but never more than `max_len + 1` bytes: one byte past the cap
/// tells "too big" from "exactly the cap" without inflating a bomb.
fn read_at_most(r: &mut dyn Read, max_len: usize, what: &str) -> Result<Vec<u8>, DecodeError> {
    let limit = u64::try_from(max_len).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::with_capacity(max_len.min(64 * 1024));
    r.take(limit)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::new(format!("corrupt {what} body: {e}")))?;
    Ok(out)
}

/// `String::from_utf8_lossy`, with the (faster) strict check first for the usual valid text.
fn lossy(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// `crc32(data) & 0x7FFFFFFF`, Java `UtilAll.crc32`.
fn body_crc32(data: &[u8]) -> i32 {
    let mut crc = Crc::new();
    crc.update(data);
    (crc.sum() & 0x7FFF_FFFF) as i32
}

/// Encodes a stored record (Java `MessageDecoder.encode(msgExt, true)`); the inverse of
/// [`decode_messages`].
///
/// Differences from Java, each so that the output always decodes: TOTALSIZE and BODYCRC
/// are computed rather than copied from `store_size`/`body_crc`; the host bits of
/// `sys_flag` follow the addresses; a topic longer than 127 bytes gets the V2 magic code.
/// With [`sys_flag::COMPRESSED`] set, the body is compressed with the type the flag names
/// (zlib at level 5 for type 0 or 3; an unknown type is replaced by zlib).
///
/// Fails with `InvalidArgument` when the properties exceed 32767 bytes, the topic 32767
/// bytes, or the record 2 GiB.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn encode_message_ext(m: &MessageExt) -> Result<Vec<u8>, Error> {
    let mut flag = m.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
    if m.born_host.is_ipv6() {
        flag |= sys_flag::BORNHOST_V6;
    }
    if m.store_host.is_ipv6() {
        flag |= sys_flag::STOREHOST_V6;
    }
    let body: Cow<'_, [u8]> = if flag & sys_flag::COMPRESSED != 0 {
        let kind = CompressionType::from_sys_flag(flag).unwrap_or_else(|_| {
            flag = (flag & !sys_flag::COMPRESSION_TYPE_MASK) | sys_flag::COMPRESSION_ZLIB;
            CompressionType::Zlib
        });
        Cow::Owned(kind.compress(m.body(), DEFAULT_COMPRESS_LEVEL))
    } else {
        Cow::Borrowed(m.body())
    };
    let topic = m.topic().as_bytes();
    let v2 = topic.len() > i8::MAX as usize;
    let topic_len = i16::try_from(topic.len())
        .map_err(|_| Error::invalid_argument(format!("topic of {} bytes", topic.len())))?;
    let props_len = properties_len(m.message.properties());
    let props_i16 = props_i16(props_len)?;
    let host_len = |a: &SocketAddr| if a.is_ipv6() { 20 } else { 8 };
    let total = RECORD_FIXED_LEN
        + host_len(&m.born_host)
        + host_len(&m.store_host)
        + 4
        + body.len()
        + if v2 { 2 } else { 1 }
        + topic.len()
        + 2
        + props_len;
    let total_i32 = i32::try_from(total)
        .map_err(|_| Error::invalid_argument(format!("record of {total} bytes")))?;

    let mut buf = Vec::with_capacity(total);
    put_i32(&mut buf, total_i32);
    put_i32(
        &mut buf,
        if v2 {
            MESSAGE_MAGIC_CODE_V2
        } else {
            MESSAGE_MAGIC_CODE
        },
    );
    put_i32(&mut buf, body_crc32(&body));
    put_i32(&mut buf, m.queue_id);
    put_i32(&mut buf, m.flag());
    put_i64(&mut buf, m.queue_offset);
    put_i64(&mut buf, m.commit_log_offset);
    put_i32(&mut buf, flag);
    put_i64(&mut buf, m.born_timestamp);
    put_host(&mut buf, m.born_host);
    put_i64(&mut buf, m.store_timestamp);
    put_host(&mut buf, m.store_host);
    put_i32(&mut buf, m.reconsume_times);
    put_i64(&mut buf, m.prepared_transaction_offset);
    put_i32(&mut buf, body.len() as i32); // bounded by total, checked above
    buf.extend_from_slice(&body);
    if v2 {
        buf.extend_from_slice(&topic_len.to_be_bytes());
    } else {
        buf.push(topic.len() as u8); // < 128 here
    }
    buf.extend_from_slice(topic);
    buf.extend_from_slice(&props_i16.to_be_bytes());
    put_properties(&mut buf, m.message.properties());
    Ok(buf)
}

/// Encodes the body of a `SEND_BATCH_MESSAGE` (Java `MessageDecoder.encodeMessages`).
///
/// Each message becomes TOTALSIZE i32 (`22 + body + properties`), MAGICCODE 0, BODYCRC 0,
/// FLAG i32, BODY (i32 length + bytes), PROPERTIES (i16 length + property string); the
/// topic travels in the request header. Fails with `InvalidArgument` when a message's
/// properties exceed 32767 bytes or a record 2 GiB.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn encode_batch(messages: &[Message]) -> Result<Vec<u8>, Error> {
    encode_batch_with(messages, |_| [None, None])
}

/// [`encode_batch`] with up to two properties `extra(i)` added to message `i` as it is
/// written, each replacing a property of the same name: the producer's UNIQ_KEY and
/// INSTANCE_ID, without a copy of the message to put them in. (The producer writes the
/// records straight into its frame: [`encode_batch_into`].)
#[cfg(any(test, feature = "unstable-internals"))]
pub(crate) fn encode_batch_with<'a>(
    messages: &'a [Message],
    extra: impl Fn(usize) -> [Option<(&'a str, &'a str)>; 2],
) -> Result<Vec<u8>, Error> {
    // One allocation for the whole body; the properties are written in place.
    let mut buf = Vec::with_capacity(batch_len_with(messages, &extra)?);
    encode_batch_into(messages, extra, &mut buf)?;
    Ok(buf)
}

/// Message `i`'s properties with `extra(i)` put in (see [`encode_batch_with`]).
fn batch_properties<'a>(
    m: &'a Message,
    extra: [Option<(&'a str, &'a str)>; 2],
) -> impl Iterator<Item = (&'a str, &'a str)> {
    let replaced = move |name: &str| extra.iter().flatten().any(|(n, _)| *n == name);
    m.properties()
        .filter(move |(name, _)| !replaced(name))
        .chain(extra.into_iter().flatten())
}

/// The length of the batch body [`encode_batch_with`] makes of the same arguments, or the
/// error it would return: a record whose properties or whole length its fields cannot
/// carry.
pub(crate) fn batch_len_with<'a>(
    messages: &'a [Message],
    extra: impl Fn(usize) -> [Option<(&'a str, &'a str)>; 2],
) -> Result<usize, Error> {
    let mut len = 0usize;
    for (i, m) in messages.iter().enumerate() {
        let props_bytes = properties_len(batch_properties(m, extra(i)));
        props_i16(props_bytes)?;
        let total = BATCH_FIXED_LEN + m.body().len() + props_bytes;
        batch_total_size(total)?;
        len += total;
    }
    Ok(len)
}

/// Appends the batch body of [`encode_batch_with`] to `buf` (a request frame being
/// written, so that the body is not copied into one afterwards). On an error `buf` holds
/// part of a body.
pub(crate) fn encode_batch_into<'a>(
    messages: &'a [Message],
    extra: impl Fn(usize) -> [Option<(&'a str, &'a str)>; 2],
    buf: &mut Vec<u8>,
) -> Result<(), Error> {
    for (i, m) in messages.iter().enumerate() {
        // The record's length and its properties' length are back-filled: the properties
        // are gone over once.
        let at = buf.len();
        put_i32(buf, 0);
        put_i32(buf, 0);
        put_i32(buf, 0);
        put_i32(buf, m.flag());
        put_i32(buf, m.body().len() as i32); // bounded by the record's length, checked below
        buf.extend_from_slice(m.body());
        let props_at = buf.len();
        buf.extend_from_slice(&[0, 0]);
        put_properties(buf, batch_properties(m, extra(i)));
        let props_len = props_i16(buf.len() - props_at - 2)?;
        let total = batch_total_size(buf.len() - at)?;
        buf[at..at + 4].copy_from_slice(&total.to_be_bytes());
        buf[props_at..props_at + 2].copy_from_slice(&props_len.to_be_bytes());
    }
    Ok(())
}

/// Decodes a batch body (Java `MessageDecoder.decodeMessages`); the messages have no topic.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Message>, DecodeError> {
    let mut r = Reader::new(bytes);
    let mut messages = Vec::new();
    while !r.is_empty() {
        let at = r.position();
        let m = decode_batch_record(&mut r).map_err(|e| {
            DecodeError::new(format!(
                "batch message {} at offset {at}: {e}",
                messages.len()
            ))
        })?;
        messages.push(m);
    }
    Ok(messages)
}

#[cfg(any(test, feature = "unstable-internals"))]
fn decode_batch_record(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let size = r.i32()?;
    let total = usize::try_from(size)
        .ok()
        .filter(|&n| n >= BATCH_FIXED_LEN)
        .ok_or_else(|| DecodeError::new(format!("TOTALSIZE {size} is below {BATCH_FIXED_LEN}")))?;
    let mut rec = Reader::new(r.bytes(total - 4)?);
    rec.i32()?; // magic, always 0
    rec.i32()?; // crc, always 0
    let flag = rec.i32()?;
    let body_len = rec.len_i32()?;
    let body = rec.bytes(body_len)?.to_vec();
    let props_len = rec.len_i16()?;
    let properties = lossy(rec.bytes(props_len)?);
    if !rec.is_empty() {
        return Err(DecodeError::new(format!(
            "TOTALSIZE {size} leaves {} bytes after the properties",
            rec.remaining()
        )));
    }
    let mut m = Message::empty(String::new(), body);
    m.set_flag(flag);
    m.set_properties_wire(&properties);
    Ok(m)
}

/// Bytes of the [property string](properties_to_string) of `properties`.
fn properties_len<'a>(properties: impl Iterator<Item = (&'a str, &'a str)>) -> usize {
    let with_separators: usize = properties.map(|(n, v)| n.len() + v.len() + 2).sum();
    with_separators.saturating_sub(1) // no separator after the last one
}

/// Writes the [property string](properties_to_string) of `properties`.
fn put_properties<'a>(buf: &mut Vec<u8>, properties: impl Iterator<Item = (&'a str, &'a str)>) {
    for (i, (name, value)) in properties.enumerate() {
        if i > 0 {
            buf.push(PROPERTY_SEPARATOR as u8);
        }
        buf.extend_from_slice(name.as_bytes());
        buf.push(NAME_VALUE_SEPARATOR as u8);
        buf.extend_from_slice(value.as_bytes());
    }
}

/// A batch record's TOTALSIZE field.
fn batch_total_size(total: usize) -> Result<i32, Error> {
    i32::try_from(total)
        .map_err(|_| Error::invalid_argument(format!("batch record of {total} bytes")))
}

fn props_i16(len: usize) -> Result<i16, Error> {
    i16::try_from(len)
        .map_err(|_| Error::invalid_argument(format!("properties of {len} bytes exceed 32767")))
}

fn put_i32(buf: &mut Vec<u8>, v: i32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

#[cfg(any(test, feature = "unstable-internals"))]
fn put_i64(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Address bytes then the port as an i32, as Java's `socketAddress2ByteBuffer`.
#[cfg(any(test, feature = "unstable-internals"))]
fn put_host(buf: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => buf.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => buf.extend_from_slice(&ip.octets()),
    }
    put_i32(buf, i32::from(addr.port()));
}

/// Appends the uppercase hex of `bytes` (Java `UtilAll.bytes2string`).
pub(super) fn push_hex(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
        out.push(char::from(HEX_UPPER[usize::from(b & 0xF)]));
    }
}

/// Writes the uppercase hex of `bytes` into `out`, two characters a byte, as far as `out`
/// reaches.
pub(super) fn write_hex<'b>(out: &mut [u8], bytes: impl IntoIterator<Item = &'b u8>) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_UPPER[usize::from(b >> 4)];
        pair[1] = HEX_UPPER[usize::from(b & 0xF)];
    }
}

/// Parses hex of either case into `out`; `None` for an odd length or a non-hex digit.
pub(super) fn parse_hex(s: &str, out: &mut Vec<u8>) -> Option<()> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    for pair in s.chunks_exact(2) {
        out.push(digit(pair[0])? << 4 | digit(pair[1])?);
    }
    Some(())
}

/// The broker's message id (Java `MessageDecoder.createMessageId`): uppercase hex of the
/// store host's address bytes, its port as an i32 and the commit log offset as an i64:
/// 32 characters for IPv4, 56 for IPv6.
pub fn create_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut s = String::with_capacity(56);
    match store_host.ip() {
        IpAddr::V4(ip) => push_hex(&mut s, &ip.octets()),
        IpAddr::V6(ip) => push_hex(&mut s, &ip.octets()),
    }
    push_hex(&mut s, &i32::from(store_host.port()).to_be_bytes());
    push_hex(&mut s, &commit_log_offset.to_be_bytes());
    s
}

/// Splits an offsetMsgId into store host and commit log offset (Java `decodeMessageId`):
/// 32 hex characters hold an IPv4 host, 56 an IPv6 host.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), DecodeError> {
    if id.len() != 32 && id.len() != 56 {
        return Err(DecodeError::new(format!(
            "offset message id of {} characters, expected 32 or 56",
            id.len()
        )));
    }
    let mut bytes = Vec::with_capacity(28);
    parse_hex(id, &mut bytes)
        .ok_or_else(|| DecodeError::new(format!("offset message id {id:?} is not hex")))?;
    let mut r = Reader::new(&bytes);
    let host = read_host(&mut r, id.len() == 56)?;
    Ok((host, r.i64()?))
}

/// Compresses a body as Java's `ZlibCompressor` does: a zlib stream (RFC 1950, with
/// header and Adler-32 trailer) at `level` 0..=9 (larger values mean 9).
pub fn compress(body: &[u8], level: u32) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2 + 64),
        Compression::new(level.min(9)),
    );
    // The sink is a Vec, which never fails to write, so the error case cannot happen; an
    // empty stream would be rejected by any decompressor, so nothing corrupt passes silently.
    enc.write_all(body)
        .and_then(|()| enc.finish())
        .unwrap_or_default()
}

/// Decompresses a zlib stream, failing when it is corrupt, truncated or would exceed
/// `max_len` bytes. Bytes after the end of the stream are ignored, as Java does.
#[cfg(any(test, feature = "unstable-internals"))]
pub fn decompress(data: &[u8], max_len: usize) -> Result<Vec<u8>, DecodeError> {
    inflate(data, max_len, || format!("{max_len} bytes"))
}

/// [`decompress`], with the cap described by `cap` in the error.
fn inflate(
    data: &[u8],
    max_len: usize,
    cap: impl FnOnce() -> String,
) -> Result<Vec<u8>, DecodeError> {
    let mut z = Decompress::new(true);
    // One byte past the cap tells "too big" from "exactly the cap".
    let limit = max_len.saturating_add(1);
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).max(64).min(limit));
    loop {
        if out.len() == out.capacity() {
            let grow = out.capacity().max(64).min(limit - out.len());
            out.reserve_exact(grow);
        }
        let (in_before, out_before) = (z.total_in(), out.len());
        let consumed = usize::try_from(in_before).map_or(data.len(), |n| n.min(data.len()));
        let status = z
            .decompress_vec(&data[consumed..], &mut out, FlushDecompress::None)
            .map_err(|e| DecodeError::new(format!("corrupt zlib body: {e}")))?;
        if out.len() > max_len {
            return Err(DecodeError::new(format!(
                "decompressed body exceeds {}",
                cap()
            )));
        }
        match status {
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError => {
                let stuck = z.total_in() == in_before && out.len() == out_before;
                if stuck && out.len() < out.capacity() {
                    return Err(DecodeError::new("truncated zlib body"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
