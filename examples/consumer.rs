//! The consumers: push concurrently, push orderly, broadcasting, and lite pull.
//!
//! Each demo sends a few messages of its own first, then consumes for up to
//! [`DEMO_TIME`] or until it has printed [`DEMO_MESSAGES`] messages. Groups are unique per
//! run and start from the first offset, so on a busy topic older messages show up too.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example consumer -- MyTopic   # default topic: TopicTest
//! ```

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use rocketmq_blocking::SelectMessageQueueByHash;
use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus, MessageModel, PushConsumer,
};
use rocketmq_blocking::{Message, MessageExt, Producer};

/// Longest a demo consumes.
const DEMO_TIME: Duration = Duration::from_secs(5);
/// Messages a demo prints at most.
const DEMO_MESSAGES: usize = 10;

use common::Result;
use rocketmq_blocking::ClientOptions;

fn main() -> Result<()> {
    common::init_logging();
    let topic = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "TopicTest".to_string());
    let target = common::target()?;
    let ns = target.namesrv.as_str();
    let producer = Producer::builder("example_consumer_producer")
        .client_options(ClientOptions::new().namesrv_addr(ns))
        .start()?;
    let run = format!("{}_{}", std::process::id(), now_ms());

    push_concurrently(ns, &producer, &topic, &run)?;
    push_orderly(ns, &producer, &topic, &run)?;
    broadcasting(ns, &producer, &topic, &run)?;
    lite_pull(ns, &topic)?;

    producer.shutdown();
    Ok(())
}

/// Push, concurrently (Java `MessageListenerConcurrently`): the consume pool runs the
/// listener on many threads at once, so messages arrive in no particular order.
fn push_concurrently(ns: &str, producer: &Producer, topic: &str, run: &str) -> Result<()> {
    println!("== push, concurrently");
    for i in 0..5 {
        producer.send(&Message::new(topic, format!("concurrently {i}")).with_tags("TagA"))?;
    }
    let (tx, rx) = mpsc::channel();
    let consumer = PushConsumer::builder(format!("example_concurrently_{run}"))
        .client_options(ClientOptions::new().namesrv_addr(ns))
        .subscribe(topic, "TagA || TagB")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            // Hand the messages to the main thread; returning success acknowledges them.
            // `ReconsumeLater` would send them back to be retried later.
            for m in msgs {
                let _ = tx.send(m.clone());
            }
            ConsumeStatus::Success
        })
        .start()?;
    let n = print_for_a_while(&rx, |m| {
        format!(
            "queue {} offset {} tag {:?}: {}",
            m.queue_id(),
            m.queue_offset(),
            m.tags(),
            String::from_utf8_lossy(m.body())
        )
    });
    consumer.shutdown();
    println!("   {n} messages");
    Ok(())
}

