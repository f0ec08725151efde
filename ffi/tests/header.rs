//! The committed header is what cbindgen generates from the source, so a change to the
//! ABI cannot land without its header.

use std::path::Path;

#[test]
fn the_committed_header_matches_the_generated_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = dir.join("include/rocketmq_blocking.h");
    if std::env::var_os("UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("writing the header");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "ffi/include/rocketmq_blocking.h differs from what the source generates; \
         regenerate it with `UPDATE_HEADER=1 cargo test -p rocketmq-blocking-ffi --test header` \
         and commit it"
    );
}
