//! The cluster this binary shares, the lock that serializes its tests, and helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode};
use rocketmq_blocking::remoting::RpcHook;
use rocketmq_blocking::testkit::Cluster;
use rocketmq_blocking::Admin;
use rocketmq_blocking::ClientOptions;
use rocketmq_blocking::TopicConfig;

pub use crate::counting::{eventually, unique};

pub const BROKER_A: &str = "broker-a";
pub const BROKER_B: &str = "broker-b";

static CLUSTER: OnceLock<Mutex<Cluster>> = OnceLock::new();
static SERIAL: Mutex<()> = Mutex::new(());

/// Taken by every test for its whole run: some tests stop and start brokers, and the
/// thread-count test needs a quiet process. (parking_lot: a failed test does not poison it.)
pub fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock();
    let _ = env_logger::builder().is_test(true).try_init();
    guard
}

/// The shared cluster, started on first use.
pub fn cluster() -> &'static Mutex<Cluster> {
    CLUSTER.get_or_init(|| {
        let mut b = Cluster::builder()
            .name_servers(2)
            .brokers(2)
            .broker_config("autoCreateTopicEnable", "false");
        if let Ok(v) = std::env::var("RMQ_TEST_VERSION") {
            b = b.version(&v);
        }
        let started = Instant::now();
        let c = b
            .start()
            .unwrap_or_else(|e| panic!("could not start the test cluster: {e}"));
        eprintln!(
            "cluster_ops: 2 name servers + 2 brokers up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        Mutex::new(c)
    })
}

/// The name-server address of the shared cluster.
pub fn namesrv() -> String {
    cluster().lock().namesrv_addr()
}

/// The address (`127.0.0.1:port`) of a broker, running or not.
pub fn broker_addr(name: &str) -> String {
    cluster()
        .lock()
        .broker_addrs()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| a)
        .unwrap_or_else(|| panic!("no broker named {name}"))
}

pub fn admin() -> Admin {
    Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(namesrv()))
        .start()
        .expect("admin client")
}

/// Creates a fresh topic with `queues` queues on every broker and waits for its route.
pub fn topic_on_both(prefix: &str, queues: u32) -> String {
    let name = unique(prefix);
    admin()
        .create_topic(&TopicConfig::new(&name, queues))
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

/// Restarts a broker on drop if it is not running, so a failing test leaves the cluster
/// as it found it.
pub struct RestartOnDrop(pub &'static str);

impl Drop for RestartOnDrop {
    fn drop(&mut self) {
        let mut c = cluster().lock();
        if !c.is_broker_running(self.0) {
            let started = Instant::now();
            if let Err(e) = c.start_broker(self.0) {
                eprintln!("restarting {}: {e}", self.0);
            } else {
                eprintln!(
                    "{} restarted in {:.1}s",
                    self.0,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
}

/// Restarts every name server that is not running on drop.
pub struct RestartNameServersOnDrop;

impl Drop for RestartNameServersOnDrop {
    fn drop(&mut self) {
        let (namesrvs, brokers) = {
            let mut c = cluster().lock();
            if let Err(e) = c.start_name_servers() {
                eprintln!("restarting the name servers: {e}");
            }
            let brokers: Vec<String> = c.broker_addrs().into_iter().map(|(n, _)| n).collect();
            (c.namesrv_addrs(), brokers)
        };
        // Restarted name servers know a broker only from its next registration (every
        // 30 s), one name server possibly before the other. Later tests of this binary
        // take a healthy cluster for granted: a client asking the name server that does
        // not know broker-b yet would see only broker-a for up to 30 s. So wait until
        // each name server knows every broker.
        let deadline = Instant::now() + std::time::Duration::from_secs(90);
        for ns in namesrvs {
            let Ok(admin) = Admin::builder()
                .client_options(ClientOptions::new().namesrv_addr(&ns))
                .start()
            else {
                eprintln!("no admin for name server {ns}");
                continue;
            };
            let knows_all = || {
                admin.cluster_info().is_ok_and(|info| {
                    brokers
                        .iter()
                        .all(|b| info.broker_addr_table.contains_key(b))
                })
            };
            while !knows_all() {
                if Instant::now() > deadline {
                    eprintln!("name server {ns} does not know every broker of {brokers:?} yet");
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            drop(admin);
        }
    }
}

/// An RPC hook counting send requests (`SEND_MESSAGE_V2`, `SEND_BATCH_MESSAGE`) per
/// target address: every attempt, failed ones included.
#[derive(Default)]
pub struct SendCounter {
    per_addr: Mutex<HashMap<String, usize>>,
}

impl SendCounter {
    pub fn get(&self, addr: &str) -> usize {
        self.per_addr.lock().get(addr).copied().unwrap_or(0)
    }

    pub fn snapshot(&self) -> HashMap<String, usize> {
        self.per_addr.lock().clone()
    }

    pub fn install(producer: &rocketmq_blocking::Producer) -> Arc<SendCounter> {
        let counter = Arc::new(SendCounter::default());
        producer
            .client_instance()
            .expect("a running producer has an instance")
            .remoting()
            .register_rpc_hook(counter.clone());
        counter
    }
}

impl RpcHook for SendCounter {
    fn before_request(&self, addr: &str, request: &mut RemotingCommand) {
        let code = request.request_code();
        if code == RequestCode::SEND_MESSAGE_V2 || code == RequestCode::SEND_BATCH_MESSAGE {
            *self.per_addr.lock().entry(addr.to_string()).or_default() += 1;
        }
    }
}
