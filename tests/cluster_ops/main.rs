//! Cluster operations against a real two-broker cluster: route refresh, offline-broker
//! cleanup, the HTTP address server, missing topics, heartbeats, instance life cycle,
//! latency fault tolerance and the VIP channel (the client instance's five jobs at work).
//!
//! The cluster is this binary's own (2 name servers, brokers `broker-a` and `broker-b`,
//! `autoCreateTopicEnable=false`). Some tests stop and start brokers, so every test holds
//! [`cluster::serial`] for its whole run.
#[path = "../support/failover.rs"]
mod failover;

mod address_server;
mod cluster;
#[path = "../common/counting.rs"]
mod counting;
mod fault;
mod heartbeat;
mod lifecycle;
mod reliability;
mod routes;
mod vip;
