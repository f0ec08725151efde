//! Small helpers shared across modules.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) mod worker;

/// Builder setters that assign `self.options.<name>`.
macro_rules! option_setters {
    ($($(#[$m:meta])* $name:ident: $ty:ty;)*) => {$(
        $(#[$m])*
        pub fn $name(mut self, value: $ty) -> Self {
            self.options.$name = value;
            self
        }
    )*};
}

/// The client settings every builder has (Java `ClientConfig`), forwarded to its
/// `client: ClientConfigBuilder`.
macro_rules! client_setters {
    () => {
        /// Name-server addresses, `;`-separated (default: the `NAMESRV_ADDR` environment
        /// variable, as the Java tools read it; Java `namesrvAddr`).
        #[doc(alias = "namesrvAddr")]
        pub fn namesrv_addr(mut self, addr: impl Into<String>) -> Self {
            self.client = self.client.namesrv_addr(addr);
            self
        }

        /// Ignore `NAMESRV_ADDR` and find the name servers through the HTTP address server,
        /// which must then be configured (see
        /// [`name_server_address_url`](Self::name_server_address_url)).
        pub fn no_namesrv_addr(mut self) -> Self {
            self.client = self.client.no_namesrv_addr();
            self
        }

        /// Full URL of the HTTP name-server address server, asked at `start` and every two
        /// minutes when no name-server address is configured (Java's default
        /// `http://jmenv.tbsite.net:8080/rocketmq/nsaddr`; the environment variables
        /// `ROCKETMQ_NAMESRV_DOMAIN` and `ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP` change its host
        /// and path). It is asked only when chosen, here or by those variables: with
        /// neither a name server nor an address server, `start` fails at once with a
        /// [`Config`](crate::ErrorKind::Config) error that says so.
        pub fn name_server_address_url(mut self, url: impl Into<String>) -> Self {
            self.client = self.client.name_server_address_url(url);
            self
        }

        /// Instance name: clients of one process with the same client id share one
        /// connection set (default `DEFAULT`, or `ROCKETMQ_CLIENT_NAME`; Java
        /// `instanceName`).
        #[doc(alias = "instanceName")]
        pub fn instance_name(mut self, name: impl Into<String>) -> Self {
            self.client = self.client.instance_name(name);
            self
        }

        /// Unit name, appended to the client id (Java `unitName`).
        pub fn unit_name(mut self, name: impl Into<String>) -> Self {
            self.client = self.client.unit_name(name);
            self
        }

        /// Namespace that prefixes groups and topics on the wire (`ns%Topic`); users see
        /// names without it (Java `namespace`).
        pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
            self.client = self.client.namespace(namespace);
            self
        }

        /// The IP that goes into the client id (default: Java's selection rule).
        pub fn client_ip(mut self, ip: impl Into<String>) -> Self {
            self.client = self.client.client_ip(ip);
            self
        }

        /// Send through the broker's VIP port, its port minus 2 (Java
        /// `vipChannelEnabled`, false).
        #[doc(alias = "vipChannelEnabled")]
        pub fn vip_channel(mut self, enabled: bool) -> Self {
            self.client = self.client.vip_channel_enabled(enabled);
            self
        }

        /// Signs every request with these credentials, for clusters that enforce ACL
        /// (Java `new AclClientRPCHook(new SessionCredentials(ak, sk))` passed to the
        /// client's constructor). Set before start, so the first route query and heartbeat
        /// are signed too. Clients sharing one client instance (same client id) must use
        /// the same credentials: a second client with other ones (or none) is refused
        /// with a [`Config`]($crate::ErrorKind::Config) error when it gets the instance
        /// (producer: `start`; consumers: `build`).
        pub fn credentials(mut self, credentials: $crate::Credentials) -> Self {
            self.client = self.client.credentials(credentials);
            self
        }

        /// Header encoding of requests (Java `rocketmq.serialize.type`; default JSON).
        pub fn serialize_type(mut self, ty: $crate::SerializeType) -> Self {
            self.client = self.client.serialize_type(ty);
            self
        }

        /// Timeout of control calls: routes, heartbeats, offsets (Java
        /// `mqClientApiTimeout`, 3 s).
        #[doc(alias = "mqClientApiTimeout")]
        pub fn api_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.client = self.client.mq_client_api_timeout(timeout);
            self
        }

        /// How often routes are refreshed from the name server (Java
        /// `pollNameServerInterval`, 30 s).
        #[doc(alias = "pollNameServerInterval")]
        pub fn poll_name_server_interval(mut self, every: std::time::Duration) -> Self {
            self.client = self.client.poll_name_server_interval(every);
            self
        }

        /// How often heartbeats go to every broker (Java `heartbeatBrokerInterval`, 30 s).
        #[doc(alias = "heartbeatBrokerInterval")]
        pub fn heartbeat_interval(mut self, every: std::time::Duration) -> Self {
            self.client = self.client.heartbeat_broker_interval(every);
            self
        }

        /// How often consumers write their offsets (Java `persistConsumerOffsetInterval`,
        /// 5 s).
        #[doc(alias = "persistConsumerOffsetInterval")]
        pub fn persist_offset_interval(mut self, every: std::time::Duration) -> Self {
            self.client = self.client.persist_consumer_offset_interval(every);
            self
        }

        /// How often the HTTP address server is asked (Java `fetchNameServerAddr` period,
        /// 2 min).
        pub fn fetch_name_server_interval(mut self, every: std::time::Duration) -> Self {
            self.client = self.client.fetch_name_server_interval(every);
            self
        }

        /// How often push consumers resize their consume pools (Java
        /// `adjustThreadPoolNumsThreshold` check, 1 min).
        pub fn adjust_thread_pool_interval(mut self, every: std::time::Duration) -> Self {
            self.client = self.client.adjust_thread_pool_interval(every);
            self
        }

        /// TLS on every connection, to name servers and brokers (Java `useTLS`, off by
        /// default; see [`TlsConfig`]($crate::TlsConfig)). The connect timeout bounds the
        /// TCP connect and the handshake together.
        #[doc(alias = "useTLS")]
        pub fn tls(mut self, tls: $crate::TlsConfig) -> Self {
            self.client = self.client.tls(tls);
            self
        }

        /// TCP connect timeout, with the TLS handshake when TLS is on (Java
        /// `connectTimeoutMillis`, 3 s).
        #[doc(alias = "connectTimeoutMillis")]
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.client = self.client.connect_timeout(timeout);
            self
        }

        /// Largest frame accepted from a peer; a larger one closes the connection (default
        /// 16 MiB, Java `com.rocketmq.remoting.frameMaxLength`).
        pub fn max_frame_size(mut self, bytes: usize) -> Self {
            self.client = self.client.max_frame_size(bytes);
            self
        }

        /// Async requests allowed in flight per client instance (Java 65535,
        /// `com.rocketmq.remoting.clientAsyncSemaphoreValue`). An async send waits for a
        /// permit up to its timeout, so this is the producer's back-pressure.
        pub fn async_permits(mut self, permits: usize) -> Self {
            self.client = self.client.async_permits(permits);
            self
        }

        /// Threads that run async callbacks (Java `clientCallbackExecutorThreads`, CPU
        /// count).
        #[doc(alias = "clientCallbackExecutorThreads")]
        pub fn callback_threads(mut self, threads: usize) -> Self {
            self.client = self.client.callback_threads(threads);
            self
        }

        /// How long stopping the client's shared instance may take, for all its threads
        /// together: the timer, the pull and rebalance services, the I/O thread and the
        /// callback and processor pools (10 s). An async-send callback or broker-request
        /// handler still running then keeps its thread and the stop returns without it;
        /// it is not interrupted. A push consumer waits for its listeners separately, for
        /// `await_termination_when_shutdown`.
        pub fn shutdown_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.client = self.client.shutdown_timeout(timeout);
            self
        }
    };
}

pub(crate) use {client_setters, option_setters};

/// A random number good enough for start indexes and shuffles (not for cryptography).
pub(crate) fn random_u64() -> u64 {
    // Each RandomState carries fresh keys; mixing in the clock varies it across processes.
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Fisher–Yates shuffle (Java `Collections.shuffle`).
pub(crate) fn shuffle<T>(v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = (random_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// `t` in milliseconds since the Unix epoch (negative before it), as Java's timestamps.
pub(crate) fn millis_since_epoch(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |m| -m),
    }
}

/// The time `millis` after the Unix epoch (before it when negative).
pub(crate) fn time_from_millis(millis: i64) -> SystemTime {
    let d = std::time::Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH.checked_add(d).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH)
    }
}

/// Milliseconds since the Unix epoch (Java `System.currentTimeMillis`).
pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_keeps_every_element() {
        let mut v: Vec<u32> = (0..50).collect();
        shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(random_u64(), random_u64());
    }
}
