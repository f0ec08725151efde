package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// firstAck is the wall clock (µs since the epoch) of the run's first acknowledgement; 0: none.
var firstAck atomic.Int64

// phase holds one phase's results (the warm-up's or the measured one's).
type phase struct {
	rt       []time.Duration // latency of every acknowledged call, slot = completion order
	calls    atomic.Int64
	acked    atomic.Int64
	failures atomic.Int64
	firstErr sync.Once // the first failure goes to stderr, the rest are counted
}

func newPhase(quantity int) *phase {
	return &phase{rt: make([]time.Duration, quantity)}
}

// result records one send call of n messages that took d.
func (p *phase) result(n int, d time.Duration, res *primitive.SendResult, err error) {
	if err == nil && res != nil && res.Status != primitive.SendOK {
		err = fmt.Errorf("send status %d", res.Status)
	}
	if err != nil {
		p.failures.Add(int64(n))
		p.firstErr.Do(func() { fmt.Fprintln(os.Stderr, "send failed:", err) })
		return
	}
	firstAck.CompareAndSwap(0, epochMicros())
	p.rt[p.calls.Add(1)-1] = d
	p.acked.Add(int64(n))
}

type warmupJSON struct {
	Messages  int64   `json:"messages"`
	Failures  int64   `json:"failures"`
	ElapsedMs float64 `json:"elapsedMs"`
}

type latencyJSON struct {
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Calls int64   `json:"calls"`
}

type cpuJSON struct {
	Total float64 `json:"total"`
}

type produceJSON struct {
	Client          string      `json:"client"`
	ClientVersion   string      `json:"clientVersion"`
	Mode            string      `json:"mode"`
	Threads         int         `json:"threads"`
	Size            int         `json:"size"`
	Batch           int         `json:"batch"`
	Warmup          *warmupJSON `json:"warmup,omitempty"`
	Messages        int64       `json:"messages"`
	Failures        int64       `json:"failures"`
	ElapsedMs       float64     `json:"elapsedMs"`
	TPS             float64     `json:"tps"`
	LatencyMs       latencyJSON `json:"latencyMs"`
	MeasuredCPU     cpuJSON     `json:"measuredCpuSeconds"`
	CPUUsPerMsg     *float64    `json:"cpuUsPerMsg"`
	CPU             cpuJSON     `json:"cpuSeconds"`
	FirstAckEpochUs *int64      `json:"firstAckEpochUs"`
}

