//! Sync calls a caller carries out on the socket itself (issue 30): the socket of a plain
//! connection shared with callers ([`DirectWriter`]), the write from the calling thread
//! and, when nothing else waits on the connection, the read of the caller's own response
//! ([`call_direct`]), the leftover of a write ([`write_rest`], which the loop writes
//! first), and what the loop keeps for the registrations of requests whose responses it
//! reads, which reach it after the frame left ([`DirectAwaits`]: responses read before
//! them, why a connection closed).
//!
//! A caller writes only when the connection is idle (nothing queued, nothing in the
//! command channel, the loop not draining it). Either it queues the registration of its
//! waiter before the frame leaves, so the loop sees requests in order on every
//! connection, or it takes the socket out of the loop's poll until its response came.
//!
//! On Linux the socket never leaves the loop's poll ([`DirectWriter::shares_wakeups`]):
//! the caller's poll and the loop's both register it with `EPOLLEXCLUSIVE`, the caller's
//! first, so the kernel wakes a caller waiting in its poll and the loop only when no
//! caller waits. Lending the socket then costs no system call (elsewhere: two
//! `epoll_ctl`, out and back in).

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::SendError;
use log::debug;
use mio::net::TcpStream;
#[cfg(unix)]
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};
use parking_lot::MutexGuard;

use super::command::{CloseReason, Command, PendingRequest, SyncReply, Waiter};
use super::frames::{read_frames, ReadBuf, ReadEnd};
use super::oneshot;
use super::Shared;
use crate::error::{Error, ErrorKind, TimeoutPhase};
use crate::protocol::RemotingCommand;

/// A plain connection's socket shared with sync callers that write their own frames.
pub(crate) struct DirectWriter {
    pub(super) token: Token,
    /// A duplicate of the connection's socket: the same socket, non-blocking.
    pub(super) stream: std::net::TcpStream,
    /// The descriptor the loop's poll knows the socket by (epoll keys registrations by
    /// descriptor, not the duplicate's). Used only under `state`, while not `closed`: the
    /// loop marks the connection closed before it closes that descriptor.
    #[cfg(unix)]
    loop_fd: std::os::fd::RawFd,
    /// Held by whoever writes on the socket: a caller for its write, the loop for a
    /// flush. Callers only try it and queue their frame when it is held, except while a
    /// caller reads the socket: then they wait for it and follow that reader.
    pub(super) state: StateLock,
    /// Held by whoever reads the socket: the loop for a turn's reads, or a sync caller
    /// waiting for its own response. The loop only tries it and leaves the socket alone
    /// when a caller holds it.
    pub(super) read: parking_lot::Mutex<ReadSide>,
    /// Requests registered with the loop on this connection and not answered yet (kept by
    /// the loop): a caller reads its own response only when none is, so that it does not
    /// wake for, and hand over, other requests' answers.
    pub(super) awaiting: AtomicUsize,
    /// A caller read on the socket since the loop last looked: the connection is not idle.
    pub(super) used: AtomicBool,
    /// The socket is out of the loop's poll: a caller reads it, or is being handed the
    /// reading by the one before. Written under `state`; the loop reads it without.
    pub(super) lent: AtomicBool,
    /// The socket stays in the loop's poll while lent (Linux, see the module docs): the
    /// loop may then be woken for bytes a caller reads, and leaves them to it.
    pub(super) shares_wakeups: bool,
    /// The loop was woken for the socket while a caller held it (with `shares_wakeups`):
    /// bytes may have come after the caller's last read, with no new wake-up for the
    /// loop, so the caller that gives the socket back asks the loop to read it.
    pub(super) missed: AtomicBool,
    /// How many callers follow the reader (`DirectState::followers`' length, written
    /// under `state`): a hint for callers deciding whether to wait for the lock.
    following: AtomicUsize,
}

/// The lock of a shared connection's [`DirectState`]: the standard library's mutex, not
/// `parking_lot`'s like the client's other locks. Callers wait for it while a caller writes
/// (a system call made under it), and `parking_lot`'s lock spins by yielding the CPU up
/// to seven times before it parks. At 8 senders that was 0.23 `sched_yield` per message,
/// half the sending threads' involuntary context switches. The standard mutex spins
/// without yielding and then sleeps on a futex: at 8 senders that halved those switches
/// and cost less CPU per message (BENCHMARKS.md, sixteenth round). A panic while it is held is no
/// reason to refuse it to others, as with `parking_lot`: poisoning is ignored.
pub(super) struct StateLock(std::sync::Mutex<DirectState>);

