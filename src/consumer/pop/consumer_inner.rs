//! What the client instance asks of a simple consumer (`ConsumerInner`): its heartbeat
//! entry and its topics' routes. The broker keeps a POP group's progress, so offsets,
//! rebalance and the listener requests have nothing to do here.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::SimpleImpl;
use crate::client::ConsumerInner;
use crate::message::{MessageExt, MessageQueue};
use crate::protocol::consumer_admin::{prop, ConsumeMessageDirectlyResult, ConsumerRunningInfo};
use crate::protocol::heartbeat::{ConsumeType, ConsumerData};

impl ConsumerInner for SimpleImpl {
    /// Sent as CONSUME_ACTIVELY: a 4.x broker has no CONSUME_POP and would refuse the
    /// whole heartbeat of the instance (other consumers' entries included); a 5.x broker
    /// records a pop consumer from the pops themselves.
    fn consumer_data(&self) -> ConsumerData {
        self.rebalance
            .consumer_data(ConsumeType::ConsumeActively, self.consume_from_where.wire())
    }

    fn update_topic_subscribe_info(&self, topic: &str, info: &HashSet<MessageQueue>) -> bool {
        self.rebalance.update_topic_subscribe_info(topic, info);
        false
    }

    fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.rebalance.is_subscribe_topic_need_update(topic)
    }

    fn persist_consumer_offset(&self) {}

    fn adjust_thread_pool(&self) {}

    fn do_rebalance(&self) {}

    fn running_info(&self) -> ConsumerRunningInfo {
        let mut info = ConsumerRunningInfo::default();
        let p = &mut info.properties;
        p.insert("consumerGroup".into(), self.group.clone());
        p.insert(prop::CONSUME_TYPE.into(), "CONSUME_POP".into());
        info.subscriptions = self
            .rebalance
            .subscriptions
            .read()
            .values()
            .cloned()
            .collect();
        info
    }

    fn offsets_of(&self, _topic: &str) -> BTreeMap<MessageQueue, i64> {
        BTreeMap::new()
    }

    fn reset_offset(&self, _topic: &str, _offsets: &HashMap<MessageQueue, i64>) {}

    fn consume_message_directly(
        &self,
        _msg: MessageExt,
        _broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        None
    }
}
