//! The JSON header encoding (`SerializeType::Json`): the fastjson-shaped writer, and a
//! reader with a hand-written fast path for the shape Java and this crate write.
//!
//! The fast path accepts only input that serde would accept with the same result; on
//! anything else (unknown keys, non-string `extFields` values, surrogate escapes, odd
//! numbers, duplicates) it steps aside and the serde reader decides, errors included.

use std::ops::Range;

use super::codes::LanguageCode;
use super::command::RemotingCommand;
use super::ext::{int_bytes, ExtFields};
use super::DecodeError;

/// Writes the header the way fastjson does: keys in alphabetical order, nulls omitted,
/// enums by name, control characters escaped as `\u00XX`.
pub(super) fn encode(cmd: &RemotingCommand, buf: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    buf.extend_from_slice(b"{\"code\":");
    buf.extend_from_slice(int_bytes(cmd.code.into(), &mut digits));
    if !cmd.ext_fields.is_empty() {
        buf.extend_from_slice(b",\"extFields\":{");
        for (i, (k, v)) in cmd.ext_fields.iter_bytes().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            write_string(buf, k);
            buf.push(b':');
            write_string(buf, v);
        }
        buf.push(b'}');
    }
    buf.extend_from_slice(b",\"flag\":");
    buf.extend_from_slice(int_bytes(cmd.flag.into(), &mut digits));
    buf.extend_from_slice(b",\"language\":");
    write_string(buf, cmd.language.name().unwrap_or("OTHER").as_bytes());
    buf.extend_from_slice(b",\"opaque\":");
    buf.extend_from_slice(int_bytes(cmd.opaque.into(), &mut digits));
    if let Some(remark) = &cmd.remark {
        buf.extend_from_slice(b",\"remark\":");
        write_string(buf, remark.as_bytes());
    }
    buf.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    buf.extend_from_slice(int_bytes(cmd.version.into(), &mut digits));
    buf.push(b'}');
}

/// Writes a JSON string; `bytes` is UTF-8 (it comes from a `str`).
pub(super) fn write_string(buf: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.push(b'"');
    let mut plain_from = 0;
    loop {
        let i = special_at(bytes, plain_from);
        buf.extend_from_slice(&bytes[plain_from..i]);
        let Some(&b) = bytes.get(i) else { break };
        match b {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            _ => {
                buf.extend_from_slice(b"\\u00");
                buf.push(HEX[(b >> 4) as usize]);
                buf.push(HEX[(b & 0xf) as usize]);
            }
        }
        plain_from = i + 1;
    }
    buf.push(b'"');
}

