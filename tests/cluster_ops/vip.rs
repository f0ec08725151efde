//! The VIP channel: sends go to the broker's fast port (`listenPort - 2`).

use rocketmq_blocking::{Message, Producer};

use crate::cluster::{self, SendCounter, BROKER_A, BROKER_B};
use rocketmq_blocking::ClientOptions;

fn fast_port(addr: &str) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    format!("{host}:{}", port.parse::<u16>().unwrap() - 2)
}

#[test]
fn vip_channel_sends_through_the_fast_port() {
    let _serial = cluster::serial();
    let topic = cluster::topic_on_both("vip", 2);
    let p = Producer::builder(cluster::unique("pg_vip"))
        .client_options(
            ClientOptions::new()
                .namesrv_addr(cluster::namesrv())
                .vip_channel(true),
        )
        .start()
        .unwrap();
    let attempts = SendCounter::install(&p);
    let n = 8;
    for i in 0..n {
        let r = p.send(&Message::new(&topic, format!("vip {i}"))).unwrap();
        assert!([BROKER_A, BROKER_B].contains(&r.message_queue().broker_name()));
    }
    let (a, b) = (
        cluster::broker_addr(BROKER_A),
        cluster::broker_addr(BROKER_B),
    );
    let seen = attempts.snapshot();
    assert_eq!(
        attempts.get(&fast_port(&a)) + attempts.get(&fast_port(&b)),
        n,
        "every send went to a fast port: {seen:?}"
    );
    assert_eq!(attempts.get(&a) + attempts.get(&b), 0, "{seen:?}");
}
