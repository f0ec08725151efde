//! A minimal HTTP/1.0 GET, enough for the name-server address server (Java
//! `TopAddressing.fetchNSAddr`): one request, `Connection: close`, the body read to EOF
//! with a size cap. No redirects, no TLS.
//!
//! One deadline bounds the whole call: name resolution, connect, write and every read.
//! Resolution runs on a short-lived `rmq-dns` thread, since `getaddrinfo` takes no
//! timeout; if it outlives the deadline the caller returns and that thread ends on its
//! own when the system resolver gives up (it holds nothing but the name). This is the one
//! socket the crate opens outside the I/O thread: on the client instance's timer thread
//! (job 1) and in its `start`, never with a lock held.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::util::worker;
use crate::TimeoutPhase;

const MAX_RESPONSE: usize = 64 * 1024;

/// GETs `url` (`http://host[:port]/path`) and returns the status code and body, all
/// within `timeout`.
pub fn get(url: &str, timeout: Duration) -> Result<(u16, String)> {
    get_with(url, timeout, system_lookup)
}

/// The system resolver (`getaddrinfo`), blocking.
fn system_lookup(hostport: String) -> std::io::Result<Option<SocketAddr>> {
    hostport.to_socket_addrs().map(|mut a| a.next())
}

type Lookup = fn(String) -> std::io::Result<Option<SocketAddr>>;

fn get_with(url: &str, timeout: Duration, lookup: Lookup) -> Result<(u16, String)> {
    let deadline = Instant::now() + timeout;
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
    let left = |phase: TimeoutPhase| -> Result<Duration> {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| Error::timeout(phase, timeout).with_addr(&hostport))
    };
    let sock = resolve(&hostport, deadline, timeout, lookup)?;
    let mut stream =
        TcpStream::connect_timeout(&sock, left(TimeoutPhase::Connect)?).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    Error::timeout(TimeoutPhase::Connect, timeout).with_addr(&hostport)
                }
                _ => Error::connect(&hostport, e),
            }
        })?;
    let host = authority.split(':').next().unwrap_or(authority);
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: rocketmq-blocking\r\nConnection: close\r\n\r\n"
    );
    stream
        .set_write_timeout(Some(left(TimeoutPhase::Response)?))
        .map_err(|e| Error::io("setting the write timeout", e))?;
    stream
        .write_all(request.as_bytes())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                Error::timeout(TimeoutPhase::Response, timeout).with_addr(&hostport)
            }
            _ => Error::closed(&hostport, format!("writing the request: {e}")),
        })?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while raw.len() < MAX_RESPONSE {
        // Each read may wait only for what is left of the whole call.
        stream
            .set_read_timeout(Some(left(TimeoutPhase::Response)?))
            .map_err(|e| Error::io("setting the read timeout", e))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n.min(MAX_RESPONSE - raw.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Error::timeout(TimeoutPhase::Response, timeout).with_addr(&hostport))
            }
            Err(e) => {
                return Err(Error::closed(
                    &hostport,
                    format!("reading the response: {e}"),
                ))
            }
        }
    }
    parse_response(&raw).map_err(|e| e.with_addr(&hostport))
}

/// Resolves `hostport` by `deadline`. Literal addresses need no lookup; names are looked
/// up on a `rmq-dns` thread, joined when it answers in time and otherwise left to end on
/// its own (see the module docs).
fn resolve(
    hostport: &str,
    deadline: Instant,
    timeout: Duration,
    lookup: Lookup,
) -> Result<SocketAddr> {
    if let Ok(sock) = hostport.parse::<SocketAddr>() {
        return Ok(sock);
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let name = hostport.to_string();
    let thread = worker::spawn("rmq-dns", move || {
        let _ = tx.send(lookup(name));
    })
    .map_err(|e| Error::io("starting the name lookup", e))?;
    let answer = rx.recv_deadline(deadline);
    if answer.is_ok() {
        // It has answered; only its return is left.
        thread.join_until(Instant::now() + Duration::from_secs(1), "rmq-dns");
    }
    match answer {
        Ok(Ok(Some(sock))) => Ok(sock),
        Ok(Ok(None)) => Err(Error::new(
            ErrorKind::Connect,
            format!("{hostport} resolves to nothing"),
        )),
        Ok(Err(e)) => Err(Error::new(
            ErrorKind::Connect,
            format!("resolving {hostport}: {e}"),
        )),
        Err(_) => Err(Error::timeout(TimeoutPhase::Connect, timeout)
            .with_addr(hostport)
            .context(format!("resolving {hostport}"))),
    }
}

pub(crate) fn parse_response(raw: &[u8]) -> Result<(u16, String)> {
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
    use std::time::Instant;

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

    /// A server that accepts and then sends one byte every 50 ms for `for_how_long`.
    fn dribbling_server(for_how_long: Duration) -> (String, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let end = Instant::now() + for_how_long;
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n");
            while Instant::now() < end {
                if s.write_all(b"X").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        (addr, t)
    }

    #[test]
    fn a_server_that_keeps_sending_cannot_stretch_the_deadline() {
        // Every read gets a byte well within a per-read timeout; only a whole-call
        // deadline ends this call in time.
        let (addr, server) = dribbling_server(Duration::from_secs(3));
        let began = Instant::now();
        let e = get(&format!("http://{addr}/x"), Duration::from_millis(400)).unwrap_err();
        let took = began.elapsed();
        assert!(e.is_timeout(), "{e}");
        assert!(took < Duration::from_millis(1500), "took {took:?}");
        drop(server);
    }

    #[test]
    fn a_slow_name_lookup_is_bounded_by_the_deadline() {
        fn slow(_: String) -> std::io::Result<Option<SocketAddr>> {
            std::thread::sleep(Duration::from_secs(3));
            Ok(None)
        }
        let began = Instant::now();
        let e = get_with("http://slow.invalid/x", Duration::from_millis(200), slow).unwrap_err();
        let took = began.elapsed();
        assert!(e.is_timeout(), "{e}");
        assert!(e.to_string().contains("resolving slow.invalid:80"), "{e}");
        assert!(took < Duration::from_millis(1500), "took {took:?}");
    }

    #[test]
    fn a_name_is_looked_up_and_its_answer_used() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            s.write_all(b"HTTP/1.0 200 OK\r\n\r\n10.0.0.1:9876\n")
                .unwrap();
        });
        fn to_loopback(hostport: String) -> std::io::Result<Option<SocketAddr>> {
            let port = hostport
                .rsplit(':')
                .next()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            Ok(Some(SocketAddr::from(([127, 0, 0, 1], port))))
        }
        let (status, body) = get_with(
            &format!("http://nsaddr.example:{port}/rocketmq/nsaddr"),
            Duration::from_secs(5),
            to_loopback,
        )
        .unwrap();
        server.join().unwrap();
        assert_eq!(
            (status, clear_new_line(&body).as_str()),
            (200, "10.0.0.1:9876")
        );
    }

    #[test]
    fn malformed_responses_and_urls_are_errors() {
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"HTTP/1.0 xx\r\n\r\n").is_err());
        assert!(get("ftp://x/y", Duration::from_millis(10)).is_err());
    }
}
