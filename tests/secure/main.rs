//! Secured clusters: real Apache RocketMQ brokers that enforce ACL, 5.3.3 (ACL 2.0) and
//! 4.9.7 (`plain_acl.yml`), one cluster each, started on first use and shared by the
//! tests of that line. Covers signed clients of every type, what the brokers answer to
//! wrong secrets, unsigned clients and missing grants, Java↔Rust interop with ACL, and
//! that no secret reaches a log line.

/// One test per function and RocketMQ line, each on that line's cluster.
macro_rules! on_both_lines {
    ($($name:ident),* $(,)?) => {
        mod v5_3_3 {
            $( #[test] fn $name() { super::$name(crate::env::Env::v5()) } )*
        }
        mod v4_9_7 {
            $( #[test] fn $name() { super::$name(crate::env::Env::v4()) } )*
        }
    };
}

mod acl;
mod cli;
mod env;
mod interop;
#[path = "../common/java.rs"]
mod java;
