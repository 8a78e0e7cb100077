package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// Junk service names sent once get SLO state like any service. When the shared set evicts them
// (signals.service_ttl), the engine drops their windows, series and store keys, so names that
// come and go cannot pile state up past the cap; a name with an alert pending or firing keeps it.
func TestEvictedServicesAreForgotten(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	store := &MemStore{}
	set := cardinality.NewServiceSetTTL(50, time.Hour, clk.Now)
	e, err := New(Options{Sections: SectionsOf(parse(t, thresholdCfg)), Registerer: reg, Now: clk.Now, Store: store, Services: set})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(service string, v float64) {
		t.Helper()
		if err := e.ConsumeScores(ctx, []score.Result{{TraceID: "t", Service: service, Metric: "citation_precision", Value: v, Weight: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		send(fmt.Sprintf("junk-%02d", i), 1)
	}
	// junk-49 breaches long enough to fire: its state must survive eviction.
	for range 40 {
		send("junk-49", 0)
	}
	for range 3 {
		clk.Add(time.Minute + time.Second)
		e.Evaluate(ctx)
	}
	if err := e.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, _ := store.List(ctx, ""); len(keys) != 50 {
		t.Fatalf("stored keys = %d, want 50", len(keys))
	}

	clk.Add(time.Hour)
	send("checkout", 1)
	e.Evaluate(ctx) // drops the evicted names' state
	if got := testutil.Sum(t, reg, "ragwatch_slo_samples_total", map[string]string{"service": "checkout"}); got != 1 {
		t.Fatalf("checkout samples = %v, want 1 under its own label", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_slo_samples_total", map[string]string{"service": "junk-00"}); got != 0 {
		t.Fatalf("junk-00 series still exported: %v", got)
	}
	e.mu.Lock()
	n := len(e.rules[0].instances)
	_, firing := e.rules[0].instances["junk-49"]
	e.mu.Unlock()
	if n != 2 || !firing {
		t.Fatalf("instances = %d (junk-49 kept: %v), want checkout and the firing junk-49", n, firing)
	}
	if err := e.Save(ctx); err != nil {
		t.Fatal(err)
	}
	keys, _ := store.List(ctx, "")
	if len(keys) != 2 {
		t.Fatalf("stored keys after eviction = %v, want 2", keys)
	}
}
