package join

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink keeps copies of what reaches Next and NextFeedback.
type sink struct {
	mu       sync.Mutex
	records  []record.Record
	feedback []record.Feedback
}

func (s *sink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, *r)
	return nil
}

// forwarded is a copy of the feedback received so far.
func (s *sink) forwarded() []record.Feedback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Feedback(nil), s.feedback...)
}

func (s *sink) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.feedback = append(s.feedback, f)
	return nil
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newJoin(t *testing.T, kv jetstream.KeyValue, clk *testutil.Clock, reg *prometheus.Registry) (*Join, *sink) {
	t.Helper()
	s := &sink{}
	j, err := New(Settings{Retention: time.Hour, Next: s, NextFeedback: s, KV: kv, PersistSeen: kv != nil, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Shutdown(context.Background()) })
	return j, s
}

func joined(t *testing.T, reg *prometheus.Registry) (float64, float64) {
	return testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "feedback", "outcome": "joined"}),
		testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "feedback", "outcome": "orphaned"})
}

func rec(trace string) *record.Record {
	return &record.Record{TraceID: trace, SpanID: "00f067aa0ba902b7", Service: "support-bot", Time: t0, Query: "q", Answer: "a"}
}

func TestFeedbackBeforeRecordIsAttached(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	ctx := context.Background()
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t1", Score: -1, Comment: "wrong", Time: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if len(s.feedback) != 0 || j.Pending() != 1 {
		t.Fatalf("feedback before its record must wait: forwarded %d, pending %d", len(s.feedback), j.Pending())
	}
	clk.Add(time.Minute)
	r := rec("t1")
	if err := j.ConsumeRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.Feedback != nil {
		t.Fatal("the input record must stay untouched")
	}
	want := *rec("t1")
	want.Feedback = &record.Feedback{Score: -1, Comment: "wrong", Time: t0.Add(time.Second)}
	if len(s.records) != 1 || !reflect.DeepEqual(s.records[0], want) {
		t.Fatalf("records = %+v, want %+v", s.records, want)
	}
	if len(s.feedback) != 0 || j.Pending() != 0 {
		t.Fatalf("joined feedback rides on the record only: forwarded %d, pending %d", len(s.feedback), j.Pending())
	}
	if jn, or := joined(t, reg); jn != 1 || or != 0 {
		t.Fatalf("joined=%v orphaned=%v", jn, or)
	}
}

func TestFeedbackAfterRecordIsForwarded(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	ctx := context.Background()
	if err := j.ConsumeRecord(ctx, rec("t2")); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Minute)
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t2", Score: 0.5}); err != nil {
		t.Fatal(err)
	}
	want := record.Feedback{TraceID: "t2", SpanID: "00f067aa0ba902b7", Service: "support-bot", Score: 0.5, Time: t0.Add(30 * time.Minute)}
	if len(s.feedback) != 1 || !reflect.DeepEqual(s.feedback[0], want) {
		t.Fatalf("feedback = %+v, want %+v", s.feedback, want)
	}
	if len(s.records) != 1 || s.records[0].Feedback != nil {
		t.Fatalf("records = %+v", s.records)
	}
	if jn, or := joined(t, reg); jn != 1 || or != 0 {
		t.Fatalf("joined=%v orphaned=%v", jn, or)
	}
}

func TestFeedbackWithTraceFromOTLP(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	ctx := context.Background()
	// The assembler hands the annotation first, then the record of the same trace.
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t3", Service: "support-bot", Score: 1, Time: t0}); err != nil {
		t.Fatal(err)
	}
	if err := j.ConsumeRecord(ctx, rec("t3")); err != nil {
		t.Fatal(err)
	}
	// And the other order for a second trace.
	if err := j.ConsumeRecord(ctx, rec("t4")); err != nil {
		t.Fatal(err)
	}
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t4", SpanID: "1111111111111111", Score: 0, Time: t0}); err != nil {
		t.Fatal(err)
	}
	if len(s.records) != 2 || s.records[0].Feedback == nil || s.records[0].Feedback.Score != 1 || s.records[1].Feedback != nil {
		t.Fatalf("records = %+v", s.records)
	}
	want := record.Feedback{TraceID: "t4", SpanID: "1111111111111111", Service: "support-bot", Score: 0, Time: t0}
	if len(s.feedback) != 1 || !reflect.DeepEqual(s.feedback[0], want) {
		t.Fatalf("feedback = %+v, want %+v", s.feedback, want)
	}
	if jn, or := joined(t, reg); jn != 2 || or != 0 {
		t.Fatalf("joined=%v orphaned=%v", jn, or)
	}
}

