//! Async sends (Java `sendDefaultImpl` in async mode and `MQClientAPIImpl.onExceptionImpl`):
//! one attempt queued on the caller's thread, its completion on the callback pool, and
//! the re-sends after a transport failure, which look routes up on the client timer.

use std::sync::Arc;
use std::time::{Duration, Instant};

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
        let started = Instant::now();
        let mut msg = msg;
        let hooks = self.observer.hooks();
        if let Some(hooks) = &hooks {
            hooks.before(&self.group, SendMode::Async, &mut msg);
        }
        let counters = self.observer.counters.clone();
        // Shared by the callback and the error path below: one allocation.
        let topic: Arc<str> = Arc::from(msg.topic());
        let bytes = msg.body().len() as u64;
        // The message as sent, for the hooks' `after_send` (a copy only when hooked).
        let hooked = hooks.map(|h| (h, msg.clone(), self.group.clone()));
        counters.async_in_flight.fetch_add(1, Ordering::Relaxed);
        let observed: SendCallback = {
            let counters = counters.clone();
            let topic = topic.clone();
            Box::new(move |r: Result<SendResult>| {
                // Counted before the user's callback runs: a caller that waits for its
                // callbacks then sees them in the stats.
                counters.record(&topic, 1, bytes, &r, started.elapsed());
                counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
                if let Some((hooks, mut msg, group)) = hooked {
                    hooks.after(&group, SendMode::Async, &mut msg, r.as_ref().map(Some));
                }
                callback(r)
            })
        };
        match self.queue_async(&mut msg, &topic, queue, timeout, observed) {
            Ok(()) => Ok(()),
            Err(error) => {
                // Not queued: the wrapped callback was dropped unrun.
                counters.failed(&topic, 1, &error);
                counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
                if let Some(hooks) = self.observer.hooks() {
                    hooks.after(&self.group, SendMode::Async, &mut msg, Err(&error));
                }
                Err(SendAsyncError::new(error, msg))
            }
        }
    }

    /// Prepares and queues `msg` (or hands it to its open batch). The body moves into the
    /// send, which keeps it for its re-sends, unless it is compressed; it comes back into
    /// `msg` when the send is not queued. `topic` is `msg.topic()`, shared.
    fn queue_async(
        self: &Arc<Self>,
        msg: &mut Message,
        topic: &Arc<str>,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        callback: SendCallback,
    ) -> Result<()> {
        if let Some(mq) = queue {
            check_queue_topic(msg.topic(), mq)?;
        }
        let callback = match self.send_async_auto_batched(msg, queue, timeout, callback) {
            Ok(queued) => return queued,
            Err(callback) => callback,
        };
        self.instance()?;
        let prepared = self.prepare_named(msg, topic.clone())?;
        let moved = prepared.borrows_body();
        let p = if moved {
            // No copy: the send owns the body from here on.
            let mut p = prepared.with_body(Vec::new());
            p.body = Cow::Owned(msg.take_body());
            p
        } else {
            prepared.into_owned()
        };
        let p = Arc::new(p);
        let kept = moved.then(|| Arc::clone(&p));
        match self.queue_prepared(p, queue, timeout, callback) {
            Ok(()) => Ok(()),
            Err((e, callback)) => {
                drop(callback);
                // Not queued: the body goes back to the message, which the caller gets
                // back unchanged (and the hooks' `after_send` sees). Nothing else holds
                // the send now; were it otherwise, the body is copied back.
                if let Some(p) = kept {
                    let body = match Arc::try_unwrap(p) {
                        Ok(p) => p.body.into_owned(),
                        Err(p) => p.body.to_vec(),
                    };
                    msg.set_body(body);
                }
                Err(e)
            }
        }
    }

    /// Queues the async send of a prepared message (or batch). On `Ok`, `callback` runs
    /// exactly once; on `Err`, it comes back unrun.
    pub(super) fn queue_prepared(
        self: &Arc<Self>,
        p: Arc<Prepared<'static>>,
        queue: Option<&MessageQueue>,
        timeout: Duration,
        callback: SendCallback,
    ) -> std::result::Result<(), (Error, SendCallback)> {
        let begin = Instant::now();
        let instance = match self.instance() {
            Ok(i) => i,
            Err(e) => return Err((e, callback)),
        };
        let info = match self.find_publish_info(&instance, &p.topic) {
            Ok(i) => i,
            Err(e) => return Err((e, callback)),
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
                    let e = Error::new(
                        ErrorKind::NoRoute,
                        format!("no writable queue of topic {}", p.user_topic),
                    );
                    return Err((e, callback));
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
        // Not queued: the callback comes back unrun.
        attempt.send(mq, callback)
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
        let started = Instant::now();
        let hooks = self.observer.hooks();
        let mut msgs = Cow::Borrowed(msgs);
        if let Some(h) = &hooks {
            for m in msgs.to_mut().iter_mut() {
                h.before(&self.group, SendMode::Async, m);
            }
        }
        let topic = msgs
            .first()
            .map_or(String::new(), |m| m.topic().to_string());
        if let Some(mq) = queue {
            check_queue_topic(&topic, mq)?;
        }
        let p = Arc::new(self.prepare_batch(&msgs)?);
        let count = msgs.len() as u64;
        let bytes: u64 = msgs.iter().map(|m| m.body().len() as u64).sum();
        let counters = self.observer.counters.clone();
        // The batch as sent, for the hooks' `after_send` (a copy only when hooked).
        let hooked = hooks.map(|h| (h, msgs.into_owned(), self.group.clone()));
        // A second copy for `after_send` if the batch is not queued (only when hooked).
        let unqueued = hooked.as_ref().map(|(_, m, _)| m.clone());
        counters.async_in_flight.fetch_add(1, Ordering::Relaxed);
        let observed: SendCallback = {
            let counters = counters.clone();
            let topic = topic.clone();
            Box::new(move |r: Result<SendResult>| {
                counters.record(&topic, count, bytes, &r, started.elapsed());
                counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
                if let Some((h, mut msgs, group)) = hooked {
                    for m in &mut msgs {
                        h.after(&group, SendMode::Async, m, r.as_ref().map(Some));
                    }
                }
                callback(r)
            })
        };
        let queued = self
            .queue_prepared(p, queue, timeout, observed)
            .map_err(|(e, _callback)| e);
        if let Err(e) = &queued {
            counters.failed(&topic, count, e);
            counters.async_in_flight.fetch_sub(1, Ordering::Relaxed);
            if let (Some(h), Some(mut msgs)) = (self.observer.hooks(), unqueued) {
                for m in &mut msgs {
                    h.after(&self.group, SendMode::Async, m, Err(e));
                }
            }
        }
        queued
    }
}

