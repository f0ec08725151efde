//! `rmq_client_options`: what every client shares (the Rust `ClientOptions`, Java
//! `ClientConfig`): name servers, instance name, namespace, ACL credentials, TLS,
//! timeouts and periods. One handle configures any number of builders: each
//! `rmq_*_builder_client_options` (and `rmq_admin_new`) copies it.
//! Thread safety: not thread-safe; set it up on one thread, then copy it anywhere.

use std::ffi::c_char;
use std::time::Duration;

use rocketmq_blocking::{
    AdminBuilder, ClientOptions, Credentials, LitePullConsumerBuilder, ProducerBuilder,
    PushConsumerBuilder, SerializeType, SimpleConsumerBuilder, TransactionProducerBuilder,
};

use crate::common::{rmq_tls_config, HasSlot};
use crate::error::{fail, guard, guard_void, rmq_result};
use crate::util::{handle, handle_mut, opt_str_arg, out_handle, str_arg, take_handle};

/// Client options, starting from Java's defaults (name servers from `NAMESRV_ADDR`).
/// Free with `rmq_client_options_free`.
pub struct rmq_client_options {
    pub(crate) inner: ClientOptions,
}

/// New client options with Java's defaults; the name servers come from `NAMESRV_ADDR`
/// when it is set.
#[no_mangle]
pub extern "C" fn rmq_client_options_new(options_out: *mut *mut rmq_client_options) -> rmq_result {
    guard(|| {
        out_handle(
            options_out,
            rmq_client_options {
                inner: ClientOptions::new(),
            },
        )
    })
}

/// Frees client options (builders keep their own copies). NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_client_options_free(o: *mut rmq_client_options) {
    guard_void(|| drop(take_handle(o)));
}

/// Applies `f` once its arguments are parsed: a bad argument leaves the options as they
/// were.
fn update(
    o: *mut rmq_client_options,
    f: impl FnOnce(ClientOptions) -> Result<ClientOptions, rmq_result>,
) -> rmq_result {
    guard(|| {
        let o = handle_mut(o, "client options")?;
        let current = std::mem::take(&mut o.inner);
        // On a bad argument the defaults would be left behind: keep a copy to restore.
        let backup = current.clone();
        match f(current) {
            Ok(next) => {
                o.inner = next;
                Ok(())
            }
            Err(e) => {
                o.inner = backup;
                Err(e)
            }
        }
    })
}

/// The name-server addresses, `host:port` separated by `;` (Java `namesrvAddr`).
#[no_mangle]
pub extern "C" fn rmq_client_options_namesrv_addr(
    o: *mut rmq_client_options,
    addr: *const c_char,
    addr_len: usize,
) -> rmq_result {
    update(o, |o| {
        Ok(o.namesrv_addr(str_arg(addr, addr_len, "namesrv_addr")?))
    })
}

/// The instance name (Java `instanceName`): clients with different names get separate
/// client instances and connections.
#[no_mangle]
pub extern "C" fn rmq_client_options_instance_name(
    o: *mut rmq_client_options,
    name: *const c_char,
    name_len: usize,
) -> rmq_result {
    update(o, |o| {
        Ok(o.instance_name(str_arg(name, name_len, "instance_name")?))
    })
}

/// The unit name, appended to the client id (Java `unitName`).
#[no_mangle]
pub extern "C" fn rmq_client_options_unit_name(
    o: *mut rmq_client_options,
    name: *const c_char,
    name_len: usize,
) -> rmq_result {
    update(o, |o| {
        Ok(o.unit_name(str_arg(name, name_len, "unit_name")?))
    })
}

/// The namespace (Java `namespace`): groups and topics are `ns%Name` on the wire; the
/// client takes and shows them without the prefix.
#[no_mangle]
pub extern "C" fn rmq_client_options_namespace(
    o: *mut rmq_client_options,
    namespace: *const c_char,
    namespace_len: usize,
) -> rmq_result {
    update(o, |o| {
        Ok(o.namespace(str_arg(namespace, namespace_len, "namespace")?))
    })
}

