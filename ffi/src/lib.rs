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
//! `logging`, `transaction` (`rmq_transaction_producer_*`: the local transaction and the
//! broker's check as callbacks behind the same gate as the push listener's).
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
pub mod options;
pub mod producer;
pub mod push;
pub mod simple;
mod stats_json;
pub mod transaction;
mod util;

use std::ffi::c_char;

/// The major version of the header (compile time); `rmq_version()` gives the library's
/// (run time). A 0.x library is compatible within one minor version (its soname is
/// `librocketmq_blocking.so.0.<minor>`), a later one within one major.
pub const RMQ_VERSION_MAJOR: u32 = 0;
/// The minor version of the header.
pub const RMQ_VERSION_MINOR: u32 = 1;
/// The patch version of the header.
pub const RMQ_VERSION_PATCH: u32 = 0;
/// The header's version as one number, `major * 10000 + minor * 100 + patch`, for `#if`.
pub const RMQ_VERSION_NUMBER: u32 =
    RMQ_VERSION_MAJOR * 10000 + RMQ_VERSION_MINOR * 100 + RMQ_VERSION_PATCH;

/// The library's version as a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn rmq_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    //! NULL handles are error codes on every client type, never a crash.
    use std::ptr::{null, null_mut};

    use crate::error::rmq_result::{self, RMQ_NULL_PARAMETER, RMQ_OK};
    use crate::*;

    #[test]
    fn null_handles_are_rmq_null_parameter_on_every_client() {
        let (mut s, mut n) = (null(), 0usize);
        let m = null();
        let checks: Vec<(&str, rmq_result)> = vec![
            (
                "producer_send",
                producer::rmq_producer_send(null(), m, null_mut()),
            ),
            (
                "producer_send_oneway",
                producer::rmq_producer_send_oneway(null(), m),
            ),
            (
                "producer_send_async",
                producer::rmq_producer_send_async(null(), m, None, null_mut()),
            ),
            (
                "producer_send_batch",
                producer::rmq_producer_send_batch(null(), null(), 0, null_mut()),
            ),
            ("producer_shutdown", producer::rmq_producer_shutdown(null())),
            (
                "producer_builder_client_options",
                producer::rmq_producer_builder_client_options(null_mut(), null()),
            ),
            (
                "client_options_namesrv_addr",
                options::rmq_client_options_namesrv_addr(null_mut(), c"x".as_ptr(), 1),
            ),
            (
                "producer_builder_start",
                producer::rmq_producer_builder_start(null_mut(), null_mut()),
            ),
            (
                "push_subscribe",
                push::rmq_push_consumer_subscribe(null(), c"t".as_ptr(), 1, c"*".as_ptr(), 1),
            ),
            ("push_shutdown", push::rmq_push_consumer_shutdown(null())),
            (
                "push_builder_listener",
                push::rmq_push_consumer_builder_listener(null_mut(), None, null_mut()),
            ),
            (
                "push_builder_start",
                push::rmq_push_consumer_builder_start(null_mut(), null_mut()),
            ),
            (
                "lite_poll",
                lite_pull::rmq_lite_pull_consumer_poll(null(), 0, null_mut()),
            ),
            (
                "lite_commit",
                lite_pull::rmq_lite_pull_consumer_commit(null()),
            ),
            (
                "lite_seek",
                lite_pull::rmq_lite_pull_consumer_seek(null(), null(), 0),
            ),
            (
                "lite_builder_start",
                lite_pull::rmq_lite_pull_consumer_builder_start(null_mut(), null_mut()),
            ),
            (
                "admin_create_topic",
                admin::rmq_admin_create_topic(null(), c"t".as_ptr(), 1, 4),
            ),
            (
                "message_ext_msg_id",
                message::rmq_message_ext_msg_id(null(), &mut s, &mut n),
            ),
            (
                "send_result_msg_id",
                message::rmq_send_result_msg_id(null(), &mut s, &mut n),
            ),
            (
                "tls_ca_file",
                common::rmq_tls_config_ca_file(null_mut(), c"x".as_ptr(), 1),
            ),
            (
                "producer_request",
                producer::rmq_producer_request(null(), m, 1000, null_mut()),
            ),
            (
                "producer_builder_trace",
                producer::rmq_producer_builder_trace(null_mut(), null(), 0),
            ),
            (
                "create_reply_message",
                message::rmq_create_reply_message(null(), null(), 0, null_mut()),
            ),
            (
                "push_send_message_back",
                push::rmq_push_consumer_send_message_back(null(), null(), 1),
            ),
            (
                "transaction_builder_new",
                transaction::rmq_transaction_producer_builder_new(
                    c"g".as_ptr(),
                    1,
                    None,
                    None,
                    null_mut(),
                    null_mut(),
                ),
            ),
            (
                "transaction_send",
                transaction::rmq_transaction_producer_send(
                    null(),
                    m,
                    null_mut(),
                    null_mut(),
                    null_mut(),
                ),
            ),
            (
                "transaction_shutdown",
                transaction::rmq_transaction_producer_shutdown(null()),
            ),
        ];
        for (name, r) in checks {
            assert_eq!(r, RMQ_NULL_PARAMETER, "{name}");
        }
        // Freeing NULL is a no-op for every handle.
        producer::rmq_producer_free(null_mut());
        producer::rmq_producer_builder_free(null_mut());
        transaction::rmq_transaction_producer_free(null_mut());
        transaction::rmq_transaction_producer_builder_free(null_mut());
        message::rmq_message_ext_free(null_mut());
        push::rmq_push_consumer_free(null_mut());
        push::rmq_push_consumer_builder_free(null_mut());
        lite_pull::rmq_lite_pull_consumer_free(null_mut());
        lite_pull::rmq_lite_pull_consumer_builder_free(null_mut());
        admin::rmq_admin_free(null_mut());
    }

    #[test]
    fn builder_options_out_of_range_are_invalid_argument() {
        let mut b = null_mut();
        assert_eq!(
            push::rmq_push_consumer_builder_new(c"g".as_ptr(), 1, &mut b),
            RMQ_OK
        );
        assert_eq!(
            push::rmq_push_consumer_builder_message_model(b, 7),
            rmq_result::RMQ_INVALID_ARGUMENT
        );
        assert_eq!(
            push::rmq_push_consumer_builder_consume_from(b, -1, 0),
            rmq_result::RMQ_INVALID_ARGUMENT
        );
        assert_eq!(push::rmq_push_consumer_builder_message_model(b, 1), RMQ_OK);
        // Without a listener the consumer does not start, and the builder is consumed.
        let mut c = null_mut();
        assert_ne!(push::rmq_push_consumer_builder_start(b, &mut c), RMQ_OK);
        assert!(c.is_null());
    }

    #[test]
    fn the_version_is_a_nul_terminated_string() {
        // SAFETY: rmq_version returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(rmq_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn the_header_version_macros_are_the_crate_version() {
        let part = |s: &str| s.parse::<u32>().unwrap();
        assert_eq!(RMQ_VERSION_MAJOR, part(env!("CARGO_PKG_VERSION_MAJOR")));
        assert_eq!(RMQ_VERSION_MINOR, part(env!("CARGO_PKG_VERSION_MINOR")));
        assert_eq!(RMQ_VERSION_PATCH, part(env!("CARGO_PKG_VERSION_PATCH")));
    }
}
