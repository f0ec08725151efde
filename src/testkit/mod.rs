//! Test support: a launcher for a real local RocketMQ cluster and a fault-injecting peer.
pub mod fault;
