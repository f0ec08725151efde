//! Secured clusters: real Apache RocketMQ brokers that enforce ACL, 5.3.3 (ACL 2.0) and
//! 4.9.7 (`plain_acl.yml`), one cluster each, started on first use and shared by the
//! tests of that line. Covers signed clients of every type, what the brokers answer to
//! wrong secrets, unsigned clients and missing grants, Java↔Rust interop with ACL, and
//! that no secret reaches a log line.
mod acl;
mod env;
