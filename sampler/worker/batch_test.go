package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// batchRuntime is testRuntime with the publisher's batches on: up to size records a message.
func batchRuntime(workers, size int) config.ScoringRuntime {
	rt := testRuntime(workers)
	rt.Queue.BatchRecords = size
	return rt
}

// enqueueBatches offers n records to the real publisher before it starts, so that it finds them
// buffered and publishes full batches, and checks the stream holds ceil(n/size) messages.
func enqueueBatches(t *testing.T, js jetstream.JetStream, cfg config.ScoringQueue, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(js, cfg, n, prometheus.NewRegistry(), quiet)
	keys := make([]string, n)
	for i := range keys {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "q", Answer: "a",
			Sampling: &record.Sampling{Probability: 0.5, Reason: "rate"}}
		keys[i] = r.Key()
		if err := pub.Offer(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	size := cfg.BatchRecords
	if got, want := streamMsgs(js, cfg.Stream), uint64((n+size-1)/size); got != want {
		t.Fatalf("%d records in %d messages, want %d", n, got, want)
	}
	return keys
}

// startPool starts a pool of rt scoring with sc into sink; its metrics are on a registry of
// their own.
func startPool(t *testing.T, js jetstream.JetStream, rt config.ScoringRuntime, sc score.Scorer, sink score.Consumer) *Pool {
	t.Helper()
	p := New(js, rt, []score.Scorer{sc}, sink, testOptions(prometheus.NewRegistry()))
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// drain waits until the stream holds nothing, then stops p.
func drain(t *testing.T, js jetstream.JetStream, rt config.ScoringRuntime, p *Pool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the queue to empty", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	shutdown(t, p)
}

// attemptsScorer fails a record's first fails[trace id] attempts (all of them for -1) and
// records when each attempt started.
type attemptsScorer struct {
	mu    sync.Mutex
	fails map[string]int
	at    map[string][]time.Time
}

func newAttemptsScorer(fails map[string]int) *attemptsScorer {
	return &attemptsScorer{fails: fails, at: map[string][]time.Time{}}
}

func (s *attemptsScorer) Name() string { return "test" }

func (s *attemptsScorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[r.TraceID] = append(s.at[r.TraceID], time.Now())
	if f, ok := s.fails[r.TraceID]; ok && (f < 0 || len(s.at[r.TraceID]) <= f) {
		r.Query = "changed by the attempt" // a dead letter is the record as queued
		return nil, errBackend
	}
	return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
}

func (s *attemptsScorer) attempts(traceID string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[traceID]...)
}

func TestBatchRecordsAreScoredOnceEach(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(2, 32)
	keys := enqueueBatches(t, js, rt.Queue, 100) // 4 messages: 32, 32, 32, 4
	tl := newTally()
	p := startPool(t, js, rt, okScorer, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return tl.len() == 100 })
	drain(t, js, rt, p)
	assertOnce(t, keys, tl)
}

// Records of a batch that fail are retried alone, after the backoff delay, with the attempts
// they had; the records scored are not scored again.
func TestBatchRetriesOnlyItsFailedRecords(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(1, 10)
	rt.Queue.Backoff = []time.Duration{300 * time.Millisecond}
	keys := enqueueBatches(t, js, rt.Queue, 10)
	flaky := []string{keys[3], keys[7]} // fail twice, then succeed on the third (last) attempt
	sc := newAttemptsScorer(map[string]int{flaky[0]: 2, flaky[1]: 2})
	tl := newTally()
	p := startPool(t, js, rt, sc, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return tl.len() == 10 })
	drain(t, js, rt, p)
	assertOnce(t, keys, tl)
	for _, k := range keys {
		at := sc.attempts(k)
		want := 1
		if k == flaky[0] || k == flaky[1] {
			want = 3
		}
		if len(at) != want {
			t.Fatalf("record %s attempted %d times, want %d", k, len(at), want)
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 300*time.Millisecond {
				t.Fatalf("record %s: attempt %d %v after the one before, inside the 300ms backoff", k, i+1, gap)
			}
		}
	}
	// The batch, then its two failed records published again once: when both fail again, that
	// batch of two fails whole and is nak'ed, not published again.
	st, err := js.Stream(context.Background(), rt.Queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 2 {
		t.Fatalf("the stream took %d messages, want 2: the batch and one batch of its two failed records", info.State.LastSeq)
	}
	if n := promtestutil.ToFloat64(p.qm.DeadLetter); n != 0 {
		t.Fatalf("%v dead letters", n)
	}
}

