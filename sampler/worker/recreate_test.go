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
//
// What is guaranteed is at-least-once, not exactly-once: the worker hands a record's results
// on before it acks the message (worker.handleRecords), so a record whose ack the server had
// not recorded when the consumer was deleted is delivered again by the new consumer and scored
// twice (score consumers dedup by trace id + metric). What the server had acked is gone from
// the work queue and is never scored again. The test therefore deletes the consumer only once
// the first five acks are recorded (the stream is empty), and then every record is scored
// exactly once. Deleting it as soon as the results arrived raced the acks: under CPU load one
// of the first five was scored twice in 15 of 100 runs.
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
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the first five acked (the work queue dropped them)",
		func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	if err := js.DeleteConsumer(context.Background(), rt.Queue.Stream, rt.Queue.Consumer); err != nil {
		t.Fatal(err)
	}
	second := publish(t, js, rt.Queue, 5, 5, 1) // queue.Setup creates the consumer again
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the next five scored", func() bool { return tl.len() == 10 })
	shutdown(t, p)
	assertOnce(t, append(first, second...), tl)
}
