package memlimit

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRefusesAboveLimitWithHysteresis(t *testing.T) {
	g := New(100, prometheus.NewRegistry())
	var heap uint64
	g.read = func() uint64 { return heap }
	for _, step := range []struct {
		heapMiB uint64
		refuse  bool
	}{
		{50, false}, {101, true}, {95, true}, {89, false}, {99, false}, {120, true},
	} {
		heap = step.heapMiB << 20
		g.sample()
		if got := g.Refuse(); got != step.refuse {
			t.Fatalf("heap %d MiB: Refuse() = %v, want %v", step.heapMiB, got, step.refuse)
		}
	}
	if got := testutil.ToFloat64(g.refused); got != 3 {
		t.Fatalf("refusals = %v, want 3", got)
	}
}

func TestNoLimitNeverRefusesAndLifecycle(t *testing.T) {
	g := New(0, nil)
	if g.Limit() != 0 {
		t.Skip("GOMEMLIMIT is set in this environment")
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.Refuse() {
		t.Fatal("no limit refused")
	}
	_ = g.Shutdown(context.Background())
	_ = g.Shutdown(context.Background())
	var nilGuard *Guard
	if nilGuard.Refuse() || nilGuard.Shutdown(context.Background()) != nil {
		t.Fatal("nil guard misbehaves")
	}
	h := New(1, nil)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.used.Load() == 0 {
		t.Fatal("heap not sampled at start")
	}
	_ = h.Shutdown(context.Background())
}
