//! Tolerant reading of the JSON that fastjson writes.
//!
//! fastjson writes a map whose key is not a string without quotes: integer keys bare
//! (`{0:"127.0.0.1:10911"}` in route and cluster data) and object keys as objects
//! (`{{"brokerName":"b","queueId":0,"topic":"T"}:100}` in offset tables). [`normalize`]
//! rewrites both into standard JSON — bare numbers are quoted, object keys become strings
//! holding their JSON text — so that serde can take it from there. It is one pass with its own
//! stack, linear in time and output, with caps on nesting ([`MAX_DEPTH`], [`MAX_KEY_DEPTH`]):
//! a hostile body is a decode error, never a deep recursion or an output that doubles per
//! level.

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use super::queue::{QueueRef, QueueWire};
use super::{DecodeError, MessageQueue};

/// Parses a body written by fastjson into `T`.
pub fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let json = normalize(body)?;
    serde_json::from_slice(&json).map_err(|e| DecodeError::new(format!("bad JSON body: {e}")))
}

/// Parses a map key that [`normalize`] turned from an object into a string.
pub fn parse_object_key<K: DeserializeOwned>(key: &str) -> Result<K, DecodeError> {
    serde_json::from_str(key).map_err(|e| DecodeError::new(format!("bad object map key: {e}")))
}

/// Parses a map key that [`normalize`] turned from a queue object into a string.
pub fn parse_queue_key(key: &str) -> Result<MessageQueue, DecodeError> {
    parse_object_key::<QueueWire>(key).map(MessageQueue::from)
}

/// Writes a map whose keys are queues as fastjson does, each key as its JSON object:
/// `{{"brokerName":"b","queueId":0,"topic":"T"}:5}`.
pub fn object_key_map<'a, V>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a MessageQueue, &'a V)>,
) -> Result<(), serde_json::Error>
where
    V: serde::Serialize + 'a,
{
    out.push('{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(&QueueRef(k))?);
        out.push(':');
        out.push_str(&serde_json::to_string(v)?);
    }
    out.push('}');
    Ok(())
}

/// The deepest nesting of objects and arrays a body may have. serde_json refuses more
/// than 128 as well; the deepest RocketMQ body (a consumer's running info) nests about 6.
pub const MAX_DEPTH: usize = 128;

/// The deepest nesting of object map keys inside object map keys. fastjson writes object
/// keys for `MessageQueue`s only, which hold no maps (one level). Each level escapes its
/// text once more, doubling the backslashes, so this bounds the output at
/// 2^`MAX_KEY_DEPTH` bytes per input byte.
pub const MAX_KEY_DEPTH: usize = 2;

#[derive(Clone, Copy)]
struct Frame {
    object: bool,
    expect_key: bool,
    /// This object is a map key: closing it closes the string it is written into.
    key: bool,
}

/// Rewrites fastjson's non-standard map keys into standard JSON; borrows when there are none.
///
/// One pass with its own stack, linear in time and output: a body nesting deeper than
/// [`MAX_DEPTH`], or object keys nesting deeper than [`MAX_KEY_DEPTH`], is an error.
pub fn normalize(input: &[u8]) -> Result<Cow<'_, [u8]>, DecodeError> {
    // Created, with the input so far, at the first rewrite.
    let mut out: Option<Vec<u8>> = None;
    let mut stack: Vec<Frame> = Vec::new();
    // How many object keys enclose the current byte: each escapes what it holds once.
    let mut level = 0usize;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if b == b'"' {
            let end = string_end(input, i)?;
            if let Some(o) = out.as_mut() {
                put(o, &input[i..end], level);
            }
            i = end;
            continue;
        }
        let mut closes_key = false;
        match b {
            b'{' | b'[' => push(
                &mut stack,
                Frame {
                    object: b == b'{',
                    expect_key: true,
                    key: false,
                },
            )?,
            b'}' | b']' => closes_key = stack.pop().is_some_and(|f| f.key),
            b':' | b',' => {
                if let Some(f) = stack.last_mut().filter(|f| f.object) {
                    f.expect_key = b == b',';
                }
            }
            _ => {}
        }
        // A key's JSON text goes compacted into its string: whitespace outside its
        // strings is dropped (pretty-printed offset files have tabs and newlines).
        if let Some(o) = out
            .as_mut()
            .filter(|_| level == 0 || !b.is_ascii_whitespace())
        {
            put(o, &[b], level);
        }
        i += 1;
        if closes_key {
            level -= 1;
            if let Some(o) = out.as_mut() {
                put(o, b"\"", level);
            }
        }
        // After `{` or `,` in an object a key follows: look at it. A key that is an
        // object opens another, whose first key is looked at in turn.
        let mut key_next = matches!(b, b'{' | b',');
        while key_next && stack.last().is_some_and(|f| f.object && f.expect_key) {
            key_next = false;
            let ws_end = skip_ws(input, i);
            let number = match input.get(ws_end) {
                Some(c) if c.is_ascii_digit() || *c == b'-' => true,
                Some(b'{') => false,
                _ => break,
            };
            let o = out.get_or_insert_with(|| input[..i].to_vec());
            if level == 0 {
                o.extend_from_slice(&input[i..ws_end]);
            }
            put(o, b"\"", level);
            if number {
                let end = number_end(input, ws_end);
                put(o, &input[ws_end..end], level);
                put(o, b"\"", level);
                i = end;
            } else {
                if level == MAX_KEY_DEPTH {
                    return Err(DecodeError::new(format!(
                        "JSON body nests object map keys deeper than {MAX_KEY_DEPTH}"
                    )));
                }
                level += 1;
                push(
                    &mut stack,
                    Frame {
                        object: true,
                        expect_key: true,
                        key: true,
                    },
                )?;
                put(o, b"{", level);
                i = ws_end + 1;
                key_next = true;
            }
        }
    }
    if level > 0 {
        return Err(DecodeError::new("unterminated object key in JSON body"));
    }
    Ok(match out {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(input),
    })
}

