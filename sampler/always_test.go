package sampler

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

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
