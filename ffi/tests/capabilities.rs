//! Every public method of the clients (`Admin`, `Producer`, `PushConsumer`,
//! `LitePullConsumer`, `TransactionProducer`, `SimpleConsumer` and its `ReceivedMessage`), as `tests/public-api.txt` lists them, has
//! a C counterpart in the header or a written reason it has none. A method added to the
//! Rust API fails this test until it is given one or the other, so C cannot fall behind
//! silently.

use std::collections::BTreeSet;
use std::path::Path;

/// What C has for a Rust method.
enum C {
    /// These functions of the header (at least one) do what the method does.
    Fns(&'static [&'static str]),
    /// Not exported, and why.
    Not(&'static str),
}
use C::{Fns, Not};

const DEBUG: &str = "Debug formatting; a C program has no use for it";
const GROUP: &str = "the C caller gave the group to the builder and has it";
const CLIENT_ID: &str =
    "a diagnostic value (the id brokers list for the client); not yet in C, no C user asked";
const REQUEST_HOOK: &str = "request hooks see and change every remoting command of the \
     client instance (header fields, codes); C has no command type to show, and no C user \
     asked; ACL signing, their main use, is in the client options (rmq_client_options_credentials)";
const TRACE_STATS: &str =
    "trace counters are diagnostics; not yet in C (the trace itself is: _builder_trace)";

