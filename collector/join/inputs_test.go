package join

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// fullSink keeps copies of what reaches every consumer of the join.
type fullSink struct {
	sink
	lmu    sync.Mutex
	labels []record.Label
	pairs  [][2]record.Record
}

func (s *fullSink) ConsumeLabel(_ context.Context, l record.Label) error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.labels = append(s.labels, l)
	return nil
}

func (s *fullSink) ConsumePair(_ context.Context, a, b *record.Record) error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.pairs = append(s.pairs, [2]record.Record{*a, *b})
	return nil
}

func (s *fullSink) gotLabels() []record.Label {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return append([]record.Label(nil), s.labels...)
}

func (s *fullSink) gotPairs() [][2]record.Record {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return append([][2]record.Record(nil), s.pairs...)
}

func (s *fullSink) gotRecords() []record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Record(nil), s.records...)
}

// newFullJoin starts a join with every input enabled: pairs (wait 10m, 4 pending) and
// sessions (TTL 30m, 100 sessions, unbounded history) unless mod changes them.
func newFullJoin(t *testing.T, kv jetstream.KeyValue, clk *testutil.Clock, reg *prometheus.Registry, mod func(*Settings)) (*Join, *fullSink) {
	t.Helper()
	s := &fullSink{}
	set := Settings{Retention: time.Hour, Next: s, NextFeedback: s, NextLabel: s, NextPair: s,
		PairWait: 10 * time.Minute, MaxPendingPairs: 4, SessionTTL: 30 * time.Minute, MaxSessions: 100,
		KV: kv, PersistSeen: kv != nil, Registerer: reg, Now: clk.Now}
	if mod != nil {
		mod(&set)
	}
	j, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Shutdown(context.Background()) })
	return j, s
}

func outcomeOf(t *testing.T, reg *prometheus.Registry, join, outcome string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": join, "outcome": outcome})
}

func pendingOf(t *testing.T, reg *prometheus.Registry, join string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, "ragwatch_join_pending", map[string]string{"join": join})
}

func newBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLabelsBeforeAndAfterTheirRecord(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, nil)
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"

	// Two labels before the record merge onto it: later values per metric win, relevance
	// maps merge, the last reference and labeler win.
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: trace, Values: map[string]float64{"faithfulness": 0.2, "judge_tone": 0.5},
		Relevance: map[string]int{"d1": 2}, Reference: "first", Labeler: "ann"}))
	clk.Add(time.Second)
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: trace, Values: map[string]float64{"faithfulness": 0.9},
		Relevance: map[string]int{"d2": 1}, Labeler: "bob"}))
	if j.Pending() != 2 || pendingOf(t, reg, "label") != 2 {
		t.Fatalf("pending = %d, gauge %v", j.Pending(), pendingOf(t, reg, "label"))
	}
	r := rec(trace)
	must(t, j.ConsumeRecord(ctx, r))
	if r.Labels != nil {
		t.Fatal("the caller's record must stay untouched")
	}
	want := &record.Label{Values: map[string]float64{"faithfulness": 0.9, "judge_tone": 0.5},
		Relevance: map[string]int{"d1": 2, "d2": 1}, Reference: "first", Labeler: "bob", Time: t0.Add(time.Second)}
	if got := s.gotRecords(); len(got) != 1 || !reflect.DeepEqual(got[0].Labels, want) {
		t.Fatalf("record labels = %+v, want %+v", got[0].Labels, want)
	}
	if len(s.gotLabels()) != 0 {
		t.Fatalf("labels joined to their record must not be forwarded alone: %+v", s.gotLabels())
	}

	// After the record: forwarded alone, naming the record.
	clk.Add(time.Minute)
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: trace, Values: map[string]float64{"judge_tone": 1}}))
	wantLate := record.Label{TraceID: trace, SpanID: "00f067aa0ba902b7", Service: "support-bot",
		Values: map[string]float64{"judge_tone": 1}, Time: clk.Now()}
	if got := s.gotLabels(); len(got) != 1 || !reflect.DeepEqual(got[0], wantLate) {
		t.Fatalf("late label = %+v, want %+v", got, wantLate)
	}

	// Never its record: orphaned after the retention, and still forwarded.
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: "never", Service: "search", Reference: "gold"}))
	clk.Add(time.Hour + time.Second)
	j.Sweep(ctx)
	if got := s.gotLabels(); len(got) != 2 || got[1].TraceID != "never" || got[1].Service != "search" || got[1].Reference != "gold" {
		t.Fatalf("orphaned label = %+v", got)
	}
	if jn, or := outcomeOf(t, reg, "label", "joined"), outcomeOf(t, reg, "label", "orphaned"); jn != 3 || or != 1 {
		t.Fatalf("label joined=%v orphaned=%v, want 3 1", jn, or)
	}
	if fj := outcomeOf(t, reg, "feedback", "joined"); fj != 0 || pendingOf(t, reg, "label") != 0 {
		t.Fatalf("feedback joined=%v label pending=%v", fj, pendingOf(t, reg, "label"))
	}
}

