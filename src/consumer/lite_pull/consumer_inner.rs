//! What the client instance asks of a lite pull consumer (`ConsumerInner`): its heartbeat
//! data, routes, offset persistence and rebalance, and the answers to the admin requests a
//! broker relays.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use log::{info, warn};

use super::{LitePullImpl, Mode};
use crate::client::ConsumerInner;
use crate::consumer::offset_store::{offsets_of_topic, queue_infos};
use crate::consumer::process_queue::ProcessQueue;
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::consumer_admin::{prop, ConsumeMessageDirectlyResult, ConsumerRunningInfo};
use crate::protocol::heartbeat::{ConsumeType, ConsumerData};

impl ConsumerInner for LitePullImpl {
    fn consumer_data(&self) -> ConsumerData {
        self.rebalance.consumer_data(
            ConsumeType::ConsumeActively,
            self.options.consume_from_where.wire(),
        )
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: &HashSet<MessageQueue>) -> bool {
        self.rebalance.update_topic_subscribe_info(topic, info)
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.rebalance.is_subscribe_topic_need_update(topic)
    }

    /// Job 4 (Java `persistConsumerOffset`): sends what the offset store holds for the
    /// held queues, that is what was committed (by the auto-commit in `poll`, by
    /// `commit_sync`) or sought. Never the consumed position: the batch `poll` returned
    /// last may still be in processing.
    fn persist_consumer_offset(&self) {
        if !self.is_running() {
            return;
        }
        let held: HashSet<MessageQueue> = self.queues.lock().keys().cloned().collect();
        self.store.persist_all(&held);
    }

    fn adjust_thread_pool(&self) {}

    fn do_rebalance(&self) {
        if self.is_running() && *self.mode.lock() == Some(Mode::Subscribe) {
            self.rebalance.do_rebalance(self, false);
        }
    }

    /// Java `DefaultLitePullConsumerImpl.consumerRunningInfo`.
    fn running_info(&self) -> ConsumerRunningInfo {
        let o = &self.options;
        let mut info = ConsumerRunningInfo::default();
        let p = &mut info.properties;
        p.insert("consumerGroup".into(), self.group.clone());
        p.insert("pullBatchSize".into(), o.pull_batch_size.to_string());
        p.insert("autoCommit".into(), o.auto_commit.to_string());
        p.insert(
            prop::CONSUMER_START_TIMESTAMP.into(),
            self.started_at.to_string(),
        );
        p.insert(prop::CONSUME_TYPE.into(), "CONSUME_ACTIVELY".into());
        info.subscriptions = self
            .rebalance
            .subscriptions
            .read()
            .values()
            .cloned()
            .collect();
        let held: Vec<(MessageQueue, Arc<ProcessQueue>)> = self
            .queues
            .lock()
            .iter()
            .map(|(mq, s)| (mq.clone(), s.pq.clone()))
            .collect();
        info.mq_table = queue_infos(self.store.as_ref(), held);
        info
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        offsets_of_topic(self.store.as_ref(), topic)
    }

    /// Seeks each named held queue and writes the offset through; what was polled from
    /// before the reset is not committed.
    fn reset_offset(&self, topic: &str, offsets: &HashMap<MessageQueue, i64>) {
        let held: Vec<MessageQueue> = self
            .queues
            .lock()
            .keys()
            .filter(|mq| *mq.topic == *topic && offsets.contains_key(*mq))
            .cloned()
            .collect();
        for mq in held {
            let offset = offsets[&mq];
            if let Err(e) = self.reset_queue(&mq, offset) {
                warn!("{}: resetting {mq} to {offset}: {e}", self.group);
                continue;
            }
            if let Err(e) = self.store.update_consume_offset_to_store(&mq, offset) {
                warn!(
                    "{}: writing the reset offset {offset} of {mq}: {e}",
                    self.group
                );
            }
            info!("{}: {mq} reset to offset {offset}", self.group);
        }
    }

    /// A lite pull consumer has no listener (Java answers the same).
    fn consume_message_directly(
        &self,
        _msg: MessageExt,
        _broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        None
    }
}
