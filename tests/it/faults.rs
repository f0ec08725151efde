//! What a healthy broker never does, from a fault-injecting peer: the client must turn it
//! into a typed error and a closed connection, promptly, without panicking or hanging.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode};
use rocketmq_blocking::remoting::{RemotingClient, RemotingConfig};
use rocketmq_blocking::testkit::fault_peer::{Fault, FaultPeer};
use rocketmq_blocking::{ErrorKind, TimeoutPhase};

fn client() -> RemotingClient {
    RemotingClient::new(RemotingConfig::default()).unwrap()
}

fn req() -> RemotingCommand {
    RemotingCommand::request(RequestCode::HEART_BEAT)
}

#[test]
fn a_peer_that_never_answers_times_out_on_time() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = client();
    let t = Instant::now();
    let e = c
        .invoke_sync(peer.addr(), req(), Duration::from_millis(300))
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Response));
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(600), "late: {took:?}");
    assert_eq!(e.addr(), Some(peer.addr()));
}

#[test]
fn a_dead_port_fails_fast_with_a_connect_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let c = client();
    let t = Instant::now();
    let e = c
        .invoke_sync(&addr, req(), Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
    assert!(
        t.elapsed() < c.config().connect_timeout,
        "{:?}",
        t.elapsed()
    );
    assert!(e.to_string().contains(&addr), "{e}");
}

fn assert_closed_quickly(fault: Fault) {
    let peer = FaultPeer::start(fault.clone()).unwrap();
    let c = client();
    let t = Instant::now();
    let e = c
        .invoke_sync(peer.addr(), req(), Duration::from_secs(5))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionClosed, "{fault:?}: {e}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "{fault:?} took {:?}",
        t.elapsed()
    );
    assert!(!c.is_connected(peer.addr()));
}

#[test]
fn garbage_closes_the_connection_with_an_error() {
    assert_closed_quickly(Fault::Garbage(vec![0, 0, 0, 8, 7, 0, 0, 0, 1, 2, 3, 4]));
    assert_closed_quickly(Fault::Garbage(vec![0, 0, 0, 6, 0, 0, 0, 2, b'{', b'x']));
    assert_closed_quickly(Fault::Garbage(vec![0x80, 0, 0, 0]));
}

#[test]
fn an_oversized_frame_closes_the_connection_without_allocating_it() {
    assert_closed_quickly(Fault::OversizedLength(1 << 30));
}

#[test]
fn a_truncated_response_then_reset_fails_the_request() {
    assert_closed_quickly(Fault::TruncatedThenClose(11));
    assert_closed_quickly(Fault::CloseOnRequest);
}

#[test]
fn the_next_call_reconnects_after_a_close() {
    let peer = FaultPeer::start(Fault::CloseOnRequest).unwrap();
    let c = client();
    for _ in 0..2 {
        let e = c
            .invoke_sync(peer.addr(), req(), Duration::from_secs(2))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionClosed);
    }
    assert_eq!(peer.accepted(), 2);
}

#[test]
fn a_stray_response_is_ignored_and_the_real_one_delivered() {
    let peer = FaultPeer::start(Fault::UnknownOpaqueFirst).unwrap();
    let c = client();
    let r = c
        .invoke_sync(peer.addr(), req(), Duration::from_secs(2))
        .unwrap();
    assert_eq!(r.body, b"ok");
}

#[test]
fn async_callbacks_fire_exactly_once_with_the_timeout() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = client();
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = bounded(16);
    let t = Instant::now();
    for _ in 0..10 {
        let calls = calls.clone();
        let tx = tx.clone();
        c.invoke_async(peer.addr(), req(), Duration::from_millis(200), move |r| {
            calls.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(r.map(|_| ()).map_err(|e| e.timeout_phase()));
        })
        .unwrap();
    }
    for _ in 0..10 {
        let r = rx.recv_timeout(Duration::from_secs(2)).unwrap();
        assert_eq!(r, Err(Some(TimeoutPhase::Response)));
    }
    assert!(
        t.elapsed() < Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(calls.load(Ordering::SeqCst), 10);
}

