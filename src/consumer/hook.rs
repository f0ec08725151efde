//! The public consume hook ([`ConsumeHook`], Java `ConsumeMessageHook`) and how a push
//! consumer runs its hooks: on the consume thread, around the listener, each call under
//! `catch_unwind` with panics counted in the consumer's stats.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log::warn;
use parking_lot::RwLock;

use crate::message::{MessageExt, MessageQueue};
use crate::stats::ConsumeCounters;

/// Called around every listener call of a push consumer (Java `ConsumeMessageHook`);
/// register one with
/// [`PushConsumer::register_consume_hook`](crate::PushConsumer::register_consume_hook).
///
/// Both methods run on the consume thread that runs the listener: `before_consume` just
/// before it, `after_consume` just after, with the outcome. A panic in a hook is caught,
/// logged and counted ([`ConsumerStats::hook_panics`](crate::ConsumerStats::hook_panics));
/// consumption goes on.
pub trait ConsumeHook: Send + Sync {
    /// Runs before the listener sees `ctx.messages()`.
    fn before_consume(&self, _ctx: &ConsumeContext<'_>) {}
    /// Runs after the listener returned (or panicked); `ctx.status()` is set.
    fn after_consume(&self, _ctx: &ConsumeContext<'_>) {}
}

/// What the listener returned, as a [`ConsumeHook`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConsumeHookStatus {
    /// Acknowledged (concurrently: `CONSUME_SUCCESS`, orderly: `SUCCESS`).
    Success,
    /// Concurrently: to be consumed again later (`RECONSUME_LATER`).
    ReconsumeLater,
    /// Orderly: the queue pauses and the batch comes again
    /// (`SUSPEND_CURRENT_QUEUE_A_MOMENT`).
    SuspendCurrentQueue,
    /// The listener panicked (the batch is retried as if it failed).
    Panicked,
}

impl ConsumeHookStatus {
    /// Whether the messages were acknowledged.
    pub fn is_success(self) -> bool {
        self == ConsumeHookStatus::Success
    }
}

/// A listener call, as a [`ConsumeHook`] sees it.
#[derive(Debug)]
pub struct ConsumeContext<'a> {
    group: &'a str,
    queue: &'a MessageQueue,
    messages: &'a [MessageExt],
    status: Option<ConsumeHookStatus>,
}

impl ConsumeContext<'_> {
    /// The consumer group (with namespace).
    pub fn group(&self) -> &str {
        self.group
    }

    /// The queue the messages come from.
    pub fn queue(&self) -> &MessageQueue {
        self.queue
    }

    /// The messages of this call (topic without namespace, properties as sent).
    pub fn messages(&self) -> &[MessageExt] {
        self.messages
    }

    /// The listener's outcome; `None` in `before_consume`.
    pub fn status(&self) -> Option<ConsumeHookStatus> {
        self.status
    }

    /// The largest reconsume count of the messages (0 on a first delivery).
    pub fn reconsume_times(&self) -> i32 {
        self.messages
            .iter()
            .map(|m| m.reconsume_times)
            .max()
            .unwrap_or(0)
    }
}

/// A consumer's counters and consume hooks.
#[derive(Default)]
pub(crate) struct ConsumeObserver {
    pub(crate) counters: ConsumeCounters,
    any_hook: AtomicBool,
    /// Replaced whole on registration; a call clones the `Arc` and runs the hooks with no
    /// lock held.
    hooks: RwLock<Arc<Vec<Arc<dyn ConsumeHook>>>>,
}

/// The hooks of one listener call.
pub(crate) struct ConsumeHooks<'a> {
    hooks: Arc<Vec<Arc<dyn ConsumeHook>>>,
    observer: &'a ConsumeObserver,
}

impl ConsumeObserver {
    pub(crate) fn register(&self, hook: Arc<dyn ConsumeHook>) {
        let mut hooks = self.hooks.write();
        let mut list = Vec::clone(&hooks);
        list.push(hook);
        *hooks = Arc::new(list);
        self.any_hook.store(true, Ordering::Release);
    }

    /// Runs the `before_consume` hooks; what `after` needs, `None` without hooks.
    pub(crate) fn before(
        &self,
        group: &str,
        queue: &MessageQueue,
        messages: &[MessageExt],
    ) -> Option<ConsumeHooks<'_>> {
        if !self.any_hook.load(Ordering::Acquire) {
            return None;
        }
        let hooks = ConsumeHooks {
            hooks: self.hooks.read().clone(),
            observer: self,
        };
        let ctx = ConsumeContext {
            group,
            queue,
            messages,
            status: None,
        };
        for hook in hooks.hooks.iter() {
            hooks.guard("before_consume", || hook.before_consume(&ctx));
        }
        Some(hooks)
    }
}

impl ConsumeHooks<'_> {
    pub(crate) fn after(
        &self,
        group: &str,
        queue: &MessageQueue,
        messages: &[MessageExt],
        status: ConsumeHookStatus,
    ) {
        let ctx = ConsumeContext {
            group,
            queue,
            messages,
            status: Some(status),
        };
        for hook in self.hooks.iter() {
            self.guard("after_consume", || hook.after_consume(&ctx));
        }
    }

    fn guard(&self, what: &str, f: impl FnOnce()) {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            self.observer
                .counters
                .hook_panics
                .fetch_add(1, Ordering::Relaxed);
            warn!("a consume hook panicked in {what}; consumption goes on");
        }
    }
}