func TestOrphanedAfterRetention(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	ctx := context.Background()
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "lost", Score: 1, Service: "search"}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour - time.Second)
	j.Sweep(ctx)
	if jn, or := joined(t, reg); jn != 0 || or != 0 || j.Pending() != 1 {
		t.Fatalf("before retention: joined=%v orphaned=%v pending=%d", jn, or, j.Pending())
	}
	clk.Add(time.Second)
	j.Sweep(ctx)
	if jn, or := joined(t, reg); jn != 0 || or != 1 || j.Pending() != 0 {
		t.Fatalf("after retention: joined=%v orphaned=%v pending=%d", jn, or, j.Pending())
	}
	// Orphaned feedback is still counted once downstream, without a record.
	want := record.Feedback{TraceID: "lost", Service: "search", Score: 1, Time: t0}
	if len(s.feedback) != 1 || !reflect.DeepEqual(s.feedback[0], want) {
		t.Fatalf("feedback = %+v, want %+v", s.feedback, want)
	}
	// The record arriving later gets nothing attached.
	if err := j.ConsumeRecord(ctx, rec("lost")); err != nil {
		t.Fatal(err)
	}
	if s.records[0].Feedback != nil {
		t.Fatal("orphaned feedback must not be attached later")
	}
	if got := testutil.Sum(t, reg, "ragwatch_join_tracked_traces", map[string]string{}); got != 1 {
		t.Fatalf("tracked = %v", got)
	}
}

func TestBoundedEntriesEvictOldest(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	s := &sink{}
	j, err := New(Settings{Retention: time.Hour, MaxEntries: 2, Next: s, NextFeedback: s, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: id, Score: -1}); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Second)
	}
	evicted := func() float64 {
		return testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "feedback", "outcome": "evicted"})
	}
	if jn, or := joined(t, reg); jn != 0 || or != 0 || evicted() != 1 || j.Pending() != 2 {
		t.Fatalf("joined=%v orphaned=%v evicted=%v pending=%d", jn, or, evicted(), j.Pending())
	}
	if len(s.feedback) != 1 || s.feedback[0].TraceID != "a" {
		t.Fatalf("the oldest must be evicted and still forwarded: %+v", s.feedback)
	}
	// Many feedback events for one missing trace are bounded too: c holds 1 + 19, keeps 16.
	for range MaxPendingPerTrace + 3 {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "c", Score: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if jn, or := joined(t, reg); jn != 0 || or != 0 || evicted() != 5 || j.Pending() != 1+MaxPendingPerTrace {
		t.Fatalf("joined=%v orphaned=%v evicted=%v pending=%d", jn, or, evicted(), j.Pending())
	}
}