/// (type, method) → what C has. Keep in the order of `tests/public-api.txt`.
const TABLE: &[(&str, &str, C)] = &[
    // Admin
    ("Admin", "builder", Fns(&["rmq_admin_new"])),
    ("Admin", "cluster_info", Fns(&["rmq_admin_cluster_info_json"])),
    ("Admin", "create_topic", Fns(&["rmq_admin_create_topic"])),
    ("Admin", "create_topic_on", Not("creates on one broker; rmq_admin_create_topic creates on every master, which is what an application needs")),
    ("Admin", "master_addrs", Fns(&["rmq_admin_cluster_info_json"])),
    ("Admin", "max_offset", Fns(&["rmq_admin_max_offset"])),
    ("Admin", "max_offset_on", Not("asks a given broker (a slave); the C functions ask the queue's master, found in the route")),
    ("Admin", "min_offset", Fns(&["rmq_admin_min_offset"])),
    ("Admin", "min_offset_on", Not("asks a given broker (a slave); the C functions ask the queue's master, found in the route")),
    ("Admin", "producer_connections", Not("an operator's listing (mqadmin producerConnection, in the rmq tool); not yet in C")),
    ("Admin", "producer_connections_on", Not("an operator's listing (mqadmin producerConnection, in the rmq tool); not yet in C")),
    ("Admin", "search_offset", Fns(&["rmq_admin_search_offset"])),
    ("Admin", "search_offset_on", Not("asks a given broker (a slave); the C functions ask the queue's master, found in the route")),
    ("Admin", "topic_route", Fns(&["rmq_admin_topic_route_json", "rmq_admin_topic_queues"])),
    ("Admin", "total_max_offset", Fns(&["rmq_admin_total_max_offset"])),
    ("Admin", "view_message", Fns(&["rmq_admin_view_message"])),
    ("Admin", "wait_for_route", Not("rmq_admin_create_topic already waits for the new topic's route")),
    ("Admin", "consume_stats", Fns(&["rmq_admin_consume_stats"])),
    ("Admin", "consumer_connections", Fns(&["rmq_admin_consumer_connections_json"])),
    ("Admin", "consumer_connections_on", Not("asks a given broker; rmq_admin_consumer_connections_json asks every broker of the group")),
    ("Admin", "earliest_msg_store_time", Fns(&["rmq_admin_earliest_msg_store_time"])),
    ("Admin", "topic_stats", Fns(&["rmq_admin_topic_stats_json"])),
    ("Admin", "topic_stats_on", Not("asks a given broker; rmq_admin_topic_stats_json asks every broker of the topic")),
    ("Admin", "create_subscription_group", Not("an operator's task (mqadmin updateSubGroup, in the rmq tool); a group comes into being when its consumer starts; not yet in C")),
    ("Admin", "delete_topic", Fns(&["rmq_admin_delete_topic"])),
    ("Admin", "set_message_request_mode", Fns(&["rmq_admin_set_message_request_mode"])),
    ("Admin", "query_message_by_unique_key", Fns(&["rmq_admin_query_message_by_unique_key"])),
    ("Admin", "query_messages", Fns(&["rmq_admin_query_messages_by_key", "rmq_admin_query_message_by_unique_key"])),
    ("Admin", "reset_offset", Fns(&["rmq_admin_reset_offset"])),
    ("Admin", "subscription_groups", Not("an operator's listing (in the rmq tool); not yet in C")),
    ("Admin", "topic_list", Fns(&["rmq_admin_topic_list"])),
    ("Admin", "fmt", Not(DEBUG)),
    // LitePullConsumer
    ("LitePullConsumer", "assign", Fns(&["rmq_lite_pull_consumer_assign"])),
    ("LitePullConsumer", "assignment", Fns(&["rmq_lite_pull_consumer_assignment"])),
    ("LitePullConsumer", "builder", Fns(&["rmq_lite_pull_consumer_builder_new"])),
    ("LitePullConsumer", "client_id", Not(CLIENT_ID)),
    ("LitePullConsumer", "commit_sync", Fns(&["rmq_lite_pull_consumer_commit"])),
    ("LitePullConsumer", "committed", Fns(&["rmq_lite_pull_consumer_committed"])),
    ("LitePullConsumer", "commit", Fns(&["rmq_lite_pull_consumer_commit_offsets"])),
    ("LitePullConsumer", "fetch_message_queues", Fns(&["rmq_lite_pull_consumer_fetch_message_queues"])),
    ("LitePullConsumer", "register_topic_queue_change_listener", Not("a callback into C from the rebalance thread; not yet in C: a C program follows a topic's queues by calling rmq_lite_pull_consumer_fetch_message_queues")),
    ("LitePullConsumer", "subscribe", Fns(&["rmq_lite_pull_consumer_subscribe"])),
    ("LitePullConsumer", "subscribe_with", Fns(&["rmq_lite_pull_consumer_subscribe_sql", "rmq_lite_pull_consumer_subscribe"])),
    ("LitePullConsumer", "subscriptions", Not("the C caller made the subscriptions and has them")),
    ("LitePullConsumer", "unsubscribe", Fns(&["rmq_lite_pull_consumer_unsubscribe"])),
    ("LitePullConsumer", "group", Not(GROUP)),
    ("LitePullConsumer", "offset_for_timestamp", Fns(&["rmq_lite_pull_consumer_offset_for_timestamp"])),
    ("LitePullConsumer", "pause", Fns(&["rmq_lite_pull_consumer_pause"])),
    ("LitePullConsumer", "poll", Fns(&["rmq_lite_pull_consumer_poll"])),
    ("LitePullConsumer", "poll_timeout", Fns(&["rmq_lite_pull_consumer_poll"])),
    ("LitePullConsumer", "resume", Fns(&["rmq_lite_pull_consumer_resume"])),
    ("LitePullConsumer", "seek", Fns(&["rmq_lite_pull_consumer_seek"])),
    ("LitePullConsumer", "seek_to_begin", Fns(&["rmq_lite_pull_consumer_seek_to_begin"])),
    ("LitePullConsumer", "seek_to_end", Fns(&["rmq_lite_pull_consumer_seek_to_end"])),
    ("LitePullConsumer", "shutdown", Fns(&["rmq_lite_pull_consumer_shutdown"])),
    ("LitePullConsumer", "register_request_hook", Not(REQUEST_HOOK)),
    ("LitePullConsumer", "stats", Fns(&["rmq_lite_pull_consumer_stats_json"])),
    ("LitePullConsumer", "trace_stats", Not(TRACE_STATS)),
    ("LitePullConsumer", "fmt", Not(DEBUG)),
    ("LitePullConsumer", "drop", Fns(&["rmq_lite_pull_consumer_free"])),
    // SimpleConsumer
    ("SimpleConsumer", "ack", Fns(&["rmq_simple_consumer_ack"])),
    ("SimpleConsumer", "ack_batch", Fns(&["rmq_simple_consumer_ack_batch"])),
    ("SimpleConsumer", "builder", Fns(&["rmq_simple_consumer_builder_new"])),
    ("SimpleConsumer", "change_invisible_duration", Fns(&["rmq_simple_consumer_change_invisible_duration"])),
    ("SimpleConsumer", "group", Not(GROUP)),
    ("SimpleConsumer", "receive", Fns(&["rmq_simple_consumer_receive"])),
    ("SimpleConsumer", "shutdown", Fns(&["rmq_simple_consumer_shutdown"])),
    ("SimpleConsumer", "wait_for_messages", Fns(&["rmq_simple_consumer_wait_for_messages"])),
    ("SimpleConsumer", "fmt", Not(DEBUG)),
    ("SimpleConsumer", "drop", Fns(&["rmq_simple_consumer_free"])),
    // ReceivedMessage
    ("ReceivedMessage", "into_message", Not("C reads the message in place (rmq_received_message_message); the list owns it")),
    ("ReceivedMessage", "message", Fns(&["rmq_received_message_message"])),
    ("ReceivedMessage", "next_visible_time", Not("a convenience over the receipt's pop time; not yet in C, no C user asked")),
    ("ReceivedMessage", "receipt_handle", Fns(&["rmq_received_message_receipt_handle"])),
    ("ReceivedMessage", "fmt", Not(DEBUG)),
    // Producer
    ("Producer", "builder", Fns(&["rmq_producer_builder_new"])),
    ("Producer", "client_id", Not(CLIENT_ID)),
    ("Producer", "fetch_publish_message_queues", Fns(&["rmq_producer_fetch_queues"])),
    ("Producer", "group", Not(GROUP)),
    ("Producer", "options", Not("the C caller set the options on the builder")),
    ("Producer", "request", Fns(&["rmq_producer_request"])),
    ("Producer", "request_async", Fns(&["rmq_producer_request_async"])),
    ("Producer", "send", Fns(&["rmq_producer_send"])),
    ("Producer", "send_async", Fns(&["rmq_producer_send_async"])),
    ("Producer", "send_async_future", Not("a Rust future over send_async; C takes rmq_producer_send_async's callback")),
    ("Producer", "send_async_to_queue", Fns(&["rmq_producer_send_async_to_queue"])),
    ("Producer", "send_async_with_selector", Fns(&["rmq_producer_send_async_with_selector"])),
    ("Producer", "send_batch", Fns(&["rmq_producer_send_batch"])),
    ("Producer", "send_batch_async", Fns(&["rmq_producer_send_batch_async"])),
    ("Producer", "send_batch_async_to_queue", Not("not yet in C: rmq_producer_send_batch_async picks the queue; rmq_producer_send_batch_to_queue sends to one, synchronously")),
    ("Producer", "send_batch_timeout", Not("not yet in C: a C batch is bounded by the builder's send timeout (rmq_producer_builder_send_timeout_ms)")),
    ("Producer", "send_batch_to_queue", Fns(&["rmq_producer_send_batch_to_queue"])),
    ("Producer", "send_oneway", Fns(&["rmq_producer_send_oneway"])),
    ("Producer", "send_oneway_to_queue", Fns(&["rmq_producer_send_oneway_to_queue"])),
    ("Producer", "send_oneway_with_selector", Fns(&["rmq_producer_send_oneway_with_selector"])),
    ("Producer", "send_timeout", Fns(&["rmq_producer_send_with_timeout"])),
    ("Producer", "send_to_queue", Fns(&["rmq_producer_send_to_queue"])),
    ("Producer", "send_with_selector", Fns(&["rmq_producer_send_with_selector"])),
    ("Producer", "shutdown", Fns(&["rmq_producer_shutdown"])),
    ("Producer", "register_request_hook", Not(REQUEST_HOOK)),
    ("Producer", "register_send_hook", Fns(&["rmq_producer_builder_send_hook"])),
    ("Producer", "stats", Fns(&["rmq_producer_stats_json"])),
    ("Producer", "trace_stats", Not(TRACE_STATS)),
    ("Producer", "fmt", Not(DEBUG)),
    ("Producer", "drop", Fns(&["rmq_producer_free"])),
    // PushConsumer
    ("PushConsumer", "adjust_thread_pool", Not("the consumer resizes its pool itself, periodically; the manual resize is for tests and tools")),
    ("PushConsumer", "assigned_queues", Fns(&["rmq_push_consumer_assigned_queues"])),
    ("PushConsumer", "builder", Fns(&["rmq_push_consumer_builder_new"])),
    ("PushConsumer", "client_id", Not(CLIENT_ID)),
    ("PushConsumer", "consume_pool_size", Not("a diagnostic of the pool rmq_push_consumer_builder_consume_threads sized; not yet in C")),
    ("PushConsumer", "group", Not(GROUP)),
    ("PushConsumer", "offsets", Not("in-memory offsets, a diagnostic; the committed progress is rmq_admin_consume_stats")),
    ("PushConsumer", "resume", Fns(&["rmq_push_consumer_resume"])),
    ("PushConsumer", "send_message_back", Fns(&["rmq_push_consumer_send_message_back"])),
    ("PushConsumer", "shutdown", Fns(&["rmq_push_consumer_shutdown"])),
    ("PushConsumer", "subscribe", Fns(&["rmq_push_consumer_subscribe"])),
    ("PushConsumer", "subscribe_with", Fns(&["rmq_push_consumer_builder_subscribe_sql", "rmq_push_consumer_subscribe"])),
    ("PushConsumer", "subscriptions", Not("the C caller made the subscriptions and has them")),
    ("PushConsumer", "suspend", Fns(&["rmq_push_consumer_suspend"])),
    ("PushConsumer", "register_consume_hook", Fns(&["rmq_push_consumer_builder_consume_hook"])),
    ("PushConsumer", "register_request_hook", Not(REQUEST_HOOK)),
    ("PushConsumer", "stats", Fns(&["rmq_push_consumer_stats_json"])),
    ("PushConsumer", "trace_stats", Not(TRACE_STATS)),
    ("PushConsumer", "unsubscribe", Fns(&["rmq_push_consumer_unsubscribe"])),
    ("PushConsumer", "fmt", Not(DEBUG)),
    ("PushConsumer", "drop", Fns(&["rmq_push_consumer_free"])),
    // TransactionProducer
    ("TransactionProducer", "accepted_checks", Not("a counter for tests and metrics; C has rmq_transaction_producer_dropped_checks, the one that means lost checks")),
    ("TransactionProducer", "builder", Fns(&["rmq_transaction_producer_builder_new"])),
    ("TransactionProducer", "client_id", Not(CLIENT_ID)),
    ("TransactionProducer", "dropped_checks", Fns(&["rmq_transaction_producer_dropped_checks"])),
    ("TransactionProducer", "group", Not(GROUP)),
    ("TransactionProducer", "producer", Not("the plain producer inside; a C program that also sends plain messages starts an rmq_producer")),
    ("TransactionProducer", "queued_checks", Not("a counter for tests and metrics; not yet in C")),
    ("TransactionProducer", "send_in_transaction", Fns(&["rmq_transaction_producer_send"])),
    ("TransactionProducer", "shutdown", Fns(&["rmq_transaction_producer_shutdown"])),
    ("TransactionProducer", "fmt", Not(DEBUG)),
    ("TransactionProducer", "drop", Fns(&["rmq_transaction_producer_free"])),
];

