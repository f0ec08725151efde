//! What the client instance asks of a push consumer (`ConsumerInner`): its heartbeat
//! data, routes, offset persistence, pool adjustment and rebalance, and the answers to the
//! admin requests a broker relays (running info, offsets, reset, consume directly).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use log::{info, warn};

use super::PushConsumerImpl;
use crate::client::ConsumerInner;
use crate::consumer::offset_store::{offsets_of_topic, queue_infos};
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::{
    ConsumeConcurrentlyContext, ConsumeOrderlyContext, ConsumeOrderlyStatus, ConsumeStatus,
    Listener,
};
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::consumer_admin::{
    self, prop, CmResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo,
};
use crate::protocol::heartbeat::{ConsumeType, ConsumerData};

impl ConsumerInner for PushConsumerImpl {
    fn consumer_data(&self) -> ConsumerData {
        self.rebalance.consumer_data(
            ConsumeType::ConsumePassively,
            self.options.consume_from_where.wire(),
        )
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: &HashSet<MessageQueue>) -> bool {
        self.rebalance.update_topic_subscribe_info(topic, info)
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.rebalance.is_subscribe_topic_need_update(topic)
    }

    /// Job 4. Once shutdown has begun, its own final persist is the one that counts.
    fn persist_consumer_offset(&self) {
        let _persisting = self.persisting.lock();
        if !self.is_running() {
            return;
        }
        let mqs: HashSet<MessageQueue> = self.held_queues().into_iter().collect();
        self.offset_store.persist_all(&mqs);
    }

    /// Job 5: one more consume thread while the backlog is at or above the threshold, one
    /// fewer below 80 % of it (Java's old `adjustThreadPool`). The backlog counts what waits
    /// in the local cache as well as what the broker still holds: with pulls running ahead,
    /// Java's broker-side figure alone drops to zero while the cache is full.
    fn adjust_thread_pool(&self) {
        let backlog: i64 = self
            .rebalance
            .process_queues
            .read()
            .values()
            .map(|pq| pq.msg_count() as i64 + pq.msg_acc_cnt())
            .sum();
        let threshold = self.options.adjust_thread_pool_nums_threshold as i64;
        if backlog >= threshold {
            self.pool.grow();
        } else if (backlog as f64) < threshold as f64 * 0.8 {
            self.pool.shrink();
        }
    }

    fn do_rebalance(&self) {
        if self.is_running() && !self.is_paused() {
            self.rebalance.do_rebalance(self, self.is_orderly());
        }
    }

    /// Java `DefaultMQPushConsumerImpl.consumerRunningInfo`.
    fn running_info(&self) -> ConsumerRunningInfo {
        let o = &self.options;
        let mut info = ConsumerRunningInfo::default();
        let p = &mut info.properties;
        let mut put = |k: &str, v: String| {
            p.insert(k.to_string(), v);
        };
        put("consumerGroup", self.group.clone());
        put(
            "messageModel",
            format!("{:?}", o.message_model).to_uppercase(),
        );
        put(
            "consumeFromWhere",
            format!("{:?}", o.consume_from_where.wire()),
        );
        put("consumeThreadMin", o.consume_thread_min.to_string());
        put("consumeThreadMax", o.consume_thread_max.to_string());
        put("pullBatchSize", o.pull_batch_size.to_string());
        put(
            "consumeMessageBatchMaxSize",
            o.consume_message_batch_max_size.to_string(),
        );
        put(
            "pullThresholdForQueue",
            o.pull_threshold_for_queue.to_string(),
        );
        put("pullInterval", o.pull_interval.as_millis().to_string());
        put("clientRebalance", o.client_rebalance.to_string());
        put(
            "popInvisibleTime",
            o.pop_invisible_time.as_millis().to_string(),
        );
        put("popBatchNums", o.pop_batch_nums.to_string());
        put(
            "popThresholdForQueue",
            o.pop_threshold_for_queue.to_string(),
        );
        put(prop::CONSUME_ORDERLY, self.is_orderly().to_string());
        put(prop::THREADPOOL_CORE_SIZE, self.pool.size().to_string());
        put(prop::CONSUMER_START_TIMESTAMP, self.started_at.to_string());
        put(prop::CONSUME_TYPE, "CONSUME_PASSIVELY".to_string());
        info.subscriptions = self
            .rebalance
            .subscriptions
            .read()
            .values()
            .cloned()
            .collect();
        let held = self.rebalance.held_queues();
        info.mq_table = queue_infos(self.offset_store.as_ref(), held);
        info.mq_pop_table = self
            .rebalance
            .pop_process_queues
            .read()
            .iter()
            .map(|(mq, pq)| (mq.clone(), pq.info()))
            .collect();
        for topic in consumer_admin::topics_of(&info.subscriptions) {
            let status = self.stats.read(&topic);
            info.status_table.insert(topic, status);
        }
        info
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        offsets_of_topic(self.offset_store.as_ref(), topic)
    }

