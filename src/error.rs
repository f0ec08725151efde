//! The crate's one error type.
//!
//! Every fallible call returns [`Error`]. It is small (one pointer) and carries the
//! context a caller needs to act: what kind of failure it was ([`ErrorKind`]), the
//! peer address when there was one, the broker's response code and remark, and which
//! phase of a call timed out.

use std::fmt;
use std::time::Duration;

use crate::protocol::{DecodeError, ResponseCode};

/// What went wrong, coarsely. Use [`Error::kind`] to branch on it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A deadline passed; [`Error::timeout_phase`] says which part of the call.
    Timeout,
    /// A TCP connection could not be established.
    Connect,
    /// The connection closed (or failed) while the request was pending.
    ConnectionClosed,
    /// The peer answered with a response code other than the one expected.
    Response,
    /// Bytes from the network could not be decoded (malformed or oversized frame, bad JSON).
    Decode,
    /// Input from the caller was rejected before anything was sent.
    InvalidArgument,
    /// The object is not in a state that allows the call (not started, shut down, ...).
    State,
    /// Too many requests are in flight; the permit could not be acquired in time.
    Overloaded,
    /// No route to the topic is known (the name server does not know it, or no broker is writable).
    NoRoute,
    /// A local I/O error (files, sockets) that fits none of the kinds above.
    Io,
    /// The client is not configured for the call (no name-server address, for one);
    /// retrying does not help until the configuration changes.
    Config,
    /// The TLS layer failed: the handshake was refused (an untrusted or wrong
    /// certificate, no client certificate where the server requires one), or the peer
    /// sent something that is not TLS. [`Error::addr`] names the peer.
    Tls,
    /// The broker does not offer the request: it answered REQUEST_CODE_NOT_SUPPORTED, as
    /// a 4.x broker answers POP consumption. [`Error::response_code`] keeps its code.
    Unsupported,
}

impl ErrorKind {
    /// Every kind, in declaration order (the stats count failures by kind).
    pub(crate) const ALL: [ErrorKind; 13] = [
        ErrorKind::Timeout,
        ErrorKind::Connect,
        ErrorKind::ConnectionClosed,
        ErrorKind::Response,
        ErrorKind::Decode,
        ErrorKind::InvalidArgument,
        ErrorKind::State,
        ErrorKind::Overloaded,
        ErrorKind::NoRoute,
        ErrorKind::Io,
        ErrorKind::Config,
        ErrorKind::Tls,
        ErrorKind::Unsupported,
    ];

    /// This kind's place in [`ALL`](Self::ALL); the match is exhaustive, so a new kind
    /// cannot be left out.
    pub(crate) fn index(self) -> usize {
        match self {
            ErrorKind::Timeout => 0,
            ErrorKind::Connect => 1,
            ErrorKind::ConnectionClosed => 2,
            ErrorKind::Response => 3,
            ErrorKind::Decode => 4,
            ErrorKind::InvalidArgument => 5,
            ErrorKind::State => 6,
            ErrorKind::Overloaded => 7,
            ErrorKind::NoRoute => 8,
            ErrorKind::Io => 9,
            ErrorKind::Config => 10,
            ErrorKind::Tls => 11,
            ErrorKind::Unsupported => 12,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connect => "connect error",
            ErrorKind::ConnectionClosed => "connection closed",
            ErrorKind::Response => "error response",
            ErrorKind::Decode => "decode error",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::State => "invalid state",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::NoRoute => "no route",
            ErrorKind::Io => "I/O error",
            ErrorKind::Config => "configuration error",
            ErrorKind::Tls => "TLS error",
            ErrorKind::Unsupported => "not supported by this broker",
        })
    }
}

/// Which part of a call ran out of time.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutPhase {
    /// Establishing the TCP connection.
    Connect,
    /// Waiting for a permit of the async/oneway in-flight limit.
    Permit,
    /// Waiting for a lock that serialises connection set-up.
    Lock,
    /// Waiting for the response after the request was handed to the I/O thread.
    Response,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connecting",
            TimeoutPhase::Permit => "waiting for an in-flight permit",
            TimeoutPhase::Lock => "waiting for the connection lock",
            TimeoutPhase::Response => "waiting for the response",
        })
    }
}

