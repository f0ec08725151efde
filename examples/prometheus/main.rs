//! Client metrics for Prometheus (feature `metrics`): a producer and a push consumer whose
//! figures are served at `http://127.0.0.1:9464/metrics` (`RMQ_METRICS_ADDR` to change).
//!
//! The library records nothing by itself: `stats()` returns a snapshot, and
//! `record_metrics()` writes it through the `metrics` facade to whatever recorder the
//! application installed — here `metrics-exporter-prometheus`, asked before each scrape.
//! docs/observability.md lists the metric names.
//!
//! With `NAMESRV_ADDR` set it uses that cluster, else it starts a local one.
//!
//! ```sh
//! cargo run --example prometheus --features testkit,metrics
//! curl -s http://127.0.0.1:9464/metrics | grep rocketmq_
//! ```

#[path = "../common/mod.rs"]
mod common;
mod exporter;

use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::{
    ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer, TopicConfig,
};

fn main() -> common::Result<()> {
    common::init_logging();
    let target = common::target()?;
    let topic = common::unique("MetricsTopic");
    target.admin()?.create_topic(&TopicConfig::new(&topic, 2))?;

    let producer = Arc::new(
        Producer::builder(common::unique("metrics_producer"))
            .client_options(target.options())
            .start()?,
    );
    let consumer = Arc::new(
        PushConsumer::builder(common::unique("metrics_consumer"))
            .client_options(target.options())
            .subscribe(&topic, "*")
            .consume_from_where(ConsumeFromWhere::FirstOffset)
            .listener(|_, _| {
                std::thread::sleep(Duration::from_millis(5));
                ConsumeStatus::Success
            })
            .start()?,
    );

    let addr = std::env::var("RMQ_METRICS_ADDR").unwrap_or_else(|_| "127.0.0.1:9464".into());
    let (p, c) = (producer.clone(), consumer.clone());
    let exporter = exporter::Exporter::start(&addr, move || {
        p.stats().record_metrics();
        c.stats().record_metrics();
    })?;
    println!("metrics at http://{}/metrics", exporter.addr());

    // RMQ_EXAMPLE_SECONDS bounds the run (CI); by default it sends for a minute.
    let seconds: u64 = std::env::var("RMQ_EXAMPLE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    for i in 0..seconds * 10 {
        producer.send(&Message::new(&topic, format!("message {i}")))?;
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = producer.stats();
    println!("sent: {:?}", stats.topics.get(&topic));
    drop(exporter);
    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
