//! `invoke_async`'s contract against the fault peer: `Ok` means the callback runs exactly
//! once, on the callback pool; `Err` gives the callback back unrun.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Sender};

use super::namesrv::no_name_server;
use super::*;
use crate::protocol::ResponseCode;
use crate::testkit::fault_peer::{Fault, FaultPeer};

fn req() -> RemotingCommand {
    RemotingCommand::request(RequestCode::HEART_BEAT)
}

fn client() -> RemotingClient {
    RemotingClient::new(RemotingConfig::default()).unwrap()
}

/// How often the callback of each request ran, by request index.
struct Runs(Vec<AtomicU8>);

impl Runs {
    fn new(n: usize) -> Arc<Runs> {
        Arc::new(Runs((0..n).map(|_| AtomicU8::new(0)).collect()))
    }

    /// A callback for request `i`: counts its run and reports the error kind and thread.
    fn callback(
        self: &Arc<Self>,
        i: usize,
        tx: &Sender<(usize, Option<ErrorKind>, String)>,
    ) -> impl FnOnce(Result<RemotingCommand>) + Send + 'static {
        let (runs, tx) = (self.clone(), tx.clone());
        move |r| {
            runs.0[i].fetch_add(1, Ordering::SeqCst);
            let thread = std::thread::current().name().unwrap_or("").to_string();
            let _ = tx.send((i, r.err().map(|e| e.kind()), thread));
        }
    }

    fn count(&self, i: usize) -> u8 {
        self.0[i].load(Ordering::SeqCst)
    }
}

/// A port nothing listens on.
fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

#[test]
fn a_refused_connection_calls_back_once_on_the_callback_pool() {
    let c = client();
    let runs = Runs::new(1);
    let (tx, rx) = unbounded();
    let addr = dead_addr();
    c.invoke_async(&addr, req(), Duration::from_secs(5), runs.callback(0, &tx))
        .unwrap();
    let (_, kind, thread) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(kind, Some(ErrorKind::Connect));
    assert!(thread.starts_with("rmq-callback"), "ran on {thread}");
    c.shutdown();
    assert_eq!(runs.count(0), 1);
    assert!(rx.try_recv().is_err(), "no second call");
}

#[test]
fn an_async_permit_comes_back_after_the_callback_ran_and_the_error_names_the_request() {
    let c = RemotingClient::new(RemotingConfig {
        async_permits: 1,
        ..RemotingConfig::default()
    })
    .unwrap();
    let addr = dead_addr();
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let (error_tx, error_rx) = unbounded();
    c.invoke_async(&addr, req(), Duration::from_secs(5), move |r| {
        let _ = error_tx.send(r.err().map(|e| e.to_string()));
        let _ = release_rx.recv_timeout(Duration::from_secs(20));
    })
    .unwrap();
    let error = error_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let error = error.expect("a refused connection is an error");
    assert!(error.contains("HEART_BEAT"), "{error}");
    // The callback is still running: its permit is held, so a second request waits for
    // one and is refused.
    let e = c
        .invoke_async(&addr, req(), Duration::from_millis(100), |_| {})
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::Overloaded, "{e}");
    assert_eq!(c.async_permits.available(), 0);
    release_tx.send(()).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || c.async_permits.available() == 1),
        "the permit came back once the callback returned"
    );
    c.shutdown();
}

/// A callback with state the caller wants back when the request is not queued.
struct Keep {
    id: u32,
    ran: Arc<AtomicUsize>,
}

