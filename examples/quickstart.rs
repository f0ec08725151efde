//! Quickstart: send messages, read them back, and consume them with a push consumer.
//!
//! With `NAMESRV_ADDR` set, it uses that cluster. Without it, it starts a local Apache
//! RocketMQ name server and broker (the jars come from Maven Central; JDK 17 and Maven are
//! needed) and stops them at the end. On a cluster that enforces ACL, set
//! `RMQ_ACCESS_KEY` and `RMQ_SECRET_KEY` (an account that may create topics) and every
//! client signs its requests.
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! TLS: `RMQ_TLS=1` starts the local cluster with TLS enforced (or, with `NAMESRV_ADDR`,
//! uses TLS verified against the system's roots); `RMQ_TLS_CA=ca.pem` trusts that CA
//! instead, `RMQ_TLS_CERT` and `RMQ_TLS_KEY` add a client certificate.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::{Cluster, TlsOptions};
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::TopicConfig;
use rocketmq_blocking::{Admin, Credentials, TlsConfig};
use rocketmq_blocking::{ConsumeFromWhere, ConsumeStatus, PushConsumer};
use rocketmq_blocking::{Message, Producer};

/// How long the consumer may take to receive every message.
const CONSUME_TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    // Keep the cluster alive until the end of main when we started it.
    let (namesrv, tls, _cluster) = match env("NAMESRV_ADDR") {
        Some(addr) => {
            println!("using the cluster at NAMESRV_ADDR={addr}");
            let wanted = ["RMQ_TLS", "RMQ_TLS_CA", "RMQ_TLS_CERT"]
                .iter()
                .any(|k| env(k).is_some());
            let mut tls = wanted.then(TlsConfig::new);
            if let Some(ca) = env("RMQ_TLS_CA") {
                tls = tls.map(|t| t.ca_file(ca));
            }
            if let (Some(cert), Some(key)) = (env("RMQ_TLS_CERT"), env("RMQ_TLS_KEY")) {
                tls = tls.map(|t| t.client_cert(cert, key));
            }
            (addr, tls, None)
        }
        None => {
            println!("NAMESRV_ADDR is not set: starting a local RocketMQ cluster (first run downloads the jars)...");
            let t = Instant::now();
            let mut builder = Cluster::builder();
            if env("RMQ_TLS").is_some() {
                builder = builder.tls(TlsOptions::enforcing());
            }
            let cluster = builder.start()?;
            println!(
                "cluster up in {:.1} s: NAMESRV_ADDR={} (RocketMQ {})",
                t.elapsed().as_secs_f64(),
                cluster.namesrv_addr(),
                cluster.version()
            );
            (cluster.namesrv_addr(), cluster.client_tls(), Some(cluster))
        }
    };
    if let Some(tls) = &tls {
        println!("with TLS: {tls:?}");
    }

    // ACL credentials from the environment, when the cluster enforces ACL.
    let credentials = match (
        std::env::var("RMQ_ACCESS_KEY"),
        std::env::var("RMQ_SECRET_KEY"),
    ) {
        (Ok(ak), Ok(sk)) if !ak.is_empty() => Some(Credentials::new(ak, sk)),
        _ => None,
    };

    // One set of client options for the admin, the producer and the consumer.
    let mut options = ClientOptions::new().namesrv_addr(&namesrv);
    if let Some(c) = credentials {
        options = options.credentials(c);
    }
    if let Some(tls) = tls {
        options = options.tls(tls);
    }

    let topic = format!("QuickstartTopic_{}", std::process::id());
    let admin = Admin::builder().client_options(options.clone()).start()?;
    let brokers = admin.create_topic(&TopicConfig::new(&topic, 4))?;
    println!("created topic {topic} on {brokers:?}");

    let producer = Producer::builder("quickstart_producer")
        .client_options(options.clone())
        .start()?;
    let n = 100;
    let t = Instant::now();
    let mut results = Vec::with_capacity(n);
    for i in 0..n {
        let msg = Message::new(&topic, format!("Hello RocketMQ {i}"))
            .with_tags("TagA")
            .with_keys([format!("key-{i}")]);
        results.push(producer.send(&msg)?);
    }
    println!(
        "sent {n} messages in {:.0} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );

    // Read every message back from the broker by its offsetMsgId.
    let mut read = 0;
    for (i, r) in results.iter().enumerate() {
        let stored = admin.view_message(r.offset_msg_id())?;
        if stored.body() != format!("Hello RocketMQ {i}").as_bytes() {
            return Err(format!("message {i} came back different").into());
        }
        read += 1;
    }
    println!("read back {read} of {n} messages, all intact");
    let stored = admin.total_max_offset(&topic)?;
    println!("the broker holds {stored} messages in {topic}");
    if stored != n as i64 {
        return Err(format!("expected {n} stored messages, found {stored}").into());
    }

    // Consume them: a new group (unique per run) starting from the first offset.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let group = format!("quickstart_consumer_{}_{now_ms}", std::process::id());
    let (tx, rx) = mpsc::channel::<String>();
    let t = Instant::now();
    let consumer = PushConsumer::builder(&group)
        .client_options(options)
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _ctx| {
            // The listener runs on the consume pool; the main thread does the counting.
            for m in msgs {
                let _ = tx.send(m.msg_id().to_string());
            }
            ConsumeStatus::Success
        })
        .start()?;
    let sent: HashSet<&str> = results.iter().map(|r| r.msg_id()).collect();
    let mut received = HashSet::new();
    let (mut deliveries, deadline) = (0, t + CONSUME_TIMEOUT);
    while received.len() < n {
        let wait = deadline.saturating_duration_since(Instant::now());
        // Returning early drops the consumer, and dropping shuts it down.
        let Ok(id) = rx.recv_timeout(wait) else {
            return Err(format!(
                "consumed only {} of {n} messages within {CONSUME_TIMEOUT:?}",
                received.len()
            )
            .into());
        };
        deliveries += 1;
        if !sent.contains(id.as_str()) {
            return Err(format!("consumed a message that was not sent: {id}").into());
        }
        received.insert(id);
    }
    println!(
        "consumed all {n} messages ({deliveries} deliveries) in {:.0} ms as group {group}",
        t.elapsed().as_secs_f64() * 1000.0
    );
    consumer.shutdown();
    producer.shutdown();
    println!("done");
    Ok(())
}
