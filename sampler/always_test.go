package sampler

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers"
	"github.com/ragwatch/ragwatch/sampler/scorers/retrieval"
)

type results struct {
	mu  sync.Mutex
	got []score.Result
}

func (r *results) ConsumeScores(_ context.Context, res []score.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, res...)
	return nil
}

func (r *results) byTrace(trace, metric string) (score.Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.got {
		if x.TraceID == trace && x.Metric == metric {
			return x, true
		}
	}
	return score.Result{}, false
}

// Retrieval metrics run on every record with relevance labels, sampled or not, weighted by the
// upstream probability only; records without relevance labels get none.
func TestRetrievalMetricsOnUnsampledRecords(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config.Default().Sampling
	cfg.Rate = 0 // nothing is sampled by rate
	s, o, _ := newStage(t, cfg, c)
	out := &results{}
	s.ScoreAlways(retrieval.New([]int{1, 3}, nil), out)
	docs := []record.Document{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	ctx := context.Background()
	// Its own relevance, kept upstream at 1 in 4: weight 4.
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "t1", Service: "chat", Query: "q", Documents: docs,
		Relevance: map[string]int{"b": 1}, UpstreamProbability: 0.25})
	// A person's grades (a label with relevance only): they win over the record's own.
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "t2", Service: "chat", Query: "q", Documents: docs,
		Relevance: map[string]int{"c": 1}, Labels: &record.Label{Relevance: map[string]int{"a": 2}}})
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "t3", Service: "chat", Query: "q", Documents: docs})

	if r, ok := out.byTrace("t1", score.MRR); !ok || r.Value != 0.5 || r.Weight != 4 || r.Scorer != "retrieval" {
		t.Errorf("t1 mrr: %+v %v (want 0.5, weight 4)", r, ok)
	}
	if r, ok := out.byTrace("t1", "precision@3"); !ok || math.Abs(r.Value-1.0/3) > 1e-12 {
		t.Errorf("t1 precision@3: %+v", r)
	}
	if r, ok := out.byTrace("t2", score.MRR); !ok || r.Value != 1 || r.Weight != 1 {
		t.Errorf("t2 mrr against the label's grades: %+v", r)
	}
	if _, ok := out.byTrace("t3", score.MRR); ok {
		t.Error("a record without relevance labels was scored")
	}
	// t1 and t3 were not sampled (rate 0); t2 is labelled, so it was.
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.recs) != 1 || o.recs[0].TraceID != "t2" || o.recs[0].Sampling.Reason != "labelled" {
		t.Fatalf("offered %d records, want only the labelled t2", len(o.recs))
	}
	// The stage's upstream weight raised the decider's MaxWeight, so the results pass the
	// scores subscription's checks when they come back.
	if w := s.d.MaxWeight(); w < 4 {
		t.Errorf("MaxWeight %v < 4", w)
	}
}

func TestSampledScorersLeaveRetrievalToTheStage(t *testing.T) {
	ss, err := scorers.Build(config.Default().Scoring, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range SampledScorers(ss) {
		names = append(names, s.Name())
	}
	if len(names) != len(ss)-1 || len(names) == 0 {
		t.Fatalf("sampled scorers %v of %d", names, len(ss))
	}
	for _, n := range names {
		if n == "retrieval" {
			t.Fatal("retrieval left among the workers' scorers")
		}
	}
}

// Relevance labels arriving after their record are scored against the ranking the stage kept,
// with the same values, weight, variant and turn an early label gets; beyond
// sampling.recent.max_records records the oldest ranking is gone, and a label for it is
// counted, not scored. Labels without relevance are not this stage's.
func TestLateRelevanceLabelsScored(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config.Default().Sampling
	cfg.Rate = 0
	cfg.Recent.MaxRecords = 2
	s, _, reg := newStage(t, cfg, c)
	out := &results{}
	s.ScoreAlways(retrieval.New([]int{1, 3}, nil), out)
	if err := s.KeepRankings(cfg.Recent.MaxRecords, reg); err != nil {
		t.Fatal(err)
	}
	docs := []record.Document{{ID: "a", Content: "x"}, {ID: "b"}, {ID: "b"}, {ID: "c"}}
	ctx := context.Background()
	grades := map[string]int{"b": 1, "c": 2}
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "early", Service: "chat", Variant: "v2", Turn: 3, Query: "q",
		Documents: docs, Labels: &record.Label{Relevance: grades}, UpstreamProbability: 0.5})
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "late", SpanID: "s1", Service: "chat", Variant: "v2", Turn: 3,
		Query: "q", Documents: docs, UpstreamProbability: 0.5})
	if _, ok := out.byTrace("late", score.MRR); ok {
		t.Fatal("scored before its label")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.ConsumeLabel(ctx, record.Label{TraceID: "late", SpanID: "s1", Service: "chat", Relevance: grades}))
	for _, m := range []string{score.MRR, "precision@3", "ndcg@3", "recall@3", "hit@1"} {
		e, eok := out.byTrace("early", m)
		l, lok := out.byTrace("late", m)
		if !eok || !lok || e.Value != l.Value || l.Weight != 2 || l.Variant != "v2" || l.Turn != 3 || l.SpanID != "s1" || l.Service != "chat" {
			t.Errorf("%s: early %+v, late %+v", m, e, l)
		}
	}
	must(s.ConsumeLabel(ctx, record.Label{TraceID: "late", SpanID: "s1", Values: map[string]float64{"faithfulness": 1}}))
	// Two more records: "early" and "late" are past the bound.
	for _, id := range []string{"n1", "n2"} {
		_ = s.ConsumeRecord(ctx, &record.Record{TraceID: id, Query: "q", Documents: docs})
	}
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "n2", Query: "q", Documents: docs[:1]}) // again: replaces, evicts nothing
	must(s.ConsumeLabel(ctx, record.Label{TraceID: "late", SpanID: "s1", Relevance: grades}))
	must(s.ConsumeLabel(ctx, record.Label{TraceID: "n1", Relevance: map[string]int{"a": 1}}))
	if r, ok := out.byTrace("n1", score.MRR); !ok || r.Value != 1 || r.Weight != 1 {
		t.Errorf("n1 mrr: %+v %v", r, ok)
	}
	if n := testutil.ToFloat64(s.late.WithLabelValues(LateLabelScored)); n != 2 {
		t.Errorf("scored %v, want 2", n)
	}
	if n := testutil.ToFloat64(s.late.WithLabelValues(LateLabelNotKept)); n != 1 {
		t.Errorf("not kept %v, want 1", n)
	}
	if n := s.ranks.len(); n != 2 {
		t.Errorf("%d rankings kept, want 2", n)
	}
}
