//! Gives the C library its soname, as cargo-c would: `librocketmq_blocking.so.0.<minor>`
//! while the major version is 0 (each 0.x minor may break the ABI), `.so.<major>` after.
//! The installed file and its links are made by `ffi/install.sh`.

fn main() {
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let minor = env!("CARGO_PKG_VERSION_MINOR");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        let soname = if major == "0" {
            format!("librocketmq_blocking.so.0.{minor}")
        } else {
            format!("librocketmq_blocking.so.{major}")
        };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