// TestLabelsAndFeedbackShareTheTrace: feedback and a label for one trace both wait and both
// join, each counted under its own join.
func TestLabelsAndFeedbackShareTheTrace(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, nil)
	ctx := context.Background()
	must(t, j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t1", Score: -1}))
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: "t1", Values: map[string]float64{"faithfulness": 0}}))
	must(t, j.ConsumeRecord(ctx, rec("t1")))
	got := s.gotRecords()
	if len(got) != 1 || got[0].Feedback == nil || got[0].Feedback.Score != -1 || got[0].Labels == nil || got[0].Labels.Values["faithfulness"] != 0 {
		t.Fatalf("record = %+v", got)
	}
	if outcomeOf(t, reg, "feedback", "joined") != 1 || outcomeOf(t, reg, "label", "joined") != 1 {
		t.Fatal("each joined once under its own join")
	}
}

func TestLabelsAcrossRestart(t *testing.T) {
	kv := newBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	j1, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, j1.ConsumeLabel(ctx, record.Label{TraceID: "before-restart", Values: map[string]float64{"correctness": 1}, Labeler: "ann"}))
	must(t, j1.ConsumeRecord(ctx, rec("seen-before-restart")))
	must(t, j1.Shutdown(ctx))

	clk.Add(time.Minute)
	reg := prometheus.NewRegistry()
	j2, s2 := newFullJoin(t, kv, clk, reg, nil)
	if j2.Pending() != 1 {
		t.Fatalf("pending after restart = %d, want 1", j2.Pending())
	}
	must(t, j2.ConsumeRecord(ctx, rec("before-restart")))
	want := &record.Label{Values: map[string]float64{"correctness": 1}, Labeler: "ann", Time: t0}
	if got := s2.gotRecords(); len(got) != 1 || !reflect.DeepEqual(got[0].Labels, want) {
		t.Fatalf("label after restart: %+v", got)
	}
	must(t, j2.ConsumeLabel(ctx, record.Label{TraceID: "seen-before-restart", Reference: "gold"}))
	if got := s2.gotLabels(); len(got) != 1 || got[0].Service != "support-bot" || got[0].SpanID != "00f067aa0ba902b7" {
		t.Fatalf("late label for a record seen before the restart: %+v", got)
	}
	if jn := outcomeOf(t, reg, "label", "joined"); jn != 2 {
		t.Fatalf("label joined = %v, want 2", jn)
	}
}

func pairRec(trace, variant string) *record.Record {
	r := rec(trace)
	r.PairID, r.Variant = "pair-1", variant
	return r
}

func TestPairJoinedInEitherOrder(t *testing.T) {
	for _, firstVariant := range []string{"control", "candidate"} {
		t.Run(firstVariant+" first", func(t *testing.T) {
			clk := testutil.NewClock(t0)
			reg := prometheus.NewRegistry()
			j, s := newFullJoin(t, nil, clk, reg, nil)
			ctx := context.Background()
			other := map[string]string{"control": "candidate", "candidate": "control"}[firstVariant]
			a, b := pairRec("trace-a", firstVariant), pairRec("trace-b", other)
			must(t, j.ConsumeRecord(ctx, a))
			if len(s.gotPairs()) != 0 || pendingOf(t, reg, "pair") != 1 {
				t.Fatalf("a lone half waits: pairs=%d pending=%v", len(s.gotPairs()), pendingOf(t, reg, "pair"))
			}
			clk.Add(time.Minute)
			must(t, j.ConsumeRecord(ctx, b))
			got := s.gotPairs()
			if len(got) != 1 || !reflect.DeepEqual(got[0][0], *a) || !reflect.DeepEqual(got[0][1], *b) {
				t.Fatalf("pairs = %+v", got)
			}
			// Both still flow on unchanged.
			if recs := s.gotRecords(); len(recs) != 2 || !reflect.DeepEqual(recs[0], *a) || !reflect.DeepEqual(recs[1], *b) {
				t.Fatalf("records = %+v", recs)
			}
			// A third member is counted and ignored; a redelivery of a half too.
			must(t, j.ConsumeRecord(ctx, pairRec("trace-c", "extra")))
			if len(s.gotPairs()) != 1 || len(s.gotRecords()) != 3 {
				t.Fatalf("a third member must only flow on: pairs=%d records=%d", len(s.gotPairs()), len(s.gotRecords()))
			}
			if jn, ig, pend := outcomeOf(t, reg, "pair", "joined"), outcomeOf(t, reg, "pair", "ignored"), pendingOf(t, reg, "pair"); jn != 1 || ig != 1 || pend != 0 {
				t.Fatalf("pair joined=%v ignored=%v pending=%v, want 1 1 0", jn, ig, pend)
			}
			clk.Add(time.Hour)
			j.Sweep(ctx)
			if or := outcomeOf(t, reg, "pair", "orphaned"); or != 0 {
				t.Fatalf("a completed pair is not orphaned: %v", or)
			}
		})
	}
}

