//! Settings of the remoting client and the two traits through which callers plug into
//! it: RPC hooks around every request, and processors of the requests a broker sends.

use std::time::Duration;

use super::{Credentials, TlsConfig};
use crate::protocol::{RemotingCommand, RequestCode, SerializeType, DEFAULT_MAX_FRAME};
use crate::util::worker::JOIN_TIMEOUT;

/// Settings of the remoting client (Java `NettyClientConfig` plus the system properties
/// `NettySystemConfig` reads). `Default` gives Java's defaults.
#[derive(Debug, Clone)]
pub struct RemotingConfig {
    /// TCP connect timeout (Java 3 s, `com.rocketmq.remoting.client.connect.timeout`).
    pub connect_timeout: Duration,
    /// Largest frame accepted from a peer (Java 16 MiB, `com.rocketmq.remoting.frameMaxLength`).
    pub max_frame: usize,
    /// Header encoding of our requests (Java JSON, `rocketmq.serialize.type`).
    pub serialize_type: SerializeType,
    /// Close the connection when a sync call times out (Java true).
    pub close_socket_if_timeout: bool,
    /// Close a connection with no traffic for this long (Java 120 s).
    pub channel_max_idle: Duration,
    /// In-flight async requests allowed (Java 65535).
    pub async_permits: usize,
    /// In-flight oneway requests allowed (Java 65535).
    pub oneway_permits: usize,
    /// Threads running async callbacks (Java: CPU count).
    pub callback_threads: usize,
    /// Threads running broker-initiated requests (Java: 4 public-executor threads).
    pub processor_threads: usize,
    /// Broker-initiated requests that may wait for a processor thread; beyond this the
    /// I/O thread answers SYSTEM_BUSY at once, so a flood cannot grow memory without bound
    /// (Java's client queue is unbounded).
    pub processor_queue: usize,
    /// Bytes of the broker-initiated requests waiting for a processor thread; a request
    /// that would take them beyond this is answered SYSTEM_BUSY as above (64 MiB: four
    /// frames of the largest size; unbounded in Java).
    pub processor_queue_bytes: usize,
    /// Bytes of our replies to a peer's requests that one connection may hold unwritten
    /// (the peer is not reading them); a reply beyond this closes the connection (16 MiB;
    /// unbounded in Java).
    pub reply_queue_bytes: usize,
    /// How long to wait for the lock that serialises name-server connection set-up (Java 3 s).
    pub namesrv_lock_timeout: Duration,
    /// How long a shutdown waits for all of this client's threads together (I/O thread,
    /// processor and callback pools); a callback still running then keeps its thread and
    /// the shutdown returns without it (10 s).
    pub shutdown_timeout: Duration,
    /// Signs every request with these (Java `AclClientRPCHook`), after the RPC hooks and
    /// right before encoding. `Debug` redacts the secret.
    pub credentials: Option<Credentials>,
    /// TLS on every connection (Java `useTLS`, off); `connect_timeout` bounds the TCP
    /// connect and the handshake together.
    pub tls: Option<TlsConfig>,
    /// A sync caller that writes its own frame on an idle plain connection, with no other
    /// request waiting there, also reads its own response instead of waiting for the I/O
    /// thread to read it (on). Off, the I/O thread reads every response.
    pub caller_reads: bool,
}

impl Default for RemotingConfig {
    fn default() -> Self {
        RemotingConfig {
            connect_timeout: Duration::from_millis(3000),
            max_frame: DEFAULT_MAX_FRAME,
            serialize_type: SerializeType::from_env(),
            close_socket_if_timeout: true,
            channel_max_idle: Duration::from_secs(120),
            async_permits: 65535,
            oneway_permits: 65535,
            callback_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            processor_threads: 4,
            processor_queue: 1024,
            processor_queue_bytes: 64 * 1024 * 1024,
            reply_queue_bytes: 16 * 1024 * 1024,
            namesrv_lock_timeout: Duration::from_millis(3000),
            shutdown_timeout: JOIN_TIMEOUT,
            credentials: None,
            tls: None,
            caller_reads: true,
        }
    }
}

/// Called around every request (Java `RPCHook`), e.g. to sign requests for ACL.
pub trait RpcHook: Send + Sync {
    /// Runs before the request is encoded; may add header fields.
    fn before_request(&self, addr: &str, request: &mut RemotingCommand);
    /// Runs after a sync response arrived.
    fn after_response(&self, _addr: &str, _code: RequestCode, _response: &mut RemotingCommand) {}
}

/// Handles requests the broker sends to us (Java `NettyRequestProcessor`).
///
/// Runs on the processor pool. Return the response, or `None` for none (oneway requests).
pub trait RequestProcessor: Send + Sync {
    /// Processes one request from `addr`.
    fn process(&self, addr: &str, request: RemotingCommand) -> Option<RemotingCommand>;
}

impl<F> RequestProcessor for F
where
    F: Fn(&str, RemotingCommand) -> Option<RemotingCommand> + Send + Sync,
{
    fn process(&self, addr: &str, request: RemotingCommand) -> Option<RemotingCommand> {
        self(addr, request)
    }
}
