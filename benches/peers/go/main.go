// Command go-bench is the Go side (github.com/apache/rocketmq-client-go/v2) of
// benches/compare-java.sh. It follows the peer contract of issue 15, the same flags and
// semantics as benches/java (Bench.java, Consume.java):
//
//	go-bench produce -n NAMESRV -t TOPIC -w THREADS -s SIZE -q COUNT -W WARMUP -i INFLIGHT \
//	                 [-y true (async)] [-b BATCH] [-o true (oneway)]
//	go-bench consume -n NAMESRV -t TOPIC -g GROUP -m push|litepull -w THREADS -q COUNT -T TIMEOUT_S
//
// The last line of stdout is one JSON object. Exit status: 0 when every message (warm-up
// included) was acknowledged or COUNT distinct messages were consumed, 1 otherwise, 2 on a
// usage error, 3 for a capability the client does not have (with {"unsupported": ...}).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const clientModule = "github.com/apache/rocketmq-client-go/v2"

func main() {
	// The client logs to stderr at info level by default; the run's output is the JSON line.
	rlog.SetLogLevel("error")
	if len(os.Args) < 2 {
		usage()
	}
	var code int
	switch os.Args[1] {
	case "produce":
		code = produce(os.Args[2:])
	case "consume":
		code = consume(os.Args[2:])
	default:
		usage()
	}
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go-bench produce -n NAMESRV -t TOPIC -w THREADS -s SIZE -q COUNT -W WARMUP -i INFLIGHT [-y true] [-b BATCH] [-o true]")
	fmt.Fprintln(os.Stderr, "       go-bench consume -n NAMESRV -t TOPIC -g GROUP -m push|litepull -w THREADS -q COUNT -T TIMEOUT_S")
	os.Exit(2)
}

// newFlags is a flag set whose parse errors end the process with the usage status.
func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ExitOnError)
}

// parse parses args, exiting with status 2 on an error; "-y true" style booleans are strings
// because the flag package wants "-y=true" for bool flags.
func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		usage()
	}
}

func parseBool(s string) bool {
	b, err := strconv.ParseBool(s)
	if err != nil {
		usage()
	}
	return b
}

// namesrvOrEnv is the -n value, or NAMESRV_ADDR as the Java programs fall back to.
func namesrvOrEnv(n string) string {
	if n == "" {
		return os.Getenv("NAMESRV_ADDR")
	}
	return n
}

// clientVersion is the version of the client module this binary was built with (go.mod).
func clientVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == clientModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// cpuSeconds is this process's user+sys CPU time so far, as getrusage(RUSAGE_SELF) counts it.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// epochMicros is the wall clock in µs since the epoch, as the harness subtracts it.
func epochMicros() int64 {
	return time.Now().UnixMicro()
}

// emit prints v as the run's last line of stdout.
func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "encoding the summary:", err)
		os.Exit(1)
	}
	fmt.Println(string(line))
}

// unsupported prints the contract's line for a capability the client lacks; exit status 3.
func unsupported(what string) int {
	emit(map[string]string{"client": "go", "unsupported": what})
	return 3
}
