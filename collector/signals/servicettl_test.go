package signals

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// 50 junk service names take every slot of signals.max_services. Once they have not been seen
// for signals.service_ttl, a real service gets its own label instead of "other", and the junk
// names' series are gone from /metrics (the cap bounds series, not only names).
func TestServiceTTLFreesJunkSlots(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	reg := prometheus.NewRegistry()
	s, err := New(Settings{
		Signals:    config.Signals{MaxServices: 50, ServiceTTL: time.Hour},
		Registerer: reg,
		Now:        func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		r := recordB()
		r.Service = fmt.Sprintf("junk-%02d", i)
		consume(t, s, r)
	}
	real := recordB()
	real.Service = "checkout"
	consume(t, s, real)
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "other"}); got != 1 {
		t.Fatalf("checkout while the junk is fresh: other = %v, want 1", got)
	}

	now = now.Add(time.Hour + time.Second)
	consume(t, s, real)
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "checkout"}); got != 1 {
		t.Fatalf("checkout after the junk aged out = %v, want its own series at 1", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "junk-00"}); got != 0 {
		t.Fatalf("junk-00 series still exported: %v", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ragwatch_requests_total" {
			continue
		}
		if n := len(mf.GetMetric()); n != 2 { // checkout and other
			t.Fatalf("ragwatch_requests_total has %d series, want 2", n)
		}
	}
	// The cached children of an evicted name are not reused: a junk name coming back is
	// counted in a live series.
	again := recordB()
	again.Service = "junk-00"
	consume(t, s, again)
	if got := testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": "junk-00"}); got != 1 {
		t.Fatalf("returning junk-00 = %v, want 1", got)
	}
}