/// Push, orderly (Java `MessageListenerOrderly`): one thread per queue at a time, in queue
/// order. Messages sent with the same hash key land on one queue, so each order's steps
/// arrive in the order they were sent.
fn push_orderly(ns: &str, producer: &Producer, topic: &str, run: &str) -> Result<()> {
    println!("== push, orderly");
    for order in ["order-1", "order-2"] {
        for step in ["created", "paid", "shipped"] {
            let msg = Message::new(topic, format!("{order} {step}")).with_keys([order]);
            producer.send_with_selector(&msg, &SelectMessageQueueByHash, order)?;
        }
    }
    let (tx, rx) = mpsc::channel();
    let consumer = PushConsumer::builder(format!("example_orderly_{run}"))
        .client_options(ClientOptions::new().namesrv_addr(ns))
        .subscribe(topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .orderly_listener(move |msgs, _ctx| {
            for m in msgs {
                let _ = tx.send(m.clone());
            }
            // `Suspend` would retry the same messages after a pause,
            // holding back the rest of the queue.
            ConsumeOrderlyStatus::Success
        })
        .start()?;
    // Per queue, offsets must only grow.
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut out_of_order = 0;
    let n = print_for_a_while(&rx, |m| {
        let prev = last.insert(m.queue_id(), m.queue_offset());
        if prev.is_some_and(|p| p >= m.queue_offset()) {
            out_of_order += 1;
        }
        format!(
            "queue {} offset {}: {}",
            m.queue_id(),
            m.queue_offset(),
            String::from_utf8_lossy(m.body())
        )
    });
    consumer.shutdown();
    println!("   {n} messages, {out_of_order} out of queue order");
    Ok(())
}

/// Broadcasting: every consumer of the group gets every message, and each keeps its own
/// offsets in a local file instead of on the broker. Two consumers of one group run here;
/// they need different instance names to live in one process.
fn broadcasting(ns: &str, producer: &Producer, topic: &str, run: &str) -> Result<()> {
    println!("== broadcasting");
    for i in 0..3 {
        producer.send(&Message::new(topic, format!("broadcast {i}")))?;
    }
    let offsets = std::env::temp_dir().join(format!("rocketmq-example-offsets-{run}"));
    let group = format!("example_broadcasting_{run}");
    let (tx, rx) = mpsc::channel::<(&'static str, MessageExt)>();
    let mut consumers = Vec::new();
    for name in ["first", "second"] {
        let tx = tx.clone();
        let consumer = PushConsumer::builder(&group)
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(ns)
                    .instance_name(format!("example_{name}_{run}")),
            )
            .subscribe(topic, "*")
            .message_model(MessageModel::Broadcasting)
            .consume_from_where(ConsumeFromWhere::FirstOffset)
            .offset_store_dir(offsets.clone())
            .listener(move |msgs, _ctx| {
                for m in msgs {
                    let _ = tx.send((name, m.clone()));
                }
                ConsumeStatus::Success
            })
            .start()?;
        consumers.push(consumer);
    }
    drop(tx);
    // Twice the budget: each message comes once per consumer.
    let deadline = Instant::now() + DEMO_TIME;
    let mut n = 0;
    while n < 2 * DEMO_MESSAGES {
        let Ok((name, m)) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            break;
        };
        println!(
            "   {name}: queue {} offset {}: {}",
            m.queue_id(),
            m.queue_offset(),
            String::from_utf8_lossy(m.body())
        );
        n += 1;
    }
    for c in &consumers {
        c.shutdown();
    }
    let _ = std::fs::remove_dir_all(&offsets);
    println!("   {n} deliveries");
    Ok(())
}

/// Lite pull (Java `DefaultLitePullConsumer`): the application polls for messages itself.
fn lite_pull(ns: &str, topic: &str) -> Result<()> {
    use rocketmq_blocking::LitePullConsumer;

    println!("== lite pull: poll, then commit");
    let consumer = LitePullConsumer::builder(format!("example_lite_{}", now_ms()))
        .client_options(ClientOptions::new().namesrv_addr(ns))
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .auto_commit(false)
        .subscribe(topic, "*")
        .start()?;
    let deadline = Instant::now() + DEMO_TIME;
    let mut n = 0;
    while n < DEMO_MESSAGES && Instant::now() < deadline {
        for m in consumer.poll_timeout(Duration::from_millis(500))? {
            println!(
                "   {} queue {} offset {}",
                m.msg_id(),
                m.queue_id(),
                m.queue_offset()
            );
            n += 1;
        }
    }
    consumer.commit_sync()?;
    println!(
        "   polled {n}, committed; held queues: {}",
        consumer.assignment().len()
    );
    consumer.shutdown();
    Ok(())
}

/// Prints what arrives for up to [`DEMO_TIME`] or [`DEMO_MESSAGES`] messages; returns how
/// many were printed.
fn print_for_a_while(
    rx: &Receiver<MessageExt>,
    mut show: impl FnMut(&MessageExt) -> String,
) -> usize {
    let deadline = Instant::now() + DEMO_TIME;
    let mut n = 0;
    while n < DEMO_MESSAGES {
        let Ok(m) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            break;
        };
        println!("   {}", show(&m));
        n += 1;
    }
    n
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}
