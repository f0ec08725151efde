//! The push consumer's options (Java `DefaultMQPushConsumer`'s fields, with its
//! defaults), and what both consumer builders set up alike before a client starts: the
//! client configuration, the namespaced group, the shared instance, the rebalance and
//! the offset store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::client::{manager, namespace, ClientConfig, ClientOptions, MQClientInstance};
use crate::error::Result;

/// Push consumer settings with Java's defaults (Java `DefaultMQPushConsumer` fields).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PushConsumerOptions {
    /// Clustering (default) or broadcasting.
    pub message_model: MessageModel,
    /// Start position of a group without stored offsets.
    pub consume_from_where: ConsumeFromWhere,
    /// Consume threads at least (Java 20).
    pub consume_thread_min: usize,
    /// Consume threads at most (Java 20).
    pub consume_thread_max: usize,
    /// Backlog (messages not yet consumed, summed over the held queues) above which the
    /// periodic pool adjustment adds a consume thread (Java 100,000).
    pub adjust_thread_pool_nums_threshold: u64,
    /// Pause pulls of a queue whose cached offsets span more than this (Java 2000).
    pub consume_concurrently_max_span: u64,
    /// Pause pulls of a queue with more cached messages (Java 1000).
    pub pull_threshold_for_queue: usize,
    /// Pause pulls of a queue with more cached MiB (Java 100).
    pub pull_threshold_size_for_queue_mib: u64,
    /// Cached messages per topic: when set, each held queue of a topic gets an equal share
    /// (at least 1) in place of `pull_threshold_for_queue`, recomputed at every rebalance
    /// (Java `pullThresholdForTopic`, -1: unset).
    #[doc(alias = "pullThresholdForTopic")]
    pub pull_threshold_for_topic: Option<usize>,
    /// Cached MiB per topic, shared the same way in place of
    /// `pull_threshold_size_for_queue_mib` (Java `pullThresholdSizeForTopic`, -1: unset).
    #[doc(alias = "pullThresholdSizeForTopic")]
    pub pull_threshold_size_for_topic_mib: Option<u64>,
    /// Pause between pulls of a queue (Java 0).
    pub pull_interval: Duration,
    /// Messages per listener call (Java 1).
    pub consume_message_batch_max_size: usize,
    /// Messages per pull (Java 32).
    pub pull_batch_size: usize,
    /// Send the subscription with every pull (Java false).
    pub post_subscription_when_pull: bool,
    /// Deliveries of a failed message before it goes to the DLQ; `None` is Java's -1:
    /// 16 for a concurrent listener, unlimited for an orderly one.
    pub max_reconsume_times: Option<u32>,
    /// Orderly: pause before a suspended batch is retried (Java
    /// `suspendCurrentQueueTimeMillis`, 1 s).
    #[doc(alias = "suspendCurrentQueueTimeMillis")]
    pub suspend_time: Duration,
    /// Delay of a pull retry after an error (Java 1 s, `pullTimeDelayMillsWhenException`).
    pub pull_time_delay_when_exception: Duration,
    /// Directory of broadcasting offsets (Java `rocketmq.client.localOffsetStoreDir`).
    pub offset_store_dir: PathBuf,
    /// How long [`PushConsumer::shutdown`] (and `Drop`) waits for listeners that are
    /// running (Java `awaitTerminationMillisWhenShutdown`, default 0: no wait). See
    /// [`PushConsumer::shutdown`] for what happens to a batch whose listener has not
    /// returned by then.
    #[doc(alias = "awaitTerminationMillisWhenShutdown")]
    pub await_termination_when_shutdown: Duration,
    /// A concurrent listener still running on a batch after this long has the batch's
    /// messages sent back for retry and taken off its queue, so that the queue's offset
    /// moves on (Java `consumeTimeout`, 15 min). The listener is not interrupted; what it
    /// returns later no longer counts for those messages. Orderly listeners are not timed.
    #[doc(alias = "consumeTimeout")]
    pub consume_timeout: Duration,
    /// Record a trace of every listener call in the trace topic (Java `enableMsgTrace`,
    /// false).
    #[doc(alias = "enableMsgTrace")]
    pub enable_msg_trace: bool,
    /// The trace topic when tracing (Java `customizedTraceTopic`; default
    /// `RMQ_SYS_TRACE_TOPIC`).
    #[doc(alias = "customizedTraceTopic")]
    pub trace_topic: Option<String>,
    /// How often offsets are written to the broker (Java `persistConsumerOffsetInterval`,
    /// 5 s). This and [`adjust_thread_pool_interval`](Self::adjust_thread_pool_interval)
    /// run on the shared client instance: the first client of a client id to start sets
    /// them.
    #[doc(alias = "persistConsumerOffsetInterval")]
    pub persist_offset_interval: Duration,
    /// How often consume pools are resized to the backlog (Java's adjustment job, 1 min).
    pub adjust_thread_pool_interval: Duration,
    /// Allocate queues here (true, Java's default) or ask a 5.x broker (false, Java
    /// `setClientRebalance(false)`): the broker then allocates, and says per queue whether
    /// to pull it or to pop it (`mqadmin setConsumeMode`). A 4.x broker cannot, and the
    /// allocation stays here. Orderly and broadcasting consumers always allocate here.
    #[doc(alias = "clientRebalance")]
    pub client_rebalance: bool,
    /// POP mode: how long a popped message stays invisible to the group before the broker
    /// hands it out again unless acked (Java `popInvisibleTime`, 60 s, 5 s..=300 s). A
    /// listener that takes longer has it renewed before it expires.
    #[doc(alias = "popInvisibleTime")]
    pub pop_invisible_time: Duration,
    /// POP mode: messages per pop (Java `popBatchNums`, 32, 1..=32).
    #[doc(alias = "popBatchNums")]
    pub pop_batch_nums: u32,
    /// POP mode: pops of a queue pause while more of its messages wait for their ack
    /// (Java `popThresholdForQueue`, 96).
    #[doc(alias = "popThresholdForQueue")]
    pub pop_threshold_for_queue: usize,
    /// POP mode: ack what the listeners of one pop consumed with one BATCH_ACK_MESSAGE
    /// per broker once the last of them returns (or when the first receipts reach half
    /// their invisible time), instead of one ACK_MESSAGE per message (default false: the
    /// Java 5.3 push consumer acks one by one; the 5.x proxy's `enableBatchAck` is false
    /// too). A broker before 5.1.1 refuses batch acks and gets single ones.
    #[doc(alias = "enableBatchAck")]
    pub pop_batch_ack: bool,
}

