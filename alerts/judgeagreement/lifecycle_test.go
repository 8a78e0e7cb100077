package judgeagreement

import (
	"context"
	"fmt"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestStartPrunesAndShutdownStops: Start's loop drops pairs older than the window on its own
// (the alert engine no longer does it for the tracker); Shutdown is safe without Start,
// idempotent, stops the loop, and a stopped tracker starts again.
func TestStartPrunesAndShutdownStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	s := agreementCfg
	s.PruneEvery = 5 * time.Millisecond
	h := newHarness(t, s)
	if err := h.a.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown without start: %v", err)
	}
	if err := h.a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.a.Start(ctx); err == nil {
		t.Fatal("a second Start must fail")
	}
	h.judged(t, "t1", "", "faithfulness", "openai", 0.5)
	if err := h.a.ConsumeLabel(ctx, record.Label{TraceID: "t1", Values: map[string]float64{"faithfulness": 0.5}}); err != nil {
		t.Fatal(err)
	}
	pairs := func() float64 { return promtestutil.ToFloat64(h.a.pairs.WithLabelValues("faithfulness", "openai")) }
	if got := pairs(); got != 1 {
		t.Fatalf("pairs = %v, want 1", got)
	}
	h.clk.Add(25 * time.Hour) // past the 1d window: the loop alone must drop the pair
	testutil.CheckFor(t, 5*time.Second, 5*time.Millisecond, "the loop prunes the old pair", func() error {
		if got := pairs(); got != 0 {
			return fmt.Errorf("pairs = %v", got)
		}
		return nil
	})
	for range 2 {
		if err := h.a.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.a.Start(ctx); err != nil {
		t.Fatalf("start after shutdown: %v", err)
	}
	if err := h.a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
