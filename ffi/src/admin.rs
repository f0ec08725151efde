//! An admin client (Java `DefaultMQAdminExt`, the parts an application needs): topics
//! (create, delete, list, route), the cluster, queue offsets, a group's progress, and
//! message lookups by offset id, unique key and key.
//! Thread safety: an `rmq_admin` may be used from several threads at once; the results
//! (`rmq_string_list`, `rmq_consume_stats`) are for one thread at a time.

use std::ffi::{c_char, c_int};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rocketmq_blocking::{
    Admin, BrokerData, ClientOptions, ConsumeStats, MessageQuery, MessageQueue, MessageRequestMode,
    QueueProgress, ResetTarget, TopicConfig, TopicRouteData,
};

use crate::error::{err, fail, guard, guard_void, rmq_result};
use crate::message::{
    millis, out_of_range, rmq_message_ext, rmq_message_list, rmq_message_queue, rmq_queue_list,
};
use crate::options::rmq_client_options;
use crate::util::{
    copy_to_buf, handle, opt_str_arg, out, out_handle, out_str, str_arg, take_handle,
};

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
    let broker_datas: Vec<_> = route.broker_datas.iter().map(broker_json).collect();
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

/// A broker group in Java's JSON form (`BrokerData`).
fn broker_json(b: &BrokerData) -> serde_json::Value {
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
}

fn admin<'a>(a: *const rmq_admin) -> Result<&'a Admin, rmq_result> {
    Ok(&handle(a, "admin")?.inner)
}

fn to_json_buf(
    v: &serde_json::Value,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> Result<(), rmq_result> {
    let json =
        serde_json::to_vec(v).map_err(|e| fail(rmq_result::RMQ_OTHER, format!("to JSON: {e}")))?;
    copy_to_buf(&json, buf, len, written, true)
}

/// A time in milliseconds since the epoch; one past Java's `long` (what the broker
/// reads) is an error.
fn time_ms(ms: u64, what: &str) -> Result<SystemTime, rmq_result> {
    i64::try_from(ms)
        .ok()
        .and_then(|_| UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .ok_or_else(|| {
            fail(
                rmq_result::RMQ_INVALID_ARGUMENT,
                format!("{what} {ms} ms is out of range"),
            )
        })
}

/// A list of strings (topic names, broker names).
pub struct rmq_string_list {
    items: Vec<String>,
}

/// The number of strings in the list.
#[no_mangle]
pub extern "C" fn rmq_string_list_len(list: *const rmq_string_list, len: *mut usize) -> rmq_result {
    guard(|| out(len, handle(list, "list")?.items.len()))
}

/// The string at `index`, borrowed from the list (valid until the list is freed; not
/// NUL-terminated).
#[no_mangle]
pub extern "C" fn rmq_string_list_get(
    list: *const rmq_string_list,
    index: usize,
    data: *mut *const c_char,
    len: *mut usize,
) -> rmq_result {
    guard(|| {
        let l = handle(list, "list")?;
        let s = l
            .items
            .get(index)
            .ok_or_else(|| out_of_range(index, l.items.len()))?;
        out_str(s, data, len)
    })
}

/// Frees a string list. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_string_list_free(list: *mut rmq_string_list) {
    guard_void(|| drop(take_handle(list)));
}

/// Every topic the name server knows (system topics and groups' retry topics included),
/// sorted (Java `fetchAllTopicList`); free the list with `rmq_string_list_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_topic_list(
    a: *const rmq_admin,
    list_out: *mut *mut rmq_string_list,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        out_param(list_out, "list_out")?;
        let items = a.topic_list().map_err(err)?;
        out_handle(list_out, rmq_string_list { items })
    })
}

/// Deletes `topic` on every master broker, then on every name server (Java `mqadmin
/// deleteTopic`), so its route disappears. `*brokers_out` (when `brokers_out` is not
/// NULL) is the list of the brokers' names, to free with `rmq_string_list_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_delete_topic(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    brokers_out: *mut *mut rmq_string_list,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let items = a
            .delete_topic(str_arg(topic, topic_len, "topic")?)
            .map_err(err)?;
        if brokers_out.is_null() {
            return Ok(());
        }
        out_handle(brokers_out, rmq_string_list { items })
    })
}