impl InvokeCallback for Keep {
    fn operation_complete(self, _: Result<RemotingCommand>) {
        self.ran.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_request_that_is_not_queued_gives_its_callback_back_unrun() {
    let c = RemotingClient::new(RemotingConfig {
        max_frame: 1024,
        ..RemotingConfig::default()
    })
    .unwrap();
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let keep = |id| Keep {
        id,
        ran: ran.clone(),
    };
    let t = Duration::from_secs(1);

    let e = c
        .invoke_async_with("no port here", req(), t, keep(1))
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(e.into_callback().id, 1);

    let big = req().with_body(vec![7u8; 4096]);
    let e = c
        .invoke_async_with(peer.addr(), big, t, keep(2))
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::InvalidArgument, "{e}");
    let (error, k) = e.into_parts();
    assert!(error.to_string().contains("frame limit"), "{error}");
    assert_eq!(k.id, 2);

    c.shutdown();
    let e = c
        .invoke_async_with(peer.addr(), req(), t, keep(3))
        .unwrap_err();
    assert_eq!(e.error().kind(), ErrorKind::State, "{e}");
    assert!(format!("{e:?}").starts_with("InvokeAsyncError"));
    assert_eq!(e.into_callback().id, 3);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn shutdown_runs_the_callback_of_every_pending_and_unwritten_request_once() {
    let c = client();
    // Requests answered by no one, and requests whose frames cannot all be written: a
    // listener that never accepts takes less than 32 MiB into its socket buffers.
    let silent = FaultPeer::start(Fault::Silent).unwrap();
    let stuck = TcpListener::bind("127.0.0.1:0").unwrap();
    let stuck_addr = stuck.local_addr().unwrap().to_string();
    let n = 64;
    let runs = Runs::new(n);
    let (tx, rx) = unbounded();
    for i in 0..n {
        let (addr, request) = if i % 2 == 0 {
            (silent.addr(), req())
        } else {
            (stuck_addr.as_str(), req().with_body(vec![1u8; 1 << 20]))
        };
        c.invoke_async(
            addr,
            request,
            Duration::from_secs(60),
            runs.callback(i, &tx),
        )
        .unwrap();
    }
    c.shutdown();
    // Shutdown joins the callback pool: every callback has run by now.
    for i in 0..n {
        assert_eq!(runs.count(i), 1, "callback {i}");
    }
    drop(tx);
    let results: Vec<_> = rx.iter().collect();
    assert_eq!(results.len(), n);
    for (i, kind, thread) in results {
        assert_eq!(kind, Some(ErrorKind::State), "callback {i}");
        assert!(thread.starts_with("rmq-callback"), "ran on {thread}");
    }
}

#[test]
fn every_accepted_request_calls_back_once_when_shutdown_races_the_callers() {
    let peer = FaultPeer::start(Fault::Silent).unwrap();
    let c = Arc::new(client());
    let threads = 4;
    // More than any caller gets through before the shutdown below stops it.
    let per_thread = 100_000;
    let runs = Runs::new(threads * per_thread);
    let (tx, rx) = unbounded();
    let accepted = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..threads)
        .map(|t| {
            let (c, runs, tx) = (c.clone(), runs.clone(), tx.clone());
            let (accepted, addr) = (accepted.clone(), peer.addr().to_string());
            std::thread::spawn(move || {
                let mut oks = Vec::new();
                let mut refused = false;
                for i in t * per_thread..(t + 1) * per_thread {
                    let cb = runs.callback(i, &tx);
                    match c.invoke_async(&addr, req(), Duration::from_secs(60), cb) {
                        Ok(()) => {
                            oks.push(i);
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            assert_eq!(e.error().kind(), ErrorKind::State, "{e}");
                            // Given back unrun: dropping it is the caller's choice.
                            drop(e.into_callback());
                            assert_eq!(runs.count(i), 0);
                            refused = true;
                            break;
                        }
                    }
                }
                (oks, refused)
            })
        })
        .collect();
    // Shut down while the callers are busy.
    while accepted.load(Ordering::SeqCst) < 500 {
        std::thread::yield_now();
    }
    c.shutdown();
    let mut oks = Vec::new();
    for h in callers {
        let (mut o, refused) = h.join().unwrap();
        assert!(refused, "every caller ran into the shutdown");
        oks.append(&mut o);
    }
    drop(tx);
    assert!(oks.len() >= 500);
    assert_eq!(
        rx.iter().count(),
        oks.len(),
        "one call per accepted request"
    );
    for i in oks {
        assert_eq!(runs.count(i), 1, "callback {i}");
    }
}

#[test]
fn a_sync_call_to_an_address_that_is_no_address_is_an_invalid_argument() {
    let c = client();
    for addr in [
        "not an address",
        "127.0.0.1",
        "300.1.2.3:10911",
        "host.invalid:10911",
    ] {
        let started = std::time::Instant::now();
        let e = c
            .invoke_sync(addr, req(), Duration::from_secs(3))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{addr}: {e}");
        assert!(started.elapsed() < Duration::from_secs(3), "{addr}: {e}");
    }
    c.shutdown();
}

#[test]
fn an_empty_name_server_list_is_a_configuration_error() {
    let remoting = RemotingClient::new(RemotingConfig::default()).unwrap();
    let e = remoting
        .invoke_namesrv_sync(
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(!e.is_retriable());
    remoting.shutdown();
}

#[test]
fn a_flood_of_broker_requests_is_answered_busy_beyond_the_processor_queue() {
    const FLOOD: usize = 3000;
    const CODE: i32 = 9_999;
    let peer = FaultPeer::start(Fault::FloodClient(CODE, FLOOD)).unwrap();
    let config = RemotingConfig {
        processor_threads: 1,
        processor_queue: 100,
        ..RemotingConfig::default()
    };
    let c = RemotingClient::new(config).unwrap();
    // A processor that holds its one thread until released: everything else queues.
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    c.register_processor(
        RequestCode(CODE),
        Arc::new(move |_: &str, r: RemotingCommand| {
            let _ = release_rx.recv_timeout(Duration::from_secs(20));
            Some(RemotingCommand::response(
                ResponseCode::SUCCESS,
                r.opaque,
                None,
            ))
        }),
    );
    c.invoke_sync(peer.addr(), req(), Duration::from_secs(5))
        .unwrap();
    // One request runs, 100 wait; every other one is refused at once.
    let refused = FLOOD - 1 - 100;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while peer.responses().len() < refused && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let responses = peer.responses();
    assert_eq!(
        responses.len(),
        refused,
        "refused at once, none processed yet"
    );
    assert!(responses
        .iter()
        .all(|r| r.code == ResponseCode::SYSTEM_BUSY.0));
    drop(release_tx); // the held request and the queued ones finish
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while peer.responses().len() < FLOOD && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let responses = peer.responses();
    assert_eq!(responses.len(), FLOOD);
    let ok = responses
        .iter()
        .filter(|r| r.code == ResponseCode::SUCCESS.0)
        .count();
    assert_eq!(ok, 101);
    c.shutdown();
}

#[test]
fn a_peer_that_never_stops_sending_does_not_starve_other_connections() {
    let chatty = FaultPeer::start(Fault::Stream).unwrap();
    let quiet = FaultPeer::start(Fault::Answer(b"fine".to_vec())).unwrap();
    let c = client();
    c.invoke_sync(chatty.addr(), req(), Duration::from_secs(5))
        .unwrap();
    // The chatty socket is readable for good from here on; the other one must still be
    // served, every time.
    for _ in 0..20 {
        let r = c
            .invoke_sync(quiet.addr(), req(), Duration::from_secs(2))
            .unwrap();
        assert_eq!(r.body, b"fine");
    }
    c.shutdown();
}

#[test]
fn frames_of_timed_out_requests_leave_the_write_queue() {
    // A peer that accepts and never reads: the socket buffers fill, the rest queues.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let holder = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let c = client();
    let n = 200;
    let body = vec![7u8; 256 * 1024];
    let (tx, rx) = unbounded();
    for _ in 0..n {
        let tx = tx.clone();
        let request = req().with_body(body.clone());
        c.invoke_async(&addr, request, Duration::from_millis(300), move |r| {
            let _ = tx.send(r.err().map(|e| e.kind()));
        })
        .unwrap();
    }
    for _ in 0..n {
        let kind = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(kind, Some(ErrorKind::Timeout));
    }
    // 50 MiB were queued; what the kernel did not take must not stay behind its requests.
    // (The I/O thread prunes when the deadlines pass; give it a moment.)
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while c.queued_write_bytes() > body.len() + 1024 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = c.queued_write_bytes();
    assert!(left <= body.len() + 1024, "{left} bytes still queued");
    c.shutdown();
    drop(holder.join());
}

/// Reads one request frame the client wrote and decodes it; `None` at the end of the
/// stream or on a frame that does not decode.
fn read_request(s: &mut std::net::TcpStream) -> Option<RemotingCommand> {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).ok()?;
    RemotingCommand::decode(&frame).ok()
}

/// What a bare TCP peer reads: each request frame the client writes, decoded.
fn frames_received(
    listener: TcpListener,
    n: usize,
) -> crossbeam_channel::Receiver<RemotingCommand> {
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        for _ in 0..n {
            let Some(cmd) = read_request(&mut s) else {
                return;
            };
            let _ = tx.send(cmd);
        }
    });
    rx
}

