//! The JSON form of the stats snapshots (`rmq_*_stats_json` in C, `stats()` in Python,
//! which includes this file with `#[path]` so both give the same shape). The public Rust
//! stats types have no serde impls on purpose: this is the one place their JSON is
//! defined, from their public fields. Latencies are whole microseconds (`*_us` keys);
//! an unknown offset or lag is `null`. The admin views of a consumer group's connections
//! and of a topic's queues are here too, for the same reason.

use rocketmq_blocking::{
    ClientStats, ConsumerConnection, ConsumerStats, ErrorKind, LatencyHistogram, ProducerStats,
    QueueStats, TopicStats,
};
use serde_json::{json, Map, Value};

fn us(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A histogram as count, sum, mean, p50, p90, p99 and max (µs).
fn latency(h: &LatencyHistogram) -> Value {
    json!({
        "count": h.count(),
        "sum_us": us(h.sum()),
        "mean_us": us(h.mean()),
        "p50_us": us(h.p50()),
        "p90_us": us(h.p90()),
        "p99_us": us(h.p99()),
        "max_us": us(h.max()),
    })
}

/// An error kind in snake case (`timeout`, `no_route`), as the metrics' `error_type`.
fn kind_name(kind: ErrorKind) -> String {
    format!("{kind:?}")
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
            sep.into_iter()
                .chain(std::iter::once(c.to_ascii_lowercase()))
        })
        .collect()
}

fn client(c: &ClientStats) -> Value {
    json!({
        "client_id": c.client_id,
        "connections": c.connections,
        "connects": c.connects,
        "reconnects": c.reconnects,
        "heartbeats": c.heartbeats,
        "route_refreshes": c.route_refreshes,
        "rebalances": c.rebalances,
        "request_hook_panics": c.request_hook_panics,
    })
}

/// A producer's snapshot.
pub(crate) fn producer(s: &ProducerStats) -> Value {
    let topics: Map<String, Value> = s
        .topics
        .iter()
        .map(|(name, t)| {
            let by_kind: Map<String, Value> = t
                .failed_by_kind
                .iter()
                .map(|(k, n)| (kind_name(*k), json!(n)))
                .collect();
            let v = json!({
                "messages_sent": t.messages_sent,
                "bytes_sent": t.bytes_sent,
                "failed": t.failed,
                "failed_by_kind": by_kind,
                "send_latency": latency(&t.send_latency),
            });
            (name.clone(), v)
        })
        .collect();
    json!({
        "group": s.group,
        "topics": topics,
        "async_in_flight": s.async_in_flight,
        "hook_panics": s.hook_panics,
        "client": client(&s.client),
    })
}

fn queue(q: &QueueStats) -> Value {
    json!({
        "topic": q.queue.topic(),
        "broker_name": q.queue.broker_name(),
        "queue_id": q.queue.queue_id(),
        "cached_messages": q.cached_messages,
        "cached_bytes": q.cached_bytes,
        "consumed_offset": q.consumed_offset,
        "lag": q.lag,
    })
}

/// A push or lite pull consumer's snapshot.
pub(crate) fn consumer(s: &ConsumerStats) -> Value {
    let topics: Map<String, Value> = s
        .topics
        .iter()
        .map(|(name, t)| {
            let v = json!({
                "pulled": t.pulled,
                "pulled_bytes": t.pulled_bytes,
                "consumed_ok": t.consumed_ok,
                "consumed_failed": t.consumed_failed,
                "consume_latency": latency(&t.consume_latency),
            });
            (name.clone(), v)
        })
        .collect();
    json!({
        "group": s.group,
        "topics": topics,
        "queues": s.queues.iter().map(queue).collect::<Vec<_>>(),
        "cached_messages": s.cached_messages(),
        "cached_bytes": s.cached_bytes(),
        "lag": s.lag(),
        "pool_size": s.pool_size,
        "pool_busy": s.pool_busy,
        "hook_panics": s.hook_panics,
        "client": client(&s.client),
    })
}

fn ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `Admin::consumer_connections` (mqadmin `consumerConnection`): `{"connections":
/// [{"clientId", "clientAddr", "language", "version"}], "subscriptions": {topic:
/// expression}, "consumeType", "messageModel", "consumeFromWhere"}`.
pub(crate) fn consumer_connection(c: &ConsumerConnection) -> Value {
    let connections: Vec<Value> = c
        .connections
        .iter()
        .map(|x| {
            json!({
                "clientId": x.client_id,
                "clientAddr": x.client_addr,
                "language": x.language,
                "version": x.version,
            })
        })
        .collect();
    json!({
        "connections": connections,
        "subscriptions": c.subscriptions,
        "consumeType": c.consume_type,
        "messageModel": c.message_model,
        "consumeFromWhere": c.consume_from_where,
    })
}

/// `Admin::topic_stats` (mqadmin `topicStatus`): `{"queues": [{"topic", "brokerName",
/// "queueId", "minOffset", "maxOffset", "lastUpdateMs"}]}`, sorted by broker name and
/// queue id; `lastUpdateMs` is `null` for an empty queue.
pub(crate) fn topic_stats(s: &TopicStats) -> Value {
    let queues: Vec<Value> = s
        .queues
        .iter()
        .map(|(mq, o)| {
            json!({
                "topic": mq.topic(),
                "brokerName": mq.broker_name(),
                "queueId": mq.queue_id(),
                "minOffset": o.min_offset,
                "maxOffset": o.max_offset,
                "lastUpdateMs": o.last_update.map(ms),
            })
        })
        .collect();
    json!({ "queues": queues })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_are_named_in_snake_case() {
        assert_eq!(kind_name(ErrorKind::NoRoute), "no_route");
        assert_eq!(kind_name(ErrorKind::ConnectionClosed), "connection_closed");
        assert_eq!(kind_name(ErrorKind::Tls), "tls");
    }

    #[test]
    fn an_empty_consumer_snapshot_has_every_key() {
        let v = consumer(&ConsumerStats::default());
        for key in [
            "group",
            "topics",
            "queues",
            "lag",
            "pool_size",
            "hook_panics",
            "client",
        ] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["client"]["connections"], 0);
    }
}
