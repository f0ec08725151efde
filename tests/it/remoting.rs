//! The remoting client against the real name server and broker.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::bounded;
use rocketmq_blocking::client::{MQClientAPI, TopicConfig};
use rocketmq_blocking::protocol::header::{
    GetRouteInfoRequestHeader, OffsetResponseHeader, QueueOffsetRequestHeader,
};
use rocketmq_blocking::protocol::heartbeat::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel,
};
use rocketmq_blocking::protocol::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use rocketmq_blocking::remoting::{RemotingClient, RemotingConfig};
use rocketmq_blocking::Admin;
use rocketmq_blocking::ErrorKind;

use crate::cluster;
use rocketmq_blocking::ClientOptions;

fn api(ty: SerializeType) -> MQClientAPI {
    let remoting = RemotingClient::new(RemotingConfig {
        serialize_type: ty,
        ..RemotingConfig::default()
    })
    .unwrap();
    remoting.update_name_server_address_list(&[cluster::namesrv().to_string()]);
    MQClientAPI::new(Arc::new(remoting))
}

fn broker_addr() -> String {
    cluster::cluster().lock().broker_addrs()[0].1.clone()
}

const T: Duration = Duration::from_secs(5);

#[test]
fn route_of_an_existing_topic_names_the_registered_broker() {
    let topic = cluster::topic("route", 4);
    let api = api(SerializeType::Json);
    let route = api.get_topic_route_info(&topic, T).unwrap();
    let started = std::time::Instant::now();
    for _ in 0..200 {
        api.get_topic_route_info(&topic, T).unwrap();
    }
    eprintln!(
        "route query round trip: {:.0} µs",
        started.elapsed().as_micros() as f64 / 200.0
    );
    assert_eq!(route.broker_datas.len(), 1);
    assert_eq!(
        route.broker_datas[0].master_addr(),
        Some(broker_addr().as_str())
    );
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
    assert_eq!(route.queue_datas[0].read_queue_nums, 4);
    assert_eq!(
        route.queue_datas[0].perm,
        rocketmq_blocking::Perm::READ_WRITE
    );
    assert_eq!(route.queue_datas[0].perm.bits(), 6);
}

#[test]
fn an_unknown_topic_is_a_typed_topic_not_exist_error() {
    let e = api(SerializeType::Json)
        .get_topic_route_info(&cluster::unique("nosuchtopic"), T)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Response, "{e}");
    assert_eq!(e.response_code(), Some(ResponseCode::TOPIC_NOT_EXIST));
}

#[test]
fn cluster_info_decodes_with_its_bare_integer_keys() {
    let info = api(SerializeType::Json).get_broker_cluster_info(T).unwrap();
    let (name, bd) = info.broker_addr_table.iter().next().expect("one broker");
    assert_eq!(bd.master_addr(), Some(broker_addr().as_str()));
    assert!(info.cluster_addr_table["DefaultCluster"].contains(name));
}

#[test]
fn create_topic_then_the_route_exists() {
    let name = cluster::unique("created");
    let api = api(SerializeType::Json);
    assert!(api.get_topic_route_info(&name, T).is_err());
    api.create_topic(&broker_addr(), "TBW102", &TopicConfig::new(&name, 3), T)
        .unwrap();
    let admin = Admin::builder()
        .client_options(ClientOptions::new().namesrv_addr(cluster::namesrv()))
        .start()
        .unwrap();
    let route = admin
        .wait_for_route(&name, 1, Duration::from_secs(10))
        .unwrap();
    assert_eq!(route.queue_datas[0].write_queue_nums, 3);
}

#[test]
fn both_header_encodings_are_accepted_by_name_server_and_broker() {
    let topic = cluster::topic("headers", 2);
    for ty in [SerializeType::Json, SerializeType::RocketMq] {
        let api = api(ty);
        let route = api.get_topic_route_info(&topic, T).unwrap();
        assert_eq!(route.queue_datas.len(), 1, "{ty:?}");
        let header = GetRouteInfoRequestHeader {
            topic: topic.clone(),
            accept_standard_json_only: Some(true),
        };
        let req =
            RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
        // 5.x name servers answer route queries in their own default encoding (JSON),
        // whatever the request used: the client must read both.
        let resp = api
            .remoting()
            .invoke_sync(cluster::namesrv(), req, T)
            .unwrap();
        assert_eq!(resp.code, 0, "{ty:?}");
        let req = max_offset_request(&topic, 0);
        let resp = api.remoting().invoke_sync(&broker_addr(), req, T).unwrap();
        assert_eq!(resp.code, 0, "{ty:?}: {:?}", resp.remark);
        // 4.9.x answers in the request's encoding; 5.3.3 was seen answering in its
        // own default (JSON). Either must decode.
        assert!(resp.serialize_type == ty || resp.serialize_type == SerializeType::Json);
        let h: OffsetResponseHeader = resp.decode_header().unwrap();
        assert_eq!(h.offset, 0);
    }
}

fn max_offset_request(topic: &str, queue: i32) -> RemotingCommand {
    let header = QueueOffsetRequestHeader {
        topic: topic.to_string(),
        queue_id: queue,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header)
}

