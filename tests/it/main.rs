//! Integration tests: one binary, one shared real RocketMQ cluster (see `cluster.rs`).
#[path = "../support/failover.rs"]
mod failover;

mod admin_queries;
mod admin_tool;
mod async_send;
mod auto_batch;
mod cluster;
mod compression;
mod configuration;
mod consumer;
mod consumer_api;
#[path = "../common/counting.rs"]
mod counting;
mod faults;
mod hooks;
#[path = "../common/java.rs"]
mod java;
mod lite_pull_queues;
mod pop;
mod pop_push;
mod producer;
mod push_shutdown;
mod remoting;
mod request_reply;
mod stats;
mod timer;
mod trace;
