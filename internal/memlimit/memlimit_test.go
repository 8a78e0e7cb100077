package memlimit

import (
	"context"
	"sync"
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

// A burst of large requests arriving together, all while the heap sample is low: without
// reservations every one passes the heap check before any allocates. With them, one is admitted
// and the rest are refused until it is done; small requests still fit beside it.
func TestAdmitOneLargeRequestAtATime(t *testing.T) {
	g := New(100, prometheus.NewRegistry()) // 100 MiB
	g.read = func() uint64 { return 20 << 20 }
	g.sample()

	const n = 16
	large := int64(16 << 20) // 64 MiB charged: one fits in the 80 MiB left, two do not
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []func()
		refused  int
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			release, ok := g.Admit(large)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				releases = append(releases, release)
			} else {
				refused++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(releases) != 1 || refused != n-1 {
		t.Fatalf("admitted %d, refused %d of %d concurrent large requests; want 1 and %d", len(releases), refused, n, n-1)
	}
	if got := testutil.ToFloat64(g.refused); got != n-1 {
		t.Fatalf("refusals counted = %v, want %d", got, n-1)
	}
	// A small request fits beside the large one.
	small, ok := g.Admit(64 << 10)
	if !ok {
		t.Fatal("small request refused beside one large request")
	}
	small()
	// Once the large one is done, the next is admitted; releasing twice changes nothing.
	releases[0]()
	releases[0]()
	next, ok := g.Admit(large)
	if !ok {
		t.Fatal("large request refused after the previous one finished")
	}
	if _, ok := g.Admit(large); ok {
		t.Fatal("second large request admitted beside the first")
	}
	next()
	// A request larger than the whole limit is admitted when nothing is in flight.
	huge, ok := g.Admit(200 << 20)
	if !ok {
		t.Fatal("oversized request refused with nothing in flight")
	}
	huge()
	// Over the limit, nothing is admitted.
	g.read = func() uint64 { return 101 << 20 }
	g.sample()
	if _, ok := g.Admit(1); ok {
		t.Fatal("admitted above the limit")
	}
	// No limit admits everything.
	r, ok := New(0, nil).Admit(1 << 40)
	if New(0, nil).Limit() == 0 && (!ok || r == nil) {
		t.Fatal("no limit refused")
	}
}
