#!/usr/bin/env bash
# The floor (benches/floor.rs) against `rmq bench` and the best other client, alternating
# per workload and round: the floor, BEFORE (an `rmq` binary of an earlier build, to
# compare a change; default: this build again), this build's release `rmq`, then the
# workload's best peer of the five-way run (BENCHMARKS.md, lowest CPU per message):
# java49 for sync1, async and the push drain, rust-async for sync8, sync64, batch64 and
# the lite pull drain. Workloads sync1, sync8, sync64, async (and batch64, 64 threads
# sending BATCH (16) messages per SEND_BATCH_MESSAGE, when asked), then the drains of DRAIN_COUNT
# messages the floor filled: the floor's decoding `drain` and its size-stepping
# `drain-sizes`, then lite pull and push.
# Prints lines "r<round> <floor|before|after|peer:NAME> <workload> <json>";
# benches/floor_report.py turns them into medians, side by side with ratios.
#
#   cargo build --release --features cli --bin rmq && cargo bench --no-run --bench floor --features cli
#   NAMESRV_ADDR=... BEFORE=/tmp/rmq-old ROUNDS=3 benches/floor-compare.sh > out.txt
#   python3 benches/floor_report.py out.txt
#
# Environment: ROUNDS (3), DRAIN_COUNT (1000000: start-up is noise against it; the floor
# and `rmq bench consume`'s drain figures count from the first pull / first message
# anyway), SYNC1_COUNT (10000), COUNT (100000, the other producer workloads, in messages;
# warm-ups are half), BATCH (16, messages per call in batch64), PEERS (workload=side pairs overriding the best peer, e.g.
# "drain-lite=java49 sync8=none"; sides java, java49, go, rust-async, none),
# JAVA_VERSION (5.3.3), JAVA49_VERSION (4.9.8), JAVA_HEAP (512m), WORKLOADS (all of the above).
# Peers follow the peer contract of benches/compare-java.sh (Bench.java / Consume.java
# flags) and are built here as that script builds them; a consumer peer's CPU and RSS are
# its whole process's (GNU time), JVM start included, and its TPS counts from its start.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
NS=${NAMESRV_ADDR:?set NAMESRV_ADDR (rmq cluster start prints one)}
ROUNDS=${ROUNDS:-3}
DRAIN_COUNT=${DRAIN_COUNT:-1000000}
SYNC1_COUNT=${SYNC1_COUNT:-10000}
COUNT=${COUNT:-100000}
BATCH=${BATCH:-16}
JAVA49_VERSION=${JAVA49_VERSION:-4.9.8}
JAVA_HEAP=${JAVA_HEAP:-512m}
WORKLOADS=${WORKLOADS:-"sync1 sync8 sync64 async drain"}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
after=$TARGET/release/rmq
before=${BEFORE:-$after}
floor=$(ls -t "$TARGET"/release/deps/floor-* | grep -v '\.d$' | head -1)
topic=FloorCmp_$$
$after topic create "$topic" --queues 8 -n "$NS" >/dev/null
sleep 2

# The best peer per workload (five-way run, CPU per message), then PEERS' overrides.
declare -A peer=([sync1]=java49 [sync8]=rust-async [sync64]=rust-async [async]=java49
    [batch64]=rust-async [drain-push]=java49 [drain-lite]=rust-async)
for kv in ${PEERS:-}; do peer[${kv%%=*}]=${kv#*=}; done
declare -A used=()
for w in "${!peer[@]}"; do [ "${peer[$w]}" = none ] || used[${peer[$w]}]=1; done

# Build the peers in use (as benches/compare-java.sh does); a peer that cannot be built
# is left out with a message.
JAVA_CP= JAVA49_CP=
GO_BENCH=$TARGET/peers/go-bench
RUST_ASYNC_BENCH=$TARGET/peers/rust-async/release/rust-async-bench
java_cp() { # VERSION -> the compiled bench classes and the client's classpath (BrokerConfig,
    # which needs 5.x classes, is compare-java.sh's alone)
    local out=$TARGET/peers/java-$1
    mkdir -p "$out"
    (cd benches/java && mvn -q dependency:build-classpath -Drocketmq.version="$1" \
        -Dmdep.outputFile="$out/classpath.txt") >&2 &&
        javac -nowarn -d "$out/classes" -cp "$(cat "$out/classpath.txt")" \
            benches/java/src/main/java/rmqblocking/bench/{Bench,Consume}.java >&2 &&
        echo "$out/classes:$(cat "$out/classpath.txt")"
}
for side in "${!used[@]}"; do
    case $side in
        java) JAVA_CP=$(java_cp "${JAVA_VERSION:-5.3.3}") || JAVA_CP= ;;
        java49) JAVA49_CP=$(java_cp "$JAVA49_VERSION") || JAVA49_CP= ;;
        go) (cd benches/peers/go && GOFLAGS="-mod=readonly -buildvcs=false" \
            go build -o "$GO_BENCH" .) >&2 || rm -f "$GO_BENCH" ;;
        rust-async) cargo build --release --quiet --locked \
            --manifest-path benches/peers/rust-async/Cargo.toml \
            --target-dir "$TARGET/peers/rust-async" >&2 || rm -f "$RUST_ASYNC_BENCH" ;;
    esac
