//! Frames sync callers write themselves (issue 30): the socket of a plain connection
//! shared with callers ([`DirectWriter`]), the write from the calling thread
//! ([`write_direct`]) and its leftover ([`write_rest`], which the loop writes first), and
//! what the loop keeps for those requests' registrations, which reach it after the frame
//! left ([`DirectAwaits`]: responses read before them, why a connection closed).
//!
//! A caller writes only when the connection is idle (nothing queued, nothing in the
//! command channel, the loop not draining it), and queues the registration of its waiter
//! before the frame leaves, so the loop sees requests in order on every connection.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::SendError;
use log::debug;
use mio::net::TcpStream;
use mio::Token;

use super::command::{CloseReason, Command, PendingRequest};
use super::Shared;
use crate::error::{Error, ErrorKind};
use crate::protocol::RemotingCommand;

/// A plain connection's socket shared with sync callers that write their own frames.
pub(crate) struct DirectWriter {
    pub(super) token: Token,
    /// A duplicate of the connection's socket: the same socket, non-blocking.
    pub(super) stream: std::net::TcpStream,
    /// Held by whoever writes on the socket: a caller for its write, the loop for a
    /// flush. Callers only try it and queue their frame when it is held.
    pub(super) state: parking_lot::Mutex<DirectState>,
}

#[derive(Default)]
pub(super) struct DirectState {
    /// Nothing waits to be written (no queued frame, no `rest`): a caller may write.
    pub(super) idle: bool,
    /// The connection is closed; nobody writes on the duplicate any more.
    pub(super) closed: bool,
    /// The unwritten end of a frame a caller began: it goes out before anything else.
    pub(super) rest: Option<Vec<u8>>,
}

impl DirectWriter {
    /// Shares the socket of a connection just established (plain TCP only).
    #[cfg(unix)]
    pub(super) fn new(token: Token, stream: &TcpStream, idle: bool) -> Option<Arc<DirectWriter>> {
        use std::os::fd::AsFd;
        let fd = stream.as_fd().try_clone_to_owned().ok()?;
        Some(Arc::new(DirectWriter {
            token,
            stream: std::net::TcpStream::from(fd),
            state: parking_lot::Mutex::new(DirectState {
                idle,
                ..DirectState::default()
            }),
        }))
    }

    #[cfg(not(unix))]
    pub(super) fn new(
        _token: Token,
        _stream: &TcpStream,
        _idle: bool,
    ) -> Option<Arc<DirectWriter>> {
        None
    }

    /// The connection closed: no caller writes on the duplicate after this, and it is
    /// shut down so that the socket closes now, not when the last caller lets go of it.
    pub(super) fn close(self: &Arc<Self>, shared: &Shared, addr: &str) {
        self.state.lock().closed = true;
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let mut direct = shared.direct.write();
        if direct.get(addr).is_some_and(|x| Arc::ptr_eq(x, self)) {
            direct.remove(addr);
        }
    }
}

/// Writes `frame`, the request `wait` waits for, on the connection to `addr` from the
/// calling thread when that connection is idle; gives both back when the caller must
/// queue them instead (no shared connection, something queued or being written, commands
/// in the channel, the loop draining them, or the socket full before a byte left).
///
/// Once the registration is queued, the frame goes out in order whatever happens: what the
/// socket does not take becomes the connection's `rest`, written by the loop first.
pub(crate) fn write_direct(
    shared: &Shared,
    addr: &str,
    frame: Vec<u8>,
    wait: PendingRequest,
) -> Result<(), (Vec<u8>, PendingRequest)> {
    // A command queued earlier (by this thread too) must reach the socket first: the
    // channel is checked before the flag the loop raises while it drains it.
    if !shared.tx.is_empty() || shared.draining.load(Ordering::SeqCst) {
        return Err((frame, wait));
    }
    let Some(w) = shared.direct.read().get(addr).cloned() else {
        return Err((frame, wait));
    };
    let Some(mut st) = w.state.try_lock() else {
        return Err((frame, wait));
    };
    if !st.idle || st.closed {
        return Err((frame, wait));
    }
    // Registered before the frame leaves: the response cannot come before it.
    if let Err(SendError(Command::Await { wait, .. })) = shared.tx.send(Command::Await {
        token: w.token,
        wait,
    }) {
        return Err((frame, wait));
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
        // The loop closes the connection; the waiter learns it from there.
        st.idle = false;
        drop(st);
        shared.submit(Command::Close {
            addr: addr.to_string(),
            why,
        });
    } else if written < frame.len() {
        shared.direct_rests.fetch_add(1, Ordering::Relaxed);
        st.idle = false;
        st.rest = Some(frame[written..].to_vec());
        drop(st);
        shared.submit(Command::Flush { token: w.token });
    }
    Ok(())
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