/// Sync calls from `threads` threads on one connection to the broker, `calls` each: every
/// caller gets the response to its own request.
fn sync_calls_from_threads_each_get_their_own_response(threads: i32, calls: i32) {
    let topic = cluster::topic(&format!("concurrent{threads}"), 4);
    let api = api(SerializeType::Json);
    let addr = broker_addr();
    let mismatches = Arc::new(AtomicUsize::new(0));
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (api, addr, topic, mismatches) = (&api, &addr, &topic, mismatches.clone());
            s.spawn(move || {
                for i in 0..calls {
                    let req = max_offset_request(topic, (t + i) % 4);
                    let opaque = req.opaque;
                    let resp = api.remoting().invoke_sync(addr, req, T).unwrap();
                    if resp.opaque != opaque || resp.code != 0 {
                        mismatches.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(mismatches.load(Ordering::SeqCst), 0);
    let took = started.elapsed();
    let total = f64::from(threads * calls);
    eprintln!(
        "{threads} x {calls} sync GET_MAX_OFFSET: {:.2} s, {:.0} calls/s",
        took.as_secs_f64(),
        total / took.as_secs_f64()
    );
}

#[test]
fn thirty_two_threads_times_a_thousand_sync_calls_each_get_their_own_response() {
    // Past the followers a reading caller takes: the I/O thread reads for most.
    sync_calls_from_threads_each_get_their_own_response(32, 1000);
}

#[test]
fn four_threads_times_two_thousand_sync_calls_each_get_their_own_response() {
    // Callers follow the one reading the connection, which delivers their answers.
    sync_calls_from_threads_each_get_their_own_response(4, 2000);
}

#[test]
fn async_callbacks_fire_exactly_once_per_request() {
    let topic = cluster::topic("async", 2);
    let api = api(SerializeType::RocketMq);
    let addr = broker_addr();
    let n = 2000;
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = bounded(n);
    for i in 0..n {
        let req = max_offset_request(&topic, (i % 2) as i32);
        let opaque = req.opaque;
        let (calls, tx) = (calls.clone(), tx.clone());
        api.remoting()
            .invoke_async(&addr, req, T, move |r| {
                calls.fetch_add(1, Ordering::SeqCst);
                let ok = r
                    .map(|resp| resp.opaque == opaque && resp.code == 0)
                    .unwrap_or(false);
                let _ = tx.send((opaque, ok));
            })
            .unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let (opaque, ok) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(ok);
        assert!(seen.insert(opaque), "callback of {opaque} fired twice");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(calls.load(Ordering::SeqCst), n);
}

#[test]
fn oneway_requests_reach_the_broker() {
    // A oneway UPDATE_CONSUMER_OFFSET is what the offset job sends; read it back. The
    // broker only keeps offsets of groups it knows, and a heartbeat is what makes a group
    // known (a oneway request cannot report SUBSCRIPTION_GROUP_NOT_EXIST).
    let topic = cluster::topic("oneway", 1);
    let group = cluster::unique("oneway_group");
    let api = api(SerializeType::Json);
    let addr = broker_addr();
    let hb = HeartbeatData {
        client_id: cluster::unique("oneway_client"),
        consumer_data_set: vec![ConsumerData {
            group_name: group.clone(),
            consume_type: ConsumeType::ConsumeActively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: vec![],
            unit_mode: false,
        }],
        producer_data_set: vec![],
    };
    api.send_heartbeat(&addr, serde_json::to_vec(&hb).unwrap(), T)
        .unwrap();
    let mut req = RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET);
    req.ext_fields.insert("consumerGroup", group.as_str());
    req.ext_fields.insert("topic", topic.as_str());
    req.ext_fields.insert("queueId", "0");
    req.ext_fields.insert("commitOffset", "42");
    api.remoting().invoke_oneway(&addr, req, T).unwrap();
    let mut got = None;
    for _ in 0..50 {
        let mut q = RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET);
        q.ext_fields.insert("consumerGroup", group.as_str());
        q.ext_fields.insert("topic", topic.as_str());
        q.ext_fields.insert("queueId", "0");
        let resp = api.remoting().invoke_sync(&addr, q, T).unwrap();
        if resp.code == 0 {
            got = resp.ext_fields.get("offset").map(str::to_string);
            if got.as_deref() == Some("42") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(got.as_deref(), Some("42"));
}

#[test]
fn name_server_selection_skips_a_dead_address() {
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let remoting = RemotingClient::new(RemotingConfig::default()).unwrap();
    assert!(
        remoting.update_name_server_address_list(&[dead.clone(), cluster::namesrv().to_string()])
    );
    assert!(
        !remoting.update_name_server_address_list(&[cluster::namesrv().to_string(), dead.clone()])
    );
    let api = MQClientAPI::new(Arc::new(remoting));
    for _ in 0..4 {
        api.get_broker_cluster_info(T).unwrap();
    }
    assert_eq!(
        api.remoting().chosen_name_server().as_deref(),
        Some(cluster::namesrv())
    );
}

#[test]
fn all_name_servers_dead_lists_every_address() {
    let dead: Vec<String> = (0..2)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        })
        .collect();
    let remoting = RemotingClient::new(RemotingConfig::default()).unwrap();
    remoting.update_name_server_address_list(&dead);
    let e = MQClientAPI::new(Arc::new(remoting))
        .get_broker_cluster_info(T)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connect);
    for d in &dead {
        assert!(e.to_string().contains(d.as_str()), "{e}");
    }
}
