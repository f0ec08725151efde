//! Gives librocketmq.so the soname `librocketmq.so`, as the original's: bindings locate the
//! library with `ctypes.util.find_library("rocketmq")`, which on Linux reports a library
//! found through `LD_LIBRARY_PATH` only if it carries a soname.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocketmq.so");
    }
}
