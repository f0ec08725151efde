//! Rebalance (Java `RebalanceImpl`): which queues this consumer owns, the process queue
//! of each, and the broker locks of orderly consumers.
//!
//! A push consumer with `client_rebalance(false)` asks a broker instead (Java 5
//! `getRebalanceResultFromBroker`, QUERY_ASSIGNMENT): the broker allocates, and says per
//! queue whether to PULL it or to POP it (`mqadmin setConsumeMode`). A broker that does not
//! know the request (4.x) is remembered and the allocation is done here, as before.
//!
//! Inputs are sorted exactly as Java sorts them (queues by topic, broker, id; client ids
//! as strings) so that Java and Rust consumers of one group agree on the split.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use log::{error, info, warn};
use parking_lot::{ReentrantMutex, RwLock};

use super::allocate::AllocateStrategy;
use super::process_queue::{PopProcessQueue, ProcessQueue};
use crate::client::{MQClientInstance, MASTER_ID};
use crate::error::ErrorKind;
use crate::message::MessageQueue;
use crate::protocol::heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, SubscriptionData,
};
use crate::protocol::pop::{MessageQueueAssignment, MessageRequestMode};

const LOCK_TIMEOUT: Duration = Duration::from_millis(1000);
/// Java `RebalanceImpl.QUERY_ASSIGNMENT_TIMEOUT`.
const QUERY_ASSIGNMENT_TIMEOUT: Duration = Duration::from_millis(3000);
/// The allocation strategies a 5.x broker runs itself (Java `QueryAssignmentProcessor`
/// registers these two; for any other it answers no assignment).
const BROKER_STRATEGIES: [&str; 2] = ["AVG", "AVG_BY_CIRCLE"];

/// A queue taken by a rebalance: its process queue and the offset to pull from.
pub(crate) type PullStart = (MessageQueue, Arc<ProcessQueue>, i64);
/// A queue taken in POP mode: the broker keeps the progress, there is no offset.
pub(crate) type PopStart = (MessageQueue, Arc<PopProcessQueue>);

/// The retry topic of a group's POP consumption of `topic` (Java
/// `KeyBuilder.buildPopRetryTopic`, the V1 form `%RETRY%<group>_<topic>`): the broker
/// moves a popped message there when its invisible time runs out.
pub(crate) fn pop_retry_topic(topic: &str, group: &str) -> String {
    format!(
        "{}{group}_{topic}",
        crate::client::validators::RETRY_GROUP_TOPIC_PREFIX
    )
}

/// A broker's answer for a topic, with the topic's readable queues.
struct Assignment<'a> {
    all: &'a HashSet<MessageQueue>,
    a: Vec<MessageQueueAssignment>,
}

/// What a broker said about a topic's allocation.
enum BrokerAssignment {
    /// These queues, each in its mode.
    Assigned(Vec<MessageQueueAssignment>),
    /// No answer this round (error, no allocation): keep the queues held (Java).
    Keep,
    /// The broker cannot allocate (4.x, or a strategy it does not run): allocate here.
    ClientSide,
}

/// What differs between consumer kinds (Java's `RebalancePushImpl` / `RebalanceLitePullImpl`).
pub(crate) trait RebalanceHooks: Send + Sync {
    /// The allocation of `topic` changed.
    fn message_queue_changed(
        &self,
        topic: &str,
        all: &HashSet<MessageQueue>,
        mine: &HashSet<MessageQueue>,
    );
    /// The allocation of one or more topics changed in this round: tell the brokers (a
    /// heartbeat), once for the round and before the new queues' first pulls.
    fn allocation_changed(&self);
    /// Persists and forgets `mq`'s offset before the queue goes; false keeps it (retry later).
    fn remove_unnecessary_message_queue(&self, mq: &MessageQueue, pq: &ProcessQueue) -> bool;
    /// Forgets an offset that may be stale before the queue is taken again.
    fn remove_dirty_offset(&self, mq: &MessageQueue);
    /// The offset to start pulling `mq` from; `None` skips the queue this round.
    fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64>;
    /// Starts pulling the newly owned queues.
    fn dispatch_pull_requests(&self, requests: Vec<PullStart>);
    /// Whether idle queues are dropped and re-created (push consumers).
    fn drops_idle_queues(&self) -> bool;
    /// Whether `topic` is allocated here rather than by a broker (Java
    /// `clientRebalance`); only push consumers may ask a broker.
    fn client_rebalance(&self, _topic: &str) -> bool {
        true
    }
    /// Starts popping the queues newly assigned in POP mode.
    fn dispatch_pop_requests(&self, _requests: Vec<PopStart>) {}
}