/// The IP that goes into the client id (default: Java's selection rule).
#[no_mangle]
pub extern "C" fn rmq_client_options_client_ip(
    o: *mut rmq_client_options,
    ip: *const c_char,
    ip_len: usize,
) -> rmq_result {
    update(o, |o| Ok(o.client_ip(str_arg(ip, ip_len, "client_ip")?)))
}

/// Send through the brokers' VIP port, their port minus 2 (Java `vipChannelEnabled`,
/// default false).
#[no_mangle]
pub extern "C" fn rmq_client_options_vip_channel(
    o: *mut rmq_client_options,
    enabled: bool,
) -> rmq_result {
    update(o, |o| Ok(o.vip_channel(enabled)))
}

/// ACL credentials: every request is signed (Java `AclClientRPCHook`). `security_token`
/// may be NULL.
#[no_mangle]
pub extern "C" fn rmq_client_options_credentials(
    o: *mut rmq_client_options,
    access_key: *const c_char,
    access_key_len: usize,
    secret_key: *const c_char,
    secret_key_len: usize,
    security_token: *const c_char,
    security_token_len: usize,
) -> rmq_result {
    update(o, |o| {
        let mut c = Credentials::new(
            str_arg(access_key, access_key_len, "access_key")?,
            str_arg(secret_key, secret_key_len, "secret_key")?,
        );
        if let Some(t) = opt_str_arg(security_token, security_token_len, "security_token")? {
            c = c.with_security_token(t);
        }
        Ok(o.credentials(c))
    })
}

/// TLS to the name servers and brokers (the settings are copied).
#[no_mangle]
pub extern "C" fn rmq_client_options_tls(
    o: *mut rmq_client_options,
    tls: *const rmq_tls_config,
) -> rmq_result {
    update(o, |o| Ok(o.tls(handle(tls, "tls config")?.inner.clone())))
}

/// The timeout of control calls (routes, heartbeats, offsets, admin calls), in
/// milliseconds (Java `mqClientApiTimeout`, 3000).
#[no_mangle]
pub extern "C" fn rmq_client_options_api_timeout_ms(
    o: *mut rmq_client_options,
    ms: u64,
) -> rmq_result {
    update(o, |o| Ok(o.api_timeout(Duration::from_millis(ms))))
}

/// The TCP connect timeout, with the TLS handshake, in milliseconds (3000).
#[no_mangle]
pub extern "C" fn rmq_client_options_connect_timeout_ms(
    o: *mut rmq_client_options,
    ms: u64,
) -> rmq_result {
    update(o, |o| Ok(o.connect_timeout(Duration::from_millis(ms))))
}

/// How often routes are refreshed, in milliseconds (Java `pollNameServerInterval`,
/// 30000).
#[no_mangle]
pub extern "C" fn rmq_client_options_poll_name_server_interval_ms(
    o: *mut rmq_client_options,
    ms: u64,
) -> rmq_result {
    update(o, |o| {
        Ok(o.poll_name_server_interval(Duration::from_millis(ms)))
    })
}

/// How often heartbeats go to every broker, in milliseconds (Java
/// `heartbeatBrokerInterval`, 30000).
#[no_mangle]
pub extern "C" fn rmq_client_options_heartbeat_interval_ms(
    o: *mut rmq_client_options,
    ms: u64,
) -> rmq_result {
    update(o, |o| Ok(o.heartbeat_interval(Duration::from_millis(ms))))
}

/// The largest frame accepted from a peer, in bytes (16 MiB).
#[no_mangle]
pub extern "C" fn rmq_client_options_max_frame_size(
    o: *mut rmq_client_options,
    bytes: usize,
) -> rmq_result {
    update(o, |o| Ok(o.max_frame_size(bytes)))
}

/// Async requests in flight per client instance (65535): an async send waits for a
/// permit up to its timeout.
#[no_mangle]
pub extern "C" fn rmq_client_options_async_permits(
    o: *mut rmq_client_options,
    permits: usize,
) -> rmq_result {
    update(o, |o| Ok(o.async_permits(permits)))
}