// TestEachFeedbackCountedOnce runs the join in front of the real signals stage and checks
// ragwatch_feedback_total: feedback before, with and after its record, and orphaned, each once.
func TestEachFeedbackCountedOnce(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	sig, err := signals.New(signals.Settings{Signals: config.Signals{MaxServices: 10}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(Settings{Retention: time.Hour, Next: sig, NextFeedback: sig, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.ConsumeFeedback(ctx, record.Feedback{TraceID: "before", Score: -1}))                         // early
	must(j.ConsumeFeedback(ctx, record.Feedback{TraceID: "before", Score: -0.5}))                       // early, second
	must(j.ConsumeRecord(ctx, rec("before")))                                                           // joins both
	must(j.ConsumeRecord(ctx, rec("after")))                                                            //
	must(j.ConsumeFeedback(ctx, record.Feedback{TraceID: "after", Score: 1}))                           // late
	must(j.ConsumeFeedback(ctx, record.Feedback{TraceID: "nobody", Score: -1, Service: "support-bot"})) // orphan
	inline := rec("inline")
	inline.Feedback = &record.Feedback{Score: 0}
	must(j.ConsumeRecord(ctx, inline)) // feedback inside the record
	clk.Add(2 * time.Hour)
	j.Sweep(ctx)

	fb := func(sentiment string) float64 {
		return testutil.Sum(t, reg, "ragwatch_feedback_total", map[string]string{"service": "support-bot", "sentiment": sentiment})
	}
	if neg, pos, neu := fb("negative"), fb("positive"), fb("neutral"); neg != 3 || pos != 1 || neu != 1 {
		t.Fatalf("ragwatch_feedback_total negative=%v positive=%v neutral=%v, want 3 1 1", neg, pos, neu)
	}
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "support-bot"}); got != 3 {
		t.Fatalf("requests = %v, want 3", got)
	}
	if jn, or := joined(t, reg); jn != 3 || or != 1 {
		t.Fatalf("joined=%v orphaned=%v, want 3 1", jn, or)
	}
}

// TestStatePersistsAcrossRestart proves a restart keeps pending feedback and seen records, and
// that orphaned feedback is not orphaned again after another restart.
func TestStatePersistsAcrossRestart(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(t0)

	j1, s1 := newJoin(t, kv, clk, prometheus.NewRegistry())
	if err := j1.ConsumeFeedback(ctx, record.Feedback{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Score: -1}); err != nil {
		t.Fatal(err)
	}
	if err := j1.ConsumeFeedback(ctx, record.Feedback{TraceID: "never/arrives", Score: 1}); err != nil { // hashed key
		t.Fatal(err)
	}
	if err := j1.ConsumeRecord(ctx, rec("seen-before-restart")); err != nil {
		t.Fatal(err)
	}
	_ = j1.Shutdown(ctx)
	if len(s1.feedback) != 0 {
		t.Fatalf("nothing is forwarded yet: %+v", s1.feedback)
	}

	clk.Add(10 * time.Minute)
	reg2 := prometheus.NewRegistry()
	j2, s2 := newJoin(t, kv, clk, reg2)
	if j2.Pending() != 2 {
		t.Fatalf("pending after restart = %d, want 2", j2.Pending())
	}
	if err := j2.ConsumeRecord(ctx, rec("4bf92f3577b34da6a3ce929d0e0e4736")); err != nil {
		t.Fatal(err)
	}
	if len(s2.records) != 1 || s2.records[0].Feedback == nil || s2.records[0].Feedback.Score != -1 {
		t.Fatalf("pending feedback must join after restart: %+v", s2.records)
	}
	if err := j2.ConsumeFeedback(ctx, record.Feedback{TraceID: "seen-before-restart", Score: 1}); err != nil {
		t.Fatal(err)
	}
	if len(s2.feedback) != 1 || s2.feedback[0].Service != "support-bot" || s2.feedback[0].SpanID != "00f067aa0ba902b7" || !s2.feedback[0].Time.Equal(clk.Now()) {
		t.Fatalf("late feedback for a record seen before the restart: %+v", s2.feedback)
	}
	clk.Add(time.Hour)
	j2.Sweep(ctx)
	if jn, or := joined(t, reg2); jn != 2 || or != 1 {
		t.Fatalf("joined=%v orphaned=%v, want 2 1", jn, or)
	}
	_ = j2.Shutdown(ctx)

	reg3 := prometheus.NewRegistry()
	j3, _ := newJoin(t, kv, clk, reg3)
	if jn, or := joined(t, reg3); j3.Pending() != 0 || jn != 0 || or != 0 {
		t.Fatalf("a third start must not orphan again: pending=%d joined=%v orphaned=%v", j3.Pending(), jn, or)
	}
}

// TestSidecarsShareTheBucket runs two joins on one bucket, as two sidecars of a fleet whose
// feedback subject is shared: the record reaches one, its feedback the other. Feedback after
// the record joins at once; feedback before it joins at the next sweep; each counted once.
func TestSidecarsShareTheBucket(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(t0)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, sa := newJoin(t, kv, clk, regA)
	b, sb := newJoin(t, kv, clk, regB)
	stored := func(trace string) bool {
		_, err := kv.Get(ctx, "seen."+trace)
		return err == nil
	}
	waitStored := func(trace string) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "the seen state of "+trace+" written", func() bool { return stored(trace) })
	}

	// After: A sees the record, B gets the feedback.
	if err := a.ConsumeRecord(ctx, rec("after")); err != nil {
		t.Fatal(err)
	}
	waitStored("after")
	if err := b.ConsumeFeedback(ctx, record.Feedback{TraceID: "after", Score: -1}); err != nil {
		t.Fatal(err)
	}
	// B asks the bucket off the caller's goroutine (its writer) and forwards the join then.
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "B joining the feedback", func() bool { return len(sb.forwarded()) == 1 })
	want := record.Feedback{TraceID: "after", SpanID: "00f067aa0ba902b7", Service: "support-bot", Score: -1, Time: t0}
	if got := sb.forwarded(); !reflect.DeepEqual(got[0], want) {
		t.Fatalf("B forwarded %+v, want %+v", got, want)
	}

	// Before: B holds the feedback, then A sees the record; B's next sweep joins it (or its
	// writer's lookup, when that runs after A's write).
	if err := b.ConsumeFeedback(ctx, record.Feedback{TraceID: "before", Score: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := a.ConsumeRecord(ctx, rec("before")); err != nil {
		t.Fatal(err)
	}
	waitStored("before")
	clk.Add(time.Minute)
	b.Sweep(ctx)
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "B joining the early feedback", func() bool { return len(sb.forwarded()) == 2 })
	if got := sb.forwarded(); b.Pending() != 0 || got[1].Service != "support-bot" || got[1].Score != 0.5 {
		t.Fatalf("B pending=%d forwarded %+v", b.Pending(), got)
	}
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "joined feedback leaving the bucket", func() bool {
		_, err := kv.Get(ctx, "pend.before")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	if len(sa.feedback) != 0 || sa.records[1].Feedback != nil {
		t.Fatalf("A must not count the feedback too: %+v %+v", sa.feedback, sa.records[1].Feedback)
	}
	clk.Add(2 * time.Hour)
	a.Sweep(ctx)
	b.Sweep(ctx)
	ja, oa := joined(t, regA)
	jb, ob := joined(t, regB)
	if ja != 0 || oa != 0 || jb != 2 || ob != 0 {
		t.Fatalf("A joined=%v orphaned=%v, B joined=%v orphaned=%v; want 0 0 2 0", ja, oa, jb, ob)
	}
}

// TestSeenRecordsStayInMemoryByDefault: without PersistSeen a record costs no KV write, while
// feedback waiting for its record is still persisted.
func TestSeenRecordsStayInMemoryByDefault(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clk := testutil.NewClock(t0)
	s := &sink{}
	j, err := New(Settings{Retention: time.Hour, Next: s, NextFeedback: s, KV: kv, Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.ConsumeRecord(ctx, rec("seen-only-in-memory")); err != nil {
		t.Fatal(err)
	}
	if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: "waiting-for-its-record", Score: -1}); err != nil {
		t.Fatal(err)
	}
	if err := j.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], pendPrefix) {
		t.Fatalf("bucket keys = %v, want only the pending feedback", keys)
	}
}

