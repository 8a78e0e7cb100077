package join

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// contents keeps what reaches NextContent.
type contents struct {
	mu  sync.Mutex
	got []record.Content
}

func (c *contents) ConsumeContent(_ context.Context, x record.Content) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, x)
	return nil
}

// Content that came after its record goes on naming the record the join remembers (its span
// id, service and variant, not the event's span), as late feedback does; a trace the join
// never saw is orphaned, and one whose records were of several turns is ignored: the event's
// span cannot tell which turn it answered.
func TestContentJoinsItsRecord(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	s, next := &sink{}, &contents{}
	j, err := New(Settings{Retention: time.Hour, Next: s, NextFeedback: s, NextContent: next, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const one, two, none = "4bf92f3577b34da6a3ce929d0e0e4736", "4bf92f3577b34da6a3ce929d0e0e4737", "4bf92f3577b34da6a3ce929d0e0e4738"
	r := rec(one)
	r.Variant = "candidate"
	if err := j.ConsumeRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []string{"00f067aa0ba902b1", "00f067aa0ba902b2"} { // two turns of one trace
		if err := j.ConsumeRecord(ctx, &record.Record{TraceID: two, SpanID: sp, Service: "support-bot", Time: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.ConsumeRecord(ctx, r); err != nil { // the same record again: still one turn
		t.Fatal(err)
	}
	for _, id := range []string{one, two, none} {
		if err := j.ConsumeContent(ctx, record.Content{TraceID: id, SpanID: "a000000000000003", Service: "rag-app", Answer: "Yes."}); err != nil {
			t.Fatal(err)
		}
	}
	want := []record.Content{{TraceID: one, SpanID: "00f067aa0ba902b7", Service: "support-bot", Variant: "candidate", Answer: "Yes."}}
	if !reflect.DeepEqual(next.got, want) {
		t.Fatalf("handed on %+v, want %+v", next.got, want)
	}
	for outcome, n := range map[string]float64{"joined": 1, "ignored": 1, "orphaned": 1} {
		if got := testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "content", "outcome": outcome}); got != n {
			t.Errorf("content %s = %v, want %v", outcome, got, n)
		}
	}
	if err := j.ConsumeContent(ctx, record.Content{Answer: "x"}); err == nil {
		t.Fatal("content without a trace id accepted")
	}
}

// In a trace of several turns, content goes to the turn that awaits the answer its events
// name (the answering generation's span, record.Record.AnswerSpanID); content naming a span no
// awaiting turn answers from is ignored.
func TestContentFindsItsTurn(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, next := &sink{}, &contents{}
	j, err := New(Settings{Retention: time.Hour, Next: s, NextFeedback: s, NextContent: next, Registerer: reg, Now: testutil.NewClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const trace = "4bf92f3577b34da6a3ce929d0e0e4739"
	turns := []struct{ turn, answer string }{{"00f067aa0ba902c1", "00f067aa0ba902d1"}, {"00f067aa0ba902c2", "00f067aa0ba902d2"}}
	for _, tn := range turns {
		r := &record.Record{TraceID: trace, SpanID: tn.turn, Service: "support-bot", Time: t0, AwaitsAnswer: true, AnswerSpanID: tn.answer}
		if err := j.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, span := range []string{turns[0].answer, "00f067aa0ba902ff", turns[1].answer} {
		if err := j.ConsumeContent(ctx, record.Content{TraceID: trace, SpanID: span, Answer: "for " + span}); err != nil {
			t.Fatal(err)
		}
	}
	want := []record.Content{
		{TraceID: trace, SpanID: turns[0].turn, Service: "support-bot", Answer: "for " + turns[0].answer},
		{TraceID: trace, SpanID: turns[1].turn, Service: "support-bot", Answer: "for " + turns[1].answer},
	}
	if !reflect.DeepEqual(next.got, want) {
		t.Fatalf("handed on %+v, want %+v", next.got, want)
	}
	for outcome, n := range map[string]float64{"joined": 2, "ignored": 1} {
		if got := testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "content", "outcome": outcome}); got != n {
			t.Errorf("content %s = %v, want %v", outcome, got, n)
		}
	}
}
