//! Writing a stats snapshot through the `metrics` facade (feature `metrics`): the
//! application installs a recorder (Prometheus, OpenTelemetry, ...) and calls
//! `record_metrics` on a snapshot as often as it wants fresh figures (before a scrape,
//! or every few seconds). Counters are written with `absolute`, so calling it again never
//! double-counts; latencies become cumulative `_bucket`/`_count`/`_sum` series with
//! RocketMQ's own bucket bounds.
//!
//! Names follow RocketMQ's client metrics where they exist (`rocketmq_send_cost_time`,
//! `rocketmq_process_time`, `rocketmq_consumer_cached_messages`,
//! `rocketmq_consumer_cached_bytes`, labels `topic`, `client_id`, `consumer_group`,
//! `invocation_status`), the broker's for the lag (`rocketmq_consumer_lag_messages`), and
//! the OpenTelemetry messaging conventions otherwise (`messaging.client.sent.messages`,
//! `messaging.client.consumed.messages` with `error.type`, in Prometheus form).

use std::time::Duration;

use metrics::{counter, gauge};

use super::{ClientStats, ConsumerStats, LatencyHistogram, ProducerStats};

/// Bucket bounds of `rocketmq_send_cost_time` (ms), as RocketMQ's clients have them.
const SEND_BOUNDS_MS: [u64; 7] = [1, 5, 10, 20, 50, 200, 500];
/// Bucket bounds of `rocketmq_process_time` (ms).
const PROCESS_BOUNDS_MS: [u64; 6] = [1, 5, 10, 100, 10_000, 60_000];

