//! A loopback TCP proxy between clients and one upstream (a broker), with faults that
//! are switched at run time: a delay per chunk, a stall of one or both directions (a
//! broker that stops reading keeps its connections open and moves no byte), a black
//! hole for new connections (accepted, never answered, never forwarded) and a cut of
//! every current connection.
//!
//! It owns its threads: `rmq-proxy-accept` accepts and reaps, and each proxied
//! connection has two pumps (`rmq-proxy-up`: client → upstream, `rmq-proxy-down`:
//! upstream → client). Every blocking call has a short timeout, so a pump notices a stop,
//! a stall or a cut within one [`TICK`]; [`TcpProxy::shutdown`] (also run on drop)
//! closes every socket and joins every thread. Memory is bounded: one 16 KiB buffer per
//! pump, at most [`MAX_CONNECTIONS`] proxied and [`MAX_HELD`] black-holed connections
//! (beyond them a new connection is closed at once).
//!
//! The launcher puts one in front of each broker with
//! [`ClusterBuilder::broker_proxies`](super::ClusterBuilder::broker_proxies).

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, warn};
use parking_lot::Mutex;

use crate::util::worker::{self, Worker, JOIN_TIMEOUT};

/// How long any blocking step of a proxy thread waits before it looks at the switches again.
pub const TICK: Duration = Duration::from_millis(20);
/// Proxied connections at once; a connection beyond them is closed when accepted.
pub const MAX_CONNECTIONS: usize = 256;
/// Black-holed connections held open at once; the oldest is closed beyond that.
pub const MAX_HELD: usize = 256;
const CHUNK: usize = 16 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Keeps `Instant + delay` far from overflowing.
const MAX_DELAY: Duration = Duration::from_secs(3600);

/// Which way bytes flow through the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client → upstream: stalling it is an upstream that stops reading.
    ToUpstream,
    /// Upstream → client: stalling it is an upstream that stops answering.
    ToClient,
    /// Both ways.
    Both,
}

impl Direction {
    fn includes(self, other: Direction) -> bool {
        self == Direction::Both || self == other
    }
}

/// Counters of a proxy since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyStats {
    /// Connections accepted (black-holed and refused ones included).
    pub accepted: u64,
    /// Connections proxied right now.
    pub active: usize,
    /// Connections accepted while black-holing new connections.
    pub black_holed: u64,
    /// Connections closed at once: the upstream refused, or a limit was reached.
    pub refused: u64,
    /// Connections closed by [`TcpProxy::cut_all`] (black-holed ones included).
    pub cut: u64,
    /// Bytes forwarded from clients to the upstream.
    pub bytes_to_upstream: u64,
    /// Bytes forwarded from the upstream to clients.
    pub bytes_to_client: u64,
}

/// The run-time switches, read by every pump before each step.
#[derive(Default)]
struct Switches {
    delay_micros: AtomicU64,
    stall_to_upstream: AtomicBool,
    stall_to_client: AtomicBool,
    black_hole: AtomicBool,
}

impl Switches {
    fn stalled(&self, dir: Direction) -> bool {
        match dir {
            Direction::ToUpstream => self.stall_to_upstream.load(Ordering::SeqCst),
            Direction::ToClient => self.stall_to_client.load(Ordering::SeqCst),
            Direction::Both => {
                self.stall_to_upstream.load(Ordering::SeqCst)
                    && self.stall_to_client.load(Ordering::SeqCst)
            }
        }
    }
}

/// One proxied connection: the sockets (clones of the pumps' own, so a cut can close
/// them) and its two pumps.
struct Conn {
    client: TcpStream,
    upstream: TcpStream,
    pumps: Vec<Worker>,
}

impl Conn {
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.upstream.shutdown(Shutdown::Both);
    }

    fn is_finished(&self) -> bool {
        self.pumps.iter().all(Worker::is_finished)
    }
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    black_holed: AtomicU64,
    refused: AtomicU64,
    cut: AtomicU64,
    bytes_to_upstream: AtomicU64,
    bytes_to_client: AtomicU64,
}