/// Sets how `group` consumes `topic` on every master broker (Java
/// `setMessageRequestMode`, `mqadmin setConsumeMode`): `pop` nonzero for POP, with up to
/// `pop_share_queue_num + 1` consumers sharing each queue, zero for PULL. Push consumers
/// built with `rmq_push_consumer_builder_client_rebalance(b, 0)` follow it at their next
/// rebalance. A 4.x broker answers `RMQ_UNSUPPORTED`. `*brokers_out` (when not NULL) is
/// the list of the brokers' names, to free with `rmq_string_list_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_set_message_request_mode(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    group: *const c_char,
    group_len: usize,
    pop: c_int,
    pop_share_queue_num: u32,
    brokers_out: *mut *mut rmq_string_list,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let mode = if pop != 0 {
            MessageRequestMode::Pop
        } else {
            MessageRequestMode::Pull
        };
        let items = a
            .set_message_request_mode(
                str_arg(topic, topic_len, "topic")?,
                str_arg(group, group_len, "group")?,
                mode,
                pop_share_queue_num,
            )
            .map_err(err)?;
        if brokers_out.is_null() {
            return Ok(());
        }
        out_handle(brokers_out, rmq_string_list { items })
    })
}

/// Writes the cluster (Java `ClusterInfo`) as JSON into `buf`, NUL-terminated, as
/// `rmq_admin_topic_route_json` does: `{"brokerAddrTable": {name: {"cluster",
/// "brokerName", "brokerAddrs": {id: addr}}}, "clusterAddrTable": {cluster: [names]}}`,
/// keys sorted, broker id 0 the master.
#[no_mangle]
pub extern "C" fn rmq_admin_cluster_info_json(
    a: *const rmq_admin,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        out_param(buf, "the buffer")?;
        out_param(written, "written")?;
        let info = a.cluster_info().map_err(err)?;
        let brokers: serde_json::Map<String, serde_json::Value> = info
            .broker_addr_table
            .iter()
            .map(|(name, b)| (name.clone(), broker_json(b)))
            .collect();
        let clusters: serde_json::Map<String, serde_json::Value> = info
            .cluster_addr_table
            .iter()
            .map(|(name, names)| {
                let mut names = names.clone();
                names.sort();
                (name.clone(), names.into())
            })
            .collect();
        let json = serde_json::json!({
            "brokerAddrTable": brokers,
            "clusterAddrTable": clusters,
        });
        to_json_buf(&json, buf, len, written)
    })
}

/// Writes the online consumers of `group` (Java `examineConsumerConnectionInfo`, mqadmin
/// `consumerConnection`) as JSON into `buf`, NUL-terminated, as
/// `rmq_admin_topic_route_json` does: `{"connections": [{"clientId", "clientAddr",
/// "language", "version"}], "subscriptions": {topic: expression}, "consumeType",
/// "messageModel", "consumeFromWhere"}`. A group online nowhere is an error with the
/// broker's code `CONSUMER_NOT_ONLINE` (206).
#[no_mangle]
pub extern "C" fn rmq_admin_consumer_connections_json(
    a: *const rmq_admin,
    group: *const c_char,
    group_len: usize,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    named_json(
        a,
        (group, group_len, "group"),
        (buf, len, written),
        |a, group| {
            let c = a.consumer_connections(group).map_err(err)?;
            Ok(crate::stats_json::consumer_connection(&c))
        },
    )
}

/// Asks `a` about the named thing and writes the JSON `view` makes of the answer into
/// `buf`, as `rmq_admin_topic_route_json` does.
fn named_json(
    a: *const rmq_admin,
    (name, name_len, what): (*const c_char, usize, &str),
    (buf, len, written): (*mut c_char, usize, *mut usize),
    view: impl FnOnce(&Admin, &str) -> Result<serde_json::Value, rmq_result>,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let name = str_arg(name, name_len, what)?;
        out_param(buf, "the buffer")?;
        out_param(written, "written")?;
        to_json_buf(&view(a, name)?, buf, len, written)
    })
}

/// Writes the queues of `topic` with their offsets (Java `examineTopicStats`, mqadmin
/// `topicStatus`) as JSON into `buf`, NUL-terminated, as `rmq_admin_topic_route_json`
/// does: `{"queues": [{"topic", "brokerName", "queueId", "minOffset", "maxOffset",
/// "lastUpdateMs"}]}`, sorted by broker name and queue id; `lastUpdateMs` is the last
/// message's store time, `null` for an empty queue.
#[no_mangle]
pub extern "C" fn rmq_admin_topic_stats_json(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    buf: *mut c_char,
    len: usize,
    written: *mut usize,
) -> rmq_result {
    named_json(
        a,
        (topic, topic_len, "topic"),
        (buf, len, written),
        |a, topic| {
            let stats = a.topic_stats(topic).map_err(err)?;
            Ok(crate::stats_json::topic_stats(&stats))
        },
    )
}

