#!/usr/bin/env bash
# How the client's costs grow (issue 15): runs `rmq bench scale <experiment>` and plots each
# curve against its stated expectation (benches/scaling_report.py).
#
#   benches/scaling.sh                                 # everything but the soak; private cluster
#   EXPERIMENTS="soak" benches/scaling.sh              # the 30-minute soak
#   SMOKE=1 benches/scaling.sh                         # small sizes, a few minutes
#   NAMESRV_ADDR=127.0.0.1:9876 benches/scaling.sh     # an existing (5.x) cluster
#
# Environment: EXPERIMENTS (default "threads topics clients size queues"; add soak for the
# soak), THREADS ("1 2 4 8 16 32 64 128 256": sync senders, each count also run by the floor
# client, benches/floor.rs),
# SMOKE (0), SOAK_SECONDS (1800), TOPICS ("10 100 1000 5000 10000"), CLIENTS ("1,10,100"),
# SIZES (128 B .. 4 MiB - 1 KiB), QUEUES ("8 64 256 1024"), BACKLOG (50000),
# BACKLOGS ("10000 50000 200000", at 64 queues), OUT (default target/scaling).
# Output in OUT: <experiment>.jsonl (the samples), topics-<N>.err (stderr, with the client
# instance's route log of the idle window), report.md and *.svg (scaling_report.py).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-$CARGO_TARGET_DIR/scaling}
RMQ=$CARGO_TARGET_DIR/release/rmq
SMOKE=${SMOKE:-0}
EXPERIMENTS=${EXPERIMENTS:-"threads topics clients size queues"}
if [ "$SMOKE" = 1 ]; then
    SOAK_SECONDS=${SOAK_SECONDS:-60}
    THREADS=${THREADS:-"1 8"}
    THREAD_COUNT=${THREAD_COUNT:-4000}
    TOPICS=${TOPICS:-"10 100"}
    CLIENTS=${CLIENTS:-"1,10"}
    SIZES=${SIZES:-"1024,262144"}
    SIZE_SECONDS=${SIZE_SECONDS:-2}
    QUEUES=${QUEUES:-"8 64"}
    BACKLOG=${BACKLOG:-5000}
    BACKLOGS=${BACKLOGS:-"2000 10000"}
    WINDOW=${WINDOW:-5}
else
    SOAK_SECONDS=${SOAK_SECONDS:-1800}
    THREADS=${THREADS:-"1 2 4 8 16 32 64 128 256"}
    THREAD_COUNT=${THREAD_COUNT:-100000}
    TOPICS=${TOPICS:-"10 100 1000 5000 10000"}
    CLIENTS=${CLIENTS:-"1,10,100"}
    SIZES=${SIZES:-"128,1024,16384,262144,1048576,4193280"}
    SIZE_SECONDS=${SIZE_SECONDS:-8}
    QUEUES=${QUEUES:-"8 64 256 1024"}
    BACKLOG=${BACKLOG:-50000}
    BACKLOGS=${BACKLOGS:-"10000 50000 200000"}
    WINDOW=${WINDOW:-20}
fi
mkdir -p "$OUT"

log() { echo "== $*" >&2; }

log "building rmq (release)"
cargo build --release --quiet --features cli --bin rmq
case " $EXPERIMENTS " in
    *" threads "*)
        cargo bench --no-run --quiet --bench floor --features cli 2>/dev/null
        FLOOR=$(ls -t "$CARGO_TARGET_DIR"/release/deps/floor-* | grep -v '\.d$' | head -1) ;;
esac