/// Rebalance state of one consumer group in this process.
///
/// Lock order: `round` first, then `subscriptions` → `topic_subscribe_info` (read
/// together in `is_subscribe_topic_need_update`); `process_queues` is taken alone. Only
/// `round` is held across a broker call or a call into [`RebalanceHooks`].
pub(crate) struct RebalanceImpl {
    pub(crate) group: String,
    pub(crate) model: MessageModel,
    pub(crate) strategy: Box<dyn AllocateStrategy>,
    pub(crate) instance: Arc<MQClientInstance>,
    pub(crate) subscriptions: RwLock<HashMap<String, SubscriptionData>>,
    pub(crate) topic_subscribe_info: RwLock<HashMap<String, HashSet<MessageQueue>>>,
    pub(crate) process_queues: RwLock<HashMap<MessageQueue, Arc<ProcessQueue>>>,
    /// The queues a broker assigned in POP mode (Java `popProcessQueueTable`).
    pub(crate) pop_process_queues: RwLock<HashMap<MessageQueue, Arc<PopProcessQueue>>>,
    /// Brokers that answered QUERY_ASSIGNMENT "not supported" (4.x), by address: not
    /// asked again while this consumer runs, so a 4.x cluster costs one round trip.
    assignment_unsupported: RwLock<HashSet<String>>,
    /// Held for a whole round, and by [`remove_subscription`](Self::remove_subscription):
    /// a round reads the topics when it begins and takes queues from broker calls later,
    /// so without it a round begun before an unsubscribe took that topic's queues back
    /// after the unsubscribe had dropped them. Reentrant, for an allocation listener
    /// that unsubscribes from inside a round.
    round: ReentrantMutex<()>,
}

impl RebalanceImpl {
    pub(crate) fn new(
        group: &str,
        model: MessageModel,
        strategy: Box<dyn AllocateStrategy>,
        instance: Arc<MQClientInstance>,
    ) -> Self {
        RebalanceImpl {
            group: group.to_string(),
            model,
            strategy,
            instance,
            subscriptions: RwLock::new(HashMap::new()),
            topic_subscribe_info: RwLock::new(HashMap::new()),
            process_queues: RwLock::new(HashMap::new()),
            pop_process_queues: RwLock::new(HashMap::new()),
            assignment_unsupported: RwLock::new(HashSet::new()),
            round: ReentrantMutex::new(()),
        }
    }

    /// This group's entry in a heartbeat.
    pub(crate) fn consumer_data(
        &self,
        consume_type: ConsumeType,
        consume_from_where: ConsumeFromWhere,
    ) -> ConsumerData {
        ConsumerData {
            group_name: self.group.clone(),
            consume_type,
            message_model: self.model,
            consume_from_where,
            subscription_data_set: self.subscriptions.read().values().cloned().collect(),
            unit_mode: false,
        }
    }

    /// Keeps the route's readable queues of a subscribed topic (Java
    /// `updateTopicSubscribeInfo`).
    /// Stores the readable queues of a subscribed topic; true when queues were added (a
    /// broker came, or came back), so that the caller can take them now rather than at the
    /// next rebalance period. Queues that went away are left to that period, as in Java: a
    /// broker back within it finds its queues still held, offsets and all.
    pub(crate) fn update_topic_subscribe_info(
        &self,
        topic: &str,
        info: &HashSet<MessageQueue>,
    ) -> bool {
        if !self.subscriptions.read().contains_key(topic) {
            return false;
        }
        let old = self
            .topic_subscribe_info
            .write()
            .insert(topic.to_string(), info.clone());
        old.is_some_and(|old| info.iter().any(|q| !old.contains(q)))
    }

    /// Whether a subscribed topic still lacks route info.
    pub(crate) fn is_subscribe_topic_need_update(&self, topic: &str) -> bool {
        self.subscriptions.read().contains_key(topic)
            && !self.topic_subscribe_info.read().contains_key(topic)
    }

    /// The held queues and their process queues, copied out of the table's lock.
    pub(crate) fn held_queues(&self) -> Vec<(MessageQueue, Arc<ProcessQueue>)> {
        self.process_queues
            .read()
            .iter()
            .map(|(mq, pq)| (mq.clone(), pq.clone()))
            .collect()
    }