    /// Java `MQClientInstance.resetOffset`: the held queues named are dropped (a listener
    /// still running on one records nothing), their new offsets are written through to
    /// the broker, and the rebalance starts them again from there at once. Java sleeps
    /// 10 s between dropping and writing; dropped queues make that wait needless.
    fn reset_offset(&self, topic: &str, offsets: &HashMap<MessageQueue, i64>) {
        let held: Vec<(MessageQueue, Arc<ProcessQueue>, i64)> = self
            .rebalance
            .process_queues
            .read()
            .iter()
            .filter(|(mq, _)| mq.topic == topic.into())
            .filter_map(|(mq, pq)| Some((mq.clone(), pq.clone(), *offsets.get(mq)?)))
            .collect();
        for (_, pq, _) in &held {
            pq.set_dropped(true);
        }
        for (mq, pq, offset) in held {
            self.offset_store.update_offset(&mq, offset, false);
            if let Err(e) = self
                .offset_store
                .update_consume_offset_to_store(&mq, offset)
            {
                warn!(
                    "{}: writing the reset offset {offset} of {mq}: {e}",
                    self.group
                );
            }
            if self.is_orderly_clustering() {
                self.rebalance.unlock(&mq, true);
            }
            let removed = {
                let mut table = self.rebalance.process_queues.write();
                match table.get(&mq) {
                    Some(current) if Arc::ptr_eq(current, &pq) => table.remove(&mq).is_some(),
                    _ => false,
                }
            };
            if removed {
                info!("{}: {mq} reset to offset {offset}", self.group);
            }
        }
        self.instance.rebalance_immediately();
    }

    /// Java `ConsumeMessageConcurrentlyService.consumeMessageDirectly` and its orderly
    /// twin: the listener runs on this (processor) thread and its answer is reported;
    /// nothing is acknowledged or retried.
    fn consume_message_directly(
        &self,
        msg: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        let mq = MessageQueue::new(msg.topic(), broker_name, msg.queue_id);
        let mut msgs = vec![msg];
        self.prepare_for_listener(&mut msgs);
        let began = Instant::now();
        let panic_text = |p: Box<dyn std::any::Any + Send>| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the listener panicked".to_string())
        };
        let (order, auto_commit, outcome) = match &self.listener {
            Listener::Concurrently(l) => {
                let mut ctx = ConsumeConcurrentlyContext::new(mq);
                let r = catch_unwind(AssertUnwindSafe(|| l(&msgs, &mut ctx)));
                let outcome = r.map(|s| match s {
                    ConsumeStatus::Success => CmResult::Success,
                    ConsumeStatus::ReconsumeLater => CmResult::Later,
                });
                (false, true, outcome)
            }
            Listener::Orderly(l) => {
                let mut ctx = ConsumeOrderlyContext::new(mq);
                let r = catch_unwind(AssertUnwindSafe(|| l(&msgs, &mut ctx)));
                let outcome = r.map(|s| match s {
                    ConsumeOrderlyStatus::Success => CmResult::Success,
                    ConsumeOrderlyStatus::Suspend => CmResult::Later,
                });
                (true, true, outcome)
            }
        };
        let (consume_result, remark) = match outcome {
            Ok(r) => (r, String::new()),
            Err(p) => (CmResult::ThrowException, panic_text(p)),
        };
        Some(ConsumeMessageDirectlyResult {
            order,
            auto_commit,
            consume_result,
            remark,
            spent_time_mills: i64::try_from(began.elapsed().as_millis()).unwrap_or(i64::MAX),
        })
    }
}