func TestPairAcrossRestart(t *testing.T) {
	kv := newBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	j1, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	a := pairRec("trace-a", "control")
	a.Query, a.Answer = "what is the refund window?", "30 days"
	must(t, j1.ConsumeRecord(ctx, a))
	must(t, j1.Shutdown(ctx))

	clk.Add(time.Minute)
	reg := prometheus.NewRegistry()
	j2, s2 := newFullJoin(t, kv, clk, reg, nil)
	if pendingOf(t, reg, "pair") != 1 {
		t.Fatalf("the waiting half must be loaded: pending %v", pendingOf(t, reg, "pair"))
	}
	b := pairRec("trace-b", "candidate")
	must(t, j2.ConsumeRecord(ctx, b))
	got := s2.gotPairs()
	if len(got) != 1 || got[0][0].TraceID != "trace-a" || got[0][0].Answer != "30 days" || got[0][0].Variant != "control" || got[0][1].TraceID != "trace-b" {
		t.Fatalf("pairs = %+v", got)
	}
	must(t, j2.Shutdown(ctx))
	// The completed pair is remembered in the bucket: a third member after another restart is
	// ignored.
	reg3 := prometheus.NewRegistry()
	j3, s3 := newFullJoin(t, kv, clk, reg3, nil)
	must(t, j3.ConsumeRecord(ctx, pairRec("trace-c", "extra")))
	if len(s3.gotPairs()) != 0 || outcomeOf(t, reg3, "pair", "ignored") != 1 {
		t.Fatalf("third after restart: pairs=%d ignored=%v", len(s3.gotPairs()), outcomeOf(t, reg3, "pair", "ignored"))
	}
}

// TestPairAcrossSharedBucket: the halves of a pair reach two ragwatch processes sharing one
// bucket; the second completes the pair from the bucket, and the first stops waiting without
// counting an orphan.
func TestPairAcrossSharedBucket(t *testing.T) {
	kv := newBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	ja, sa := newFullJoin(t, kv, clk, regA, nil)
	jb, sb := newFullJoin(t, kv, clk, regB, nil)
	a, b := pairRec("trace-a", "control"), pairRec("trace-b", "candidate")
	must(t, ja.ConsumeRecord(ctx, a))
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "A's half claimed in the bucket", func() bool {
		_, err := kv.Get(ctx, "pair.pair-1")
		return err == nil
	})
	must(t, jb.ConsumeRecord(ctx, b))
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "B completing the pair", func() bool { return len(sb.gotPairs()) == 1 })
	got := sb.gotPairs()[0]
	if !reflect.DeepEqual(got[0], *a) || !reflect.DeepEqual(got[1], *b) {
		t.Fatalf("pair = %+v", got)
	}
	if pendingOf(t, regB, "pair") != 0 || outcomeOf(t, regB, "pair", "joined") != 1 {
		t.Fatalf("B pending=%v joined=%v", pendingOf(t, regB, "pair"), outcomeOf(t, regB, "pair", "joined"))
	}
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "the pair marked complete", func() bool {
		e, err := kv.Get(ctx, "pair.pair-1")
		return err == nil && strings.Contains(string(e.Value()), `"done":true`)
	})
	clk.Add(time.Minute)
	ja.Sweep(ctx) // A learns from the bucket that its half was paired
	if pendingOf(t, regA, "pair") != 0 {
		t.Fatalf("A still waits: %v", pendingOf(t, regA, "pair"))
	}
	clk.Add(time.Hour)
	ja.Sweep(ctx)
	jb.Sweep(ctx)
	if len(sa.gotPairs()) != 0 || outcomeOf(t, regA, "pair", "orphaned") != 0 || outcomeOf(t, regA, "pair", "joined") != 0 {
		t.Fatalf("A must count nothing: pairs=%d orphaned=%v", len(sa.gotPairs()), outcomeOf(t, regA, "pair", "orphaned"))
	}
}

func TestPairExpiryAndEviction(t *testing.T) {
	kv := newBucket(t)
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, kv, clk, reg, func(s *Settings) { s.MaxPendingPairs = 2 })
	ctx := context.Background()
	for i, id := range []string{"p1", "p2", "p3"} {
		r := rec("trace-" + id)
		r.PairID = id
		must(t, j.ConsumeRecord(ctx, r))
		clk.Add(time.Duration(i+1) * time.Second)
	}
	if ev, pend := outcomeOf(t, reg, "pair", "evicted"), pendingOf(t, reg, "pair"); ev != 1 || pend != 2 {
		t.Fatalf("evicted=%v pending=%v, want 1 2", ev, pend)
	}
	clk.Add(10 * time.Minute)
	j.Sweep(ctx)
	if or, pend := outcomeOf(t, reg, "pair", "orphaned"), pendingOf(t, reg, "pair"); or != 2 || pend != 0 || len(s.gotPairs()) != 0 {
		t.Fatalf("orphaned=%v pending=%v pairs=%d, want 2 0 0", or, pend, len(s.gotPairs()))
	}
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "orphaned halves leaving the bucket", func() bool {
		for _, id := range []string{"p1", "p2", "p3"} {
			if _, err := kv.Get(ctx, "pair."+id); !errors.Is(err, jetstream.ErrKeyNotFound) {
				return false
			}
		}
		return true
	})
}

func turn(session, trace, q, a string) *record.Record {
	r := rec(trace)
	r.SessionID, r.Query, r.Answer = session, q, a
	return r
}

