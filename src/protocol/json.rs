//! Tolerant reading of the JSON that fastjson writes.
//!
//! fastjson writes a map whose key is not a string without quotes: integer keys bare
//! (`{0:"127.0.0.1:10911"}` in route and cluster data) and object keys as objects
//! (`{{"brokerName":"b","queueId":0,"topic":"T"}:100}` in offset tables). [`normalize`]
//! rewrites both into standard JSON — bare numbers are quoted, object keys become strings
//! holding their JSON text — so that serde can take it from there. It keeps its own stack
//! instead of recursing, so hostile nesting cannot overflow ours.

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use super::DecodeError;

/// Parses a body written by fastjson into `T`.
pub fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let json = normalize(body)?;
    serde_json::from_slice(&json).map_err(|e| DecodeError::new(format!("bad JSON body: {e}")))
}

/// Parses a map key that [`normalize`] turned from an object into a string.
pub fn parse_object_key<K: DeserializeOwned>(key: &str) -> Result<K, DecodeError> {
    serde_json::from_str(key).map_err(|e| DecodeError::new(format!("bad object map key: {e}")))
}

/// Writes a map whose keys are objects as fastjson does, each key as its JSON object:
/// `{{"brokerName":"b","queueId":0,"topic":"T"}:5}`.
pub fn object_key_map<'a, K, V>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a K, &'a V)>,
) -> Result<(), serde_json::Error>
where
    K: serde::Serialize + 'a,
    V: serde::Serialize + 'a,
{
    out.push('{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(k)?);
        out.push(':');
        out.push_str(&serde_json::to_string(v)?);
    }
    out.push('}');
    Ok(())
}

#[derive(Clone, Copy)]
enum Frame {
    Object { expect_key: bool },
    Array,
}

/// Rewrites fastjson's non-standard map keys into standard JSON; borrows when there are none.
pub fn normalize(input: &[u8]) -> Result<Cow<'_, [u8]>, DecodeError> {
    let mut out: Option<Vec<u8>> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match b {
            b'"' => {
                let end = string_end(input, i)?;
                if let Some(o) = out.as_mut() {
                    o.extend_from_slice(&input[i..end]);
                }
                i = end;
                continue;
            }
            b'{' => stack.push(Frame::Object { expect_key: true }),
            b'[' => stack.push(Frame::Array),
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Frame::Object { expect_key }) = stack.last_mut() {
                    *expect_key = false;
                }
            }
            b',' => {
                if let Some(Frame::Object { expect_key }) = stack.last_mut() {
                    *expect_key = true;
                }
            }
            _ => {}
        }
        if let Some(o) = out.as_mut() {
            o.push(b);
        }
        i += 1;
        // After `{` or `,` in an object a key follows: look at it.
        if matches!(b, b'{' | b',')
            && matches!(stack.last(), Some(Frame::Object { expect_key: true }))
        {
            let ws_end = skip_ws(input, i);
            match input.get(ws_end) {
                Some(c) if c.is_ascii_digit() || *c == b'-' => {
                    let end = number_end(input, ws_end);
                    let o = out.get_or_insert_with(|| input[..i].to_vec());
                    o.extend_from_slice(&input[i..ws_end]);
                    o.push(b'"');
                    o.extend_from_slice(&input[ws_end..end]);
                    o.push(b'"');
                    i = end;
                }
                Some(b'{') => {
                    let end = object_end(input, ws_end)?;
                    let inner = normalize(&input[ws_end..end])?;
                    let o = out.get_or_insert_with(|| input[..i].to_vec());
                    o.extend_from_slice(&input[i..ws_end]);
                    o.push(b'"');
                    // The key's JSON text goes compacted into a string: whitespace outside
                    // its strings dropped (pretty-printed files have tabs and newlines),
                    // quotes and backslashes escaped.
                    let mut in_str = false;
                    let mut escaped = false;
                    for &c in inner.iter() {
                        if !in_str && c.is_ascii_whitespace() {
                            continue;
                        }
                        if in_str {
                            if escaped {
                                escaped = false;
                            } else if c == b'\\' {
                                escaped = true;
                            } else if c == b'"' {
                                in_str = false;
                            }
                        } else if c == b'"' {
                            in_str = true;
                        }
                        if c == b'"' || c == b'\\' {
                            o.push(b'\\');
                        }
                        o.push(c);
                    }
                    o.push(b'"');
                    i = end;
                }
                _ => {}
            }
        }
    }
    Ok(match out {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(input),
    })
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

/// Index just past the `}` that closes the object starting at `start`.
fn object_end(s: &[u8], start: usize) -> Result<usize, DecodeError> {
    let mut depth = 0usize;
    let mut i = start;
    while i < s.len() {
        match s[i] {
            b'"' => {
                i = string_end(s, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(DecodeError::new("unterminated object key in JSON body"))
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
