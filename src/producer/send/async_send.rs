//! Async sends (Java `sendDefaultImpl` in async mode and `MQClientAPIImpl.onExceptionImpl`):
//! one attempt queued on the caller's thread, its completion on the callback pool, and
//! the re-sends after a transport failure, which look routes up on the client timer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::producer::observe::Hooks;
use crate::stats::SendCounters;

use super::*;

impl ProducerImpl {
    /// Queues an async send. On `Ok`, `callback` runs exactly once; on `Err`, it has not
    /// run, never will, and `msg` comes back with the error. With `queue`, every attempt goes
    /// to that queue (Java `send(msg, mq, callback)` re-sends to the same broker).
    pub(in crate::producer) fn send_async(
        self: &Arc<Self>,
        msg: Message,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        callback: SendCallback,
    ) -> std::result::Result<(), SendAsyncError> {
        let mut msg = msg;
        let observed = self.observe_async(&mut msg);
        let (topic, begin) = (observed.topic.clone(), observed.started);
        let done = Done {
            observed: Some(observed),
            callback,
        };
        self.queue_async(&mut msg, &topic, queue, timeout, done, begin)
            .map_err(|error| self.not_queued(error, msg, &topic))
    }

    /// The start of an async send of `msg`: the hooks' `before_send`, the in-flight count,
    /// and what its completion counts.
    fn observe_async(&self, msg: &mut Message) -> Observed {
        let started = Instant::now();
        let hooks = self.observer.hooks();
        if let Some(hooks) = &hooks {
            hooks.before(&self.group, SendMode::Async, msg);
        }
        let counters = self.observer.counters.clone();
        counters.async_in_flight.fetch_add(1, Ordering::Relaxed);
        Observed {
            counters,
            // For the send, its stats and the error path: the thread's shared string when
            // it sent to this topic last, else one allocation.
            topic: crate::util::shared_name(msg.topic()),
            count: 1,
            bytes: msg.body().len() as u64,
            started,
            // The message as sent, for the hooks' `after_send` (a copy only when hooked).
            hooked: hooks.map(|h| (h, vec![msg.clone()], self.group.clone())),
        }
    }

    /// An async send of `msg` that was not queued (its observed callback was dropped
    /// unrun): counted as failed, seen by the hooks' `after_send`, and given back.
    fn not_queued(&self, error: Error, mut msg: Message, topic: &str) -> SendAsyncError {
        let counters = &self.observer.counters;
        counters.failed(topic, 1, &error);
        counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(hooks) = self.observer.hooks() {
            hooks.after(&self.group, SendMode::Async, &mut msg, Err(&error));
        }
        SendAsyncError::new(error, msg)
    }

    /// Prepares and queues `msg` (or hands it to its open batch). The body moves into the
    /// send, which keeps it for its re-sends, unless it is compressed; it comes back into
    /// `msg` when the send is not queued. `topic` is `msg.topic()`, shared; the send
    /// began at `begin`.
    fn queue_async(
        self: &Arc<Self>,
        msg: &mut Message,
        topic: &Arc<str>,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        done: Done,
        begin: Instant,
    ) -> Result<()> {
        if let Some(mq) = queue {
            check_queue_topic(msg.topic(), mq)?;
        }
        let done = match self.batcher.as_ref() {
            None => done,
            // The batcher keeps its callers' callbacks boxed.
            Some(_) => match self.send_async_auto_batched(msg, queue, timeout, done.boxed()) {
                Ok(queued) => return queued,
                Err(callback) => Done::plain(callback),
            },
        };
        let (p, moved) = self.prepare_async(msg, topic)?;
        self.queue_prepared(p, queue, timeout, done, begin)
            .map_err(|unqueued| {
                // Not queued: the body goes back to the message, which the caller gets
                // back unchanged (and the hooks' `after_send` sees).
                if moved {
                    msg.set_body(unqueued.p.body.into_owned());
                }
                unqueued.error
            })
    }

