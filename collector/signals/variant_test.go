package signals

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestVariantLabel: the variant of a record labels its request metrics, capped at
// variants.max_values distinct values; the rest is "other", counted; no variant stays "".
func TestVariantLabel(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	reg := prometheus.NewRegistry()
	s, err := New(Settings{
		Signals:    config.Signals{MaxServices: 10},
		Services:   labels.NewServiceSet(10),
		Variants:   labels.NewVariantSet(2, time.Hour, clock),
		Registerer: reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:        clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"baseline", "canary", "baseline", "third", "fourth", "", "canary"} {
		r := recordA()
		r.Variant = v
		consume(t, s, r)
	}
	for _, tc := range []struct {
		variant string
		want    float64
	}{{"baseline", 2}, {"canary", 2}, {labels.Other, 2}, {"", 1}} {
		got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "support-bot", "variant": tc.variant})
		if got != tc.want {
			t.Errorf("requests{variant=%q} = %v, want %v", tc.variant, got, tc.want)
		}
		if n := testutil.Sum(t, reg, "ragwatch_request_duration_seconds",
			map[string]string{"service": "support-bot", "variant": tc.variant, "stage": "total"}); n != tc.want {
			t.Errorf("duration count{variant=%q} = %v, want %v", tc.variant, n, tc.want)
		}
	}
	if got := testutil.Sum(t, reg, "ragwatch_variants_overflow_total", nil); got != 2 {
		t.Errorf("ragwatch_variants_overflow_total = %v, want 2", got)
	}
	// Every series of a variant that aged out goes; the next variant gets its slot.
	now = now.Add(2 * time.Hour)
	r := recordA()
	r.Variant = "canary-2"
	consume(t, s, r)
	r = recordA()
	r.Variant = "baseline"
	consume(t, s, r)
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"variant": "canary"}); got != 0 {
		t.Errorf("aged-out variant still has %v requests", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"variant": "canary-2"}); got != 1 {
		t.Errorf("requests{variant=canary-2} = %v, want 1", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"variant": "baseline"}); got != 1 {
		t.Errorf("requests{variant=baseline} after re-admission = %v, want 1", got)
	}
}
