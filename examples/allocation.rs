//! Queue allocation: how the consumers of one group split a topic's queues.
//!
//! Each consumer of a clustering group computes its own share of every topic's queues from
//! the sorted queue list and the sorted list of the group's client ids, with the group's
//! allocation strategy ([`PushConsumerBuilder::allocate_strategy`]). Nobody coordinates,
//! so every consumer of a group must run the same strategy: two different ones can leave
//! queues unowned or owned twice. For each strategy this example starts two push consumers
//! of a fresh group on an 8-queue topic (with distinct instance names in their client
//! options, so they are two clients in one process), waits for the rebalance, prints their
//! [`PushConsumer::assigned_queues`] and fails unless they split the 8 queues without
//! overlap:
//!
//! - [`AllocateAveragely`] (`AVG`, the default): contiguous blocks;
//! - [`AllocateAveragelyByCircle`] (`AVG_BY_CIRCLE`): round robin;
//! - [`AllocateConsistentHash`] (`CONSISTENT_HASH`): a hash ring, stable when consumers
//!   come and go, not necessarily even;
//! - [`AllocateByConfig`] (`CONFIG`): a fixed list per consumer, whatever the group.
//!
//! Java equivalent: `consumer.setAllocateMessageQueueStrategy(new
//! AllocateMessageQueueAveragely())` (`...AveragelyByCircle`, `...ConsistentHash`,
//! `...ByConfig`) and `consumer.setInstanceName(..)`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example allocation
//! ```
//!
//! [`PushConsumerBuilder::allocate_strategy`]: rocketmq_blocking::PushConsumerBuilder::allocate_strategy

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{
    AllocateAveragely, AllocateAveragelyByCircle, AllocateByConfig, AllocateConsistentHash,
    AllocateStrategy, ConsumeStatus, MessageQueue, PushConsumer, TopicConfig,
};

const QUEUES: i32 = 8;
/// How long the two consumers may take to settle on a split.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(20);

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("AllocationTopic");
    let brokers = target
        .admin()?
        .create_topic(&TopicConfig::new(&topic, QUEUES as u32))?;
    println!("created {topic} with {QUEUES} queues on {brokers:?}");

    // The CONFIG strategy: each consumer names its queues (here: even ids / odd ids).
    let config = |parity: i32| {
        let mut queues = Vec::new();
        for broker in &brokers {
            for q in (0..QUEUES).filter(|q| q % 2 == parity) {
                queues.push(MessageQueue::new(&topic, broker, q));
            }
        }
        AllocateByConfig { queues }
    };

    let t = Setup {
        namesrv: &target.namesrv,
        topic: &topic,
        brokers: &brokers,
    };
    split(&t, "AVG", AllocateAveragely, AllocateAveragely)?;
    split(
        &t,
        "AVG_BY_CIRCLE",
        AllocateAveragelyByCircle,
        AllocateAveragelyByCircle,
    )?;
    let hash = AllocateConsistentHash::default();
    split(&t, "CONSISTENT_HASH", hash, hash)?;
    split(&t, "CONFIG", config(0), config(1))?;
    println!("every strategy split the {QUEUES} queues between the two consumers without overlap");
    Ok(())
}

/// Where the consumers run: the name servers, the topic and the brokers that hold it.
struct Setup<'a> {
    namesrv: &'a str,
    topic: &'a str,
    brokers: &'a [String],
}

/// Starts two consumers of a fresh group with these strategies, waits until each holds
/// what its strategy computes for it, and checks that this splits the topic's queues.
fn split<S1, S2>(t: &Setup, name: &str, first: S1, second: S2) -> common::Result<()>
where
    S1: AllocateStrategy + Clone + 'static,
    S2: AllocateStrategy + Clone + 'static,
{
    let Setup {
        namesrv,
        topic,
        brokers,
    } = *t;
    let group = common::unique(&format!("allocation_{}", name.to_lowercase()));
    let a = start(&group, "a", namesrv, topic, first.clone())?;
    let b = start(&group, "b", namesrv, topic, second.clone())?;

    // What each consumer computes: the same inputs on both sides, sorted.
    let mut all: Vec<MessageQueue> = brokers
        .iter()
        .flat_map(|broker| (0..QUEUES).map(move |q| MessageQueue::new(topic, broker, q)))
        .collect();
    all.sort();
    let mut cids = vec![a.client_id().to_string(), b.client_id().to_string()];
    cids.sort();
    let ids = |mqs: Vec<MessageQueue>| mqs.iter().map(|q| q.queue_id()).collect::<BTreeSet<_>>();
    let want_a = ids(first.allocate(&a.client_id(), &all, &cids));
    let want_b = ids(second.allocate(&b.client_id(), &all, &cids));

    // Rebalancing takes a moment: the second consumer's heartbeat makes the broker tell
    // the first one that the group changed.
    let deadline = Instant::now() + REBALANCE_TIMEOUT;
    let (qa, qb) = loop {
        let (qa, qb) = (held(&a, topic), held(&b, topic));
        if (qa == want_a && qb == want_b) || Instant::now() >= deadline {
            break (qa, qb);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    a.shutdown();
    b.shutdown();
    println!("{name:>16}: consumer a holds queues {qa:?}, consumer b holds {qb:?}");
    if qa != want_a || qb != want_b {
        return Err(format!(
            "{name}: after {REBALANCE_TIMEOUT:?} the consumers hold {qa:?} and {qb:?}, \
             their strategies give {want_a:?} and {want_b:?}"
        )
        .into());
    }
    let union: BTreeSet<i32> = qa.union(&qb).copied().collect();
    if !qa.is_disjoint(&qb) || union.len() != QUEUES as usize {
        return Err(format!("{name}: {qa:?} and {qb:?} do not split the {QUEUES} queues").into());
    }
    Ok(())
}

/// A consumer of `group` named `instance` with `strategy`.
fn start(
    group: &str,
    instance: &str,
    namesrv: &str,
    topic: &str,
    strategy: impl AllocateStrategy + 'static,
) -> common::Result<PushConsumer> {
    Ok(PushConsumer::builder(group)
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv)
                .instance_name(format!("{group}_{instance}")),
        )
        // Without distinct instance names, both would be one client and hold every queue.
        .subscribe(topic, "*")
        .allocate_strategy(strategy)
        .listener(|_msgs, _ctx| ConsumeStatus::Success)
        .start()?)
}

/// Queue ids of `topic` the consumer holds (not those of its group's retry topic).
fn held(consumer: &PushConsumer, topic: &str) -> BTreeSet<i32> {
    consumer
        .assigned_queues()
        .iter()
        .filter(|q| q.topic() == topic)
        .map(|q| q.queue_id())
        .collect()
}
