//! Retries and the dead-letter queue.
//!
//! A concurrent listener that answers [`ConsumeStatus::ReconsumeLater`] sends the message
//! back to the broker, which redelivers it later (through the group's `%RETRY%<group>`
//! topic) with a higher [`MessageExt::reconsume_times`]. Here the delay of each retry is
//! delay level 1 (1 s), set with [`ConsumeConcurrentlyContext::set_reconsume_delay`], and
//! the group allows [`max_reconsume_times`]`(2)`: the message `flaky` is delivered three
//! times (reconsume times 0, 1, 2) and then moved to the dead-letter queue
//! `%DLQ%<group>`. The message `poison` is answered with [`ReconsumeDelay::DeadLetter`]
//! and goes there at once, after one delivery. A second consumer reads the dead-letter
//! topic and checks both arrived. The example fails if the deliveries differ.
//!
//! Java equivalent: `consumer.setMaxReconsumeTimes(2)` and, in a
//! `MessageListenerConcurrently`, `context.setDelayLevelWhenNextConsume(1)` (or `-1` for
//! straight to the DLQ) with `return ConsumeConcurrentlyStatus.RECONSUME_LATER;`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example retry_dlq
//! ```
//!
//! [`max_reconsume_times`]: rocketmq_blocking::PushConsumerBuilder::max_reconsume_times
//! [`MessageExt::reconsume_times`]: rocketmq_blocking::MessageExt::reconsume_times
//! [`ConsumeConcurrentlyContext::set_reconsume_delay`]: rocketmq_blocking::ConsumeConcurrentlyContext::set_reconsume_delay

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer, ReconsumeDelay, TopicConfig,
};

const MAX_RECONSUME_TIMES: u32 = 2;
/// How long the whole retry sequence may take.
const TIMEOUT: Duration = Duration::from_secs(45);

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("RetryTopic");
    let group = common::unique("retry_consumer");
    let dlq_topic = format!("%DLQ%{group}");
    let admin = target.admin()?;
    admin.create_topic(&TopicConfig::new(&topic, 2))?;
    // The broker creates a new group's retry topic itself, at the group's first heartbeat;
    // but the consumer looked up its routes just before, and would only see the retry topic
    // at its next route poll (30 s): the first retry would come ~30 s late. Creating it
    // first, as an operator would (`mqadmin updateTopic -t %RETRY%<group>`), avoids that.
    admin.create_topic(&TopicConfig::new(format!("%RETRY%{group}"), 1))?;

    let producer = Producer::builder(common::unique("retry_producer"))
        .client_options(target.options())
        .start()?;
    for key in ["flaky", "poison"] {
        producer.send(&Message::new(&topic, format!("{key} body")).with_keys([key]))?;
    }
    println!("sent messages with keys flaky and poison to {topic}");

    // Every delivery: (key, reconsume times, topic, when).
    let (tx, rx) = mpsc::channel::<(String, u32, String, Instant)>();
    let consumer = PushConsumer::builder(&group)
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .max_reconsume_times(MAX_RECONSUME_TIMES)
        .listener(move |msgs, ctx| {
            // One message per call (the default batch size of 1).
            let m = &msgs[0];
            let key = m.keys().next().unwrap_or_default().to_string();
            // A retry comes from %RETRY%<group> but shows the original topic.
            let topic = m.topic().to_string();
            let _ = tx.send((key.clone(), m.reconsume_times(), topic, Instant::now()));
            ctx.set_reconsume_delay(if key == "poison" {
                ReconsumeDelay::DeadLetter
            } else {
                ReconsumeDelay::Level(1)
            });
            ConsumeStatus::ReconsumeLater
        })
        .start()?;

    // flaky: reconsume times 0, 1, 2; poison: 0 only.
    let expected_deliveries = MAX_RECONSUME_TIMES as usize + 2;
    let mut deliveries: BTreeMap<String, Vec<(u32, Instant)>> = BTreeMap::new();
    let start = Instant::now();
    let deadline = start + TIMEOUT;
    for _ in 0..expected_deliveries {
        let Ok((key, times, got_topic, at)) =
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            return Err(format!("only these deliveries within {TIMEOUT:?}: {deliveries:?}").into());
        };
        if got_topic != topic {
            return Err(format!("{key:?} was delivered with topic {got_topic}").into());
        }
        println!(
            "{:5.1} s: delivered {key:?} with reconsume_times {times} -> ReconsumeLater",
            at.duration_since(start).as_secs_f64()
        );
        deliveries.entry(key).or_default().push((times, at));
    }
    // A further delivery would mean the message did not go to the DLQ.
    if let Ok((key, times, _, _)) = rx.recv_timeout(Duration::from_secs(3)) {
        return Err(format!("{key:?} delivered again with reconsume_times {times}").into());
    }
    let times = |key: &str| -> Vec<u32> {
        deliveries
            .get(key)
            .map_or(Vec::new(), |v| v.iter().map(|d| d.0).collect())
    };
    let flaky_expected: Vec<u32> = (0..=MAX_RECONSUME_TIMES).collect();
    if times("flaky") != flaky_expected || times("poison") != [0] {
        return Err(format!(
            "expected flaky {flaky_expected:?} and poison [0], got {:?} and {:?}",
            times("flaky"),
            times("poison")
        )
        .into());
    }
    consumer.shutdown();

    // Both are now in the group's dead-letter topic; read them back from there.
    admin.wait_for_route(&dlq_topic, 1, Duration::from_secs(10))?;
    println!("dead-letter topic {dlq_topic} exists; consuming it");
    let (tx, rx) = mpsc::channel::<(String, String, u32)>();
    let dlq_consumer = PushConsumer::builder(common::unique("dlq_reader"))
        .client_options(target.options())
        .subscribe(&dlq_topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            for m in msgs {
                let key = m.keys().next().unwrap_or_default().to_string();
                let _ = tx.send((key, m.topic().to_string(), m.reconsume_times()));
            }
            ConsumeStatus::Success
        })
        .start()?;
    let mut dead = BTreeMap::new();
    while dead.len() < 2 {
        let Ok((key, topic, times)) =
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            return Err(format!("only {dead:?} found in {dlq_topic} within {TIMEOUT:?}").into());
        };
        println!("in the DLQ: {key:?} (topic {topic}, reconsume_times {times})");
        dead.insert(key, times);
    }
    if !dead.contains_key("flaky") || !dead.contains_key("poison") {
        return Err(format!("the DLQ holds {dead:?}, expected flaky and poison").into());
    }
    println!(
        "flaky was retried {MAX_RECONSUME_TIMES} times, poison none, and both are in {dlq_topic}"
    );

    dlq_consumer.shutdown();
    producer.shutdown();
    Ok(())
}