/// Threads that run async callbacks (Java `clientCallbackExecutorThreads`, CPU count).
#[no_mangle]
pub extern "C" fn rmq_client_options_callback_threads(
    o: *mut rmq_client_options,
    threads: usize,
) -> rmq_result {
    update(o, |o| Ok(o.callback_threads(threads)))
}

/// How long stopping the shared client instance may take, in milliseconds (10000).
#[no_mangle]
pub extern "C" fn rmq_client_options_shutdown_timeout_ms(
    o: *mut rmq_client_options,
    ms: u64,
) -> rmq_result {
    update(o, |o| Ok(o.shutdown_timeout(Duration::from_millis(ms))))
}

/// How request headers are encoded on the wire (`rmq_client_options_serialize_type`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_serialize_type {
    /// JSON, Java's default, understood by every broker.
    RMQ_SERIALIZE_JSON = 0,
    /// The compact `ROCKETMQ` binary encoding the Java benchmark tools use: less work
    /// per request on both sides.
    RMQ_SERIALIZE_ROCKETMQ = 1,
}

/// The encoding of request headers, an `rmq_serialize_type` (Java
/// `rocketmq.serialize.type`; default `RMQ_SERIALIZE_JSON`). Another value is
/// `RMQ_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn rmq_client_options_serialize_type(
    o: *mut rmq_client_options,
    serialize_type: i32,
) -> rmq_result {
    update(o, |o| {
        let ty = match serialize_type {
            0 => SerializeType::Json,
            1 => SerializeType::RocketMq,
            other => {
                return Err(fail(
                    rmq_result::RMQ_INVALID_ARGUMENT,
                    format!("serialize type {other}"),
                ))
            }
        };
        Ok(o.serialize_type(ty))
    })
}

/// Builders that take client options.
pub(crate) trait WithClientOptions: Sized {
    fn with_client_options(self, options: ClientOptions) -> Self;
}

macro_rules! with_client_options {
    ($($t:ty),*) => {$(
        impl WithClientOptions for $t {
            fn with_client_options(self, options: ClientOptions) -> Self {
                self.client_options(options)
            }
        }
    )*};
}
with_client_options!(
    ProducerBuilder,
    TransactionProducerBuilder,
    PushConsumerBuilder,
    LitePullConsumerBuilder,
    SimpleConsumerBuilder,
    AdminBuilder
);

/// Copies `options` into the builder behind `b`.
pub(crate) fn set_client_options<H: HasSlot<B: WithClientOptions>>(
    b: *mut H,
    options: *const rmq_client_options,
) -> rmq_result {
    guard(|| {
        let o = handle(options, "client options")?.inner.clone();
        handle_mut(b, "builder")?
            .slot()
            .update(|b| b.with_client_options(o))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    #[test]
    fn the_serialize_type_is_one_of_the_two_encodings_and_a_bad_one_changes_nothing() {
        let mut o: *mut rmq_client_options = null_mut();
        assert_eq!(rmq_client_options_new(&mut o), rmq_result::RMQ_OK);
        let shown = |o: *mut rmq_client_options| {
            // SAFETY: `o` came from rmq_client_options_new and is freed only below.
            format!("{:?}", unsafe { &(*o).inner })
        };
        assert!(shown(o).contains("serialize_type: Json"), "{}", shown(o));
        assert_eq!(
            rmq_client_options_serialize_type(o, rmq_serialize_type::RMQ_SERIALIZE_ROCKETMQ as i32),
            rmq_result::RMQ_OK
        );
        assert!(
            shown(o).contains("serialize_type: RocketMq"),
            "{}",
            shown(o)
        );
        assert_eq!(
            rmq_client_options_serialize_type(o, 7),
            rmq_result::RMQ_INVALID_ARGUMENT
        );
        assert!(
            shown(o).contains("serialize_type: RocketMq"),
            "{}",
            shown(o)
        );
        assert_eq!(
            rmq_client_options_serialize_type(null_mut(), 0),
            rmq_result::RMQ_NULL_PARAMETER
        );
        rmq_client_options_free(o);
    }
}
