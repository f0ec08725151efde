//! What every client shares (Java `ClientConfig`), with Java's defaults: the public
//! [`ClientOptions`] a user fills in, and the [`ClientConfig`] a client instance runs with.
//! Every duration is a `Duration`.

use std::net::IpAddr;
use std::time::Duration;

use crate::error::{Error, ErrorKind};
use crate::protocol::SerializeType;
use crate::remoting::{Credentials, RemotingConfig};

/// The instance name Java replaces with `<pid>#<nanos>` for producers and clustering consumers.
pub const DEFAULT_INSTANCE_NAME: &str = "DEFAULT";

/// Where the HTTP name-server address server lives when no address is configured
/// (Java system properties `rocketmq.namesrv.domain`, `rocketmq.namesrv.domain.subgroup`;
/// here the environment variables `ROCKETMQ_NAMESRV_DOMAIN` and
/// `ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP`).
pub const DEFAULT_NAMESRV_DOMAIN: &str = "jmenv.tbsite.net";
/// Default subgroup of the address server path.
pub const DEFAULT_NAMESRV_SUBGROUP: &str = "nsaddr";

/// The error of a client that has no name server to ask (Java: "No name server address,
/// please set it"), with what the address server answered when one was asked.
pub(crate) fn no_name_server(address_server: Option<&Error>) -> Error {
    let message = match address_server {
        None => "no name server address: set `namesrv_addr` in the client options or the \
                 NAMESRV_ADDR environment variable, or an address server \
                 (`name_server_address_url`)"
            .to_string(),
        Some(e) => format!(
            "no name server address: {e:#}; set `namesrv_addr` in the client options or the \
             NAMESRV_ADDR environment variable, or fix the address server"
        ),
    };
    Error::new(ErrorKind::Config, message)
}

/// The finished configuration of a client instance: [`ClientOptions`] after `start`, with
/// the consumer-only periods filled in.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub(crate) namesrv_addr: Option<String>,
    pub(crate) client_ip: String,
    pub(crate) instance_name: String,
    pub(crate) unit_name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) unit_mode: bool,
    pub(crate) vip_channel_enabled: bool,
    pub(crate) mq_client_api_timeout: Duration,
    pub(crate) poll_name_server_interval: Duration,
    pub(crate) heartbeat_broker_interval: Duration,
    pub(crate) persist_consumer_offset_interval: Duration,
    pub(crate) fetch_name_server_interval: Duration,
    pub(crate) adjust_thread_pool_interval: Duration,
    pub(crate) name_server_address_url: String,
    /// Whether the user chose an address server (the URL, or its environment variables):
    /// only then is it asked, so that a client with nothing configured fails at once.
    pub(crate) address_server_configured: bool,
    pub(crate) remoting: RemotingConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientOptions::default().into_config()
    }
}

impl ClientConfig {
    /// The client id: `ip@instance[@unit]` (Java `buildMQClientId`).
    pub fn client_id(&self) -> String {
        let mut id = format!("{}@{}", self.client_ip, self.instance_name);
        if let Some(unit) = self.unit_name.as_deref().filter(|u| !u.trim().is_empty()) {
            id.push('@');
            id.push_str(unit);
        }
        id
    }

    /// The name-server addresses as a list (`http://` prefixes stripped as Java does).
    pub fn namesrv_addr_list(&self) -> Vec<String> {
        self.namesrv_addr
            .as_deref()
            .map(parse_namesrv_list)
            .unwrap_or_default()
    }

    /// The namespace: the configured one, else the instance id found in an
    /// `MQ_INST_xxx_yyy.` name-server endpoint (Java `NameServerAddressUtils`).
    pub fn namespace(&self) -> Option<String> {
        if let Some(ns) = self.namespace.as_deref().filter(|n| !n.is_empty()) {
            return Some(ns.to_string());
        }
        self.namesrv_addr
            .as_deref()
            .and_then(instance_id_of_endpoint)
    }