const TYPES: [&str; 7] = [
    "Admin",
    "Producer",
    "PushConsumer",
    "LitePullConsumer",
    "TransactionProducer",
    "SimpleConsumer",
    "ReceivedMessage",
];

/// (type, method) of every `pub fn rocketmq_blocking::<Type>::<method>` line.
fn public_methods(listing: &str) -> BTreeSet<(String, String)> {
    listing
        .lines()
        .filter_map(|l| l.strip_prefix("pub fn rocketmq_blocking::"))
        .filter_map(|rest| {
            let path = rest.split(['(', '<']).next()?;
            let (ty, method) = path.split_once("::")?;
            TYPES
                .contains(&ty)
                .then(|| (ty.to_string(), method.to_string()))
        })
        .collect()
}

/// The names of the functions the header declares: each `rmq_` identifier right before a
/// `(`.
fn header_functions(header: &str) -> BTreeSet<String> {
    header
        .split('(')
        .filter_map(|before| {
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[start..];
            name.starts_with("rmq_").then(|| name.to_string())
        })
        .collect()
}

#[test]
fn every_public_client_method_has_a_c_function_or_a_reason_it_has_none() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listing =
        std::fs::read_to_string(dir.join("../tests/public-api.txt")).expect("tests/public-api.txt");
    let header = std::fs::read_to_string(dir.join("include/rocketmq_blocking.h")).expect("header");
    let methods = public_methods(&listing);
    let functions = header_functions(&header);
    assert!(
        methods.len() > 80 && functions.contains("rmq_producer_send"),
        "the listing or the header was not read as expected: {} methods",
        methods.len()
    );

    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (ty, method, c) in TABLE {
        if !seen.insert((ty.to_string(), method.to_string())) {
            problems.push(format!("{ty}::{method} is in the table twice"));
        }
        if !methods.contains(&(ty.to_string(), method.to_string())) {
            problems.push(format!(
                "{ty}::{method} is in the table but not in tests/public-api.txt: remove it"
            ));
        }
        match c {
            Fns(names) => {
                if names.is_empty() {
                    problems.push(format!("{ty}::{method}: no C function named"));
                }
                for name in *names {
                    if !functions.contains(*name) {
                        problems.push(format!(
                            "{ty}::{method}: {name} is not declared in the header"
                        ));
                    }
                }
            }
            Not(reason) => {
                if reason.trim().len() < 10 {
                    problems.push(format!("{ty}::{method}: give a reason, not {reason:?}"));
                }
            }
        }
    }
    for (ty, method) in &methods {
        if !seen.contains(&(ty.clone(), method.clone())) {
            problems.push(format!(
                "{ty}::{method} is public in Rust but has neither a C function nor a reason \
                 in ffi/tests/capabilities.rs: export it (ffi/src) or say why not"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_listing_parser_reads_methods_of_the_client_types_only() {
    let listing = "\
pub fn rocketmq_blocking::Producer::send(&self, &rocketmq_blocking::Message) -> R
pub fn rocketmq_blocking::Producer::send_with_selector<A: ?core::marker::Sized>(&self) -> R
pub fn rocketmq_blocking::ProducerBuilder::start(self) -> R
pub rocketmq_blocking::ConsumeStats::queues: Q
impl rocketmq_blocking::Admin
pub fn rocketmq_blocking::Admin::topic_list(&self) -> R
";
    let got: Vec<(String, String)> = public_methods(listing).into_iter().collect();
    let want: Vec<(String, String)> = [
        ("Admin", "topic_list"),
        ("Producer", "send"),
        ("Producer", "send_with_selector"),
    ]
    .iter()
    .map(|(t, m)| (t.to_string(), m.to_string()))
    .collect();
    assert_eq!(got, want);
    let header = "rmq_result rmq_producer_send(const rmq_producer *p);\nvoid rmq_producer_free(rmq_producer *p);";
    let fns: Vec<String> = header_functions(header).into_iter().collect();
    assert_eq!(fns, ["rmq_producer_free", "rmq_producer_send"]);
}
