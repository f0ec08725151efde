//! The I/O thread: one `mio::Poll` loop that owns every TCP connection.
//!
//! Callers encode frames on their own threads and hand them over as [`Command`]s through
//! a channel plus a shared `Waker`. The loop owns the pending table (opaque → waiter), so
//! it needs no lock: a response completes its waiter by filling a one-value slot (sync,
//! which never waits) or by queueing the callback on the callback pool (async). It never
//! blocks on a caller and never runs user code.
//!
//! A sync caller may write its own frame instead (`super::direct`, which owns that
//! write, the shared socket and what the loop keeps for such requests): when a plain
//! connection is established the loop shares a duplicate of its socket, and a caller that
//! finds the connection idle (nothing queued, nothing in the command channel, the loop not
//! draining) queues only the registration of its waiter, without a wake-up, and writes the
//! frame itself. The loop wakes once per such request, for its response, instead of twice.
//! A response whose waiter is not registered yet is kept until the end of the turn's
//! command drain, which registers it (the registration was queued before the frame left).
//! When no other request waits on the connection, the caller reads its response too: it
//! takes the socket out of this loop's poll and holds the connection's read side (which
//! the loop only tries) until it gives the socket back; frames it read for others come
//! back as `Command::Incoming`. No thread of the loop wakes for such a request at all.
//!
//! This module owns the loop: connections, the command drain, queued writes and flushes,
//! TLS records, timeouts and closes; `inbound` its reads and frame dispatch.
//!
//! With TLS, each connection also owns a `rustls::ClientConnection`: the loop moves
//! records between it and the socket (`read_tls`/`write_tls`, both non-blocking), hands
//! it plaintext frames to encrypt, and takes decrypted bytes from it into the same frame
//! parser. A connection counts as connected (and its queued frames go out) only once the
//! handshake is done; the connect deadline covers the TCP connect and the handshake.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use log::{debug, error, info, warn};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::command::{CloseReason, Command, PendingRequest, SyncReply, Waiter};
use super::direct::{write_rest, DirectAwaits, DirectWriter};
use super::frames::{parse_frames, read_frames, ReadBuf, ReadEnd};
use super::pending::{OpaqueMap, PendingEntry, PendingTable};
use super::pool::Refused;

/// Broker-initiated requests refused because the processor queue was full (for logging).
static BUSY_REFUSALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
use super::semaphore::Permit;
use super::Shared;
use crate::error::{Error, TimeoutPhase};
use crate::protocol::{RemotingCommand, ResponseCode};

mod inbound;

pub(super) const WAKER: Token = Token(0);
const READ_CHUNK: usize = 64 * 1024;
/// Reads of one socket per turn of the loop. Edge-triggered readiness says "drain until
/// WouldBlock", but a peer that writes without pause would then hold the loop forever: a
/// socket that reached this cap is read again on the next turn, after the others.
const MAX_READS_PER_TURN: usize = 16;
/// A TLS socket's turn is bounded by bytes, the plain turn's worth: rustls reads at most
/// about one record (16 KiB) per call. The read count is capped too, against a peer that
/// trickles bytes.
const MAX_TLS_BYTES_PER_TURN: usize = MAX_READS_PER_TURN * READ_CHUNK;
const MAX_TLS_READS_PER_TURN: usize = 16 * MAX_READS_PER_TURN;
/// Largest number of queued frames handed to one `writev`.
const MAX_IOV: usize = 64;
/// Whether a read that returned less than asked proves the socket drained. On epoll
/// and kqueue (edge-triggered in mio) bytes that arrive afterwards raise a new event;
/// Windows readiness emulation wants WouldBlock first (tokio draws the same line).
const SHORT_READ_DRAINS: bool = !cfg!(windows);
/// How often idle connections are looked for when nothing else wakes the loop.
const TICK: Duration = Duration::from_millis(500);

struct WriteItem {
    frame: Vec<u8>,
    /// The request's opaque when a response is awaited: its frame leaves the queue when
    /// the request times out before a byte of it was written.
    opaque: Option<i32>,
    /// An answer to a peer's request (counted in `Conn::reply_bytes`).
    reply: bool,
    _permit: Option<Permit>,
}