/// Writes `h` as a cumulative histogram `name_bucket{le}`, `name_count`, `name_sum` (ms).
fn histogram(name: &str, labels: &[(&'static str, String)], h: &LatencyHistogram, bounds: &[u64]) {
    let with = |extra: Option<String>| {
        let mut l: Vec<(&'static str, String)> = labels.to_vec();
        if let Some(le) = extra {
            l.push(("le", le));
        }
        l
    };
    for b in bounds {
        let n = h.count_at_most(Duration::from_millis(*b));
        counter!(format!("{name}_bucket"), &with(Some(b.to_string()))).absolute(n);
    }
    counter!(format!("{name}_bucket"), &with(Some("+Inf".into()))).absolute(h.count());
    counter!(format!("{name}_count"), &with(None)).absolute(h.count());
    gauge!(format!("{name}_sum"), &with(None)).set(h.sum().as_secs_f64() * 1000.0);
}

impl ClientStats {
    /// Writes the client instance's figures through the `metrics` facade (label
    /// `client_id`): `rocketmq_client_connections` (gauge), and the counters
    /// `rocketmq_client_connects_total`, `rocketmq_client_reconnects_total`,
    /// `rocketmq_client_heartbeats_total`, `rocketmq_client_route_refreshes_total`,
    /// `rocketmq_client_rebalances_total`, `rocketmq_hook_panics_total{hook="request"}`.
    pub fn record_metrics(&self) {
        let id = self.client_id.clone();
        gauge!("rocketmq_client_connections", "client_id" => id.clone())
            .set(self.connections as f64);
        counter!("rocketmq_client_connects_total", "client_id" => id.clone())
            .absolute(self.connects);
        counter!("rocketmq_client_reconnects_total", "client_id" => id.clone())
            .absolute(self.reconnects);
        counter!("rocketmq_client_heartbeats_total", "client_id" => id.clone())
            .absolute(self.heartbeats);
        counter!("rocketmq_client_route_refreshes_total", "client_id" => id.clone())
            .absolute(self.route_refreshes);
        counter!("rocketmq_client_rebalances_total", "client_id" => id.clone())
            .absolute(self.rebalances);
        counter!("rocketmq_hook_panics_total", "client_id" => id, "hook" => "request")
            .absolute(self.request_hook_panics);
    }
}

impl ProducerStats {
    /// Writes the producer's figures through the `metrics` facade (labels `topic`,
    /// `client_id`; docs/observability.md lists them), the client instance's included.
    pub fn record_metrics(&self) {
        let id = &self.client.client_id;
        for (topic, t) in &self.topics {
            let labels = [("topic", topic.clone()), ("client_id", id.clone())];
            counter!("messaging_client_sent_messages_total", &labels).absolute(t.messages_sent);
            for (kind, n) in &t.failed_by_kind {
                let mut l = labels.to_vec();
                l.push(("error_type", error_type(*kind)));
                counter!("messaging_client_sent_messages_total", &l).absolute(*n);
            }
            counter!("rocketmq_send_bytes_total", &labels).absolute(t.bytes_sent);
            let mut l = labels.to_vec();
            l.push(("invocation_status", "success".to_string()));
            histogram(
                "rocketmq_send_cost_time",
                &l,
                &t.send_latency,
                &SEND_BOUNDS_MS,
            );
        }
        gauge!("rocketmq_producer_async_in_flight", "client_id" => id.clone(), "producer_group" => self.group.clone())
            .set(self.async_in_flight as f64);
        counter!("rocketmq_hook_panics_total", "client_id" => id.clone(), "hook" => "send")
            .absolute(self.hook_panics);
        self.client.record_metrics();
    }
}

impl ConsumerStats {
    /// Writes the consumer's figures through the `metrics` facade (labels `topic`,
    /// `consumer_group`, `client_id`; docs/observability.md lists them), the client
    /// instance's included.
    pub fn record_metrics(&self) {
        let id = &self.client.client_id;
        let labels_of = |topic: &str| {
            [
                ("topic", topic.to_string()),
                ("consumer_group", self.group.clone()),
                ("client_id", id.clone()),
            ]
        };
        for (topic, t) in &self.topics {
            let labels = labels_of(topic);
            counter!("rocketmq_pulled_messages_total", &labels).absolute(t.pulled);
            counter!("rocketmq_pulled_bytes_total", &labels).absolute(t.pulled_bytes);
            counter!("messaging_client_consumed_messages_total", &labels).absolute(t.consumed_ok);
            let mut l = labels.to_vec();
            l.push(("error_type", "reconsume_later".to_string()));
            counter!("messaging_client_consumed_messages_total", &l).absolute(t.consumed_failed);
            histogram(
                "rocketmq_process_time",
                &labels,
                &t.consume_latency,
                &PROCESS_BOUNDS_MS,
            );
        }
        // Per topic, as RocketMQ's clients report the cache: the sum over the queues held.
        let mut per_topic: std::collections::BTreeMap<&str, (u64, u64, u64)> = Default::default();
        for q in &self.queues {
            let e = per_topic.entry(&*q.queue.topic).or_default();
            e.0 += q.cached_messages;
            e.1 += q.cached_bytes;
            e.2 += q.lag.unwrap_or(0);
        }
        for (topic, (messages, bytes, lag)) in per_topic {
            let labels = labels_of(topic);
            gauge!("rocketmq_consumer_cached_messages", &labels).set(messages as f64);
            gauge!("rocketmq_consumer_cached_bytes", &labels).set(bytes as f64);
            gauge!("rocketmq_consumer_lag_messages", &labels).set(lag as f64);
        }
        let pool = [
            ("consumer_group", self.group.clone()),
            ("client_id", id.clone()),
        ];
        gauge!("rocketmq_consume_pool_threads", &pool).set(self.pool_size as f64);
        gauge!("rocketmq_consume_pool_busy_threads", &pool).set(self.pool_busy as f64);
        counter!("rocketmq_hook_panics_total", "client_id" => id.clone(), "hook" => "consume")
            .absolute(self.hook_panics);
        self.client.record_metrics();
    }
}

/// The `error.type` label of a failure: the error kind in snake case.
fn error_type(kind: crate::ErrorKind) -> String {
    format!("{kind:?}")
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let lower = c.to_ascii_lowercase();
            let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
            sep.into_iter().chain(std::iter::once(lower))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn stats_error_type_is_snake_case() {
        assert_eq!(super::error_type(crate::ErrorKind::NoRoute), "no_route");
        assert_eq!(super::error_type(crate::ErrorKind::Timeout), "timeout");
    }
}