/// Shortest [`PushConsumerOptions::pop_invisible_time`] (Java `MIN_POP_INVISIBLE_TIME`).
pub const MIN_POP_INVISIBLE_TIME: Duration = Duration::from_secs(5);
/// Longest [`PushConsumerOptions::pop_invisible_time`] (Java `MAX_POP_INVISIBLE_TIME`).
pub const MAX_POP_INVISIBLE_TIME: Duration = Duration::from_secs(300);

impl Default for PushConsumerOptions {
    fn default() -> Self {
        PushConsumerOptions {
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            consume_thread_min: 20,
            consume_thread_max: 20,
            adjust_thread_pool_nums_threshold: 100_000,
            consume_concurrently_max_span: 2000,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_mib: 100,
            pull_threshold_for_topic: None,
            pull_threshold_size_for_topic_mib: None,
            pull_interval: Duration::ZERO,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            post_subscription_when_pull: false,
            max_reconsume_times: None,
            suspend_time: Duration::from_millis(1000),
            pull_time_delay_when_exception: Duration::from_millis(1000),
            offset_store_dir: default_local_offset_dir(),
            await_termination_when_shutdown: Duration::ZERO,
            consume_timeout: Duration::from_secs(15 * 60),
            enable_msg_trace: false,
            trace_topic: None,
            persist_offset_interval: crate::client::DEFAULT_PERSIST_OFFSET_INTERVAL,
            adjust_thread_pool_interval: crate::client::DEFAULT_ADJUST_THREAD_POOL_INTERVAL,
            client_rebalance: true,
            pop_invisible_time: Duration::from_secs(60),
            pop_batch_nums: 32,
            pop_threshold_for_queue: 96,
            pop_batch_ack: false,
        }
    }
}

impl PushConsumerOptions {
    pub(crate) fn max_reconsume_times_concurrently(&self) -> i32 {
        self.max_reconsume_times
            .map_or(16, |n| i32::try_from(n).unwrap_or(i32::MAX))
    }

    pub(crate) fn max_reconsume_times_orderly(&self) -> i32 {
        self.max_reconsume_times
            .map_or(i32::MAX, |n| i32::try_from(n).unwrap_or(i32::MAX))
    }
}

/// What both consumer builders set up alike: the client configuration and the namespaced
/// group, checked before any client instance exists.
pub(crate) struct ConsumerConfig {
    pub(crate) config: ClientConfig,
    pub(crate) namespace: Option<String>,
    pub(crate) group: String,
}

impl ConsumerConfig {
    /// Wraps `group` in the namespace; for clustering, makes the instance name unique per
    /// process (Java `changeInstanceNameToPID`); for broadcasting, checks that the offsets
    /// file stays inside `offset_dir`, so a bad name creates nothing.
    pub(crate) fn new(
        client: ClientOptions,
        group: &str,
        model: MessageModel,
        offset_dir: &std::path::Path,
    ) -> Result<ConsumerConfig> {
        let mut config = client.into_config();
        let namespace = config.namespace();
        let group = namespace::wrap(namespace.as_deref(), group);
        match model {
            MessageModel::Clustering => config.change_instance_name_to_pid(),
            MessageModel::Broadcasting => {
                offset_store::local_store_path(offset_dir, &config.client_id(), &group)?;
            }
        }
        Ok(ConsumerConfig {
            config,
            namespace,
            group,
        })
    }

    /// The namespaced name of `topic`.
    pub(crate) fn wrap(&self, topic: &str) -> String {
        namespace::wrap(self.namespace.as_deref(), topic)
    }

    /// The shared client instance, the group's rebalance and its offset store.
    pub(crate) fn instance_rebalance_store(
        &self,
        model: MessageModel,
        strategy: Option<Box<dyn AllocateStrategy>>,
        offset_dir: &std::path::Path,
    ) -> Result<(
        Arc<MQClientInstance>,
        RebalanceImpl,
        Box<dyn offset_store::OffsetStore>,
    )> {
        let instance = manager::get_or_create_instance(&self.config)?;
        let strategy = strategy.unwrap_or_else(|| Box::new(AllocateAveragely));
        let rebalance = RebalanceImpl::new(&self.group, model, strategy, instance.clone());
        let store = offset_store::open_store(model, &instance, offset_dir, &self.group)?;
        Ok((instance, rebalance, store))
    }
}

/// What a running consumer does after subscribing to `topic` (with namespace): fetch its
/// route, tell the brokers, rebalance now.
pub(super) fn follow_new_subscription(instance: &MQClientInstance, group: &str, topic: &str) {
    if let Err(e) = instance.update_topic_route(topic) {
        log::warn!("{group}: route of {topic}: {e}");
    }
    instance.send_heartbeat_to_all_brokers_with_lock();
    instance.rebalance_immediately();
}
