//! Choosing the queue of a send, and ordered messages consumed in order.
//!
//! Shows [`Producer::fetch_publish_message_queues`] and [`Producer::send_to_queue`] (send to
//! a queue you picked), then ordered messages: every step of one order goes to one queue,
//! picked by [`SelectMessageQueueByHash`] or by a closure, through
//! [`Producer::send_with_selector`], and an orderly listener
//! ([`PushConsumerBuilder::orderly_listener`]) receives each order's steps in the order they
//! were sent.
//!
//! Java equivalent: `producer.fetchPublishMessageQueues(topic)`, `producer.send(msg, mq)`,
//! `producer.send(msg, new SelectMessageQueueByHash(), orderId)` or
//! `producer.send(msg, (mqs, m, arg) -> ..., orderId)`, and
//! `consumer.registerMessageListener(new MessageListenerOrderly() { ... })`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example send_to_queue
//! ```
//!
//! [`PushConsumerBuilder::orderly_listener`]: rocketmq_blocking::PushConsumerBuilder::orderly_listener

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeOrderlyStatus, Message, MessageQueue, Producer, PushConsumer,
    SelectMessageQueueByHash, TopicConfig,
};

/// How long the consumer may take to receive every ordered message.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(40);
/// The steps of every order, in the order they must be consumed.
const STEPS: [&str; 4] = ["created", "paid", "shipped", "delivered"];

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("SendToQueueTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 4))?;
    println!("created topic {topic} with 4 queues");

    let producer = Producer::builder(common::unique("send_to_queue_producer"))
        .client_options(target.options())
        .start()?;

    // 1. Send to a queue of our choice.
    let queues = producer.fetch_publish_message_queues(&topic)?;
    println!(
        "publish queues (broker/queue id): {}",
        queues
            .iter()
            .map(|q| format!("{}/{}", q.broker_name(), q.queue_id()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let chosen = queues.last().ok_or("the topic has no queue")?;
    for i in 0..3 {
        let r = producer.send_to_queue(&Message::new(&topic, format!("direct {i}")), chosen)?;
        println!(
            "send_to_queue: {} stored on queue {} at offset {}",
            r.msg_id(),
            r.message_queue().queue_id(),
            r.queue_offset()
        );
        if r.message_queue() != chosen {
            return Err(format!("asked for {chosen}, stored on {}", r.message_queue()).into());
        }
    }

    // 2. Ordered messages: the steps of one order on one queue, interleaved across orders.
    // Two orders by the hash of a string key (Java's hashCode, so Java producers agree),
    // one by a closure over a numeric id.
    let by_id = |mqs: &[MessageQueue], _msg: &Message, id: &u64| {
        mqs.get((*id % mqs.len() as u64) as usize).cloned()
    };
    let mut queue_of: BTreeMap<String, i32> = BTreeMap::new();
    for step in STEPS {
        for order in ["order-A", "order-B"] {
            let msg = Message::new(&topic, format!("{order} {step}")).with_keys([order]);
            let r = producer.send_with_selector(&msg, &SelectMessageQueueByHash, order)?;
            check_one_queue(&mut queue_of, order, r.message_queue())?;
        }
        let order = "order-7";
        let msg = Message::new(&topic, format!("{order} {step}")).with_keys([order]);
        let r = producer.send_with_selector(&msg, &by_id, &7)?;
        check_one_queue(&mut queue_of, order, r.message_queue())?;
    }
    println!(
        "ordered: sent {} steps each of {queue_of:?} (order -> queue id)",
        STEPS.len()
    );

    // 3. Consume them with an orderly listener: one call per queue at a time, in queue order.
    let (tx, rx) = mpsc::channel::<(String, String)>();
    let consumer = PushConsumer::builder(common::unique("send_to_queue_consumer"))
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .orderly_listener(move |msgs, _ctx| {
            for m in msgs {
                let body = String::from_utf8_lossy(m.body()).into_owned();
                if let Some((order, step)) = body.split_once(' ') {
                    if order.starts_with("order-") {
                        let _ = tx.send((order.to_string(), step.to_string()));
                    }
                }
            }
            ConsumeOrderlyStatus::Success
        })
        .start()?;

    let expected = queue_of.len() * STEPS.len();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    for _ in 0..expected {
        let Ok((order, step)) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            return Err(format!(
                "received {} of {expected} ordered messages within {CONSUME_TIMEOUT:?}: {seen:?}",
                seen.values().map(Vec::len).sum::<usize>()
            )
            .into());
        };
        seen.entry(order).or_default().push(step);
    }
    for (order, steps) in &seen {
        println!("consumed {order}: {}", steps.join(" -> "));
        if steps != &STEPS {
            return Err(format!("{order} arrived out of order: {steps:?}").into());
        }
    }
    println!("every order arrived complete and in order");

    consumer.shutdown();
    producer.shutdown();
    Ok(())
}

/// Fails when `order` landed on a different queue than before.
fn check_one_queue(
    queue_of: &mut BTreeMap<String, i32>,
    order: &str,
    mq: &MessageQueue,
) -> common::Result<()> {
    let first = *queue_of
        .entry(order.to_string())
        .or_insert_with(|| mq.queue_id());
    if first != mq.queue_id() {
        return Err(format!("{order} went to queues {first} and {}", mq.queue_id()).into());
    }
    Ok(())
}