    /// Timeout of route, heartbeat and other control calls (Java `mqClientApiTimeout`).
    pub fn mq_client_api_timeout(&self) -> Duration {
        self.mq_client_api_timeout
    }

    /// The credentials requests are signed with, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.remoting.credentials.as_ref()
    }

    /// Remoting settings.
    pub fn remoting(&self) -> &RemotingConfig {
        &self.remoting
    }

    /// Replaces `DEFAULT` by `<pid>#<nanos>` (Java `changeInstanceNameToPID`).
    pub(crate) fn change_instance_name_to_pid(&mut self) {
        if self.instance_name == DEFAULT_INSTANCE_NAME {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            self.instance_name = format!("{}#{}", std::process::id(), nanos);
        }
    }
}

/// Splits `a;b;c`, trims, and strips an `http://host/` prefix to its last path segment.
pub(crate) fn parse_namesrv_list(s: &str) -> Vec<String> {
    let s = match s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
    {
        Some(rest) => rest.rsplit('/').next().unwrap_or(rest),
        None => s,
    };
    s.split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// `[scheme://]MQ_INST_<a>_<b>.<rest>` → `MQ_INST_<a>_<b>`.
fn instance_id_of_endpoint(addr: &str) -> Option<String> {
    let host = addr.rsplit('/').next().unwrap_or(addr);
    let id = host.split('.').next()?;
    let rest = id.strip_prefix("MQ_INST_")?;
    let mut parts = rest.splitn(2, '_');
    let (a, b) = (parts.next()?, parts.next()?);
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric());
    (word(a) && word(b) && host.len() > id.len()).then(|| id.to_string())
}

/// What every client shares: name servers, identity, namespace, timeouts, credentials,
/// TLS and the client-wide periods (Java `ClientConfig`), with Java's defaults. Give it to
/// any builder with `client_options(...)`; one value can configure a producer and a
/// consumer alike:
///
/// ```no_run
/// use rocketmq_blocking::{ClientOptions, Producer};
/// let options = ClientOptions::new().namesrv_addr("127.0.0.1:9876").namespace("ns");
/// let producer = Producer::builder("orders").client_options(options.clone()).start()?;
/// # Ok::<(), rocketmq_blocking::Error>(())
/// ```
///
/// Each client's own settings stay on its builder ([`ProducerOptions`](crate::ProducerOptions),
/// [`PushConsumerOptions`](crate::PushConsumerOptions), …). Clients of one process with the same
/// client id (IP, instance name, unit name) share one client instance: its connections, its
/// threads and the periods below come from the first of them to start.
#[doc(alias = "ClientConfig")]
#[derive(Debug, Clone)]
pub struct ClientOptions {
    config: ClientConfig,
}

impl Default for ClientOptions {
    fn default() -> Self {
        let domain = std::env::var("ROCKETMQ_NAMESRV_DOMAIN").ok();
        let subgroup = std::env::var("ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP").ok();
        let address_server_configured = domain.is_some() || subgroup.is_some();
        let domain = domain.unwrap_or_else(|| DEFAULT_NAMESRV_DOMAIN.to_string());
        let subgroup = subgroup.unwrap_or_else(|| DEFAULT_NAMESRV_SUBGROUP.to_string());
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        ClientOptions {
            config: ClientConfig {
                namesrv_addr: std::env::var("NAMESRV_ADDR")
                    .ok()
                    .filter(|s| !s.trim().is_empty()),
                client_ip: local_ip().to_string(),
                instance_name: std::env::var("ROCKETMQ_CLIENT_NAME")
                    .unwrap_or_else(|_| DEFAULT_INSTANCE_NAME.to_string()),
                unit_name: None,
                namespace: None,
                unit_mode: false,
                vip_channel_enabled: false,
                mq_client_api_timeout: Duration::from_millis(3000),
                poll_name_server_interval: Duration::from_millis(30_000),
                heartbeat_broker_interval: Duration::from_millis(30_000),
                persist_consumer_offset_interval: DEFAULT_PERSIST_OFFSET_INTERVAL,
                fetch_name_server_interval: Duration::from_millis(120_000),
                adjust_thread_pool_interval: DEFAULT_ADJUST_THREAD_POOL_INTERVAL,
                name_server_address_url: format!("http://{domain}:8080/rocketmq/{subgroup}"),
                address_server_configured,
                remoting: RemotingConfig {
                    callback_threads: threads,
                    ..RemotingConfig::default()
                },
            },
        }
    }
}

