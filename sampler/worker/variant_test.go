package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// TestVariantOfScores: each result carries its record's variant (the alert engine compares
// and filters by it), and ragwatch_eval_score is labelled with it under the variant cap.
func TestVariantOfScores(t *testing.T) {
	s := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, s)
	rt := testRuntime(2)
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, rt.Queue, 1); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(js, rt.Queue, 16, prometheus.NewRegistry(), quiet)
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	variants := []string{"prompt-v1", "prompt-v2", "", "prompt-v1"}
	for i, v := range variants {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "q", Answer: "a", Variant: v,
			Sampling: &record.Sampling{Probability: 1, Reason: "rate"}}
		if err := pub.Offer(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	got := newTally()
	opts := testOptions(reg)
	opts.Variants = cardinality.NewVariantSet(1, 0, nil) // one variant keeps its name
	p := New(js, rt, []score.Scorer{okScorer}, got, opts)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "every record scored", func() bool { return got.len() == len(variants) })
	shutdown(t, p)

	got.mu.Lock()
	byTrace := map[string]string{}
	for _, r := range got.all {
		byTrace[r.TraceID] = r.Variant
	}
	got.mu.Unlock()
	for i, v := range variants {
		if g := byTrace[fmt.Sprintf("%032x", i+1)]; g != v {
			t.Errorf("record %d: result variant %q, want %q", i, g, v)
		}
	}
	// Records are scored concurrently: whichever of prompt-v1 and prompt-v2 came first holds
	// the one slot, the other is "other"; records without variant keep "".
	counts := map[string]float64{}
	for _, v := range []string{"prompt-v1", "prompt-v2", cardinality.Other, ""} {
		counts[v] = testutil.Sum(t, reg, "ragwatch_eval_score", map[string]string{"metric": "faithfulness", "variant": v})
	}
	if counts[""] != 1 || counts["prompt-v1"]+counts["prompt-v2"]+counts[cardinality.Other] != 3 ||
		(counts["prompt-v1"] != 0) == (counts["prompt-v2"] != 0) || counts[cardinality.Other] == 0 {
		t.Fatalf("eval_score counts by variant %v", counts)
	}
}