done
peer_cmd() { # SIDE -> the peer's command, or nothing when it is not there
    case $1 in
        java) [ -n "$JAVA_CP" ] && echo "java -Xms$JAVA_HEAP -Xmx$JAVA_HEAP -cp $JAVA_CP" ;;
        java49) [ -n "$JAVA49_CP" ] && echo "java -Xms$JAVA_HEAP -Xmx$JAVA_HEAP -cp $JAVA49_CP" ;;
        go) [ -x "$GO_BENCH" ] && echo "$GO_BENCH" ;;
        rust-async) [ -x "$RUST_ASYNC_BENCH" ] && echo "$RUST_ASYNC_BENCH" ;;
    esac
}
# peer_run ROUND WORKLOAD VERB PEER-ARGS...: one peer run under GNU time; prints its line
# with the process's CPU and peak RSS added to the JSON.
peer_run() {
    local r=$1 w=$2 verb=$3 side=${peer[$2]:-none} cmd
    shift 3
    [ "$side" = none ] && return
    cmd=$(peer_cmd "$side")
    if [ -z "$cmd" ]; then
        echo "r$r peer:$side $w {\"unsupported\": \"$side is not built\"}"
        return
    fi
    case $side in
        java*) [ "$verb" = produce ] && cmd+=" rmqblocking.bench.Bench" || cmd+=" rmqblocking.bench.Consume" ;;
        *) cmd+=" $verb" ;;
    esac
    local t
    t=$(mktemp)
    # shellcheck disable=SC2086 # the command is words on purpose
    local line
    line=$(/usr/bin/time -f '%U %S %M' -o "$t" $cmd -n "$NS" "$@" 2>/dev/null | tail -1)
    echo "r$r peer:$side $w $(python3 -c '
import json, sys
line, t = sys.argv[1], open(sys.argv[2]).read().splitlines()
# GNU time writes "Command exited with non-zero status N" before its figures on a failure.
t = t[-1].split() if t else []
try:
    j = json.loads(line)
except ValueError:
    print(json.dumps({"failed": "no JSON line", "output": line})); sys.exit()
if len(t) >= 3:
    j["processCpuSeconds"] = float(t[0]) + float(t[1])
    j["processPeakRssKiB"] = int(t[2])
print(json.dumps(j))' "$line" "$t")"
    rm -f "$t"
}
args() { # workload -> rmq bench args
  case $1 in
    sync1) echo "--mode sync --threads 1 --count $SYNC1_COUNT --warmup $((SYNC1_COUNT / 2))" ;;
    sync8) echo "--mode sync --threads 8 --count $COUNT --warmup $((COUNT / 2))" ;;
    sync64) echo "--mode sync --threads 64 --count $COUNT --warmup $((COUNT / 2))" ;;
    batch64) echo "--mode sync --threads 64 --batch $BATCH --count $COUNT --warmup $((COUNT / 2))" ;;
    async) echo "--mode async --inflight 1024 --count $COUNT --warmup $((COUNT / 2))" ;;
  esac
}
peer_args() { # workload -> the peer contract's produce flags
  case $1 in
    sync1) echo "-w 1 -q $SYNC1_COUNT -W $((SYNC1_COUNT / 2))" ;;
    sync8) echo "-w 8 -q $COUNT -W $((COUNT / 2))" ;;
    sync64) echo "-w 64 -q $COUNT -W $((COUNT / 2))" ;;
    batch64) echo "-w 64 -q $COUNT -W $((COUNT / 2)) -b $BATCH" ;;
    async) echo "-w 1 -q $COUNT -W $((COUNT / 2)) -y true" ;;
  esac
}
order() { # round -> the order of the two builds in it
  if [ $(($1 % 2)) = 1 ]; then echo "before after"; else echo "after before"; fi
}
for r in $(seq "$ROUNDS"); do
  for w in $WORKLOADS; do
    [ "$w" = drain ] && continue
    c=$COUNT; [ "$w" = sync1 ] && c=$SYNC1_COUNT
    echo "r$r floor $w $(NAMESRV_ADDR=$NS FLOOR_COUNT=$c FLOOR_BATCH=$BATCH $floor "$w" 2>/dev/null | tail -1)"
    # Before and after swap places every round: a run can pay for the broker's work
    # after the one before it (a fixed order once read 2 µs against "after" at 64
    # senders, where runs in A-B-B-A order found none).
    for who in $(order "$r"); do
      bin=$before; [ "$who" = after ] && bin=$after
      echo "r$r $who $w $($bin bench produce -n "$NS" --topic "$topic" --size 1024 $(args "$w") 2>/dev/null | tail -1)"
    done
    # shellcheck disable=SC2046 # the flags are words on purpose
    peer_run "$r" "$w" produce -t "$topic" -s 1024 -i 1024 $(peer_args "$w")
  done
  case " $WORKLOADS " in *" drain "*) ;; *) continue ;; esac
  out=$(NAMESRV_ADDR=$NS FLOOR_COUNT=$DRAIN_COUNT $floor drain drain-sizes 2>/dev/null)
  for fw in drain drain-sizes; do
    echo "r$r floor $fw $(echo "$out" | grep "\"workload\":\"$fw\"" | tail -1)"
  done
  dt=$(echo "$out" | grep '"workload":"drain"' | tail -1 \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["topic"])')
  for who in $(order "$r"); do
    bin=$before; [ "$who" = after ] && bin=$after
    echo "r$r $who drain-lite $($bin bench consume -n "$NS" --topic "$dt" --group "lp_${who}_$r$$" --count "$DRAIN_COUNT" --timeout 600 --lite-pull 2>/dev/null | tail -1)"
    echo "r$r $who drain-push $($bin bench consume -n "$NS" --topic "$dt" --group "push_${who}_$r$$" --count "$DRAIN_COUNT" --timeout 600 2>/dev/null | tail -1)"
  done
  peer_run "$r" drain-lite consume -t "$dt" -g "lp_peer_$r$$" -m litepull -w 1 -q "$DRAIN_COUNT" -T 600
  peer_run "$r" drain-push consume -t "$dt" -g "push_peer_$r$$" -m push -w 20 -q "$DRAIN_COUNT" -T 600
done
