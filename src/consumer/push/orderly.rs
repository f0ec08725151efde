//! Orderly consumption (Java `ConsumeMessageOrderlyService`): one listener call per queue
//! at a time, with the queue locked at the broker, and the local retry of a suspended
//! batch.

use std::sync::Arc;

use super::*;

impl PushConsumerImpl {
    pub(super) fn consume_orderly(self: Arc<Self>, pq: Arc<ProcessQueue>, mq: MessageQueue) {
        if pq.is_dropped() {
            return;
        }
        let Listener::Orderly(listener) = &self.listener else {
            return;
        };
        let _serial = pq.consume_lock.lock();
        let clustering = self.options.message_model == MessageModel::Clustering;
        if clustering && (!pq.is_locked() || pq.is_lock_expired()) {
            return self.try_lock_later_and_reconsume(pq.clone(), mq, Duration::from_millis(100));
        }
        let began = Instant::now();
        loop {
            if pq.is_dropped() {
                return;
            }
            if clustering && (!pq.is_locked() || pq.is_lock_expired()) {
                return self.try_lock_later_and_reconsume(
                    pq.clone(),
                    mq,
                    Duration::from_millis(10),
                );
            }
            if !self.is_running() {
                // Shutting down: what is left in the queue comes again after a restart.
                return;
            }
            if began.elapsed() > MAX_TIME_CONSUME_CONTINUOUSLY {
                return self.consume_orderly_later(pq.clone(), mq, Duration::from_millis(10));
            }
            let mut msgs = pq.take_messages(self.options.consume_message_batch_max_size.max(1));
            if msgs.is_empty() {
                return;
            }
            self.prepare_for_listener(&mut msgs);
            let mut ctx = ConsumeOrderlyContext::new(mq.clone());
            let hooks = self.observer.before(&self.group, &mq, &msgs);
            let consume_began = Instant::now();
            let traced = self.trace_before(&msgs);
            let mut panicked = false;
            let status = catch_unwind(AssertUnwindSafe(|| listener(&msgs, &mut ctx)))
                .unwrap_or_else(|_| {
                    warn!(
                        "{}: the orderly listener panicked on {mq}; suspending",
                        self.group
                    );
                    panicked = true;
                    ConsumeOrderlyStatus::Suspend
                });
            let ok = status == ConsumeOrderlyStatus::Success;
            let took = consume_began.elapsed();
            self.trace_after(traced, &msgs, consume_began, ok, panicked);
            if let Some(hooks) = hooks {
                let status = match status {
                    _ if panicked => ConsumeHookStatus::Panicked,
                    ConsumeOrderlyStatus::Success => ConsumeHookStatus::Success,
                    ConsumeOrderlyStatus::Suspend => ConsumeHookStatus::SuspendCurrentQueue,
                };
                hooks.after(&self.group, &mq, &msgs, status);
            }
            let (ok, failed) = match status {
                ConsumeOrderlyStatus::Success => (msgs.len(), 0),
                ConsumeOrderlyStatus::Suspend => (0, msgs.len()),
            };
            self.stats.consumed(&mq.topic, ok, failed, took);
            self.observer.counters.consumed(
                &self.user_topic(&mq.topic),
                ok as u64,
                failed as u64,
                Some(took),
            );
            if pq.is_dropped() {
                return;
            }
            let commit = match status {
                ConsumeOrderlyStatus::Success => pq.commit(),
                ConsumeOrderlyStatus::Suspend => {
                    if !self.is_running() {
                        // Shutting down: nothing goes to the broker's dead-letter queue
                        // now; the batch stays uncommitted and comes again.
                        pq.make_messages_to_consume_again(msgs);
                        return;
                    }
                    if self.check_reconsume_times(&mut msgs, &mq) {
                        pq.make_messages_to_consume_again(msgs);
                        let pause = ctx
                            .suspend_time
                            .unwrap_or(self.options.suspend_time)
                            .clamp(Duration::from_millis(10), Duration::from_secs(30));
                        return self.consume_orderly_later(pq.clone(), mq, pause);
                    }
                    pq.commit()
                }
            };
            if commit >= 0 && !pq.is_dropped() {
                self.record_offset(&mq, commit, false);
            }
        }
    }

    fn consume_orderly_later(
        self: &Arc<Self>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        delay: Duration,
    ) {
        let me = self.clone();
        self.instance
            .schedule_later("consume-orderly-later", delay, move || {
                let me2 = me.clone();
                me.pool.execute(move || me2.consume_orderly(pq, mq));
            });
    }

    fn try_lock_later_and_reconsume(
        self: &Arc<Self>,
        pq: Arc<ProcessQueue>,
        mq: MessageQueue,
        delay: Duration,
    ) {
        let me = self.clone();
        self.instance
            .schedule_later("lock-and-consume", delay, move || {
                let locked = me.rebalance.lock(&mq);
                let next = if locked {
                    Duration::from_millis(10)
                } else {
                    Duration::from_millis(3000)
                };
                me.consume_orderly_later(pq, mq, next);
            });
    }
}
