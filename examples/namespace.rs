//! Namespaces: one cluster, several isolated sets of topics and groups.
//!
//! A producer and a consumer whose client options have `.namespace("ns")` use plain names
//! (`Topic`, `my_group`) in the code and in everything they hand back (send results, received
//! messages), while on the wire, and so at the broker and name server, the names are
//! `ns%Topic` and `ns%my_group`. The example checks both sides: the names the clients show
//! have no namespace, and [`Admin`] (which uses raw names) finds the route of `ns%Topic`
//! and the producer's connection under `ns%<group>`, but no topic `Topic`.
//!
//! Java equivalent: `producer.setNamespace("ns")` / `consumer.setNamespace("ns")` (or
//! `new DefaultMQProducer("ns", "group")`).
//!
//! The topic is created by the first send, which needs `autoCreateTopicEnable=true` on the
//! broker (the broker default, and the local cluster's). With `NAMESRV_ADDR` set it uses
//! that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example namespace
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::mpsc;
use std::time::Duration;

use rocketmq_blocking::{ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer};

const NAMESPACE: &str = "ns";
/// How long the consumer may take to receive the message.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(40);

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    // What the application calls its topic and groups: no namespace anywhere.
    let topic = common::unique("NsTopic");
    let producer_group = common::unique("ns_producer");
    let wire_topic = format!("{NAMESPACE}%{topic}");
    let wire_group = format!("{NAMESPACE}%{producer_group}");

    let producer = Producer::builder(&producer_group)
        .client_options(target.options().namespace(NAMESPACE))
        .start()?;
    let r = producer.send(&Message::new(&topic, "hello from a namespace"))?;
    println!(
        "producer (namespace {NAMESPACE:?}) sent to topic {:?}, queue {}",
        r.message_queue().topic(),
        r.message_queue().queue_id()
    );
    if r.message_queue().topic() != topic {
        return Err(format!("the send result shows topic {}", r.message_queue().topic()).into());
    }

    // The broker and name server only know the wrapped names.
    let admin = target.admin()?;
    let route = admin.wait_for_route(&wire_topic, 1, Duration::from_secs(10))?;
    println!(
        "name server: topic {wire_topic:?} is routed to {:?}",
        route
            .queue_datas
            .iter()
            .map(|q| format!("{} ({} queues)", q.broker_name, q.write_queue_nums))
            .collect::<Vec<_>>()
    );
    match admin.topic_route(&topic) {
        Ok(r) if !r.queue_datas.is_empty() => {
            return Err(format!("a topic {topic:?} without namespace exists too: {r:?}").into())
        }
        Ok(_) | Err(_) => println!("name server: no topic {topic:?}"),
    }
    let (tx, rx) = mpsc::channel::<(String, String)>();
    let consumer = PushConsumer::builder(common::unique("ns_consumer"))
        .client_options(target.options().namespace(NAMESPACE))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            for m in msgs {
                let body = String::from_utf8_lossy(m.body()).into_owned();
                let _ = tx.send((m.topic().to_string(), body));
            }
            ConsumeStatus::Success
        })
        .start()?;
    let (got_topic, body) = rx
        .recv_timeout(CONSUME_TIMEOUT)
        .map_err(|_| format!("nothing received within {CONSUME_TIMEOUT:?}"))?;
    println!("consumer (namespace {NAMESPACE:?}) received {body:?} from topic {got_topic:?}");
    if got_topic != topic {
        return Err(format!("the received message shows topic {got_topic}, not {topic}").into());
    }

    // The producer group as the broker knows it, from the clients' heartbeats. The first
    // heartbeat that reaches this broker is the consumer's start (the producer shares its
    // client instance); poll a little in case it is still under way.
    let mut connections = Vec::new();
    for _ in 0..50 {
        connections = admin.producer_connections(&wire_group)?;
        if !connections.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "broker: producer group {wire_group:?} has client(s) {:?}",
        connections.iter().map(|c| &c.client_id).collect::<Vec<_>>()
    );
    if connections.is_empty() {
        return Err(format!("no producer is connected under {wire_group:?}").into());
    }
    if !admin.producer_connections(&producer_group)?.is_empty() {
        return Err(format!("a producer group {producer_group:?} without namespace exists").into());
    }

    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
