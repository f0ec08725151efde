#!/usr/bin/env bash
# Side-by-side benchmark of rocketmq-blocking (`rmq bench`) and other RocketMQ clients on ONE
# broker, with identical parameters; for each workload and round every side runs once, in
# order (A B C D E A B C D E ...). The sides (SIDES, default all five, in this order):
#   java        org.apache.rocketmq:rocketmq-client 5.3.3, benches/java (Bench.java for
#               producers, Consume.java for consumers)
#   java49      rocketmq-client $JAVA49_VERSION (4.9.8): the same Bench/Consume compiled against it
#   rust        rocketmq-blocking, `rmq bench` (release)
#   rust-async  rocketmq-client-rust 1.0.0 (tokio), benches/peers/rust-async (its own cargo
#               project, built release --locked); skipped with a message when absent
#   go          github.com/apache/rocketmq-client-go/v2, benches/peers/go (go build; skipped
#               with a message without a Go toolchain)
# Every side but rust follows the peer contract (same flags as Bench.java/Consume.java, one
# JSON line last); a run that exits 3 printing {"unsupported": ...} (a capability the client
# lacks) gets a row whose status is "not supported", which is not a failure.
#
#   benches/compare-java.sh                                   # everything; starts a private cluster
#   SIDES="java rust" benches/compare-java.sh                 # Java 5.3.3 and rocketmq-blocking only
#   PAIRS=1 COUNT=2000 CONSUME_COUNT=20000 benches/compare-java.sh        # smoke run, minutes
#   WORKLOADS="push litepull" CONSUME_COUNT=200000 benches/compare-java.sh
#   NAMESRV_ADDR=127.0.0.1:9876 benches/compare-java.sh       # an existing cluster
#   TLS=both WORKLOADS="sync64 async" benches/compare-java.sh # the cost of TLS, both clients
#
# Workloads (WORKLOADS, default all but oneway):
#   sync1 sync8 sync64  sync send, 1/8/64 threads, COUNT messages (sync1: COUNT_SYNC1)
#   sync64ab            sync64 with auto-batching on (Java 5 setAutoBatch, `rmq bench
#                       --auto-batch`, each with its default batch delay and size); not in
#                       the default set. The 4.9 client and the go/rust-async bench programs
#                       have no auto-batching: "not supported" rows.
#                       SIDES="java rust" WORKLOADS="sync64 sync64ab" benches/compare-java.sh
#   async               one thread, at most INFLIGHT sends outstanding
#   batch               sync SEND_BATCH_MESSAGE of BATCH messages per call, BATCH_THREADS threads
#   oneway              sendOneway, 64 threads (a returned call counts as acknowledged)
#   push                push consumer (CONSUME_THREADS consume threads) draining the backlog
#   litepull            lite pull consumer (subscribe, a poll loop) draining the backlog
# The backlog: CONSUME_COUNT messages produced once (rmq bench produce --mode async) into a
# new topic of 8 queues; each consume run uses a new group from the first offset and stops
# after CONSUME_COUNT distinct messages, told apart by (broker, queue, offset); redeliveries
# are reported as duplicates.
#
# Producer runs start with a warm-up: WARMUP messages sent by the same producer and threads
# (or window) and waited for, then the measured phase. The default, 2/5 of COUNT (20000) for
# every producer workload, sync1 included, is what the Java client needed here before its JIT
# stopped compiling (CompilationMXBean time per 2000 sends fell to ~0 after 20000 sends on 1
# thread, 10000-12000 on 64 threads or async, on a loaded 2-core machine): the JIT counts
# calls, so the warm-up is a number of sends rather than a share of each run. WARMUP=0
# measures from the first send, as before warm-ups existed.
#
# TLS (off): "both" runs every workload four ways, java rust java-tls rust-tls, alternating in
# that order; "only" runs the TLS two. The cluster the script starts then takes TLS and plain
# connections both (`rmq cluster start --tls-mode permissive`). Both clients encrypt without
# authenticating the server, as the Java client's default TLS "test mode" does: Java with
# -Dtls.enable=true, rmq with --tls-insecure. Summary adds Rust/Java over TLS and TLS/plain
# for each client. TLS=both|only runs only those sides (SIDES is ignored).
#
# Environment: SIDES (see above), JAVA49_VERSION (4.9.8), RUST_ASYNC_DIR
# (benches/peers/rust-async), PAIRS (3 rounds), COUNT (50000), COUNT_SYNC1 (COUNT/5), WARMUP (see above),
# CONSUME_COUNT (1000000),
# SIZE (1024), INFLIGHT (1024), BATCH (16), BATCH_THREADS (64), CONSUME_THREADS (20),
# CONSUME_TIMEOUT (600 s per consume run), TOPIC (CompareJava, 8 queues), JAVA_HEAP (512m),
# CARGO_TARGET_DIR, OUT (results directory, default $CARGO_TARGET_DIR/java-bench),
# BROKER_WAIT_MS (waitTimeMillsInSendQueue set on the broker; default 5000 on the cluster the
# script starts, unchanged on a NAMESRV_ADDR cluster unless given).
# Every side: ROCKETMQ binary headers (Go: JSON, its only codec), no compression, 1 KiB
# bodies, one client per process, the same warm-up (WARMUP messages, same producer and threads).
#
# Per run, of the measured phase: TPS (msgs/s), latency p50/p99/max (ms, per send call; not
# for consumers), cpu_s (user+sys seconds each client reads from the OS at the phase's start and
# end; not for consumers) and cpu_us_per_msg (cpu_s per message, µs). Of the whole process:
# cpu_total_s and peak RSS (/usr/bin/time), wall time (process start to exit), time from
# process start to the first acknowledged send (of the warm-up, if any) / first consumed
# message (the harness notes the clock right before exec; each client prints the wall clock
# of that moment), and duplicates (consumers). Output in OUT: rows.tsv (raw rows), summary.md (medians,
# Rust/Java 5.3.3 ratios, every side with rust / best peer against the issue's targets),
# throughput-vs-threads.svg (TPS and p99 of sync1/8/64, a line per side), runs/ (logs).
# Exit status 1 if any run did not send or consume everything it was asked to ("not
# supported" runs excepted).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PAIRS=${PAIRS:-3}
COUNT=${COUNT:-50000}
COUNT_SYNC1=${COUNT_SYNC1:-$(( COUNT / 5 > 0 ? COUNT / 5 : 1 ))}
WARMUP=${WARMUP:-$((COUNT * 2 / 5))}
CONSUME_COUNT=${CONSUME_COUNT:-1000000}
SIZE=${SIZE:-1024}
INFLIGHT=${INFLIGHT:-1024}
BATCH=${BATCH:-16}
BATCH_THREADS=${BATCH_THREADS:-64}
CONSUME_THREADS=${CONSUME_THREADS:-20}
CONSUME_TIMEOUT=${CONSUME_TIMEOUT:-600}
WORKLOADS=${WORKLOADS:-"sync1 sync8 sync64 async batch push litepull"}
TLS=${TLS:-off}
case $TLS in
    off) SIDES=${SIDES:-"java java49 rust rust-async go"} ;;
    both) SIDES="java rust java-tls rust-tls" ;;
    only) SIDES="java-tls rust-tls" ;;
    *) echo "compare-java: TLS is off, both or only (not $TLS)" >&2; exit 1 ;;
