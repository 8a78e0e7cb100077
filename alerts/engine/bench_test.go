package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// BenchmarkConsumeRecord measures the hot path with the default drift detectors and two
// signal SLOs watching every record.
func BenchmarkConsumeRecord(b *testing.B) {
	c, err := config.Parse([]byte(`
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: 0.2}
  - {name: latency, metric: latency_seconds, alert_above: 2}
`))
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Sections: SectionsOf(c), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	s := 0.8
	r := &record.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "search", Query: "q", Answer: "a",
		Documents: []record.Document{{ID: "a", Score: &s}, {ID: "b", Score: &s}}, Usage: record.Usage{OutputTokens: 120},
		Latency: record.Latency{Total: 900}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.ConsumeRecord(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConsumeScores(b *testing.B) {
	c, err := config.Parse([]byte(thresholdCfg))
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Sections: SectionsOf(c), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	res := []score.Result{{TraceID: "t", Service: "search", Metric: "citation_precision", Value: 0.8, Weight: 4}}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res[0].Value = float64(i%100) / 100
		i++
		if err := e.ConsumeScores(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvaluate is one evaluation over 50 services with full windows.
func BenchmarkEvaluate(b *testing.B) {
	c, err := config.Parse([]byte(burnCfg))
	if err != nil {
		b.Fatal(err)
	}
	clk := testutil.NewClock(t0)
	e, err := New(Options{Sections: SectionsOf(c), Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	for m := 0; m < 6*60; m++ {
		for s := 0; s < 50; s++ {
			_ = e.ConsumeScores(context.Background(), []score.Result{{TraceID: "t", Service: fmt.Sprint("svc", s), Metric: "faithfulness", Value: 0.9}})
		}
		clk.Add(60e9)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Evaluate(context.Background())
	}
}

// TestConsumeRecordDoesNotAllocate: the record path measures each record once
// (reqsignal.Measure) and must keep the measurement on the stack. An answer without usage makes
// answer_tokens (watched by the default drift detectors) count its words.
func TestConsumeRecordDoesNotAllocate(t *testing.T) {
	c, err := config.Parse([]byte(`
slos:
  - {name: empty, metric: empty_retrieval_rate, alert_above: 0.2}
  - {name: tokens, metric: answer_tokens, alert_above: 2000}
  - {name: negative, metric: negative_feedback_rate, alert_above: 0.5}
`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Sections: SectionsOf(c), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	s := 0.8
	r := &record.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "search", Query: "q", Answer: "three words here",
		Documents: []record.Document{{ID: "a", Score: &s}}, Latency: record.Latency{Total: 900}, Feedback: &record.Feedback{Score: -1}}
	ctx := context.Background()
	if err := e.ConsumeRecord(ctx, r); err != nil { // the service's first record creates its state
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if err := e.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ConsumeRecord: %v allocations per record, want 0", n)
	}
}