impl StateLock {
    fn new(state: DirectState) -> Self {
        StateLock(std::sync::Mutex::new(state))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, DirectState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn try_lock(&self) -> Option<std::sync::MutexGuard<'_, DirectState>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

#[derive(Default)]
pub(super) struct DirectState {
    /// Nothing waits to be written (no queued frame, no `rest`): a caller may write.
    pub(super) idle: bool,
    /// The connection is closed (why, once the loop closed it); nobody writes on the
    /// duplicate any more.
    pub(super) closed: bool,
    pub(super) closed_why: Option<CloseReason>,
    /// The unwritten end of a frame a caller began: it goes out before anything else.
    pub(super) rest: Option<Vec<u8>>,
    /// Sync callers that wrote their frames while another caller read the socket, oldest
    /// first: the reader delivers their answers, or hands the reading to the first.
    followers: VecDeque<Follower>,
    /// Whether the loop wants writable events (it has bytes the socket did not take):
    /// a caller that gives the socket back registers it with them.
    pub(super) want_write: bool,
    /// A socket that shares its wake-ups is out of the loop's poll for now: a reader took
    /// followers ([`leave_loop_poll`]); the last of them puts it back.
    out_of_poll: bool,
    /// The loan under way took followers; `followed` is the last loan's. A loan that
    /// comes after a followed one takes the socket out of the loop's poll at once: with
    /// several callers on the connection its reader is seldom the only one, and the
    /// loop's wake-ups for bytes the reader reads cost more than the two system calls.
    followers_seen: bool,
    followed: bool,
}

/// A sync caller whose answer a reading caller delivers (`DirectState::followers`).
struct Follower {
    opaque: i32,
    deadline: Instant,
    timeout: Duration,
    tx: oneshot::Sender<SyncReply>,
}

impl Follower {
    /// The registration the loop takes when it gets the socket back first.
    fn into_pending(self) -> PendingRequest {
        PendingRequest {
            opaque: self.opaque,
            deadline: self.deadline,
            timeout: self.timeout,
            waiter: Waiter::Sync(self.tx),
        }
    }
}

/// The request a reading caller waits for.
pub(crate) struct Own {
    pub(crate) opaque: i32,
    pub(crate) deadline: Instant,
    /// The whole budget, for the timeout message.
    pub(crate) timeout: Duration,
}

/// The read side of a shared connection.
#[derive(Default)]
pub(crate) struct ReadSide {
    pub(super) buf: ReadBuf,
    /// A caller's poll of this socket alone and its buffers, made when a caller first
    /// reads here.
    lender: Option<Lender>,
}

/// What a reading caller uses, kept with the connection so that a read allocates nothing.
pub(crate) struct Lender {
    poll: Poll,
    events: Events,
    /// Bytes off the socket.
    scratch: Box<[u8]>,
    /// Frames parsed from a read; empty between reads.
    frames: Vec<(RemotingCommand, usize)>,
    /// Followers' wake-ups, made once `state` is let go; empty between reads.
    wakes: Vec<oneshot::Wake<SyncReply>>,
}

impl DirectWriter {
    /// Shares the socket of a connection just established (plain TCP only), which the
    /// loop registered in `registry`. An error when the socket's registration was lost on
    /// the way (the connection is then unusable).
    #[cfg(unix)]
    pub(super) fn new(
        token: Token,
        stream: &TcpStream,
        registry: &Registry,
        idle: bool,
        want_write: bool,
    ) -> io::Result<Option<Arc<DirectWriter>>> {
        use std::os::fd::AsFd;
        let Ok(fd) = stream.as_fd().try_clone_to_owned() else {
            return Ok(None);
        };
        let dup = std::net::TcpStream::from(fd);
        let lender = share_wakeups(token, stream, &dup, registry)?;
        Ok(Some(Arc::new(DirectWriter {
            token,
            stream: dup,
            loop_fd: stream.as_raw_fd(),
            state: StateLock::new(DirectState {
                idle,
                want_write,
                ..DirectState::default()
            }),
            shares_wakeups: lender.is_some(),
            read: parking_lot::Mutex::new(ReadSide {
                buf: ReadBuf::default(),
                lender,
            }),
            awaiting: AtomicUsize::new(0),
            used: AtomicBool::new(false),
            lent: AtomicBool::new(false),
            missed: AtomicBool::new(false),
            following: AtomicUsize::new(0),
        })))
    }

    #[cfg(not(unix))]
    pub(super) fn new(
        _token: Token,
        _stream: &TcpStream,
        _registry: &Registry,
        _idle: bool,
        _want_write: bool,
    ) -> io::Result<Option<Arc<DirectWriter>>> {
        Ok(None)
    }

    /// The loop was woken for the socket and is about to look at it: noted before it
    /// looks whether a caller holds the socket, so that a caller letting go after that
    /// look sees the note ([`give_back`]).
    pub(super) fn note_loop_woken(&self) {
        if self.shares_wakeups {
            self.missed.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// The loop reads the socket itself now, to its end: nothing is left for a caller to
    /// hand back.
    pub(super) fn loop_reads(&self) {
        if self.shares_wakeups {
            self.missed.store(false, Ordering::SeqCst);
        }
    }

    /// The connection closed: no caller writes on the duplicate after this, and it is
    /// shut down so that the socket closes now, not when the last caller lets go of it.
    pub(super) fn close(self: &Arc<Self>, shared: &Shared, addr: &str, why: &CloseReason) {
        {
            let mut st = self.state.lock();
            st.closed = true;
            st.closed_why = Some(why.clone());
        }
        #[cfg(target_os = "linux")]
        if self.shares_wakeups {
            // Registered by the duplicate's descriptor, which outlives the loop's.
            let _ = rustix::event::epoll::delete(&shared.registry, &self.stream);
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let mut direct = shared.direct.write();
        if direct.get(addr).is_some_and(|x| Arc::ptr_eq(x, self)) {
            direct.remove(addr);
        }
    }
}

/// What became of a sync request offered to [`call_direct`].
pub(crate) enum DirectCall {
    /// The frame went out (or goes out first, in order): the loop completes the waiter.
    Registered,
    /// The caller read its own response off the socket, or failed on the way.
    Answered(Result<RemotingCommand, Error>),
    /// The frame went out while another caller read the socket: that caller delivers the
    /// response, or hands the reading to this one ([`SyncReply::Read`]); a caller whose
    /// deadline passes first leaves with [`leave`].
    Follow(Arc<DirectWriter>),
    /// Nothing was done: the request goes to the loop as a command.
    Queue(Vec<u8>, PendingRequest),
}

/// Followers a reading caller takes at most. Beyond, the connection serves many callers at
/// once and the loop does better: it writes queued frames together and reads for all,
/// where followers would queue on the writer lock one by one. Callers past the bound
/// register with the loop, and the reader gives the socket back to it.
pub(super) const MAX_FOLLOWERS: usize = 8;

/// Reads a caller makes of the socket before it looks at its deadline again.
const MAX_CALLER_READS: usize = 16;

/// Writes `frame`, the request `wait` waits for, on the connection to `addr` from the
/// calling thread when that connection is idle; gives both back when the caller must
/// queue them instead (no shared connection, something queued or being written, commands
/// in the channel, the loop draining them, or the socket full before a byte left).
///
/// When no other request waits on the connection, the caller also takes the socket out
/// of the loop's poll and reads its own response (`RemotingConfig::caller_reads`): one
/// thread wakes per call, as with a blocking socket, instead of the loop and then the
/// caller. When another caller reads the socket already, this one follows it: the reader
/// delivers its answer or hands it the reading, so the loop stays asleep. Otherwise the
/// waiter is registered with the loop before the frame leaves.
///
/// Once written, the frame goes out in order whatever happens: what the socket does not
/// take becomes the connection's `rest`, written by the loop first (which then also reads
/// the response).
pub(crate) fn call_direct(
    shared: &Shared,
    addr: &str,
    frame: Vec<u8>,
    wait: PendingRequest,
) -> DirectCall {
    // A command queued earlier (by this thread too) must reach the socket first: the
    // channel is checked before the flag the loop raises while it drains it.
    if !shared.tx.is_empty() || shared.draining.load(Ordering::SeqCst) {
        return DirectCall::Queue(frame, wait);
    }
    let Some(w) = shared.direct.read().get(addr).cloned() else {
        return DirectCall::Queue(frame, wait);
    };
    // While a caller reads the socket, the lock is held only for a caller's write or a
    // reader's delivery: waiting for it beats queueing, which brings the loop back in
    // (its registrations then keep callers from reading for themselves).
    let st = if w.lent.load(Ordering::SeqCst) && w.following.load(Ordering::Relaxed) < MAX_FOLLOWERS
    {
        Some(w.state.lock())
    } else {
        w.state.try_lock()
    };
    let Some(mut st) = st else {
        return DirectCall::Queue(frame, wait);
    };
    if !st.idle || st.closed {
        return DirectCall::Queue(frame, wait);
    }
    let mut lent = None;
    let mut wait = Some(wait);
    let mut follows = None;
    if shared.config.caller_reads
        && w.lent.load(Ordering::SeqCst)
        && st.followers.len() < MAX_FOLLOWERS
    {
        // Registered before the frame leaves: the reader cannot read the answer first.
        match wait.take() {
            Some(PendingRequest {
                opaque,
                deadline,
                timeout,
                waiter: Waiter::Sync(tx),
            }) => {
                st.followers.push_back(Follower {
                    opaque,
                    deadline,
                    timeout,
                    tx,
                });
                follows = Some(opaque);
                w.following.store(st.followers.len(), Ordering::Relaxed);
                st.followers_seen = true;
                if w.shares_wakeups && !st.out_of_poll && leave_loop_poll(shared, &w).is_ok() {
                    st.out_of_poll = true;
                }
            }
            other => wait = other,
        }
    } else if shared.config.caller_reads
        // Not while lent, even with the read side free: a reader hands it to its first
        // follower through that moment, and a caller taking it then would read that
        // follower's answer (off the list by then) and pass it to the loop, which has no
        // waiter for it.
        && !w.lent.load(Ordering::SeqCst)
        && w.awaiting.load(Ordering::SeqCst) == 0
    {
        if let Some(mut rs) = w.read.try_lock() {
            if rs.lender.is_none() {
                rs.lender = lender_for(&w.stream);
            }
            // Out of the loop's poll: the response wakes this thread only.
            let out = if w.shares_wakeups {
                // Left in the loop's poll unless the last loan had followers.
                if st.followed && !st.out_of_poll && leave_loop_poll(shared, &w).is_ok() {
                    st.out_of_poll = true;
                }
                true
            } else {
                rs.lender.is_some() && lend_out(shared, &w).is_ok()
            };
            if rs.lender.is_some() && out {
                w.lent.store(true, Ordering::SeqCst);
                w.used.store(true, Ordering::Relaxed);
                lent = Some(rs);
            }
        }
    }
    if lent.is_none() && follows.is_none() {
        // Registered before the frame leaves: the response cannot come before it.
        if let Some(wait_now) = wait.take() {
            if let Err(SendError(Command::Await { wait, .. })) = shared.tx.send(Command::Await {
                token: w.token,
                wait: wait_now,
            }) {
                return DirectCall::Queue(frame, wait);
            }
        }
    }
    shared.direct_writes.fetch_add(1, Ordering::Relaxed);
    let mut written = 0;
    let mut failed = None;
    while written < frame.len() {
        match (&w.stream).write(&frame[written..]) {
            Ok(0) => {
                failed = Some("socket accepted no bytes".to_string());
                break;
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => {
                failed = Some(format!("write failed: {e}"));
                break;
            }
        }
    }
    if let Some(why) = failed {
        // The loop closes the connection; a registered waiter learns it from there.
        st.idle = false;
        if let Some(rs) = lent.take() {
            give_back(shared, &w, &mut st, rs, addr);
        }
        let left = follows.is_some_and(|opaque| st.remove_follower(opaque));
        w.following.store(st.followers.len(), Ordering::Relaxed);
        drop(st);
        shared.submit(Command::Close {
            addr: addr.to_string(),
            why: why.clone(),
        });
        return match (wait, follows) {
            (Some(_), _) => DirectCall::Answered(Err(Error::closed(addr, why))),
            (None, Some(_)) if left => DirectCall::Answered(Err(Error::closed(addr, why))),
            // Off the list already: the reader took it, and fails it or hands it the
            // reading of a socket that fails.
            (None, Some(_)) => DirectCall::Follow(Arc::clone(&w)),
            (None, None) => DirectCall::Registered,
        };
    }
    if written < frame.len() {
        shared.direct_rests.fetch_add(1, Ordering::Relaxed);
        st.idle = false;
        st.rest = Some(frame[written..].to_vec());
        if let Some(rs) = lent.take() {
            // The loop writes the rest, so it reads the response too: the registration
            // goes ahead of the flush in the channel.
            if let Some(wait) = wait.take() {
                let _ = shared.tx.send(Command::Await {
                    token: w.token,
                    wait,
                });
            }
            give_back(shared, &w, &mut st, rs, addr);
        }
        drop(st);
        shared.submit(Command::Flush { token: w.token });
        // A follower's answer comes after the rest: its reader gives the socket (and the
        // follower) back to the loop, which has bytes to write.
        return match follows {
            Some(_) => DirectCall::Follow(Arc::clone(&w)),
            None => DirectCall::Registered,
        };
    }
    drop(st);
    // All of it went out: the buffer serves the next frame.
    shared.frames.give(frame);
    if follows.is_some() {
        return DirectCall::Follow(Arc::clone(&w));
    }
    if let (Some(rs), Some(wait)) = (lent, wait) {
        let own = Own {
            opaque: wait.opaque,
            deadline: wait.deadline,
            timeout: wait.timeout,
        };
        return DirectCall::Answered(read_own(shared, &w, rs, addr, &own, false));
    }
    DirectCall::Registered
}

/// Reads the answer to `own` on `w`'s socket, which the caller that read it before handed
/// to this one ([`SyncReply::Read`]).
pub(crate) fn read_handed(
    shared: &Shared,
    w: &Arc<DirectWriter>,
    addr: &str,
    own: &Own,
) -> Result<RemotingCommand, Error> {
    // Free: the reader before let go of it before it woke this caller.
    let rs = w.read.lock();
    read_own(shared, w, rs, addr, own, true)
}

/// A follower whose deadline passed takes itself off the list; `false` when it was not on
/// it any more: its answer, or the reading, was given to it under the lock taken here,
/// or it went to the loop with the socket (which answers it when the deadline passes).
pub(crate) fn leave(w: &DirectWriter, opaque: i32) -> bool {
    let mut st = w.state.lock();
    let r = st.remove_follower(opaque);
    w.following.store(st.followers.len(), Ordering::Relaxed);
    r
}

impl DirectState {
    fn remove_follower(&mut self, opaque: i32) -> bool {
        match self.followers.iter().position(|f| f.opaque == opaque) {
            Some(i) => self.followers.remove(i).is_some(),
            None => false,
        }
    }
}

/// On Linux: a poll of the duplicate socket alone, for callers that read their own
/// responses, registered so that the socket need not leave the loop's poll while a
/// caller reads it. Both registrations are `EPOLLEXCLUSIVE` and edge-triggered, the
/// caller's ahead of the loop's in the socket's wait queue (exclusive entries are woken
/// in the order they were added, and the first one with a thread waiting in its poll
/// ends the wake-up): bytes that come while a caller waits wake that caller alone, and
/// bytes that come while none waits wake the loop. Exclusive registrations cannot carry
/// `EPOLLRDHUP`, so the loop reads such a socket to its end (a FIN that came with the
/// last bytes is then seen), and cannot be modified, so the loop's keeps asking for
/// writable events (they come only after a write filled the socket).
///
/// `Ok(None)` when the system refuses the caller's poll (callers then take the socket
/// out of the loop's poll as elsewhere); an error when the loop's registration could
/// not be made again.
#[cfg(target_os = "linux")]
fn share_wakeups(
    token: Token,
    stream: &TcpStream,
    dup: &std::net::TcpStream,
    registry: &Registry,
) -> io::Result<Option<Lender>> {
    use rustix::event::epoll::{self, EventData, EventFlags};
    let Ok(poll) = Poll::new() else {
        return Ok(None);
    };
    let callers = EventFlags::IN | EventFlags::ET | EventFlags::EXCLUSIVE;
    if epoll::add(poll.registry(), dup, EventData::new_u64(0), callers).is_err() {
        return Ok(None);
    }
    // The loop's registration goes behind the caller's, and is made by the duplicate's
    // descriptor from now on (followers take it out and put it back, and `close` takes it
    // out, all through the duplicate). mio's record of the first one (debug builds)
    // stays; the loop's own deregistration of it at close then finds nothing.
    registry.deregister(&mut SourceFd(&stream.as_raw_fd()))?;
    match epoll::add(
        registry,
        dup,
        EventData::new_u64(token.0 as u64),
        LOOP_FLAGS,
    ) {
        Ok(()) => Ok(Some(lender_with(poll))),
        Err(_) => {
            registry.register(
                &mut SourceFd(&stream.as_raw_fd()),
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(None)
        }
    }
}

/// The loop's registration of a socket that shares its wake-ups.
#[cfg(target_os = "linux")]
const LOOP_FLAGS: rustix::event::epoll::EventFlags = rustix::event::epoll::EventFlags::IN
    .union(rustix::event::epoll::EventFlags::OUT)
    .union(rustix::event::epoll::EventFlags::ET)
    .union(rustix::event::epoll::EventFlags::EXCLUSIVE);

/// Takes a socket that shares its wake-ups out of the loop's poll, for a reader with
/// followers: it is often busy delivering their answers, not waiting in its poll, and
/// each byte that came then would wake the loop for nothing.
#[cfg(target_os = "linux")]
fn leave_loop_poll(shared: &Shared, w: &DirectWriter) -> io::Result<()> {
    Ok(rustix::event::epoll::delete(&shared.registry, &w.stream)?)
}

/// Puts it back, behind the callers' registration (exclusive ones are appended); the
/// kernel looks at the socket as it adds it, so bytes that came meanwhile wake the loop.
#[cfg(target_os = "linux")]
fn rejoin_loop_poll(shared: &Shared, w: &DirectWriter) -> io::Result<()> {
    use rustix::event::epoll::{self, EventData};
    let data = EventData::new_u64(w.token.0 as u64);
    Ok(epoll::add(&shared.registry, &w.stream, data, LOOP_FLAGS)?)
}

#[cfg(not(target_os = "linux"))]
fn leave_loop_poll(_shared: &Shared, _w: &DirectWriter) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(not(target_os = "linux"))]
fn rejoin_loop_poll(_shared: &Shared, _w: &DirectWriter) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(all(unix, not(target_os = "linux")))]
fn share_wakeups(
    _token: Token,
    _stream: &TcpStream,
    _dup: &std::net::TcpStream,
    _registry: &Registry,
) -> io::Result<Option<Lender>> {
    Ok(None)
}

/// A caller's read buffers around `poll`, which watches the duplicate socket.
#[cfg(unix)]
fn lender_with(poll: Poll) -> Lender {
    Lender {
        poll,
        events: Events::with_capacity(4),
        scratch: vec![0u8; CALLER_READ_CHUNK].into_boxed_slice(),
        frames: Vec::with_capacity(4),
        wakes: Vec::with_capacity(MAX_FOLLOWERS),
    }
}

/// A poll of the duplicate socket alone, for callers that read their own responses, and
/// their read buffer; `None` when the system refuses one (the caller then lets the loop
/// read).
#[cfg(unix)]
fn lender_for(stream: &std::net::TcpStream) -> Option<Lender> {
    let poll = Poll::new().ok()?;
    poll.registry()
        .register(
            &mut SourceFd(&stream.as_raw_fd()),
            Token(0),
            Interest::READABLE,
        )
        .ok()?;
    Some(lender_with(poll))
}

/// Takes the socket out of the loop's poll.
#[cfg(unix)]
fn lend_out(shared: &Shared, w: &DirectWriter) -> io::Result<()> {
    shared.registry.deregister(&mut SourceFd(&w.loop_fd))
}

/// Puts the socket back into the loop's poll, under its token.
#[cfg(unix)]
fn take_back(shared: &Shared, w: &DirectWriter, interest: Interest) -> io::Result<()> {
    shared
        .registry
        .register(&mut SourceFd(&w.loop_fd), w.token, interest)
}

#[cfg(not(unix))]
fn lender_for(_stream: &std::net::TcpStream) -> Option<Lender> {
    None
}

#[cfg(not(unix))]
fn lend_out(_shared: &Shared, _w: &DirectWriter) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

#[cfg(not(unix))]
fn take_back(_shared: &Shared, _w: &DirectWriter, _interest: Interest) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// A caller's read buffer: a send's response is a few hundred bytes.
const CALLER_READ_CHUNK: usize = 16 * 1024;

/// Waits for the response to `own` on the socket a caller took out of the loop's poll (or
/// was handed by the caller that read it before: `handed`, when bytes may be waiting
/// already), delivers the answers of the callers following it, hands whatever else it
/// reads to the loop, and passes the socket on ([`pass_on`]).
fn read_own(
    shared: &Shared,
    w: &Arc<DirectWriter>,
    mut rs: MutexGuard<'_, ReadSide>,
    addr: &str,
    own: &Own,
    handed: bool,
) -> Result<RemotingCommand, Error> {
    shared.direct_reads.fetch_add(1, Ordering::Relaxed);
    let max_frame = shared.config.max_frame;
    let mut others = Vec::new();
    let mut mine = None;
    let mut failure = None;
    let mut timed_out = false;
    {
        let ReadSide { buf, lender } = &mut *rs;
        if let Some(Lender {
            poll,
            events,
            scratch,
            frames,
            wakes,
        }) = lender.as_mut()
        {
            // Whether bytes may be waiting without a new edge (a short or capped read, or
            // a reader before this one that stopped when its own answer came).
            let mut readable = handed;
            while mine.is_none() && failure.is_none() {
                if !readable {
                    let now = Instant::now();
                    if now >= own.deadline {
                        timed_out = true;
                        break;
                    }
                    match poll.poll(events, Some(own.deadline - now)) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            failure = Some(format!("poll failed: {e}"));
                            break;
                        }
                    }
                    if events.is_empty() {
                        continue;
                    }
                }
                let (end, _) = read_frames(
                    &w.stream,
                    scratch,
                    buf,
                    max_frame,
                    MAX_CALLER_READS,
                    true,
                    frames,
                );
                for (cmd, len) in frames.drain(..) {
                    if mine.is_none() && cmd.is_response() && cmd.opaque == own.opaque {
                        shared.caller_answers.fetch_add(1, Ordering::Relaxed);
                        mine = Some(cmd);
                    } else {
                        others.push((cmd, len));
                    }
                }
                answer_followers(shared, w, &mut others, wakes);
                // The followers wake now, with `state` free for the calls they make next.
                wakes.clear();
                if mine.is_none() && !others.is_empty() {
                    // Handed over at once, not when our answer comes: the peer may answer
                    // us only after we answered one of its requests (5.x's SEND_REPLY
                    // waits for the client's answer to PUSH_REPLY_MESSAGE_TO_CLIENT).
                    shared.submit(Command::Incoming {
                        token: w.token,
                        frames: std::mem::take(&mut others),
                    });
                }
                match end {
                    ReadEnd::Drained => readable = false,
                    ReadEnd::Short | ReadEnd::Capped => readable = true,
                    ReadEnd::Eof => failure = Some(buf.eof_reason()),
                    ReadEnd::Failed(why) => failure = Some(why),
                }
            }
        } else {
            failure = Some("no poll of the socket".into());
        }
    }
    if !others.is_empty() {
        // Broker requests and responses for the loop's waiters, in the order they came.
        shared.submit(Command::Incoming {
            token: w.token,
            frames: others,
        });
    }
    let mut st = w.state.lock();
    let closed_why = st.closed_why.clone();
    let next_reader = pass_on(shared, w, &mut st, rs, addr, failure.as_deref());
    drop(st);
    drop(next_reader);
    if let Some(why) = &failure {
        if closed_why.is_none() {
            shared.submit(Command::Close {
                addr: addr.to_string(),
                why: why.clone(),
            });
        }
    }
    match (mine, failure, closed_why) {
        (Some(response), _, _) => Ok(response),
        (None, _, Some(reason)) => Err(reason.to_error(addr)),
        (None, Some(why), None) => Err(Error::closed(addr, why)),
        (None, None, None) if timed_out => {
            Err(Error::timeout(TimeoutPhase::Response, own.timeout).with_addr(addr))
        }
        (None, None, None) => Err(Error::state("no response read").with_addr(addr)),
    }
}

/// Delivers the responses in `frames` that followers wait for, leaving the rest; the
/// followers' wake-ups go to `wakes`, for the caller to make once `state` is free.
fn answer_followers(
    shared: &Shared,
    w: &DirectWriter,
    frames: &mut Vec<(RemotingCommand, usize)>,
    wakes: &mut Vec<oneshot::Wake<SyncReply>>,
) {
    if !frames.iter().any(|(cmd, _)| cmd.is_response()) {
        return;
    }
    let mut st = w.state.lock();
    if st.followers.is_empty() {
        return;
    }
    // In place: the frames left keep their order, and nothing is allocated.
    let mut i = 0;
    while let Some((cmd, _)) = frames.get(i) {
        let at = if cmd.is_response() {
            st.followers.iter().position(|f| f.opaque == cmd.opaque)
        } else {
            None
        };
        match at.and_then(|at| st.followers.remove(at)) {
            Some(f) => {
                let (cmd, _) = frames.remove(i);
                shared.caller_answers.fetch_add(1, Ordering::Relaxed);
                // In the slot under `state`: a follower that finds itself off the list
                // has its answer. The wake-up waits: a follower woken now could take the
                // CPU from this thread while it still holds `state`, and then sleep on it
                // when its next call wants it.
                wakes.push(f.tx.fill(SyncReply::Done(Ok(cmd))));
            }
            None => i += 1,
        }
    }
    w.following.store(st.followers.len(), Ordering::Relaxed);
}

/// Where the socket goes when its reader is done: to the first follower when one waits
/// and the loop has nothing to write (the socket stays out of the loop's poll); otherwise
/// back to the loop, with the followers' registrations ahead of it. When the connection
/// failed or closed, the followers fail with it.
///
/// A follower given the reading is woken when the returned [`oneshot::Wake`] is dropped,
/// which the caller does after letting go of `state`.
#[must_use = "dropping it wakes the next reader"]
pub(super) fn pass_on(
    shared: &Shared,
    w: &Arc<DirectWriter>,
    st: &mut DirectState,
    rs: MutexGuard<'_, ReadSide>,
    addr: &str,
    failure: Option<&str>,
) -> Option<oneshot::Wake<SyncReply>> {
    if failure.is_some() || st.closed {
        for f in st.followers.drain(..) {
            let err = match (&st.closed_why, failure) {
                (Some(reason), _) => reason.to_error(addr),
                (None, Some(why)) => Error::closed(addr, why),
                (None, None) => Error::closed(addr, "the connection closed"),
            };
            f.tx.send(SyncReply::Done(Err(err)));
        }
    } else if st.idle && !st.want_write && w.awaiting.load(Ordering::SeqCst) == 0 {
        if let Some(next) = st.followers.pop_front() {
            w.following.store(st.followers.len(), Ordering::Relaxed);
            // Let go first: the next reader takes the read side as it wakes.
            drop(rs);
            w.used.store(true, Ordering::Relaxed);
            return Some(next.tx.fill(SyncReply::Read(Arc::clone(w))));
        }
    } else {
        // The loop has bytes to write and needs the socket's writable events, or it has
        // requests of its own waiting on the socket (callers past `MAX_FOLLOWERS`, async
        // requests): it reads for everyone from here.
        // With a wake-up: the loop must time these out even if no byte comes.
        for f in st.followers.drain(..) {
            if let Err(refused) = shared.try_submit(Command::Await {
                token: w.token,
                wait: f.into_pending(),
            }) {
                if let Command::Await {
                    wait:
                        PendingRequest {
                            waiter: Waiter::Sync(tx),
                            ..
                        },
                    ..
                } = *refused
                {
                    let err = Error::state("the remoting client is shut down").with_addr(addr);
                    tx.send(SyncReply::Done(Err(err)));
                }
            }
        }
    }
    w.following.store(st.followers.len(), Ordering::Relaxed);
    give_back(shared, w, st, rs, addr);
    None
}

/// Gives a socket a caller read on back to the loop: to its poll (with the interest the
/// loop wants now), or, when it never left it, by asking the loop to read when it was
/// woken meanwhile. The read side is released first: the loop must find it free.
pub(super) fn give_back(
    shared: &Shared,
    w: &DirectWriter,
    st: &mut DirectState,
    rs: MutexGuard<'_, ReadSide>,
    addr: &str,
) {
    drop(rs);
    w.lent.store(false, Ordering::SeqCst);
    st.followed = std::mem::take(&mut st.followers_seen);
    if st.closed {
        return;
    }
    if w.shares_wakeups && st.out_of_poll {
        // A reader with followers took it out.
        st.out_of_poll = false;
        if let Err(e) = rejoin_loop_poll(shared, w) {
            st.idle = false;
            shared.submit(Command::Close {
                addr: addr.to_string(),
                why: format!("registering the socket again failed: {e}"),
            });
            return;
        }
    }
    if w.shares_wakeups {
        // Still in the loop's poll. Bytes the loop was woken for while this caller held
        // the socket, and that came after its last read, raise no new wake-up: the loop
        // is asked to read. (Pairs with `note_loop_woken`: the note is made before the
        // loop looks, this check after the socket was let go.)
        std::sync::atomic::fence(Ordering::SeqCst);
        if w.missed.swap(false, Ordering::SeqCst) {
            shared.submit(Command::Read { token: w.token });
        }
        return;
    }
    let interest = if st.want_write {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    };
    if let Err(e) = take_back(shared, w, interest) {
        st.idle = false;
        shared.submit(Command::Close {
            addr: addr.to_string(),
            why: format!("registering the socket again failed: {e}"),
        });
    }
}

/// Early responses kept in one turn at most; beyond, a response for no known request
/// is dropped as before.
const MAX_EARLY: usize = 1024;

/// Writes what a caller's own write left over: `Ok(None)` when all of it went out,
/// `Ok(Some(left))` when the socket filled up first.
pub(super) fn write_rest(
    stream: &mut TcpStream,
    rest: Vec<u8>,
) -> Result<Option<Vec<u8>>, CloseReason> {
    let mut off = 0;
    while off < rest.len() {
        match stream.write(&rest[off..]) {
            Ok(0) => return Err(CloseReason::Closed("socket accepted no bytes".into())),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Ok(Some(rest[off..].to_vec()))
            }
            Err(e) => return Err(CloseReason::Closed(format!("write failed: {e}"))),
        }
    }
    Ok(None)
}

/// What the registrations (`Command::Await`) of frames callers wrote themselves may need
/// when the loop's drain handles them, after the frame left: the response, when it was
/// read first, and why the connection closed, when it did first.
#[derive(Default)]
pub(super) struct DirectAwaits {
    /// Responses read this turn whose waiter's registration is still in the channel; the
    /// drain that ends the turn claims them.
    early: HashMap<(Token, i32), RemotingCommand>,
    /// Why shared connections closed, with the turn they closed in, for registrations
    /// still in the channel then (they are all handled by the end of the next turn).
    closed: HashMap<Token, (String, CloseReason, u64)>,
}

impl DirectAwaits {
    /// Keeps a response read on a shared connection for no registered request, for this
    /// turn; gives it back (to be dropped) past `MAX_EARLY`.
    pub(super) fn keep_early(
        &mut self,
        token: Token,
        cmd: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if self.early.len() < MAX_EARLY {
            self.early.insert((token, cmd.opaque), cmd);
            None
        } else {
            Some(cmd)
        }
    }

    /// The response to `opaque` on `token`'s connection read before its registration.
    pub(super) fn take_early(&mut self, token: Token, opaque: i32) -> Option<RemotingCommand> {
        self.early.remove(&(token, opaque))
    }

    /// `token`'s shared connection closed in `turn` for `reason`.
    pub(super) fn closed(&mut self, token: Token, addr: &str, reason: &CloseReason, turn: u64) {
        self.closed
            .insert(token, (addr.to_string(), reason.clone(), turn));
    }

    /// What a registration on `token`'s connection, closed before it, fails with.
    pub(super) fn closed_error(&self, token: Token) -> Error {
        match self.closed.get(&token) {
            Some((addr, reason, _)) => reason.to_error(addr),
            None => Error::new(
                ErrorKind::ConnectionClosed,
                "the connection closed before the response",
            ),
        }
    }

    /// The end of `turn`'s drain: its registrations were all handled, so the responses
    /// still kept answer no request, and a close older than the last turn concerns none.
    pub(super) fn end_turn(&mut self, turn: u64) {
        self.closed.retain(|_, c| c.2 + 1 >= turn);
        for ((_, opaque), cmd) in self.early.drain() {
            debug!(
                "response with unknown opaque {opaque} (code {:?}) dropped",
                cmd.response_code()
            );
        }
    }
}
