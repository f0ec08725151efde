#!/usr/bin/env bash
# CI fuzz step (called by .ci/run): builds every target of fuzz/ and runs each briefly from
# its committed seeds (fuzz/corpus/<target>/), with a fixed libFuzzer seed, so that a
# decoder that panics, overflows its stack, allocates past the memory limit or hangs on
# hostile input fails CI. Not a fuzzing campaign: seconds per target.
#
# Needs rustup (installs a minimal nightly) and crates.io (installs cargo-fuzz).
# FUZZ_RUNS and FUZZ_SECONDS change the per-target budget (whichever ends first).
set -euo pipefail
cd "$(dirname "$0")"

runs=${FUZZ_RUNS:-200000}
seconds=${FUZZ_SECONDS:-6}

# Each step's start, with the seconds since this script began.
step() { echo "== fuzz: $* (at ${SECONDS}s)"; }

step "nightly toolchain and cargo-fuzz"
rustup toolchain install nightly --profile minimal --no-self-update
cargo install cargo-fuzz --locked --quiet
host=$(rustc +nightly -vV | sed -n 's/^host: //p')

# No AddressSanitizer: the crate has no `unsafe` (only ffi/ has), and panics, stack
# overflows, timeouts and the RSS limit need none; it would double build and run time.
step "build"
cargo +nightly fuzz build --sanitizer none --target "$host"
bin="${CARGO_TARGET_DIR:-target}/$host/release"

# Inputs a run finds go to a scratch corpus (listed first, so libFuzzer writes there);
# the seeds stay as committed. -max_len leaves room above each target's largest seed.
# Seeds named regress_* are inputs that crashed or hung a decoder: they must keep passing.
failed=()
for spec in frame:4096 messages:4096 route:4096 bodies:1024 offsets_file:1024 headers:1024 \
  http_answer:1024; do
  t=${spec%%:*}
  max_len=${spec#*:}
  work="target/ci/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  step "$t (up to $runs runs or ${seconds}s, max_len $max_len)"
  if ! "$bin/$t" "$work/corpus" "corpus/$t" -seed=1 -runs="$runs" \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 > "$work/log" 2>&1; then
    echo "fuzz target $t failed; last 60 lines of $work/log:"
    tail -n 60 "$work/log"
    failed+=("$t")
  fi
  grep -E '^(Done|stat::number_of_executed_units)' "$work/log" || true
done

if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzz targets failed: ${failed[*]} (crashing inputs under fuzz/target/ci/<target>/artifacts)"
  exit 1
fi
step "every target ran clean"