impl From<ClientOptions> for ClientConfig {
    fn from(options: ClientOptions) -> ClientConfig {
        options.into_config()
    }
}

/// How often consumers write their offsets (Java `persistConsumerOffsetInterval`).
pub(crate) const DEFAULT_PERSIST_OFFSET_INTERVAL: Duration = Duration::from_secs(5);
/// How often push consumers resize their consume pools (Java's adjustment job period).
pub(crate) const DEFAULT_ADJUST_THREAD_POOL_INTERVAL: Duration = Duration::from_secs(60);

impl ClientOptions {
    /// Java's defaults, with the name servers from `NAMESRV_ADDR` and the instance name
    /// from `ROCKETMQ_CLIENT_NAME` when they are set, as the Java tools read them.
    pub fn new() -> ClientOptions {
        ClientOptions::default()
    }

    /// Name-server addresses, `;`-separated (default: the `NAMESRV_ADDR` environment
    /// variable; Java `namesrvAddr`).
    #[doc(alias = "namesrvAddr")]
    pub fn namesrv_addr(mut self, addr: impl Into<String>) -> Self {
        self.config.namesrv_addr = Some(addr.into());
        self
    }

    /// Ignore `NAMESRV_ADDR` and find the name servers through the HTTP address server,
    /// which must then be configured (see
    /// [`name_server_address_url`](Self::name_server_address_url)).
    pub fn no_namesrv_addr(mut self) -> Self {
        self.config.namesrv_addr = None;
        self
    }

    /// Full URL of the HTTP name-server address server, asked at start and every two
    /// minutes when no name-server address is configured (Java's default
    /// `http://jmenv.tbsite.net:8080/rocketmq/nsaddr`; the environment variables
    /// `ROCKETMQ_NAMESRV_DOMAIN` and `ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP` change its host
    /// and path). It is asked only when chosen, here or by those variables: with
    /// neither a name server nor an address server, `start` fails at once with a
    /// [`Config`](crate::ErrorKind::Config) error that says so.
    pub fn name_server_address_url(mut self, url: impl Into<String>) -> Self {
        self.config.name_server_address_url = url.into();
        self.config.address_server_configured = true;
        self
    }

    /// Instance name: clients of one process with the same client id share one
    /// connection set (default `DEFAULT`, or `ROCKETMQ_CLIENT_NAME`; Java
    /// `instanceName`).
    #[doc(alias = "instanceName")]
    pub fn instance_name(mut self, name: impl Into<String>) -> Self {
        self.config.instance_name = name.into();
        self
    }

    /// Unit name, appended to the client id (Java `unitName`).
    #[doc(alias = "unitName")]
    pub fn unit_name(mut self, name: impl Into<String>) -> Self {
        self.config.unit_name = Some(name.into());
        self
    }

