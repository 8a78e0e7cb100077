package sampler

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

// The online pair path: the join hands the PairStage two records (candidate first), the stage
// orients them by the comparison and queues one pair job on the JetStream scoring stream, an
// in-process worker judges it with the builtin rule, and the outcome is counted with the
// comparison's label and weight.
func TestPairsEndToEnd(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	cfg := config.Default()
	cfg.Sampling.Rate = 1
	half := 0.5
	cfg.Sampling.Rules = []config.SamplingRule{{Name: "half", Match: config.SamplingMatch{Services: []string{"half"}}, Probability: &half}}
	cfg.Scoring.Workers = 1
	cfg.Comparisons = []config.Comparison{{Name: "rerank", Baseline: "v1", Candidate: "v2", Metrics: []string{"faithfulness"}}}
	reg := prometheus.NewRegistry()
	set := settingsFor(cfg, js, reg, slog.New(slog.DiscardHandler))
	set.PairJudge = builtin.PairJudge{}
	rt := NewRuntime(set)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(context.Background())

	docs := []record.Document{{ID: "d1", Content: "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair."}}
	rec := func(n int, service, variant, answer string) *record.Record {
		return &record.Record{TraceID: fmt.Sprintf("%016x%016x", uint64(n)*0x9e3779b97f4a7c15, uint64(n+1)*0xbf58476d1ce4e5b9),
			Service: service, Variant: variant, PairID: fmt.Sprint("p", n/2), Query: "How tall is the Eiffel Tower?", Documents: docs, Answer: answer}
	}
	const faithful = "The Eiffel Tower is 330 metres tall."
	const invented = "The Eiffel Tower is 330 metres tall. It was painted gold by Napoleon in 1650."
	ctx := context.Background()
	// The candidate arrives first: the stage puts the baseline (v1) in a.
	if err := rt.Pairs.ConsumePair(ctx, rec(1, "shop", "v2", faithful), rec(0, "shop", "v1", invented)); err != nil {
		t.Fatal(err)
	}
	// No comparison names these variants: arrival order, label none; equal answers tie.
	if err := rt.Pairs.ConsumePair(ctx, rec(2, "shop", "x", faithful), rec(3, "shop", "y", faithful)); err != nil {
		t.Fatal(err)
	}
	// At probability 0.5 one baseline trace id is sampled (weight 2), one is not.
	var in, out *record.Record
	for i := 10; in == nil || out == nil; i += 2 {
		if i > 1000 {
			t.Fatal("no trace id on each side of 0.5")
		}
		r := rec(i, "half", "v1", faithful)
		if decide.Sampled(r.TraceID, 0.5) {
			in = r
		} else {
			out = r
		}
	}
	for _, base := range []*record.Record{in, out} {
		cand := *base
		cand.TraceID, cand.Variant, cand.Answer = rec(2000, "", "", "").TraceID, "v2", invented
		if err := rt.Pairs.ConsumePair(ctx, base, &cand); err != nil {
			t.Fatal(err)
		}
	}

	total := func(comp, outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_pairwise_total", map[string]string{"comparison": comp, "outcome": outcome})
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "three pairs judged", func() bool {
		return total("rerank", "win")+total("none", "tie")+total("rerank", "loss") == 3
	})
	if total("rerank", "win") != 1 || total("none", "tie") != 1 || total("rerank", "loss") != 1 {
		t.Fatalf("win %v, tie %v, loss %v", total("rerank", "win"), total("none", "tie"), total("rerank", "loss"))
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_skipped_total", map[string]string{"reason": PairSkipNotSampled}); got != 1 {
		t.Fatalf("skipped %v, want 1", got)
	}
	// rerank: a win at weight 1 and a loss at weight 2: 1/3.
	rates := rt.Pairwise.Rates()
	if len(rates) != 2 || rates[1].Comparison != "rerank" || rates[1].Pairs != 2 || rates[1].Estimate != 1.0/3 || rates[1].EffectiveN != 9.0/5 {
		t.Fatalf("rates %+v", rates)
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_win_rate", map[string]string{"comparison": "rerank", "bound": "estimate"}); got != 1.0/3 {
		t.Fatalf("win rate gauge %v", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_scoring_attempts_total", map[string]string{"scorer": "pairwise", "outcome": "ok"}); got != 3 {
		t.Fatalf("pairwise attempts %v", got)
	}
}