    /// `msg` prepared for an async send, which owns what it sends: the message's body,
    /// moved out (then `true`), or its compressed copy.
    fn prepare_async(
        &self,
        msg: &mut Message,
        topic: &Arc<str>,
    ) -> Result<(Prepared<'static>, bool)> {
        self.instance()?;
        let prepared = self.prepare_named(msg, topic.clone())?;
        if !prepared.borrows_body() {
            return Ok((prepared.into_owned()?, false));
        }
        // No copy: the send owns the body from here on.
        let mut p = prepared.with_body(Vec::new());
        p.body = Cow::Owned(msg.take_body());
        Ok((p, true))
    }

    /// Queues the async send of a prepared message (or batch), begun at `begin` with
    /// `timeout` for all its attempts. On `Ok`, `done` runs exactly once; on `Err`, it
    /// comes back unrun, with the send.
    pub(super) fn queue_prepared(
        self: &Arc<Self>,
        p: Prepared<'static>,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        done: Done,
        begin: Instant,
    ) -> std::result::Result<(), Box<Unqueued>> {
        match self.first_attempt(p, queue, timeout, begin) {
            // Not queued: `done` comes back unrun.
            Ok((attempt, mq, begun)) => attempt.send(mq, done, begun),
            Err(failed) => {
                let (error, p) = *failed;
                Err(Unqueued::new(error, p, done))
            }
        }
    }