enum ConnState {
    Connecting {
        deadline: Instant,
    },
    /// TCP is up, the TLS handshake runs; same deadline as the connect.
    Handshaking {
        deadline: Instant,
    },
    Connected,
}

struct Conn {
    addr: String,
    stream: TcpStream,
    /// The socket shared with sync callers, once a plain connection is established.
    direct: Option<Arc<DirectWriter>>,
    /// The TLS session, when TLS is on.
    tls: Option<Box<rustls::ClientConnection>>,
    state: ConnState,
    /// What was read and not parsed yet (TLS: decrypted), before the connection is shared
    /// with sync callers (`DirectWriter::read` from then on).
    rbuf: ReadBuf,
    wq: VecDeque<WriteItem>,
    /// Bytes of the replies in `wq` (bounded by `RemotingConfig::reply_queue_bytes`).
    reply_bytes: usize,
    /// Bytes of the front item already written.
    woff: usize,
    writable_interest: bool,
    /// Queued for the flush after the current command drain.
    flush_pending: bool,
    last_active: Instant,
    connect_waiters: Vec<Sender<Result<(), Error>>>,
}

pub(super) struct IoLoop {
    poll: Poll,
    shared: Arc<Shared>,
    rx: Receiver<Command>,
    /// Tokens are ours, never the peer's: hashed cheaply.
    conns: OpaqueMap<Token, Conn>,
    by_addr: HashMap<String, Token>,
    /// The address of the last `Send` and its connection: a producer sends its frames to
    /// one broker address (the same `Arc`) again and again, and this spares the lookup.
    last_send: Option<(Arc<str>, Token)>,
    pending: PendingTable<Waiter>,
    next_token: usize,
    scratch: Box<[u8]>,
    /// Sockets that hit `MAX_READS_PER_TURN` and still have bytes to read.
    still_readable: Vec<Token>,
    /// Connections with frames queued during this command drain.
    to_flush: Vec<Token>,
    /// The event being handled reported the peer's end (or an error): read until
    /// WouldBlock or end of stream, even after a short read.
    read_to_end: bool,
    /// What the registrations of caller-written frames may need when the drain handles
    /// them: responses read before them, why their connection closed.
    direct_awaits: DirectAwaits,
    turn: u64,
    /// Frames a flush wrote, given back to the frame pool at its end, under one lock.
    spent: Vec<Vec<u8>>,
}

impl IoLoop {
    pub(super) fn new(poll: Poll, shared: Arc<Shared>, rx: Receiver<Command>) -> Self {
        IoLoop {
            poll,
            shared,
            rx,
            conns: OpaqueMap::default(),
            by_addr: HashMap::new(),
            last_send: None,
            pending: PendingTable::new(),
            next_token: 1,
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            still_readable: Vec::new(),
            to_flush: Vec::new(),
            read_to_end: false,
            direct_awaits: DirectAwaits::default(),
            turn: 0,
            spent: Vec::new(),
        }
    }

    /// Runs until shutdown (or a failed poll), then fails everything pending. A panic in
    /// the loop is caught so that every accepted async callback still runs once.
    pub(super) fn run(mut self) {
        if catch_unwind(AssertUnwindSafe(|| self.poll_loop())).is_err() {
            error!("the I/O thread panicked; failing everything pending");
        }
        // From here on no async request is accepted, and every one accepted before is in
        // the command channel, where `fail_everything` finds it.
        self.shared.stop_accepting();
        self.fail_everything();
    }