/// Adds a field to every request, as a user's hook may.
struct AddsAField;

impl RpcHook for AddsAField {
    fn before_request(&self, _: &str, request: &mut RemotingCommand) {
        request.ext_fields.insert("addedByHook", "yes");
    }
}

#[test]
fn with_credentials_every_request_is_signed_after_the_hooks_ran() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = frames_received(listener, 3);
    let credentials = Credentials::new("ak", "sk-for-the-test");
    let c = RemotingClient::new(RemotingConfig {
        credentials: Some(credentials.clone()),
        serialize_type: SerializeType::RocketMq,
        // One connection for all three requests (the peer accepts one).
        close_socket_if_timeout: false,
        ..RemotingConfig::default()
    })
    .unwrap();
    c.register_rpc_hook(Arc::new(AddsAField));
    let t = Duration::from_millis(300);
    c.invoke_oneway(&addr, req(), t).unwrap();
    // Nobody answers: the sync and async calls time out, after their frames went out.
    let _ = c.invoke_sync(&addr, req().with_body(b"body".to_vec()), t);
    let _ = c.invoke_async(&addr, req(), t, |_| {});
    for _ in 0..3 {
        let mut got = received.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got.ext_fields.get("addedByHook"), Some("yes"));
        assert_eq!(got.ext_fields.get(acl::ACCESS_KEY), Some("ak"));
        let sent = got.ext_fields.get(acl::SIGNATURE).map(str::to_string);
        assert!(sent.is_some(), "unsigned: {got:?}");
        // Signing what arrived again gives the same signature: it covers the hook's field.
        acl::sign(&credentials, &mut got).unwrap();
        assert_eq!(got.ext_fields.get(acl::SIGNATURE).map(str::to_string), sent);
    }
    c.shutdown();
}

#[test]
fn a_name_server_choice_that_failed_alike_everywhere_keeps_the_kind() {
    let tls = |a: &str| Error::tls(a, "invalid peer certificate: UnknownIssuer");
    let e = no_name_server(vec![tls("a:1")]);
    assert_eq!(e.kind(), ErrorKind::Tls);
    assert_eq!(e.addr(), Some("a:1"));
    let e = no_name_server(vec![tls("a:1"), tls("b:2")]);
    assert_eq!(e.kind(), ErrorKind::Tls);
    let s = e.to_string();
    assert!(s.contains("a:1") && s.contains("b:2"), "{s}");
    let timeout = Error::timeout(TimeoutPhase::Connect, Duration::from_secs(3)).with_addr("c:3");
    let e = no_name_server(vec![timeout]);
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Connect));
    // Mixed failures: a connect error listing them all.
    let e = no_name_server(vec![tls("a:1"), Error::closed("b:2", "reset")]);
    assert_eq!(e.kind(), ErrorKind::Connect);
    let s = e.to_string();
    assert!(s.contains("a:1") && s.contains("b:2"), "{s}");
}

/// A name server that answers nothing until it has read `n` requests, then answers them
/// all, last first, each with its request's body: only requests that are all in flight at
/// once get any answer.
fn answers_after_all(listener: TcpListener, n: usize) {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut got = Vec::new();
        for _ in 0..n {
            let Some(cmd) = read_request(&mut s) else {
                return;
            };
            got.push(cmd);
        }
        for cmd in got.iter().rev() {
            let answer = RemotingCommand::response(ResponseCode::SUCCESS, cmd.opaque, None)
                .with_body(cmd.body.clone());
            if s.write_all(&answer.to_frame()).is_err() {
                return;
            }
        }
        // Hold the connection until the client is done with it.
        let _ = s.read(&mut [0u8; 1]);
    });
}

#[test]
fn requests_to_the_name_server_all_go_out_before_the_first_answer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let n = 64;
    answers_after_all(listener, n);
    let c = client();
    c.update_name_server_address_list(&[addr]);
    let requests = (0..n)
        .map(|i| {
            RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC).with_body(vec![i as u8])
        })
        .collect();
    // One at a time, the first would wait for an answer that comes only after the 64th.
    let answers = c
        .invoke_namesrv_all(requests, Duration::from_secs(3))
        .unwrap();
    assert_eq!(answers.len(), n);
    for (i, a) in answers.into_iter().enumerate() {
        let a = a.unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(a.body, vec![i as u8], "answer {i} out of place");
    }
    c.shutdown();
}

#[test]
fn requests_to_a_silent_name_server_time_out_together() {
    // Reads every request and never answers (nor closes until the client does).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, received) = unbounded();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        while read_request(&mut s).is_some() {
            let _ = tx.send(());
        }
    });
    let c = client();
    c.update_name_server_address_list(&[addr]);
    let requests = (0..10)
        .map(|_| RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC))
        .collect();
    let began = std::time::Instant::now();
    let answers = c
        .invoke_namesrv_all(requests, Duration::from_millis(300))
        .unwrap();
    // One timeout for all (one at a time: ten, 3 s).
    let took = began.elapsed();
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(
        answers
            .iter()
            .all(|a| a.as_ref().err().map(Error::kind) == Some(ErrorKind::Timeout)),
        "{answers:?}"
    );
    for _ in 0..10 {
        received.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    c.shutdown();
}

/// Waits (polling) until `done` holds or `within` passes; returns whether it holds.
fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A peer that, once the client connects, writes `requests` (whole frames, back to back)
/// and then holds the connection without reading a byte until `release` is dropped.
fn sends_and_never_reads(
    listener: TcpListener,
    requests: Vec<u8>,
) -> (Sender<()>, std::thread::JoinHandle<()>) {
    use std::io::Write;
    let (release, held) = crossbeam_channel::bounded::<()>(0);
    let peer = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        if s.write_all(&requests).is_err() {
            return;
        }
        let _ = held.recv_timeout(Duration::from_secs(60));
    });
    (release, peer)
}