// A record of a batch that fails every attempt is dead-lettered on its own, as its JSON as
// queued, after max_deliver attempts; the others are scored once.
func TestBatchDeadLettersARecordThatAlwaysFails(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(2, 10)
	keys := enqueueBatches(t, js, rt.Queue, 10)
	poison := keys[4]
	sc := newAttemptsScorer(map[string]int{poison: -1})
	tl := newTally()
	p := startPool(t, js, rt, sc, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the poison record dead-lettered", func() bool { return streamMsgs(js, rt.Queue.DeadLetterStream) == 1 })
	drain(t, js, rt, p)
	if tl.len() != 9 || tl.snapshot()[poison] != 0 {
		t.Fatalf("scored %v", tl.snapshot())
	}
	assertOnce(t, append(append([]string(nil), keys[:4]...), keys[5:]...), tl)
	if n := len(sc.attempts(poison)); n != 3 {
		t.Fatalf("the poison record was attempted %d times, want max_deliver (3)", n)
	}
	m := deadLetterMsg(t, js, rt.Queue, 1)
	var rec record.Record
	if err := json.Unmarshal(m.Data, &rec); err != nil || rec.TraceID != poison || rec.Query != "q" {
		t.Fatalf("dead letter %s (%v)", m.Data, err)
	}
	if m.Header.Get(HeaderDeliveries) != "3" || m.Header.Get(HeaderError) != "test: backend down" || m.Header.Get(jetstream.MsgIDHeader) != poison {
		t.Fatalf("dead letter headers %v", m.Header)
	}
	if n := promtestutil.ToFloat64(p.qm.DeadLetter); n != 1 {
		t.Fatalf("%v dead letters counted, want 1", n)
	}
}

// When every record of a batch fails, the batch itself is nak'ed with the backoff delay, as a
// record alone is: nothing is published again.
func TestBatchThatFailsWholeIsNakedAsOne(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(1, 5)
	rt.Queue.Backoff = []time.Duration{200 * time.Millisecond}
	keys := enqueueBatches(t, js, rt.Queue, 5)
	fails := map[string]int{}
	for _, k := range keys {
		fails[k] = 1
	}
	sc := newAttemptsScorer(fails)
	tl := newTally()
	p := startPool(t, js, rt, sc, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return tl.len() == 5 })
	drain(t, js, rt, p)
	assertOnce(t, keys, tl)
	for _, k := range keys {
		if at := sc.attempts(k); len(at) != 2 || at[1].Sub(at[0]) < 200*time.Millisecond {
			t.Fatalf("record %s attempts at %v, want two, 200ms apart at least", k, at)
		}
	}
	st, _ := js.Stream(context.Background(), rt.Queue.Stream)
	if info, err := st.Info(context.Background()); err != nil || info.State.LastSeq != 1 {
		t.Fatalf("stream state %+v (%v): want the one batch, none published again", info.State, err)
	}
}

