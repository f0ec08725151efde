//! Transactional messages: a message becomes visible only when the local transaction
//! that goes with it commits.
//!
//! Six orders are sent in transactions: two commit in the local transaction, two roll
//! back, and two answer "unknown" (say the database did not confirm in time); the
//! broker asks about those later and the checker, which looks the order up, commits
//! them. A push consumer then sees the four committed orders and never the others.
//!
//! With `NAMESRV_ADDR` set, it uses that cluster (its broker checks open transactions
//! every `transactionCheckInterval`, 30-60 s by default, so the example waits up to
//! three minutes). Without it, it starts a local Apache RocketMQ name server and broker
//! that checks every second (the jars come from Maven Central; JDK 17 and Maven are
//! needed) and stops them at the end.
//!
//! ```sh
//! cargo run --example transaction
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{
    Admin, ConsumeFromWhere, ConsumeStatus, LocalTransactionState, Message, MessageExt,
    PushConsumer, TopicConfig, TransactionProducer,
};

/// How long to wait for the checks and the consumer.
const WAIT: Duration = Duration::from_secs(180);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    let (namesrv, _cluster) = match std::env::var("NAMESRV_ADDR")
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(addr) => {
            println!("using the cluster at NAMESRV_ADDR={addr}");
            (addr, None)
        }
        None => {
            println!("NAMESRV_ADDR is not set: starting a local RocketMQ cluster (first run downloads the jars)...");
            let cluster = Cluster::builder()
                .broker_config("transactionCheckInterval", "1000")
                .broker_config("transactionTimeOut", "2000")
                // 5.x writes the commit and rollback records in batches (every 3 s by
                // default); a check must not come before a commit's record, or the
                // committed message is asked about, committed again and delivered twice.
                .broker_config("transactionOpBatchInterval", "200")
                .start()?;
            println!("cluster up: NAMESRV_ADDR={}", cluster.namesrv_addr());
            (cluster.namesrv_addr(), Some(cluster))
        }
    };
    let topic = format!("TransactionTopic_{}", std::process::id());
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(&namesrv))
        .start()?
        .create_topic(&TopicConfig::new(&topic, 4))?;

    // The "database": what happened to each order, by transaction id. The local
    // transaction writes it; the checker reads it.
    let orders: Arc<Mutex<HashMap<String, LocalTransactionState>>> = Arc::default();
    let (db, db_check) = (orders.clone(), orders.clone());
    let execute = move |msg: &Message, arg: &dyn std::any::Any| {
        let order = arg.downcast_ref::<usize>().copied().unwrap_or_default();
        let id = msg.transaction_id().unwrap_or_default().to_string();
        let outcome = match order % 3 {
            0 => LocalTransactionState::CommitMessage,
            1 => LocalTransactionState::RollbackMessage,
            // The write went through, but too late to say so now.
            _ => {
                db.lock()
                    .unwrap()
                    .insert(id, LocalTransactionState::CommitMessage);
                return LocalTransactionState::Unknown;
            }
        };
        db.lock().unwrap().insert(id, outcome);
        outcome
    };
    let check = move |msg: &MessageExt| {
        let id = msg.message().transaction_id().unwrap_or(msg.msg_id());
        let state = db_check.lock().unwrap().get(id).copied();
        println!("  the broker asks about {id}: {state:?}");
        state.unwrap_or(LocalTransactionState::Unknown)
    };
    let producer = TransactionProducer::builder("transaction_example_producer", (execute, check))
        .client_options(ClientOptions::new().namesrv_addr(&namesrv))
        .start()?;

    let mut committed = HashSet::new();
    for order in 0..6usize {
        let msg =
            Message::new(&topic, format!("order {order}")).with_keys([format!("order-{order}")]);
        let r = producer.send_in_transaction(&msg, &order)?;
        println!(
            "order {order}: half message {} stored, local transaction {:?}",
            r.send_result().msg_id(),
            r.local_transaction_state()
        );
        if order % 3 != 1 {
            committed.insert(r.send_result().msg_id().to_string());
        }
    }

    let (tx, rx) = mpsc::channel::<(String, String)>();
    let consumer = PushConsumer::builder(format!(
        "transaction_example_consumer_{}",
        std::process::id()
    ))
    .client_options(ClientOptions::new().namesrv_addr(&namesrv))
    .subscribe(&topic, "*")
    .consume_from_where(ConsumeFromWhere::FirstOffset)
    .listener(move |msgs, _ctx| {
        for m in msgs {
            let _ = tx.send((
                m.msg_id().to_string(),
                String::from_utf8_lossy(m.body()).into(),
            ));
        }
        ConsumeStatus::Success
    })
    .start()?;
    let t = Instant::now();
    let mut seen = HashSet::new();
    while seen.len() < committed.len() {
        let Ok((id, body)) = rx.recv_timeout(WAIT.saturating_sub(t.elapsed())) else {
            return Err(format!(
                "only {} of {} committed orders arrived within {WAIT:?}",
                seen.len(),
                committed.len()
            )
            .into());
        };
        if !committed.contains(&id) {
            return Err(format!("a rolled-back order was delivered: {body}").into());
        }
        println!("consumed {body} ({:.1} s)", t.elapsed().as_secs_f64());
        seen.insert(id);
    }
    // Rolled-back orders would show up now.
    if let Ok((_, body)) = rx.recv_timeout(Duration::from_secs(3)) {
        return Err(format!("unexpected delivery: {body}").into());
    }
    println!(
        "all {} committed orders consumed, the rolled-back ones never",
        committed.len()
    );
    consumer.shutdown();
    producer.shutdown();
    Ok(())
}
