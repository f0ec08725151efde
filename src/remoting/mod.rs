//! The remoting client: connections, request/response matching, and the three ways to
//! invoke a request (sync, async, oneway). Java: `NettyRemotingClient`.
//!
//! One named I/O thread (`io/`) owns every socket. Callers encode frames on their own
//! threads and block on a one-value slot (`oneshot.rs`); async callbacks and broker-initiated
//! requests run on thread pools, never on the I/O thread.
//!
//! Invariant: only the I/O thread touches sockets; the pending table is owned by it alone.
//! Invariant: an `invoke_async` that returns `Ok` runs its callback exactly once; one that
//! returns `Err` gives the callback back unrun.

pub mod acl;
mod command;
mod config;
mod direct;
mod frames;
mod hook;
mod invoke;
mod io;
mod namesrv;
mod oneshot;
mod parsed;
#[doc(hidden)]
pub mod pending;
mod pool;
mod recycle;
mod semaphore;
mod tls;

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, RecvTimeoutError, SendError, Sender};
use log::{debug, warn};
use mio::{Poll, Waker};
use parking_lot::{Mutex, RwLock};

use crate::error::{Error, ErrorKind, Result, TimeoutPhase};
use crate::protocol::{RemotingCommand, RequestCode, SerializeType};
use crate::util::worker::{self, Worker};
use crate::util::{self, NameMap};

pub use acl::Credentials;
pub use config::{RemotingConfig, RequestProcessor, RpcHook};
pub(crate) use hook::UserRequestHook;
pub use hook::{RequestContext, RequestHook, ResponseContext};
pub use invoke::{InvokeAsyncError, InvokeCallback};
pub use pool::ThreadPool;
pub use semaphore::{Permit, Semaphore};
pub use tls::TlsConfig;

use command::{Command, PendingRequest, SyncReply, Waiter};
use io::IoLoop;
use namesrv::NamesrvState;

/// How long a follower whose deadline passed waits for what was already given to it (the
/// loop times out a registration it was handed within a turn of the deadline).
const FOLLOWER_GRACE: Duration = Duration::from_secs(1);

/// A request on its way to [`RemotingClient`]'s crate-internal entry points.
pub(crate) enum Outgoing {
    /// A command: the RPC hooks and ACL signing see it, then it is encoded.
    Command(RemotingCommand),
    /// A frame the caller encoded straight from a typed header
    /// ([`RemotingCommand::encode_request`]); only valid when
    /// [`RemotingClient::rewrites_requests`] is false, since nothing can change it.
    Frame {
        code: RequestCode,
        opaque: i32,
        frame: Vec<u8>,
    },
}