/// The store time of the first message still stored in `queue`, in ms since the epoch
/// (Java `earliestMsgStoreTime`); `*found` is false for an empty queue.
#[no_mangle]
pub extern "C" fn rmq_admin_earliest_msg_store_time(
    a: *const rmq_admin,
    queue: *const rmq_message_queue,
    found: *mut bool,
    timestamp_ms: *mut i64,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let q = queue_ref(queue)?;
        out_param(found, "found")?;
        out_param(timestamp_ms, "timestamp_ms")?;
        let t = a.earliest_msg_store_time(q).map_err(err)?;
        out(found, t.is_some())?;
        out(timestamp_ms, t.map_or(-1, millis))
    })
}

/// Checks an out-parameter before the call whose result it is for goes out.
fn out_param<T>(p: *mut T, what: &str) -> Result<(), rmq_result> {
    if p.is_null() {
        return Err(fail(
            rmq_result::RMQ_NULL_PARAMETER,
            format!("{what} is NULL"),
        ));
    }
    Ok(())
}

fn queue_ref<'a>(q: *const rmq_message_queue) -> Result<&'a MessageQueue, rmq_result> {
    Ok(&handle(q, "queue")?.inner)
}

/// An offset of `queue` that `ask` reads from its broker, into `*offset`.
fn queue_offset(
    a: *const rmq_admin,
    queue: *const rmq_message_queue,
    offset: *mut i64,
    ask: fn(&Admin, &MessageQueue) -> rocketmq_blocking::Result<i64>,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let q = queue_ref(queue)?;
        out_param(offset, "offset")?;
        let o = ask(a, q).map_err(err)?;
        out(offset, o)
    })
}

/// The max offset of `queue`: where its next message will be stored (Java `maxOffset`).
/// Asked of the master of the queue's broker, found in the topic's route.
#[no_mangle]
pub extern "C" fn rmq_admin_max_offset(
    a: *const rmq_admin,
    queue: *const rmq_message_queue,
    offset: *mut i64,
) -> rmq_result {
    queue_offset(a, queue, offset, Admin::max_offset)
}

/// The min offset of `queue`: its first offset still stored (Java `minOffset`).
#[no_mangle]
pub extern "C" fn rmq_admin_min_offset(
    a: *const rmq_admin,
    queue: *const rmq_message_queue,
    offset: *mut i64,
) -> rmq_result {
    queue_offset(a, queue, offset, Admin::min_offset)
}

/// The offset in `queue` of a message stored about `timestamp_ms` (ms since the epoch;
/// Java `searchOffset`). 5.x brokers answer the first one stored at that time or later
/// (the max offset if none is), 4.x brokers the one stored closest to it.
#[no_mangle]
pub extern "C" fn rmq_admin_search_offset(
    a: *const rmq_admin,
    queue: *const rmq_message_queue,
    timestamp_ms: u64,
    offset: *mut i64,
) -> rmq_result {
    guard(|| {
        let at = time_ms(timestamp_ms, "timestamp")?;
        out_param(offset, "offset")?;
        let o = admin(a)?
            .search_offset(queue_ref(queue)?, at)
            .map_err(err)?;
        out(offset, o)
    })
}

/// The sum of the max offsets of every queue of `topic`: the messages stored so far.
#[no_mangle]
pub extern "C" fn rmq_admin_total_max_offset(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    total: *mut i64,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let topic = str_arg(topic, topic_len, "topic")?;
        out_param(total, "total")?;
        let t = a.total_max_offset(topic).map_err(err)?;
        out(total, t)
    })
}

/// A consumer group's progress (Java `ConsumeStats`): per queue the broker's and the
/// group's offsets. Free with `rmq_consume_stats_free`.
pub struct rmq_consume_stats {
    total_diff: u64,
    consume_tps: f64,
    queues: Vec<Progress>,
}

