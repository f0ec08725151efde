//! What the client instance asks of a producer (`ProducerInner`): the topics to refresh,
//! their publish info, and the broker's transaction checks.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use log::debug;

use super::ProducerImpl;
use crate::client::{ProducerInner, TopicPublishInfo};
use crate::message::MessageExt;
use crate::producer::transaction::CheckTrace;
use crate::protocol::transaction::CheckTransactionStateRequestHeader;

impl ProducerInner for ProducerImpl {
    /// The topics whose routes this producer needs refreshed, after forgetting those not
    /// sent to for `idle_topic_timeout` (Java keeps every topic it ever sent to and asks
    /// for its route every 30 s forever). The auto-create topic stays: sends to new
    /// topics start from its route.
    fn publish_topics(&self) -> Vec<String> {
        let now = Instant::now();
        let idle = self.options.idle_topic_timeout;
        let mut table = self.publish_table.write();
        table.retain(|topic, e| {
            if e.used.swap(false, Ordering::Relaxed) {
                e.last_used = now;
            }
            let keep =
                *topic == self.options.create_topic_key || now.duration_since(e.last_used) < idle;
            if !keep {
                debug!(
                    "producer {}: no send to {topic} for {idle:?}; its route is no longer kept",
                    self.group
                );
            }
            keep
        });
        table.keys().cloned().collect()
    }

    fn is_publish_topic_need_update(&self, topic: &str) -> bool {
        self.publish_table
            .read()
            .get(topic)
            .is_some_and(|e| !e.info.ok())
    }

    /// Takes a refreshed route for a topic this producer sends to. Routes of other
    /// topics (a consumer's, on a shared instance) are not adopted, so that a topic
    /// leaves the table once nobody sends to it.
    fn update_topic_publish_info(&self, topic: &str, info: Arc<TopicPublishInfo>) {
        if let Some(e) = self.publish_table.write().get_mut(topic) {
            e.info = info;
        }
    }

    fn check_transaction_state(
        &self,
        addr: &str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
    ) {
        let Some(env) = &self.transaction else {
            debug!(
                "broker {addr} checks a transaction of {}, which is not a transactional producer",
                self.group
            );
            return;
        };
        let instance = self.instance.read().clone();
        match instance {
            Some(instance) => env.submit(
                instance,
                self.group.clone(),
                self.tracer().map(|dispatcher| CheckTrace {
                    dispatcher,
                    namespace: self.namespace.clone(),
                }),
                addr,
                msg,
                header,
            ),
            None => debug!(
                "broker {addr} checks a transaction of {}, which is shut down",
                self.group
            ),
        }
    }
}