/// State shared by callers and the I/O thread.
///
/// `connected` and `processors` are each taken alone; a processor is cloned out before it
/// runs (on the processor pool).
pub(crate) struct Shared {
    config: RemotingConfig,
    /// Taken for reading by an async caller across "still accepting? then queue", and for
    /// writing to stop accepting, so that no accepted request can land in the channel after
    /// the I/O thread's final drain (and lose its callback). Held only across that check
    /// and a channel send, never with another lock.
    gate: RwLock<()>,
    /// Whether async requests are accepted; cleared under `gate` (before the I/O thread
    /// ends, whatever ends it).
    accepting: AtomicBool,
    tx: Sender<Command>,
    waker: Waker,
    wake_requested: AtomicBool,
    /// Raised by the I/O thread while it drains the command channel: no caller writes
    /// its own frame meanwhile (`direct::call_direct`).
    draining: AtomicBool,
    /// Turns the loop ended (tests: `wait_io_idle`).
    #[cfg(test)]
    turns: AtomicU64,
    /// The established plain connections whose socket sync callers may write on, by
    /// address (kept by the I/O thread).
    direct: RwLock<NameMap<String, Arc<direct::DirectWriter>>>,
    /// Frames callers wrote themselves, and of those the ones the socket took only in
    /// part (the loop wrote the rest).
    direct_writes: AtomicU64,
    direct_rests: AtomicU64,
    /// Of the frames callers wrote, those whose response the caller set out to read itself.
    direct_reads: AtomicU64,
    /// Responses a caller read off the socket and delivered without the loop: its own, or
    /// a following caller's (`direct::read_own`).
    caller_answers: AtomicU64,
    /// The I/O thread's poll registry, for callers that take a socket out of it while
    /// they read their own response (`direct::call_direct`).
    registry: mio::Registry,
    /// Addresses with an established connection (written by the I/O thread only).
    connected: RwLock<HashSet<String>>,
    processors: RwLock<HashMap<i32, Arc<dyn RequestProcessor>>>,
    callback_pool: ThreadPool,
    processor_pool: ThreadPool,
    /// Buffers of written frames, for the next frames encoded.
    frames: recycle::FramePool,
    /// Bytes of frames queued on connections and not yet wholly written (kept by the I/O
    /// thread; for diagnostics and the bounded-memory tests).
    queued_bytes: AtomicUsize,
    /// Bytes of the broker-initiated request frames waiting for a processor thread.
    processor_queued_bytes: AtomicUsize,
    /// Built once from `config.tls` (its files read at start, not per connection).
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Told the address of every connection once it is established, on the callback pool.
    connect_listener: RwLock<Option<ConnectListener>>,
    /// Every address ever connected to, and how many connections were made (for the
    /// client's stats: a connection to an address in `seen` is a reconnect). Written by
    /// the I/O thread when a connection is established, which is rare.
    seen: Mutex<HashSet<String>>,
    connects: AtomicU64,
    reconnects: AtomicU64,
}

/// What [`RemotingClient::set_connect_listener`] installs.
pub type ConnectListener = Arc<dyn Fn(&str) + Send + Sync>;

impl Shared {
    /// Hands a command to the I/O thread, waking it only when it may be asleep; gives the
    /// command back when the I/O thread is gone.
    pub(super) fn try_submit(&self, cmd: Command) -> std::result::Result<(), Box<Command>> {
        self.tx.send(cmd).map_err(|SendError(cmd)| Box::new(cmd))?;
        if !self.wake_requested.swap(true, Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                warn!("could not wake the I/O thread: {e}");
            }
        }
        Ok(())
    }

    /// [`try_submit`](Self::try_submit) for commands without a callback.
    fn submit(&self, cmd: Command) -> bool {
        self.try_submit(cmd).is_ok()
    }

    /// Stops accepting async requests. Once this returns, every request accepted before
    /// is in the command channel.
    fn stop_accepting(&self) {
        let _gate = self.gate.write();
        self.accepting.store(false, Ordering::Release);
    }

    /// Runs an async request's callback on the callback pool, then releases its permit.
    fn run_callback(&self, callback: command::Callback, result: Result<RemotingCommand>) {
        let code = callback.code();
        if !self
            .callback_pool
            .execute_boxed(callback.with_result(result))
        {
            // The pool stops only after the I/O thread has ended and failed everything.
            warn!("callback of {code:?} dropped: the callback pool is shut down");
        }
    }
}

/// The remoting client (Java `NettyRemotingClient`).
///
/// Cheap to share behind an `Arc`; every method takes `&self`. Dropping the last handle
/// (or calling [`shutdown`](Self::shutdown)) fails what is pending and joins every thread.
///
/// Lock order: `namesrv_lock` → `namesrv` (name-server selection); `io_thread` and
/// `hooks` are taken alone. Hooks (user code) run with no lock held.
pub struct RemotingClient {
    shared: Arc<Shared>,
    running: AtomicBool,
    io_thread: Mutex<Option<Worker>>,
    /// Replaced whole on registration, so that a request copies the `Arc` and calls the
    /// hooks (user code) with no lock held.
    hooks: RwLock<Arc<Vec<Arc<dyn RpcHook>>>>,
    async_permits: Semaphore,
    oneway_permits: Semaphore,
    namesrv: Mutex<NamesrvState>,
    namesrv_index: AtomicUsize,
    /// Serialises name-server connection set-up (Java `namesrvChannelLock`).
    namesrv_lock: Mutex<()>,
}

