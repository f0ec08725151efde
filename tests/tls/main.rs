//! TLS against a real cluster that enforces it: name server and broker in
//! `tls.server.mode=enforcing` with client certificates required, the CA and
//! certificates generated at start (`ClusterBuilder::tls`). One cluster for the binary
//! (`RMQ_TEST_VERSION` picks the release, default 5.3.3). The fault-peer tests need no
//! cluster.
mod cli;
mod cluster;
mod faults;
mod secured;
