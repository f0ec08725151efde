//! The public API is deliberate: this test lists it (from rustdoc JSON, with the default
//! features, so the listing is what a user of the library sees) and fails when it differs
//! from the committed `tests/public-api.txt`. After a deliberate change, regenerate the
//! listing with `UPDATE_PUBLIC_API=1 cargo test --test public_api` and commit it with the
//! change.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn the_public_api_matches_the_committed_listing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("public-api");
    // Stable rustdoc writes JSON when told it may use an unstable option.
    let status = Command::new(env!("CARGO"))
        .current_dir(root)
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTDOCFLAGS")
        .args(["rustdoc", "--lib", "--quiet", "--target-dir"])
        .arg(&target)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .status()
        .expect("cargo rustdoc runs");
    assert!(status.success(), "cargo rustdoc failed: {status}");
    let json = target.join("doc").join("rocketmq_blocking.json");
    // Blanket and auto-trait impls depend on the toolchain and on dependencies, not on us;
    // `Send`/`Sync` of the clients are asserted below instead.
    let api = public_api::Builder::from_rustdoc_json(&json)
        .omit_blanket_impls(true)
        .omit_auto_trait_impls(true)
        .build()
        .expect("the rustdoc JSON is readable");
    let listing: String = api.items().map(|item| format!("{item}\n")).collect();

    let committed_path = root.join("tests").join("public-api.txt");
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&committed_path, &listing).expect("write the listing");
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if committed != listing {
        let added: Vec<&str> = listing
            .lines()
            .filter(|l| !committed.lines().any(|c| c == *l))
            .collect();
        let removed: Vec<&str> = committed
            .lines()
            .filter(|c| !listing.lines().any(|l| l == *c))
            .collect();
        panic!(
            "the public API changed; if that is deliberate, run \
             `UPDATE_PUBLIC_API=1 cargo test --test public_api` and commit tests/public-api.txt\n\
             added ({}):\n  {}\nremoved ({}):\n  {}",
            added.len(),
            added.join("\n  "),
            removed.len(),
            removed.join("\n  ")
        );
    }
}

/// The clients are shared across threads by reference or in an `Arc`.
#[test]
fn clients_and_messages_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<rocketmq_blocking::Producer>();
    send_sync::<rocketmq_blocking::PushConsumer>();
    send_sync::<rocketmq_blocking::LitePullConsumer>();
    send_sync::<rocketmq_blocking::Admin>();
    send_sync::<rocketmq_blocking::Message>();
    send_sync::<rocketmq_blocking::MessageExt>();
    send_sync::<rocketmq_blocking::SendFuture>();
    send_sync::<rocketmq_blocking::Error>();
}
