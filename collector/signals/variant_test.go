package signals

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
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
		Services:   cardinality.NewServiceSet(10),
		Variants:   cardinality.NewVariantSet(2, time.Hour, clock),
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
	}{{"baseline", 2}, {"canary", 2}, {cardinality.Other, 2}, {"", 1}} {
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

// TestStatsdVariantTag: statsd lines carry the variant tag when the record has one.
func TestStatsdVariantTag(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"datadog", "rag.requests:1|c|#service:support-bot,variant:prompt-v2"},
		{"influx", "rag.requests,service=support-bot,variant=prompt-v2:1|c"},
	} {
		conn := listenUDP(t)
		s, _ := newTestSignals(t, 10, statsdExporters(conn.LocalAddr().String(), tc.format))
		ctx := context.Background()
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r := recordB()
		r.Variant = "prompt-v2"
		consume(t, s, r)
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := readPackets(t, conn, 1)[0]; !strings.HasPrefix(got, tc.want+"\n") {
			t.Errorf("%s: packet\n%s\nwant first line %s", tc.format, got, tc.want)
		}
	}
}

// TestOTLPVariantAttribute: OTLP data points carry the variant attribute when the record has
// one, and none when it has not.
func TestOTLPVariantAttribute(t *testing.T) {
	addr, sink := startGRPCMetricsServer(t, nil)
	s, _ := newTestSignals(t, 10, otlpExporters(addr, "grpc"))
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := recordB()
	r.Variant = "prompt-v2"
	consume(t, s, r, recordB())
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var with, without bool
	for _, line := range summarize(t, sink.all()) {
		switch {
		case strings.HasPrefix(line, "ragwatch.requests{service=support-bot,variant=prompt-v2} "):
			with = true
		case strings.HasPrefix(line, "ragwatch.requests{service=support-bot} "):
			without = true
		}
	}
	if !with || !without {
		t.Fatalf("requests with variant %v, without %v:\n%s", with, without, strings.Join(summarize(t, sink.all()), "\n"))
	}
}