func msgs(m ...string) []record.Message {
	var out []record.Message
	for i, c := range m {
		role := record.RoleUser
		if i%2 == 1 {
			role = record.RoleAssistant
		}
		out = append(out, record.Message{Role: role, Content: c})
	}
	return out
}

func TestSessionTurnsAndHistory(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, nil)
	ctx := context.Background()
	for i, qa := range [][2]string{{"q1", "a1"}, {"q2", "a2"}, {"q3", "a3"}} {
		r := turn("s-1", "trace-"+qa[0], qa[0], qa[1])
		must(t, j.ConsumeRecord(ctx, r))
		if r.Turn != 0 || r.History != nil {
			t.Fatal("the caller's record must stay untouched")
		}
		clk.Add(time.Duration(i+1) * time.Minute)
	}
	got := s.gotRecords()
	wantHist := [][]record.Message{nil, msgs("q1", "a1"), msgs("q1", "a1", "q2", "a2")}
	for i, r := range got {
		if r.Turn != i+1 || !reflect.DeepEqual(r.History, wantHist[i]) {
			t.Fatalf("turn %d: Turn=%d History=%+v, want %+v", i+1, r.Turn, r.History, wantHist[i])
		}
	}
	if jn, pend := outcomeOf(t, reg, "session", "joined"), pendingOf(t, reg, "session"); jn != 2 || pend != 1 {
		t.Fatalf("session joined=%v pending=%v, want 2 1", jn, pend)
	}
	// Another session is apart.
	must(t, j.ConsumeRecord(ctx, turn("s-2", "trace-x", "hello", "hi")))
	if r := s.gotRecords()[3]; r.Turn != 1 || r.History != nil {
		t.Fatalf("another session: %+v", r)
	}
}

func TestSessionHistoryBounds(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, func(s *Settings) { s.MaxHistoryTurns = 2; s.MaxHistoryBytes = 1000 })
	ctx := context.Background()
	for _, qa := range [][2]string{{"q1", "a1"}, {"q2", "a2"}, {"q3", "a3"}} {
		must(t, j.ConsumeRecord(ctx, turn("s-1", "trace-"+qa[0], qa[0], qa[1])))
	}
	got := s.gotRecords()
	if got[2].Turn != 3 || !reflect.DeepEqual(got[2].History, msgs("q2", "a2")) {
		t.Fatalf("turn 3: %d %+v", got[2].Turn, got[2].History)
	}
	// The session's memory forgot q1 and a1, but no record lost a message it carried.
	if d := testutil.Sum(t, reg, "ragwatch_conversation_history_dropped_total", nil); d != 0 {
		t.Fatalf("history dropped = %v, want 0", d)
	}
	// A record that brings a longer history (posted, or from NATS) is cut to the bounds, the
	// oldest first, and those drops are counted.
	r := turn("s-1", "trace-q4", "q4", "a4")
	r.Turn, r.History = 4, msgs("q1", "a1", "q2", "a2", "q3", "a3")
	must(t, j.ConsumeRecord(ctx, r))
	if got := s.gotRecords()[3]; !reflect.DeepEqual(got.History, msgs("q3", "a3")) || len(r.History) != 6 {
		t.Fatalf("posted history: got %+v, caller's %d messages", got.History, len(r.History))
	}
	if d := testutil.Sum(t, reg, "ragwatch_conversation_history_dropped_total", nil); d != 4 {
		t.Fatalf("history dropped = %v, want 4", d)
	}
}

// TestSessionKeepsItsOwnCopy: the session's history holds copies of a turn's texts, never the
// record's strings (which may be views of a request's buffers), also when only one is set.
func TestSessionKeepsItsOwnCopy(t *testing.T) {
	clk := testutil.NewClock(t0)
	j, s := newFullJoin(t, nil, clk, prometheus.NewRegistry(), nil)
	ctx := context.Background()
	turns := []*record.Record{turn("s-1", "t1", "q1", "a1"), turn("s-1", "t2", "q2", ""), turn("s-1", "t3", "", "a3"), turn("s-1", "t4", "q4", "a4")}
	for _, r := range turns {
		must(t, j.ConsumeRecord(ctx, r))
	}
	last := s.gotRecords()[3]
	if !reflect.DeepEqual(last.History, []record.Message{
		{Role: record.RoleUser, Content: "q1"}, {Role: record.RoleAssistant, Content: "a1"},
		{Role: record.RoleUser, Content: "q2"}, {Role: record.RoleAssistant, Content: "a3"}}) {
		t.Fatalf("history = %+v", last.History)
	}
	texts := map[*byte]bool{}
	for _, r := range turns[:3] {
		for _, x := range []string{r.Query, r.Answer} {
			if x != "" {
				texts[unsafe.StringData(x)] = true
			}
		}
	}
	for _, m := range last.History {
		if texts[unsafe.StringData(m.Content)] {
			t.Fatalf("the session holds the record's own string %q", m.Content)
		}
	}
}