    /// The first attempt of an async send, its queue and when it begins (see
    /// `publish_info_for`); the send back on an error.
    #[allow(clippy::type_complexity)]
    fn first_attempt(
        self: &Arc<Self>,
        p: Prepared<'static>,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        begin: Instant,
    ) -> std::result::Result<(AsyncAttempt, MessageQueue, Begun), Box<(Error, Prepared<'static>)>>
    {
        let instance = match self.instance() {
            Ok(i) => i,
            Err(error) => return Err(Box::new((error, p))),
        };
        let (info, begun) = match self.publish_info_for(&instance, &p, begin) {
            Ok(found) => found,
            Err(error) => return Err(Box::new((error, p))),
        };
        let pinned = queue.map(|mq| {
            let mut mq = mq.clone();
            mq.topic = p.topic.clone();
            mq
        });
        let mq = match &pinned {
            Some(mq) => mq.clone(),
            None => match self.fault.select(&info, None) {
                Some(mq) => mq,
                None => {
                    let error = Error::new(
                        ErrorKind::NoRoute,
                        format!("no writable queue of topic {}", p.user_topic),
                    );
                    return Err(Box::new((error, p)));
                }
            },
        };
        let attempt = AsyncAttempt {
            producer: self.clone(),
            instance,
            p,
            info,
            begin,
            timeout,
            retries_left: self.options.async_retries,
            pinned: pinned.is_some(),
        };
        Ok((attempt, mq, begun))
    }

    /// An async send of one batch (`SEND_BATCH_MESSAGE`): the contract of `send_async`,
    /// the batch checked and encoded on the caller's thread; an error here means nothing
    /// was queued and `callback` was dropped unrun. Counted and hooked as one send of
    /// `msgs.len()` messages, as the sync batch is.
    pub(in crate::producer) fn send_batch_async(
        self: &Arc<Self>,
        msgs: &[Message],
        queue: Option<&MessageQueue>,
        timeout: Duration,
        callback: SendCallback,
    ) -> Result<()> {
        let (p, observed, unqueued) = self.prepare_batch_async(msgs, queue)?;
        let (topic, count, begin) = (observed.topic.clone(), observed.count, observed.started);
        let done = Done {
            observed: Some(observed),
            callback,
        };
        let queued = self
            .queue_prepared(p, queue, timeout, done, begin)
            .map_err(|u| u.error);
        if let Err(e) = &queued {
            self.batch_not_queued(e, &topic, count, unqueued);
        }
        queued
    }

    /// The start of an async batch send: the hooks' `before_send`, the checked and encoded
    /// batch, what its completion counts, and (only when hooked) the batch for
    /// `after_send` if it is not queued.
    fn prepare_batch_async(
        &self,
        msgs: &[Message],
        queue: Option<&MessageQueue>,
    ) -> Result<(Prepared<'static>, Observed, Option<Vec<Message>>)> {
        let started = Instant::now();
        let hooks = self.observer.hooks();
        let mut msgs = Cow::Borrowed(msgs);
        if let Some(h) = &hooks {
            for m in msgs.to_mut().iter_mut() {
                h.before(&self.group, SendMode::Async, m);
            }
        }
        // The thread's shared string when it sent to this topic last.
        let topic = crate::util::shared_name(msgs.first().map_or("", |m| m.topic()));
        if let Some(mq) = queue {
            check_queue_topic(&topic, mq)?;
        }
        let p = self.prepare_batch(&msgs)?;
        let counters = self.observer.counters.clone();
        counters.async_in_flight.fetch_add(1, Ordering::Relaxed);
        let observed = Observed {
            counters,
            topic,
            count: msgs.len() as u64,
            bytes: msgs.iter().map(|m| m.body().len() as u64).sum(),
            started,
            // The batch as sent, for the hooks' `after_send` (a copy only when hooked).
            hooked: hooks.map(|h| (h, msgs.to_vec(), self.group.clone())),
        };
        let unqueued = observed.hooked.as_ref().map(|_| msgs.into_owned());
        Ok((p, observed, unqueued))
    }

    /// An async batch that was not queued: counted as failed, and seen by the hooks'
    /// `after_send` (`msgs`, kept only when hooked).
    fn batch_not_queued(&self, e: &Error, topic: &str, count: u64, msgs: Option<Vec<Message>>) {
        let counters = &self.observer.counters;
        counters.failed(topic, count, e);
        counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
        if let (Some(h), Some(mut msgs)) = (self.observer.hooks(), msgs) {
            for m in &mut msgs {
                h.after(&self.group, SendMode::Async, m, Err(e));
            }
        }
    }
}

/// One async send and what it needs to re-send after a transport failure (Java
/// `MQClientAPIImpl.onExceptionImpl`).
pub(super) struct AsyncAttempt {
    pub(super) producer: Arc<ProducerImpl>,
    pub(super) instance: Arc<MQClientInstance>,
    pub(super) p: Prepared<'static>,
    pub(super) info: Arc<TopicPublishInfo>,
    pub(super) begin: Instant,
    pub(super) timeout: Duration,
    pub(super) retries_left: u32,
    /// Sent to a queue the caller chose: retries go to the same queue.
    pub(super) pinned: bool,
}

impl AsyncAttempt {
    /// Queues the first attempt to `mq`, `begun` then, on the caller's thread (which may
    /// look the route up). On `Ok`, `done` runs exactly once; on `Err`, it comes back
    /// unrun.
    pub(super) fn send(
        self,
        mq: MessageQueue,
        done: Done,
        begun: Begun,
    ) -> std::result::Result<(), Box<Unqueued>> {
        let addr = match self
            .producer
            .broker_addr(&self.instance, &self.p.topic, &mq.broker_name)
        {
            Ok(a) => a,
            Err(error) => return Err(Unqueued::new(error, self.p, done)),
        };
        self.send_to(mq, addr, done, begun)
    }

    /// The request of an attempt to `mq` `begun` now, the client to send it with, and
    /// the budget left; the timeout error when none is.
    fn request(
        &self,
        mq: &MessageQueue,
        begun: Begun,
    ) -> Result<(Arc<RemotingClient>, Outgoing, Duration)> {
        let left = self.time_left(begun.at)?;
        let remoting = self.instance.remoting().clone();
        let request = self
            .producer
            .request(&remoting, &self.p, mq, false, begun.born_ms)?;
        Ok((remoting, request, left))
    }

    /// The budget left at `now`, or the timeout error when none is.
    fn time_left(&self, now: Instant) -> Result<Duration> {
        let left = self
            .timeout
            .saturating_sub(now.saturating_duration_since(self.begin));
        if left.is_zero() {
            return Err(Error::timeout(crate::TimeoutPhase::Response, self.timeout)
                .context("async send call"));
        }
        Ok(left)
    }