// TestLateFeedbackKeepsRecordIDs: what the join remembers compactly (OTLP ids, UTC times) and
// what it keeps as given (other ids, other time zones) comes back exactly on late feedback.
func TestLateFeedbackKeepsRecordIDs(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newJoin(t, nil, clk, reg)
	ctx := context.Background()
	paris := time.FixedZone("CET", 3600)
	recs := []record.Record{
		{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Service: "support-bot", Time: t0.Add(123 * time.Nanosecond)},
		{TraceID: "4BF92F3577B34DA6A3CE929D0E0E4736", SpanID: "turn-2", Service: "search", Time: t0.In(paris)},
		{TraceID: "5bf92f3577b34da6a3ce929d0e0e4736", Time: t0},
	}
	for i := range recs {
		if err := j.ConsumeRecord(ctx, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		if err := j.ConsumeFeedback(ctx, record.Feedback{TraceID: r.TraceID, Score: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.feedback) != len(recs) {
		t.Fatalf("forwarded %d feedback, want %d", len(s.feedback), len(recs))
	}
	for i, r := range recs {
		want := record.Feedback{TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Score: -1, Time: t0}
		if !reflect.DeepEqual(s.feedback[i], want) {
			t.Errorf("feedback %d = %+v, want %+v", i, s.feedback[i], want)
		}
	}
	if jn, or := joined(t, reg); jn != 3 || or != 0 {
		t.Fatalf("joined=%v orphaned=%v", jn, or)
	}
}