// TestSessionRecordCarriesItsOwn: a record with its own turn and history keeps them, and the
// state follows it.
func TestSessionRecordCarriesItsOwn(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, nil)
	ctx := context.Background()
	must(t, j.ConsumeRecord(ctx, turn("s-1", "t1", "q1", "a1")))
	own := turn("s-1", "t5", "q5", "a5")
	own.Turn, own.History = 5, msgs("q4", "a4")
	must(t, j.ConsumeRecord(ctx, own))
	must(t, j.ConsumeRecord(ctx, turn("s-1", "t6", "q6", "a6")))
	got := s.gotRecords()
	if got[1].Turn != 5 || !reflect.DeepEqual(got[1].History, msgs("q4", "a4")) {
		t.Fatalf("own turn and history must stay: %+v", got[1])
	}
	if got[2].Turn != 6 || !reflect.DeepEqual(got[2].History, msgs("q4", "a4", "q5", "a5")) {
		t.Fatalf("next turn: %d %+v", got[2].Turn, got[2].History)
	}
}

func TestSessionAcrossRestart(t *testing.T) {
	kv := newBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	j1, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, j1.ConsumeRecord(ctx, turn("s-1", "t1", "q1", "a1")))
	must(t, j1.ConsumeRecord(ctx, turn("s-1", "t2", "q2", "a2")))
	must(t, j1.Shutdown(ctx))

	clk.Add(time.Minute)
	j2, s2 := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, j2.ConsumeRecord(ctx, turn("s-1", "t3", "q3", "a3")))
	if got := s2.gotRecords(); got[0].Turn != 3 || !reflect.DeepEqual(got[0].History, msgs("q1", "a1", "q2", "a2")) {
		t.Fatalf("turn after restart: %d %+v", got[0].Turn, got[0].History)
	}
	must(t, j2.Shutdown(ctx))

	// A third start reads the session back too, with turn 3 remembered.
	j3, s3 := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, j3.ConsumeRecord(ctx, turn("s-1", "t4", "q4", "a4")))
	if got := s3.gotRecords(); got[0].Turn != 4 || len(got[0].History) != 6 {
		t.Fatalf("turn at another ragwatch: %d %+v", got[0].Turn, got[0].History)
	}
}

// TestSessionWritesCoalesce: with sidecars sharing the bucket (persist_seen), a session's
// turns within one SessionFlushInterval cost one KV write, the last state; Shutdown writes
// what is still unwritten.
func TestSessionWritesCoalesce(t *testing.T) {
	kv := newHistoryBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	j, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), func(s *Settings) { s.SessionFlushInterval = time.Hour })
	for i := range 30 {
		must(t, j.ConsumeRecord(ctx, turn("s-1", fmt.Sprintf("t%d", i), "q", "a")))
	}
	if _, err := kv.Get(ctx, "sess.s-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("session written before its flush: %v", err)
	}
	must(t, j.Shutdown(ctx))
	if n, e := sessionWrites(t, kv, "s-1"); n != 1 || e.Turns != 30 {
		t.Fatalf("%d writes of the session, the last with %d turns; want 1 and 30", n, e.Turns)
	}

	// With a short interval the session is in the bucket while the join runs, for others.
	j2, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), func(s *Settings) { s.SessionFlushInterval = 10 * time.Millisecond })
	must(t, j2.ConsumeRecord(ctx, turn("s-2", "u1", "q", "a")))
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "s-2 written within the interval", func() bool {
		_, err := kv.Get(ctx, "sess.s-2")
		return err == nil
	})
}

// TestSessionsWrittenAtShutdown: without persist_seen no other process reads sessions, so
// no turn costs a KV write: every session held is written once at shutdown, and one read back
// at start leaves the bucket until the next shutdown (a crash does not bring back an older
// state).
func TestSessionsWrittenAtShutdown(t *testing.T) {
	kv := newHistoryBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	noSeen := func(s *Settings) { s.PersistSeen = false; s.SessionFlushInterval = time.Millisecond }
	j1, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), noSeen)
	for i := range 5 {
		must(t, j1.ConsumeRecord(ctx, turn("s-1", fmt.Sprintf("t%d", i), "q", "a")))
	}
	must(t, j1.ConsumeRecord(ctx, turn("s-2", "u0", "q", "a")))
	time.Sleep(50 * time.Millisecond) // many flush intervals: none may write
	if _, err := kv.Get(ctx, "sess.s-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("session written while the join runs: %v", err)
	}
	must(t, j1.Shutdown(ctx))
	if n, e := sessionWrites(t, kv, "s-1"); n != 1 || e.Turns != 5 {
		t.Fatalf("s-1: %d writes, the last with %d turns; want 1 and 5", n, e.Turns)
	}

	// The next start reads both back and takes them out of the bucket.
	j2, s2 := newFullJoin(t, kv, clk, prometheus.NewRegistry(), noSeen)
	for _, id := range []string{"s-1", "s-2"} {
		if _, err := kv.Get(ctx, "sess."+id); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("%s still in the bucket after it was read back: %v", id, err)
		}
	}
	must(t, j2.ConsumeRecord(ctx, turn("s-1", "t5", "q", "a")))
	if got := s2.gotRecords(); got[0].Turn != 6 {
		t.Fatalf("turn after restart = %d, want 6", got[0].Turn)
	}
	// At shutdown both are written again, s-2 untouched since it was read.
	must(t, j2.Shutdown(ctx))
	for id, turns := range map[string]int{"s-1": 6, "s-2": 1} {
		kve, err := kv.Get(ctx, "sess."+id)
		must(t, err)
		var e sessionEntry
		must(t, json.Unmarshal(kve.Value(), &e))
		if e.Turns != turns {
			t.Errorf("%s written with %d turns, want %d", id, e.Turns, turns)
		}
	}
}

func newHistoryBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "ragwatch_feedback", History: 64})
	must(t, err)
	return kv
}

// sessionWrites returns how many times the session was written and its last state.
func sessionWrites(t *testing.T, kv jetstream.KeyValue, id string) (int, sessionEntry) {
	t.Helper()
	hist, err := kv.History(context.Background(), "sess."+id)
	must(t, err)
	var e sessionEntry
	must(t, json.Unmarshal(hist[len(hist)-1].Value(), &e))
	return len(hist), e
}

// TestSessionFromTheBucketAtAnotherReplica: a session unknown here is read from the shared
// bucket before the record goes on.
func TestSessionFromTheBucketAtAnotherReplica(t *testing.T) {
	kv := newBucket(t)
	ctx := context.Background()
	clk := testutil.NewClock(t0)
	a, _ := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	b, sb := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, a.ConsumeRecord(ctx, turn("s-9", "t1", "q1", "a1")))
	testutil.Eventually(t, 5*time.Second, 2*time.Millisecond, "A's session written", func() bool {
		_, err := kv.Get(ctx, "sess.s-9")
		return err == nil
	})
	must(t, b.ConsumeRecord(ctx, turn("s-9", "t2", "q2", "a2")))
	if got := sb.gotRecords(); got[0].Turn != 2 || !reflect.DeepEqual(got[0].History, msgs("q1", "a1")) {
		t.Fatalf("B's turn: %d %+v", got[0].Turn, got[0].History)
	}
}

func TestSessionExpiryAndEviction(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, nil, clk, reg, func(s *Settings) { s.MaxSessions = 2 })
	ctx := context.Background()
	for _, id := range []string{"s-1", "s-2", "s-3"} {
		must(t, j.ConsumeRecord(ctx, turn(id, "t-"+id, "q", "a")))
		clk.Add(time.Second)
	}
	if ev, pend := outcomeOf(t, reg, "session", "evicted"), pendingOf(t, reg, "session"); ev != 1 || pend != 2 {
		t.Fatalf("evicted=%v pending=%v, want 1 2", ev, pend)
	}
	clk.Add(30 * time.Minute)
	j.Sweep(ctx)
	if or, pend := outcomeOf(t, reg, "session", "orphaned"), pendingOf(t, reg, "session"); or != 2 || pend != 0 {
		t.Fatalf("orphaned=%v pending=%v, want 2 0", or, pend)
	}
	// A forgotten session starts again at turn 1.
	must(t, j.ConsumeRecord(ctx, turn("s-3", "t-again", "q", "a")))
	if r := s.gotRecords()[3]; r.Turn != 1 || r.History != nil {
		t.Fatalf("after expiry: %+v", r)
	}
}

// TestInputsConcurrently runs every input from several goroutines with the KV writer running
// (for the race detector), then checks the counts add up.
func TestInputsConcurrently(t *testing.T) {
	kv := newBucket(t)
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	j, s := newFullJoin(t, kv, clk, reg, func(s *Settings) { s.MaxPendingPairs = 1000 })
	ctx := context.Background()
	const workers, n = 4, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				id := string(rune('a'+w)) + "-" + string(rune('A'+i%26)) + string(rune('A'+i/26))
				r := turn("s-"+string(rune('a'+w)), "t-"+id, "q", "a")
				r.PairID = "p-" + string(rune('A'+i%26)) + string(rune('A'+i/26)) // one pair per i across workers
				_ = j.ConsumeLabel(ctx, record.Label{TraceID: "t-" + id, Values: map[string]float64{"x": 1}})
				_ = j.ConsumeRecord(ctx, r)
				_ = j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t-" + id, Score: 1})
				if i%10 == 0 {
					j.Sweep(ctx)
				}
			}
		}()
	}
	wg.Wait()
	if got := len(s.gotRecords()); got != workers*n {
		t.Fatalf("records = %d", got)
	}
	for _, r := range s.gotRecords() {
		if r.Labels == nil || r.Labels.Values["x"] != 1 {
			t.Fatalf("label must ride on its record: %+v", r)
		}
	}
	if jn := outcomeOf(t, reg, "label", "joined"); jn != workers*n {
		t.Fatalf("labels joined = %v", jn)
	}
	if jn := outcomeOf(t, reg, "feedback", "joined"); jn != workers*n {
		t.Fatalf("feedback joined = %v", jn)
	}
	// Each pair id got 4 records: one pair, two ignored.
	if jn, ig := outcomeOf(t, reg, "pair", "joined"), outcomeOf(t, reg, "pair", "ignored"); jn != n || ig != 2*n || len(s.gotPairs()) != n {
		t.Fatalf("pairs joined=%v ignored=%v consumed=%d", jn, ig, len(s.gotPairs()))
	}
	if jn := outcomeOf(t, reg, "session", "joined"); jn != workers*(n-1) {
		t.Fatalf("session joined = %v", jn)
	}
}