/// The index of the first byte at or after `from` that a JSON string cannot hold as is
/// (`"`, `\\` or a control character), or `b.len()`. Eight bytes at a time.
#[inline]
fn special_at(b: &[u8], mut from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Nonzero exactly when some byte of `v` is below `n` (n <= 128).
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGH;
    while let Some(chunk) = b.get(from..from + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let found = below(x, 0x20)
            | below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1);
        if found != 0 {
            // A borrow only runs upwards from a byte that matched, so the lowest flag is
            // the first such byte (bytes of 0x80 and up are never flagged).
            return from + (found.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    while let Some(&c) = b.get(from) {
        if c < 0x20 || c == b'"' || c == b'\\' {
            break;
        }
        from += 1;
    }
    from
}

/// Decodes a JSON header; the body and serialize type are the caller's to set.
pub(super) fn decode(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    match decode_fast(header) {
        Some(cmd) => Ok(cmd),
        None => decode_serde(header),
    }
}

/// The command of a decoded header: a missing language is Java's.
fn command(
    code: i32,
    language: Option<&str>,
    version: i32,
    opaque: i32,
    flag: i32,
    remark: Option<String>,
    ext_fields: ExtFields,
) -> RemotingCommand {
    let language = language.map_or(LanguageCode::JAVA, LanguageCode::from_name);
    RemotingCommand::from_header(code, language, version, opaque, flag, remark, ext_fields)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonHeader {
    code: i32,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    version: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    remark: Option<String>,
    #[serde(default)]
    ext_fields: Option<serde_json::Map<String, serde_json::Value>>,
}

fn decode_serde(header: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let h: JsonHeader = serde_json::from_slice(header)
        .map_err(|e| DecodeError::new(format!("bad JSON header: {e}")))?;
    let mut ext_fields = ExtFields::new();
    for (k, v) in h.ext_fields.into_iter().flatten() {
        // Java always writes strings; tolerate numbers and booleans, skip nulls.
        match v {
            serde_json::Value::String(s) => ext_fields.insert(k, s),
            serde_json::Value::Null => {}
            other => ext_fields.insert(k, other.to_string()),
        }
    }
    Ok(command(
        h.code,
        h.language.as_deref(),
        h.version,
        h.opaque,
        h.flag,
        h.remark,
        ext_fields,
    ))
}

/// The fast path: `None` means "let serde decide".
fn decode_fast(header: &[u8]) -> Option<RemotingCommand> {
    let mut p = Parser {
        text: std::str::from_utf8(header).ok()?,
        pos: 0,
    };
    let (mut code, mut version, mut opaque, mut flag) = (None, 0, 0, 0);
    let (mut language, mut remark) = (None, None);
    // The fields' text starts as a copy of the header, so unescaped keys and values are
    // ranges of it; escaped ones are appended, and unescaping never lengthens text.
    let mut text = String::with_capacity(2 * p.text.len());
    text.push_str(p.text);
    let mut ext_fields = ExtFields::from_text(text, 16);
    let mut seen = 0u8;
    p.expect(b'{')?;
    if p.peek()? == b'}' {
        return None; // no code: serde's error
    }
    loop {
        let key = p.plain_string()?;
        p.expect(b':')?;
        let bit = match key {
            "code" => 1,
            "language" => 2,
            "version" => 4,
            "opaque" => 8,
            "flag" => 16,
            "remark" => 32,
            "extFields" => 64,
            "serializeTypeCurrentRPC" => 128,
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match bit {
            1 => code = Some(p.int()?),
            2 => language = p.null_or(Parser::plain_string)?,
            4 => version = p.int()?,
            8 => opaque = p.int()?,
            16 => flag = p.int()?,
            32 => {
                remark = p.null_or(|p| {
                    let mut s = String::new();
                    p.string(&mut s).map(|()| s)
                })?
            }
            64 => {
                p.null_or(|p| p.ext_object(&mut ext_fields))?;
            }
            _ => {
                p.plain_string()?;
            }
        }
        match p.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    p.skip_ws();
    if p.pos != p.text.len() {
        return None;
    }
    Some(command(
        code?, language, version, opaque, flag, remark, ext_fields,
    ))
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn skip_ws(&mut self) {
        let b = self.text.as_bytes();
        while matches!(b.get(self.pos), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.pos += 1;
        }
    }

    /// The next byte that is not whitespace, left in place.
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.as_bytes().get(self.pos).copied()
    }

    /// The next byte that is not whitespace, consumed.
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// `null`, or what `f` reads.
    fn null_or<T>(&mut self, f: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.peek()? == b'n' {
            let rest = self.text.as_bytes().get(self.pos..self.pos + 4)?;
            if rest != b"null" {
                return None;
            }
            self.pos += 4;
            return Some(None);
        }
        f(self).map(Some)
    }

    /// A string without escapes, borrowed.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        self.pos = special_at(self.text.as_bytes(), start);
        if self.text.as_bytes().get(self.pos) != Some(&b'"') {
            return None;
        }
        self.pos += 1;
        Some(&self.text[start..self.pos - 1])
    }

    /// A string, unescaped onto `out`.
    fn string(&mut self, out: &mut String) -> Option<()> {
        self.expect(b'"')?;
        self.string_rest(out)
    }

    /// A string of `extFields`, whose text holds this header's text at the same offsets:
    /// a string without escapes is its range there; an escaped one is unescaped onto
    /// the end.
    fn ext_string(&mut self, ext: &mut ExtFields) -> Option<Range<usize>> {
        self.expect(b'"')?;
        let start = self.pos;
        self.pos = special_at(self.text.as_bytes(), start);
        if self.text.as_bytes().get(self.pos) == Some(&b'"') {
            self.pos += 1;
            return Some(start..self.pos - 1);
        }
        self.pos = start;
        let from = ext.text_len();
        self.string_rest(ext.text_mut())?;
        Some(from..ext.text_len())
    }

    /// The rest of a string after its opening quote, unescaped onto `out`.
    fn string_rest(&mut self, out: &mut String) -> Option<()> {
        loop {
            let run = self.pos;
            self.pos = special_at(self.text.as_bytes(), run);
            // The delimiters are ASCII, so the run ends on a char boundary.
            out.push_str(&self.text[run..self.pos]);
            match *self.text.as_bytes().get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    self.pos += 1;
                    self.escape(out)?;
                }
                _ => return None, // a control character
            }
        }
    }

    /// The escape after a backslash. Surrogates (pairs or lone) go to serde.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let b = self.text.as_bytes();
        let c = match *b.get(self.pos)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = b.get(self.pos + 1..self.pos + 5)?;
                let mut code = 0u32;
                for &h in hex {
                    code = code << 4 | char::from(h).to_digit(16)?;
                }
                self.pos += 4;
                char::from_u32(code)?
            }
            _ => return None,
        };
        self.pos += 1;
        out.push(c);
        Some(())
    }

    /// A JSON integer that fits an i32; fractions, exponents and leading zeros go to serde.
    fn int(&mut self) -> Option<i32> {
        self.skip_ws();
        let b = self.text.as_bytes();
        let negative = b.get(self.pos) == Some(&b'-');
        if negative {
            self.pos += 1;
        }
        let start = self.pos;
        let mut n: i64 = 0;
        while let Some(d) = b.get(self.pos).filter(|d| d.is_ascii_digit()) {
            n = n * 10 + i64::from(d - b'0');
            self.pos += 1;
            if self.pos - start > 10 {
                return None;
            }
        }
        let digits = self.pos - start;
        // serde_json reads `-0` as a float, which an i32 refuses.
        if digits == 0
            || (negative && n == 0)
            || (digits > 1 && b[start] == b'0')
            || matches!(b.get(self.pos), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        i32::try_from(if negative { -n } else { n }).ok()
    }

    /// `extFields`: string values only (serde turns others into text).
    fn ext_object(&mut self, ext: &mut ExtFields) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            let key = self.ext_string(ext)?;
            self.expect(b':')?;
            let value = self.ext_string(ext)?;
            ext.commit_key_value(key, value);
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both readers on one input: the fast path must agree with serde whenever it answers.
    fn check(header: &str) -> Result<RemotingCommand, DecodeError> {
        let slow = decode_serde(header.as_bytes());
        if let Some(fast) = decode_fast(header.as_bytes()) {
            assert_eq!(Ok(&fast), slow.as_ref(), "{header}");
        }
        decode(header.as_bytes())
    }

    fn fast_path_takes(header: &str) -> RemotingCommand {
        let fast = decode_fast(header.as_bytes());
        assert!(fast.is_some(), "{header}");
        check(header).unwrap()
    }

    #[test]
    fn special_at_finds_the_first_special_byte_in_any_lane() {
        let naive = |b: &[u8], from: usize| {
            (from..b.len())
                .find(|&i| b[i] < 0x20 || b[i] == b'"' || b[i] == b'\\')
                .unwrap_or(b.len())
        };
        // Every special byte after every prefix, with plain, high and special bytes after
        // it (a borrow must not move the answer).
        let fillers: [&[u8]; 4] = [
            b"abcdefghijklmnop",
            b"\xff\x80\xa2\xdc",
            b"\"\\\x01",
            b"\x00\x1f~",
        ];
        for len in 0..20 {
            for special in [b'"', b'\\', 0u8, 0x1f, 0x01] {
                for filler in fillers {
                    let mut b: Vec<u8> = (0..len)
                        .map(|i| [b'x', 0x80, 0xe9, b' ', 0x7f][i % 5])
                        .collect();
                    b.push(special);
                    b.extend_from_slice(filler);
                    for from in 0..=len.min(9) {
                        assert_eq!(special_at(&b, from), naive(&b, from), "{b:?} from {from}");
                    }
                }
            }
            let plain: Vec<u8> = (0..len).map(|i| b"a\xc3\xa9z"[i % 4]).collect();
            assert_eq!(special_at(&plain, 0), plain.len());
        }
    }

    #[test]
    fn the_common_shape_takes_the_fast_path() {
        let c = fast_path_takes(
            r#"{"code":310,"extFields":{"a":"g","i":"TAGS\u0001x\u0002WAIT\u0001true","e":"3"},"flag":0,"language":"JAVA","opaque":-7,"serializeTypeCurrentRPC":"JSON","version":409}"#,
        );
        assert_eq!(c.code, 310);
        assert_eq!(c.opaque, -7);
        assert_eq!(c.ext_fields.get("i"), Some("TAGS\u{1}x\u{2}WAIT\u{1}true"));
        assert_eq!(c.language, LanguageCode::JAVA);
        let c = fast_path_takes(
            " {\n \"code\" : 0 , \"remark\" : \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\u{e9}\" , \"language\":null,\"extFields\":{}} ",
        );
        assert_eq!(
            c.remark.as_deref(),
            Some("a\"b\\c/d\u{8}\u{c}\n\r\t\u{e9}\u{e9}")
        );
        let c = fast_path_takes(r#"{"code":1,"extFields":null,"remark":null,"language":"CPP"}"#);
        assert!(c.ext_fields.is_empty());
        assert_eq!(c.remark, None);
        assert_eq!(c.language, LanguageCode::CPP);
        let c = fast_path_takes(r#"{"code":1,"extFields":{"k":"1","k":"2"}}"#);
        assert_eq!(c.ext_fields.get("k"), Some("2"));
        assert_eq!(c.ext_fields.len(), 1);
    }

    /// Headers captured from real 4.9.7 and 5.3.3 servers take the fast path, and agree.
    #[test]
    fn captured_server_headers_take_the_fast_path() {
        let frames: [&[u8]; 6] = [
            include_bytes!("../../tests/data/4.9.7/send_message_v2_response.bin"),
            include_bytes!("../../tests/data/4.9.7/pull_message_response.bin"),
            include_bytes!("../../tests/data/4.9.7/route_unknown_topic.bin"),
            include_bytes!("../../tests/data/5.3.3/send_message_v2_response.bin"),
            include_bytes!("../../tests/data/5.3.3/pull_message_response.bin"),
            include_bytes!("../../tests/data/5.3.3/heart_beat_response.bin"),
        ];
        for frame in frames {
            let len =
                (u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]) & 0xFF_FFFF) as usize;
            let header = &frame[8..8 + len];
            let fast = decode_fast(header);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(header));
            assert_eq!(fast.as_ref(), decode_serde(header).as_ref().ok());
        }
    }

    /// Random edits of real headers: whenever the fast path answers, serde agrees.
    #[test]
    fn mutated_headers_never_make_the_fast_path_disagree_with_serde() {
        let seeds: [&[u8]; 3] = [
            br#"{"code":310,"extFields":{"a":"g","i":"TAGS\u0001x\u0002K","e":"3"},"flag":0,"language":"JAVA","opaque":-7,"serializeTypeCurrentRPC":"JSON","version":409}"#,
            br#"{"code":0,"extFields":{"msgId":"0A","queueId":"1","queueOffset":"42"},"flag":1,"language":"JAVA","opaque":9,"remark":"a\"b\n","serializeTypeCurrentRPC":"JSON","version":479}"#,
            b" { \"code\" : 1 , \"language\" : null , \"remark\" : \"\\u00e9\" } ",
        ];
        const PIECES: [&[u8]; 12] = [
            b"\\", b"\"", b"\\u", b"d83d", b"null", b"-", b"0", b"1e", b".", b",", b"}", b"\xc3",
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n.max(1) as u64) as usize
        };
        let mut fast = 0;
        for round in 0..60_000 {
            let mut h = seeds[round % seeds.len()].to_vec();
            for _ in 0..1 + next(3) {
                let at = next(h.len() + 1);
                match next(3) {
                    0 if at < h.len() => {
                        h.remove(at);
                    }
                    1 => {
                        let piece = PIECES[next(PIECES.len())];
                        h.splice(at..at, piece.iter().copied());
                    }
                    _ if at < h.len() => h[at] = next(128) as u8,
                    _ => {}
                }
            }
            if let Some(cmd) = decode_fast(&h) {
                fast += 1;
                let slow = decode_serde(&h);
                assert_eq!(
                    slow.as_ref().ok(),
                    Some(&cmd),
                    "{}",
                    String::from_utf8_lossy(&h)
                );
            }
        }
        // Most edits break the header; enough must survive to test the agreement.
        assert!(fast > 1_000, "{fast}");
    }

    #[test]
    fn everything_else_is_left_to_serde() {
        let cases = [
            r#"{"code":1,"extFields":{"n":5,"b":false,"z":null}}"#,
            r#"{"code":1,"new":[1,{"x":2}]}"#,
            r#"{"code":1,"remark":"\ud83d\ude00"}"#,
            r#"{"code":1.0}"#,
            r#"{"code":1e2}"#,
            r#"{"code":01}"#,
            r#"{"code":-}"#,
            r#"{"code":-0}"#,
            r#"{"code":2147483648}"#,
            r#"{"code":1,"code":2}"#,
            r#"{"code":1,}"#,
            r#"{"code":1} x"#,
            r#"{"flag":1}"#,
            r#"{}"#,
            r#"[1]"#,
            r#"{"code":1,"remark":"a
b"}"#,
            r#"{"code":1,"remark":"\x"}"#,
            r#"{"code":1,"remark":"\u12"}"#,
            r#"{"co\u0064e":1}"#,
            r#"{"code":1,"version":null}"#,
            r#"{"code":1,"extFields":{"a":"b",}}"#,
            r#"{"code":1,"language":nul}"#,
        ];
        for h in cases {
            assert!(decode_fast(h.as_bytes()).is_none(), "{h}");
            let _ = check(h);
        }
        let c = check(r#"{"code":1,"extFields":{"n":5,"b":false,"z":null}}"#).unwrap();
        assert_eq!(c.ext_fields.get("n"), Some("5"));
        assert_eq!(c.ext_fields.get("z"), None);
        assert_eq!(fast_path_takes(r#"{"code":-2147483648}"#).code, i32::MIN);
        assert_eq!(check(r#"{"co\u0064e":1}"#).unwrap().code, 1);
        assert!(check(r#"{"code":1,"code":2}"#).is_err());
        assert!(check(r#"{"code":1.0}"#).is_err());
        assert!(check(r#"{"code":1,"remark":"\ud800"}"#).is_err());
        assert!(decode(b"{\"code\":1,\"remark\":\"\xff\"}").is_err());
    }
}
