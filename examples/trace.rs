//! Message trace: a traced producer and a traced push consumer, as Java's
//! `enableMsgTrace` gives them.
//!
//! Both write trace records to `RMQ_SYS_TRACE_TOPIC` (in Java's format, batched in the
//! background; tracing never slows or fails a send). Afterwards the official admin tool
//! shows the message's life: `mqadmin queryMsgTraceById -n $NAMESRV_ADDR -i <msg id>`
//! prints a `Pub` row for the producer group and a `Sub` row for the consumer group.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example trace
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::mpsc;
use std::time::Duration;

use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer, TopicConfig,
};

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("TracedTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 2))?;

    let producer = Producer::builder(common::unique("traced_producer"))
        .client_options(target.options())
        .enable_msg_trace(true)
        .start()?;
    let (tx, rx) = mpsc::channel();
    let consumer = PushConsumer::builder(common::unique("traced_consumer"))
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .enable_msg_trace(true)
        .listener(move |msgs, _| {
            for m in msgs {
                let _ = tx.send(m.msg_id().to_string());
            }
            ConsumeStatus::Success
        })
        .start()?;

    let id = producer
        .send(&Message::new(&topic, "traced").with_keys(["order-42"]))?
        .msg_id()
        .to_string();
    let consumed = rx.recv_timeout(Duration::from_secs(60))?;
    println!("sent and consumed {consumed}");
    // Shutdown sends the records still queued.
    consumer.shutdown();
    producer.shutdown();
    println!(
        "trace written; see it with: mqadmin queryMsgTraceById -n {} -i {id}",
        target.namesrv
    );
    Ok(())
}
