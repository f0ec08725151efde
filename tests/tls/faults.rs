//! TLS against the testkit's fault peer: a handshake that stalls times out on the connect
//! deadline, and hostile bytes where the ServerHello should be are a TLS error, never a
//! panic or a hang.

use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::fault_peer::{Fault, FaultPeer};
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{Admin, ErrorKind, TimeoutPhase, TlsConfig};

fn admin(addr: &str, connect_timeout: Duration) -> Admin {
    Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(addr)
                .tls(TlsConfig::danger_accept_any_server_certificate())
                .connect_timeout(connect_timeout)
                .api_timeout(Duration::from_secs(20)),
        )
        .start()
        .unwrap()
}

#[test]
fn a_handshake_that_stalls_times_out_on_the_connect_deadline() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let admin = admin(peer.addr(), Duration::from_secs(1));
    let started = Instant::now();
    let e = admin
        .cluster_info()
        .expect_err("nobody answers the ClientHello");
    let took = started.elapsed();
    eprintln!("stalled handshake: {e} ({took:?})");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Connect), "{e}");
    assert!(e.to_string().contains(peer.addr()), "{e}");
    // The 1 s connect deadline, not the 20 s call timeout; generous for a loaded box.
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert_eq!(peer.accepted(), 1);
}

/// TLS record header: type, version, length.
fn record(kind: u8, len: u16) -> Vec<u8> {
    let mut v = vec![kind, 3, 3];
    v.extend_from_slice(&len.to_be_bytes());
    v
}

#[test]
fn hostile_bytes_during_the_handshake_are_a_tls_error_not_a_panic() {
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("a RocketMQ frame", {
            let mut f = vec![0, 0, 0, 20, 0, 0, 0, 16];
            f.extend_from_slice(b"{\"code\":0}xxxxxx");
            f
        }),
        ("HTTP", b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec()),
        ("a record claiming 64 KiB", {
            let mut v = record(22, 0xffff);
            v.extend(std::iter::repeat_n(0xAA, 4096));
            v
        }),
        ("an empty handshake record", record(22, 0)),
        ("a fatal alert", {
            let mut v = record(21, 2);
            v.extend_from_slice(&[2, 40]);
            v
        }),
        ("application data before any handshake", {
            let mut v = record(23, 16);
            v.extend_from_slice(&[0x55; 16]);
            v
        }),
        ("an unknown record type", {
            let mut v = record(99, 4);
            v.extend_from_slice(&[1, 2, 3, 4]);
            v
        }),
    ];
    // And some noise, seeded so that a failure can be replayed: whole handshake messages
    // of random bytes, and random bytes after a byte that is no record type.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..16 {
        let len = 1 + (i * 97) % 700;
        let mut v = Vec::with_capacity(len + 5);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(x as u8);
        }
        if i % 2 == 0 {
            // A whole handshake message of random type and content in a whole record (a
            // message or record that claims more bytes is a stall, the test above).
            let body = v.len() as u16;
            let mut head = record(22, body + 4);
            head.extend_from_slice(&[v[0], 0]);
            head.extend_from_slice(&body.to_be_bytes());
            v.splice(0..0, head);
        } else {
            v[0] |= 0x80;
        }
        cases.push(("noise", v));
    }
    for (what, bytes) in cases {
        let bytes_head: Vec<u8> = bytes.iter().take(12).copied().collect();
        let peer = FaultPeer::start(Fault::Greet(bytes)).unwrap();
        let admin = admin(peer.addr(), Duration::from_secs(3));
        let started = Instant::now();
        let e = admin.cluster_info().expect_err(what);
        let took = started.elapsed();
        assert_eq!(e.kind(), ErrorKind::Tls, "{what} {:02x?}: {e}", &bytes_head);
        assert!(e.to_string().contains(peer.addr()), "{what}: {e}");
        assert!(
            took < Duration::from_secs(3),
            "{what}: {took:?} (a hang until the deadline?)"
        );
    }
}

#[test]
fn a_record_cut_short_waits_for_the_rest_until_the_connect_deadline() {
    // A ServerHello record claiming 60 bytes, 6 of them sent: rustls waits for the rest,
    // and the connect deadline ends the wait.
    let mut bytes = record(22, 60);
    bytes.extend_from_slice(&[2, 0, 0, 56, 3, 3]);
    let peer = FaultPeer::start(Fault::Greet(bytes)).unwrap();
    let started = Instant::now();
    let e = admin(peer.addr(), Duration::from_secs(1))
        .cluster_info()
        .expect_err("a truncated record");
    let took = started.elapsed();
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Connect), "{e}");
    assert!(e.to_string().contains("TLS handshake"), "{e}");
    assert!(took < Duration::from_secs(8), "{took:?}");
}

#[test]
fn a_peer_that_closes_during_the_handshake_is_a_tls_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let closer = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        drop(s);
    });
    let e = admin(&addr, Duration::from_secs(3))
        .cluster_info()
        .expect_err("closed during the handshake");
    closer.join().unwrap();
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(e.to_string().contains("handshake"), "{e}");
}
