#!/usr/bin/env bash
# The cost of the foreign boundaries: sync sends from one thread, 1 KiB bodies, from Rust
# (`rmq bench produce`), C (produce_bench.c) and Python (produce_bench.py, the release
# wheel installed into a venv under target/ffi-bench), alternating
# for ROUNDS rounds against NAMESRV_ADDR (or a cluster this script starts and stops).
# Then Rust against Python only, async (1,024 in flight) and batches of 32 from one thread.
# Every client encodes request headers as JSON, the client default (C and Python can
# choose the binary ones too, `rmq_client_options_serialize_type` / `serialize_type=`):
# `rmq bench` defaults to the binary `ROCKETMQ` headers, which cost a Rust send about
# 5,500 fewer instructions (callgrind) and made the boundary look dearer than it is.
#
#   benches/ffi/run.sh            # ROUNDS=3 COUNT=10000 WARMUP=2000 (async/batch: 10x)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3} COUNT=${COUNT:-10000} WARMUP=${WARMUP:-2000} SIZE=${SIZE:-1024}
cargo build --release --quiet --locked -p rocketmq-blocking-ffi
cargo build --release --quiet --locked --features cli --bin rmq
rmq=target/release/rmq
started=
if [ -z "${NAMESRV_ADDR:-}" ]; then
  NAMESRV_ADDR=$($rmq cluster start | sed -n 's/^NAMESRV_ADDR=//p')
  started=1
fi
export NAMESRV_ADDR
trap '[ -n "$started" ] && $rmq cluster stop >/dev/null' EXIT
out=target/ffi-bench
mkdir -p "$out"
# A program linked with -lrocketmq_blocking asks for the soname (ffi/build.rs).
ln -sf librocketmq_blocking.so "target/release/$(readelf -d target/release/librocketmq_blocking.so |
  sed -n 's/.*soname: \[\(.*\)\]/\1/p')"
cc -O2 -Iffi/include benches/ffi/produce_bench.c -Ltarget/release -lrocketmq_blocking \
  -Wl,-rpath,"$PWD/target/release" -o "$out/produce_bench"
topic=FfiBench$$
$rmq topic create "$topic" --queues 8 >/dev/null
# The Python package as users install it: the release wheel (maturin from PyPI).
[ -x "$out/venv/bin/maturin" ] || { python3 -m venv "$out/venv" &&
  "$out/venv/bin/python" -m pip install --quiet maturin; }
rm -rf "$out/wheel"
"$out/venv/bin/maturin" build --release --quiet -m python/Cargo.toml -i "$out/venv/bin/python" --out "$out/wheel"
"$out/venv/bin/python" -m pip install --quiet --force-reinstall "$out"/wheel/rocketmq_blocking-*.whl
for r in $(seq "$ROUNDS"); do
  $rmq bench produce --serialize json --topic "$topic" --mode sync --threads 1 --size "$SIZE" \
    --count "$COUNT" --warmup "$WARMUP" 2>/dev/null | tail -n 1 |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("rust tps=%.0f cpu_us_per_msg=%.1f" % (j["tps"], j["cpuUsPerMsg"]))' |
    sed "s/^/round $r: /"
  echo "round $r: $("$out/produce_bench" "$topic" "$COUNT" "$WARMUP" "$SIZE")"
  echo "round $r: $("$out/venv/bin/python" benches/ffi/produce_bench.py "$topic" "$COUNT" "$WARMUP" "$SIZE")"
done
rust() { # mode-args...
  $rmq bench produce --serialize json --topic "$topic" --threads 1 --size "$SIZE" "$@" 2>/dev/null | tail -n 1 |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("tps=%.0f cpu_us_per_msg=%.1f" % (j["tps"], j["cpuUsPerMsg"]))'
}
BIG=$((COUNT * 10)) BIGWARM=$((WARMUP * 10))
for r in $(seq "$ROUNDS"); do
  echo "round $r: rust async $(rust --mode async --inflight 1024 --count "$BIG" --warmup "$BIGWARM")"
  echo "round $r: $("$out/venv/bin/python" benches/ffi/produce_bench.py "$topic" "$BIG" "$BIGWARM" "$SIZE" async 1024)"
  echo "round $r: rust batch $(rust --mode sync --batch 32 --count "$BIG" --warmup "$BIGWARM")"
  echo "round $r: $("$out/venv/bin/python" benches/ffi/produce_bench.py "$topic" "$BIG" "$BIGWARM" "$SIZE" batch 32)"
done
