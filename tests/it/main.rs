//! Integration tests: one binary, one shared real RocketMQ cluster (see `cluster.rs`).
mod cluster;
mod consumer;
mod faults;
mod producer;
mod remoting;