    /// Re-sends to `mq` after `cause`, from the callback pool, where nothing waits for the
    /// name server: a broker whose address is not cached has its route fetched on the
    /// client timer (`MQClientInstance::request_route`) and the re-send goes on from
    /// there. `done` runs exactly once.
    fn resend(self, mq: MessageQueue, done: Done, cause: Error) {
        let instance = self.instance.clone();
        if instance.publish_address(&mq.broker_name).is_some() {
            return self.resend_now(mq, done, cause);
        }
        let topic = self.p.topic.clone();
        instance.request_route(
            &topic,
            Some(Box::new(move || self.resend_now(mq, done, cause))),
        );
    }

    /// Re-sends to `mq` with the broker address cached now, if any.
    fn resend_now(self, mq: MessageQueue, done: Done, cause: Error) {
        let Some(addr) = self.instance.publish_address(&mq.broker_name) else {
            let e = Error::new(
                ErrorKind::NoRoute,
                format!("the broker {} does not exist", mq.broker_name),
            );
            return done.complete(Err(e.context(format!("after {cause}"))));
        };
        let addr = self.producer.vip(addr);
        // Queued, the re-send owns `done`; not queued, it comes back here.
        if let Err(unqueued) = self.send_to(mq, addr, done, Begun::now()) {
            let Unqueued { error, done, .. } = *unqueued;
            done.complete(Err(error.context(format!("after {cause}"))));
        }
    }

    /// Queues one attempt to `mq` at `addr`, `begun` now. On `Ok`, `done` runs exactly
    /// once; on `Err`, it comes back unrun.
    fn send_to(
        self,
        mq: MessageQueue,
        addr: Arc<str>,
        done: Done,
        begun: Begun,
    ) -> std::result::Result<(), Box<Unqueued>> {
        let (remoting, request, left) = match self.request(&mq, begun) {
            Ok(r) => r,
            Err(error) => return Err(Unqueued::new(error, self.p, done)),
        };
        let in_flight = InFlight {
            attempt: self,
            mq,
            addr,
            started: begun.at,
            done,
        };
        let target = in_flight.addr.clone();
        remoting
            .invoke_async_outgoing(target, request, begun.at, left, in_flight)
            .map_err(|e| {
                let (error, in_flight) = e.into_parts();
                Unqueued::new(error, in_flight.attempt.p, in_flight.done)
            })
    }
}

/// A send that was not queued: why, the send, and what would have run on its completion.
pub(super) struct Unqueued {
    pub(super) error: Error,
    pub(super) p: Prepared<'static>,
    pub(super) done: Done,
}

impl Unqueued {
    /// Boxed: the error path alone pays for carrying the send back.
    fn new(error: Error, p: Prepared<'static>, done: Done) -> Box<Unqueued> {
        Box::new(Unqueued { error, p, done })
    }
}

/// What runs when an async send completes: its stats and hooks (for a send the caller
/// made), then the callback. Carried inside the attempt, so the caller's callback is the
/// only box an async send adds. (Carried by value, in a generic attempt, it saved that
/// box but no time, and each callback type's copy of the path cost resident code pages.)
pub(super) struct Done {
    observed: Option<Observed>,
    callback: SendCallback,
}

/// The stats and hooks of one async send of `count` messages.
struct Observed {
    counters: Arc<SendCounters>,
    topic: Arc<str>,
    count: u64,
    bytes: u64,
    started: Instant,
    /// The hooks, the messages as sent and the group, for `after_send`.
    hooked: Option<(Hooks, Vec<Message>, String)>,
}

impl Observed {
    /// Counts the send's result `r`, come at `now`, and runs the hooks' `after_send`.
    fn finish(self, r: &Result<SendResult>, now: Instant) {
        let latency = now.saturating_duration_since(self.started);
        self.counters
            .record(&self.topic, self.count, self.bytes, r, latency);
        self.counters
            .async_in_flight
            .fetch_sub(1, Ordering::Relaxed);
        if let Some((hooks, mut msgs, group)) = self.hooked {
            for m in &mut msgs {
                hooks.after(&group, SendMode::Async, m, r.as_ref().map(Some));
            }
        }
    }
}

impl Done {
    /// A callback with nothing to count (the auto-batcher's, which counts its callers).
    pub(super) fn plain(callback: SendCallback) -> Done {
        Done {
            observed: None,
            callback,
        }
    }