/// What the proxy's threads share. Lock order: `conns` before `held`.
struct Shared {
    upstream: SocketAddr,
    stop: AtomicBool,
    switches: Switches,
    counters: Counters,
    conns: Mutex<Vec<Conn>>,
    held: Mutex<VecDeque<TcpStream>>,
    active: AtomicUsize,
}

/// A loopback TCP proxy to one upstream address; stops when dropped.
///
/// ```no_run
/// use rocketmq_blocking::testkit::proxy::{Direction, TcpProxy};
///
/// let proxy = TcpProxy::start("127.0.0.2:0".parse()?, "127.0.0.1:10911".parse()?)?;
/// proxy.stall(Direction::ToUpstream); // the broker stops reading
/// proxy.forward(); // and reads again
/// proxy.cut_all(); // every current connection is closed
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TcpProxy {
    listen: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<Worker>,
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("listen", &self.listen)
            .field("upstream", &self.shared.upstream)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl TcpProxy {
    /// Listens on `listen` (port 0 picks a free one) and forwards every connection to
    /// `upstream`, connecting there when a client connects.
    pub fn start(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<TcpProxy> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let listen = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            stop: AtomicBool::new(false),
            switches: Switches::default(),
            counters: Counters::default(),
            conns: Mutex::new(Vec::new()),
            held: Mutex::new(VecDeque::new()),
            active: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let acceptor = worker::spawn("rmq-proxy-accept", move || accept_loop(&listener, &s))?;
        Ok(TcpProxy {
            listen,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address clients connect to.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// The address connections are forwarded to.
    pub fn upstream_addr(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Back to plain forwarding: no delay, no stall, no black hole. Connections cut or
    /// black-holed before stay closed or unanswered.
    pub fn forward(&self) {
        let s = &self.shared.switches;
        s.delay_micros.store(0, Ordering::SeqCst);
        s.stall_to_upstream.store(false, Ordering::SeqCst);
        s.stall_to_client.store(false, Ordering::SeqCst);
        s.black_hole.store(false, Ordering::SeqCst);
    }

    /// Holds every chunk read (up to 16 KiB) for `delay` (at most an hour) before writing
    /// it on, in both directions; `Duration::ZERO` ends the delay.
    pub fn set_delay(&self, delay: Duration) {
        let delay = delay.min(MAX_DELAY);
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.shared
            .switches
            .delay_micros
            .store(micros, Ordering::SeqCst);
    }

    /// Stops forwarding in `dir` (adding to a stall already set): the proxy stops reading
    /// that side, so the sender's socket buffers fill and then its writes block, while
    /// every connection stays open. New connections are stalled too.
    pub fn stall(&self, dir: Direction) {
        let s = &self.shared.switches;
        if dir.includes(Direction::ToUpstream) {
            s.stall_to_upstream.store(true, Ordering::SeqCst);
        }
        if dir.includes(Direction::ToClient) {
            s.stall_to_client.store(true, Ordering::SeqCst);
        }
    }

    /// Whether `dir` is stalled now (for `Both`: both directions are).
    pub fn is_stalled(&self, dir: Direction) -> bool {
        self.shared.switches.stalled(dir)
    }

    /// Ends the stall in `dir`; what was waiting in the socket buffers flows on.
    pub fn resume(&self, dir: Direction) {
        let s = &self.shared.switches;
        if dir.includes(Direction::ToUpstream) {
            s.stall_to_upstream.store(false, Ordering::SeqCst);
        }
        if dir.includes(Direction::ToClient) {
            s.stall_to_client.store(false, Ordering::SeqCst);
        }
    }

    /// While on, new connections are accepted and then neither answered nor forwarded
    /// (no connection to the upstream is made); current connections are not affected.
    pub fn black_hole(&self, on: bool) {
        self.shared.switches.black_hole.store(on, Ordering::SeqCst);
    }

    /// Closes every current connection on both sides (black-holed ones too) and returns
    /// how many were closed. A peer sees the connection end (a FIN, or a reset when
    /// bytes it sent were still unread). New connections are proxied as before.
    pub fn cut_all(&self) -> usize {
        let mut n = 0;
        {
            let conns = self.shared.conns.lock();
            for c in conns.iter().filter(|c| !c.is_finished()) {
                c.close();
                n += 1;
            }
        }
        let held: Vec<TcpStream> = self.shared.held.lock().drain(..).collect();
        for s in &held {
            let _ = s.shutdown(Shutdown::Both);
        }
        n += held.len();
        self.shared
            .counters
            .cut
            .fetch_add(n as u64, Ordering::SeqCst);
        debug!("proxy {}: cut {n} connections", self.listen);
        n
    }

    /// The counters so far.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        ProxyStats {
            accepted: c.accepted.load(Ordering::SeqCst),
            active: self.shared.active.load(Ordering::SeqCst),
            black_holed: c.black_holed.load(Ordering::SeqCst),
            refused: c.refused.load(Ordering::SeqCst),
            cut: c.cut.load(Ordering::SeqCst),
            bytes_to_upstream: c.bytes_to_upstream.load(Ordering::SeqCst),
            bytes_to_client: c.bytes_to_client.load(Ordering::SeqCst),
        }
    }

    /// Stops listening, closes every connection and joins every thread (bounded by
    /// 10 s in all). Idempotent; also run on drop.
    pub fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            // The acceptor closes and joins the connections on its way out.
            worker::join_all([acceptor], JOIN_TIMEOUT, "tcp proxy");
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        reap(shared);
        match listener.accept() {
            Ok((client, _)) => {
                shared.counters.accepted.fetch_add(1, Ordering::SeqCst);
                admit(client, shared);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                warn!("proxy accept failed: {e}");
                std::thread::sleep(TICK);
            }
        }
    }
    let conns: Vec<Conn> = std::mem::take(&mut *shared.conns.lock());
    for c in &conns {
        c.close();
    }
    let pumps = conns.into_iter().flat_map(|c| c.pumps);
    worker::join_all(pumps, JOIN_TIMEOUT, "tcp proxy");
    shared.held.lock().clear();
    shared.active.store(0, Ordering::SeqCst);
}

/// Joins the pumps of connections that have ended.
fn reap(shared: &Shared) {
    let finished: Vec<Conn> = {
        let mut conns = shared.conns.lock();
        let (done, live): (Vec<Conn>, Vec<Conn>) = conns.drain(..).partition(Conn::is_finished);
        *conns = live;
        shared.active.store(conns.len(), Ordering::SeqCst);
        done
    };
    let pumps = finished.into_iter().flat_map(|c| c.pumps);
    worker::join_all(pumps, JOIN_TIMEOUT, "tcp proxy");
}

/// Black-holes, refuses or proxies a connection just accepted.
fn admit(client: TcpStream, shared: &Arc<Shared>) {
    // An accepted socket must block (with timeouts) whatever the listener is.
    if client.set_nonblocking(false).is_err() {
        shared.counters.refused.fetch_add(1, Ordering::SeqCst);
        return;
    }
    if shared.switches.black_hole.load(Ordering::SeqCst) {
        shared.counters.black_holed.fetch_add(1, Ordering::SeqCst);
        let mut held = shared.held.lock();
        held.push_back(client);
        while held.len() > MAX_HELD {
            held.pop_front();
        }
        return;
    }
    if shared.conns.lock().len() >= MAX_CONNECTIONS {
        shared.counters.refused.fetch_add(1, Ordering::SeqCst);
        return;
    }
    match connect(client, shared) {
        Ok(conn) => {
            let mut conns = shared.conns.lock();
            conns.push(conn);
            shared.active.store(conns.len(), Ordering::SeqCst);
        }
        Err(e) => {
            shared.counters.refused.fetch_add(1, Ordering::SeqCst);
            debug!("proxy: upstream {} not reachable: {e}", shared.upstream);
        }
    }
}

fn connect(client: TcpStream, shared: &Arc<Shared>) -> std::io::Result<Conn> {
    let upstream = TcpStream::connect_timeout(&shared.upstream, CONNECT_TIMEOUT)?;
    for s in [&client, &upstream] {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(TICK))?;
        s.set_write_timeout(Some(TICK))?;
    }
    let mut pumps = Vec::with_capacity(2);
    let up = (client.try_clone()?, upstream.try_clone()?, shared.clone());
    pumps.push(worker::spawn("rmq-proxy-up", move || {
        pump(up.0, up.1, Direction::ToUpstream, &up.2);
    })?);
    let down = (upstream.try_clone()?, client.try_clone()?, shared.clone());
    let spawned = worker::spawn("rmq-proxy-down", move || {
        pump(down.0, down.1, Direction::ToClient, &down.2);
    });
    let conn_pumps = match spawned {
        Ok(w) => {
            pumps.push(w);
            pumps
        }
        Err(e) => {
            // The first pump ends once its sockets are closed.
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
            worker::join_all(pumps, JOIN_TIMEOUT, "tcp proxy");
            return Err(e);
        }
    };
    Ok(Conn {
        client,
        upstream,
        pumps: conn_pumps,
    })
}

fn is_retry(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Moves bytes from `from` to `to` until either side ends, the proxy stops or a cut
/// closes the sockets; then closes both, so the other pump of the connection ends too.
fn pump(mut from: TcpStream, mut to: TcpStream, dir: Direction, shared: &Shared) {
    let mut buf = vec![0u8; CHUNK];
    let counter = match dir {
        Direction::ToClient => &shared.counters.bytes_to_client,
        _ => &shared.counters.bytes_to_upstream,
    };
    'conn: while !shared.stop.load(Ordering::SeqCst) {
        if shared.switches.stalled(dir) {
            std::thread::sleep(TICK);
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_retry(&e) => continue,
            Err(_) => break,
        };
        let delay = shared.switches.delay_micros.load(Ordering::SeqCst);
        if delay > 0 {
            let until = Instant::now() + Duration::from_micros(delay);
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if shared.stop.load(Ordering::SeqCst) {
                    break 'conn;
                }
                std::thread::sleep(left.min(TICK));
            }
        }
        let mut written = 0;
        while written < n {
            if shared.stop.load(Ordering::SeqCst) {
                break 'conn;
            }
            match to.write(&buf[written..n]) {
                Ok(0) => break 'conn,
                Ok(k) => written += k,
                Err(e) if is_retry(&e) => continue,
                Err(_) => break 'conn,
            }
        }
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback echo server for the proxy's own tests, stopped on drop.
    struct Echo {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Echo {
        fn start() -> Echo {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let accepted = Arc::new(AtomicUsize::new(0));
            let (s, a) = (stop.clone(), accepted.clone());
            let thread = std::thread::spawn(move || {
                let mut conns = Vec::new();
                while !s.load(Ordering::SeqCst) {
                    if let Ok((mut c, _)) = listener.accept() {
                        a.fetch_add(1, Ordering::SeqCst);
                        let s = s.clone();
                        conns.push(std::thread::spawn(move || {
                            c.set_nonblocking(false).unwrap();
                            c.set_read_timeout(Some(TICK)).unwrap();
                            let mut buf = [0u8; 4096];
                            while !s.load(Ordering::SeqCst) {
                                match c.read(&mut buf) {
                                    Ok(0) => return,
                                    Ok(n) => {
                                        if c.write_all(&buf[..n]).is_err() {
                                            return;
                                        }
                                    }
                                    Err(e) if is_retry(&e) => {}
                                    Err(_) => return,
                                }
                            }
                        }));
                    } else {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                for c in conns {
                    let _ = c.join();
                }
            });
            Echo {
                addr,
                accepted,
                stop,
                thread: Some(thread),
            }
        }
    }

    impl Drop for Echo {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn proxy_to(echo: &Echo) -> TcpProxy {
        TcpProxy::start("127.0.0.1:0".parse().unwrap(), echo.addr).unwrap()
    }

    fn client(p: &TcpProxy) -> TcpStream {
        let c = TcpStream::connect(p.listen_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        c
    }

    /// Reads exactly `want` bytes within `timeout`, or fewer if the time runs out.
    fn read_for(c: &mut TcpStream, want: usize, timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < want && Instant::now() < deadline {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if is_retry(&e) => {}
                Err(_) => break,
            }
        }
        got
    }

    /// Whether the peer closes `c` within `timeout` (EOF or a reset).
    fn closed_within(c: &mut TcpStream, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            match c.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if is_retry(&e) => {}
                Err(_) => return true,
            }
        }
        false
    }

    fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        cond()
    }

    #[test]
    fn forwards_both_ways_and_counts_the_bytes() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut c = client(&p);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut writer = c.try_clone().unwrap();
        let sent = data.clone();
        let w = std::thread::spawn(move || writer.write_all(&sent).unwrap());
        let got = read_for(&mut c, data.len(), Duration::from_secs(20));
        w.join().unwrap();
        assert!(got == data, "echoed {} of {} bytes", got.len(), data.len());
        let stats = p.stats();
        assert_eq!(stats.accepted, 1);
        assert_eq!(stats.active, 1);
        assert_eq!(stats.bytes_to_upstream, data.len() as u64);
        assert!(eventually(Duration::from_secs(5), || p
            .stats()
            .bytes_to_client
            == data.len() as u64));
    }

    #[test]
    fn a_delay_holds_every_chunk() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut c = client(&p);
        p.set_delay(Duration::from_millis(300));
        let began = Instant::now();
        c.write_all(b"ping").unwrap();
        let got = read_for(&mut c, 4, Duration::from_secs(10));
        // Up and down: two chunks, each held 300 ms (a lower bound, safe on a busy box).
        assert_eq!(got, b"ping");
        assert!(
            began.elapsed() >= Duration::from_millis(600),
            "{:?}",
            began.elapsed()
        );
        p.set_delay(Duration::ZERO);
        let began = Instant::now();
        c.write_all(b"pong").unwrap();
        assert_eq!(read_for(&mut c, 4, Duration::from_secs(10)), b"pong");
        assert!(began.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_stalled_upstream_stops_reading_until_resumed_and_the_connection_stays_open() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut c = client(&p);
        c.write_all(b"before").unwrap();
        assert_eq!(read_for(&mut c, 6, Duration::from_secs(10)), b"before");
        p.stall(Direction::ToUpstream);
        assert!(p.is_stalled(Direction::ToUpstream));
        assert!(!p.is_stalled(Direction::Both));
        // Nothing is read from the client: its writes block once the buffers are full.
        c.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut accepted = 0usize;
        let until = Instant::now() + Duration::from_secs(10);
        let mut blocked = false;
        while Instant::now() < until {
            match c.write(&chunk) {
                Ok(n) => accepted += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // A pump could still be in the middle of one chunk: wait for quiet.
                    std::thread::sleep(Duration::from_millis(200));
                    if c.write(&chunk).is_err() {
                        blocked = true;
                        break;
                    }
                }
                Err(e) => panic!("write failed: {e}"),
            }
        }
        c.set_nonblocking(false).unwrap();
        assert!(blocked, "the client could write {accepted} bytes");
        assert!(accepted < 64 * 1024 * 1024, "{accepted}");
        let forwarded = p.stats().bytes_to_upstream;
        std::thread::sleep(Duration::from_millis(200));
        assert!(p.stats().bytes_to_upstream <= forwarded + CHUNK as u64);
        assert_eq!(p.stats().active, 1, "the stalled connection stays open");
        // Resumed: everything written comes back.
        p.forward();
        let got = read_for(&mut c, accepted, Duration::from_secs(30));
        assert!(got.len() >= accepted, "{} of {accepted}", got.len());
    }

    #[test]
    fn a_stall_towards_the_client_holds_the_answers() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut c = client(&p);
        p.stall(Direction::ToClient);
        c.write_all(b"held").unwrap();
        assert!(read_for(&mut c, 4, Duration::from_millis(500)).is_empty());
        assert!(eventually(Duration::from_secs(5), || p
            .stats()
            .bytes_to_upstream
            == 4));
        p.resume(Direction::Both);
        assert_eq!(read_for(&mut c, 4, Duration::from_secs(10)), b"held");
    }

    #[test]
    fn black_holed_connections_are_accepted_and_never_answered_while_others_work() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut old = client(&p);
        old.write_all(b"a").unwrap();
        assert_eq!(read_for(&mut old, 1, Duration::from_secs(10)), b"a");
        p.black_hole(true);
        let mut new = client(&p);
        new.write_all(b"anyone?").unwrap();
        assert!(read_for(&mut new, 1, Duration::from_millis(500)).is_empty());
        assert!(eventually(Duration::from_secs(5), || p.stats().black_holed == 1));
        assert_eq!(
            echo.accepted.load(Ordering::SeqCst),
            1,
            "no upstream connection"
        );
        old.write_all(b"b").unwrap();
        assert_eq!(read_for(&mut old, 1, Duration::from_secs(10)), b"b");
        // Cut: the black-holed connection is closed too.
        p.black_hole(false);
        assert_eq!(p.cut_all(), 2);
        assert!(closed_within(&mut new, Duration::from_secs(5)));
    }

    #[test]
    fn cut_all_closes_every_connection_and_new_ones_work() {
        let echo = Echo::start();
        let p = proxy_to(&echo);
        let mut a = client(&p);
        let mut b = client(&p);
        for c in [&mut a, &mut b] {
            c.write_all(b"x").unwrap();
            assert_eq!(read_for(c, 1, Duration::from_secs(10)), b"x");
        }
        assert_eq!(p.cut_all(), 2);
        assert!(closed_within(&mut a, Duration::from_secs(5)));
        assert!(closed_within(&mut b, Duration::from_secs(5)));
        assert!(eventually(Duration::from_secs(5), || p.stats().active == 0));
        let mut c = client(&p);
        c.write_all(b"again").unwrap();
        assert_eq!(read_for(&mut c, 5, Duration::from_secs(10)), b"again");
        assert_eq!(p.stats().cut, 2);
    }

    #[test]
    fn a_connection_is_closed_when_the_upstream_refuses() {
        // A port that was free a moment ago: nothing listens there.
        let dead = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let p = TcpProxy::start("127.0.0.1:0".parse().unwrap(), dead).unwrap();
        let mut c = client(&p);
        assert!(closed_within(&mut c, Duration::from_secs(5)));
        assert!(eventually(Duration::from_secs(5), || p.stats().refused == 1));
    }

    #[test]
    fn shutdown_closes_connections_stops_listening_and_returns_promptly() {
        let echo = Echo::start();
        let mut p = proxy_to(&echo);
        let listen = p.listen_addr();
        let mut c = client(&p);
        c.write_all(b"x").unwrap();
        assert_eq!(read_for(&mut c, 1, Duration::from_secs(10)), b"x");
        p.stall(Direction::Both);
        p.set_delay(Duration::MAX);
        let began = Instant::now();
        p.shutdown();
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        assert!(closed_within(&mut c, Duration::from_secs(5)));
        assert!(TcpStream::connect(listen).is_err(), "still listening");
        p.shutdown();
    }
}