// A batch published again waits for its retry time on its first delivery and then counts the
// attempts its headers say: one that has had max_deliver attempts already is dead-lettered
// without scoring when it comes back (a batch whose attempts never finished).
func TestRetriedBatchKeepsItsAttempts(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(1, 10)
	if _, err := queue.Setup(context.Background(), js, rt.Queue, 1); err != nil {
		t.Fatal(err)
	}
	entries := [][]byte{}
	keys := []string{}
	for i := range 2 {
		r := record.Record{TraceID: fmt.Sprintf("%032x", 100+i), Query: "q"}
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		entries, keys = append(entries, b), append(keys, r.Key())
	}
	retryAt := time.Now().Add(400 * time.Millisecond)
	// Two records that had every attempt already: they are not scored again.
	if _, err := js.PublishMsg(context.Background(), queue.NewRetryMsg(rt.Queue.Subject, "done", entries[:1], rt.Queue.MaxDeliver, retryAt)); err != nil {
		t.Fatal(err)
	}
	// One with an attempt left.
	if _, err := js.PublishMsg(context.Background(), queue.NewRetryMsg(rt.Queue.Subject, "left", entries[1:], rt.Queue.MaxDeliver-1, retryAt)); err != nil {
		t.Fatal(err)
	}
	sc := newAttemptsScorer(map[string]int{keys[1]: -1})
	tl := newTally()
	p := startPool(t, js, rt, sc, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "both dead-lettered", func() bool { return streamMsgs(js, rt.Queue.DeadLetterStream) == 2 })
	shutdown(t, p)
	if n := len(sc.attempts(keys[0])); n != 0 {
		t.Fatalf("a record past its attempts was scored %d times", n)
	}
	at := sc.attempts(keys[1])
	if len(at) != 1 || at[0].Before(retryAt) {
		t.Fatalf("the record with one attempt left was attempted at %v, want once, not before %v", at, retryAt)
	}
	reasons := map[string]string{}
	for seq := uint64(1); seq <= 2; seq++ {
		m := deadLetterMsg(t, js, rt.Queue, seq)
		reasons[m.Header.Get(jetstream.MsgIDHeader)] = m.Header.Get(HeaderError) + " after " + m.Header.Get(HeaderDeliveries)
	}
	if !strings.HasPrefix(reasons[keys[0]], "attempts did not finish") || !strings.HasSuffix(reasons[keys[0]], "after 4") ||
		reasons[keys[1]] != "test: backend down after 3" {
		t.Fatalf("dead letters %v", reasons)
	}
}

// A pool stopped in the middle of a batch hands on what it scored and queues the rest again,
// so that another pool scores the rest, and only the rest.
func TestBatchInterruptedByShutdown(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(1, 10)
	keys := enqueueBatches(t, js, rt.Queue, 10)
	started := make(chan struct{})
	var once sync.Once
	blocking := funcScorer{name: "test", score: func(ctx context.Context, r *record.Record) ([]score.Result, error) {
		if r.Key() == keys[5] {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []score.Result{{Metric: "faithfulness", Value: 1}}, nil
	}}
	first := newTally()
	p := startPool(t, js, rt, blocking, first)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch was not taken")
	}
	shutdown(t, p)
	if first.len() != 5 {
		t.Fatalf("the first pool handed on %v, want the five records before the one it was scoring", first.snapshot())
	}
	second := newTally()
	p2 := startPool(t, js, rt, okScorer, second)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the rest scored", func() bool { return second.len() == 5 })
	drain(t, js, rt, p2)
	assertOnce(t, keys, first, second)
}

// A record that does not decode is dead-lettered as it arrived, under its message's sequence
// and, in a batch, its place; the batch's other records are scored.
func TestUndecodableRecordsAreDeadLettered(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := batchRuntime(1, 10)
	if _, err := queue.Setup(context.Background(), js, rt.Queue, 1); err != nil {
		t.Fatal(err)
	}
	good := []byte(`{"trace_id":"00000000000000000000000000000abc","query":"q"}`)
	bad := []byte(`{"trace_id":`)
	for _, data := range [][]byte{queue.Batch([][]byte{good, bad}), bad} { // a batch, then a record alone
		if _, err := js.Publish(context.Background(), rt.Queue.Subject, data); err != nil {
			t.Fatal(err)
		}
	}
	tl := newTally()
	p := startPool(t, js, rt, okScorer, tl)
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the bad records dead-lettered", func() bool { return streamMsgs(js, rt.Queue.DeadLetterStream) == 2 })
	drain(t, js, rt, p)
	assertOnce(t, []string{"00000000000000000000000000000abc"}, tl)
	ids := map[string]bool{}
	for seq := uint64(1); seq <= 2; seq++ {
		m := deadLetterMsg(t, js, rt.Queue, seq)
		if string(m.Data) != string(bad) || !strings.HasPrefix(m.Header.Get(HeaderError), "undecodable record") {
			t.Fatalf("dead letter %q, headers %v", m.Data, m.Header)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	if !ids["seq-1-1"] || !ids["seq-2"] {
		t.Fatalf("dead letters under ids %v, want seq-1-1 (the batch's second) and seq-2 (a record alone)", ids)
	}
}