    /// Counts the result, runs the hooks' `after_send`, then the callback. Counted before
    /// the callback runs: a caller that waits for its callbacks then sees them in the
    /// stats.
    pub(super) fn complete(self, r: Result<SendResult>) {
        self.complete_at(r, Instant::now());
    }

    /// [`complete`](Self::complete) with the clock read `now` by the caller.
    fn complete_at(self, r: Result<SendResult>, now: Instant) {
        if let Some(o) = self.observed {
            o.finish(&r, now);
        }
        (self.callback)(r)
    }

    /// The whole of it as one callback, for the auto-batcher, which keeps its callers'.
    fn boxed(self) -> SendCallback {
        match self.observed {
            None => self.callback,
            Some(_) => Box::new(move |r| self.complete(r)),
        }
    }
}

/// An attempt on the wire: the remoting callback of an async send, which owns what runs
/// on its completion and gives it back when the request cannot be queued.
struct InFlight {
    attempt: AsyncAttempt,
    mq: MessageQueue,
    addr: Arc<str>,
    started: Instant,
    done: Done,
}

impl InvokeCallback for InFlight {
    fn operation_complete(self, r: Result<RemotingCommand>) {
        let InFlight {
            attempt,
            mq,
            addr,
            started,
            done,
        } = self;
        // One clock read for the broker's latency and the send's.
        let now = Instant::now();
        match attempt.settle(mq, &addr, started, now, r) {
            Settled::Done(result) => done.complete_at(result, now),
            Settled::Resend(retry, next, e) => retry.resend(next, done, e),
        }
    }
}

/// What an attempt's answer settles: the send's result, or a re-send to another queue
/// after a transport failure.
enum Settled {
    Done(Result<SendResult>),
    Resend(AsyncAttempt, MessageQueue, Error),
}

impl AsyncAttempt {
    /// Reads the answer `r` of this attempt to `mq` at `addr`, begun at `started`, come at
    /// `now`: the result (with the broker's latency and the trace recorded), or the
    /// re-send that Java's `onExceptionImpl` makes.
    fn settle(
        self,
        mq: MessageQueue,
        addr: &str,
        started: Instant,
        now: Instant,
        r: Result<RemotingCommand>,
    ) -> Settled {
        let latency = now.saturating_duration_since(started);
        let producer = &self.producer;
        let result = r.and_then(|resp| ProducerImpl::process_response(&self.p, &mq, addr, resp));
        match result {
            Ok(res) => {
                producer.fault.update(&mq.broker_name, latency, false);
                producer.trace_send(&self.p, addr, &res, started);
                Settled::Done(Ok(res))
            }
            Err(e) if e.kind().is_transport() && self.retries_left > 0 => {
                producer.fault.update(&mq.broker_name, latency, true);
                let next = if self.pinned {
                    Some(mq.clone())
                } else {
                    producer.fault.select(&self.info, Some(&mq.broker_name))
                };
                let Some(next) = next else {
                    return Settled::Done(Err(e));
                };
                debug!("async send to {mq} failed ({e}); re-sending to {next}");
                let retry = AsyncAttempt {
                    retries_left: self.retries_left - 1,
                    ..self
                };
                Settled::Resend(retry, next, e)
            }
            Err(e) => {
                if e.is_retriable() {
                    producer.fault.update(&mq.broker_name, latency, true);
                }
                Settled::Done(Err(e))
            }
        }
    }
}
