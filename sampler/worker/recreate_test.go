package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// TestPoolRecoversWhenTheConsumerIsRecreated: an operator deletes the scoring consumer and a
// ragwatch (re)creates it (queue.Setup, as every start does). The pool's pulls fail while the
// consumer is gone and succeed again after: what is queued after is scored.
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
