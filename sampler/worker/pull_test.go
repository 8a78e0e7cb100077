package worker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// recordNumber is the n of enqueue's n-th record (trace id n in hex).
func recordNumber(t *testing.T, r *record.Record) int {
	n, err := strconv.ParseInt(r.TraceID, 16, 64)
	if err != nil {
		t.Error(err)
	}
	return int(n)
}

// ackPending is the consumer's records delivered and not yet acknowledged.
func ackPending(t *testing.T, ctx context.Context, p *Pool) int {
	t.Helper()
	cons, err := p.js.Consumer(ctx, p.cfg.Queue.Stream, p.cfg.Queue.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 {
		t.Errorf("%d records redelivered", info.NumRedelivered)
	}
	return info.NumAckPending
}

// TestPulledAheadRecordsAreNotRedelivered: two workers; record 2 takes 50 ms, the others
// 1.2 s. When record 2 is done its worker pulls records 3 and 4 and takes 3, so 4 waits for the
// other worker, about 1.15 s, and is then scored for 1.2 s: past its ack_wait (2 s) counted from
// its delivery. The fresh ack_wait it gets when taken (it was stored more than ack_wait -
// score_timeout = 0.5 s before) keeps it from coming back while it is scored: each record is
// scored once and none is redelivered.
func TestPulledAheadRecordsAreNotRedelivered(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	rt.ScoreTimeout = 1500 * time.Millisecond
	rt.Queue.AckWait = 2 * time.Second
	keys := enqueue(t, js, rt.Queue, 4, 1)
	var mu sync.Mutex
	calls := map[int]int{}
	slow := funcScorer{name: "test", score: func(ctx context.Context, r *record.Record) ([]score.Result, error) {
		n := recordNumber(t, r)
		mu.Lock()
		calls[n]++
		mu.Unlock()
		d := 1200 * time.Millisecond
		if n == 2 {
			d = 50 * time.Millisecond
		}
		time.Sleep(d)
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	tl := newTally()
	p := New(js, rt, []score.Scorer{slow}, tl, testOptions(prometheus.NewRegistry()))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "four records scored", func() bool { return tl.len() == 4 })
	time.Sleep(rt.Queue.AckWait) // a redelivery would have come by now
	if n := ackPending(t, context.Background(), p); n != 0 {
		t.Errorf("%d records not acknowledged", n)
	}
	shutdown(t, p)
	assertOnce(t, keys, tl)
	mu.Lock()
	defer mu.Unlock()
	for n := 1; n <= 4; n++ {
		if calls[n] != 1 {
			t.Errorf("record %d scored %d times, want 1", n, calls[n])
		}
	}
}

// TestShutdownHandsPulledAheadRecordsOn: two workers hang on records 1 and 3 while record 4,
// pulled with 3, waits in the client. A stopping pool hands it on, like the two it was
// scoring, to the next worker at once, not after ack_wait (30 s here).
func TestShutdownHandsPulledAheadRecordsOn(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	rt.ScoreTimeout = 20 * time.Second
	rt.Queue.AckWait = 30 * time.Second
	keys := enqueue(t, js, rt.Queue, 10, 1)

	var hanging sync.WaitGroup
	hanging.Add(2)
	hang := funcScorer{name: "test", score: func(ctx context.Context, r *record.Record) ([]score.Result, error) {
		if n := recordNumber(t, r); n == 1 || n == 3 {
			hanging.Done()
			<-ctx.Done() // stuck until the pool stops
			return nil, ctx.Err()
		}
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	_, jsA := testutil.Connect(t, s)
	before := newTally()
	a := New(jsA, rt, []score.Scorer{hang}, before, testOptions(prometheus.NewRegistry()))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hanging.Wait()
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "record 4 pulled ahead", func() bool {
		return ackPending(t, context.Background(), a) == 3
	})
	if before.len() != 1 {
		t.Fatalf("%d records scored before the stop, want 1 (record 2)", before.len())
	}
	shutdown(t, a)

	after := newTally()
	b := New(js, rt, []score.Scorer{okScorer}, after, testOptions(prometheus.NewRegistry()))
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the other nine scored well before ack_wait", func() bool { return after.len() == 9 })
	shutdown(t, b)
	assertOnce(t, keys, before, after)
}

// TestPoolRecoversWhenTheConsumerIsRecreated: an operator deletes the scoring consumer and a
// ragwatch (re)creates it (queue.Setup, as every start does). The pool's subscription ended
// with the old consumer; the pool subscribes again and scores what is queued after.
func TestPoolRecoversWhenTheConsumerIsRecreated(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	first := enqueue(t, js, rt.Queue, 5, 1)
	tl := newTally()
	p := New(js, rt, []score.Scorer{okScorer}, tl, testOptions(prometheus.NewRegistry()))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the first five scored", func() bool { return tl.len() == 5 })
	if err := js.DeleteConsumer(context.Background(), rt.Queue.Stream, rt.Queue.Consumer); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, rt.Queue, 1); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(js, rt.Queue, 5, prometheus.NewRegistry(), quiet)
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var second []string
	for i := 6; i <= 10; i++ {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i), Service: "chat", Query: "q", Answer: "a",
			Sampling: &record.Sampling{Probability: 1, Reason: "rate"}}
		second = append(second, r.Key())
		if err := pub.Offer(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the next five scored", func() bool { return tl.len() == 10 })
	shutdown(t, p)
	assertOnce(t, append(first, second...), tl)
}