#[test]
fn replies_to_a_peer_that_never_reads_close_its_connection_beyond_the_reply_bound() {
    const CODE: i32 = 9_998;
    const REQUESTS: usize = 1000;
    const REPLY_BODY: usize = 64 * 1024;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut frames = Vec::new();
    for i in 0..REQUESTS {
        let mut ask = RemotingCommand::request(RequestCode(CODE));
        ask.opaque = i as i32;
        frames.extend_from_slice(&ask.to_frame());
    }
    let (release, peer) = sends_and_never_reads(listener, frames);
    let c = client();
    let processed = Arc::new(AtomicUsize::new(0));
    let p = processed.clone();
    c.register_processor(
        RequestCode(CODE),
        Arc::new(move |_: &str, r: RemotingCommand| {
            p.fetch_add(1, Ordering::SeqCst);
            Some(
                RemotingCommand::response(ResponseCode::SUCCESS, r.opaque, None)
                    .with_body(vec![0u8; REPLY_BODY]),
            )
        }),
    );
    c.connect(&addr, std::time::Instant::now() + Duration::from_secs(5))
        .unwrap();
    assert!(wait_until(Duration::from_secs(20), || processed
        .load(Ordering::SeqCst)
        == REQUESTS));
    // 62.5 MiB of replies, and the peer reads none: the connection must not keep them.
    let all = REQUESTS * REPLY_BODY;
    wait_until(Duration::from_secs(10), || {
        !c.is_connected(&addr) || c.queued_write_bytes() >= all - 16 * 1024 * 1024
    });
    let queued = c.queued_write_bytes();
    assert!(
        !c.is_connected(&addr),
        "{queued} bytes of replies queued for a peer that reads nothing, connection still open"
    );
    assert!(queued <= REPLY_BODY + 1024, "{queued} bytes left queued");
    drop(release);
    c.shutdown();
    drop(peer.join());
}

#[test]
fn big_broker_requests_beyond_the_processor_byte_bound_are_answered_busy() {
    use std::io::Write;
    const CODE: i32 = 9_997;
    const REQUESTS: usize = 48;
    const BODY: usize = 2 * 1024 * 1024;
    let bound = RemotingConfig::default().processor_queue_bytes;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // The peer writes every request, reading the client's answers meanwhile.
    let (answers_tx, answers) = unbounded();
    let peer = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let Ok(mut r) = s.try_clone() else { return };
        let reader = std::thread::spawn(move || {
            while let Some(answer) = read_request(&mut r) {
                let _ = answers_tx.send(answer.code);
            }
        });
        for i in 0..REQUESTS {
            let mut ask = RemotingCommand::request(RequestCode(CODE)).with_body(vec![1u8; BODY]);
            ask.opaque = i as i32;
            if s.write_all(&ask.to_frame()).is_err() {
                break;
            }
        }
        drop(reader.join());
    });
    let c = RemotingClient::new(RemotingConfig {
        processor_threads: 1,
        ..RemotingConfig::default()
    })
    .unwrap();
    // The one processor thread is held until released: the rest wait for it.
    let (started_tx, started) = unbounded();
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    c.register_processor(
        RequestCode(CODE),
        Arc::new(move |_: &str, r: RemotingCommand| {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
            Some(RemotingCommand::response(
                ResponseCode::SUCCESS,
                r.opaque,
                None,
            ))
        }),
    );
    c.connect(&addr, std::time::Instant::now() + Duration::from_secs(5))
        .unwrap();
    started.recv_timeout(Duration::from_secs(10)).unwrap();
    // Every request but the running one either waits or was answered busy.
    let mut busy = 0;
    let settled = wait_until(Duration::from_secs(20), || {
        while let Ok(code) = answers.try_recv() {
            assert_eq!(code, ResponseCode::SYSTEM_BUSY.0);
            busy += 1;
        }
        c.shared.processor_pool.waiting() + busy == REQUESTS - 1
    });
    let waiting_bytes = c.processor_queued_bytes();
    assert!(
        settled,
        "{busy} busy, {} waiting",
        c.shared.processor_pool.waiting()
    );
    assert!(
        waiting_bytes <= bound,
        "{waiting_bytes} bytes of requests wait for the processor ({} requests, {busy} answered busy)",
        c.shared.processor_pool.waiting()
    );
    assert!(busy > 0);
    drop(release_tx);
    // The waiting ones are processed, answered SUCCESS; nothing is left counted.
    let mut ok = 0;
    while ok + busy < REQUESTS {
        let code = answers.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(code, ResponseCode::SUCCESS.0);
        ok += 1;
    }
    assert_eq!(c.processor_queued_bytes(), 0);
    c.shutdown();
    drop(peer.join());
}

fn answering_peer() -> FaultPeer {
    FaultPeer::start(Fault::Respond(crate::testkit::fault_peer::Responder::new(
        |_| RemotingCommand::response(ResponseCode::SUCCESS, 0, None),
    )))
    .unwrap()
}

#[test]
fn sync_requests_on_an_idle_connection_are_written_by_their_caller() {
    let peer = answering_peer();
    let c = client();
    let addr = peer.addr().to_string();
    // The first request opens the connection through the I/O thread.
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    assert_eq!(c.direct_counts(), (0, 0));
    for _ in 0..20 {
        c.wait_io_idle();
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        assert_eq!(r.code, ResponseCode::SUCCESS.0);
    }
    // Each found the connection idle: nothing queued, the loop asleep.
    assert_eq!(c.direct_counts(), (20, 0));
    c.shutdown();
}

/// A peer that answers its first request at once, then waits `pause` before it reads
/// again, and answers each request with its body's length as the remark; what it read
/// comes out of the channel.
fn slow_reader(
    listener: TcpListener,
    pause: Duration,
) -> crossbeam_channel::Receiver<RemotingCommand> {
    use std::io::Write;
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut first = true;
        while let Some(cmd) = read_request(&mut s) {
            let len = cmd.body.len();
            let ok =
                RemotingCommand::response(ResponseCode::SUCCESS, cmd.opaque, Some(len.to_string()));
            let _ = tx.send(cmd);
            if s.write_all(&ok.to_frame()).is_err() {
                return;
            }
            if std::mem::take(&mut first) {
                std::thread::sleep(pause);
            }
        }
    });
    rx
}