/// The error type of every fallible call in this crate.
///
/// `Display` shows the message and the peer; the underlying cause (an I/O error, for one)
/// is [`source`](std::error::Error::source), as error reporters expect, and is not
/// repeated in the message. The alternate form (`{:#}`) prints the whole chain on one
/// line, for logs: `could not connect (peer 10.0.0.1:9876): Connection refused (os error 111)`.
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    message: String,
    addr: Option<String>,
    phase: Option<TimeoutPhase>,
    code: Option<ResponseCode>,
    remark: Option<String>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// Shorthand for `Result<T, rocketmq_blocking::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                addr: None,
                phase: None,
                code: None,
                remark: None,
                source: None,
            }),
        }
    }

    pub(crate) fn timeout(phase: TimeoutPhase, after: Duration) -> Self {
        let mut e = Error::new(
            ErrorKind::Timeout,
            format!("timed out after {} ms {phase}", after.as_millis()),
        );
        e.inner.phase = Some(phase);
        e
    }

    pub(crate) fn connect(addr: &str, source: std::io::Error) -> Self {
        Error::new(ErrorKind::Connect, "could not connect")
            .with_addr(addr)
            .with_source(source)
    }

    pub(crate) fn closed(addr: &str, why: impl Into<String>) -> Self {
        Error::new(ErrorKind::ConnectionClosed, why).with_addr(addr)
    }

    pub(crate) fn tls(addr: &str, why: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Tls, format!("TLS: {why}")).with_addr(addr)
    }

    /// An error for a response whose code was not the expected one.
    pub fn response(code: ResponseCode, remark: Option<&str>) -> Self {
        let mut e = Error::new(
            ErrorKind::Response,
            format!(
                "response code {code:?}: {}",
                remark.unwrap_or("(no remark)")
            ),
        );
        e.inner.code = Some(code);
        e.inner.remark = remark.map(str::to_string);
        e
    }

    /// A broker's REQUEST_CODE_NOT_SUPPORTED for `what` (a 5.x request sent to a 4.x
    /// broker): [`ErrorKind::Unsupported`], with the code and remark kept.
    pub(crate) fn unsupported(what: &str, remark: Option<&str>) -> Self {
        let mut e = Error::new(
            ErrorKind::Unsupported,
            format!(
                "{what} is not supported by this broker (it needs RocketMQ 5.x): {}",
                remark.unwrap_or("(no remark)")
            ),
        );
        e.inner.code = Some(ResponseCode::REQUEST_CODE_NOT_SUPPORTED);
        e.inner.remark = remark.map(str::to_string);
        e
    }

    pub(crate) fn decode(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Decode, message)
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn state(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::State, message)
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::new(ErrorKind::Io, what).with_source(source)
    }

    /// A copy for each of several callers that one failure concerns (the messages of one
    /// auto-batch). The cause, which cannot be cloned, comes along as its text.
    pub(crate) fn copy_for_another(&self) -> Self {
        let i = &self.inner;
        Error {
            inner: Box::new(Inner {
                kind: i.kind,
                message: i.message.clone(),
                addr: i.addr.clone(),
                phase: i.phase,
                code: i.code,
                remark: i.remark.clone(),
                source: i.source.as_ref().map(|s| {
                    Box::new(CopiedCause(s.to_string())) as Box<dyn std::error::Error + Send + Sync>
                }),
            }),
        }
    }

    /// Attach the peer address this error concerns.
    pub(crate) fn with_addr(mut self, addr: &str) -> Self {
        self.inner.addr = Some(addr.to_string());
        self
    }

    /// Prefix the message with what the caller was doing (e.g. "send to topic T").
    pub(crate) fn context(mut self, what: impl fmt::Display) -> Self {
        self.inner.message = format!("{what}: {}", self.inner.message);
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.inner.source = Some(Box::new(source));
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The peer address, when the error concerns one connection.
    pub fn addr(&self) -> Option<&str> {
        self.inner.addr.as_deref()
    }

    /// True for every timeout, whatever the phase.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == ErrorKind::Timeout
    }

    /// Which phase timed out, for timeouts.
    pub fn timeout_phase(&self) -> Option<TimeoutPhase> {
        self.inner.phase
    }

    /// The broker's or name server's response code, for [`ErrorKind::Response`].
    pub fn response_code(&self) -> Option<ResponseCode> {
        self.inner.code
    }

    /// The broker's or name server's remark (its explanation of the response code), for
    /// [`ErrorKind::Response`] when the peer sent one.
    pub fn remark(&self) -> Option<&str> {
        self.inner.remark.as_deref()
    }

    /// The message without the source chain.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Whether retrying the same call (possibly on another broker) may succeed:
    /// transport failures, timeouts, and the response codes the Java producer retries
    /// (5.x's list, which adds SYSTEM_BUSY and GO_AWAY to 4.9's: a busy or departing broker
    /// is worth another attempt, usually on another broker).
    pub fn is_retriable(&self) -> bool {
        match self.inner.kind {
            // A TLS failure is a transport failure too: another broker may be configured
            // right, as with a refused connection.
            ErrorKind::Timeout
            | ErrorKind::Connect
            | ErrorKind::ConnectionClosed
            | ErrorKind::Tls => true,
            ErrorKind::Response => self.inner.code.is_some_and(|c| {
                matches!(
                    c,
                    ResponseCode::TOPIC_NOT_EXIST
                        | ResponseCode::SERVICE_NOT_AVAILABLE
                        | ResponseCode::SYSTEM_ERROR
                        | ResponseCode::SYSTEM_BUSY
                        | ResponseCode::GO_AWAY
                        | ResponseCode::NO_PERMISSION
                        | ResponseCode::NO_BUYER_ID
                        | ResponseCode::NOT_IN_CURRENT_UNIT
                )
            }),
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.message)?;
        if let Some(addr) = &self.inner.addr {
            write!(f, " (peer {addr})")?;
        }
        if f.alternate() {
            let mut next = std::error::Error::source(self);
            while let Some(cause) = next {
                write!(f, ": {cause}")?;
                next = cause.source();
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.inner.kind)
            .field("message", &self.inner.message);
        if let Some(a) = &self.inner.addr {
            d.field("addr", a);
        }
        if let Some(p) = &self.inner.phase {
            d.field("phase", p);
        }
        if let Some(c) = &self.inner.code {
            d.field("code", c);
        }
        if let Some(s) = &self.inner.source {
            d.field("source", s);
        }
        d.finish()
    }
}

