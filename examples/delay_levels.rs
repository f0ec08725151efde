//! Delayed delivery with delay levels.
//!
//! Sends one message with [`Message::set_delay_time_level`]`(2)` and one without. The
//! broker holds the delayed one back (in its `SCHEDULE_TOPIC_XXXX`) and delivers it after
//! the time its `messageDelayLevel` list gives level 2: 5 s on a default broker
//! (`1s 5s 10s 30s 1m 2m ... 2h`). The example measures, for each message, the time from
//! the send to its delivery to the listener and fails if the delayed message came before
//! 5 s, or the other one did not come well before it.
//!
//! Java equivalent: `msg.setDelayTimeLevel(2); producer.send(msg);`.
//!
//! With `NAMESRV_ADDR` set it uses that cluster (whose `messageDelayLevel` must keep
//! level 2 at 5 s), else it starts a local one.
//!
//! ```sh
//! cargo run --example delay_levels
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer, TopicConfig,
};

/// Delay level 2 on a broker with the default `messageDelayLevel`.
const LEVEL: u32 = 2;
const LEVEL_DELAY: Duration = Duration::from_secs(5);
/// How long to wait for both messages.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(40);

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("DelayTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 4))?;

    // Start consuming first, so delivery time is what we measure, not consumer start-up.
    let (tx, rx) = mpsc::channel::<(String, Instant, SystemTime, SystemTime)>();
    let consumer = PushConsumer::builder(common::unique("delay_consumer"))
        .client_options(target.options())
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            let now = Instant::now();
            for m in msgs {
                let body = String::from_utf8_lossy(m.body()).into_owned();
                let _ = tx.send((body, now, m.born_timestamp(), m.store_timestamp()));
            }
            ConsumeStatus::Success
        })
        .start()?;

    let producer = Producer::builder(common::unique("delay_producer"))
        .client_options(target.options())
        .start()?;
    let mut delayed = Message::new(&topic, "delayed");
    delayed.set_delay_time_level(LEVEL);
    let sent_at = Instant::now();
    producer.send(&delayed)?;
    producer.send(&Message::new(&topic, "immediate"))?;
    println!("sent one message with delay level {LEVEL} and one without");

    let mut elapsed = std::collections::BTreeMap::new();
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    while elapsed.len() < 2 {
        let Ok((body, at, born, stored)) =
            rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            return Err(format!(
                "received only {elapsed:?} within {CONSUME_TIMEOUT:?} (NAMESRV_ADDR broker \
                 with a custom messageDelayLevel?)"
            )
            .into());
        };
        let e = at.duration_since(sent_at);
        // A delayed message is stored twice: in the schedule topic at the send, then in the
        // real topic when due. Its born time is the send; its store time the second store.
        let born_to_store = stored.duration_since(born).unwrap_or_default();
        println!(
            "received {body:?} {:.2} s after the send (born -> stored in the topic: {:.2} s)",
            e.as_secs_f64(),
            born_to_store.as_secs_f64()
        );
        elapsed.insert(body, e);
    }

    let delayed = elapsed["delayed"];
    let immediate = elapsed["immediate"];
    if delayed < LEVEL_DELAY {
        return Err(
            format!("the delayed message came after {delayed:?}, before {LEVEL_DELAY:?}").into(),
        );
    }
    if immediate >= LEVEL_DELAY {
        return Err(format!("the message without delay took {immediate:?}").into());
    }
    println!(
        "delay level {LEVEL} held the message back {:.1} s (at least {LEVEL_DELAY:?}); the other came after {:.0} ms",
        delayed.as_secs_f64(),
        immediate.as_secs_f64() * 1000.0
    );

    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