CLUSTER_STATE=
stop_cluster() {
    if [ -n "$CLUSTER_STATE" ]; then
        RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster stop >&2 || true
        rm -rf "$CLUSTER_STATE"
    fi
}
trap stop_cluster EXIT
if [ -z "${NAMESRV_ADDR:-}" ]; then
    CLUSTER_STATE=$(mktemp -d /tmp/scaling-cluster.XXXXXX)
    log "starting a cluster (state in $CLUSTER_STATE)"
    line=$(RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster start | grep '^NAMESRV_ADDR=')
    NAMESRV_ADDR=${line#NAMESRV_ADDR=}
fi
export NAMESRV_ADDR
log "name server $NAMESRV_ADDR"

for e in $EXPERIMENTS; do
    case $e in
        soak)
            log "soak: $SOAK_SECONDS s"
            "$RMQ" bench scale soak --duration "$SOAK_SECONDS" >"$OUT/soak.jsonl" 2>"$OUT/soak.err"
            ;;
        threads)
            # The same sync sends from 1 to 256 threads, ours then the floor's at each
            # count (a point: one JSON line of `rmq bench produce` or of the floor).
            : >"$OUT/threads.jsonl"
            topic=ScaleThreads-$$
            "$RMQ" topic create "$topic" --queues 8 >/dev/null
            for t in $THREADS; do
                n=$THREAD_COUNT; [ "$t" = 1 ] && n=$((THREAD_COUNT / 10))
                log "threads: $t ($n messages after $((n / 4)) not measured)"
                ours=$(/usr/bin/time -f '%M' -o "$OUT/threads-rss" "$RMQ" bench produce \
                    --topic "$topic" --mode sync --threads "$t" --size 1024 --count "$n" \
                    --warmup $((n / 4)) 2>>"$OUT/threads.err" | tail -1)
                floor=$(FLOOR_COUNT=$n "$FLOOR" "sync$t" 2>>"$OUT/threads.err" | tail -1)
                python3 - "$t" "$ours" "$floor" "$(tail -1 "$OUT/threads-rss")" \
                    >>"$OUT/threads.jsonl" <<'PY'
import json, sys
t, ours, floor, rss = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
for side, j, kib in (("ours", ours, rss), ("floor", floor, floor.get("peakRssKiB", 0))):
    print(json.dumps({"experiment": "threads", "kind": "point", "side": side, "threads": t,
                      "tps": j["tps"], "p50": j["latencyMs"]["p50"], "p99": j["latencyMs"]["p99"],
                      "cpu_us_per_msg": j["cpuUsPerMsg"], "rss_kib": kib,
                      "failures": j.get("failures", 0)}))
PY
            done
            ;;
        topics)
            : >"$OUT/topics.jsonl"
            for n in $TOPICS; do
                log "topics: $n (idle window $WINDOW s)"
                RUST_LOG=warn,rocketmq_blocking::client::instance=info \
                    "$RMQ" bench scale topics --topics "$n" --window "$WINDOW" \
                    >>"$OUT/topics.jsonl" 2>"$OUT/topics-$n.err"
                # Routes the instance re-published during the idle window (nothing changed).
                changed=$(sed -n '/idle window begins/,/idle window ends/p' "$OUT/topics-$n.err" \
                    | grep -c 'route of topic .* changed' || true)
                echo "{\"experiment\":\"topics\",\"kind\":\"republished\",\"topics\":$n,\"routes\":$changed}" \
                    >>"$OUT/topics.jsonl"
            done
            ;;
        clients)
            log "clients: $CLIENTS, shared and separate instances"
            "$RMQ" bench scale clients --counts "$CLIENTS" >"$OUT/clients.jsonl" 2>"$OUT/clients.err"
            "$RMQ" bench scale clients --counts "$CLIENTS" --separate-instances \
                >>"$OUT/clients.jsonl" 2>>"$OUT/clients.err"
            ;;
        size)
            log "size: $SIZES, $SIZE_SECONDS s per point"
            "$RMQ" bench scale size --sizes "$SIZES" --duration "$SIZE_SECONDS" \
                >"$OUT/size.jsonl" 2>"$OUT/size.err"
            ;;
        queues)
            : >"$OUT/queues.jsonl"
            for q in $QUEUES; do
                log "queues: $q, backlog $BACKLOG"
                "$RMQ" bench scale queues --queues "$q" --backlog "$BACKLOG" \
                    >>"$OUT/queues.jsonl" 2>>"$OUT/queues.err"
            done
            for b in $BACKLOGS; do
                log "queues: 64, backlog $b"
                "$RMQ" bench scale queues --queues 64 --backlog "$b" \
                    >>"$OUT/queues.jsonl" 2>>"$OUT/queues.err"
            done
            ;;
        *) echo "scaling: unknown experiment $e (soak threads topics clients size queues)" >&2; exit 1 ;;
    esac
done
python3 "$ROOT/benches/scaling_report.py" "$OUT"
log "report: $OUT/report.md"