    /// Namespace that prefixes groups and topics on the wire (`ns%Topic`); users see
    /// names without it (Java `namespace`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.config.namespace = Some(namespace.into());
        self
    }

    /// The IP that goes into the client id (default: Java's selection rule).
    #[doc(alias = "clientIP")]
    pub fn client_ip(mut self, ip: impl Into<String>) -> Self {
        self.config.client_ip = ip.into();
        self
    }

    /// Send through the broker's VIP port, its port minus 2 (Java `vipChannelEnabled`,
    /// false).
    #[doc(alias = "vipChannelEnabled")]
    pub fn vip_channel(mut self, enabled: bool) -> Self {
        self.config.vip_channel_enabled = enabled;
        self
    }

    /// Signs every request with these credentials, for clusters that enforce ACL (Java
    /// `new AclClientRPCHook(new SessionCredentials(ak, sk))` passed to the client's
    /// constructor). Clients sharing one client instance (same client id) must use the
    /// same credentials: a second client with other ones (or none) is refused at `start`
    /// with a [`Config`](crate::ErrorKind::Config) error.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.config.remoting.credentials = Some(credentials);
        self
    }

    /// TLS on every connection, to name servers and brokers (Java `useTLS`, off by
    /// default; see [`TlsConfig`](crate::TlsConfig)). The connect timeout bounds the TCP
    /// connect and the handshake together.
    #[doc(alias = "useTLS")]
    pub fn tls(mut self, tls: crate::remoting::TlsConfig) -> Self {
        self.config.remoting.tls = Some(tls);
        self
    }

    /// Header encoding of requests (Java `rocketmq.serialize.type`; default JSON).
    pub fn serialize_type(mut self, ty: SerializeType) -> Self {
        self.config.remoting.serialize_type = ty;
        self
    }

    /// Timeout of control calls: routes, heartbeats, offsets, admin requests (Java
    /// `mqClientApiTimeout`, 3 s).
    #[doc(alias = "mqClientApiTimeout")]
    pub fn api_timeout(mut self, timeout: Duration) -> Self {
        self.config.mq_client_api_timeout = timeout;
        self
    }

    /// TCP connect timeout, with the TLS handshake when TLS is on (Java
    /// `connectTimeoutMillis`, 3 s).
    #[doc(alias = "connectTimeoutMillis")]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.remoting.connect_timeout = timeout;
        self
    }

    /// How often routes are refreshed from the name server (Java
    /// `pollNameServerInterval`, 30 s).
    #[doc(alias = "pollNameServerInterval")]
    pub fn poll_name_server_interval(mut self, every: Duration) -> Self {
        self.config.poll_name_server_interval = every;
        self
    }

    /// How often heartbeats go to every broker (Java `heartbeatBrokerInterval`, 30 s).
    #[doc(alias = "heartbeatBrokerInterval")]
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.config.heartbeat_broker_interval = every;
        self
    }

    /// How often the HTTP address server is asked (Java `fetchNameServerAddr` period,
    /// 2 min).
    pub fn fetch_name_server_interval(mut self, every: Duration) -> Self {
        self.config.fetch_name_server_interval = every;
        self
    }

    /// Largest frame accepted from a peer; a larger one closes the connection (default
    /// 16 MiB, Java `com.rocketmq.remoting.frameMaxLength`).
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.config.remoting.max_frame = bytes;
        self
    }

    /// Async requests allowed in flight per client instance (Java 65535,
    /// `com.rocketmq.remoting.clientAsyncSemaphoreValue`). An async send waits for a
    /// permit up to its timeout, so this is the producer's back-pressure.
    pub fn async_permits(mut self, permits: usize) -> Self {
        self.config.remoting.async_permits = permits;
        self
    }

    /// Threads that run async callbacks (Java `clientCallbackExecutorThreads`, CPU
    /// count).
    #[doc(alias = "clientCallbackExecutorThreads")]
    pub fn callback_threads(mut self, threads: usize) -> Self {
        self.config.remoting.callback_threads = threads;
        self
    }

    /// How long stopping the shared client instance may take, for all its threads
    /// together: the timer, the pull and rebalance services, the I/O thread and the
    /// callback and processor pools (10 s). An async-send callback or broker-request
    /// handler still running then keeps its thread and the stop returns without it; it is
    /// not interrupted. A push consumer waits for its listeners separately, for
    /// `await_termination_when_shutdown`.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.remoting.shutdown_timeout = timeout;
        self
    }

    /// The client id these options give (`ip@instance[@unit]`, Java `buildMQClientId`).
    pub fn client_id(&self) -> String {
        self.config.client_id()
    }

    /// The finished configuration.
    pub(crate) fn into_config(self) -> ClientConfig {
        self.config
    }

    /// The consumers' own periods, which only a consumer's builder sets (they run on the
    /// shared client instance).
    pub(crate) fn consumer_periods(
        mut self,
        persist_offsets: Duration,
        adjust_pool: Duration,
    ) -> Self {
        self.config.persist_consumer_offset_interval = persist_offsets;
        self.config.adjust_thread_pool_interval = adjust_pool;
        self
    }
}