    /// The subscribed topics (with namespace), sorted.
    pub(crate) fn subscribed_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.subscriptions.read().keys().cloned().collect();
        topics.sort();
        topics
    }

    /// Stops following `topic` now (the lite pull consumer's `unsubscribe`): its
    /// subscription and its held queues go, each queue handed to `drop_queue`. False if
    /// the topic was not subscribed. Waits for a round in progress to end.
    pub(crate) fn remove_subscription(
        &self,
        topic: &str,
        mut drop_queue: impl FnMut(&MessageQueue),
    ) -> bool {
        let _round = self.round.lock();
        if self.subscriptions.write().remove(topic).is_none() {
            return false;
        }
        let held: Vec<MessageQueue> = self
            .process_queues
            .read()
            .keys()
            .filter(|mq| *mq.topic == *topic)
            .cloned()
            .collect();
        for mq in held {
            let removed = self.process_queues.write().remove(&mq);
            if let Some(pq) = removed {
                pq.set_dropped(true);
            }
            drop_queue(&mq);
        }
        true
    }

    /// One round over every subscribed topic. The heartbeat that tells the brokers of
    /// changed allocations goes out once for the round, after every topic, and the new
    /// queues' pulls after it. Java sends one heartbeat per changed topic, each carrying
    /// every subscription of the instance: for a consumer of N topics a first round sent
    /// N heartbeats of N subscriptions each (5,000 topics: about 5,000 × 0.7 MB, more than
    /// minutes of heartbeats before the last queue was pulled).
    pub(crate) fn do_rebalance(&self, hooks: &dyn RebalanceHooks, is_order: bool) {
        let _round = self.round.lock();
        let topics = self.subscribed_topics();
        let mut requests = Vec::new();
        let mut pops = Vec::new();
        let mut changed = false;
        for topic in &topics {
            changed |= self.rebalance_by_topic(hooks, topic, is_order, &mut requests, &mut pops);
        }
        if changed {
            hooks.allocation_changed();
        }
        // A queue an allocation listener's unsubscribe dropped during the round.
        requests.retain(|(_, pq, _)| !pq.is_dropped());
        hooks.dispatch_pull_requests(requests);
        hooks.dispatch_pop_requests(pops);
        self.pop_process_queues.write().retain(|mq, pq| {
            let keep = topics.iter().any(|t| **t == *mq.topic);
            if !keep {
                pq.set_dropped(true);
            }
            keep
        });
        // Queues of topics no longer subscribed.
        let stale: Vec<MessageQueue> = self
            .process_queues
            .read()
            .keys()
            .filter(|mq| !topics.iter().any(|t| **t == *mq.topic))
            .cloned()
            .collect();
        for mq in stale {
            let Some(pq) = self.process_queues.read().get(&mq).cloned() else {
                continue;
            };
            pq.set_dropped(true);
            // As for a queue given away: its offset is persisted first (Java 4.9 only
            // drops it, and a later subscriber of the group re-reads what this one consumed).
            if hooks.remove_unnecessary_message_queue(&mq, &pq) {
                self.process_queues.write().remove(&mq);
                info!(
                    "{}: dropped {mq}, its topic is no longer subscribed",
                    self.group
                );
            }
        }
    }

    /// Rebalances `topic`, adding the pulls of the queues it takes to `requests`; true if
    /// its allocation changed.
    fn rebalance_by_topic(
        &self,
        hooks: &dyn RebalanceHooks,
        topic: &str,
        is_order: bool,
        requests: &mut Vec<PullStart>,
        pops: &mut Vec<PopStart>,
    ) -> bool {
        let Some(mq_set) = self.topic_subscribe_info.read().get(topic).cloned() else {
            if !crate::client::validators::is_retry_topic(topic) {
                warn!(
                    "{}: no route info for subscribed topic {topic} yet",
                    self.group
                );
            }
            return false;
        };
        if self.model == MessageModel::Clustering && !hooks.client_rebalance(topic) {
            match self.query_assignment(topic, &mq_set) {
                BrokerAssignment::Assigned(a) => {
                    let assigned = Assignment { all: &mq_set, a };
                    return self
                        .update_assignment(hooks, topic, assigned, is_order, requests, pops);
                }
                BrokerAssignment::Keep => return false,
                BrokerAssignment::ClientSide => {}
            }
        }
        let mine: HashSet<MessageQueue> = match self.model {
            MessageModel::Broadcasting => mq_set.clone(),
            MessageModel::Clustering => {
                let mut cids = match self.instance.find_consumer_id_list(topic, &self.group) {
                    Ok(c) if !c.is_empty() => c,
                    Ok(_) => {
                        warn!("{}: no consumer id found for topic {topic}", self.group);
                        return false;
                    }
                    Err(e) => {
                        warn!("{}: consumer id list of topic {topic}: {e}", self.group);
                        return false;
                    }
                };
                let mut all: Vec<MessageQueue> = mq_set.iter().cloned().collect();
                all.sort();
                cids.sort();
                // The strategy may be the user's: a panic in it must not end the round of
                // the other consumers on the instance, nor the rebalance thread.
                let allocated = catch_unwind(AssertUnwindSafe(|| {
                    self.strategy
                        .allocate(self.instance.client_id(), &all, &cids)
                }));
                match allocated {
                    Ok(mqs) => mqs.into_iter().collect(),
                    Err(_) => {
                        error!(
                            "{}: the allocation strategy {} panicked on topic {topic}; \
                             keeping the current assignment",
                            self.group,
                            self.strategy.name()
                        );
                        return false;
                    }
                }
            }
        };
        let mut changed = self.update_process_queue_table(hooks, topic, &mine, is_order, requests);
        // Queues a broker assigned in POP mode before it went (or was replaced by a 4.x).
        changed |= self.update_pop_queues(hooks, topic, &HashSet::new(), pops);
        if changed {
            info!(
                "{}: rebalanced topic {topic} with {}: {} of {} queues are ours",
                self.group,
                self.strategy.name(),
                mine.len(),
                mq_set.len()
            );
            hooks.message_queue_changed(topic, &mq_set, &mine);
        }
        changed
    }

    /// QUERY_ASSIGNMENT to one broker of the topic (Java `queryAssignment`, a random
    /// one), unless it is known not to answer.
    fn query_assignment(&self, topic: &str, mq_set: &HashSet<MessageQueue>) -> BrokerAssignment {
        let strategy = self.strategy.name();
        if !BROKER_STRATEGIES.contains(&strategy) {
            return BrokerAssignment::ClientSide;
        }
        let mut brokers: Vec<&str> = mq_set.iter().map(|q| &*q.broker_name).collect();
        brokers.sort_unstable();
        brokers.dedup();
        if brokers.is_empty() {
            return BrokerAssignment::Keep;
        }
        let pick = crate::util::random_u64() as usize % brokers.len();
        let Some(addr) = self
            .instance
            .find_broker_address_in_subscribe(brokers[pick], MASTER_ID, true)
            .map(|r| r.addr)
        else {
            warn!("{}: no address of broker {} yet", self.group, brokers[pick]);
            return BrokerAssignment::Keep;
        };
        if self.assignment_unsupported.read().contains(&addr) {
            return BrokerAssignment::ClientSide;
        }
        match self.instance.api().query_assignment(
            &addr,
            topic,
            &self.group,
            self.instance.client_id(),
            strategy,
            self.model,
            QUERY_ASSIGNMENT_TIMEOUT,
        ) {
            Ok(Some(a)) => BrokerAssignment::Assigned(a),
            Ok(None) => {
                if !crate::client::validators::is_retry_topic(topic) {
                    warn!("{}: {addr} has no assignment of {topic}", self.group);
                }
                BrokerAssignment::Keep
            }
            Err(e) if e.kind() == ErrorKind::Unsupported => {
                info!(
                    "{}: {addr} does not allocate queues (QUERY_ASSIGNMENT not supported, a 4.x \
                     broker); allocating on the client",
                    self.group
                );
                self.assignment_unsupported.write().insert(addr);
                BrokerAssignment::ClientSide
            }
            Err(e) => {
                warn!("{}: assignment of {topic} from {addr}: {e}", self.group);
                BrokerAssignment::Keep
            }
        }
    }

    /// Java `updateMessageQueueAssignment`: PULL queues as a client-side allocation would
    /// take them, POP queues into the POP table; the group's POP retry topic is
    /// subscribed while the topic is pulled (what was popped and not acked before a switch
    /// back to PULL is revived there) and unsubscribed while it is popped (the broker
    /// pops it along with the topic).
    fn update_assignment(
        &self,
        hooks: &dyn RebalanceHooks,
        topic: &str,
        assigned: Assignment<'_>,
        is_order: bool,
        requests: &mut Vec<PullStart>,
        pops: &mut Vec<PopStart>,
    ) -> bool {
        let mut pull_set = HashSet::new();
        let mut pop_set = HashSet::new();
        for a in assigned.a {
            match a.mode {
                MessageRequestMode::Pop => pop_set.insert(a.queue),
                MessageRequestMode::Pull => pull_set.insert(a.queue),
            };
        }
        if !crate::client::validators::is_retry_topic(topic) {
            let retry = pop_retry_topic(topic, &self.group);
            if pop_set.is_empty() && !pull_set.is_empty() {
                if !self.subscriptions.read().contains_key(&retry) {
                    let selector = super::subscription::MessageSelector::by_tag("*");
                    if let Ok(sub) = super::subscription::build_subscription_data(&retry, &selector)
                    {
                        info!("{}: {topic} is pulled; subscribing {retry}", self.group);
                        self.subscriptions.write().insert(retry, sub);
                    }
                }
            } else if !pop_set.is_empty() && pull_set.is_empty() {
                self.subscriptions.write().remove(&retry);
            }
        }
        let mut changed =
            self.update_process_queue_table(hooks, topic, &pull_set, is_order, requests);
        changed |= self.update_pop_queues(hooks, topic, &pop_set, pops);
        if changed {
            info!(
                "{}: the broker assigned {} queues of {topic} to pull and {} to pop",
                self.group,
                pull_set.len(),
                pop_set.len()
            );
            let mine: HashSet<MessageQueue> = pull_set.union(&pop_set).cloned().collect();
            hooks.message_queue_changed(topic, assigned.all, &mine);
        }
        changed
    }

    /// Keeps the POP queues of `topic` in `mine`: drops the others (and idle ones), takes
    /// the new ones into `pops`; true if anything changed.
    fn update_pop_queues(
        &self,
        hooks: &dyn RebalanceHooks,
        topic: &str,
        mine: &HashSet<MessageQueue>,
        pops: &mut Vec<PopStart>,
    ) -> bool {
        let mut changed = false;
        let mut table = self.pop_process_queues.write();
        table.retain(|mq, pq| {
            if *mq.topic != *topic {
                return true;
            }
            let gone = !mine.contains(mq);
            let idle = !gone && hooks.drops_idle_queues() && pq.is_pull_expired();
            if gone || idle {
                pq.set_dropped(true);
                changed = true;
                info!(
                    "{}: removed pop queue {mq}{}",
                    self.group,
                    if idle { " (idle)" } else { "" }
                );
            }
            !(gone || idle)
        });
        for mq in mine {
            if table.contains_key(mq) {
                continue;
            }
            let pq = Arc::new(PopProcessQueue::default());
            table.insert(mq.clone(), pq.clone());
            info!("{}: took {mq} to pop", self.group);
            pops.push((mq.clone(), pq));
            changed = true;
        }
        changed
    }

    fn update_process_queue_table(
        &self,
        hooks: &dyn RebalanceHooks,
        topic: &str,
        mine: &HashSet<MessageQueue>,
        is_order: bool,
        requests: &mut Vec<PullStart>,
    ) -> bool {
        let mut changed = false;
        let current: Vec<(MessageQueue, Arc<ProcessQueue>)> = self
            .process_queues
            .read()
            .iter()
            .filter(|(mq, _)| mq.topic == topic.into())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (mq, pq) in current {
            let gone = !mine.contains(&mq);
            let idle = !gone && hooks.drops_idle_queues() && pq.is_pull_expired();
            if gone || idle {
                pq.set_dropped(true);
                if hooks.remove_unnecessary_message_queue(&mq, &pq) {
                    self.process_queues.write().remove(&mq);
                    changed = true;
                    info!(
                        "{}: removed {mq}{}",
                        self.group,
                        if idle { " (idle)" } else { "" }
                    );
                }
            }
        }
        for mq in mine {
            if self.process_queues.read().contains_key(mq) {
                continue;
            }
            if is_order && !self.lock(mq) {
                warn!(
                    "{}: {mq} is locked by another consumer; not taken this round",
                    self.group
                );
                continue;
            }
            hooks.remove_dirty_offset(mq);
            let Some(offset) = hooks.compute_pull_from_where(mq) else {
                warn!(
                    "{}: no start offset for {mq}; retried next round",
                    self.group
                );
                continue;
            };
            let pq = Arc::new(ProcessQueue::default());
            if is_order {
                pq.set_locked(true);
            }
            self.process_queues.write().insert(mq.clone(), pq.clone());
            info!("{}: took {mq} from offset {offset}", self.group);
            requests.push((mq.clone(), pq, offset));
            changed = true;
        }
        changed
    }

    fn master_of(&self, broker_name: &str) -> Option<String> {
        self.instance
            .find_broker_address_in_subscribe(broker_name, 0, true)
            .map(|r| r.addr)
    }

    /// LOCK_BATCH_MQ for one queue; true if the broker locked it for us.
    pub(crate) fn lock(&self, mq: &MessageQueue) -> bool {
        let Some(addr) = self.master_of(&mq.broker_name) else {
            return false;
        };
        match self.instance.api().lock_batch_mq(
            &addr,
            &self.group,
            self.instance.client_id(),
            std::slice::from_ref(mq),
            LOCK_TIMEOUT,
        ) {
            Ok(locked) => {
                let ok = locked.contains(mq);
                if let Some(pq) = self.process_queues.read().get(mq) {
                    pq.set_locked(ok);
                }
                ok
            }
            Err(e) => {
                warn!("{}: locking {mq}: {e}", self.group);
                false
            }
        }
    }

    /// Locks every held queue, broker by broker (Java `lockAll`, every 20 s).
    pub(crate) fn lock_all(&self) {
        for (broker, mqs) in self.held_by_broker() {
            let Some(addr) = self.master_of(&broker) else {
                continue;
            };
            match self.instance.api().lock_batch_mq(
                &addr,
                &self.group,
                self.instance.client_id(),
                &mqs,
                LOCK_TIMEOUT,
            ) {
                Ok(locked) => {
                    let locked: HashSet<MessageQueue> = locked.into_iter().collect();
                    let table = self.process_queues.read();
                    for mq in &mqs {
                        if let Some(pq) = table.get(mq) {
                            pq.set_locked(locked.contains(mq));
                        }
                    }
                }
                Err(e) => warn!("{}: locking queues on {broker}: {e}", self.group),
            }
        }
    }

    /// Unlocks one queue at its broker.
    pub(crate) fn unlock(&self, mq: &MessageQueue, oneway: bool) {
        let Some(addr) = self.master_of(&mq.broker_name) else {
            return;
        };
        if let Err(e) = self.instance.api().unlock_batch_mq(
            &addr,
            &self.group,
            self.instance.client_id(),
            std::slice::from_ref(mq),
            oneway,
            LOCK_TIMEOUT,
        ) {
            warn!("{}: unlocking {mq}: {e}", self.group);
        }
    }

    /// Unlocks every held queue, broker by broker and synchronously, by `deadline` (on
    /// shutdown). A broker not asked before the deadline frees the locks on its own when
    /// they expire (Java `rebalanceLockMaxLiveTime`, 60 s).
    pub(crate) fn unlock_all_until(&self, deadline: std::time::Instant) {
        for (broker, mqs) in self.held_by_broker() {
            let Some(addr) = self.master_of(&broker) else {
                continue;
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                warn!(
                    "{}: no time left to unlock the queues on {broker}",
                    self.group
                );
            } else if let Err(e) = self.instance.api().unlock_batch_mq(
                &addr,
                &self.group,
                self.instance.client_id(),
                &mqs,
                false,
                left.min(LOCK_TIMEOUT),
            ) {
                warn!("{}: unlocking queues on {broker}: {e}", self.group);
            }
            let table = self.process_queues.read();
            for mq in &mqs {
                if let Some(pq) = table.get(mq) {
                    pq.set_locked(false);
                }
            }
        }
    }

    fn held_by_broker(&self) -> HashMap<String, Vec<MessageQueue>> {
        let mut by: HashMap<String, Vec<MessageQueue>> = HashMap::new();
        for mq in self.process_queues.read().keys() {
            by.entry(mq.broker_name.to_string())
                .or_default()
                .push(mq.clone());
        }
        by
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::consumer::allocate::AllocateAveragely;
    use crate::consumer::subscription::{build_subscription_data, MessageSelector};
    use parking_lot::Mutex;

    /// Hooks that record what the rebalance asked for, in order.
    #[derive(Default)]
    struct Recorder {
        events: Mutex<Vec<String>>,
    }

    impl RebalanceHooks for Recorder {
        fn message_queue_changed(
            &self,
            topic: &str,
            _: &HashSet<MessageQueue>,
            mine: &HashSet<MessageQueue>,
        ) {
            self.events
                .lock()
                .push(format!("changed {topic} {}", mine.len()));
        }
        fn allocation_changed(&self) {
            self.events.lock().push("heartbeat".into());
        }
        fn remove_unnecessary_message_queue(&self, _: &MessageQueue, _: &ProcessQueue) -> bool {
            true
        }
        fn remove_dirty_offset(&self, _: &MessageQueue) {}
        fn compute_pull_from_where(&self, _: &MessageQueue) -> Option<i64> {
            Some(0)
        }
        fn dispatch_pull_requests(&self, requests: Vec<PullStart>) {
            if !requests.is_empty() {
                self.events.lock().push(format!("pulls {}", requests.len()));
            }
        }
        fn drops_idle_queues(&self) -> bool {
            false
        }
    }

    /// A broadcasting group (it allocates without asking a broker) subscribed to `topics`
    /// topics of two queues each.
    fn rebalance_of(topics: usize) -> RebalanceImpl {
        let config = crate::client::ClientOptions::new()
            .namesrv_addr("127.0.0.1:9")
            .instance_name(format!("rebalance-test-{}", crate::util::random_u64()))
            .into_config();
        let instance = MQClientInstance::new(config).unwrap();
        let r = RebalanceImpl::new(
            "g",
            MessageModel::Broadcasting,
            Box::new(AllocateAveragely),
            instance,
        );
        for i in 0..topics {
            let topic = format!("T{i}");
            let sub = build_subscription_data(&topic, &MessageSelector::by_tag("*")).unwrap();
            r.subscriptions.write().insert(topic.clone(), sub);
            let queues = (0..2).map(|q| MessageQueue::new(&topic, "b", q)).collect();
            r.topic_subscribe_info.write().insert(topic, queues);
        }
        r
    }

    #[test]
    fn a_round_sends_one_heartbeat_for_every_changed_topic_before_their_pulls() {
        let r = rebalance_of(100);
        let hooks = Recorder::default();
        r.do_rebalance(&hooks, false);
        let events = hooks.events.lock().clone();
        let changed = events.iter().filter(|e| e.starts_with("changed")).count();
        assert_eq!(changed, 100, "{events:?}");
        // Once per round, not once per topic (each heartbeat carries every subscription),
        // and the 200 new queues are pulled only after it.
        assert_eq!(
            events[changed..],
            ["heartbeat".to_string(), "pulls 200".to_string()]
        );
        assert_eq!(r.process_queues.read().len(), 200);

        // Nothing changed: neither heartbeat nor pulls.
        hooks.events.lock().clear();
        r.do_rebalance(&hooks, false);
        assert!(hooks.events.lock().is_empty(), "{:?}", hooks.events.lock());

        // One topic gains a queue: one heartbeat, one pull.
        let extra = MessageQueue::new("T7", "b", 2);
        r.topic_subscribe_info
            .write()
            .get_mut("T7")
            .unwrap()
            .insert(extra);
        r.do_rebalance(&hooks, false);
        assert_eq!(
            *hooks.events.lock(),
            ["changed T7 3", "heartbeat", "pulls 1"]
        );
    }

    /// Hooks whose allocation listener and start-offset lookup run the given closures,
    /// and that record each queue dropped ("drop <mq>") and pulled ("pull <mq>").
    struct Scripted<'a> {
        on_changed: Box<dyn Fn(&str) + Send + Sync + 'a>,
        on_lookup: Box<dyn Fn(&MessageQueue) + Send + Sync + 'a>,
        events: Mutex<Vec<String>>,
    }

    impl<'a> Scripted<'a> {
        fn new(
            on_changed: impl Fn(&str) + Send + Sync + 'a,
            on_lookup: impl Fn(&MessageQueue) + Send + Sync + 'a,
        ) -> Self {
            Scripted {
                on_changed: Box::new(on_changed),
                on_lookup: Box::new(on_lookup),
                events: Mutex::new(Vec::new()),
            }
        }
    }

    impl RebalanceHooks for Scripted<'_> {
        fn message_queue_changed(
            &self,
            topic: &str,
            _: &HashSet<MessageQueue>,
            _: &HashSet<MessageQueue>,
        ) {
            (self.on_changed)(topic);
        }
        fn allocation_changed(&self) {}
        fn remove_unnecessary_message_queue(&self, mq: &MessageQueue, _: &ProcessQueue) -> bool {
            self.events.lock().push(format!("drop {mq}"));
            true
        }
        fn remove_dirty_offset(&self, _: &MessageQueue) {}
        fn compute_pull_from_where(&self, mq: &MessageQueue) -> Option<i64> {
            (self.on_lookup)(mq);
            Some(0)
        }
        fn dispatch_pull_requests(&self, requests: Vec<PullStart>) {
            let mut events = self.events.lock();
            events.extend(requests.iter().map(|(mq, _, _)| format!("pull {mq}")));
        }
        fn drops_idle_queues(&self) -> bool {
            false
        }
    }

    /// A round that began before a topic was unsubscribed must not take its queues back
    /// after the unsubscribe dropped them: every queue of it that the round pulls is
    /// dropped after, and none is held at the end.
    #[test]
    fn an_unsubscribe_during_a_round_is_not_undone_by_the_round() {
        let r = rebalance_of(2);
        let (entered_tx, entered_rx) = crossbeam_channel::bounded(1);
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
        let held = std::sync::atomic::AtomicBool::new(false);
        // The round stops inside its first start-offset lookup of T1 until released.
        let hooks = Scripted::new(
            |_| {},
            |mq| {
                if &*mq.topic == "T1" && !held.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    let _ = entered_tx.send(());
                    let _ = release_rx.recv_timeout(Duration::from_secs(10));
                }
            },
        );
        std::thread::scope(|s| {
            let round = s.spawn(|| r.do_rebalance(&hooks, false));
            entered_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the round reaches T1");
            let (done_tx, done_rx) = crossbeam_channel::bounded(1);
            let (r, hooks) = (&r, &hooks);
            let remove = s.spawn(move || {
                let removed = r.remove_subscription("T1", |mq| {
                    hooks.events.lock().push(format!("drop {mq}"));
                });
                let _ = done_tx.send(());
                removed
            });
            // The unsubscribe either finishes now or waits for the round; either way the
            // round is let go after this.
            let _ = done_rx.recv_timeout(Duration::from_millis(300));
            let _ = release_tx.send(());
            round.join().unwrap();
            assert!(remove.join().unwrap());
        });
        let held: Vec<String> = r
            .process_queues
            .read()
            .keys()
            .filter(|mq| &*mq.topic == "T1")
            .map(|mq| mq.to_string())
            .collect();
        assert!(held.is_empty(), "still held: {held:?}");
        let events = hooks.events.lock();
        for q in 0..2 {
            let mq = MessageQueue::new("T1", "b", q).to_string();
            let last = events.iter().rev().find(|e| e.ends_with(&mq));
            assert!(
                last.is_none_or(|e| e.starts_with("drop")),
                "{mq} was pulled after it was dropped: {events:?}"
            );
        }
        assert!(!r.subscriptions.read().contains_key("T1"));
        assert!(r.process_queues.read().keys().any(|mq| &*mq.topic == "T0"));
    }

    /// An unsubscribe from inside the round (on the round's own thread, as a user's
    /// `MessageQueueListener` may) neither waits for the round forever nor has the round
    /// pull the queues it dropped.
    #[test]
    fn an_allocation_listener_may_unsubscribe_inside_the_round() {
        let r = rebalance_of(2);
        let hooks = Scripted::new(
            |topic| {
                if topic == "T1" {
                    assert!(r.remove_subscription("T1", |_| {}));
                }
            },
            |_| {},
        );
        r.do_rebalance(&hooks, false);
        let events = hooks.events.lock();
        let pulled: Vec<&String> = events.iter().filter(|e| e.starts_with("pull")).collect();
        assert!(pulled.iter().all(|e| e.contains("topic=T0,")), "{events:?}");
        assert_eq!(pulled.len(), 2, "{events:?}");
        assert!(r.process_queues.read().keys().all(|mq| &*mq.topic == "T0"));
    }

    #[test]
    fn pop_a_broker_assignment_moves_queues_between_pull_and_pop() {
        use crate::protocol::pop::{MessageQueueAssignment, MessageRequestMode};
        let r = rebalance_of(1);
        let hooks = Recorder::default();
        let all = r.topic_subscribe_info.read().get("T0").cloned().unwrap();
        let assign = |mode, ids: &[i32]| -> Vec<MessageQueueAssignment> {
            ids.iter()
                .map(|&q| MessageQueueAssignment {
                    queue: MessageQueue::new("T0", "b", q),
                    mode,
                })
                .collect()
        };
        let retry = pop_retry_topic("T0", "g");
        let round = |a| {
            let (mut pulls, mut pops) = (Vec::new(), Vec::new());
            let assigned = Assignment { all: &all, a };
            let changed = r.update_assignment(&hooks, "T0", assigned, false, &mut pulls, &mut pops);
            (changed, pulls.len(), pops.len())
        };
        // Pulled: two pull queues, and the POP retry topic is subscribed.
        assert_eq!(
            round(assign(MessageRequestMode::Pull, &[0, 1])),
            (true, 2, 0)
        );
        assert!(r.subscriptions.read().contains_key(&retry));
        assert_eq!(
            round(assign(MessageRequestMode::Pull, &[0, 1])),
            (false, 0, 0)
        );
        // Switched to POP, the whole topic: the pull queues go, one pop queue comes, and
        // the retry topic is no longer pulled (the broker pops it with the topic).
        let pulled: Vec<Arc<ProcessQueue>> = r.process_queues.read().values().cloned().collect();
        assert_eq!(round(assign(MessageRequestMode::Pop, &[-1])), (true, 0, 1));
        assert!(pulled.iter().all(|pq| pq.is_dropped()));
        assert!(r.process_queues.read().is_empty());
        assert_eq!(r.pop_process_queues.read().len(), 1);
        assert!(!r.subscriptions.read().contains_key(&retry));
        // And back to PULL: the pop queue is dropped.
        let popped = r
            .pop_process_queues
            .read()
            .values()
            .next()
            .cloned()
            .unwrap();
        assert_eq!(round(assign(MessageRequestMode::Pull, &[1])), (true, 1, 0));
        assert!(popped.is_dropped());
        assert!(r.pop_process_queues.read().is_empty());
        assert!(r.subscriptions.read().contains_key(&retry));
    }
}
