package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

func TestUpdateKeepsStateOfUnchangedWindows(t *testing.T) {
	h := newHarness(t, thresholdCfg, nil)
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		h.score(t, "citation_precision", fmt.Sprint("a", i), 0.75, 1)
	}
	if out := h.e.Evaluate(ctx); len(out) != 0 {
		t.Fatalf("0.75 is above alert_below 0.7: %+v", out)
	}
	// Raise the limit above the mean: the 60 samples already seen now breach, without any new
	// one; for: 2m still applies.
	h.e.Update(SectionsOf(parse(t, strings.Replace(thresholdCfg, "alert_below: 0.7", "alert_below: 0.8", 1))))
	h.e.Evaluate(ctx)
	if got := h.phase("cp", "search", "page"); got != phasePending {
		t.Fatalf("phase after raising the limit: %s", got)
	}
	h.clk.Add(2 * time.Minute)
	out := h.e.Evaluate(ctx)
	if len(out) != 1 || !out[0].Firing() || out[0].N != 60 || out[0].Value != 0.75 {
		t.Fatalf("after update: %+v", out)
	}
	if got := testutil.ToFloat64(h.e.m.firing.WithLabelValues("cp", "page")); got != 1 {
		t.Fatalf("firing gauge %v", got)
	}

	// A new window shape starts empty: no data, no alert.
	h.e.Update(SectionsOf(parse(t, strings.Replace(thresholdCfg, "window: 10m", "window: 20m", 1))))
	if out := h.e.Evaluate(ctx); len(out) != 0 || len(h.e.Alerts()) != 0 {
		t.Fatalf("state of another window shape kept: %+v", out)
	}

	// A removed rule leaves the gauges. (A config naming an unknown notifier never gets here:
	// config.Load rejects it, config.TestCheckAlertRefs.)
	h.e.Update(SectionsOf(parse(t, "slos: []\ndrift: {detectors: []}\n")))
	if n := testutil.CollectAndCount(h.e.m.firing); n != 0 {
		t.Fatalf("%d firing series left after removing the rule", n)
	}
}

// TestUpdateWatchesRecordSignals: a record signal no rule watched at start is watched once an
// update adds a rule on it, and is no longer once the rule goes.
func TestUpdateWatchesRecordSignals(t *testing.T) {
	const none = "slos: []\ndrift: {detectors: []}\n"
	const empty = `
slos:
  - name: empty
    metric: empty_retrieval_rate
    objective: 0.02
    alert_above: 0.1
    window: 10m
    min_samples: 30
    for: 1m
drift: {detectors: []}
`
	h := newHarness(t, none, nil)
	ctx := context.Background()
	consume := func(prefix string) {
		for i := range 40 {
			if err := h.e.ConsumeRecord(ctx, docsRecord(fmt.Sprint(prefix, i), 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume("before")
	h.e.Update(SectionsOf(parse(t, empty)))
	consume("after")
	h.e.Evaluate(ctx)
	h.clk.Add(time.Minute)
	out := h.e.Evaluate(ctx)
	if len(out) != 1 || !out[0].Firing() || out[0].N != 40 || out[0].Value != 1 {
		t.Fatalf("after adding a rule on empty_retrieval_rate: %+v", out)
	}

	h.e.Update(SectionsOf(parse(t, none)))
	h.e.mu.Lock()
	watched := h.e.bySignal[reqsignal.EmptyRetrievalRate].rules
	h.e.mu.Unlock()
	if len(watched) != 0 {
		t.Fatalf("empty_retrieval_rate still watched by %d rules after the rule was removed", len(watched))
	}
}