#[test]
fn a_frame_the_socket_takes_in_part_goes_out_whole_before_the_next_request() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = slow_reader(listener, Duration::from_millis(1500));
    let config = RemotingConfig {
        max_frame: 64 << 20,
        ..RemotingConfig::default()
    };
    let c = Arc::new(RemotingClient::new(config).unwrap());
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    // More than the socket buffers hold while the peer does not read (the kernel's
    // largest send and receive buffers here: 4 and 32 MiB).
    let big: Vec<u8> = (0..40 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (c2, addr2, body) = (c.clone(), addr.clone(), big.clone());
    let first = std::thread::spawn(move || {
        c2.invoke_sync(&addr2, req().with_body(body), Duration::from_secs(20))
    });
    // The big frame is on its way; a small one from another thread must follow it.
    assert!(
        wait_until(Duration::from_secs(10), || c.direct_counts().1 == 1),
        "{:?}",
        c.direct_counts()
    );
    let small = c
        .invoke_sync(&addr, req(), Duration::from_secs(20))
        .unwrap();
    let big_answer = first.join().unwrap().unwrap();
    assert_eq!(big_answer.remark.as_deref(), Some(&*big.len().to_string()));
    assert_eq!(small.remark.as_deref(), Some("0"));
    // The peer read three whole frames, the big one intact, in order.
    let frames: Vec<RemotingCommand> = received.try_iter().collect();
    assert_eq!(frames.len(), 3);
    assert!(frames[1].body == big, "the big frame arrived changed");
    assert!(frames[2].body.is_empty());
    // The small request may find the connection idle again (written by itself) or not.
    assert_eq!(c.direct_counts().1, 1);
    c.shutdown();
}

#[test]
fn an_async_request_queued_first_reaches_the_peer_before_a_sync_one_of_the_same_thread() {
    let peer_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = peer_listener.local_addr().unwrap().to_string();
    let received = slow_reader(peer_listener, Duration::ZERO);
    let c = client();
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    let mut pairs = Vec::new();
    for _ in 0..200 {
        let (tx, rx) = unbounded();
        let a = req();
        let a_opaque = a.opaque;
        c.invoke_async(&addr, a, Duration::from_secs(10), move |r| {
            let _ = tx.send(r.is_ok());
        })
        .unwrap();
        let b = req();
        let b_opaque = b.opaque;
        c.invoke_sync(&addr, b, Duration::from_secs(10)).unwrap();
        assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
        pairs.push((a_opaque, b_opaque));
    }
    let order: Vec<i32> = received.try_iter().skip(1).map(|f| f.opaque).collect();
    assert_eq!(order.len(), 400);
    for (a, b) in pairs {
        let pos = |o| order.iter().position(|&x| x == o).unwrap();
        assert!(pos(a) < pos(b), "async {a} after sync {b}");
    }
    c.shutdown();
}

#[test]
fn a_caller_written_request_fails_at_once_when_the_peer_closes_without_answering() {
    use std::io::Write;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Answers the first request, then reads the second and closes.
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        if let Some(cmd) = read_request(&mut s) {
            let ok = RemotingCommand::response(ResponseCode::SUCCESS, cmd.opaque, None);
            let _ = s.write_all(&ok.to_frame());
        }
        let _ = read_request(&mut s);
    });
    let c = client();
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    let started = std::time::Instant::now();
    let e = c
        .invoke_sync(&addr, req(), Duration::from_secs(10))
        .unwrap_err();
    assert_eq!(c.direct_counts().0, 1);
    assert_eq!(e.kind(), ErrorKind::ConnectionClosed, "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    c.shutdown();
}

/// A bare peer on its first connection: `script` runs for each frame it reads, with the
/// frame's index; every frame read also comes out of the returned channel.
fn scripted_peer(
    mut script: impl FnMut(&mut std::net::TcpStream, &RemotingCommand, usize) + Send + 'static,
) -> (String, crossbeam_channel::Receiver<RemotingCommand>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let mut i = 0;
        while let Some(cmd) = read_request(&mut s) {
            script(&mut s, &cmd, i);
            let _ = tx.send(cmd);
            i += 1;
        }
    });
    (addr, rx)
}

fn answer(s: &mut std::net::TcpStream, request: &RemotingCommand, remark: String) {
    use std::io::Write;
    let ok = RemotingCommand::response(ResponseCode::SUCCESS, request.opaque, Some(remark));
    let _ = s.write_all(&ok.to_frame());
}

#[test]
fn a_sync_caller_on_a_quiet_connection_reads_its_own_response() {
    for caller_reads in [true, false] {
        let (addr, _) = scripted_peer(|s, r, i| answer(s, r, i.to_string()));
        let c = RemotingClient::new(RemotingConfig {
            caller_reads,
            ..RemotingConfig::default()
        })
        .unwrap();
        // The first request opens the connection through the I/O thread.
        c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        for i in 1..=20 {
            c.wait_io_idle();
            let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
            assert_eq!(r.remark.as_deref(), Some(&*i.to_string()));
        }
        assert_eq!(c.direct_counts(), (20, 0));
        assert_eq!(c.caller_reads(), if caller_reads { 20 } else { 0 });
        c.shutdown();
    }
}

#[test]
fn frames_a_reading_caller_finds_for_others_are_dispatched() {
    use std::io::Write;
    const NOTIFY: i32 = 9_998;
    // Before each answer after the first: a request of the peer's own, then the answer
    // in two halves, 30 ms apart.
    let mut requests = 0;
    let (addr, received) = scripted_peer(move |s, r, _| {
        if r.is_response() {
            return;
        }
        let i = requests;
        requests += 1;
        if i == 0 {
            return answer(s, r, "0".into());
        }
        let mut notify = RemotingCommand::request(RequestCode(NOTIFY));
        notify.opaque = 100_000 + i;
        let _ = s.write_all(&notify.to_frame());
        let ok = RemotingCommand::response(ResponseCode::SUCCESS, r.opaque, Some(i.to_string()))
            .to_frame();
        let (a, b) = ok.split_at(ok.len() / 2);
        std::thread::sleep(Duration::from_millis(30));
        let _ = s.write_all(a);
        std::thread::sleep(Duration::from_millis(30));
        let _ = s.write_all(b);
    });
    let c = client();
    let (seen_tx, seen) = unbounded();
    c.register_processor(
        RequestCode(NOTIFY),
        Arc::new(move |_: &str, r: RemotingCommand| {
            let _ = seen_tx.send(r.opaque);
            Some(RemotingCommand::response(
                ResponseCode::SUCCESS,
                r.opaque,
                None,
            ))
        }),
    );
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    let mut calls = 0;
    for i in 1..=5 {
        c.wait_io_idle();
        // A reply to the peer's request may still be on its way: then the caller queues.
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        assert_eq!(r.remark.as_deref(), Some(&*i.to_string()));
        calls += 1;
    }
    assert_eq!(calls, 5);
    assert!(c.caller_reads() >= 1, "no caller read its own response");
    // Every request of the peer reached the processor, and its reply reached the peer.
    let mut notified: Vec<i32> = (0..5)
        .map(|_| seen.recv_timeout(Duration::from_secs(5)).unwrap())
        .collect();
    notified.sort_unstable();
    assert_eq!(notified, (100_001..=100_005).collect::<Vec<_>>());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut replies = Vec::new();
    while replies.len() < 5 && std::time::Instant::now() < deadline {
        if let Ok(f) = received.recv_timeout(Duration::from_millis(100)) {
            if f.is_response() {
                replies.push(f.opaque);
            }
        }
    }
    replies.sort_unstable();
    assert_eq!(replies, (100_001..=100_005).collect::<Vec<_>>());
    c.shutdown();
}

