//! Client statistics (`Producer::stats`, `PushConsumer::stats`, `LitePullConsumer::stats`)
//! against the real broker, and the Prometheus example's endpoint scraped over HTTP. Run
//! them with `cargo test --test it stats` (and `RMQ_TEST_VERSION=4.9.7` for a 4.x broker).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::{
    Admin, ConsumeStatus, ErrorKind, Message, Producer, ProducerStats, TopicConfig,
};

use crate::cluster;
use crate::consumer::{consumer, lite, producer, wait_for};
use rocketmq_blocking::ClientOptions;

#[path = "../../examples/prometheus/exporter.rs"]
mod exporter;

/// The acknowledged and failed counts the test saw, to compare with the stats.
#[derive(Default)]
struct Outcomes {
    ok: AtomicU64,
    ok_bytes: AtomicU64,
    failed: AtomicU64,
}

fn topic_stats(s: &ProducerStats, topic: &str) -> rocketmq_blocking::TopicSendStats {
    s.topics
        .get(topic)
        .cloned()
        .unwrap_or_else(|| panic!("no stats of {topic} in {s:?}"))
}

#[test]
fn stats_count_acknowledged_and_failed_sends_against_a_stopped_broker() {
    // A cluster of its own: its broker is stopped half-way.
    let mut b = Cluster::builder().brokers(1);
    if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
        b = b.version(&v);
    }
    let mut c = b.start().expect("the test's own cluster");
    let topic = cluster::unique("stats_send");
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(c.namesrv_addr()))
        .start()
        .unwrap()
        .create_topic(&TopicConfig::new(&topic, 2))
        .unwrap();
    let p = Producer::builder(cluster::unique("stats_pg"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(c.namesrv_addr())
                .instance_name(cluster::unique("stats_inst")),
        )
        .retries(1)
        .start()
        .unwrap();
    let seen = Arc::new(Outcomes::default());
    let (n_sync, n_async) = (20u64, 30u64);
    let send_all = |phase: &str| {
        let done = Arc::new(AtomicU64::new(0));
        for i in 0..n_sync {
            let body = format!("{phase} sync {i}");
            match p.send(&Message::new(&topic, body.as_bytes())) {
                Ok(_) => {
                    seen.ok.fetch_add(1, Ordering::SeqCst);
                    seen.ok_bytes.fetch_add(body.len() as u64, Ordering::SeqCst);
                }
                Err(_) => {
                    seen.failed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        for i in 0..n_async {
            let body = format!("{phase} async {i:03}");
            let len = body.len() as u64;
            let (s, d) = (seen.clone(), done.clone());
            let queued = p.send_async(Message::new(&topic, body), move |r| {
                match r {
                    Ok(_) => {
                        s.ok.fetch_add(1, Ordering::SeqCst);
                        s.ok_bytes.fetch_add(len, Ordering::SeqCst);
                    }
                    Err(_) => {
                        s.failed.fetch_add(1, Ordering::SeqCst);
                    }
                }
                d.fetch_add(1, Ordering::SeqCst);
            });
            if queued.is_err() {
                seen.failed.fetch_add(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
            }
        }
        wait_for("every async callback", Duration::from_secs(60), || {
            done.load(Ordering::SeqCst) == n_async
        });
    };
    send_all("up");
    let up = p.stats();
    let t = topic_stats(&up, &topic);
    assert_eq!(t.messages_sent, seen.ok.load(Ordering::SeqCst), "{up:?}");
    assert_eq!(
        t.messages_sent,
        n_sync + n_async,
        "a healthy broker takes all: {up:?}"
    );
    assert_eq!(t.bytes_sent, seen.ok_bytes.load(Ordering::SeqCst));
    assert_eq!(t.failed, 0);
    assert_eq!(t.send_latency.count(), t.messages_sent);
    assert!(t.send_latency.max() >= t.send_latency.p99());
    assert!(t.send_latency.p99() >= t.send_latency.p50());
    assert!(t.send_latency.p50() > Duration::ZERO);
    assert_eq!(up.async_in_flight, 0);
    assert!(up.client.connections >= 1, "{up:?}");
    assert!(up.client.route_refreshes >= 1, "{up:?}");
    assert!(up.client.heartbeats >= 1, "{up:?}");

    c.stop_broker("broker-a").unwrap();
    send_all("down");
    let down = p.stats();
    let t = topic_stats(&down, &topic);
    let (ok, failed) = (
        seen.ok.load(Ordering::SeqCst),
        seen.failed.load(Ordering::SeqCst),
    );
    println!("after the stop: {ok} acknowledged, {failed} failed; {t:?}");
    assert!(failed > 0, "a stopped broker fails sends");
    assert_eq!(ok + failed, 2 * (n_sync + n_async));
    assert_eq!(t.messages_sent, ok, "{down:?}");
    assert_eq!(t.bytes_sent, seen.ok_bytes.load(Ordering::SeqCst));
    assert_eq!(t.failed, failed, "{down:?}");
    assert_eq!(
        t.failed_by_kind.iter().map(|(_, n)| n).sum::<u64>(),
        failed,
        "{:?}",
        t.failed_by_kind
    );
    assert!(
        t.failed_of(ErrorKind::Connect)
            + t.failed_of(ErrorKind::ConnectionClosed)
            + t.failed_of(ErrorKind::Timeout)
            > 0,
        "transport failures: {:?}",
        t.failed_by_kind
    );
    assert_eq!(down.async_in_flight, 0);
    // Monotonic: nothing counted before went away.
    assert!(down.client.route_refreshes >= up.client.route_refreshes);
    assert!(down.client.connects >= up.client.connects);
    p.shutdown();
    c.shutdown();
}

#[test]
fn stats_show_cached_messages_of_a_slow_consumer_falling_to_zero_when_it_catches_up() {
    let topic = cluster::topic("stats_slow", 2);
    let group = cluster::unique("stats_slow_g");
    let p = producer();
    let total = 200u64;
    for i in 0..total {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    let consumed = Arc::new(AtomicUsize::new(0));
    let n = consumed.clone();
    let c = consumer(&group, &topic)
        .consume_thread_min(1)
        .consume_thread_max(1)
        .listener(move |msgs, _| {
            std::thread::sleep(Duration::from_millis(10));
            n.fetch_add(msgs.len(), Ordering::SeqCst);
            ConsumeStatus::Success
        })
        .start()
        .unwrap();
    // While the listener is behind, pulled messages wait in the cache.
    let (mut max_cached, mut max_lag, mut saw_busy) = (0, 0, false);
    wait_for("messages cached", Duration::from_secs(60), || {
        let s = c.stats();
        max_cached = max_cached.max(s.cached_messages());
        max_lag = max_lag.max(s.lag());
        saw_busy |= s.pool_busy > 0;
        max_cached > 0 && s.cached_bytes() > 0
    });
    wait_for("every message consumed", Duration::from_secs(120), || {
        let s = c.stats();
        saw_busy |= s.pool_busy > 0;
        max_lag = max_lag.max(s.lag());
        s.topics.get(&topic).map(|t| t.consumed_ok) == Some(total)
    });
    wait_for("the cache to empty", Duration::from_secs(30), || {
        c.stats().cached_messages() == 0
    });
    let s = c.stats();
    println!("most cached {max_cached}, most lag {max_lag}; {s:?}");
    let t = &s.topics[&topic];
    assert_eq!(t.pulled, total);
    assert_eq!(t.consumed_ok, consumed.load(Ordering::SeqCst) as u64);
    assert_eq!(t.consumed_failed, 0);
    assert!(t.consume_latency.count() > 0);
    assert!(
        t.consume_latency.p50() >= Duration::from_millis(10),
        "{t:?}"
    );
    assert_eq!(s.cached_bytes(), 0);
    assert_eq!(s.lag(), 0);
    assert!(
        max_lag > 0,
        "the lag was above zero while the listener was behind"
    );
    assert_eq!(s.pool_size, 1);
    assert!(saw_busy, "the consume thread was seen busy");
    // The topic's two queues, and the group's retry queue.
    assert_eq!(
        s.queues.iter().filter(|q| q.queue.topic() == topic).count(),
        2
    );
    // The retry topic's route: a 4.x broker creates the topic with the group's first
    // heartbeat and registers it with the name server on its next round (30 s).
    wait_for(
        "the retry queue in the stats",
        Duration::from_secs(60),
        || {
            c.stats()
                .queues
                .iter()
                .any(|q| q.queue.topic().starts_with("%RETRY%"))
        },
    );
    c.shutdown();
    p.shutdown();
}

#[test]
fn stats_consumed_offsets_and_lag_agree_with_admin_consume_stats() {
    let topic = cluster::topic("stats_offsets", 3);
    let group = cluster::unique("stats_offsets_g");
    let p = producer();
    for i in 0..60 {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    let c = consumer(&group, &topic)
        .persist_offset_interval(Duration::from_millis(500))
        .listener(|_, _| ConsumeStatus::Success)
        .start()
        .unwrap();
    wait_for("every message consumed", Duration::from_secs(60), || {
        c.stats().topics.get(&topic).map(|t| t.consumed_ok) == Some(60)
    });
    let admin = Admin::builder()
        .client_options(cluster::options())
        .start()
        .unwrap();
    let ours = |c: &rocketmq_blocking::PushConsumer| -> BTreeMap<(String, i32), (i64, u64)> {
        c.stats()
            .queues
            .iter()
            .filter(|q| q.queue.topic() == topic)
            .map(|q| {
                (
                    (q.queue.broker_name().to_string(), q.queue.queue_id()),
                    (q.consumed_offset.unwrap_or(-1), q.lag.unwrap_or(u64::MAX)),
                )
            })
            .collect()
    };
    let mut theirs = BTreeMap::new();
    wait_for(
        "the broker to hold the offsets",
        Duration::from_secs(30),
        || {
            let Ok(cs) = admin.consume_stats(&group, Some(&topic)) else {
                return false;
            };
            theirs = cs
                .queues
                .values()
                .map(|q| {
                    let key = (q.queue.broker_name().to_string(), q.queue.queue_id());
                    (key, (q.consumer_offset, q.lag()))
                })
                .collect();
            theirs == ours(&c)
        },
    );
    let ours = ours(&c);
    println!("offsets and lag per queue: {ours:?}");
    assert_eq!(ours.len(), 3);
    assert_eq!(ours.values().map(|(o, _)| o).sum::<i64>(), 60);
    c.shutdown();
    p.shutdown();
}

#[test]
fn stats_of_a_lite_pull_consumer_count_what_poll_returned() {
    let topic = cluster::topic("stats_lite", 2);
    let p = producer();
    for i in 0..40 {
        p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
    }
    let c = lite(&cluster::unique("stats_lite_g"))
        .subscribe(&topic, "*")
        .start()
        .unwrap();
    let mut got = 0;
    wait_for("every message polled", Duration::from_secs(60), || {
        got += c.poll_timeout(Duration::from_millis(200)).unwrap().len();
        got == 40
    });
    let s = c.stats();
    let t = &s.topics[&topic];
    assert_eq!(t.pulled, 40, "{s:?}");
    assert_eq!(t.consumed_ok, 40);
    assert_eq!(s.cached_messages(), 0);
    assert_eq!(s.queues.len(), 2);
    c.shutdown();
    p.shutdown();
}

/// Reads `http://addr/metrics` with a plain request.
fn scrape(addr: std::net::SocketAddr) -> String {
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    text
}

/// The value of the series whose line starts with `name{` and has every label of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn stats_prometheus_endpoint_shows_what_stats_return() {
    let topic = cluster::topic("stats_prom", 2);
    let group = cluster::unique("stats_prom_g");
    let p = Arc::new(producer());
    let c = Arc::new(
        consumer(&group, &topic)
            .listener(|_, _| ConsumeStatus::Success)
            .start()
            .unwrap(),
    );
    let (pp, cc) = (p.clone(), c.clone());
    let endpoint = exporter::Exporter::start("127.0.0.1:0", move || {
        pp.stats().record_metrics();
        cc.stats().record_metrics();
    })
    .unwrap();
    for i in 0..25 {
        p.send(&Message::new(&topic, format!("m{i:02}"))).unwrap();
    }
    // A message is counted consumed before it leaves its process queue (as in Java's
    // `processConsumeResult`): the cache gauge is read once both are done.
    wait_for("every message consumed", Duration::from_secs(60), || {
        let s = c.stats();
        s.topics.get(&topic).map(|t| t.consumed_ok) == Some(25) && s.cached_messages() == 0
    });
    let text = scrape(endpoint.addr());
    let ps = p.stats();
    let cs = c.stats();
    let t = &ps.topics[&topic];
    let topic_label = format!("topic=\"{topic}\"");
    let sent_ok = text
        .lines()
        .filter(|l| l.starts_with("messaging_client_sent_messages_total{"))
        .find(|l| l.contains(&topic_label) && !l.contains("error_type"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(sent_ok, Some(t.messages_sent as f64), "{text}");
    assert_eq!(
        value(&text, "rocketmq_send_bytes_total", &[&topic_label]),
        Some(t.bytes_sent as f64)
    );
    assert_eq!(
        value(&text, "rocketmq_send_cost_time_count", &[&topic_label]),
        Some(t.send_latency.count() as f64)
    );
    assert_eq!(
        value(
            &text,
            "rocketmq_send_cost_time_bucket",
            &[&topic_label, "le=\"+Inf\""]
        ),
        Some(25.0)
    );
    let group_label = format!("consumer_group=\"{group}\"");
    let consumed = text
        .lines()
        .filter(|l| l.starts_with("messaging_client_consumed_messages_total{"))
        .find(|l| l.contains(&topic_label) && l.contains(&group_label) && !l.contains("error_type"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(
        consumed,
        Some(cs.topics[&topic].consumed_ok as f64),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "rocketmq_pulled_messages_total",
            &[&topic_label, &group_label]
        ),
        Some(25.0)
    );
    assert_eq!(
        value(
            &text,
            "rocketmq_consumer_cached_messages",
            &[&topic_label, &group_label]
        ),
        Some(0.0)
    );
    let id_label = format!("client_id=\"{}\"", cs.client.client_id);
    assert!(
        value(&text, "rocketmq_client_route_refreshes_total", &[&id_label]).unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    drop(endpoint);
    c.shutdown();
    p.shutdown();
}