/// One queue of `rmq_consume_stats`, as C reads it.
struct Progress {
    queue: rmq_message_queue,
    broker_offset: i64,
    consumer_offset: i64,
    last_timestamp_ms: i64,
}

impl From<QueueProgress> for Progress {
    fn from(p: QueueProgress) -> Progress {
        Progress {
            broker_offset: p.broker_offset,
            consumer_offset: p.consumer_offset,
            last_timestamp_ms: p.last_timestamp.map_or(0, millis),
            queue: rmq_message_queue { inner: p.queue },
        }
    }
}

impl rmq_consume_stats {
    fn new(s: ConsumeStats) -> rmq_consume_stats {
        rmq_consume_stats {
            total_diff: s.total_diff(),
            consume_tps: s.consume_tps,
            queues: s.queues.into_values().map(Progress::from).collect(),
        }
    }
}

/// The progress of `group` in `topic` (NULL: in every topic it has offsets in), from
/// every broker that knows the group (Java `examineConsumeStats`, what `mqadmin
/// consumerProgress` prints); free it with `rmq_consume_stats_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_consume_stats(
    a: *const rmq_admin,
    group: *const c_char,
    group_len: usize,
    topic: *const c_char,
    topic_len: usize,
    stats_out: *mut *mut rmq_consume_stats,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let group = str_arg(group, group_len, "group")?;
        let topic = opt_str_arg(topic, topic_len, "topic")?;
        out_param(stats_out, "stats_out")?;
        let s = a.consume_stats(group, topic).map_err(err)?;
        out_handle(stats_out, rmq_consume_stats::new(s))
    })
}

/// The sum of every queue's lag, broker offset minus consumer offset (Java
/// `computeTotalDiff`).
#[no_mangle]
pub extern "C" fn rmq_consume_stats_total_diff(
    s: *const rmq_consume_stats,
    total_diff: *mut u64,
) -> rmq_result {
    guard(|| out(total_diff, handle(s, "consume stats")?.total_diff))
}

/// Messages the group consumed per second, summed over the brokers.
#[no_mangle]
pub extern "C" fn rmq_consume_stats_consume_tps(
    s: *const rmq_consume_stats,
    tps: *mut f64,
) -> rmq_result {
    guard(|| out(tps, handle(s, "consume stats")?.consume_tps))
}

/// The number of queues, sorted by topic, broker name and queue id.
#[no_mangle]
pub extern "C" fn rmq_consume_stats_queue_count(
    s: *const rmq_consume_stats,
    count: *mut usize,
) -> rmq_result {
    guard(|| out(count, handle(s, "consume stats")?.queues.len()))
}

/// The queue at `index` (borrowed from the stats, valid until they are freed) with its
/// broker offset (where its next message goes), the group's committed consumer offset,
/// and the time of the group's last consumed message in ms since the epoch (0 when the
/// broker does not know it).
#[no_mangle]
pub extern "C" fn rmq_consume_stats_queue_at(
    s: *const rmq_consume_stats,
    index: usize,
    queue_out: *mut *const rmq_message_queue,
    broker_offset: *mut i64,
    consumer_offset: *mut i64,
    last_timestamp_ms: *mut i64,
) -> rmq_result {
    guard(|| {
        let s = handle(s, "consume stats")?;
        let p = s
            .queues
            .get(index)
            .ok_or_else(|| out_of_range(index, s.queues.len()))?;
        out(queue_out, &p.queue as *const rmq_message_queue)?;
        out(broker_offset, p.broker_offset)?;
        out(consumer_offset, p.consumer_offset)?;
        out(last_timestamp_ms, p.last_timestamp_ms)
    })
}

/// Frees consume stats and the queues borrowed from them. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_consume_stats_free(s: *mut rmq_consume_stats) {
    guard_void(|| drop(take_handle(s)));
}

/// Where `rmq_admin_reset_offset` moves a group's offsets (passed as `int32_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum rmq_reset_target {
    /// Each queue's first message still stored.
    RMQ_RESET_EARLIEST = 0,
    /// Each queue's end: nothing stored so far is consumed.
    RMQ_RESET_LATEST = 1,
    /// The message stored at a time, per queue (as `rmq_admin_search_offset` finds it).
    RMQ_RESET_TIMESTAMP = 2,
}