impl RemotingClient {
    /// Starts the I/O thread and the pools.
    pub fn new(config: RemotingConfig) -> Result<Self> {
        let tls = config
            .tls
            .as_ref()
            .map(TlsConfig::client_config)
            .transpose()?;
        let poll = Poll::new().map_err(|e| Error::io("creating the poll instance", e))?;
        let waker = Waker::new(poll.registry(), io::WAKER)
            .map_err(|e| Error::io("creating the waker", e))?;
        let registry = poll
            .registry()
            .try_clone()
            .map_err(|e| Error::io("sharing the poll registry", e))?;
        let (tx, rx) = unbounded();
        let callback_pool = ThreadPool::new("rmq-callback", config.callback_threads)
            .map_err(|e| Error::io("starting the callback pool", e))?;
        let processor_pool = ThreadPool::new("rmq-processor", config.processor_threads)
            .map_err(|e| Error::io("starting the processor pool", e))?;
        let shared = Arc::new(Shared {
            config: config.clone(),
            gate: RwLock::new(()),
            accepting: AtomicBool::new(true),
            tx,
            waker,
            wake_requested: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            #[cfg(test)]
            turns: AtomicU64::new(0),
            direct: RwLock::new(NameMap::default()),
            direct_writes: AtomicU64::new(0),
            direct_rests: AtomicU64::new(0),
            direct_reads: AtomicU64::new(0),
            caller_answers: AtomicU64::new(0),
            registry,
            connected: RwLock::new(HashSet::new()),
            processors: RwLock::new(HashMap::new()),
            callback_pool,
            processor_pool,
            frames: recycle::FramePool::default(),
            queued_bytes: AtomicUsize::new(0),
            processor_queued_bytes: AtomicUsize::new(0),
            tls,
            connect_listener: RwLock::new(None),
            seen: Mutex::new(HashSet::new()),
            connects: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        });
        let io_loop = IoLoop::new(poll, shared.clone(), rx);
        let io_thread = worker::spawn("rmq-io", move || io_loop.run())
            .map_err(|e| Error::io("starting the I/O thread", e))?;
        Ok(RemotingClient {
            shared,
            running: AtomicBool::new(true),
            io_thread: Mutex::new(Some(io_thread)),
            hooks: RwLock::new(Arc::new(Vec::new())),
            async_permits: Semaphore::new(config.async_permits),
            oneway_permits: Semaphore::new(config.oneway_permits),
            namesrv: Mutex::new(NamesrvState {
                list: Vec::new(),
                chosen: None,
            }),
            namesrv_index: AtomicUsize::new((util::random_u64() % 999) as usize),
            namesrv_lock: Mutex::new(()),
        })
    }