/// Java `RemotingUtil.getLocalAddress`: the first non-loopback IPv4 not in 127.0/192.168,
/// else the last non-loopback IPv4, else the first non-loopback IPv6, else 127.0.0.1.
pub fn local_ip() -> IpAddr {
    let addrs: Vec<IpAddr> = if_addrs::get_if_addrs()
        .map(|v| v.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default();
    select_local_ip(&addrs)
}

fn select_local_ip(addrs: &[IpAddr]) -> IpAddr {
    let v4: Vec<_> = addrs
        .iter()
        .filter_map(|a| match a {
            IpAddr::V4(v) if !v.is_loopback() => Some(*v),
            _ => None,
        })
        .collect();
    if let Some(v) = v4.iter().find(|v| {
        let o = v.octets();
        !(o[0] == 127 && o[1] == 0 || o[0] == 192 && o[1] == 168)
    }) {
        return IpAddr::V4(*v);
    }
    if let Some(v) = v4.last() {
        return IpAddr::V4(*v);
    }
    addrs
        .iter()
        .find(|a| matches!(a, IpAddr::V6(v) if !v.is_loopback()))
        .copied()
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_id_is_ip_at_instance_at_unit() {
        let c = ClientOptions::new()
            .client_ip("10.0.0.1")
            .instance_name("i1")
            .into_config();
        assert_eq!(c.client_id(), "10.0.0.1@i1");
        let c = ClientOptions::new()
            .client_ip("10.0.0.1")
            .instance_name("i1")
            .unit_name("u")
            .into_config();
        assert_eq!(c.client_id(), "10.0.0.1@i1@u");
    }

    #[test]
    fn default_instance_name_becomes_pid_and_nanos() {
        let mut c = ClientOptions::new().instance_name("DEFAULT").into_config();
        c.change_instance_name_to_pid();
        let (pid, nanos) = c.instance_name.split_once('#').unwrap();
        assert_eq!(pid, std::process::id().to_string());
        assert!(nanos.parse::<u128>().is_ok());
        let mut c = ClientOptions::new().instance_name("mine").into_config();
        c.change_instance_name_to_pid();
        assert_eq!(c.instance_name, "mine");
    }

    #[test]
    fn namesrv_lists_parse_like_java() {
        assert_eq!(parse_namesrv_list("a:1; b:2;"), vec!["a:1", "b:2"]);
        assert_eq!(
            parse_namesrv_list("http://host/x/a:1;b:2"),
            vec!["a:1", "b:2"]
        );
        assert!(parse_namesrv_list("").is_empty());
    }

    #[test]
    fn namespace_from_instance_endpoint() {
        let c = ClientOptions::new()
            .namesrv_addr("http://MQ_INST_1234_abcd.mq.example.com:80")
            .into_config();
        assert_eq!(c.namespace().as_deref(), Some("MQ_INST_1234_abcd"));
        let c = ClientOptions::new()
            .namesrv_addr("127.0.0.1:9876")
            .into_config();
        assert_eq!(c.namespace(), None);
        let c = ClientOptions::new().namespace("ns").into_config();
        assert_eq!(c.namespace().as_deref(), Some("ns"));
    }

    #[test]
    fn local_ip_rule_prefers_public_then_last_private() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            select_local_ip(&[ip("127.0.0.1"), ip("192.168.1.2"), ip("10.1.1.1")]),
            ip("10.1.1.1")
        );
        assert_eq!(
            select_local_ip(&[ip("192.168.1.2"), ip("192.168.1.3")]),
            ip("192.168.1.3")
        );
        assert_eq!(select_local_ip(&[ip("::1"), ip("fe80::1")]), ip("fe80::1"));
        assert_eq!(select_local_ip(&[]), ip("127.0.0.1"));
    }
}