/// Moves `group`'s offsets in `topic` to `target` (an `rmq_reset_target`;
/// `timestamp_ms`, ms since the epoch, is read for `RMQ_RESET_TIMESTAMP` only) on every
/// broker of the topic, as `mqadmin resetOffsetByTime` does: running consumers of the
/// group are told and pull from there; for a group with none online the offsets are
/// written for the next one to start from. `*queues` (when `queues` is not NULL) is the
/// number of queues moved. A 4.9 broker refuses to reset a running group
/// (`RMQ_RESPONSE`) until it holds the group's committed offset of every queue.
#[no_mangle]
pub extern "C" fn rmq_admin_reset_offset(
    a: *const rmq_admin,
    group: *const c_char,
    group_len: usize,
    topic: *const c_char,
    topic_len: usize,
    target: i32,
    timestamp_ms: u64,
    queues: *mut usize,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let group = str_arg(group, group_len, "group")?;
        let topic = str_arg(topic, topic_len, "topic")?;
        let target = match target {
            0 => ResetTarget::Earliest,
            1 => ResetTarget::Latest,
            2 => ResetTarget::Timestamp(time_ms(timestamp_ms, "timestamp")?),
            _ => {
                return Err(fail(
                    rmq_result::RMQ_INVALID_ARGUMENT,
                    format!("reset target {target}"),
                ))
            }
        };
        let moved = a.reset_offset(group, topic, target).map_err(err)?;
        if queues.is_null() {
            return Ok(());
        }
        out(queues, moved.len())
    })
}

/// The stored message behind an offset message id (`rmq_send_result_offset_msg_id`,
/// `rmq_message_ext_offset_msg_id`: store host and commit-log offset), Java
/// `viewMessage`; `*message_out` is a new message to free with `rmq_message_ext_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_view_message(
    a: *const rmq_admin,
    offset_msg_id: *const c_char,
    offset_msg_id_len: usize,
    message_out: *mut *mut rmq_message_ext,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let id = str_arg(offset_msg_id, offset_msg_id_len, "offset_msg_id")?;
        out_param(message_out, "message_out")?;
        let m = a.view_message(id).map_err(err)?;
        out_handle(message_out, rmq_message_ext::owned(m))
    })
}

/// The message of `topic` whose unique key (the id `rmq_send_result_msg_id` gives) is
/// `msg_id` (Java `queryMessageByUniqKey`). Found: `*message_out` is a new message to
/// free with `rmq_message_ext_free`; not found: `RMQ_OK` with `*message_out` NULL.
#[no_mangle]
pub extern "C" fn rmq_admin_query_message_by_unique_key(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    msg_id: *const c_char,
    msg_id_len: usize,
    message_out: *mut *mut rmq_message_ext,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let topic = str_arg(topic, topic_len, "topic")?;
        let id = str_arg(msg_id, msg_id_len, "msg_id")?;
        out_param(message_out, "message_out")?;
        match a.query_message_by_unique_key(topic, id).map_err(err)? {
            Some(m) => out_handle(message_out, rmq_message_ext::owned(m)),
            None => out(message_out, std::ptr::null_mut()),
        }
    })
}

/// The messages of `topic` with the key `key` (`rmq_message_set_keys`) stored from
/// `begin_ms` to `end_ms` (ms since the epoch, both included; `end_ms` `UINT64_MAX` for no
/// end), at most `max` from each broker (Java `queryMessage`; `mqadmin queryMsgByKey`
/// asks for 64). `*list_out` is a new list (possibly empty) to free with
/// `rmq_message_list_free`.
#[no_mangle]
pub extern "C" fn rmq_admin_query_messages_by_key(
    a: *const rmq_admin,
    topic: *const c_char,
    topic_len: usize,
    key: *const c_char,
    key_len: usize,
    max: u32,
    begin_ms: u64,
    end_ms: u64,
    list_out: *mut *mut rmq_message_list,
) -> rmq_result {
    guard(|| {
        let a = admin(a)?;
        let mut q = MessageQuery::by_key(
            str_arg(topic, topic_len, "topic")?,
            str_arg(key, key_len, "key")?,
        )
        .max(max)
        .begin(time_ms(begin_ms, "begin")?);
        if end_ms != u64::MAX {
            q = q.end(time_ms(end_ms, "end")?);
        }
        out_param(list_out, "list_out")?;
        let found = a.query_messages(&q).map_err(err)?;
        let items = found
            .messages
            .into_iter()
            .map(rmq_message_ext::owned)
            .collect();
        out_handle(list_out, rmq_message_list { items })
    })
}