    /// The configuration this client runs with.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn config(&self) -> &RemotingConfig {
        &self.shared.config
    }

    /// Registers the handler for broker-initiated requests with `code`.
    pub fn register_processor(&self, code: RequestCode, processor: Arc<dyn RequestProcessor>) {
        self.shared.processors.write().insert(code.0, processor);
    }

    /// Runs `job` on the callback pool (where async callbacks run, never the I/O thread).
    /// False, with `job` dropped, once the pool is shut down.
    pub(crate) fn execute_callback(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.shared.callback_pool.execute(job)
    }

    /// Adds an RPC hook; hooks run in registration order.
    pub fn register_rpc_hook(&self, hook: Arc<dyn RpcHook>) {
        let mut hooks = self.hooks.write();
        let mut list = Vec::clone(&hooks);
        list.push(hook);
        *hooks = Arc::new(list);
    }

    /// Calls `listener` with the address of every connection once it is established
    /// (Java's `ChannelEventListener.onChannelActive`), on the callback pool: the I/O
    /// thread only queues the call. Replaces the listener set before.
    pub fn set_connect_listener(&self, listener: impl Fn(&str) + Send + Sync + 'static) {
        *self.shared.connect_listener.write() = Some(Arc::new(listener));
    }

    /// Connections open now, made since the start, and made again to a known address.
    pub(crate) fn connection_counts(&self) -> crate::stats::ConnectionCounts {
        crate::stats::ConnectionCounts {
            open: self.shared.connected.read().len() as u64,
            connects: self.shared.connects.load(Ordering::Relaxed),
            reconnects: self.shared.reconnects.load(Ordering::Relaxed),
        }
    }

    /// Bytes of frames queued for writing and not yet wholly written, over all connections.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn queued_write_bytes(&self) -> usize {
        self.shared.queued_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of the broker-initiated request frames waiting for a processor thread.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn processor_queued_bytes(&self) -> usize {
        self.shared.processor_queued_bytes.load(Ordering::Relaxed)
    }

    /// Whether a connection to `addr` is established now.
    pub fn is_connected(&self, addr: &str) -> bool {
        self.shared.connected.read().contains(addr)
    }

    /// Sends `request` to `addr` and waits for the response, all within `timeout`.
    pub fn invoke_sync(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.invoke_sync_outgoing(addr, Outgoing::Command(request), Instant::now(), timeout)
    }

    /// [`invoke_sync`](Self::invoke_sync) of a command or of a frame the caller encoded,
    /// with `timeout` from `now` (the caller's clock read, not read again here).
    pub(crate) fn invoke_sync_outgoing(
        &self,
        addr: &str,
        request: Outgoing,
        now: Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let deadline = now + timeout;
        self.check_running()?;
        // The frame is all that travels; the body must not stay alive for the round trip.
        let (frame, code, opaque) = self.frame_of(addr, request, false)?;
        let (tx, rx) = oneshot::oneshot();
        let pending = PendingRequest {
            opaque,
            deadline,
            timeout,
            waiter: Waiter::Sync(tx),
        };
        let own = direct::Own {
            opaque,
            deadline,
            timeout,
        };
        // Written here when the connection is idle: the I/O thread then wakes once, for
        // the response, instead of also for the frame; or not at all, when this thread
        // or the one reading the socket already reads the response.
        let mut follows = None;
        let answered = match direct::call_direct(&self.shared, addr, frame, pending) {
            direct::DirectCall::Answered(result) => Some(result),
            direct::DirectCall::Registered => None,
            direct::DirectCall::Follow(w) => {
                follows = Some(w);
                None
            }
            direct::DirectCall::Queue(frame, pending) => {
                // Only a connection the loop makes needs the address resolved: a direct
                // call went to one made before, from the same address.
                let sock = resolve(addr)?;
                self.submit(Command::Send {
                    addr: Arc::from(addr),
                    sock,
                    frame,
                    wait: Some(pending),
                    permit: None,
                })?;
                None
            }
        };
        let result = match answered {
            Some(result) => result,
            None => self.wait_sync(addr, &rx, follows, &own),
        };
        match result {
            Ok(mut response) => {
                let hooks = self.hooks.read().clone();
                for hook in hooks.iter() {
                    hook.after_response(addr, code, &mut response);
                }
                Ok(response)
            }
            Err(e) => {
                if e.is_timeout() && self.shared.config.close_socket_if_timeout {
                    self.close_connection(addr, "sync call timed out");
                }
                Err(e.context(format!("{code:?}")))
            }
        }
    }

    /// Waits for the answer to a sync request whose frame went out: from the loop, from
    /// the caller reading the connection, or by reading it here when that caller hands
    /// the reading on.
    fn wait_sync(
        &self,
        addr: &str,
        rx: &oneshot::Receiver<SyncReply>,
        mut follows: Option<Arc<direct::DirectWriter>>,
        own: &direct::Own,
    ) -> Result<RemotingCommand> {
        let mut until = own.deadline;
        loop {
            match rx.recv_deadline(until) {
                Ok(SyncReply::Done(result)) => return result,
                Ok(SyncReply::Read(w)) => {
                    return direct::read_handed(&self.shared, &w, addr, own);
                }
                Err(oneshot::RecvError::Timeout) => {
                    if let Some(w) = follows.take() {
                        if !direct::leave(&w, own.opaque) {
                            // Off the list already: the answer or the reading is in the
                            // slot, or the loop has the registration and times it out.
                            until = Instant::now() + FOLLOWER_GRACE;
                            continue;
                        }
                    }
                    let phase = if self.is_connected(addr) {
                        TimeoutPhase::Response
                    } else {
                        TimeoutPhase::Connect
                    };
                    return Err(Error::timeout(phase, own.timeout).with_addr(addr));
                }
                Err(oneshot::RecvError::Closed) => {
                    return Err(Error::state("the remoting client is shut down").with_addr(addr));
                }
            }
        }
    }

    /// Sends `request` and returns at once.
    ///
    /// If this returns `Ok`, `callback` runs exactly once, on the callback pool, with the
    /// response, a timeout after `timeout`, the connection's error, or a shut-down error
    /// (also for requests still pending or not yet written when the client shuts down).
    /// If it returns `Err`, the request was not queued: `callback` has not run, never will,
    /// and comes back in the [`InvokeAsyncError`]. That happens when the client is shut
    /// down, `addr` does not resolve, the in-flight limit stays full for `timeout`, or the
    /// request exceeds the frame limit.
    pub fn invoke_async<F>(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
        callback: F,
    ) -> std::result::Result<(), InvokeAsyncError<F>>
    where
        F: FnOnce(Result<RemotingCommand>) + Send + 'static,
    {
        self.invoke_async_with(addr, request, timeout, callback)
    }

    /// [`invoke_async`](Self::invoke_async) with any [`InvokeCallback`], such as a struct
    /// whose fields the caller wants back when the request is not queued.
    pub fn invoke_async_with<C: InvokeCallback>(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
        callback: C,
    ) -> std::result::Result<(), InvokeAsyncError<C>> {
        self.invoke_async_outgoing(
            Arc::from(addr),
            Outgoing::Command(request),
            Instant::now(),
            timeout,
            callback,
        )
    }

    /// [`invoke_async_with`](Self::invoke_async_with) of a command or of a frame the
    /// caller encoded, with `timeout` from `now` (the caller's clock read).
    pub(crate) fn invoke_async_outgoing<C: InvokeCallback>(
        &self,
        addr: Arc<str>,
        request: Outgoing,
        now: Instant,
        timeout: Duration,
        callback: C,
    ) -> std::result::Result<(), InvokeAsyncError<C>> {
        let deadline = now + timeout;
        let (sock, permit, frame, code, opaque) = match self.prepare_async(&addr, request, deadline)
        {
            Ok(p) => p,
            Err(e) => return Err(InvokeAsyncError::new(e, callback)),
        };
        // Checked and queued under the gate: once shutdown has closed it, the I/O thread's
        // final drain finds every request queued before.
        let gate = self.shared.gate.read();
        if !self.shared.accepting.load(Ordering::Acquire) {
            drop(gate);
            return Err(InvokeAsyncError::new(
                Error::state("the remoting client is shut down").with_addr(&addr),
                callback,
            ));
        }
        let wait = PendingRequest {
            opaque,
            deadline,
            timeout,
            waiter: Waiter::Async(command::Completion::boxed(callback, code, permit)),
        };
        self.submit_async(addr, sock, frame, wait);
        drop(gate);
        Ok(())
    }

    /// Hands an async request, its callback boxed, to the I/O thread (under the gate the
    /// caller holds). Not generic, so each callback type's copy of the caller stays small.
    fn submit_async(&self, addr: Arc<str>, sock: SocketAddr, frame: Vec<u8>, wait: PendingRequest) {
        let cmd = Command::Send {
            addr: addr.clone(),
            sock,
            frame,
            wait: Some(wait),
            permit: None,
        };
        let refused = self.shared.try_submit(cmd).err().map(|cmd| *cmd);
        // Not reachable: the I/O thread stops accepting before it ends. Should it happen,
        // the callback still runs once.
        if let Some(Command::Send {
            wait:
                Some(PendingRequest {
                    waiter: Waiter::Async(callback),
                    ..
                }),
            ..
        }) = refused
        {
            let e = Error::state("the remoting client is shut down").with_addr(&addr);
            self.shared.run_callback(callback, Err(e));
        }
    }

    /// The fallible part of [`invoke_async`](Self::invoke_async), before anything is queued.
    fn prepare_async(
        &self,
        addr: &str,
        request: Outgoing,
        deadline: Instant,
    ) -> Result<(SocketAddr, Permit, Vec<u8>, RequestCode, i32)> {
        self.check_running()?;
        let sock = resolve(addr)?;
        let permit = self.async_permits.acquire_until(deadline).ok_or_else(|| {
            Error::new(
                ErrorKind::Overloaded,
                format!(
                    "too many async requests in flight ({} permits)",
                    self.shared.config.async_permits
                ),
            )
            .with_addr(addr)
        })?;
        let (frame, code, opaque) = self.frame_of(addr, request, false)?;
        Ok((sock, permit, frame, code, opaque))
    }

    /// Sends `request` expecting no response; returns once it is queued for writing.
    /// The in-flight permit is held until the frame is written to the socket.
    pub fn invoke_oneway(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<()> {
        self.invoke_oneway_outgoing(addr, Outgoing::Command(request), timeout)
    }

    /// [`invoke_oneway`](Self::invoke_oneway) of a command or of a frame the caller
    /// encoded (with the oneway flag set).
    pub(crate) fn invoke_oneway_outgoing(
        &self,
        addr: &str,
        request: Outgoing,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        self.check_running()?;
        let sock = resolve(addr)?;
        let permit = self.oneway_permits.acquire_until(deadline).ok_or_else(|| {
            Error::new(
                ErrorKind::Overloaded,
                format!(
                    "too many oneway requests in flight ({} permits)",
                    self.shared.config.oneway_permits
                ),
            )
            .with_addr(addr)
        })?;
        let (frame, _, _) = self.frame_of(addr, request, true)?;
        self.submit(Command::Send {
            addr: Arc::from(addr),
            sock,
            frame,
            wait: None,
            permit: Some(permit),
        })
    }

    /// Connects to `addr` (if not connected) and waits until the connection is usable.
    pub fn connect(&self, addr: &str, deadline: Instant) -> Result<()> {
        if self.is_connected(addr) {
            return Ok(());
        }
        self.check_running()?;
        let sock = resolve(addr)?;
        let (tx, rx) = bounded(1);
        self.submit(Command::Connect {
            addr: addr.to_string(),
            sock,
            reply: tx,
        })?;
        // The I/O thread enforces the connect timeout; the caller's deadline may be shorter.
        let limit = deadline.min(Instant::now() + self.shared.config.connect_timeout);
        match rx.recv_deadline(limit + Duration::from_millis(50)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(Error::timeout(
                TimeoutPhase::Connect,
                self.shared.config.connect_timeout,
            )
            .with_addr(addr)),
            Err(RecvTimeoutError::Disconnected) => {
                Err(Error::state("the remoting client is shut down").with_addr(addr))
            }
        }
    }

    /// Closes the connection to `addr`; pending requests on it fail at once.
    pub fn close_connection(&self, addr: &str, why: &str) {
        let _ = self.shared.submit(Command::Close {
            addr: addr.to_string(),
            why: why.to_string(),
        });
    }

    /// Sends every request to its address at once and waits for all the answers until
    /// `deadline`, returned in the order of `requests`: n requests cost about one round
    /// trip, and a peer that does not answer costs the deadline once, not n timeouts. A
    /// request that could not be queued, or had no answer by the deadline, is an error.
    pub(crate) fn invoke_all(
        &self,
        requests: Vec<(String, RemotingCommand)>,
        deadline: Instant,
    ) -> Vec<Result<RemotingCommand>> {
        let n = requests.len();
        let total = deadline.saturating_duration_since(Instant::now());
        let mut answers: Vec<Option<Result<RemotingCommand>>> = (0..n).map(|_| None).collect();
        let mut addrs = Vec::with_capacity(n);
        let (tx, rx) = crossbeam_channel::bounded(n);
        let mut queued = 0;
        for (i, (addr, request)) in requests.into_iter().enumerate() {
            let tx = tx.clone();
            let left = deadline.saturating_duration_since(Instant::now());
            let sent = self.invoke_async(&addr, request, left, move |r| {
                // The receiver is gone only once the wait below gave up.
                let _ = tx.send((i, r));
            });
            match sent {
                Ok(()) => queued += 1,
                Err(e) => answers[i] = Some(Err(e.into_parts().0)),
            }
            addrs.push(addr);
        }
        drop(tx);
        // Every queued callback runs once, by its timeout at the latest; the margin covers
        // a busy callback pool, and the loop ends early if every sender is gone.
        let wait_until = deadline + Duration::from_secs(1);
        for _ in 0..queued {
            match rx.recv_deadline(wait_until) {
                Ok((i, r)) => answers[i] = Some(r),
                Err(_) => break,
            }
        }
        answers
            .into_iter()
            .zip(addrs)
            .map(|(a, addr)| {
                a.unwrap_or_else(|| {
                    Err(Error::timeout(TimeoutPhase::Response, total).with_addr(&addr))
                })
            })
            .collect()
    }

    // --- life cycle ------------------------------------------------------------

    /// Fails everything pending, closes every connection and joins every thread within
    /// the configured `shutdown_timeout`. Idempotent; also run by `Drop`.
    pub fn shutdown(&self) {
        self.shutdown_until(Instant::now() + self.shared.config.shutdown_timeout);
    }

    /// [`shutdown`](Self::shutdown) with the owner's deadline: the threads still running
    /// at `deadline` (a callback that does not return) are left to end on their own.
    pub fn shutdown_until(&self, deadline: Instant) {
        if !self.running.swap(false, Ordering::SeqCst) {
            return;
        }
        self.shared.stop_accepting();
        let _ = self.shared.submit(Command::Shutdown);
        let io_thread = self.io_thread.lock().take();
        if let Some(h) = io_thread {
            h.join_until(deadline, "remoting client");
        }
        // Callbacks queued by the failures above still run before the pools stop: every
        // accepted async request has had its callback queued by now.
        self.shared.processor_pool.shutdown_until(deadline);
        self.shared.callback_pool.shutdown_until(deadline);
        debug!(
            "remoting client shut down ({} frames written by callers, {} of them finished by the loop; {} caller reads, {} answers delivered by callers)",
            self.shared.direct_writes.load(Ordering::Relaxed),
            self.shared.direct_rests.load(Ordering::Relaxed),
            self.shared.direct_reads.load(Ordering::Relaxed),
            self.shared.caller_answers.load(Ordering::Relaxed),
        );
    }

    fn check_running(&self) -> Result<()> {
        if self.running.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(Error::state("the remoting client is shut down"))
        }
    }

    fn before_request(&self, addr: &str, request: &mut RemotingCommand) {
        let hooks = self.hooks.read().clone();
        for hook in hooks.iter() {
            hook.before_request(addr, request);
        }
    }

    /// Whether requests are changed after they are built (RPC hooks, ACL signing): then
    /// they must reach this client as commands, not as frames encoded by the caller.
    pub(crate) fn rewrites_requests(&self) -> bool {
        self.shared.config.credentials.is_some() || !self.hooks.read().is_empty()
    }

    /// An empty buffer for a frame a caller encodes ([`Outgoing::Frame`]): one a written
    /// frame left behind when there is one, so that frames are not allocated on the
    /// caller's thread and freed on the I/O thread each time.
    pub(crate) fn frame_buffer(&self) -> Vec<u8> {
        self.shared.frames.take()
    }

    /// The header encoding of this client's requests.
    pub(crate) fn serialize_type(&self) -> SerializeType {
        self.shared.config.serialize_type
    }

    /// The frame to send for `request`, with its code and opaque: a command goes through
    /// the hooks and signing and is encoded here; a frame only has its size checked.
    fn frame_of(
        &self,
        addr: &str,
        request: Outgoing,
        oneway: bool,
    ) -> Result<(Vec<u8>, RequestCode, i32)> {
        match request {
            Outgoing::Command(mut request) => {
                if oneway {
                    request.mark_oneway();
                }
                self.before_request(addr, &mut request);
                let frame = self.encode(&mut request)?;
                Ok((frame, request.request_code(), request.opaque))
            }
            Outgoing::Frame {
                code,
                opaque,
                frame,
            } => {
                self.check_frame_size(&frame)?;
                Ok((frame, code, opaque))
            }
        }
    }

    /// Signs (when credentials are set: last, after the hooks) and encodes `request`.
    fn encode(&self, request: &mut RemotingCommand) -> Result<Vec<u8>> {
        if let Some(credentials) = &self.shared.config.credentials {
            acl::sign(credentials, request)?;
        }
        request.serialize_type = self.shared.config.serialize_type;
        let frame = request.to_frame_in(self.shared.frames.take());
        self.check_frame_size(&frame)?;
        Ok(frame)
    }

    fn check_frame_size(&self, frame: &[u8]) -> Result<()> {
        if frame.len().saturating_sub(4) > self.shared.config.max_frame {
            return Err(Error::invalid_argument(format!(
                "request of {} bytes exceeds the frame limit of {} bytes",
                frame.len(),
                self.shared.config.max_frame
            )));
        }
        Ok(())
    }

    /// `(frames written by their caller, of those finished by the I/O thread)`.
    #[cfg(test)]
    fn direct_counts(&self) -> (u64, u64) {
        (
            self.shared.direct_writes.load(Ordering::SeqCst),
            self.shared.direct_rests.load(Ordering::SeqCst),
        )
    }

    /// Responses read by the caller that waited for them.
    #[cfg(test)]
    fn caller_reads(&self) -> u64 {
        self.shared.direct_reads.load(Ordering::SeqCst)
    }

    /// Responses delivered by the caller that read them, without the loop.
    #[cfg(test)]
    fn caller_answers(&self) -> u64 {
        self.shared.caller_answers.load(Ordering::SeqCst)
    }

    /// Waits until the I/O thread has drained the command channel and is asleep: no
    /// turn of its ended for 20 ms. (It may be woken for a response a caller read, when
    /// the caller was not yet waiting in its poll, and then turns once or twice more.)
    #[cfg(test)]
    fn wait_io_idle(&self) {
        let busy = || !self.shared.tx.is_empty() || self.shared.draining.load(Ordering::SeqCst);
        loop {
            while busy() {
                std::thread::yield_now();
            }
            let turns = self.shared.turns.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            if !busy() && self.shared.turns.load(Ordering::SeqCst) == turns {
                return;
            }
        }
    }

    fn submit(&self, cmd: Command) -> Result<()> {
        if self.shared.submit(cmd) {
            Ok(())
        } else {
            Err(Error::state("the remoting client is shut down"))
        }
    }
}

impl Drop for RemotingClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Resolves `host:port` on the calling thread, never the I/O thread. An IP literal (what
/// brokers register and routes carry, unless a broker is configured with a host name) is
/// parsed without DNS; only a host name reaches the system resolver (getaddrinfo), on
/// whichever thread sends: the caller's, the client timer, and for a broker known by
/// name also the callback pool (async re-sends) and the pull thread.
fn resolve(addr: &str) -> Result<SocketAddr> {
    if let Some(sock) = parsed::literal(addr) {
        return Ok(sock);
    }
    addr.to_socket_addrs()
        .map_err(|e| Error::invalid_argument(format!("bad address {addr:?}: {e}")).with_addr(addr))?
        .next()
        .ok_or_else(|| Error::invalid_argument(format!("address {addr:?} resolves to nothing")))
}

#[cfg(all(test, feature = "testkit"))]
mod tests;
