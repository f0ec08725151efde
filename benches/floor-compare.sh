#!/usr/bin/env bash
# The floor (benches/floor.rs) against `rmq bench`, alternating per workload and round:
# the floor, BEFORE (an `rmq` binary of an earlier build, to compare a change; default:
# this build again) and this build's release `rmq`. Workloads sync1, sync8, sync64,
# async, then drain (lite pull and push) of the messages the floor's drain filled.
# Prints lines "r<round> <floor|before|after> <workload> <json>";
# benches/floor_report.py turns them into medians.
#
#   cargo build --release --features cli --bin rmq && cargo bench --no-run --bench floor --features cli
#   NAMESRV_ADDR=... BEFORE=/tmp/rmq-old ROUNDS=3 benches/floor-compare.sh > out.txt
#   python3 benches/floor_report.py out.txt
set -u
cd "$(dirname "$0")/.."
NS=${NAMESRV_ADDR:?set NAMESRV_ADDR (rmq cluster start prints one)}
ROUNDS=${ROUNDS:-3}
after=target/release/rmq
before=${BEFORE:-$after}
floor=$(ls -t target/release/deps/floor-* | grep -v '\.d$' | head -1)
topic=FloorCmp_$$
$after topic create "$topic" --queues 8 -n "$NS" >/dev/null
sleep 2
args() { # workload -> rmq bench args
  case $1 in
    sync1) echo "--mode sync --threads 1 --count 10000 --warmup 5000" ;;
    sync8) echo "--mode sync --threads 8 --count 100000 --warmup 50000" ;;
    sync64) echo "--mode sync --threads 64 --count 100000 --warmup 50000" ;;
    async) echo "--mode async --inflight 1024 --count 100000 --warmup 50000" ;;
  esac
}
for r in $(seq "$ROUNDS"); do
  for w in sync1 sync8 sync64 async; do
    c=10000; [ $w = sync1 ] || c=100000
    echo "r$r floor $w $(NAMESRV_ADDR=$NS FLOOR_COUNT=$c $floor $w 2>/dev/null | tail -1)"
    echo "r$r before $w $($before bench produce -n "$NS" --topic "$topic" --size 1024 $(args $w) 2>/dev/null | tail -1)"
    echo "r$r after $w $($after bench produce -n "$NS" --topic "$topic" --size 1024 $(args $w) 2>/dev/null | tail -1)"
  done
  line=$(NAMESRV_ADDR=$NS FLOOR_COUNT=100000 $floor drain 2>/dev/null | tail -1)
  echo "r$r floor drain $line"
  dt=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["topic"])')
  for who in before after; do
    bin=$before; [ $who = after ] && bin=$after
    echo "r$r $who drain-lite $($bin bench consume -n "$NS" --topic "$dt" --group "lp_${who}_$r$$" --count 100000 --lite-pull 2>/dev/null | tail -1)"
    echo "r$r $who drain-push $($bin bench consume -n "$NS" --topic "$dt" --group "push_${who}_$r$$" --count 100000 2>/dev/null | tail -1)"
  done
done
