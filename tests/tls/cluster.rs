//! The one TLS-enforcing cluster this binary shares, started on first use.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rocketmq_blocking::testkit::{Cluster, TlsOptions};
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::{Admin, TlsConfig, TopicConfig};

/// The start's outcome, kept either way: a cluster that failed to start fails every test
/// at once instead of being started again by each.
static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The shared cluster: enforcing, client certificates required.
pub fn cluster() -> &'static Cluster {
    let started = CLUSTER.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        let mut b = Cluster::builder()
            .brokers(1)
            .tls(TlsOptions::enforcing().require_client_cert(true))
            // Each JVM builds its TLS contexts at boot, slow on two loaded cores.
            .start_timeout(Duration::from_secs(300))
            // Two cores shared with builds: give the send queue time rather than shed load.
            .broker_config("waitTimeMillsInSendQueue", "5000")
            .broker_config("osPageCacheBusyTimeOutMills", "5000");
        if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
            b = b.version(&v);
        }
        b.start().map_err(|e| e.to_string())
    });
    match started {
        Ok(c) => c,
        Err(e) => panic!("could not start the TLS test cluster: {e}"),
    }
}

pub fn namesrv() -> String {
    cluster().namesrv_addr()
}

/// Trusts the cluster's CA and presents its client certificate.
pub fn tls() -> TlsConfig {
    cluster().client_tls().expect("the cluster has TLS")
}

pub fn admin() -> Admin {
    // The JVMs share two loaded cores with builds: a long timeout.
    Admin::builder()
        .client_options(
            ClientOptions::new()
                .namesrv_addr(namesrv())
                .tls(tls())
                .api_timeout(Duration::from_secs(30)),
        )
        .start()
        .expect("admin")
}

/// A name unique in this test run.
pub fn unique(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// A new topic with `queues` queues, created over TLS.
pub fn topic(prefix: &str, queues: u32) -> String {
    let name = unique(prefix);
    admin()
        .create_topic(&TopicConfig::new(&name, queues))
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