/// The broker's own requests that hold up a caller's answer (5.x's SEND_REPLY_MESSAGE is
/// answered only after the requester's client answered the PUSH_REPLY_MESSAGE_TO_CLIENT
/// the broker sends it, often on the same connection) reach the processor while the
/// caller still waits, not after its answer.
#[test]
fn a_peer_request_that_holds_up_a_reading_callers_answer_is_served_meanwhile() {
    use std::io::Write;
    const PUSH: i32 = 9_997;
    let mut held: Option<RemotingCommand> = None;
    let (addr, _) = scripted_peer(move |s, r, i| {
        if r.is_response() {
            // Our request was answered: now the caller's.
            if let Some(h) = held.take() {
                answer(s, &h, "after the push".into());
            }
            return;
        }
        if i == 0 {
            return answer(s, r, "0".into());
        }
        let mut push = RemotingCommand::request(RequestCode(PUSH));
        push.opaque = 200_000 + i as i32;
        let _ = s.write_all(&push.to_frame());
        held = Some(r.clone());
    });
    let c = client();
    c.register_processor(
        RequestCode(PUSH),
        Arc::new(|_: &str, r: RemotingCommand| {
            Some(RemotingCommand::response(
                ResponseCode::SUCCESS,
                r.opaque,
                None,
            ))
        }),
    );
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    for _ in 0..5 {
        c.wait_io_idle();
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(3)).unwrap();
        assert_eq!(r.remark.as_deref(), Some("after the push"));
    }
    assert!(c.caller_reads() >= 1, "no caller read its own response");
    c.shutdown();
}

/// The opaques of the peer's requests of `code` as the client's processor serves them
/// (without an answer).
fn requests_served(c: &RemotingClient, code: i32) -> crossbeam_channel::Receiver<i32> {
    let (tx, rx) = unbounded();
    c.register_processor(
        RequestCode(code),
        Arc::new(move |_: &str, r: RemotingCommand| {
            let _ = tx.send(r.opaque);
            None
        }),
    );
    rx
}

/// A peer request that comes right behind a reading caller's answer, while that caller
/// still holds the socket, is served though no call follows: the loop, woken for it and
/// finding the socket held, is asked to read once the caller lets go. (On Linux the
/// socket stays in the loop's poll while a caller reads it, and such bytes raise no
/// second wake-up.)
#[test]
fn a_peer_request_right_behind_a_reading_callers_answer_is_served_without_another_call() {
    use std::io::Write;
    const NOTIFY: i32 = 9_996;
    const CALLS: i32 = 300;
    let (addr, _) = scripted_peer(move |s, r, i| {
        if r.is_response() {
            return;
        }
        // The request right behind the answer, not when the answer's ACK comes.
        let _ = s.set_nodelay(true);
        answer(s, r, i.to_string());
        if i > 0 {
            // 0 to 300 µs behind it: some land while the caller handles its answer.
            let behind = std::time::Instant::now() + Duration::from_micros(i as u64 * 7 % 301);
            while std::time::Instant::now() < behind {
                std::hint::spin_loop();
            }
            let mut notify = RemotingCommand::request(RequestCode(NOTIFY));
            notify.opaque = 300_000 + i as i32;
            let _ = s.write_all(&notify.to_frame());
        }
    });
    let c = client();
    let seen = requests_served(&c, NOTIFY);
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    let mut stranded = Vec::new();
    for _ in 0..CALLS {
        c.wait_io_idle();
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        let i: i32 = r.remark.as_deref().unwrap_or("").parse().unwrap();
        // Nothing else goes over the connection until the peer's request was served.
        match seen.recv_timeout(Duration::from_secs(2)) {
            Ok(opaque) => assert_eq!(opaque, 300_000 + i),
            Err(_) => stranded.push(i),
        }
    }
    assert!(stranded.is_empty(), "never served: {stranded:?}");
    assert!(c.caller_reads() >= 1, "no caller read its own response");
    c.shutdown();
}

/// The interleaving the test above can only hope to hit, forced: the loop is woken for a
/// peer's request while a caller holds the socket, and leaves it; the caller lets go
/// with no further read, and the request is still served.
#[cfg(target_os = "linux")]
#[test]
fn bytes_the_loop_left_to_a_caller_holding_the_socket_are_read_when_it_lets_go() {
    use std::io::Write;
    const NOTIFY: i32 = 9_995;
    let (go_tx, go) = crossbeam_channel::bounded::<()>(1);
    let (addr, _) = scripted_peer(move |s, r, i| {
        if r.is_response() {
            return;
        }
        answer(s, r, "0".into());
        if i == 0 && go.recv_timeout(Duration::from_secs(10)).is_ok() {
            let mut notify = RemotingCommand::request(RequestCode(NOTIFY));
            notify.opaque = 400_000;
            let _ = s.write_all(&notify.to_frame());
        }
    });
    let c = client();
    let seen = requests_served(&c, NOTIFY);
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    let w = c.shared.direct.read().get(&addr).cloned().unwrap();
    assert!(
        w.shares_wakeups,
        "the socket left the loop's poll to be lent"
    );
    // As a caller reading its own response does: the read side held, the socket lent.
    let rs = w.read.lock();
    w.lent.store(true, Ordering::SeqCst);
    go_tx.send(()).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || w.missed.load(Ordering::SeqCst)),
        "the loop was not woken for the peer's request"
    );
    assert!(seen.try_recv().is_err(), "served while the socket was held");
    {
        let mut st = w.state.lock();
        direct::give_back(&c.shared, &w, &mut st, rs, &addr);
    }
    assert_eq!(seen.recv_timeout(Duration::from_secs(5)), Ok(400_000));
    c.shutdown();
}

