//! Route bodies from the name server (GET_ROUTEINFO_BY_TOPIC): the tolerant fastjson
//! reader into `TopicRouteData` with the client's bounds on brokers and queues
//! (`protocol::decode_route`, as the client decodes every route), then what the client makes of a route — the publish info
//! (writable queues of brokers with a master, or `orderTopicConf`), the subscribe set
//! (readable queues) and a producer's queue choice.
//!
//! Besides "never panics" and "never allocates without bound" (the `-rss_limit_mb` of the
//! run), every queue must come from the route, and a route we write must read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rocketmq_blocking::client::{to_publish_info, to_subscribe_info};
use rocketmq_blocking::protocol::{decode_route, route_to_json};

const TOPIC: &str = "T";

fuzz_target!(|data: &[u8]| {
    let Ok(route) = decode_route(data) else {
        return;
    };
    let sorted = route.sorted();
    assert_eq!(sorted.queue_datas.len(), route.queue_datas.len());
    for b in &route.broker_datas {
        // A group without a master falls back to any address it has.
        assert_eq!(b.select_addr().is_some(), !b.broker_addrs.is_empty());
    }
    if let Ok(text) = serde_json::to_vec(&route_to_json(&route)) {
        let back = decode_route(&text).expect("our own route reads back");
        assert_eq!(back, route);
    }

    let publish = to_publish_info(TOPIC, &route);
    for mq in &publish.message_queues {
        assert_eq!(mq.topic(), TOPIC);
        assert!(mq.queue_id() >= 0, "{mq:?}");
        if !publish.order_topic {
            // Only writable queues of a broker group that has a master.
            let writable = route.queue_datas.iter().any(|q| {
                q.broker_name == mq.broker_name()
                    && q.perm.is_writeable()
                    && u32::try_from(mq.queue_id()).is_ok_and(|id| id < q.write_queue_nums)
            });
            assert!(writable, "{mq:?} is not a writable queue of the route");
            let master = route
                .broker_datas
                .iter()
                .any(|b| b.broker_name == mq.broker_name() && b.master_addr().is_some());
            assert!(master, "{mq:?} is on a broker without a master");
            let _ = publish.write_queue_nums_of(mq.broker_name());
        }
    }
    assert_eq!(publish.ok(), publish.select_one().is_some());
    // A retry moves to another broker whenever the route has one: the rotation covers
    // every queue before giving up.
    if let Some(first) = publish.message_queues.first() {
        let last = first.broker_name().to_string();
        let other = publish.select_one_avoiding(Some(&last));
        if publish
            .message_queues
            .iter()
            .any(|q| q.broker_name() != last)
        {
            assert_ne!(other.map(|q| q.broker_name()), Some(last.as_str()));
        }
    }

    for mq in to_subscribe_info(TOPIC, &route) {
        assert_eq!(mq.topic(), TOPIC);
        let readable = route.queue_datas.iter().any(|q| {
            q.broker_name == mq.broker_name()
                && q.perm.is_readable()
                && u32::try_from(mq.queue_id()).is_ok_and(|id| id < q.read_queue_nums)
        });
        assert!(readable, "{mq:?} is not a readable queue of the route");
    }
});
