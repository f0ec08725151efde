//! Async callbacks of the remoting client and the error that hands an unqueued
//! request's callback back to its caller.

use std::fmt;

use crate::error::{Error, Result};
use crate::protocol::RemotingCommand;

/// Closures `FnOnce(Result<RemotingCommand>) + Send + 'static` are callbacks (pass them to
/// [`RemotingClient::invoke_async`](super::RemotingClient::invoke_async)). A struct can be one too (pass it to
/// [`RemotingClient::invoke_async_with`](super::RemotingClient::invoke_async_with)): when a request cannot be queued, the callback
/// comes back in an [`InvokeAsyncError`], and the caller's state in the struct's fields is
/// within reach again, where a closure could only be called or dropped.
pub trait InvokeCallback: Send + 'static {
    /// Called once, on the callback pool, with the response or the error that ended the
    /// request.
    fn operation_complete(self, result: Result<RemotingCommand>);
}

impl<F> InvokeCallback for F
where
    F: FnOnce(Result<RemotingCommand>) + Send + 'static,
{
    fn operation_complete(self, result: Result<RemotingCommand>) {
        self(result)
    }
}

/// An async request that was not queued, and its callback, which has not run and never
/// will (as crossbeam's `SendError<T>` gives back the value that could not be sent).
///
/// Returned by [`RemotingClient::invoke_async`](super::RemotingClient::invoke_async) when it fails before the request is
/// queued: the client is shut down, the address does not resolve, the in-flight limit
/// stayed full, or the request does not fit in a frame.
pub struct InvokeAsyncError<C> {
    error: Error,
    callback: C,
}

impl<C> InvokeAsyncError<C> {
    pub(crate) fn new(error: Error, callback: C) -> Self {
        InvokeAsyncError { error, callback }
    }

    /// Why the request was not queued.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The callback, unrun.
    pub fn into_callback(self) -> C {
        self.callback
    }

    /// The error and the unrun callback.
    pub fn into_parts(self) -> (Error, C) {
        (self.error, self.callback)
    }
}

impl<C> fmt::Debug for InvokeAsyncError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InvokeAsyncError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<C> fmt::Display for InvokeAsyncError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "async request not queued: {}", self.error)
    }
}

impl<C> std::error::Error for InvokeAsyncError<C> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Drops the callback and keeps the error, for `?` in functions returning [`Result`].
impl<C> From<InvokeAsyncError<C>> for Error {
    fn from(e: InvokeAsyncError<C>) -> Error {
        e.error
    }
}
