//! The one real RocketMQ cluster this test binary shares, started on first use.
//!
//! `NAMESRV_ADDR` is deliberately ignored: the tests create and delete topics and groups,
//! so they always run against their own throw-away cluster. `RMQ_TEST_VERSION` picks the
//! RocketMQ release (default: the testkit's default).

use std::sync::OnceLock;

use parking_lot::Mutex;
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::TopicConfig;

pub use crate::counting::unique;

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();
static NAMESRV: OnceLock<String> = OnceLock::new();

fn start() -> Cluster {
    let _ = env_logger::builder().is_test(true).try_init();
    // SQL92 subscriptions need the broker's property filter. The broker sheds sends that
    // waited over 200 ms in its queue (SYSTEM_BUSY; async sends do not retry it); tests share
    // two cores with JVMs and builds, so give the queue time rather than shed load.
    let mut b = Cluster::builder()
        .brokers(1)
        .broker_config("enablePropertyFilter", "true")
        .broker_config("waitTimeMillsInSendQueue", "5000")
        .broker_config("osPageCacheBusyTimeOutMills", "5000");
    if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
        b = b.version(&v);
    }
    match b.start() {
        Ok(c) => c,
        Err(e) => panic!("could not start the test cluster: {e}"),
    }
}

/// The name-server address of the shared cluster.
/// Client options on the shared cluster's name server.
pub fn options() -> rocketmq_blocking::ClientOptions {
    rocketmq_blocking::ClientOptions::new().namesrv_addr(namesrv())
}

pub fn namesrv() -> &'static str {
    NAMESRV.get_or_init(|| {
        let c = CLUSTER.get_or_init(|| Mutex::new(start()));
        c.lock().namesrv_addr()
    })
}

/// The shared cluster itself (for broker addresses and version).
pub fn cluster() -> &'static Mutex<Cluster> {
    namesrv();
    CLUSTER.get_or_init(|| Mutex::new(start()))
}

/// Creates a fresh topic with `queues` queues on every broker and waits for its route.
pub fn topic(prefix: &str, queues: u32) -> String {
    let name = unique(prefix);
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin client");
    admin
        .create_topic(&TopicConfig::new(&name, queues))
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

/// A client instance of its own named `name`, made before any client of that name so that
/// an RPC hook registered on it sees everything they send.
pub fn instance(name: &str) -> std::sync::Arc<rocketmq_blocking::client::MQClientInstance> {
    rocketmq_blocking::client::manager::get_or_create_instance(
        &rocketmq_blocking::client::ClientConfig::from(
            ClientOptions::new()
                .namesrv_addr(namesrv())
                .instance_name(name),
        ),
    )
    .unwrap()
}

/// Waits (at most 10 s) until the consume queue of each sent message holds it.
///
/// SEND_OK means the broker's commit log has the message; the broker copies it into the
/// queue's consume queue, whose offsets admin calls report, on its own thread a moment
/// later, and on a loaded machine that moment can be long enough for a test to see it.
pub fn wait_dispatched(sent: &[rocketmq_blocking::SendResult]) {
    let admin = Admin::builder()
        .client_options(options())
        .start()
        .expect("admin client");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for r in sent {
        loop {
            match admin.max_offset(r.message_queue()) {
                Ok(max) if max > r.queue_offset() => break,
                _ => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "{:?} offset {} never reached its consume queue",
                        r.message_queue(),
                        r.queue_offset()
                    );
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }
}
