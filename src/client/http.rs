//! A minimal HTTP/1.0 GET, enough for the name-server address server (Java
//! `TopAddressing.fetchNSAddr`): one request, `Connection: close`, the body read to EOF
//! with a size cap. No redirects, no TLS.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

const MAX_RESPONSE: u64 = 64 * 1024;

/// GETs `url` (`http://host[:port]/path`) and returns the status code and body.
pub fn get(url: &str, timeout: Duration) -> Result<(u16, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| Error::invalid_argument(format!("not an http:// URL: {url}")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let hostport = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let sock = hostport
        .to_socket_addrs()
        .map_err(|e| Error::new(ErrorKind::Connect, format!("resolving {hostport}: {e}")))?
        .next()
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Connect,
                format!("{hostport} resolves to nothing"),
            )
        })?;
    let mut stream =
        TcpStream::connect_timeout(&sock, timeout).map_err(|e| Error::connect(&hostport, e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| Error::io("setting socket timeouts", e))?;
    let host = authority.split(':').next().unwrap_or(authority);
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: rocketmq-blocking\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| Error::closed(&hostport, format!("writing the request: {e}")))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                Error::timeout(crate::TimeoutPhase::Response, timeout).with_addr(&hostport)
            }
            _ => Error::closed(&hostport, format!("reading the response: {e}")),
        })?;
    parse_response(&raw).map_err(|e| e.with_addr(&hostport))
}

fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| Error::decode("HTTP response without a header end"))?;
    let status_line = head.lines().next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| Error::decode(format!("bad HTTP status line {status_line:?}")))?;
    Ok((status, body.to_string()))
}

/// Java `TopAddressing.clearNewLine`: the body up to its first line break, trimmed.
pub(crate) fn clear_new_line(body: &str) -> String {
    let line = body.split(['\r', '\n']).next().unwrap_or_default();
    line.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn get_reads_status_and_body_from_a_local_server() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n127.0.0.1:9876;127.0.0.1:9877\n")
                .unwrap();
            req
        });
        let (status, body) = get(
            &format!("http://{addr}/rocketmq/nsaddr"),
            Duration::from_secs(2),
        )
        .unwrap();
        let req = server.join().unwrap();
        assert!(
            req.starts_with("GET /rocketmq/nsaddr HTTP/1.0\r\n"),
            "{req}"
        );
        assert_eq!(status, 200);
        assert_eq!(clear_new_line(&body), "127.0.0.1:9876;127.0.0.1:9877");
    }

    #[test]
    fn malformed_responses_and_urls_are_errors() {
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"HTTP/1.0 xx\r\n\r\n").is_err());
        assert!(get("ftp://x/y", Duration::from_millis(10)).is_err());
    }
}
