//! Counting helpers shared by the test binaries with fault scenarios (`cluster_ops`,
//! `fault_suite`), included by each with `#[path]`: the scale of a run, unique names,
//! polling, and the read-back by message id from the first offset.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{ConsumeFromWhere, LitePullConsumer, MessageQueue, Producer};

/// `RMQ_RELIABILITY_SCALE`: 1 (reduced size, CI) unless set; 10 is the full size.
pub fn scale() -> usize {
    std::env::var("RMQ_RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(1)
}

/// A name unique in this test run: `<prefix>_<pid>_<n>`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Polls `cond` every 50 ms for up to `timeout`; true as soon as it holds.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A lite pull consumer (own group, no commits) assigned every queue of `topic`, each at
/// its first offset.
pub fn reader_from_the_start(namesrv: &str, topic: &str) -> LitePullConsumer {
    let p = Producer::builder(unique("pg_readback"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv))
        .start()
        .unwrap();
    let queues: Vec<MessageQueue> = p.fetch_publish_message_queues(topic).unwrap();
    p.shutdown();
    let c = LitePullConsumer::builder(unique("cg_readback"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv))
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .auto_commit(false)
        .start()
        .unwrap();
    c.assign(&queues).unwrap();
    for q in &queues {
        c.seek_to_begin(q).unwrap();
    }
    c
}

/// Reads every queue of `topic` from offset 0 until `want` is covered or `timeout`
/// passes; returns, per message id, how many copies are stored: distinct (broker, queue,
/// offset) places, so a batch the reader itself happens to get twice (a pull racing the
/// seek to the beginning) is not taken for a duplicate the producer made.
pub fn read_back(
    namesrv: &str,
    topic: &str,
    want: &HashSet<String>,
    timeout: Duration,
) -> HashMap<String, usize> {
    let c = reader_from_the_start(namesrv, topic);
    let mut places: HashMap<String, HashSet<(String, i32, i64)>> = HashMap::new();
    let poll = |places: &mut HashMap<String, HashSet<(String, i32, i64)>>| {
        for m in c.poll_timeout(Duration::from_millis(500)).unwrap() {
            let place = (m.broker_name().to_string(), m.queue_id(), m.queue_offset());
            places
                .entry(m.msg_id().to_string())
                .or_default()
                .insert(place);
        }
    };
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && !want.iter().all(|id| places.contains_key(id)) {
        poll(&mut places);
    }
    // Whatever else is stored (sends that failed at the client but reached the broker)
    // comes in the polls after the last wanted id; give them a moment.
    let quiet_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < quiet_until {
        poll(&mut places);
    }
    c.shutdown();
    places.into_iter().map(|(id, p)| (id, p.len())).collect()
}
