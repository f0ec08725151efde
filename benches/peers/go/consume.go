package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

type consumeJSON struct {
	Client              string  `json:"client"`
	ClientVersion       string  `json:"clientVersion"`
	Mode                string  `json:"mode"`
	Topic               string  `json:"topic"`
	Group               string  `json:"group"`
	Threads             int     `json:"threads"`
	Messages            int64   `json:"messages"`
	Deliveries          int64   `json:"deliveries"`
	Duplicates          int64   `json:"duplicates"`
	ElapsedMs           float64 `json:"elapsedMs"`
	TPS                 float64 `json:"tps"`
	FirstMessageEpochUs *int64  `json:"firstMessageEpochUs"`
}

// consume drains -t from its first offset with the new group -g, as Consume.java does: a push
// consumer with -w consume goroutines, or a pull consumer's Poll loop (litepull), until -q
// distinct messages, told apart by (broker, queue, offset), or the -T timeout.
func consume(args []string) int {
	fs := newFlags("consume")
	namesrv := fs.String("n", "", "name server address (default $NAMESRV_ADDR)")
	topic := fs.String("t", "BenchmarkTest", "topic")
	group := fs.String("g", "", "consumer group (new, so that it starts at the first offset)")
	mode := fs.String("m", "push", "push or litepull")
	threads := fs.Int("w", 20, "consume goroutines (push)")
	count := fs.Int64("q", 0, "distinct messages to consume")
	timeout := fs.Int("T", 60, "timeout in seconds, from the consumer's creation")
	parse(fs, args)
	addr := namesrvOrEnv(*namesrv)
	push := *mode == "push"
	if *count <= 0 || addr == "" || *group == "" || *threads < 1 || !(push || *mode == "litepull") {
		usage()
	}
	if !push {
		*threads = 1
	}
	version := clientVersion()
	fmt.Printf("topic: %s group: %s mode: %s threads: %d count: %d clientVersion: %s\n",
		*topic, *group, *mode, *threads, *count, version)

	t := newTally(*count)
	begin := time.Now()
	deadline := begin.Add(time.Duration(*timeout) * time.Second)
	opts := []consumer.Option{
		consumer.WithNameServer(primitive.NamesrvAddr{addr}),
		consumer.WithGroupName(*group),
		consumer.WithInstance(strconv.FormatInt(time.Now().UnixNano(), 10)),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}
	all := consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	modeName := "concurrently"
	var err error
	if push {
		err = drainPush(*topic, all, append(opts, consumer.WithConsumeGoroutineNums(*threads)), t, deadline)
	} else {
		modeName = "lite-pull"
		// The pull consumer leaves the pull batch at 0 (the broker then returns one message
		// per pull); 10 is what Java's DefaultLitePullConsumer and rmq's lite pull ask for.
		err = drainPoll(*topic, all, append(opts, consumer.WithPullBatchSize(10)), t, deadline)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, *mode, "consumer:", err)
	}

	t.mu.Lock()
	messages, deliveries, duplicates, last, first := min(t.distinct, *count), t.deliveries, t.duplicates, t.last, t.firstUs
	t.mu.Unlock()
	elapsed := time.Duration(*timeout) * time.Second
	if !last.IsZero() {
		elapsed = last.Sub(begin)
	}
	out := consumeJSON{
		Client: "go", ClientVersion: version, Mode: modeName, Topic: *topic, Group: *group, Threads: *threads,
		Messages: messages, Deliveries: deliveries, Duplicates: duplicates,
		ElapsedMs: ms(elapsed), TPS: float64(messages) / max(elapsed.Seconds(), 1e-9),
	}
	if first != 0 {
		out.FirstMessageEpochUs = &first
	}
	fmt.Printf("%d messages consumed (%d duplicates) in %.2f s: %.0f msg/s\n",
		messages, duplicates, elapsed.Seconds(), out.TPS)
	emit(out)
	if messages == *count {
		return 0
	}
	return 1
}

// drainPush runs a push consumer until the tally is complete or the deadline passes.
func drainPush(topic string, sel consumer.MessageSelector, opts []consumer.Option, t *tally, deadline time.Time) error {
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		return err
	}
	err = c.Subscribe(topic, sel, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		t.record(msgs)
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	select {
	case <-t.done:
	case <-time.After(time.Until(deadline)):
	}
	return c.Shutdown()
}

// drainPoll runs a pull consumer's Poll loop until the tally is complete or the deadline passes.
func drainPoll(topic string, sel consumer.MessageSelector, opts []consumer.Option, t *tally, deadline time.Time) error {
	c, err := rocketmq.NewPullConsumer(opts...)
	if err != nil {
		return err
	}
	if err := c.Subscribe(topic, sel); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	ctx := context.Background()
	for !t.complete() {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		// At most half a second per poll, so that the count is checked often.
		cr, err := c.Poll(ctx, min(500*time.Millisecond, left))
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "poll:", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.record(cr.GetMsgList())
		c.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	return c.Shutdown()
}

// tally counts distinct messages by (broker, queue, offset) and redeliveries.
type tally struct {
	count int64
	done  chan struct{} // closed at the count-th distinct message

	mu         sync.Mutex
	seen       map[string]map[int]*offsetSet
	distinct   int64
	deliveries int64
	duplicates int64
	firstUs    int64
	last       time.Time
}

func newTally(count int64) *tally {
	return &tally{count: count, done: make(chan struct{}), seen: map[string]map[int]*offsetSet{}}
}

func (t *tally) complete() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// record counts msgs; messages beyond the count are acknowledged but not counted.
func (t *tally) record(msgs []*primitive.MessageExt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		t.deliveries++
		broker, queue := "", 0
		if m.Queue != nil {
			broker, queue = m.Queue.BrokerName, m.Queue.QueueId
		}
		queues := t.seen[broker]
		if queues == nil {
			queues = map[int]*offsetSet{}
			t.seen[broker] = queues
		}
		set := queues[queue]
		if set == nil {
			set = &offsetSet{}
			queues[queue] = set
		}
		if !set.add(m.QueueOffset) {
			t.duplicates++
			continue
		}
		t.distinct++
		if t.distinct > t.count {
			continue
		}
		if t.firstUs == 0 {
			t.firstUs = epochMicros()
		}
		t.last = time.Now()
		if t.distinct == t.count {
			close(t.done)
		}
	}
}

// offsetSet is a queue's offsets as a bitmap over the range seen so far (offsets are dense: a
// million take 125 KiB), as Consume.java and `rmq bench consume` keep them.
type offsetSet struct {
	base  int64 // offset/64 of words[0]
	words []uint64
}

// add adds offset and reports whether it was new.
func (s *offsetSet) add(offset int64) bool {
	if offset < 0 {
		return false
	}
	word := offset / 64
	switch {
	case s.words == nil:
		s.base, s.words = word, make([]uint64, 16)
	case word < s.base:
		// Consume goroutines finish out of order: an earlier offset may come later.
		s.words = append(make([]uint64, s.base-word), s.words...)
		s.base = word
	}
	i := int(word - s.base)
	if i >= len(s.words) {
		s.words = append(s.words, make([]uint64, max(i+1, 2*len(s.words))-len(s.words))...)
	}
	bit := uint64(1) << (offset % 64)
	fresh := s.words[i]&bit == 0
	s.words[i] |= bit
	return fresh
}
