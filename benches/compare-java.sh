#!/usr/bin/env bash
# Side-by-side producer benchmark: the official Java client (rocketmq-client, driven by
# benches/java Bench.java, which does what the Java benchmark Producer does) against
# `rmq bench produce`, on ONE broker, runs alternating Java/Rust (A B A B ...).
#
#   benches/compare-java.sh                      # starts a private cluster, stops it at the end
#   NAMESRV_ADDR=127.0.0.1:9876 benches/compare-java.sh
#
# Environment: PAIRS (3), THREADS (64, sync workload), COUNT (50000 per run), SIZE (1024),
# INFLIGHT (1024 async sends outstanding, both sides), WORKLOADS ("sync async"),
# TOPIC (CompareJava, created with 8 queues), JAVA_HEAP (512m), CARGO_TARGET_DIR.
# Both sides: ROCKETMQ binary headers, no compression, one producer shared by all threads.
# Per run: TPS, latency p50/p99/max (ms, per send call), client CPU user+sys seconds and peak
# RSS of the client process (/usr/bin/time), wall time (process start to exit, JVM boot included).
# Exit status 1 if any run did not get every message acknowledged.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PAIRS=${PAIRS:-3}
THREADS=${THREADS:-64}
COUNT=${COUNT:-50000}
SIZE=${SIZE:-1024}
INFLIGHT=${INFLIGHT:-1024}
WORKLOADS=${WORKLOADS:-"sync async"}
TOPIC=${TOPIC:-CompareJava}
JAVA_HEAP=${JAVA_HEAP:-512m}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$CARGO_TARGET_DIR/java-bench
RMQ=$CARGO_TARGET_DIR/release/rmq
RUNS=$OUT/runs
mkdir -p "$OUT" "$RUNS"
rm -f "$RUNS"/*

log() { echo "== $*" >&2; }

if [ ! -x /usr/bin/time ]; then
    log "installing GNU time"
    apt-get install -y time >/dev/null
fi

log "building rmq (release)"
cargo build --release --quiet --bin rmq

log "resolving the Java client classpath (Maven)"
if [ ! -s "$OUT/classpath.txt" ] || [ benches/java/pom.xml -nt "$OUT/classpath.txt" ]; then
    (cd benches/java && mvn -q dependency:build-classpath -Dmdep.outputFile="$OUT/classpath.txt")
fi
rm -rf "$OUT/classes"
javac -nowarn -d "$OUT/classes" -cp "$(cat "$OUT/classpath.txt")" \
    benches/java/src/main/java/rmqblocking/bench/Bench.java
JAVA_CP="$OUT/classes:$(cat "$OUT/classpath.txt")"

CLUSTER_STATE=
stop_cluster() {
    if [ -n "$CLUSTER_STATE" ]; then
        RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster stop >&2 || true
        rm -rf "$CLUSTER_STATE"
    fi
}
trap stop_cluster EXIT
if [ -z "${NAMESRV_ADDR:-}" ]; then
    CLUSTER_STATE=$(mktemp -d /tmp/compare-java-cluster.XXXXXX)
    log "starting a cluster (state in $CLUSTER_STATE)"
    line=$(RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster start | grep '^NAMESRV_ADDR=')
    NAMESRV_ADDR=${line#NAMESRV_ADDR=}
fi
export NAMESRV_ADDR
log "name server $NAMESRV_ADDR"
"$RMQ" topic create "$TOPIC" --queues 8 >&2

JAVA_VERSION=$(cd "$OUT" && grep -o 'rocketmq-client/[^/]*' classpath.txt | head -1 | cut -d/ -f2)
RUST_VERSION=$("$RMQ" --version)
JDK_VERSION=$(java -version 2>&1 | head -1)

# Warm the broker (commit log, page cache, topic route) so the first measured run is not
# the only one paying for it.
log "warm-up: 5000 messages (not measured)"
"$RMQ" bench produce --topic "$TOPIC" --threads 16 --size "$SIZE" --count 5000 >/dev/null 2>&1

# run SIDE WORKLOAD PAIR: one client run; appends a row to $OUT/rows.tsv.
ROWS=$OUT/rows.tsv
: >"$ROWS"
FAILED=0
run() {
    local side=$1 workload=$2 pair=$3
    local base=$RUNS/$workload-$pair-$side
    local cmd
    if [ "$side" = java ]; then
        local async=false
        [ "$workload" = async ] && async=true
        cmd=(java -Xms"$JAVA_HEAP" -Xmx"$JAVA_HEAP" -cp "$JAVA_CP" rmqblocking.bench.Bench
            -n "$NAMESRV_ADDR" -t "$TOPIC" -w "$THREADS" -s "$SIZE" -q "$COUNT" -y "$async"
            -i "$INFLIGHT")
    else
        cmd=("$RMQ" bench produce -n "$NAMESRV_ADDR" --topic "$TOPIC" --size "$SIZE"
            --count "$COUNT" --serialize rocketmq)
        if [ "$workload" = async ]; then
            cmd+=(--mode async --inflight "$INFLIGHT")
        else
            cmd+=(--mode sync --threads "$THREADS")
        fi
    fi
    local status=0
    /usr/bin/time -o "$base.time" -f '%U %S %M %e' "${cmd[@]}" >"$base.out" 2>"$base.err" || status=$?
    local json
    json=$(grep '^{' "$base.out" | tail -1 || true)
    local msgs=0 tps=NA p50=NA p99=NA max=NA
    if [ -n "$json" ]; then
        read -r msgs tps p50 p99 max < <(jq -r '[.messages, .tps, .latencyMs.p50, .latencyMs.p99, .latencyMs.max] | @tsv' <<<"$json")
    fi
    local user sys rss wall
    read -r user sys rss wall < <(tail -1 "$base.time")
    local cpu
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
    local ok=ok
    if [ "$status" -ne 0 ] || [ "$msgs" != "$COUNT" ]; then
        ok="FAILED(exit $status, $msgs/$COUNT acked; see $base.err)"
        FAILED=1
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$workload" "$pair" "$side" "$tps" "$p50" "$p99" "$max" "$cpu" "$((rss / 1024))" "$wall" "$ok" >>"$ROWS"
    printf '%-5s pair %s %-4s  tps %9.0f  p50 %7.3f  p99 %8.3f  max %8.3f ms  cpu %6.2f s  rss %5d MiB  wall %6.2f s  %s\n' \
        "$workload" "$pair" "$side" "$tps" "$p50" "$p99" "$max" "$cpu" "$((rss / 1024))" "$wall" "$ok" 2>/dev/null \
        || printf '%s pair %s %s %s\n' "$workload" "$pair" "$side" "$ok"
}

echo "compare-java: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, $(uname -sr)"
echo "java client: org.apache.rocketmq:rocketmq-client $JAVA_VERSION ($JDK_VERSION, -Xmx$JAVA_HEAP), benches/java Bench.java"
echo "rust client: $RUST_VERSION (rmq bench produce, release)"
echo "broker: NAMESRV_ADDR=$NAMESRV_ADDR topic $TOPIC (8 queues)"
echo "per run: $COUNT messages of $SIZE bytes, ROCKETMQ headers, no compression; sync: $THREADS threads; async: 1 thread, $INFLIGHT in flight; $PAIRS pairs, Java first"
echo
for workload in $WORKLOADS; do
    for pair in $(seq 1 "$PAIRS"); do
        run java "$workload" "$pair"
        run rust "$workload" "$pair"
    done
done

echo
echo "medians (ratio = rust / java; TPS higher is better, the rest lower is better)"
printf '%-5s %-9s %12s %12s %8s\n' workload figure java rust ratio
for workload in $WORKLOADS; do
    col=4
    for figure in tps p50_ms p99_ms max_ms cpu_s rss_MiB wall_s; do
        j=$(awk -F'\t' -v w="$workload" -v c="$col" '$1 == w && $3 == "java" && $c != "NA" { print $c }' "$ROWS" \
            | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "NA"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
        r=$(awk -F'\t' -v w="$workload" -v c="$col" '$1 == w && $3 == "rust" && $c != "NA" { print $c }' "$ROWS" \
            | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "NA"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
        ratio=$(awk -v j="$j" -v r="$r" 'BEGIN { if (j == "NA" || r == "NA" || j + 0 == 0) print "NA"; else printf "%.2f", r / j }')
        printf '%-5s %-9s %12.3f %12.3f %8s\n' "$workload" "$figure" "$j" "$r" "$ratio" 2>/dev/null \
            || printf '%-5s %-9s %12s %12s %8s\n' "$workload" "$figure" "$j" "$r" "$ratio"
        col=$((col + 1))
    done
done
if [ "$FAILED" -ne 0 ]; then
    echo "FAILED: a run did not get all $COUNT messages acknowledged (logs in $RUNS)"
    exit 1
fi