// produce sends -W warm-up messages, then -q measured ones, as Bench.java does: one producer
// shared by -w goroutines doing sync sends (or batches of -b, or oneway), or with -y true one
// goroutine keeping at most -i async sends outstanding.
func produce(args []string) int {
	fs := newFlags("produce")
	namesrv := fs.String("n", "", "name server address (default $NAMESRV_ADDR)")
	topic := fs.String("t", "BenchmarkTest", "topic")
	threads := fs.Int("w", 64, "sending goroutines")
	size := fs.Int("s", 128, "body size in bytes")
	quantity := fs.Int("q", 0, "measured messages")
	warmup := fs.Int("W", 0, "warm-up messages")
	inflight := fs.Int("i", 1024, "async window")
	asyncFlag := fs.String("y", "false", "async sends")
	onewayFlag := fs.String("o", "false", "oneway sends")
	batch := fs.Int("b", 1, "messages per sync call")
	parse(fs, args)
	async, oneway := parseBool(*asyncFlag), parseBool(*onewayFlag)
	addr := namesrvOrEnv(*namesrv)
	if *quantity <= 0 || *warmup < 0 || addr == "" || *batch < 1 || *threads < 1 || *inflight < 1 ||
		((async || oneway) && *batch > 1) || (async && oneway) {
		usage()
	}
	if async {
		*threads = 1
	}
	mode := "sync"
	if async {
		mode = "async"
	} else if oneway {
		mode = "oneway"
	}
	version := clientVersion()
	fmt.Printf("topic: %s threads: %d size: %d count: %d warmup: %d mode: %s batch: %d clientVersion: %s\n",
		*topic, *threads, *size, *quantity, *warmup, mode, *batch, version)

	p, err := rocketmq.NewProducer(
		producer.WithNameServer(primitive.NamesrvAddr{addr}),
		producer.WithGroupName("benchmark_producer"),
		producer.WithInstanceName(strconv.FormatInt(time.Now().UnixNano(), 10)),
		// Java's retryTimesWhenSendFailed; async sends are not retried (as in Java).
		producer.WithRetry(2),
		producer.WithCompressMsgBodyOverHowmuch(math.MaxInt32),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "new producer:", err)
		return 1
	}
	if err := p.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start producer:", err)
		return 1
	}

	body := randomBody(*size)
	warm, measured := newPhase(*warmup), newPhase(*quantity)
	var markAt time.Time
	var markCPU float64
	begin := time.Now()
	mark := func() { markAt, markCPU = time.Now(), cpuSeconds() }
	if *warmup == 0 {
		mark()
	}
	if async {
		window := make(chan struct{}, *inflight)
		if *warmup > 0 {
			sendAsync(p, *topic, body, *warmup, window, warm)
			mark()
		}
		sendAsync(p, *topic, body, *quantity, window, measured)
	} else {
		// Every goroutine finishes its warm-up share, then the readings are taken, then all
		// go on (Bench.java's barrier).
		var warmed, done sync.WaitGroup
		start := make(chan struct{})
		for w := range *threads {
			mine := split(*quantity, *threads, w)
			mineWarm := split(*warmup, *threads, w)
			warmed.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				send(p, *topic, body, *batch, oneway, mineWarm, warm)
				warmed.Done()
				<-start
				send(p, *topic, body, *batch, oneway, mine, measured)
			}()
		}
		warmed.Wait()
		if *warmup > 0 {
			mark()
		}
		close(start)
		done.Wait()
	}
	end := time.Now()
	cpuEnd := cpuSeconds()
	if err := p.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown producer:", err)
	}

	n, calls := measured.acked.Load(), measured.calls.Load()
	lat := slices.Clone(measured.rt[:calls])
	slices.Sort(lat)
	elapsed := end.Sub(markAt)
	out := produceJSON{
		Client: "go", ClientVersion: version, Mode: mode, Threads: *threads, Size: *size, Batch: *batch,
		Messages: n, Failures: measured.failures.Load(),
		ElapsedMs: ms(elapsed), TPS: float64(n) / elapsed.Seconds(),
		LatencyMs:   latencyJSON{P50: ms(pct(lat, 0.50)), P99: ms(pct(lat, 0.99)), Calls: calls},
		MeasuredCPU: cpuJSON{cpuEnd - markCPU},
		CPU:         cpuJSON{cpuEnd},
	}
	if calls > 0 {
		out.LatencyMs.Max = ms(lat[calls-1])
	}
	if n > 0 {
		perMsg := (cpuEnd - markCPU) * 1e6 / float64(n)
		out.CPUUsPerMsg = &perMsg
	}
	if *warmup > 0 {
		out.Warmup = &warmupJSON{warm.acked.Load(), warm.failures.Load(), ms(markAt.Sub(begin))}
	}
	if first := firstAck.Load(); first != 0 {
		out.FirstAckEpochUs = &first
	}
	fmt.Printf("[Complete] sent %d (%d failed) in %.0f ms: %.0f msg/s, p50 %.3f p99 %.3f max %.3f ms; warm-up %d acked, %d failed\n",
		n, out.Failures, out.ElapsedMs, out.TPS, out.LatencyMs.P50, out.LatencyMs.P99, out.LatencyMs.Max,
		warm.acked.Load(), warm.failures.Load())
	emit(out)
	if n == int64(*quantity) && warm.acked.Load() == int64(*warmup) {
		return 0
	}
	return 1
}

// send does quantity sync sends (oneway, or batches of batch) one call at a time.
func send(p rocketmq.Producer, topic string, body []byte, batch int, oneway bool, quantity int, ph *phase) {
	ctx := context.Background()
	for left := quantity; left > 0; {
		n := min(left, batch)
		left -= n
		msgs := make([]*primitive.Message, n)
		for i := range msgs {
			msgs[i] = primitive.NewMessage(topic, body)
		}
		t0 := time.Now()
		var res *primitive.SendResult
		var err error
		if oneway {
			err = p.SendOneWay(ctx, msgs...)
		} else {
			res, err = p.SendSync(ctx, msgs...)
		}
		ph.result(n, time.Since(t0), res, err)
	}
}

// sendAsync does quantity async sends with at most cap(window) outstanding and returns once
// every callback ran (or after two minutes, as Bench.java).
func sendAsync(p rocketmq.Producer, topic string, body []byte, quantity int, window chan struct{}, ph *phase) {
	var wg sync.WaitGroup
	for range quantity {
		window <- struct{}{}
		wg.Add(1)
		t0 := time.Now()
		err := p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
			ph.result(1, time.Since(t0), res, err)
			<-window
			wg.Done()
		}, primitive.NewMessage(topic, body))
		if err != nil {
			// Refused before it was sent: the callback does not run.
			ph.result(1, 0, nil, err)
			<-window
			wg.Done()
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "async callbacks missing after 120 s")
	}
}

// split is goroutine w's share of total: an even split, the remainder to goroutine 0.
func split(total, threads, w int) int {
	if w == 0 {
		return total/threads + total%threads
	}
	return total / threads
}

func randomBody(size int) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	body := make([]byte, size)
	for i := range body {
		body[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return body
}

// pct is the nearest-rank percentile q of sorted latencies.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
