//! Filtering on the broker with an SQL92 expression over message properties.
//!
//! The producer sets user properties with [`Message::put_user_property`]; the consumer
//! subscribes with [`MessageSelector::by_sql`] through
//! [`PushConsumerBuilder::subscribe_with`], and the broker delivers only the messages whose
//! properties match. The example fails if a message that does not match arrives, or one
//! that matches does not.
//!
//! Java equivalent: `msg.putUserProperty("n", "7");` and
//! `consumer.subscribe(topic, MessageSelector.bySql("n >= 5 AND color = 'red'"))`.
//!
//! The broker needs `enablePropertyFilter=true` in its `broker.conf` (it is off by default;
//! without it the subscription is refused). The local cluster this example starts when
//! `NAMESRV_ADDR` is not set has it; a cluster given by `NAMESRV_ADDR` must have it too.
//!
//! ```sh
//! cargo run --example sql92
//! ```
//!
//! [`PushConsumerBuilder::subscribe_with`]: rocketmq_blocking::PushConsumerBuilder::subscribe_with

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, MessageSelector, Producer, PushConsumer, TopicConfig,
};

const EXPRESSION: &str = "n >= 5 AND color = 'red'";
/// How long to wait for the matching messages.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(40);
/// How long to keep listening after the last match, for messages that should not come.
const QUIET_TIME: Duration = Duration::from_secs(3);

fn main() -> common::Result<()> {
    common::init_logging();
    let target =
        common::target_with(Cluster::builder().broker_config("enablePropertyFilter", "true"))?;
    let topic = common::unique("Sql92Topic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 4))?;

    let producer = Producer::builder(common::unique("sql92_producer"))
        .client_options(target.options())
        .start()?;
    let mut expected = BTreeSet::new();
    for n in 0..10 {
        let color = if n % 2 == 0 { "red" } else { "blue" };
        let mut msg = Message::new(&topic, format!("n={n} color={color}"));
        msg.put_user_property("n", n.to_string())?;
        msg.put_user_property("color", color)?;
        producer.send(&msg)?;
        if n >= 5 && color == "red" {
            expected.insert(n);
        }
    }
    println!("sent n = 0..10 with color red (even n) or blue (odd n)");

    let (tx, rx) = mpsc::channel::<(i32, String)>();
    let consumer = PushConsumer::builder(common::unique("sql92_consumer"))
        .client_options(target.options())
        .subscribe_with(&topic, MessageSelector::by_sql(EXPRESSION))
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            for m in msgs {
                let n = m.property("n").and_then(|v| v.parse().ok()).unwrap_or(-1);
                let body = String::from_utf8_lossy(m.body()).into_owned();
                let _ = tx.send((n, body));
            }
            ConsumeStatus::Success
        })
        .start()?;
    println!("subscribed with {EXPRESSION:?}; expecting n in {expected:?}");

    let mut received = BTreeSet::new();
    let deadline = Instant::now() + CONSUME_TIMEOUT;
    loop {
        // Wait for the matches, then a little longer for anything that should not come.
        let wait = if received == expected {
            QUIET_TIME
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        let Ok((n, body)) = rx.recv_timeout(wait) else {
            break;
        };
        println!("received {body}");
        if !expected.contains(&n) {
            return Err(format!("{body} does not match {EXPRESSION:?} but was delivered").into());
        }
        received.insert(n);
    }
    if received != expected {
        return Err(format!(
            "received n in {received:?}, expected {expected:?} within {CONSUME_TIMEOUT:?} \
             (does the broker have enablePropertyFilter=true?)"
        )
        .into());
    }
    println!(
        "the broker delivered exactly the {} matching messages of 10",
        expected.len()
    );

    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
