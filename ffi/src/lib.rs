//! The C ABI of rocketmq-blocking (issue 14), in the style of rustls-ffi: opaque handles
//! made by `rmq_<type>_new` or a builder's `_start` and released by `_free`; every
//! fallible function returns an `rmq_result` with out-parameters, the last error's text
//! per thread in `rmq_last_error`; strings and bodies as pointer + length (UTF-8, no NUL
//! needed); callbacks take a `void *userdata` and run on the crate's threads.
//!
//! Every entry point checks its pointers (a NULL handle is `RMQ_NULL_PARAMETER`) and runs
//! inside `catch_unwind` (`error::guard`), so no panic crosses into C. The header
//! `include/rocketmq_blocking.h` is generated from this source by cbindgen and checked
//! by `tests/header.rs`.
//!
//! Layers: `util` (the only pointer-to-reference conversions), `error` (codes, last
//! error, panic boundary), `common` (shared builder settings, TLS, the callback gate),
//! then one module per client: `message`, `producer`, `push`, `lite_pull`, `admin`,
//! `logging`. A transaction producer, once the crate has one, gets a module of its own
//! (`rmq_transaction_producer_*`, its check-listener a callback like the push listener's).
#![allow(non_camel_case_types)]
// The C entry points take raw pointers but are safe `extern "C" fn`s, as in rustls-ffi:
// C callers cannot see `unsafe`, and every pointer is checked in `util` before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod admin;
pub mod common;
pub mod error;
pub mod lite_pull;
pub mod logging;
pub mod message;
pub mod producer;
pub mod push;
mod util;

use std::ffi::c_char;

/// The library's version as a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn rmq_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