/// One async send and what it needs to re-send after a transport failure (Java
/// `MQClientAPIImpl.onExceptionImpl`).
pub(super) struct AsyncAttempt {
    pub(super) producer: Arc<ProducerImpl>,
    pub(super) instance: Arc<MQClientInstance>,
    pub(super) p: Arc<Prepared<'static>>,
    pub(super) info: Arc<TopicPublishInfo>,
    pub(super) begin: Instant,
    pub(super) timeout: Duration,
    pub(super) retries_left: u32,
    /// Sent to a queue the caller chose: retries go to the same queue.
    pub(super) pinned: bool,
}

impl AsyncAttempt {
    /// Queues the first attempt to `mq`, on the caller's thread (which may look the
    /// route up). On `Ok`, `callback` runs exactly once; on `Err`, it comes back unrun.
    pub(super) fn send(
        self,
        mq: MessageQueue,
        callback: SendCallback,
    ) -> std::result::Result<(), (Error, SendCallback)> {
        if let Err(e) = self.time_left() {
            return Err((e, callback));
        }
        let addr = match self
            .producer
            .broker_addr(&self.instance, &self.p.topic, &mq.broker_name)
        {
            Ok(a) => a,
            Err(e) => return Err((e, callback)),
        };
        self.send_to(mq, addr, callback)
    }

    /// The budget left, or the timeout error when none is.
    fn time_left(&self) -> Result<Duration> {
        let left = self.timeout.saturating_sub(self.begin.elapsed());
        if left.is_zero() {
            return Err(Error::timeout(crate::TimeoutPhase::Response, self.timeout)
                .context("async send call"));
        }
        Ok(left)
    }