fn push(stack: &mut Vec<Frame>, frame: Frame) -> Result<(), DecodeError> {
    if stack.len() == MAX_DEPTH {
        return Err(DecodeError::new(format!(
            "JSON body nests deeper than {MAX_DEPTH}"
        )));
    }
    stack.push(frame);
    Ok(())
}

/// Appends `bytes` as they read inside `level` enclosing key strings: each quote and
/// backslash escaped once per level (2^level - 1 backslashes before it).
fn put(o: &mut Vec<u8>, bytes: &[u8], level: usize) {
    if level == 0 {
        o.extend_from_slice(bytes);
        return;
    }
    let escapes = (1usize << level) - 1;
    for &c in bytes {
        if c == b'"' || c == b'\\' {
            o.resize(o.len() + escapes, b'\\');
        }
        o.push(c);
    }
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

fn number_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && (s[i].is_ascii_alphanumeric() || matches!(s[i], b'-' | b'+' | b'.')) {
        i += 1;
    }
    i
}

/// Index just past the closing quote of the string starting at `start`.
fn string_end(s: &[u8], start: usize) -> Result<usize, DecodeError> {
    let mut i = start + 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(DecodeError::new("unterminated string in JSON body"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn check(input: &str, expected: &str) {
        let got = normalize(input.as_bytes()).unwrap();
        assert_eq!(
            std::str::from_utf8(&got).unwrap(),
            expected,
            "input: {input}"
        );
    }

    #[test]
    fn normalize_cases() {
        check(r#"{"a":1}"#, r#"{"a":1}"#);
        check(r#"{0:"x",1:"y"}"#, r#"{"0":"x","1":"y"}"#);
        check(r#"{ -1 : "x" }"#, r#"{ "-1" : "x" }"#);
        check(r#"{"k":{0:"x"}}"#, r#"{"k":{"0":"x"}}"#);
        check(r#"[{0:1},{2:3}]"#, r#"[{"0":1},{"2":3}]"#);
        check(r#"{"s":"{0:1}"}"#, r#"{"s":"{0:1}"}"#);
        check(r#"{"s":"a\"{0:"}"#, r#"{"s":"a\"{0:"}"#);
        check(r#"{"v":[1,2,{3:4}]}"#, r#"{"v":[1,2,{"3":4}]}"#);
        check(
            "{\n\t{\n\t\t\"brokerName\":\"b c\",\n\t\t\"queueId\":0\n\t}:1}",
            "{\n\t\"{\\\"brokerName\\\":\\\"b c\\\",\\\"queueId\\\":0}\":1}",
        );
        // An object key inside an object key: escaped twice.
        check(r#"{{{0:1}:2}:3}"#, r#"{"{\"{\\\"0\\\":1}\":2}":3}"#);
        check(
            r#"{{"brokerName":"b","queueId":0,"topic":"T"}:100}"#,
            r#"{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":100}"#,
        );
    }

    #[test]
    fn object_keys_parse_back() {
        #[derive(serde::Deserialize, PartialEq, Eq, PartialOrd, Ord, Debug)]
        #[serde(rename_all = "camelCase")]
        struct Mq {
            broker_name: String,
            queue_id: i32,
            topic: String,
        }
        let body = br#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:100,{"brokerName":"b","queueId":1,"topic":"T"}:7}}"#;
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Body {
            offset_table: BTreeMap<String, i64>,
        }
        let b: Body = from_slice(body).unwrap();
        let parsed: Vec<(Mq, i64)> = b
            .offset_table
            .iter()
            .map(|(k, v)| (parse_object_key::<Mq>(k).unwrap(), *v))
            .collect();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].0.queue_id, 0);
        assert_eq!(parsed[0].1, 100);
        assert_eq!(parsed[1].1, 7);
    }

    #[test]
    fn nesting_past_the_caps_is_an_error() {
        let deep = |open: u8, close: u8, n: usize| {
            let mut v = vec![open; n];
            v.resize(2 * n, close);
            v
        };
        assert!(normalize(&deep(b'[', b']', MAX_DEPTH)).is_ok());
        let e = normalize(&deep(b'[', b']', MAX_DEPTH + 1)).unwrap_err();
        assert!(e.to_string().contains("nests deeper than 128"), "{e}");
        // `{{{}}}` is an object key holding an object key: at the cap, decodable.
        assert!(normalize(&deep(b'{', b'}', MAX_KEY_DEPTH + 1)).is_ok());
        let e = normalize(&deep(b'{', b'}', MAX_KEY_DEPTH + 2)).unwrap_err();
        assert!(
            e.to_string().contains("object map keys deeper than 2"),
            "{e}"
        );
    }

    #[test]
    fn the_output_is_linear_in_the_input() {
        // Keys two levels deep, each holding quotes: at most 4 bytes out per byte in.
        let mut body = b"{".to_vec();
        for i in 0..1000 {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(format!(r#"{{{{"k":{i}}}:"v"}}:{i}"#).as_bytes());
        }
        body.push(b'}');
        let out = normalize(&body).unwrap();
        assert!(
            out.len() <= 4 * body.len(),
            "{} from {}",
            out.len(),
            body.len()
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 1000);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for s in [
            &b"{\"a"[..],
            b"{{\"a\":1",
            b"\"",
            b"{1",
            b"{{",
            b"\\",
            b"{\"\\",
        ] {
            let r: Result<serde_json::Value, _> = from_slice(s);
            assert!(r.is_err(), "{:?}", std::str::from_utf8(s));
        }
    }
}
