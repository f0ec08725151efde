//! Job 3's heartbeat: every master broker learns the producer group.

use std::time::Duration;

use rocketmq_blocking::{Message, Producer};

use crate::cluster::{self, BROKER_A, BROKER_B};
use rocketmq_blocking::ClientOptions;

#[test]
fn heartbeats_reach_every_master() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("hb", 2);
    let p = Producer::builder(cluster::unique("pg_hb"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .heartbeat_interval(Duration::from_millis(500)),
        )
        .start()
        .unwrap();
    // Heartbeats go to the brokers of the instance's routes, so the producer needs one.
    p.send(&Message::new(&topic, "hb")).unwrap();
    let admin = cluster::admin();
    for broker in [BROKER_A, BROKER_B] {
        let addr = cluster::broker_addr(broker);
        let mut last = None;
        let listed = cluster::eventually(Duration::from_secs(10), || {
            match admin.producer_connections_on(&addr, p.group()) {
                Ok(conns) => {
                    let found = conns.iter().any(|c| c.client_id == p.client_id());
                    last = Some(Ok(conns));
                    found
                }
                Err(e) => {
                    last = Some(Err(e));
                    false
                }
            }
        });
        assert!(
            listed,
            "{broker} ({addr}) does not list the producer: {last:?}"
        );
    }
    let all = admin.producer_connections(p.group()).unwrap();
    assert_eq!(
        all.iter().filter(|c| c.client_id == p.client_id()).count(),
        2,
        "{all:?}"
    );
}
