//! The lite pull consumer with queues of your choice and manual offsets.
//!
//! [`LitePullConsumer`] with `auto_commit: false` ([`LitePullOptions`]): [`assign`] two
//! queues, [`poll`] their messages, [`commit_sync`] and read back what was committed with
//! [`committed`], then rewind: [`seek`] one queue to offset 5 and [`seek_to_begin`] the other
//! while it is [`pause`]d, so only the first queue delivers until it is [`resume`]d. The
//! example checks the offsets of everything it polls and fails on any surprise.
//!
//! Java equivalent: `DefaultLitePullConsumer` with `setAutoCommit(false)`, `assign(mqs)`,
//! `poll()`, `commitSync()`, `committed(mq)`, `seek(mq, offset)`, `seekToBegin(mq)`,
//! `pause(mqs)`, `resume(mqs)`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example lite_pull
//! ```
//!
//! [`assign`]: LitePullConsumer::assign
//! [`poll`]: LitePullConsumer::poll
//! [`commit_sync`]: LitePullConsumer::commit_sync
//! [`committed`]: LitePullConsumer::committed
//! [`seek`]: LitePullConsumer::seek
//! [`seek_to_begin`]: LitePullConsumer::seek_to_begin
//! [`pause`]: LitePullConsumer::pause
//! [`resume`]: LitePullConsumer::resume

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    ConsumeFromWhere, LitePullConsumer, Message, MessageQueue, Producer, TopicConfig,
};

/// Messages sent to each queue.
const PER_QUEUE: i64 = 10;
/// How long one step may wait for its messages.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Polled (queue id, offset) pairs.
type Polled = Vec<(i32, i64)>;

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("LitePullTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 2))?;

    let producer = Producer::builder(common::unique("lite_pull_producer"))
        .client_options(target.options())
        .start()?;
    // The lite pull consumer has no queue lookup of its own; the producer's will do.
    let queues: Vec<MessageQueue> = producer.fetch_publish_message_queues(&topic)?;
    let [q0, q1] = queues.as_slice() else {
        return Err(format!("expected 2 queues, got {queues:?}").into());
    };
    for mq in [q0, q1] {
        for i in 0..PER_QUEUE {
            let body = format!("queue {} message {i}", mq.queue_id());
            producer.send_to_queue(&Message::new(&topic, body), mq)?;
        }
    }
    println!("sent {PER_QUEUE} messages to each of queues 0 and 1 of {topic}");

    let consumer = LitePullConsumer::builder(common::unique("lite_pull_consumer"))
        .client_options(target.options())
        .auto_commit(false)
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .start()?;
    consumer.assign(&[q0.clone(), q1.clone()])?;
    println!(
        "assigned queues {:?}",
        consumer
            .assignment()
            .iter()
            .map(|q| q.queue_id())
            .collect::<Vec<_>>()
    );

    // 1. Everything, in order per queue.
    let polled = poll_n(&consumer, 2 * PER_QUEUE as usize)?;
    expect(&polled, 0, 0..PER_QUEUE)?;
    expect(&polled, 1, 0..PER_QUEUE)?;
    println!("polled offsets 0..{PER_QUEUE} of both queues");
    // auto_commit is off: polling alone commits nothing. (A new group reads as 0 or as
    // nothing, depending on whether the broker still holds the queue's first message.)
    let before = consumer.committed(q0)?;
    println!("committed offset of queue 0 before commit_sync: {before:?}");
    if before == Some(PER_QUEUE) {
        return Err("the offsets were committed without commit_sync".into());
    }

    // 2. Commit by hand: the broker now stores "next offset to consume" per queue.
    consumer.commit_sync()?;
    for mq in [q0, q1] {
        let c = consumer.committed(mq)?;
        println!("committed offset of queue {}: {c:?}", mq.queue_id());
        if c != Some(PER_QUEUE) {
            return Err(format!(
                "queue {} committed {c:?}, expected {PER_QUEUE}",
                mq.queue_id()
            )
            .into());
        }
    }

    // 3. Rewind: queue 0 to offset 5; queue 1 to its beginning, but paused.
    consumer.pause(std::slice::from_ref(q1));
    consumer.seek_to_begin(q1)?;
    consumer.seek(q0, 5)?;
    let polled = poll_n(&consumer, (PER_QUEUE - 5) as usize)?;
    expect(&polled, 0, 5..PER_QUEUE)?;
    // Queue 1 stays quiet while paused.
    let extra = poll_for(&consumer, Duration::from_secs(2))?;
    if !extra.is_empty() {
        return Err(format!("polled {extra:?} while queue 1 was paused").into());
    }
    println!("after seek(q0, 5): polled q0 offsets 5..{PER_QUEUE}; paused q1 gave nothing for 2 s");

    consumer.resume(std::slice::from_ref(q1));
    let polled = poll_n(&consumer, PER_QUEUE as usize)?;
    expect(&polled, 1, 0..PER_QUEUE)?;
    println!("after resume(q1): polled q1 offsets 0..{PER_QUEUE} again (from seek_to_begin)");

    consumer.commit_sync()?;
    println!(
        "committed: q0 {:?}, q1 {:?}",
        consumer.committed(q0)?,
        consumer.committed(q1)?
    );

    consumer.shutdown();
    producer.shutdown();
    Ok(())
}

/// Polls until `n` messages came; fails after [`STEP_TIMEOUT`].
fn poll_n(consumer: &LitePullConsumer, n: usize) -> common::Result<Polled> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut polled = Vec::new();
    while polled.len() < n {
        if Instant::now() >= deadline {
            return Err(format!("polled {} of {n} messages: {polled:?}", polled.len()).into());
        }
        for m in consumer.poll_timeout(Duration::from_millis(500))? {
            polled.push((m.queue_id(), m.queue_offset()));
        }
    }
    Ok(polled)
}

/// Everything polled within `time`.
fn poll_for(consumer: &LitePullConsumer, time: Duration) -> common::Result<Polled> {
    let deadline = Instant::now() + time;
    let mut polled = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        for m in consumer.poll_timeout(left)? {
            polled.push((m.queue_id(), m.queue_offset()));
        }
    }
    Ok(polled)
}

/// Fails unless queue `queue_id`'s offsets in `polled` are exactly `offsets`, in order.
fn expect(polled: &Polled, queue_id: i32, offsets: std::ops::Range<i64>) -> common::Result<()> {
    let mut by_queue: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (q, o) in polled {
        by_queue.entry(*q).or_default().push(*o);
    }
    let got = by_queue.remove(&queue_id).unwrap_or_default();
    let want: Vec<i64> = offsets.collect();
    if got != want {
        return Err(format!("queue {queue_id}: polled offsets {got:?}, expected {want:?}").into());
    }
    Ok(())
}
