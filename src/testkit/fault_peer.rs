//! A small fault-injecting TCP peer for what a healthy broker never does: silence,
//! garbage, oversized or truncated frames, a connection reset mid-response.
//!
//! It complements the real broker in tests; it never stands in for one. It reads whole
//! request frames with the crate's own decoder and answers according to its [`Fault`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::protocol::{frame_len, RemotingCommand, ResponseCode, DEFAULT_MAX_FRAME};

/// How the peer misbehaves.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Reads requests, never answers. To a TLS client: a handshake that stalls.
    Silent,
    /// Writes these bytes as soon as it accepts, before reading anything, then reads and
    /// never answers: hostile bytes where a TLS client waits for the ServerHello.
    Greet(Vec<u8>),
    /// Answers every request with these bytes instead of a frame.
    Garbage(Vec<u8>),
    /// Answers with a length prefix claiming this many bytes (bigger than any limit).
    OversizedLength(u32),
    /// Answers with the first `n` bytes of a valid response, then closes.
    TruncatedThenClose(usize),
    /// Closes the connection as soon as a request arrives.
    CloseOnRequest,
    /// Answers correctly (SUCCESS, same opaque) after this delay.
    SlowAnswer(Duration),
    /// Answers every request SUCCESS with this body: e.g. a name server that gives every
    /// topic the same route (to a dead port, or to another fault peer as the broker).
    Answer(Vec<u8>),
    /// Sends a response whose opaque matches nothing, then the real answer.
    UnknownOpaqueFirst,
    /// Before answering, sends the client a request with this code (as a broker sends
    /// NOTIFY_CONSUMER_IDS_CHANGED or GET_CONSUMER_RUNNING_INFO); the client's responses
    /// are kept for [`FaultPeer::responses`].
    AskClient(i32),
    /// On the first request, sends the client this many requests with this code at once
    /// (a broker flooding a client), then answers; the client's responses are kept for
    /// [`FaultPeer::responses`].
    FloodClient(i32, usize),
    /// After the first request, answers it and then writes responses with unknown opaques
    /// without pause until stopped: a peer that never lets its socket run dry.
    Stream,
    /// Answers each request with what the function makes of it (its opaque is set to the
    /// request's): e.g. a broker that answers one request code with SYSTEM_ERROR and
    /// the others with SUCCESS.
    Respond(Responder),
}

/// The function of [`Fault::Respond`].
#[derive(Clone)]
pub struct Responder(Arc<dyn Fn(&RemotingCommand) -> RemotingCommand + Send + Sync>);

impl Responder {
    /// Answers each request with `f(request)`.
    pub fn new(f: impl Fn(&RemotingCommand) -> RemotingCommand + Send + Sync + 'static) -> Self {
        Responder(Arc::new(f))
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

/// A listening fault peer on a loopback port; stops when dropped.
pub struct FaultPeer {
    addr: String,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    responses: Arc<Mutex<Vec<RemotingCommand>>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for FaultPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultPeer")
            .field("addr", &self.addr)
            .field("accepted", &self.accepted())
            .finish_non_exhaustive()
    }
}

impl FaultPeer {
    /// Starts listening on `127.0.0.1:<free port>`.
    pub fn start(fault: Fault) -> std::io::Result<FaultPeer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let responses = Arc::new(Mutex::new(Vec::new()));
        let (s, a, r) = (stop.clone(), accepted.clone(), responses.clone());
        let thread = std::thread::Builder::new()
            .name("rmq-fault-peer".into())
            .spawn(move || {
                let mut conns = Vec::new();
                while !s.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            a.fetch_add(1, Ordering::SeqCst);
                            let fault = fault.clone();
                            let s2 = s.clone();
                            let r2 = r.clone();
                            conns.push(std::thread::spawn(move || serve(stream, fault, &s2, &r2)));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
                for c in conns {
                    let _ = c.join();
                }
            })?;
        Ok(FaultPeer {
            addr,
            stop,
            accepted,
            responses,
            thread: Some(thread),
        })
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Responses the client sent to the peer's own requests ([`Fault::AskClient`]).
    pub fn responses(&self) -> Vec<RemotingCommand> {
        self.responses.lock().clone()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    fault: Fault,
    stop: &AtomicBool,
    responses: &Mutex<Vec<RemotingCommand>>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    if let Fault::Greet(bytes) = &fault {
        if stream.write_all(bytes).is_err() {
            return;
        }
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
        while let Ok(Some(n)) = frame_len(&buf, DEFAULT_MAX_FRAME) {
            if buf.len() < 4 + n {
                break;
            }
            let frame: Vec<u8> = buf.drain(..4 + n).collect();
            let Ok(req) = RemotingCommand::decode(&frame[4..]) else {
                return;
            };
            if req.is_response() {
                responses.lock().push(req);
                continue;
            }
            let ok = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None)
                .with_body(b"ok".to_vec());
            let result = match &fault {
                Fault::Silent | Fault::Greet(_) => Ok(()),
                Fault::Garbage(bytes) => stream.write_all(bytes),
                Fault::OversizedLength(n) => stream.write_all(&n.to_be_bytes()),
                Fault::TruncatedThenClose(n) => {
                    let f = ok.to_frame();
                    let _ = stream.write_all(&f[..(*n).min(f.len())]);
                    return;
                }
                Fault::CloseOnRequest => return,
                Fault::SlowAnswer(d) => {
                    std::thread::sleep(*d);
                    stream.write_all(&ok.to_frame())
                }
                Fault::Answer(body) => {
                    let answer = RemotingCommand::response(ResponseCode::SUCCESS, req.opaque, None)
                        .with_body(body.clone());
                    stream.write_all(&answer.to_frame())
                }
                Fault::Respond(f) => {
                    let mut answer = (f.0)(&req);
                    answer.opaque = req.opaque;
                    stream.write_all(&answer.to_frame())
                }
                Fault::AskClient(code) => {
                    let mut ask = RemotingCommand::request(crate::protocol::RequestCode(*code));
                    ask.opaque = 777_000 + req.opaque;
                    stream
                        .write_all(&ask.to_frame())
                        .and_then(|_| stream.write_all(&ok.to_frame()))
                }
                Fault::FloodClient(code, count) => {
                    let mut flood = Vec::new();
                    for i in 0..*count {
                        let mut ask = RemotingCommand::request(crate::protocol::RequestCode(*code));
                        ask.opaque = 900_000 + i as i32;
                        flood.extend_from_slice(&ask.to_frame());
                    }
                    stream
                        .write_all(&flood)
                        .and_then(|_| stream.write_all(&ok.to_frame()))
                }
                Fault::Stream => {
                    if stream.write_all(&ok.to_frame()).is_err() {
                        return;
                    }
                    let mut burst = Vec::new();
                    for i in 0..256 {
                        let mut stray = ok.clone();
                        stray.opaque = 2_000_000_000 - i;
                        burst.extend_from_slice(&stray.to_frame());
                    }
                    while !stop.load(Ordering::SeqCst) {
                        if stream.write_all(&burst).is_err() {
                            return;
                        }
                    }
                    return;
                }
                Fault::UnknownOpaqueFirst => {
                    let mut stray = ok.clone();
                    stray.opaque = req.opaque.wrapping_add(1_000_000);
                    stream
                        .write_all(&stray.to_frame())
                        .and_then(|_| stream.write_all(&ok.to_frame()))
                }
            };
            if result.is_err() {
                return;
            }
        }
    }
}
