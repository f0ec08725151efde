#!/usr/bin/env bash
# The crate as crates.io would ship it: `cargo package` (which builds the packaged library
# on its own), `cargo publish --dry-run` (never a real publish), then, outside this
# workspace, the packaged examples, the `rmq` tool and a scratch crate that depends on the
# unpacked `.crate` are built. Called by `.ci/run`; also runs alone from the repository
# root (uncommitted changes are packaged too: `--allow-dirty`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Tests and benches are left out of the package on purpose (`include` in Cargo.toml):
# cargo's one-line notice for each is filtered, every other line is shown.
quiet_package() {
  local log
  log=$(mktemp)
  if ! "$@" > "$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    return 1
  fi
  grep -v -E '^warning: ignoring (test|benchmark) ' "$log" || true
  rm -f "$log"
}

echo "== package: cargo package"
quiet_package cargo package --locked --allow-dirty --quiet -p rocketmq-blocking
version=$(cargo pkgid -p rocketmq-blocking | sed 's/.*[#@]//')
crate="${CARGO_TARGET_DIR:-$root/target}/package/rocketmq-blocking-$version.crate"

echo "== package: cargo publish --dry-run"
# Needs the crates.io index; it checks the manifest as the registry would (no upload).
quiet_package cargo publish --dry-run --locked --allow-dirty --no-verify --quiet -p rocketmq-blocking

# docs.rs builds with nightly, the `[package.metadata.docs.rs]` features and `--cfg docsrs`.
if rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "== package: the docs.rs build (nightly, --cfg docsrs)"
  CARGO_TARGET_DIR="$root/target/docsrs-check" cargo +nightly rustdoc --locked --quiet \
    -p rocketmq-blocking --lib --features testkit -- --cfg docsrs
else
  echo "== package: no nightly toolchain, the docs.rs build is not checked"
fi

# Outside the repository, so no parent workspace claims the unpacked crate; one target
# directory (under ours, kept between runs) serves both builds below.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export CARGO_TARGET_DIR="$root/target/package-check"
tar -xzf "$crate" -C "$scratch"
pkg="$scratch/rocketmq-blocking-$version"

echo "== package: the packaged examples build from the package alone"
# The self dev-dependency that turns `testkit` on in the repository is not published.
# Without features, cargo skips the examples that declare `required-features`: the others
# must build, so a missing declaration fails here.
(cd "$pkg" && cargo build --locked --quiet --examples)
(cd "$pkg" && cargo build --locked --quiet --examples --features testkit)
# The Prometheus example needs `metrics` as well.
(cd "$pkg" && cargo build --locked --quiet --example prometheus --features testkit,metrics)

echo "== package: the rmq tool builds from the package (cargo install --features cli)"
(cd "$pkg" && cargo build --locked --quiet --features cli --bin rmq)

echo "== package: a crate depending on the packaged crate builds"
mkdir "$scratch/user"
cat > "$scratch/user/Cargo.toml" <<EOF
[package]
name = "packaged-crate-user"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rocketmq-blocking = { path = "../rocketmq-blocking-$version" }

[dev-dependencies]
rocketmq-blocking = { path = "../rocketmq-blocking-$version", features = ["testkit"] }

[workspace]
EOF
mkdir "$scratch/user/src"
cat > "$scratch/user/src/main.rs" <<'EOF'
use rocketmq_blocking::{ClientOptions, ErrorKind, Message, Producer};

fn main() {
    let message = Message::new("TopicTest", "hello").with_tags("TagA");
    // A send needs a cluster; building proves the paved path compiles against the package.
    let options = ClientOptions::new().namesrv_addr("127.0.0.1:1");
    let start = Producer::builder("packaged_crate_user").client_options(options).start();
    match start.and_then(|p| p.send(&message)) {
        Ok(r) => println!("sent {}", r.msg_id()),
        Err(e) if e.kind() == ErrorKind::Config => println!("configuration: {e}"),
        Err(e) => println!("{:?}: {e}", e.kind()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_launcher_is_there_for_tests() {
        let _builder = rocketmq_blocking::testkit::Cluster::builder();
    }
}
EOF
# The packaged lock file, so the dependency versions are the ones the package verified.
cp "$pkg/Cargo.lock" "$scratch/user/Cargo.lock"
(cd "$scratch/user" && cargo build --quiet --all-targets)
echo "package: ok ($crate)"