/// The text of a cause, where an error was copied ([`Error::copy_for_another`]).
#[derive(Debug)]
struct CopiedCause(String);

impl fmt::Display for CopiedCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CopiedCause {}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::decode(e.into_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_one_pointer_wide() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        assert_eq!(
            std::mem::size_of::<Result<()>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn a_response_error_keeps_the_code_and_the_remark_apart() {
        let e = Error::response(ResponseCode::TOPIC_NOT_EXIST, Some("topic[T] not exist"));
        assert_eq!(e.response_code(), Some(ResponseCode::TOPIC_NOT_EXIST));
        assert_eq!(e.remark(), Some("topic[T] not exist"));
        assert!(e.to_string().contains("topic[T] not exist"), "{e}");
        assert_eq!(
            Error::response(ResponseCode::SYSTEM_ERROR, None).remark(),
            None
        );
    }

    #[test]
    fn a_configuration_error_is_not_retriable() {
        let e = Error::new(ErrorKind::Config, "no name server address is configured");
        assert!(!e.is_retriable());
        assert!(Error::new(ErrorKind::Connect, "refused").is_retriable());
    }

    #[test]
    fn display_names_the_peer_and_the_phase() {
        let e = Error::timeout(TimeoutPhase::Response, Duration::from_millis(3000))
            .with_addr("127.0.0.1:9876")
            .context("GET_ROUTEINFO_BY_TOPIC");
        let s = e.to_string();
        assert!(s.contains("3000 ms"), "{s}");
        assert!(s.contains("waiting for the response"), "{s}");
        assert!(s.contains("127.0.0.1:9876"), "{s}");
        assert!(e.is_timeout());
        assert_eq!(e.timeout_phase(), Some(TimeoutPhase::Response));
    }

    /// The message of `e` and of every source under it, as a chained reporter prints them.
    fn chain(e: &Error) -> String {
        let mut out = e.to_string();
        let mut next = std::error::Error::source(e);
        while let Some(s) = next {
            out.push_str("\ncaused by: ");
            out.push_str(&s.to_string());
            next = s.source();
        }
        out
    }

    #[test]
    fn a_chained_reporter_shows_the_cause_once() {
        let cause = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused by peer");
        let e = Error::connect("127.0.0.1:1", cause);
        let shown = chain(&e);
        assert_eq!(shown.matches("refused by peer").count(), 1, "{shown}");
        assert_eq!(
            std::error::Error::source(&e).map(ToString::to_string),
            Some("refused by peer".to_string())
        );
        // The alternate form is the whole chain on one line, for logs.
        assert_eq!(
            format!("{e:#}"),
            "could not connect (peer 127.0.0.1:1): refused by peer"
        );
    }

    #[test]
    fn every_kind_is_at_its_index_in_all() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i, "{k:?}");
        }
    }

    #[test]
    fn every_error_kind_displays_as_distinct_words() {
        let kinds = ErrorKind::ALL;
        let shown: std::collections::HashSet<String> =
            kinds.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), kinds.len(), "{shown:?}");
        assert_eq!(ErrorKind::Config.to_string(), "configuration error");
        assert_eq!(ErrorKind::NoRoute.to_string(), "no route");
    }

    #[test]
    fn retriable_follows_the_java_producer_codes() {
        assert!(Error::response(ResponseCode::SYSTEM_ERROR, None).is_retriable());
        assert!(Error::response(ResponseCode::SYSTEM_BUSY, None).is_retriable());
        assert!(Error::response(ResponseCode::GO_AWAY, None).is_retriable());
        assert!(!Error::response(ResponseCode::MESSAGE_ILLEGAL, None).is_retriable());
        assert!(!Error::invalid_argument("bad topic").is_retriable());
        assert!(Error::closed("a:1", "reset").is_retriable());
    }
}