    /// Re-sends to `mq` after `cause`, from the callback pool, where nothing waits for the
    /// name server: a broker whose address is not cached has its route fetched on the
    /// client timer (`MQClientInstance::request_route`) and the re-send goes on from
    /// there. `callback` runs exactly once.
    fn resend(self, mq: MessageQueue, callback: SendCallback, cause: Error) {
        let instance = self.instance.clone();
        if instance.publish_address(&mq.broker_name).is_some() {
            return self.resend_now(mq, callback, cause);
        }
        let topic = self.p.topic.clone();
        instance.request_route(
            &topic,
            Some(Box::new(move || self.resend_now(mq, callback, cause))),
        );
    }

    /// Re-sends to `mq` with the broker address cached now, if any.
    fn resend_now(self, mq: MessageQueue, callback: SendCallback, cause: Error) {
        let Some(addr) = self.instance.publish_address(&mq.broker_name) else {
            let e = Error::new(
                ErrorKind::NoRoute,
                format!("the broker {} does not exist", mq.broker_name),
            );
            return callback(Err(e.context(format!("after {cause}"))));
        };
        let addr = self.producer.vip(addr);
        // Queued, the re-send owns the callback; not queued, it comes back here.
        if let Err((e, callback)) = self.send_to(mq, addr, callback) {
            callback(Err(e.context(format!("after {cause}"))));
        }
    }

    /// Queues one attempt to `mq` at `addr`. On `Ok`, `callback` runs exactly once; on
    /// `Err`, it comes back unrun.
    fn send_to(
        self,
        mq: MessageQueue,
        addr: Arc<str>,
        callback: SendCallback,
    ) -> std::result::Result<(), (Error, SendCallback)> {
        let left = match self.time_left() {
            Ok(left) => left,
            Err(e) => return Err((e, callback)),
        };
        let remoting = self.instance.remoting().clone();
        let request = self.producer.request(&remoting, &self.p, &mq, false);
        let in_flight = InFlight {
            attempt: self,
            mq,
            addr,
            started: Instant::now(),
            callback,
        };
        let target = in_flight.addr.clone();
        remoting
            .invoke_async_outgoing(target, request, left, in_flight)
            .map_err(|e| {
                let (e, in_flight) = e.into_parts();
                (e, in_flight.callback)
            })
    }
}

/// An attempt on the wire: the remoting callback of an async send, which owns the user's
/// callback and gets it back when the request cannot be queued.
struct InFlight {
    attempt: AsyncAttempt,
    mq: MessageQueue,
    addr: Arc<str>,
    started: Instant,
    callback: SendCallback,
}

impl InvokeCallback for InFlight {
    fn operation_complete(self, r: Result<RemotingCommand>) {
        let InFlight {
            attempt,
            mq,
            addr,
            started,
            callback,
        } = self;
        let latency = started.elapsed();
        let producer = &attempt.producer;
        let result = r.and_then(|resp| producer.process_response(&attempt.p, &mq, &addr, resp));
        match result {
            Ok(res) => {
                producer.fault.update(&mq.broker_name, latency, false);
                producer.trace_send(&attempt.p, &addr, &res, started);
                callback(Ok(res));
            }
            Err(e) if e.kind().is_transport() && attempt.retries_left > 0 => {
                producer.fault.update(&mq.broker_name, latency, true);
                let next = if attempt.pinned {
                    Some(mq.clone())
                } else {
                    producer.fault.select(&attempt.info, Some(&mq.broker_name))
                };
                let Some(next) = next else {
                    callback(Err(e));
                    return;
                };
                debug!("async send to {mq} failed ({e}); re-sending to {next}");
                let retry = AsyncAttempt {
                    retries_left: attempt.retries_left - 1,
                    ..attempt
                };
                retry.resend(next, callback, e);
            }
            Err(e) => {
                if e.is_retriable() {
                    producer.fault.update(&mq.broker_name, latency, true);
                }
                callback(Err(e));
            }
        }
    }
}
