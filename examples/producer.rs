//! The producer's send modes: sync, async (callback and future), oneway, ordered, batch.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example producer -- MyTopic   # default topic: TopicTest
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::mpsc;

use rocketmq_blocking::SelectMessageQueueByHash;
use rocketmq_blocking::{Message, Producer};

fn main() -> common::Result<()> {
    common::init_logging();
    let topic = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "TopicTest".to_string());
    // Keep `target` to the end: dropping it stops a cluster this run started.
    let target = common::target()?;
    let producer = Producer::builder("example_producer")
        .client_options(target.options())
        .start()?;

    // Sync: returns once the broker stored the message.
    let r = producer.send(&Message::new(&topic, "sync hello").with_tags("TagA"))?;
    println!(
        "sync: {} -> {} offset {}",
        r.msg_id(),
        r.message_queue(),
        r.queue_offset()
    );

    // Async with a callback on the callback pool.
    let (tx, rx) = mpsc::channel();
    producer.send_async(Message::new(&topic, "async hello"), move |r| {
        let _ = tx.send(r);
    })?;
    println!("async: {:?}", rx.recv()?.map(|r| r.msg_id().to_string()));

    // Async with a future.
    let f = producer.send_async_future(Message::new(&topic, "future hello"))?;
    println!("future: {:?}", f.wait().map(|r| r.msg_id().to_string()));

    // Oneway: no answer.
    producer.send_oneway(&Message::new(&topic, "oneway hello"))?;

    // Ordered: every message of one order on one queue.
    for step in ["created", "paid", "shipped"] {
        let r = producer.send_with_selector(
            &Message::new(&topic, step),
            &SelectMessageQueueByHash,
            "order-42",
        )?;
        println!("ordered {step}: queue {}", r.message_queue().queue_id());
    }

    // Batch: one request, several messages of one topic.
    let batch: Vec<Message> = (0..3)
        .map(|i| Message::new(&topic, format!("batch {i}")))
        .collect();
    let r = producer.send_batch(&batch)?;
    println!("batch: ids {}", r.msg_id());

    producer.shutdown();
    Ok(())
}
