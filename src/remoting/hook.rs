//! The public request hook (Java `RPCHook`): [`RequestHook`], and the adapter that runs one
//! as an internal [`RpcHook`] with its panics caught and counted.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use log::warn;

use super::RpcHook;
use crate::protocol::{RemotingCommand, RequestCode};

/// Called around every request a client sends (Java `RPCHook`): before the request is
/// encoded, on the thread that sends it (the caller's, a timer's or a callback's; never
/// the I/O thread), and after the response of a synchronous request, on the caller's
/// thread. Register one with `register_request_hook` on a running client; it applies to
/// every client of the same client instance (client id), as Java's does.
///
/// A panic in a hook is caught, logged and counted
/// ([`ClientStats::request_hook_panics`](crate::ClientStats::request_hook_panics)); the
/// request goes on. While a hook is registered, sends are encoded through the command
/// path rather than the direct frame encoder, which costs a little per send.
pub trait RequestHook: Send + Sync {
    /// Runs before the request is encoded; may add header fields.
    fn before_request(&self, request: &mut RequestContext<'_>);
    /// Runs after the response of a synchronous request arrived.
    fn after_response(&self, _response: &ResponseContext<'_>) {}
}

/// A request about to be sent, as a [`RequestHook`] sees it.
pub struct RequestContext<'a> {
    addr: &'a str,
    cmd: &'a mut RemotingCommand,
}

impl std::fmt::Debug for RequestContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestContext")
            .field("addr", &self.addr)
            .field("code", &self.cmd.code)
            .finish_non_exhaustive()
    }
}

impl RequestContext<'_> {
    /// The peer's address (`host:port`).
    pub fn addr(&self) -> &str {
        self.addr
    }

    /// The request code (Java `RequestCode`, e.g. 310 for `SEND_MESSAGE_V2`).
    pub fn code(&self) -> i32 {
        self.cmd.code
    }

    /// A header field (Java `extFields`).
    pub fn field(&self, key: &str) -> Option<&str> {
        self.cmd.ext_fields.get(key)
    }

    /// Adds or replaces a header field.
    pub fn set_field(&mut self, key: &str, value: &str) {
        self.cmd.ext_fields.insert(key, value);
    }

    /// The body's length in bytes.
    pub fn body_len(&self) -> usize {
        self.cmd.body.len()
    }
}

/// The response of a synchronous request, as a [`RequestHook`] sees it.
pub struct ResponseContext<'a> {
    addr: &'a str,
    request_code: RequestCode,
    cmd: &'a RemotingCommand,
}

impl std::fmt::Debug for ResponseContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseContext")
            .field("addr", &self.addr)
            .field("request_code", &self.request_code.0)
            .field("code", &self.cmd.code)
            .finish_non_exhaustive()
    }
}

impl ResponseContext<'_> {
    /// The peer's address (`host:port`).
    pub fn addr(&self) -> &str {
        self.addr
    }

    /// The code of the request this answers.
    pub fn request_code(&self) -> i32 {
        self.request_code.0
    }

    /// The response code (Java `ResponseCode`; 0 is success).
    pub fn code(&self) -> i32 {
        self.cmd.code
    }

    /// The broker's remark (the reason of a failure).
    pub fn remark(&self) -> Option<&str> {
        self.cmd.remark.as_deref()
    }

    /// A header field.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.cmd.ext_fields.get(key)
    }
}

/// Runs a user's [`RequestHook`] as an [`RpcHook`], catching and counting its panics.
pub(crate) struct UserRequestHook {
    pub(crate) hook: Arc<dyn RequestHook>,
    pub(crate) panics: Arc<AtomicU64>,
}

impl UserRequestHook {
    fn guard(&self, what: &str, f: impl FnOnce()) {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            self.panics.fetch_add(1, Ordering::Relaxed);
            warn!("a request hook panicked in {what}; the request goes on");
        }
    }
}

impl RpcHook for UserRequestHook {
    fn before_request(&self, addr: &str, request: &mut RemotingCommand) {
        self.guard("before_request", || {
            self.hook
                .before_request(&mut RequestContext { addr, cmd: request })
        });
    }

    fn after_response(&self, addr: &str, code: RequestCode, response: &mut RemotingCommand) {
        self.guard("after_response", || {
            self.hook.after_response(&ResponseContext {
                addr,
                request_code: code,
                cmd: response,
            })
        });
    }
}