/// Shuts the admin client down and frees it. NULL is a no-op.
#[no_mangle]
pub extern "C" fn rmq_admin_free(a: *mut rmq_admin) {
    guard_void(|| drop(take_handle(a)));
}

#[cfg(test)]
mod tests {
    //! Bad arguments are result codes before anything is sent: no broker needed (the
    //! admin's name server does not exist, and it connects on first use).
    use super::*;
    use std::ptr::{null, null_mut};

    use crate::error::rmq_result::{
        RMQ_INVALID_ARGUMENT, RMQ_INVALID_UTF8, RMQ_NULL_PARAMETER, RMQ_OK, RMQ_OUT_OF_RANGE,
    };

    fn offline_admin() -> *mut rmq_admin {
        let mut o = null_mut();
        assert_eq!(crate::options::rmq_client_options_new(&mut o), RMQ_OK);
        let addr = "127.0.0.1:1";
        assert_eq!(
            crate::options::rmq_client_options_namesrv_addr(o, addr.as_ptr().cast(), addr.len()),
            RMQ_OK
        );
        let mut a = null_mut();
        assert_eq!(rmq_admin_new(o, &mut a), RMQ_OK);
        crate::options::rmq_client_options_free(o);
        a
    }

    fn queue() -> rmq_message_queue {
        rmq_message_queue {
            inner: MessageQueue::new("T", "broker-a", 0),
        }
    }

