package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
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
	second := publish(t, js, rt.Queue, 5, 5, 1) // queue.Setup creates the consumer again
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the next five scored", func() bool { return tl.len() == 10 })
	shutdown(t, p)
	assertOnce(t, append(first, second...), tl)
}