#[test]
fn closing_a_connection_fails_everything_pending_on_it_at_once() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = client();
    let (tx, rx) = bounded(64);
    for _ in 0..20 {
        let tx = tx.clone();
        c.invoke_async(peer.addr(), req(), Duration::from_secs(30), move |r| {
            let _ = tx.send(r.err().map(|e| e.kind()));
        })
        .unwrap();
    }
    // Wait until the requests are on the wire, then cut the connection.
    let t0 = Instant::now();
    while !c.is_connected(peer.addr()) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    c.close_connection(peer.addr(), "test");
    for _ in 0..20 {
        let kind = rx.recv_timeout(Duration::from_secs(2)).unwrap();
        assert_eq!(kind, Some(ErrorKind::ConnectionClosed));
    }
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn the_async_in_flight_limit_bounds_memory() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = RemotingClient::new(RemotingConfig {
        async_permits: 2,
        ..RemotingConfig::default()
    })
    .unwrap();
    for _ in 0..2 {
        c.invoke_async(peer.addr(), req(), Duration::from_secs(30), |_| {})
            .unwrap();
    }
    let t = Instant::now();
    let not_run = Arc::new(AtomicUsize::new(0));
    let n = not_run.clone();
    let e = c
        .invoke_async(peer.addr(), req(), Duration::from_millis(100), move |_| {
            n.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::Overloaded);
    assert!(t.elapsed() >= Duration::from_millis(100));
    // The callback comes back unrun: the caller still owns it.
    let callback = e.into_callback();
    assert_eq!(not_run.load(Ordering::SeqCst), 0);
    callback(Err(rocketmq_blocking::Error::new(
        ErrorKind::Overloaded,
        "by hand",
    )));
    assert_eq!(not_run.load(Ordering::SeqCst), 1);
}

#[test]
fn shutdown_fails_pending_sync_calls_and_refuses_new_ones() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = Arc::new(client());
    let c2 = c.clone();
    let addr = peer.addr().to_string();
    let waiter = std::thread::spawn(move || c2.invoke_sync(&addr, req(), Duration::from_secs(30)));
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    c.shutdown();
    let e = waiter.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State, "{e}");
    assert!(t.elapsed() < Duration::from_secs(1));
    let e = c
        .invoke_sync(peer.addr(), req(), Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State);
}

#[test]
fn a_slow_answer_within_the_timeout_succeeds() {
    let peer = FaultPeer::start(Fault::SlowAnswer(Duration::from_millis(150))).unwrap();
    let c = client();
    let r = c
        .invoke_sync(peer.addr(), req(), Duration::from_secs(2))
        .unwrap();
    assert_eq!(r.body, b"ok");
}

#[test]
fn broker_initiated_requests_reach_processors_and_unknown_codes_are_refused() {
    use rocketmq_blocking::protocol::ResponseCode;
    // An unknown code: answered REQUEST_CODE_NOT_SUPPORTED, as Java answers.
    let peer = FaultPeer::start(Fault::AskClient(12345)).unwrap();
    let c = client();
    c.invoke_sync(peer.addr(), req(), Duration::from_secs(2))
        .unwrap();
    let t = Instant::now();
    while peer.responses().is_empty() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = peer.responses().remove(0);
    assert_eq!(r.response_code(), ResponseCode::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        r.remark.as_deref(),
        Some(" request type 12345 not supported")
    );
    assert!(r.opaque >= 777_000, "answered under the peer's opaque");

    // A registered code: the processor runs off the I/O thread and its answer goes back.
    let peer = FaultPeer::start(Fault::AskClient(307)).unwrap();
    let c = client();
    c.register_processor(
        RequestCode::GET_CONSUMER_RUNNING_INFO,
        Arc::new(|_addr: &str, req: RemotingCommand| {
            let on = std::thread::current()
                .name()
                .unwrap_or_default()
                .to_string();
            Some(RemotingCommand::response(
                ResponseCode::SUCCESS,
                req.opaque,
                Some(on),
            ))
        }),
    );
    c.invoke_sync(peer.addr(), req(), Duration::from_secs(2))
        .unwrap();
    let t = Instant::now();
    while peer.responses().is_empty() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = peer.responses().remove(0);
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let thread = r.remark.unwrap_or_default();
    assert!(thread.starts_with("rmq-processor"), "ran on {thread}");
}