// appendTrimmed keeps exactly what record.TrimHistory keeps of h followed by add, in a slice
// of its own length.
func TestAppendTrimmedIsTrimHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	msg := func() record.Message {
		return record.Message{Role: record.RoleUser, Content: strings.Repeat("x", rng.IntN(40))}
	}
	for range 2000 {
		h := make([]record.Message, rng.IntN(8))
		for i := range h {
			h[i] = msg()
		}
		add := make([]record.Message, rng.IntN(3))
		for i := range add {
			add[i] = msg()
		}
		turns, bytes := rng.IntN(6), rng.IntN(120)
		want, _ := record.TrimHistory(append(slices.Clone(h), add...), turns, bytes)
		got := appendTrimmed(h, add, turns, bytes)
		if !slices.Equal(got, want) {
			t.Fatalf("h %v add %v turns %d bytes %d: got %v, want %v", h, add, turns, bytes, got, want)
		}
		if len(add) > 0 && cap(got) != len(got) {
			t.Fatalf("cap %d for %d messages: dropped messages stay reachable", cap(got), len(got))
		}
	}
}

// LabelWaiting says whether a label waits for a trace's record (assembly then keeps its
// documents' texts: a labelled record is sampled whatever the rate); feedback waiting does not
// count, nor a label already joined or orphaned.
func TestLabelWaiting(t *testing.T) {
	clk := testutil.NewClock(t0)
	j, _ := newFullJoin(t, nil, clk, prometheus.NewRegistry(), nil)
	ctx := context.Background()
	const trace, other = "4bf92f3577b34da6a3ce929d0e0e4736", "4bf92f3577b34da6a3ce929d0e0e4737"
	id := func(s string) (b [16]byte) {
		if _, err := hex.Decode(b[:], []byte(s)); err != nil {
			t.Fatal(err)
		}
		return b
	}
	must(t, j.ConsumeFeedback(ctx, record.Feedback{TraceID: trace, Score: -1}))
	if j.LabelWaiting(id(trace)) {
		t.Fatal("feedback waiting counted as a label")
	}
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: trace, Values: map[string]float64{"faithfulness": 1}}))
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: "free-form", Values: map[string]float64{"faithfulness": 1}}))
	if !j.LabelWaiting(id(trace)) || j.LabelWaiting(id(other)) {
		t.Fatalf("waiting: %v for the labelled trace, %v for another", j.LabelWaiting(id(trace)), j.LabelWaiting(id(other)))
	}
	must(t, j.ConsumeRecord(ctx, rec(trace)))
	if j.LabelWaiting(id(trace)) {
		t.Fatal("a label joined to its record still waits")
	}
	must(t, j.ConsumeLabel(ctx, record.Label{TraceID: other, Values: map[string]float64{"faithfulness": 1}}))
	clk.Add(time.Hour + time.Second)
	j.Sweep(ctx)
	if j.LabelWaiting(id(other)) || j.labels.Load() != 0 {
		t.Fatalf("an orphaned label still waits (%d counted)", j.labels.Load())
	}
}

// handedSink keeps the records that reach it, as pointers.
type handedSink struct {
	fullSink
	ptrs []*record.Record
}

func (s *handedSink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ptrs = append(s.ptrs, r)
	s.records = append(s.records, *r)
	return nil
}

