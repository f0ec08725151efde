//! What a producer shows of its sends: the public send hook ([`SendHook`], Java
//! `SendMessageHook`) and the engine's wrappers that count every send in the producer's
//! [`SendCounters`](crate::stats) and run the hooks around it.
//!
//! Hooks run on the caller's thread, and an async send's `after_send` on the callback
//! pool, never on the I/O thread. A hook's panic is caught and counted.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use log::warn;
use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::message::Message;
use crate::stats::SendCounters;

use super::SendResult;

/// How a send waits for the broker (Java `CommunicationMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[doc(alias = "CommunicationMode")]
#[non_exhaustive]
pub enum SendMode {
    /// The caller waits for the broker's answer.
    Sync,
    /// The answer comes to a callback.
    Async,
    /// No answer is expected.
    Oneway,
}

/// Called around every send of a producer (Java `SendMessageHook`); register one with
/// [`Producer::register_send_hook`](crate::Producer::register_send_hook).
///
/// `before_send` runs on the caller's thread before the message is encoded and may change
/// it (add properties, such as a W3C `traceparent`); `after_send` runs once the outcome is
/// known: on the caller's thread for sync and oneway sends, on the callback pool for async
/// ones. A batch runs the hooks once per message. A panic in a hook is caught, logged and
/// counted ([`ProducerStats::hook_panics`](crate::ProducerStats::hook_panics)); the send
/// goes on.
pub trait SendHook: Send + Sync {
    /// Runs before the message is sent.
    fn before_send(&self, _ctx: &mut SendContext<'_>) {}
    /// Runs with the outcome: the broker's answer (`None` for a oneway send, which has
    /// none) or the error.
    fn after_send(
        &self,
        _ctx: &SendContext<'_>,
        _result: std::result::Result<Option<&SendResult>, &Error>,
    ) {
    }
}

/// A message being sent, as a [`SendHook`] sees it.
#[derive(Debug)]
pub struct SendContext<'a> {
    group: &'a str,
    mode: SendMode,
    message: &'a mut Message,
}

impl SendContext<'_> {
    /// The producer group (with namespace).
    pub fn group(&self) -> &str {
        self.group
    }

    /// How the send waits for the broker.
    pub fn mode(&self) -> SendMode {
        self.mode
    }

    /// The message (topic without namespace).
    pub fn message(&self) -> &Message {
        self.message
    }

    /// The message, to change before it is sent (changes in `after_send` have no effect).
    pub fn message_mut(&mut self) -> &mut Message {
        self.message
    }
}

/// What a send returns, as `after_send` sees it.
pub(super) trait Answer {
    fn answer(&self) -> Option<&SendResult>;
}

impl Answer for SendResult {
    fn answer(&self) -> Option<&SendResult> {
        Some(self)
    }
}

impl Answer for () {
    fn answer(&self) -> Option<&SendResult> {
        None
    }
}

/// A producer's counters and hooks.
#[derive(Default)]
pub(super) struct Observer {
    pub(super) counters: Arc<SendCounters>,
    /// Read on every send without a lock: the hooks' list is only looked at when set.
    any_hook: AtomicBool,
    /// Replaced whole on registration; a send clones the `Arc` and calls the hooks with no
    /// lock held.
    hooks: RwLock<Arc<Vec<Arc<dyn SendHook>>>>,
}

/// The hooks of one send, with what `after_send` needs.
pub(super) struct Hooks {
    hooks: Arc<Vec<Arc<dyn SendHook>>>,
    counters: Arc<SendCounters>,
}

impl Hooks {
    pub(super) fn before(&self, group: &str, mode: SendMode, message: &mut Message) {
        for hook in self.hooks.iter() {
            let mut ctx = SendContext {
                group,
                mode,
                message,
            };
            self.guard("before_send", || hook.before_send(&mut ctx));
        }
    }

    pub(super) fn after(
        &self,
        group: &str,
        mode: SendMode,
        message: &mut Message,
        result: std::result::Result<Option<&SendResult>, &Error>,
    ) {
        for hook in self.hooks.iter() {
            let ctx = SendContext {
                group,
                mode,
                message,
            };
            self.guard("after_send", || hook.after_send(&ctx, result));
        }
    }

    fn guard(&self, what: &str, f: impl FnOnce()) {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            self.counters.hook_panics.fetch_add(1, Ordering::Relaxed);
            warn!("a send hook panicked in {what}; the send goes on");
        }
    }
}

impl Observer {
    pub(super) fn register(&self, hook: Arc<dyn SendHook>) {
        let mut hooks = self.hooks.write();
        let mut list = Vec::clone(&hooks);
        list.push(hook);
        *hooks = Arc::new(list);
        self.any_hook.store(true, Ordering::Release);
    }

    /// The hooks to run, `None` when there are none (one relaxed load per send).
    pub(super) fn hooks(&self) -> Option<Hooks> {
        if !self.any_hook.load(Ordering::Acquire) {
            return None;
        }
        Some(Hooks {
            hooks: self.hooks.read().clone(),
            counters: self.counters.clone(),
        })
    }

    /// Runs the sync or oneway send of `msg` by `send`, counted, with the hooks around it.
    /// `send` gets the instant the send began, which it may use instead of reading the
    /// clock again.
    pub(super) fn one<T: Answer>(
        &self,
        group: &str,
        mode: SendMode,
        msg: &Message,
        send: impl FnOnce(&Message, Instant) -> Result<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let Some(hooks) = self.hooks() else {
            let r = send(msg, started);
            let bytes = msg.body().len() as u64;
            self.counters
                .record(msg.topic(), 1, bytes, &r, started.elapsed());
            return r;
        };
        let mut msg = msg.clone();
        hooks.before(group, mode, &mut msg);
        let r = send(&msg, started);
        let bytes = msg.body().len() as u64;
        self.counters
            .record(msg.topic(), 1, bytes, &r, started.elapsed());
        hooks.after(group, mode, &mut msg, r.as_ref().map(Answer::answer));
        r
    }

    /// Runs the sync send of the batch `msgs` by `send`, counted, with the hooks around
    /// each message; `send` gets the instant the send began, as with [`one`](Self::one).
    pub(super) fn batch(
        &self,
        group: &str,
        msgs: &[Message],
        send: impl FnOnce(&[Message], Instant) -> Result<SendResult>,
    ) -> Result<SendResult> {
        let started = Instant::now();
        let topic = msgs.first().map_or("", |m| m.topic());
        let count = msgs.len() as u64;
        let bytes: u64 = msgs.iter().map(|m| m.body().len() as u64).sum();
        let Some(hooks) = self.hooks() else {
            let r = send(msgs, started);
            self.counters
                .record(topic, count, bytes, &r, started.elapsed());
            return r;
        };
        let mut msgs = msgs.to_vec();
        for m in &mut msgs {
            hooks.before(group, SendMode::Sync, m);
        }
        let r = send(&msgs, started);
        let bytes: u64 = msgs.iter().map(|m| m.body().len() as u64).sum();
        self.counters
            .record(topic, count, bytes, &r, started.elapsed());
        for m in &mut msgs {
            hooks.after(group, SendMode::Sync, m, r.as_ref().map(Some));
        }
        r
    }
}
