//! Clients against the enforcing cluster: with TLS everything works as without; without
//! TLS, with the wrong CA, or without a client certificate, calls fail fast with typed
//! errors naming the peer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_blocking::testkit::TlsFiles;
use rocketmq_blocking::{
    Admin, ConsumeFromWhere, ConsumeStatus, ErrorKind, LitePullConsumer, Message, MessageExt,
    Producer, PushConsumer, TlsConfig, TopicConfig,
};

use crate::cluster::{self, namesrv, tls, topic, unique, wait_for};
use rocketmq_blocking::ClientOptions;

fn scale() -> usize {
    std::env::var("RMQ_RELIABILITY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn producer() -> Producer {
    // The JVMs share two cores with builds; a cold broker can take seconds for a send.
    Producer::builder(unique("tlsp"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv())
                .tls(tls())
                .api_timeout(Duration::from_secs(10)),
        )
        .send_timeout(Duration::from_secs(15))
        .start()
        .expect("TLS producer")
}

/// Counts per key: every key must be there exactly once.
fn count_keys(seen: &[MessageExt]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for m in seen {
        for k in m.keys() {
            *counts.entry(k.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn a_tls_producer_sends_sync_async_and_oneway_and_a_push_consumer_gets_each_message_once() {
    let n = 100 * scale();
    let topic = topic("tlsmodes", 4);
    let p = producer();
    let mut keys = Vec::new();
    for i in 0..n {
        let key = format!("sync{i}");
        p.send(&Message::new(&topic, "s").with_keys([key.as_str()]))
            .unwrap_or_else(|e| panic!("sync send {i}: {e}"));
        keys.push(key);
    }
    let mut futures = Vec::new();
    for i in 0..n {
        let key = format!("async{i}");
        futures.push(
            p.send_async_future(Message::new(&topic, "a").with_keys([key.as_str()]))
                .unwrap_or_else(|e| panic!("async send {i}: {}", e.error())),
        );
        keys.push(key);
    }
    for (i, f) in futures.into_iter().enumerate() {
        f.wait().unwrap_or_else(|e| panic!("async send {i}: {e}"));
    }
    for i in 0..n {
        let key = format!("oneway{i}");
        p.send_oneway(&Message::new(&topic, "o").with_keys([key.as_str()]))
            .unwrap_or_else(|e| panic!("oneway send {i}: {e}"));
        keys.push(key);
    }

    let seen: Arc<Mutex<Vec<MessageExt>>> = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = PushConsumer::builder(unique("tlspush"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()).tls(tls()))
        .subscribe(&topic, "*")
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .listener(move |msgs, _| {
            s.lock().extend(msgs.iter().cloned());
            ConsumeStatus::Success
        })
        .start()
        .expect("TLS push consumer");
    // Oneway sends have no acknowledgement; on a healthy loopback broker none is lost.
    wait_for("every message", Duration::from_secs(60), || {
        count_keys(&seen.lock()).len() >= keys.len()
    });
    // Redeliveries would come within a rebalance round; give them a moment to show.
    std::thread::sleep(Duration::from_millis(500));
    c.shutdown();
    p.shutdown();
    let counts = count_keys(&seen.lock());
    let lost: Vec<&String> = keys.iter().filter(|k| !counts.contains_key(*k)).collect();
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    eprintln!(
        "TLS send/push: {} sent (sync, async, oneway), {} lost, {duplicates} duplicates",
        keys.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert_eq!(duplicates, 0);
}

#[test]
fn a_tls_lite_pull_consumer_reads_every_message_including_one_of_several_mib() {
    let topic = topic("tlslite", 2);
    let p = producer();
    let mut sent = HashMap::new();
    for i in 0..20 {
        let r = p.send(&Message::new(&topic, format!("m{i}"))).unwrap();
        sent.insert(r.msg_id().to_string(), format!("m{i}").into_bytes());
    }
    // 3 MiB that zlib cannot shrink much: many TLS records each way, frames of MiB.
    let mut big = vec![0u8; 3 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in big.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let r = p
        .send(&Message::new(&topic, big.clone()))
        .expect("a 3 MiB message over TLS");
    sent.insert(r.msg_id().to_string(), big);

    let c = LitePullConsumer::builder(unique("tlslite"))
        .client_options(ClientOptions::new().namesrv_addr(namesrv()).tls(tls()))
        .consume_from_where(ConsumeFromWhere::FirstOffset)
        .subscribe(&topic, "*")
        .start()
        .expect("TLS lite pull consumer");
    let mut got: HashMap<String, Vec<u8>> = HashMap::new();
    let mut duplicates = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < sent.len() && Instant::now() < deadline {
        for m in c.poll_timeout(Duration::from_millis(500)).unwrap() {
            if got
                .insert(m.msg_id().to_string(), m.body().to_vec())
                .is_some()
            {
                duplicates += 1;
            }
        }
    }
    c.shutdown();
    p.shutdown();
    eprintln!(
        "TLS lite pull: {} sent, {} read, {duplicates} duplicates",
        sent.len(),
        got.len()
    );
    assert_eq!(got.len(), sent.len(), "every message read");
    assert_eq!(duplicates, 0);
    for (id, body) in &sent {
        assert!(got.get(id) == Some(body), "body of {id} differs");
    }
}

#[test]
fn admin_over_tls_creates_a_topic_and_reads_its_route_and_the_cluster() {
    let admin = cluster::admin();
    let info = admin.cluster_info().expect("cluster info over TLS");
    assert!(info.broker_addr_table.contains_key("broker-a"));
    let topic = topic("tlsadmin", 3);
    let route = admin.topic_route(&topic).expect("route over TLS");
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums, 3);
}

/// The call timeout of the admins below: a hang would last this long, far beyond
/// what `fails_fast` allows.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `f` and checks it fails with `kind` naming `addr`, well before a hang would end.
fn fails_fast<T: std::fmt::Debug>(
    what: &str,
    kind: ErrorKind,
    addr: &str,
    f: impl FnOnce() -> rocketmq_blocking::Result<T>,
) -> rocketmq_blocking::Error {
    let started = Instant::now();
    let e = f().expect_err(what);
    let took = started.elapsed();
    eprintln!("{what}: {e} ({took:?})");
    assert_eq!(e.kind(), kind, "{what}: {e}");
    assert!(e.to_string().contains(addr), "{what} names {addr}: {e}");
    // Generous for a loaded 2-core box; a hang would last the whole CALL_TIMEOUT.
    assert!(took < Duration::from_secs(20), "{what} took {took:?}");
    e
}

#[test]
fn a_plain_client_against_the_enforcing_cluster_fails_fast_with_a_closed_connection() {
    let ns = namesrv();
    let admin = Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .api_timeout(CALL_TIMEOUT),
        )
        .start()
        .unwrap();
    let e = fails_fast("plain admin", ErrorKind::ConnectionClosed, &ns, || {
        admin.cluster_info()
    });
    assert!(e.to_string().contains("requires TLS"), "{e}");

    // A plain producer cannot find the route, and says why.
    let p = Producer::builder(unique("plainp"))
        .client_options(ClientOptions::new().namesrv_addr(&ns))
        .start()
        .unwrap();
    let topic = topic("tlsplain", 1);
    let started = Instant::now();
    let e = p.send(&Message::new(&topic, "x")).unwrap_err();
    eprintln!("plain send: {e} ({:?})", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(e.to_string().contains("requires TLS"), "{e}");
}

#[test]
fn a_wrong_ca_fails_the_handshake_with_a_tls_error_naming_the_address() {
    let ns = namesrv();
    let dir = cluster::cluster().run_dir().join("other-ca");
    let other = TlsFiles::generate(&dir).unwrap();
    let admin = Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .tls(TlsConfig::new().ca_file(&other.ca_cert).client_cert(
                    &cluster::cluster().tls_files().unwrap().client_cert,
                    &cluster::cluster().tls_files().unwrap().client_key,
                ))
                .api_timeout(CALL_TIMEOUT),
        )
        .start()
        .unwrap();
    let e = fails_fast("wrong CA", ErrorKind::Tls, &ns, || admin.cluster_info());
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    let broker = broker_addr();
    let e = fails_fast("wrong CA, broker", ErrorKind::Tls, &broker, || {
        admin.create_topic_on(&broker, &TopicConfig::new(unique("wrongca"), 1))
    });
    assert!(e.to_string().contains("UnknownIssuer"), "{e}");
    // Java's test mode trusts any server certificate: the handshake goes through.
    let files = cluster::cluster().tls_files().unwrap();
    let any = Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .tls(
                    TlsConfig::danger_accept_any_server_certificate()
                        .client_cert(&files.client_cert, &files.client_key),
                )
                .api_timeout(CALL_TIMEOUT),
        )
        .start()
        .unwrap();
    any.cluster_info()
        .expect("test mode accepts the cluster's certificate");
}

#[test]
fn the_server_name_is_verified_for_an_ip_address_and_for_a_host_name() {
    // The certificates name IP 127.0.0.1 and DNS localhost, so both addresses of the
    // name server pass the name check (what fails it is in `remoting::tls`'s unit
    // tests: the name server listens on 127.0.0.1 only).
    let port = namesrv().rsplit_once(':').unwrap().1.to_string();
    for addr in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let admin = Admin::builder()
            .client_options(
                ClientOptions::new()
                    .namesrv_addr(&addr)
                    .tls(tls())
                    .api_timeout(CALL_TIMEOUT),
            )
            .start()
            .unwrap();
        admin
            .cluster_info()
            .unwrap_or_else(|e| panic!("{addr}: {e}"));
    }
}

#[test]
fn without_a_client_certificate_the_cluster_refuses_with_a_tls_error() {
    let ns = namesrv();
    let files = cluster::cluster().tls_files().unwrap();
    let admin = Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(&ns)
                .tls(TlsConfig::new().ca_file(&files.ca_cert))
                .api_timeout(CALL_TIMEOUT),
        )
        .start()
        .unwrap();
    let started = Instant::now();
    let e = admin.cluster_info().expect_err("no client certificate");
    eprintln!("no client certificate: {e} ({:?})", started.elapsed());
    assert_eq!(e.kind(), ErrorKind::Tls, "{e}");
    assert!(e.to_string().contains(&ns), "{e}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The broker requires one too.
    let broker = broker_addr();
    fails_fast(
        "no client certificate, broker",
        ErrorKind::Tls,
        &broker,
        || admin.create_topic_on(&broker, &TopicConfig::new(unique("nocert"), 1)),
    );
}

fn broker_addr() -> String {
    cluster::cluster().broker_addrs()[0].1.clone()
}