/// A reader hands the socket to its first follower: it lets go of the read side, and the
/// follower, off the list now, takes it as it wakes. A caller coming in that moment, with
/// the list full, must not take the read side: it would read the follower's answer and
/// hand it to the loop, which has no waiter for it (CI saw the follower time out).
#[test]
fn a_caller_does_not_take_the_socket_a_reader_is_handing_to_its_follower() {
    let (addr, _) = scripted_peer(|s, r, _| {
        let remark = r.remark.clone().unwrap_or_default();
        answer(s, r, remark)
    });
    let c = Arc::new(client());
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    let w = c.shared.direct.read().get(&addr).cloned().unwrap();
    // The hand-off under way: the socket lent, the read side free for a moment.
    w.lent.store(true, Ordering::SeqCst);
    let writes = |c: &RemotingClient| c.shared.direct_writes.load(Ordering::SeqCst);
    let (writes0, reads0) = (writes(&c), c.shared.direct_reads.load(Ordering::SeqCst));
    let call = |n: usize| {
        let (c, addr) = (c.clone(), addr.clone());
        std::thread::spawn(move || {
            let mut r = req();
            r.remark = Some(format!("call-{n}"));
            let got = c.invoke_sync(&addr, r, Duration::from_secs(10));
            got.map(|a| a.remark)
        })
    };
    // Followers fill the list (they write their frames and wait) ...
    let mut calls: Vec<_> = (0..direct::MAX_FOLLOWERS).map(call).collect();
    assert!(wait_until(Duration::from_secs(5), || writes(&c)
        == writes0 + direct::MAX_FOLLOWERS as u64));
    // ... and one more caller writes its frame.
    calls.push(call(direct::MAX_FOLLOWERS));
    assert!(wait_until(Duration::from_secs(5), || writes(&c)
        == writes0 + direct::MAX_FOLLOWERS as u64 + 1));
    let read_meanwhile = wait_until(Duration::from_millis(300), || {
        c.shared.direct_reads.load(Ordering::SeqCst) != reads0
    });
    assert!(
        !read_meanwhile,
        "a caller read the socket during the hand-off"
    );
    // The reader that took the socket is done, and passes it on.
    {
        let rs = w.read.lock();
        let mut st = w.state.lock();
        let next_reader = direct::pass_on(&c.shared, &w, &mut st, rs, &addr, None);
        drop(st);
        drop(next_reader);
    }
    for (n, t) in calls.into_iter().enumerate() {
        let got = t.join().unwrap();
        assert_eq!(got.ok().flatten(), Some(format!("call-{n}")), "call {n}");
    }
    c.shutdown();
}

#[test]
fn a_reading_caller_times_out_and_the_connection_serves_the_next_call() {
    // The peer answers request 1 only once request 2 came, then answers 2 (and the rest).
    let held = Arc::new(parking_lot::Mutex::new(None::<RemotingCommand>));
    let (addr, _) = scripted_peer(move |s, r, i| {
        if i == 1 {
            *held.lock() = Some(r.clone());
            return;
        }
        let late = held.lock().take();
        if let Some(late) = late {
            answer(s, &late, "late".into());
        }
        answer(s, r, i.to_string());
    });
    let c = RemotingClient::new(RemotingConfig {
        close_socket_if_timeout: false,
        ..RemotingConfig::default()
    })
    .unwrap();
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    let started = std::time::Instant::now();
    let e = c
        .invoke_sync(&addr, req(), Duration::from_millis(300))
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    assert_eq!(c.caller_reads(), 1);
    // The late answer to request 1 is not taken for request 2's, and the socket is back
    // in the loop's hands between the calls.
    for i in 2..=4 {
        c.wait_io_idle();
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        assert_eq!(r.remark.as_deref(), Some(&*i.to_string()));
    }
    let async_answer = {
        let (tx, rx) = unbounded();
        c.invoke_async(&addr, req(), Duration::from_secs(5), move |r| {
            let _ = tx.send(r.map(|r| r.remark));
        })
        .unwrap();
        rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap()
    };
    assert_eq!(async_answer.as_deref(), Some("5"));
    c.shutdown();
}

/// Shutdown wakes a caller reading its own response, and a caller following it.
#[test]
fn shutdown_wakes_a_caller_reading_its_own_response() {
    // Answers the first request only.
    let (addr, _) = scripted_peer(|s, r, i| {
        if i == 0 {
            answer(s, r, "0".into());
        }
    });
    let c = Arc::new(client());
    let reader = start_reader(&c, &addr, Duration::from_secs(30));
    let follower = call_in_thread(&c, &addr, Duration::from_secs(30));
    assert!(wait_until(Duration::from_secs(5), || c.direct_counts().0 == 2));
    std::thread::sleep(Duration::from_millis(100));
    c.shutdown();
    let (r, waited) = reader.join().unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State, "{e}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // The reader fails its follower with the reason the loop closed the connection.
    let (r, waited) = follower.join().unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::State, "{e}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

/// A client whose timed-out calls leave the connection open.
fn patient_client() -> Arc<RemotingClient> {
    Arc::new(
        RemotingClient::new(RemotingConfig {
            close_socket_if_timeout: false,
            ..RemotingConfig::default()
        })
        .unwrap(),
    )
}

/// Connects `c` to `addr` (the peer answers the first request), then starts a call on
/// another thread and waits until that caller reads the connection itself.
fn start_reader(
    c: &Arc<RemotingClient>,
    addr: &str,
    timeout: Duration,
) -> std::thread::JoinHandle<(Result<RemotingCommand>, Duration)> {
    c.invoke_sync(addr, req(), Duration::from_secs(5)).unwrap();
    c.wait_io_idle();
    let reader = call_in_thread(c, addr, timeout);
    assert!(wait_until(Duration::from_secs(5), || c.caller_reads() == 1));
    reader
}

/// Calls on this thread and checks it times out after `timeout` and before `within`.
fn times_out(c: &RemotingClient, addr: &str, timeout: Duration, within: Duration) {
    let started = std::time::Instant::now();
    let e = c.invoke_sync(addr, req(), timeout).unwrap_err();
    let waited = started.elapsed();
    assert!(e.is_timeout(), "{e}");
    assert!(waited >= timeout && waited < within, "{waited:?}");
}

/// Runs `invoke_sync` of `req()` on another thread: the call and how long it took.
fn call_in_thread(
    c: &Arc<RemotingClient>,
    addr: &str,
    timeout: Duration,
) -> std::thread::JoinHandle<(Result<RemotingCommand>, Duration)> {
    let (c, addr) = (c.clone(), addr.to_string());
    std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let r = c.invoke_sync(&addr, req(), timeout);
        (r, started.elapsed())
    })
}