esac
JAVA49_VERSION=${JAVA49_VERSION:-4.9.8}
RUST_ASYNC_DIR=${RUST_ASYNC_DIR:-$ROOT/benches/peers/rust-async}
TOPIC=${TOPIC:-CompareJava}
JAVA_HEAP=${JAVA_HEAP:-512m}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-$CARGO_TARGET_DIR/java-bench}
RMQ=$CARGO_TARGET_DIR/release/rmq
RUNS=$OUT/runs
REPORT=$ROOT/benches/compare_report.py
mkdir -p "$OUT" "$RUNS"
rm -f "$RUNS"/* "$OUT/rows.tsv" "$OUT/summary.md" "$OUT/throughput-vs-threads.svg"

log() { echo "== $*" >&2; }
die() { echo "compare-java: $*" >&2; exit 1; }

producing=false
consuming=false
for side in $SIDES; do
    case $side in
        java | java49 | rust | rust-async | go | java-tls | rust-tls) ;;
        *) die "unknown side $side (java java49 rust rust-async go)" ;;
    esac
done
has_side() { case " $SIDES " in *" $1 "*) return 0 ;; esac; return 1; }
# skip SIDE REASON: drops a side that cannot be built here, saying why (the run goes on).
SKIPPED=
skip() {
    log "skipping $1: $2"
    SKIPPED="$SKIPPED; $1 ($2)"
    SIDES=$(echo " $SIDES " | sed "s/ $1 / /; s/^ *//; s/ *$//")
}
for w in $WORKLOADS; do
    case $w in
        sync1 | sync8 | sync64 | sync64ab | async | batch | oneway) producing=true ;;
        push | litepull) consuming=true ;;
        *) die "unknown workload $w (sync1 sync8 sync64 sync64ab async batch oneway push litepull)" ;;
    esac
