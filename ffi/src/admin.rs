//! A small admin client (Java `DefaultMQAdminExt`, a part): create a topic, read a route.
//! Thread safety: an `rmq_admin` may be used from several threads at once.

use std::ffi::c_char;

use rocketmq_blocking::{Admin, ClientOptions, MessageQueue, TopicConfig, TopicRouteData};

use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{rmq_message_queue, rmq_queue_list};
use crate::options::rmq_client_options;
use crate::util::{copy_to_buf, handle, out_handle, str_arg, take_handle};

/// An admin client connected to the name servers.
pub struct rmq_admin {
    inner: Admin,
}

/// Starts an admin client with `options` (NULL: the defaults, with the name servers of
/// `NAMESRV_ADDR`); the options are copied. It connects on first use.
#[no_mangle]
pub extern "C" fn rmq_admin_new(
    options: *const rmq_client_options,
    admin_out: *mut *mut rmq_admin,
) -> rmq_result {
    guard(|| {
        let options = if options.is_null() {
            ClientOptions::new()
        } else {
            handle(options, "client options")?.inner.clone()
        };
        let a = Admin::builder()
            .client_options(options)
            .start()
            .map_err(err)?;
        out_handle(admin_out, rmq_admin { inner: a })
    })
}

/// Creates (or updates) `topic` with `queues` read and write queues on every master.
#[no_mangle]
pub extern "C" fn rmq_admin_create_topic(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    queues: u32,
) -> rmq_result {
    guard(|| {
        let a = handle(a, "admin")?;
        a.inner
            .create_topic(&TopicConfig::new(
                str_arg(topic, topic_len, "topic")?,
                queues,
            ))
            .map_err(err)?;
        Ok(())
    })
}

/// Writes the topic's route (Java `TopicRouteData`) as JSON into `buf`, NUL-terminated;
/// `*written` is its length. With `RMQ_BUFFER_TOO_SMALL`, `*written` is the length
/// needed (call again with a buffer of at least `*written + 1`).
#[no_mangle]
pub extern "C" fn rmq_admin_topic_route_json(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let route = handle(a, "admin")?
            .inner
            .topic_route(str_arg(topic, topic_len, "topic")?)
            .map_err(err)?;
        let json = serde_json::to_vec(&route_json(&route.sorted()))
            .map_err(|e| fail(rmq_result::RMQ_OTHER, format!("route to JSON: {e}")))?;
        copy_to_buf(&json, buf, len, written, true)
    })
}

/// The readable queues of `topic` from its route (for lite pull `assign`); free the list
/// with `rmq_queue_list_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_topic_queues(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    list_out: *mut *mut rmq_queue_list,
) -> rmq_result {
    guard(|| {
        let topic = str_arg(topic, topic_len, "topic")?;
        let route = handle(a, "admin")?
            .inner
            .topic_route(topic)
            .map_err(err)?
            .sorted();
        let mut items = Vec::new();
        for qd in &route.queue_datas {
            // A route's counts are Java's `int`.
            for id in 0..i32::try_from(qd.read_queue_nums).unwrap_or(i32::MAX) {
                items.push(rmq_message_queue {
                    inner: MessageQueue::new(topic, &qd.broker_name, id),
                });
            }
        }
        out_handle(list_out, rmq_queue_list { items })
    })
}

/// The route in Java's JSON form (`TopicRouteData` as fastjson writes it), which this
/// ABI promises; the Rust types have no serde impls of their own.
fn route_json(route: &TopicRouteData) -> serde_json::Value {
    let queue_datas: Vec<_> = route
        .queue_datas
        .iter()
        .map(|q| {
            serde_json::json!({
                "brokerName": q.broker_name,
                "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums,
                "perm": q.perm.bits(),
                "topicSysFlag": q.topic_sys_flag,
            })
        })
        .collect();
    let broker_datas: Vec<_> = route
        .broker_datas
        .iter()
        .map(|b| {
            let addrs: serde_json::Map<String, serde_json::Value> = b
                .broker_addrs
                .iter()
                .map(|(id, addr)| (id.to_string(), addr.as_str().into()))
                .collect();
            serde_json::json!({
                "cluster": b.cluster,
                "brokerName": b.broker_name,
                "brokerAddrs": addrs,
            })
        })
        .collect();
    let mut json = serde_json::json!({
        "queueDatas": queue_datas,
        "brokerDatas": broker_datas,
        "filterServerTable": route.filter_server_table,
    });
    if let Some(conf) = &route.order_topic_conf {
        json["orderTopicConf"] = conf.as_str().into();
    }
    json
}

/// Shuts the admin client down and frees it. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_admin_free(a: *mut rmq_admin) {
    guard_void(|| drop(take_handle(a)));
}