/// A caller that finds another caller reading the connection follows it: when the
/// reader's own answer comes first, the reader hands the reading to it, and the follower
/// reads its answer itself (no trip through the I/O thread).
#[test]
fn a_caller_that_comes_while_another_reads_is_handed_the_reading() {
    let mut held: Option<RemotingCommand> = None;
    let (addr, _) = scripted_peer(move |s, r, i| match i {
        0 => answer(s, r, "0".into()),
        1 => held = Some(r.clone()),
        _ => {
            if let Some(first) = held.take() {
                answer(s, &first, "1".into());
            }
            std::thread::sleep(Duration::from_millis(50));
            answer(s, r, i.to_string());
        }
    });
    let c = Arc::new(client());
    let reader = start_reader(&c, &addr, Duration::from_secs(5));
    let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    assert_eq!(r.remark.as_deref(), Some("2"));
    let (first, _) = reader.join().unwrap();
    assert_eq!(first.unwrap().remark.as_deref(), Some("1"));
    // Both answers were read by the callers waiting for them.
    assert_eq!(c.caller_answers(), 2);
    // The socket is the loop's again: an async request is answered.
    let (tx, rx) = unbounded();
    c.invoke_async(&addr, req(), Duration::from_secs(5), move |r| {
        let _ = tx.send(r.map(|r| r.remark));
    })
    .unwrap();
    let remark = rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(remark.as_deref(), Some("3"));
    c.shutdown();
}

/// The answers of a reader and its follower in one read: the reader gives the follower
/// its answer directly.
#[test]
fn a_reader_that_reads_a_followers_answer_delivers_it() {
    use std::io::Write;
    let mut held: Option<RemotingCommand> = None;
    let (addr, _) = scripted_peer(move |s, r, i| match i {
        0 => answer(s, r, "0".into()),
        1 => held = Some(r.clone()),
        _ => {
            let mut both = Vec::new();
            if let Some(first) = held.take() {
                both.extend(
                    RemotingCommand::response(
                        ResponseCode::SUCCESS,
                        first.opaque,
                        Some("1".into()),
                    )
                    .to_frame(),
                );
            }
            both.extend(
                RemotingCommand::response(ResponseCode::SUCCESS, r.opaque, Some(i.to_string()))
                    .to_frame(),
            );
            let _ = s.write_all(&both);
        }
    });
    let c = Arc::new(client());
    let reader = start_reader(&c, &addr, Duration::from_secs(5));
    let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    assert_eq!(r.remark.as_deref(), Some("2"));
    assert_eq!(
        reader.join().unwrap().0.unwrap().remark.as_deref(),
        Some("1")
    );
    assert_eq!(c.caller_answers(), 2);
    c.shutdown();
}

/// A follower whose deadline passes while the reader still waits leaves on time; the
/// reader times out on its own deadline; the next call is answered.
#[test]
fn a_follower_times_out_on_its_own_deadline_while_the_reader_waits() {
    let (addr, _) = scripted_peer(move |s, r, i| {
        if i == 0 || i >= 3 {
            answer(s, r, i.to_string());
        }
    });
    let c = patient_client();
    let reader = start_reader(&c, &addr, Duration::from_millis(1500));
    times_out(
        &c,
        &addr,
        Duration::from_millis(300),
        Duration::from_millis(1200),
    );
    let (first, waited) = reader.join().unwrap();
    assert!(first.unwrap_err().is_timeout());
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    c.wait_io_idle();
    let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    assert_eq!(r.remark.as_deref(), Some("3"));
    c.shutdown();
}

/// A follower handed the reading whose answer never comes times out on its deadline, and
/// the late answer is not taken for the next call's.
#[test]
fn a_handed_reader_times_out_and_the_next_call_gets_its_own_answer() {
    // Request 1 is answered once request 2 came; 2 only when request 3 comes.
    let (mut h1, mut h2): (Option<RemotingCommand>, Option<RemotingCommand>) = (None, None);
    let (addr, _) = scripted_peer(move |s, r, i| match i {
        0 => answer(s, r, "0".into()),
        1 => h1 = Some(r.clone()),
        2 => {
            if let Some(first) = h1.take() {
                answer(s, &first, "1".into());
            }
            h2 = Some(r.clone());
        }
        _ => {
            if let Some(late) = h2.take() {
                answer(s, &late, "late".into());
            }
            answer(s, r, i.to_string());
        }
    });
    let c = patient_client();
    let reader = start_reader(&c, &addr, Duration::from_secs(5));
    times_out(
        &c,
        &addr,
        Duration::from_millis(400),
        Duration::from_secs(2),
    );
    assert_eq!(
        reader.join().unwrap().0.unwrap().remark.as_deref(),
        Some("1")
    );
    // The follower was handed the socket and read for itself until its deadline.
    assert_eq!(c.caller_reads(), 2);
    for i in 3..=5 {
        c.wait_io_idle();
        let r = c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
        assert_eq!(r.remark.as_deref(), Some(&*i.to_string()));
    }
    c.shutdown();
}

/// Many sync callers on one connection each get the answer to their own request: 8
/// (followers of a reading caller) and 32 (past `MAX_FOLLOWERS`: callers register with
/// the loop, and readers give it the socket back with their followers).
#[test]
fn many_sync_callers_on_one_connection_each_get_their_own_answer() {
    for threads in [8, 32] {
        callers_each_get_their_own_answer(threads);
    }
}

fn callers_each_get_their_own_answer(threads: usize) {
    const CALLS: usize = 300;
    let (addr, _) = scripted_peer(|s, r, _| {
        let remark = r.remark.clone().unwrap_or_default();
        answer(s, r, remark)
    });
    let c = Arc::new(client());
    c.invoke_sync(&addr, req(), Duration::from_secs(5)).unwrap();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (c, addr) = (c.clone(), addr.clone());
            std::thread::spawn(move || {
                let mut wrong = 0;
                for i in 0..CALLS {
                    let mut r = req();
                    let mine = format!("{t}-{i}");
                    r.remark = Some(mine.clone());
                    match c.invoke_sync(&addr, r, Duration::from_secs(10)) {
                        Ok(a) if a.remark.as_deref() == Some(&*mine) => {}
                        _ => wrong += 1,
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: usize = handles.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(wrong, 0, "{threads} threads");
    assert!(c.caller_answers() > 0);
    c.shutdown();
}