done

if [ ! -x /usr/bin/time ]; then
    log "installing GNU time"
    apt-get install -y time >/dev/null
fi
for tool in python3 java javac mvn cargo; do
    command -v "$tool" >/dev/null || die "$tool is needed (see README: Prerequisites)"
done

log "building rmq (release)"
cargo build --release --quiet --features cli --bin rmq

# java_classpath FILE [MAVEN_ARGS]: the classpath of benches/java/pom.xml (Maven) into FILE.
java_classpath() {
    local file=$1
    shift
    if [ ! -s "$file" ] || [ benches/java/pom.xml -nt "$file" ]; then
        (cd benches/java && mvn -q dependency:build-classpath -Dmdep.outputFile="$file" "$@")
    fi
}
log "resolving the Java client classpath (Maven)"
java_classpath "$OUT/classpath.txt"
rm -rf "$OUT/classes"
javac -nowarn -d "$OUT/classes" -cp "$(cat "$OUT/classpath.txt")" benches/java/src/main/java/rmqblocking/bench/*.java
JAVA_CP="$OUT/classes:$(cat "$OUT/classpath.txt")"
if has_side java49; then
    # The same Bench and Consume against the 4.9 client (BrokerConfig needs 5.x classes and
    # runs from the 5.3.3 classpath only).
    log "resolving the Java client $JAVA49_VERSION classpath (Maven)"
    java_classpath "$OUT/classpath-$JAVA49_VERSION.txt" -Drocketmq.version="$JAVA49_VERSION"
    rm -rf "$OUT/classes-$JAVA49_VERSION"
    javac -nowarn -d "$OUT/classes-$JAVA49_VERSION" -cp "$(cat "$OUT/classpath-$JAVA49_VERSION.txt")" \
        benches/java/src/main/java/rmqblocking/bench/{Bench,Consume}.java
    JAVA49_CP="$OUT/classes-$JAVA49_VERSION:$(cat "$OUT/classpath-$JAVA49_VERSION.txt")"
fi
GO_BENCH=$CARGO_TARGET_DIR/peers/go-bench
if has_side go; then
    if command -v go >/dev/null; then
        # go.sum pins every module; on a fresh machine go build fetches them (module proxy).
        log "building the Go client's bench program"
        (cd benches/peers/go && GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$GO_BENCH" .)
    else
        skip go "no go toolchain"
    fi
fi
RUST_ASYNC_BENCH=$CARGO_TARGET_DIR/peers/rust-async/release/rust-async-bench
if has_side rust-async; then
    if [ -f "$RUST_ASYNC_DIR/Cargo.toml" ]; then
        log "building the rocketmq-client-rust bench program (release)"
        cargo build --release --quiet --locked --manifest-path "$RUST_ASYNC_DIR/Cargo.toml" \
            --target-dir "$CARGO_TARGET_DIR/peers/rust-async"
    else
        skip rust-async "no $RUST_ASYNC_DIR"
    fi
fi
[ -n "$SIDES" ] || die "no side left to run"

CLUSTER_STATE=
CLUSTER_LOGS=
stop_cluster() {
    if [ -n "$CLUSTER_STATE" ]; then
        RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster stop >&2 || true
        rm -rf "$CLUSTER_STATE"
    fi
    # The testkit keeps a stopped cluster's run directory for its logs; the store (over a
    # GiB after a full run) goes now rather than at some later start.
    if [ -n "$CLUSTER_LOGS" ]; then
        rm -rf "$(dirname "$CLUSTER_LOGS")"/store-*
    fi
}
trap stop_cluster EXIT
if [ -z "${NAMESRV_ADDR:-}" ]; then
    BROKER_WAIT_MS=${BROKER_WAIT_MS-5000}
    CLUSTER_STATE=$(mktemp -d /tmp/compare-java-cluster.XXXXXX)
    log "starting a cluster (state in $CLUSTER_STATE)"
    tls_mode=()
    [ "$TLS" = off ] || tls_mode=(--tls-mode permissive)
    line=$(RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster start "${tls_mode[@]}" \
        | grep '^NAMESRV_ADDR=')
    NAMESRV_ADDR=${line#NAMESRV_ADDR=}
    CLUSTER_LOGS=$(RMQ_CLUSTER_STATE_DIR=$CLUSTER_STATE "$RMQ" cluster status \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["logDir"])')
fi
export NAMESRV_ADDR
BROKER_WAIT_MS=${BROKER_WAIT_MS:-}
log "name server $NAMESRV_ADDR"

JAVA_VERSION=$(grep -o 'rocketmq-client/[^/]*' "$OUT/classpath.txt" | head -1 | cut -d/ -f2)
RUST_VERSION=$("$RMQ" --version)
JDK_VERSION=$(java -version 2>&1 | head -1)

"$RMQ" topic create "$TOPIC" --queues 8 >&2
if [ -n "$BROKER_WAIT_MS" ]; then
    # Requests that wait longer than this in the broker's send queue are refused with
    # SYSTEM_BUSY (broker default 200 ms). On a shared, overloaded machine that fails sends
    # for reasons that have nothing to do with the client, and the two clients differ in
    # whether they retry (Java 5.3.3 retries SYSTEM_BUSY on sync sends), so the private
    # broker gets more room, as the CLI tests give theirs.
    for addr in $("$RMQ" route "$TOPIC" | python3 "$REPORT" brokers); do
        log "broker $addr: waitTimeMillsInSendQueue=$BROKER_WAIT_MS"
        java -cp "$JAVA_CP" rmqblocking.bench.BrokerConfig "$addr" \
            "waitTimeMillsInSendQueue=$BROKER_WAIT_MS" >&2
    done
fi
if $producing; then
    # Warm the broker (commit log, page cache, topic route) so the first measured run is not
    # the only one paying for it. The clients' own warm-up is part of every run (WARMUP).
    log "broker warm-up: 5000 messages (not measured)"
    "$RMQ" bench produce --topic "$TOPIC" --threads 16 --size "$SIZE" --count 5000 \
        >"$RUNS/warm-up.out" 2>"$RUNS/warm-up.err" \
        || log "warm-up: some sends failed, ignored ($(tail -1 "$RUNS/warm-up.err"))"
fi
BACKLOG=${TOPIC}Backlog_$(date +%s)
if $consuming; then
    # A new topic, so that it holds exactly the backlog and every run can drain all of it.
    log "backlog: $CONSUME_COUNT messages into $BACKLOG (8 queues, not measured)"
    # Sends that failed are sent again; one that timed out may be stored anyway, so the topic
    # may hold a few more than asked (the consumers stop at the count).
    left=$CONSUME_COUNT
    for attempt in 1 2 3 4; do
        [ "$left" -gt 0 ] || break
        "$RMQ" bench produce --topic "$BACKLOG" --create-topic --queues 8 --size "$SIZE" \
            --mode async --inflight "$INFLIGHT" --count "$left" \
            >"$RUNS/backlog-$attempt.out" 2>"$RUNS/backlog-$attempt.err" \
            || log "backlog: $(tail -1 "$RUNS/backlog-$attempt.err")"
        left=$((left - $(python3 "$REPORT" acked "$RUNS/backlog-$attempt.out")))
    done
    [ "$left" -le 0 ] || die "the backlog is $left messages short (see $RUNS/backlog-*.err)"
fi

STAMP=$(date +%s)
# run SIDE WORKLOAD PAIR: one client run under /usr/bin/time; appends a row to rows.tsv.
run() {
    local side=$1 workload=$2 pair=$3 tls=false
    local client=${side%-tls}
    [ "$client" = "$side" ] || tls=true
    local base=$RUNS/$workload-$pair-$side
    local count=$COUNT threads=64 warmup=0 verb=produce mode=push cmd
    case $workload in
        sync1) threads=1 count=$COUNT_SYNC1 ;;
        sync8) threads=8 ;;
        async) threads=1 ;;
        batch) threads=$BATCH_THREADS ;;
        push) threads=$CONSUME_THREADS count=$CONSUME_COUNT ;;
        litepull) threads=1 count=$CONSUME_COUNT mode=litepull ;;
    esac
    case $workload in
        push | litepull) verb=consume ;;
        *) warmup=$WARMUP ;;
    esac
    local group=cmp_${workload}_${side//-/_}_${pair}_$STAMP
    case $client in
        rust)
            if [ $verb = consume ]; then
                cmd=("$RMQ" bench consume -n "$NAMESRV_ADDR" --topic "$BACKLOG" --group "$group"
                    --count "$count" --timeout "$CONSUME_TIMEOUT" --serialize rocketmq)
                if [ "$workload" = push ]; then
                    cmd+=(--threads "$threads")
                else
                    cmd+=(--lite-pull)
                fi
            else
                cmd=("$RMQ" bench produce -n "$NAMESRV_ADDR" --topic "$TOPIC" --size "$SIZE"
                    --count "$count" --warmup "$warmup" --serialize rocketmq --threads "$threads")
                case $workload in
                    async) cmd+=(--mode async --inflight "$INFLIGHT") ;;
                    batch) cmd+=(--mode sync --batch "$BATCH") ;;
                    oneway) cmd+=(--mode oneway) ;;
                    sync64ab) cmd+=(--mode sync --auto-batch) ;;
                    *) cmd+=(--mode sync) ;;
                esac
            fi
            $tls && cmd+=(--tls-insecure) ;;
        *)
            # Every other side takes the peer contract's flags (Bench.java / Consume.java).
            case $client in
                java | java49)
                    local cp=$JAVA_CP class=rmqblocking.bench.Bench
                    [ "$client" = java49 ] && cp=$JAVA49_CP
                    [ $verb = consume ] && class=rmqblocking.bench.Consume
                    cmd=(java -Xms"$JAVA_HEAP" -Xmx"$JAVA_HEAP")
                    # ClientConfig.useTLS defaults to this property; with no trust store
                    # configured the client runs in TLS test mode (any server certificate).
                    $tls && cmd+=(-Dtls.enable=true)
                    cmd+=(-cp "$cp" "$class") ;;
                go) cmd=("$GO_BENCH" "$verb") ;;
                rust-async) cmd=("$RUST_ASYNC_BENCH" "$verb") ;;
            esac
            if [ "$workload" = sync64ab ] && [ "$client" != java ] && [ "$client" != java49 ]; then
                # The peer contract's answer for a capability the side's program lacks.
                cmd=(sh -c 'echo "{\"unsupported\": \"auto-batching is not in this bench program\"}"; exit 3')
            fi
            if [ $verb = consume ]; then
                cmd+=(-n "$NAMESRV_ADDR" -t "$BACKLOG" -g "$group" -m "$mode" -w "$threads"
                    -q "$count" -T "$CONSUME_TIMEOUT")
            else
                cmd+=(-n "$NAMESRV_ADDR" -t "$TOPIC" -w "$threads" -s "$SIZE" -q "$count"
                    -W "$warmup" -i "$INFLIGHT")
                case $workload in
                    async) cmd+=(-y true) ;;
                    batch) cmd+=(-b "$BATCH") ;;
                    oneway) cmd+=(-o true) ;;
                    sync64ab) [ "${cmd[0]}" = sh ] || cmd+=(-A true) ;;
                esac
            fi ;;
    esac
    local status=0 t0
    t0=$(date +%s%N)
    /usr/bin/time -o "$base.time" -f '%U %S %M %e' "${cmd[@]}" >"$base.out" 2>"$base.err" || status=$?
    python3 "$REPORT" row --workload "$workload" --threads "$threads" --pair "$pair" \
        --side "$side" --expect "$count" --warmup "$warmup" --exit "$status" --t0-ns "$t0" --base "$base" \
        --rows "$OUT/rows.tsv"
}

# client SIDE: the client library and version a side runs, for meta.txt.
client() {
    case $1 in
        java) echo "org.apache.rocketmq:rocketmq-client $JAVA_VERSION ($JDK_VERSION, -Xms/-Xmx$JAVA_HEAP), benches/java" ;;
        java49) echo "org.apache.rocketmq:rocketmq-client $(grep -o 'rocketmq-client/[^/]*' "$OUT/classpath-$JAVA49_VERSION.txt" | head -1 | cut -d/ -f2) (same JVM and heap), benches/java" ;;
        rust) echo "$RUST_VERSION (rmq bench, release)" ;;
        rust-async) echo "rocketmq-client-rust $(awk '/^name = "rocketmq-client-rust"$/ { getline; gsub(/[^0-9.A-Za-z-]|version/, ""); print }' "$RUST_ASYNC_DIR/Cargo.lock") (tokio; release), benches/peers/rust-async" ;;
        go) echo "github.com/apache/rocketmq-client-go/v2 $(awk '$1 == "require" && $2 == "github.com/apache/rocketmq-client-go/v2" { print $3 }' benches/peers/go/go.mod) ($(go version | cut -d' ' -f3)), benches/peers/go (JSON remoting headers: the client has no binary header codec to choose)" ;;
    esac
}

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, $(uname -sr)"
    described=
    for side in $SIDES; do
        side=${side%-tls}
        case " $described " in
            *" $side "*) ;;
            *) echo "$side client: $(client "$side")"; described="$described $side" ;;
        esac
    done
    [ -z "$SKIPPED" ] || echo "skipped: ${SKIPPED#; }"
    echo "broker: one, NAMESRV_ADDR=$NAMESRV_ADDR; producers to $TOPIC, consumers drain $BACKLOG (8 queues each)"
    echo "tls: $TLS (sides: $SIDES)"
    echo "parameters: $SIZE-byte bodies, ROCKETMQ headers, no compression; producers $COUNT messages per run (sync1: $COUNT_SYNC1) after a warm-up of $WARMUP (not measured), async $INFLIGHT in flight, batch $BATCH per call on $BATCH_THREADS threads; consumers $CONSUME_COUNT messages per run, push with $CONSUME_THREADS consume threads; $PAIRS rounds per workload ($SIDES, in that order)"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"
echo
python3 "$REPORT" header >"$OUT/rows.tsv"
for workload in $WORKLOADS; do
    for pair in $(seq 1 "$PAIRS"); do
        for side in $SIDES; do
            run "$side" "$workload" "$pair"
        done
    done
done
echo
python3 "$REPORT" summary --out "$OUT"