// TestHandoffFillsInPlace: a record handed over (ConsumeHandoff) gets what ConsumeRecord gives
// a copy, the session's turn and history, a posted history cut to the bounds, feedback and
// labels that waited, but in the record itself, which then reaches Next; one passed with
// ConsumeRecord stays untouched.
func TestHandoffFillsInPlace(t *testing.T) {
	type step struct {
		r     func() *record.Record
		early func(ctx context.Context, j *Join) // feedback or labels before the record
	}
	steps := []step{
		{r: func() *record.Record { return turn("s-1", "t1", "q1", "a1") }},
		{r: func() *record.Record { return turn("s-1", "t2", "q2", "a2") }},
		{r: func() *record.Record {
			r := turn("s-1", "t3", "q3", "a3")
			r.Turn, r.History = 3, msgs("q0", "a0", "q1", "a1", "q2", "a2")
			return r
		}},
		{r: func() *record.Record { return turn("s-1", "t4", "q4", "a4") }, early: func(ctx context.Context, j *Join) {
			must(t, j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t4", Score: 1, Time: t0}))
			must(t, j.ConsumeLabel(ctx, record.Label{TraceID: "t4", Values: map[string]float64{"faithfulness": 0.5}}))
		}},
		{r: func() *record.Record { return rec("t5") }, early: func(ctx context.Context, j *Join) {
			must(t, j.ConsumeFeedback(ctx, record.Feedback{TraceID: "t5", Score: -1, Time: t0}))
		}},
	}
	run := func(handoff bool) (got []record.Record, same []bool) {
		clk := testutil.NewClock(t0)
		s := &handedSink{}
		j, err := New(Settings{Retention: time.Hour, Next: s, NextFeedback: s, NextLabel: s,
			SessionTTL: 30 * time.Minute, MaxSessions: 100, MaxHistoryTurns: 4,
			Registerer: prometheus.NewRegistry(), Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		must(t, j.Start(context.Background()))
		t.Cleanup(func() { _ = j.Shutdown(context.Background()) })
		ctx := context.Background()
		for _, st := range steps {
			if st.early != nil {
				st.early(ctx, j)
			}
			r := st.r()
			before := *r
			if handoff {
				must(t, j.ConsumeHandoff(ctx, r))
			} else {
				must(t, j.ConsumeRecord(ctx, r))
				if !reflect.DeepEqual(*r, before) {
					t.Fatalf("ConsumeRecord changed the caller's record: %+v", *r)
				}
			}
			same = append(same, s.ptrs[len(s.ptrs)-1] == r)
			clk.Add(time.Minute)
		}
		return s.gotRecords(), same
	}
	copied, sameCopied := run(false)
	handed, sameHanded := run(true)
	if !reflect.DeepEqual(handed, copied) {
		t.Fatalf("handed over:\n%+v\ncopied:\n%+v", handed, copied)
	}
	for i := range steps {
		if !sameHanded[i] {
			t.Fatalf("step %d: a handed record must reach Next itself", i+1)
		}
		// ConsumeRecord passes the caller's record on only when it adds nothing.
		if sameCopied[i] {
			t.Fatalf("step %d: ConsumeRecord passed the caller's record on, yet filled it", i+1)
		}
	}
	want := []struct {
		turn    int
		history []record.Message
	}{{1, nil}, {2, msgs("q1", "a1")}, {3, msgs("q1", "a1", "q2", "a2")}, {4, msgs("q2", "a2", "q3", "a3")}, {0, nil}}
	for i, w := range want {
		if handed[i].Turn != w.turn || !reflect.DeepEqual(handed[i].History, w.history) {
			t.Fatalf("record %d: Turn=%d History=%+v, want %d %+v", i+1, handed[i].Turn, handed[i].History, w.turn, w.history)
		}
	}
	if handed[3].Feedback == nil || handed[3].Feedback.Score != 1 || handed[3].Labels == nil || handed[4].Feedback == nil || handed[4].Feedback.Score != -1 {
		t.Fatalf("feedback and labels: %+v, %+v", handed[3], handed[4])
	}
}

// TestLateInputsCarryTheVariant: feedback and labels that arrive after their record go on with
// the record's variant, here and after a restart (the seen state in the bucket keeps it); an
// entry written before the variant was kept loads, without one; orphans have none.
func TestLateInputsCarryTheVariant(t *testing.T) {
	clk := testutil.NewClock(t0)
	ctx := context.Background()
	kv := newBucket(t)
	j1, s1 := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	a := rec("4bf92f3577b34da6a3ce929d0e0e4736")
	a.Variant = "candidate"
	b := rec("turn-b") // a raw id: its variant is kept like a hex one's
	b.Variant = "control"
	must(t, j1.ConsumeRecord(ctx, a))
	must(t, j1.ConsumeRecord(ctx, b))
	must(t, j1.ConsumeFeedback(ctx, record.Feedback{TraceID: a.TraceID, Score: -1}))
	must(t, j1.ConsumeLabel(ctx, record.Label{TraceID: b.TraceID, Values: map[string]float64{"faithfulness": 1}}))
	must(t, j1.ConsumeFeedback(ctx, record.Feedback{TraceID: "never-seen", Score: -1}))
	if fb := s1.forwarded(); len(fb) != 1 || fb[0].Variant != "candidate" {
		t.Fatalf("late feedback = %+v, want variant candidate", fb)
	}
	if ls := s1.gotLabels(); len(ls) != 1 || ls[0].Variant != "control" || ls[0].Service != "support-bot" {
		t.Fatalf("late label = %+v, want variant control", ls)
	}
	must(t, j1.Shutdown(ctx))

	// An entry as written before the variant was kept: no "var".
	old := `{"t":"old-trace","seen":true,"svc":"support-bot","span":"00f067aa0ba902b7","exp":"` + t0.Add(time.Hour).Format(time.RFC3339Nano) + `"}`
	if _, err := kv.Put(ctx, seenPrefix+"old-trace", []byte(old)); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	j2, s2 := newFullJoin(t, kv, clk, prometheus.NewRegistry(), nil)
	must(t, j2.ConsumeFeedback(ctx, record.Feedback{TraceID: a.TraceID, Score: 1}))
	must(t, j2.ConsumeFeedback(ctx, record.Feedback{TraceID: "old-trace", Score: 1}))
	fb := s2.forwarded()
	if len(fb) != 2 || fb[0].Variant != "candidate" || fb[1].Variant != "" || fb[1].Service != "support-bot" {
		t.Fatalf("after restart: %+v, want candidate then no variant", fb)
	}
	// The orphan from before the restart has no record, so no variant.
	clk.Add(2 * time.Hour)
	j2.Sweep(ctx)
	if fb := s2.forwarded(); len(fb) != 3 || fb[2].TraceID != "never-seen" || fb[2].Variant != "" {
		t.Fatalf("orphan: %+v", fb)
	}
}
