//! The testkit's own tests: real clusters of several shapes and versions, crash safety.
#[path = "../common/counting.rs"]
mod counting;

mod common;
mod errors;
mod lifecycle;
mod orphan;
mod two_by_two;
mod v4;