    fn poll_loop(&mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            // Sockets left readable on the last turn are served without waiting.
            let timeout = if self.still_readable.is_empty() {
                self.next_timeout(Instant::now())
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    warn!("poll failed: {e}; the I/O thread stops");
                    break;
                }
            }
            for ev in events.iter() {
                if ev.token() == WAKER {
                    continue;
                }
                // A peer's FIN may come in the same event as its last bytes: then the
                // socket is read to the end, not left after a short read.
                self.read_to_end = ev.is_read_closed() || ev.is_error();
                self.conn_event(
                    ev.token(),
                    ev.is_readable(),
                    ev.is_writable(),
                    ev.is_error(),
                );
                self.read_to_end = false;
            }
            for token in std::mem::take(&mut self.still_readable) {
                if self.conns.contains_key(&token) {
                    self.read(token);
                }
            }
            // Clear before draining: a command queued after this point wakes us again.
            self.shared.wake_requested.store(false, Ordering::SeqCst);
            // Callers write their own frames only while no drain runs (`call_direct`).
            self.shared.draining.store(true, Ordering::SeqCst);
            let mut shutdown = false;
            while let Ok(cmd) = self.rx.try_recv() {
                if let Command::Shutdown = cmd {
                    shutdown = true;
                    break;
                }
                self.handle(cmd);
            }
            // One write per connection for everything queued in this drain: frames from
            // many callers go out together in one writev.
            for token in std::mem::take(&mut self.to_flush) {
                if let Some(c) = self.conns.get_mut(&token) {
                    c.flush_pending = false;
                    self.flush(token);
                }
            }
            self.shared.draining.store(false, Ordering::SeqCst);
            let turn = self.turn;
            self.turn += 1;
            self.direct_awaits.end_turn(turn);
            #[cfg(test)]
            self.shared.turns.fetch_add(1, Ordering::SeqCst);
            if shutdown {
                break;
            }
            self.expire(Instant::now());
        }
    }

    fn next_timeout(&self, now: Instant) -> Duration {
        let mut next = now + TICK;
        if let Some(d) = self.pending.next_deadline() {
            next = next.min(d);
        }
        for c in self.conns.values() {
            if let ConnState::Connecting { deadline } | ConnState::Handshaking { deadline } =
                c.state
            {
                next = next.min(deadline);
            }
        }
        next.saturating_duration_since(now)
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Connect { addr, sock, reply } => match self.conn_for(&addr, sock) {
                Ok(token) => {
                    if let Some(c) = self.conns.get_mut(&token) {
                        match c.state {
                            ConnState::Connected => {
                                let _ = reply.try_send(Ok(()));
                            }
                            ConnState::Connecting { .. } | ConnState::Handshaking { .. } => {
                                c.connect_waiters.push(reply)
                            }
                        }
                    }
                }
                Err(e) => {
                    let _ = reply.try_send(Err(e));
                }
            },
            Command::Send {
                addr,
                sock,
                frame,
                wait,
                permit,
            } => {
                let token = match self.last_send_conn(&addr) {
                    Some(t) => t,
                    None => match self.conn_for(&addr, sock) {
                        Ok(t) => {
                            self.last_send = Some((addr, t));
                            t
                        }
                        Err(e) => {
                            if let Some(p) = wait {
                                self.complete(p.waiter, Err(e));
                            }
                            return;
                        }
                    },
                };
                let opaque = wait.as_ref().map(|p| p.opaque);
                if let Some(p) = wait {
                    self.register(token, p);
                }
                self.queue_write(token, frame, opaque, permit, false);
            }
            Command::Await { token, wait } => {
                if let Some(response) = self.direct_awaits.take_early(token, wait.opaque) {
                    self.complete(wait.waiter, Ok(response));
                } else if self.conns.contains_key(&token) {
                    self.register(token, wait);
                } else {
                    // Closed after the caller wrote: it fails as the waiters did then.
                    let err = self.direct_awaits.closed_error(token);
                    self.complete(wait.waiter, Err(err));
                }
            }
            Command::Flush { token } => {
                if let Some(c) = self.conns.get_mut(&token) {
                    if !c.flush_pending {
                        c.flush_pending = true;
                        self.to_flush.push(token);
                    }
                }
            }
            Command::Read { token } => {
                if self.conns.contains_key(&token) && !self.still_readable.contains(&token) {
                    self.still_readable.push(token);
                }
            }
            Command::Incoming { token, frames } => {
                for (cmd, len) in frames {
                    self.dispatch(token, cmd, len);
                }
            }
            Command::Reply { token, frame } => {
                let Some(c) = self.conns.get(&token) else {
                    debug!("dropping a reply: its connection is gone");
                    return;
                };
                // A peer that sends requests and reads none of the answers would grow the
                // queue for ever: past the bound it is cut off (a broker is dialled again
                // by the next request to it). One reply bigger than the bound still goes.
                let limit = self.shared.config.reply_queue_bytes;
                if c.reply_bytes > 0 && c.reply_bytes + frame.len() > limit {
                    let why = format!(
                        "the peer reads none of our replies ({} bytes unwritten, at most {limit})",
                        c.reply_bytes
                    );
                    warn!("closing the connection to {}: {why}", c.addr);
                    self.close(token, CloseReason::Closed(why));
                    return;
                }
                self.queue_write(token, frame, None, None, true);
            }
            Command::Close { addr, why } => {
                if let Some(&t) = self.by_addr.get(&addr) {
                    self.close(t, CloseReason::Closed(why));
                }
            }
            Command::Shutdown => {}
        }
    }

    /// Registers the waiter of a request written (or queued) on `token`'s connection.
    fn register(&mut self, token: Token, p: PendingRequest) {
        if let Some(d) = self.conns.get(&token).and_then(|c| c.direct.as_deref()) {
            d.awaiting.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(old) = self.pending.insert(
            p.opaque,
            PendingEntry {
                token,
                deadline: p.deadline,
                timeout: p.timeout,
                waiter: p.waiter,
            },
        ) {
            // Only after 2^32 requests can an opaque still be pending.
            self.settled(old.token);
            self.complete(
                old.waiter,
                Err(Error::state("request id reused while still pending")),
            );
        }
    }

    /// A request registered on `token`'s connection left the pending table.
    fn settled(&self, token: Token) {
        if let Some(d) = self.conns.get(&token).and_then(|c| c.direct.as_deref()) {
            let _ = d
                .awaiting
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    /// The connection of the last `Send`, when `addr` is the same `Arc` and the connection
    /// is still open (tokens are never reused, and a closed one leaves `conns`).
    fn last_send_conn(&self, addr: &Arc<str>) -> Option<Token> {
        let (last, token) = self.last_send.as_ref()?;
        (Arc::ptr_eq(last, addr) && self.conns.contains_key(token)).then_some(*token)
    }

    /// The connection to `addr`, opening a non-blocking connect when there is none.
    fn conn_for(&mut self, addr: &str, sock: SocketAddr) -> Result<Token, Error> {
        if let Some(&t) = self.by_addr.get(addr) {
            return Ok(t);
        }
        let tls = match &self.shared.tls {
            Some(config) => {
                let name = super::tls::server_name(addr)?;
                let conn = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| Error::tls(addr, e))?;
                Some(Box::new(conn))
            }
            None => None,
        };
        let mut stream = TcpStream::connect(sock).map_err(|e| Error::connect(addr, e))?;
        let token = Token(self.next_token);
        self.next_token += 1;
        self.poll
            .registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| Error::connect(addr, e))?;
        let now = Instant::now();
        self.conns.insert(
            token,
            Conn {
                addr: addr.to_string(),
                stream,
                direct: None,
                tls,
                state: ConnState::Connecting {
                    deadline: now + self.shared.config.connect_timeout,
                },
                rbuf: ReadBuf::default(),
                wq: VecDeque::new(),
                reply_bytes: 0,
                woff: 0,
                writable_interest: true,
                flush_pending: false,
                last_active: now,
                connect_waiters: Vec::new(),
            },
        );
        self.by_addr.insert(addr.to_string(), token);
        Ok(token)
    }

    fn queue_write(
        &mut self,
        token: Token,
        frame: Vec<u8>,
        opaque: Option<i32>,
        permit: Option<Permit>,
        reply: bool,
    ) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        self.shared
            .queued_bytes
            .fetch_add(frame.len(), Ordering::Relaxed);
        if reply {
            c.reply_bytes += frame.len();
        }
        c.wq.push_back(WriteItem {
            frame,
            opaque,
            reply,
            _permit: permit,
        });
        if let Some(d) = &c.direct {
            // Callers queue behind it from now on.
            d.state.lock().idle = false;
        }
        if matches!(c.state, ConnState::Connected) && !c.flush_pending {
            c.flush_pending = true;
            self.to_flush.push(token);
        }
    }

    fn conn_event(&mut self, token: Token, readable: bool, writable: bool, error: bool) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        if let ConnState::Connecting { .. } = c.state {
            // mio's contract: a connect has finished when the socket reports writable (or
            // an error); take_error and peer_addr tell success from failure.
            match c.stream.take_error() {
                Ok(Some(e)) | Err(e) => {
                    self.close(token, CloseReason::ConnectFailed(e.to_string()));
                    return;
                }
                Ok(None) => {}
            }
            match c.stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected && !error => return,
                Err(e) => {
                    self.close(token, CloseReason::ConnectFailed(e.to_string()));
                    return;
                }
            }
            if let Err(e) = c.stream.set_nodelay(true) {
                debug!("TCP_NODELAY on {}: {e}", c.addr);
            }
            c.last_active = Instant::now();
            if c.tls.is_some() {
                // The ClientHello goes out with the flush; usable once the handshake ends.
                c.state = ConnState::Handshaking {
                    deadline: match c.state {
                        ConnState::Connecting { deadline } => deadline,
                        _ => Instant::now() + self.shared.config.connect_timeout,
                    },
                };
                debug!("connected to {}; TLS handshake", c.addr);
            } else {
                self.established(token);
            }
            self.flush(token);
            if !self.conns.contains_key(&token) {
                return;
            }
        }
        if readable || error {
            self.read(token);
        }
        // Only when the loop has bytes waiting: a socket that shares its wake-ups reports
        // writable with every event (its registration keeps both interests).
        if writable && self.conns.get(&token).is_some_and(|c| c.writable_interest) {
            self.flush(token);
        }
    }

    /// The connection is usable: connect waiters are told, and queued frames go out with
    /// the caller's next flush.
    fn established(&mut self, token: Token) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        c.state = ConnState::Connected;
        debug!("connection to {} established", c.addr);
        if c.tls.is_none() {
            let registry = self.poll.registry();
            match DirectWriter::new(
                token,
                &c.stream,
                registry,
                c.wq.is_empty(),
                c.writable_interest,
            ) {
                Ok(d) => c.direct = d,
                Err(e) => {
                    let why = format!("registering the socket again failed: {e}");
                    self.close(token, CloseReason::Closed(why));
                    return;
                }
            }
            if let Some(d) = &c.direct {
                // Requests queued while the connection was being made wait on it already.
                d.awaiting
                    .store(self.pending.count_token(token), Ordering::SeqCst);
                self.shared.direct.write().insert(c.addr.clone(), d.clone());
            }
        }
        self.shared.connected.write().insert(c.addr.clone());
        self.shared.connects.fetch_add(1, Ordering::Relaxed);
        if !self.shared.seen.lock().insert(c.addr.clone()) {
            self.shared.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        let listener = self.shared.connect_listener.read().clone();
        if let Some(listener) = listener {
            let addr = c.addr.clone();
            self.shared.callback_pool.execute(move || listener(&addr));
        }
        for w in c.connect_waiters.drain(..) {
            let _ = w.try_send(Ok(()));
        }
    }

    /// After TLS records moved: sends what rustls wants to send (handshake messages,
    /// alerts) and, once the handshake is over, establishes the connection.
    fn tls_progress(&mut self, token: Token) {
        let Some(c) = self.conns.get(&token) else {
            return;
        };
        let Some(tls) = c.tls.as_deref() else {
            return;
        };
        let done = matches!(c.state, ConnState::Handshaking { .. }) && !tls.is_handshaking();
        let wants_write = tls.wants_write();
        if done {
            self.established(token);
        }
        if done || wants_write {
            self.flush(token);
        }
    }

    fn flush(&mut self, token: Token) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        let connected = matches!(c.state, ConnState::Connected);
        let mut failure = None;
        // Held for the whole flush: no caller writes meanwhile, and a caller's leftover
        // goes out before the queue.
        let direct = c.direct.clone();
        let mut direct_state = direct.as_deref().map(|d| d.state.lock());
        if let Some(st) = direct_state.as_deref_mut() {
            if let Some(rest) = st.rest.take() {
                match write_rest(&mut c.stream, rest) {
                    Ok(None) => c.last_active = Instant::now(),
                    Ok(Some(left)) => st.rest = Some(left),
                    Err(reason) => failure = Some(reason),
                }
            }
        }
        let rest_left = direct_state.as_deref().is_some_and(|st| st.rest.is_some());
        loop {
            if rest_left || failure.is_some() {
                break;
            }
            // TLS: first the records rustls holds (handshake, alerts, encrypted frames);
            // more plaintext goes in only once they are all on the socket, so rustls
            // never buffers more than one batch.
            if let Some(tls) = c.tls.as_deref_mut() {
                match write_tls_records(tls, &mut c.stream) {
                    Ok(true) => c.last_active = Instant::now(),
                    Ok(false) => break,
                    Err(reason) => {
                        failure = Some(reason);
                        break;
                    }
                }
                if !connected {
                    break;
                }
            }
            if c.wq.is_empty() {
                break;
            }
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(c.wq.len().min(MAX_IOV));
            for (i, item) in c.wq.iter().take(MAX_IOV).enumerate() {
                let start = if i == 0 { c.woff } else { 0 };
                slices.push(IoSlice::new(&item.frame[start..]));
            }
            let written = match c.tls.as_deref_mut() {
                Some(tls) => tls.writer().write_vectored(&slices),
                None => c.stream.write_vectored(&slices),
            };
            match written {
                Ok(0) => {
                    failure = Some(CloseReason::Closed("socket accepted no bytes".into()));
                    break;
                }
                Ok(mut n) => {
                    c.last_active = Instant::now();
                    while n > 0 {
                        let Some(front) = c.wq.front() else { break };
                        let left = front.frame.len() - c.woff;
                        if n >= left {
                            n -= left;
                            c.woff = 0;
                            if let Some(done) = c.wq.pop_front() {
                                if done.reply {
                                    c.reply_bytes -= done.frame.len();
                                }
                                self.shared
                                    .queued_bytes
                                    .fetch_sub(done.frame.len(), Ordering::Relaxed);
                                // Dropping the rest releases a oneway permit.
                                self.spent.push(done.frame);
                            }
                        } else {
                            c.woff += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failure = Some(CloseReason::Closed(format!("write failed: {e}")));
                    break;
                }
            }
        }
        if let Some(st) = direct_state.as_deref_mut() {
            st.idle = connected && st.rest.is_none() && c.wq.is_empty();
        }
        drop(direct_state);
        self.shared.frames.give_all(&mut self.spent);
        if let Some(reason) = failure {
            // A TLS connection that fails before its handshake ended failed the handshake.
            let reason = match reason {
                CloseReason::Closed(why) if c.tls.is_some() && !connected => {
                    CloseReason::Tls(format!("handshake failed: {why}"))
                }
                other => other,
            };
            self.close(token, reason);
            return;
        }
        // Ask for writable events only while something waits to be written.
        let tls_pending = c.tls.as_deref().is_some_and(|t| t.wants_write());
        let want = tls_pending || (connected && !c.wq.is_empty()) || rest_left;
        if want != c.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            // A caller reading its own response has the socket out of the poll: it puts
            // the socket back with the interest recorded here.
            let mut direct_state = direct.as_deref().map(|d| d.state.lock());
            if let Some(st) = direct_state.as_deref_mut() {
                st.want_write = want;
            }
            // A socket that shares its wake-ups keeps both interests (its registration
            // cannot be modified).
            let lent = direct
                .as_deref()
                .is_some_and(|d| d.shares_wakeups || d.lent.load(Ordering::SeqCst));
            let registered = if lent {
                Ok(())
            } else {
                self.poll
                    .registry()
                    .reregister(&mut c.stream, token, interest)
            };
            drop(direct_state);
            if let Err(e) = registered {
                self.close(
                    token,
                    CloseReason::Closed(format!("reregister failed: {e}")),
                );
                return;
            }
            c.writable_interest = want;
        }
    }

    fn conn_addr(&self, token: Token) -> String {
        self.conns
            .get(&token)
            .map_or_else(String::new, |c| c.addr.clone())
    }

    fn complete(&self, waiter: Waiter, result: Result<RemotingCommand, Error>) {
        match waiter {
            Waiter::Sync(tx) => {
                // The caller may have given up already; that is fine.
                tx.send(SyncReply::Done(result));
            }
            Waiter::Async(callback) => self.shared.run_callback(callback, result),
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some((opaque, e)) = self.pending.pop_expired(now) {
            self.settled(e.token);
            self.drop_unwritten(e.token, opaque);
            let addr = self.conn_addr(e.token);
            let err = Error::timeout(TimeoutPhase::Response, e.timeout).with_addr(&addr);
            self.complete(e.waiter, Err(err));
        }
        let connect_timeout = self.shared.config.connect_timeout;
        let idle = self.shared.config.channel_max_idle;
        let mut to_close = Vec::new();
        for c in self.conns.values_mut() {
            // Responses sync callers read themselves are traffic too.
            if c.direct
                .as_deref()
                .is_some_and(|d| d.used.swap(false, Ordering::Relaxed))
            {
                c.last_active = now;
            }
        }
        for (t, c) in &self.conns {
            match c.state {
                ConnState::Connecting { deadline } if deadline <= now => {
                    to_close.push((*t, CloseReason::ConnectTimeout(connect_timeout)))
                }
                ConnState::Handshaking { deadline } if deadline <= now => {
                    to_close.push((*t, CloseReason::HandshakeTimeout(connect_timeout)))
                }
                ConnState::Connected
                    if now.duration_since(c.last_active) >= idle && !self.pending.has_token(*t) =>
                {
                    to_close.push((*t, CloseReason::Closed("idle".into())));
                }
                _ => {}
            }
        }
        for (t, reason) in to_close {
            self.close(t, reason);
        }
    }

    /// Takes the frame of a timed-out request off its connection's queue if none of it was
    /// written yet: nobody waits for its answer any more, and a peer that stopped reading
    /// must not pin it in memory. A frame partly written stays, or the stream would break.
    fn drop_unwritten(&mut self, token: Token, opaque: i32) {
        let Some(c) = self.conns.get_mut(&token) else {
            return;
        };
        let first = usize::from(c.woff > 0);
        let found =
            c.wq.iter()
                .skip(first)
                .position(|w| w.opaque == Some(opaque));
        if let Some(i) = found {
            if let Some(w) = c.wq.remove(first + i) {
                self.shared
                    .queued_bytes
                    .fetch_sub(w.frame.len(), Ordering::Relaxed);
            }
        }
    }

    fn close(&mut self, token: Token, reason: CloseReason) {
        let Some(mut c) = self.conns.remove(&token) else {
            return;
        };
        if self.by_addr.get(&c.addr) == Some(&token) {
            self.by_addr.remove(&c.addr);
        }
        // Marked closed first: a caller reading on the socket then does not register it
        // again.
        if let Some(d) = c.direct.take() {
            self.direct_awaits
                .closed(token, &c.addr, &reason, self.turn);
            d.close(&self.shared, &c.addr, &reason);
        }
        let _ = self.poll.registry().deregister(&mut c.stream);
        self.shared.connected.write().remove(&c.addr);
        let unwritten: usize = c.wq.iter().map(|w| w.frame.len()).sum();
        self.shared
            .queued_bytes
            .fetch_sub(unwritten, Ordering::Relaxed);
        match &reason {
            CloseReason::Closed(why) if why == "idle" => {
                debug!("closed idle connection to {}", c.addr)
            }
            CloseReason::Shutdown => {}
            _ => info!(
                "connection to {} closed: {}",
                c.addr,
                reason.to_error(&c.addr)
            ),
        }
        for w in c.connect_waiters.drain(..) {
            let _ = w.try_send(Err(reason.to_error(&c.addr)));
        }
        for e in self.pending.take_token(token) {
            self.complete(e.waiter, Err(reason.to_error(&c.addr)));
        }
    }

    fn fail_everything(&mut self) {
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for t in tokens {
            self.close(t, CloseReason::Shutdown);
        }
        for e in self.pending.take_all() {
            self.complete(
                e.waiter,
                Err(Error::state("the remoting client is shut down")),
            );
        }
        // Commands that raced with shutdown: fail their waiters too.
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Send { wait: Some(p), .. } | Command::Await { wait: p, .. } => self
                    .complete(
                        p.waiter,
                        Err(Error::state("the remoting client is shut down")),
                    ),
                Command::Connect { reply, .. } => {
                    let _ = reply.try_send(Err(Error::state("the remoting client is shut down")));
                }
                _ => {}
            }
        }
    }
}

/// Writes the records rustls holds to the socket: `Ok(true)` when all are written,
/// `Ok(false)` when the socket is full.
fn write_tls_records(
    tls: &mut rustls::ClientConnection,
    stream: &mut TcpStream,
) -> Result<bool, CloseReason> {
    while tls.wants_write() {
        match tls.write_tls(stream) {
            Ok(0) => return Err(CloseReason::Closed("socket accepted no bytes".into())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CloseReason::Closed(format!("write failed: {e}"))),
        }
    }
    Ok(true)
}
