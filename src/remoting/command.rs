//! What callers and the I/O thread exchange: the [`Command`]s callers hand the loop, the
//! [`PendingRequest`] and [`Waiter`] of a request awaiting its response, and why a
//! connection ended ([`CloseReason`], turned into the error each of its waiters gets).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::Token;

use super::direct::DirectWriter;
use super::oneshot;
use super::pool::{Job, Task};
use super::semaphore::Permit;
use super::InvokeCallback;
use crate::error::{Error, ErrorKind, TimeoutPhase};
use crate::protocol::{RemotingCommand, RequestCode};

/// An async request's callback with its request code and in-flight permit, boxed once
/// when the request is queued. The same box takes the result and runs on the callback
/// pool: completing a request allocates nothing more.
pub(crate) struct Completion<C> {
    callback: C,
    code: RequestCode,
    /// Released after the callback ran.
    permit: Permit,
    /// Set by [`AsyncCompletion::with_result`] before the box goes to the pool.
    result: Option<Result<RemotingCommand, Error>>,
}

impl<C: InvokeCallback> Completion<C> {
    pub(crate) fn boxed(callback: C, code: RequestCode, permit: Permit) -> Callback {
        Box::new(Completion {
            callback,
            code,
            permit,
            result: None,
        })
    }
}

/// A [`Completion`] of any callback type.
pub(crate) trait AsyncCompletion: Send {
    /// The request code, for logs.
    fn code(&self) -> RequestCode;

    /// The pool job that calls the callback with `result`, then releases the permit.
    fn with_result(self: Box<Self>, result: Result<RemotingCommand, Error>) -> Job;
}

impl<C: InvokeCallback> AsyncCompletion for Completion<C> {
    fn code(&self) -> RequestCode {
        self.code
    }

    fn with_result(mut self: Box<Self>, result: Result<RemotingCommand, Error>) -> Job {
        self.result = Some(result);
        self
    }
}

impl<C: InvokeCallback> Task for Completion<C> {
    fn run(self: Box<Self>) {
        let Completion {
            callback,
            code,
            permit,
            result,
        } = *self;
        // Always set: only `with_result` makes the job.
        let result = result.unwrap_or_else(|| Err(Error::state("no result")));
        callback.operation_complete(result.map_err(|e| e.context(format!("{code:?}"))));
        drop(permit);
    }
}

/// A callback for an async request; runs on the callback pool.
pub(crate) type Callback = Box<dyn AsyncCompletion>;

/// What ends a sync caller's wait.
pub(crate) enum SyncReply {
    /// The response, or why there is none.
    Done(Result<RemotingCommand, Error>),
    /// The caller that was reading this connection got its own answer first and hands the
    /// reading on: the woken caller reads its answer itself (`direct::read_handed`).
    Read(Arc<DirectWriter>),
}

/// Who waits for a response.
pub(crate) enum Waiter {
    Sync(oneshot::Sender<SyncReply>),
    /// Completed exactly once, on the callback pool.
    Async(Callback),
}

/// A request waiting for its response.
pub(crate) struct PendingRequest {
    pub(crate) opaque: i32,
    pub(crate) deadline: Instant,
    /// The whole budget, for the timeout message.
    pub(crate) timeout: Duration,
    pub(crate) waiter: Waiter,
}

/// Work handed to the I/O thread.
pub(crate) enum Command {
    /// Open a connection to `addr` (no-op when open) and report when it is usable.
    Connect {
        addr: String,
        sock: SocketAddr,
        reply: Sender<Result<(), Error>>,
    },
    /// Queue a frame to `addr`, connecting first if needed; register the waiter under `opaque`.
    Send {
        /// Shared with the sender's own copy (a producer's broker address).
        addr: Arc<str>,
        sock: SocketAddr,
        frame: Vec<u8>,
        wait: Option<PendingRequest>,
        /// Held until the frame is written (oneway in-flight limit).
        permit: Option<Permit>,
    },
    /// Register the waiter of a frame a caller wrote itself on `token`'s connection.
    Await { token: Token, wait: PendingRequest },
    /// Write what a caller's own write left over (`DirectState::rest`) on `token`'s
    /// connection.
    Flush { token: Token },
    /// Read `token`'s connection: the loop was woken for it while a caller held it.
    Read { token: Token },
    /// Frames a sync caller read off `token`'s connection while it waited for its own
    /// response there (other requests' responses, broker requests), to dispatch.
    Incoming {
        token: Token,
        frames: Vec<(RemotingCommand, usize)>,
    },
    /// Answer a broker-initiated request on the connection it came from.
    Reply { token: Token, frame: Vec<u8> },
    /// Close the connection to `addr`, failing what is pending on it.
    Close { addr: String, why: String },
    /// Fail everything and leave the loop.
    Shutdown,
}

/// Why a connection ended; turned into the error each waiter receives.
#[derive(Clone)]
pub(super) enum CloseReason {
    ConnectFailed(String),
    ConnectTimeout(Duration),
    /// TCP connected, the TLS handshake unfinished at the connect deadline.
    HandshakeTimeout(Duration),
    /// The TLS layer failed (handshake refused, alert received, not TLS at all).
    Tls(String),
    Closed(String),
    Shutdown,
}

impl CloseReason {
    pub(super) fn to_error(&self, addr: &str) -> Error {
        match self {
            CloseReason::ConnectFailed(why) => {
                Error::new(ErrorKind::Connect, format!("could not connect: {why}")).with_addr(addr)
            }
            CloseReason::ConnectTimeout(d) => {
                Error::timeout(TimeoutPhase::Connect, *d).with_addr(addr)
            }
            CloseReason::HandshakeTimeout(d) => Error::timeout(TimeoutPhase::Connect, *d)
                .context("TLS handshake unfinished")
                .with_addr(addr),
            CloseReason::Tls(why) => Error::tls(addr, why),
            CloseReason::Closed(why) => Error::closed(addr, why.clone()),
            CloseReason::Shutdown => {
                Error::state("the remoting client is shut down").with_addr(addr)
            }
        }
    }
}