    #[test]
    fn a_null_admin_is_rmq_null_parameter_in_every_query() {
        let t = c"t".as_ptr();
        let q = queue();
        let (mut n, mut o) = (0usize, 0i64);
        let mut buf = [0 as c_char; 8];
        let checks = [
            ("topic_list", rmq_admin_topic_list(null(), &mut null_mut())),
            (
                "delete_topic",
                rmq_admin_delete_topic(null(), t, 1, null_mut()),
            ),
            (
                "cluster_info_json",
                rmq_admin_cluster_info_json(null(), buf.as_mut_ptr(), 8, &mut n),
            ),
            ("max_offset", rmq_admin_max_offset(null(), &q, &mut o)),
            ("min_offset", rmq_admin_min_offset(null(), &q, &mut o)),
            (
                "search_offset",
                rmq_admin_search_offset(null(), &q, 0, &mut o),
            ),
            (
                "total_max_offset",
                rmq_admin_total_max_offset(null(), t, 1, &mut o),
            ),
            (
                "consume_stats",
                rmq_admin_consume_stats(null(), t, 1, null(), 0, &mut null_mut()),
            ),
            (
                "view_message",
                rmq_admin_view_message(null(), t, 1, &mut null_mut()),
            ),
            (
                "query_by_unique_key",
                rmq_admin_query_message_by_unique_key(null(), t, 1, t, 1, &mut null_mut()),
            ),
            (
                "query_by_key",
                rmq_admin_query_messages_by_key(
                    null(),
                    t,
                    1,
                    t,
                    1,
                    64,
                    0,
                    u64::MAX,
                    &mut null_mut(),
                ),
            ),
            ("string_list_len", rmq_string_list_len(null(), &mut n)),
            (
                "consume_stats_total_diff",
                rmq_consume_stats_total_diff(null(), &mut 0),
            ),
        ];
        for (name, r) in checks {
            assert_eq!(r, RMQ_NULL_PARAMETER, "{name}");
        }
        rmq_string_list_free(null_mut());
        rmq_consume_stats_free(null_mut());
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_is_sent() {
        let a = offline_admin();
        let q = queue();
        let mut o = 0i64;
        let bad = [0xffu8, 0xfe];
        // NULL strings, queues and out-parameters.
        assert_eq!(
            rmq_admin_delete_topic(a, null(), 1, null_mut()),
            RMQ_NULL_PARAMETER
        );
        assert_eq!(rmq_admin_max_offset(a, null(), &mut o), RMQ_NULL_PARAMETER);
        assert_eq!(rmq_admin_min_offset(a, &q, null_mut()), RMQ_NULL_PARAMETER);
        assert_eq!(
            rmq_admin_view_message(a, null(), 3, &mut null_mut()),
            RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_admin_query_message_by_unique_key(
                a,
                c"t".as_ptr(),
                1,
                c"x".as_ptr(),
                1,
                null_mut()
            ),
            RMQ_NULL_PARAMETER
        );
        assert_eq!(
            rmq_admin_query_messages_by_key(
                a,
                c"t".as_ptr(),
                1,
                c"k".as_ptr(),
                1,
                64,
                0,
                u64::MAX,
                null_mut()
            ),
            RMQ_NULL_PARAMETER
        );
        // Not UTF-8.
        assert_eq!(
            rmq_admin_total_max_offset(a, bad.as_ptr().cast(), 2, &mut o),
            RMQ_INVALID_UTF8
        );
        assert_eq!(
            rmq_admin_consume_stats(a, c"g".as_ptr(), 1, bad.as_ptr().cast(), 2, &mut null_mut()),
            RMQ_INVALID_UTF8
        );
        // Values the crate refuses: a time past SystemTime, no messages asked for, an
        // empty group, an offset id that is not one (all before any connection).
        assert_eq!(
            rmq_admin_search_offset(a, &q, u64::MAX, &mut o),
            RMQ_INVALID_ARGUMENT
        );
        let mut list = null_mut();
        assert_eq!(
            rmq_admin_query_messages_by_key(
                a,
                c"t".as_ptr(),
                1,
                c"k".as_ptr(),
                1,
                0,
                0,
                u64::MAX,
                &mut list
            ),
            RMQ_INVALID_ARGUMENT
        );
        assert!(list.is_null());
        let mut stats = null_mut();
        assert_eq!(
            rmq_admin_consume_stats(a, c"".as_ptr(), 0, null(), 0, &mut stats),
            RMQ_INVALID_ARGUMENT
        );
        assert!(stats.is_null());
        assert_eq!(
            rmq_admin_reset_offset(a, c"g".as_ptr(), 1, c"t".as_ptr(), 1, 3, 0, null_mut()),
            RMQ_INVALID_ARGUMENT
        );
        assert_eq!(
            rmq_admin_reset_offset(a, c"g".as_ptr(), 1, null(), 1, 0, 0, null_mut()),
            RMQ_NULL_PARAMETER
        );
        let mut m = null_mut();
        // The crate reads the id as it would one from the network: a `Decode` error.
        assert_eq!(
            rmq_admin_view_message(a, c"nothex".as_ptr(), 6, &mut m),
            crate::error::rmq_result::RMQ_DECODE
        );
        assert!(m.is_null());
        rmq_admin_free(a);
    }

    #[test]
    fn a_string_list_and_consume_stats_hand_out_their_items_and_refuse_an_index_past_the_end() {
        let l = rmq_string_list {
            items: vec!["a".into(), "bc".into()],
        };
        let (mut p, mut n) = (null(), 0usize);
        assert_eq!(rmq_string_list_len(&l, &mut n), RMQ_OK);
        assert_eq!(n, 2);
        assert_eq!(rmq_string_list_get(&l, 1, &mut p, &mut n), RMQ_OK);
        assert_eq!((p, n), (l.items[1].as_ptr().cast(), 2));
        assert_eq!(rmq_string_list_get(&l, 2, &mut p, &mut n), RMQ_OUT_OF_RANGE);
        assert_eq!(
            rmq_string_list_get(&l, 0, null_mut(), &mut n),
            RMQ_NULL_PARAMETER
        );

        let s = rmq_consume_stats {
            total_diff: 6,
            consume_tps: 0.0,
            queues: vec![Progress {
                queue: rmq_message_queue {
                    inner: MessageQueue::new("T", "broker-a", 1),
                },
                broker_offset: 10,
                consumer_offset: 4,
                last_timestamp_ms: 0,
            }],
        };
        let mut diff = 0u64;
        assert_eq!(rmq_consume_stats_total_diff(&s, &mut diff), RMQ_OK);
        assert_eq!(diff, 6);
        let (mut q, mut b, mut c, mut t) = (null(), 0i64, 0i64, -1i64);
        assert_eq!(
            rmq_consume_stats_queue_at(&s, 0, &mut q, &mut b, &mut c, &mut t),
            RMQ_OK
        );
        assert_eq!((b, c, t), (10, 4, 0));
        assert_eq!(handle(q, "q").map(|q| q.inner.queue_id()), Ok(1));
        assert_eq!(
            rmq_consume_stats_queue_at(&s, 1, &mut q, &mut b, &mut c, &mut t),
            RMQ_OUT_OF_RANGE
        );
    }
}
