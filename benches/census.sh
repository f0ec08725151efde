#!/usr/bin/env bash
# System calls and context switches per message, the floor (benches/floor.rs) against
# `rmq bench produce --mode sync`, at each count of sending threads. Counts, not times:
# they hold on a noisy machine where CPU per message does not. `perf stat` counts every
# thread of the process (the I/O thread, timers and pools included).
#
#   cargo build --release --features cli --bin rmq && cargo bench --no-run --bench floor --features cli
#   NAMESRV_ADDR=... benches/census.sh > out.txt
#
# Environment: THREADS ("1 2 8 64"), COUNT (40000 messages, 20000 with one thread; each
# side also sends a warm-up of half as many, counted too), TOPIC (PerfT, for `rmq`; create
# it first: `rmq topic create PerfT --queues 8`).
# Prints one line per side and thread count: "<floor|ours> t=<threads> <event>=<per message> ...".
set -euo pipefail

NS=${NAMESRV_ADDR:?set NAMESRV_ADDR}
THREADS=${THREADS:-"1 2 8 64"}
TOPIC=${TOPIC:-PerfT}
TARGET=${CARGO_TARGET_DIR:-target}
RMQ=$TARGET/release/rmq
FLOOR=$(ls -t "$TARGET"/release/deps/floor-* | grep -v '\.d$' | head -1)
EVENTS=context-switches
for s in futex epoll_wait epoll_ctl sendto recvfrom read write writev; do
    EVENTS="$EVENTS,syscalls:sys_enter_$s"
done

per_message() { # side threads messages < perf stat -x, output
    python3 -c '
import sys
side, threads, msgs = sys.argv[1], sys.argv[2], int(sys.argv[3])
counts = {}
for line in sys.stdin:
    f = line.strip().split(",")
    if len(f) > 3 and f[0].replace(".", "").isdigit():
        counts[f[2].replace("syscalls:sys_enter_", "")] = float(f[0])
print(side, "t=" + threads, " ".join(
    "%s=%.2f" % (k, v / msgs) for k, v in counts.items() if v / msgs >= 0.01))
' "$@"
}

for t in $THREADS; do
    n=${COUNT:-40000}
    [ "$t" = 1 ] && n=${COUNT:-20000}
    NAMESRV_ADDR=$NS FLOOR_COUNT=$n perf stat -x, -e "$EVENTS" "$FLOOR" "sync$t" \
        2>&1 >/dev/null | per_message floor "$t" $((n + n / 2))
    perf stat -x, -e "$EVENTS" "$RMQ" bench produce -n "$NS" --topic "$TOPIC" --mode sync \
        --threads "$t" --count "$n" --warmup $((n / 2)) 2>&1 >/dev/null \
        | per_message ours "$t" $((n + n / 2))
done
