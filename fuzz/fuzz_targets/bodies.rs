//! The JSON bodies a client reads besides routes, through the tolerant fastjson reader
//! (`protocol::json`): cluster info (name server), consumer lists, lock-batch answers,
//! RESET_CONSUMER_CLIENT_OFFSET bodies (a broker relaying the admin tool), and the admin
//! bodies — consume stats, topic lists, subscription groups, producer connections.
//! Each decoder sees the same bytes: they share the reader, and each input reaches them all.
//!
//! Besides "never panics" and "never allocates without bound" (the `-rss_limit_mb` of the
//! run): standard JSON passes the reader unchanged, and what the decoders promise holds.
#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::fuzzing;
use rocketmq_blocking::protocol::admin::{
    decode_consume_stats, decode_subscription_groups, decode_topic_list,
};
use rocketmq_blocking::protocol::consumer_admin::decode_reset_offsets;
use rocketmq_blocking::protocol::{decode_cluster_info, json};

fuzz_target!(|data: &[u8]| {
    // fastjson's bare and object map keys are rewritten; JSON without them is left alone.
    if let Ok(normalized) = json::normalize(data) {
        if serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok() {
            assert!(matches!(normalized, Cow::Borrowed(b) if b == data));
        }
    }

    if let Ok(info) = decode_cluster_info(data) {
        for b in info.broker_addr_table.values() {
            let _ = b.select_addr();
        }
    }
    let _ = fuzzing::consumer_id_list(data);
    let _ = fuzzing::lock_batch_response(data);
    let _ = fuzzing::producer_connections(data);
    let _ = decode_reset_offsets(data);
    if let Ok(stats) = decode_consume_stats(data) {
        assert!(stats.consume_tps.is_finite() && stats.consume_tps >= 0.0);
        for (mq, progress) in &stats.queues {
            assert_eq!(*mq, progress.queue);
        }
        let _ = stats.total_diff();
    }
    if let Ok(topics) = decode_topic_list(data) {
        assert!(topics.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    }
    if let Ok(groups) = decode_subscription_groups(data) {
        for (name, group) in &groups {
            // An entry that names no group takes its table key.
            assert!(!group.group_name.is_empty() || name.is_empty());
        }
    }
});
