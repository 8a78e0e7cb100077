package cardinality

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A flood of 50 junk service names fills the cap. Without a TTL they hold it forever and a real
// service that arrives later is "other". With one, once they have not been seen for the TTL the
// real service gets its own label, and the junk names' series are deleted by their owner.
func TestJunkNamesAgeOut(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	s := NewServiceSetTTL(50, time.Hour, clock)
	forever := NewServiceSet(50)

	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"service", "reason"})
	var mu sync.Mutex
	var evicted []string
	s.OnEvict(func(name string) {
		mu.Lock()
		evicted = append(evicted, name)
		mu.Unlock()
		vec.DeletePartialMatch(prometheus.Labels{"service": name})
	})

	for i := range 50 {
		junk := fmt.Sprintf("junk-%02d", i)
		vec.WithLabelValues(s.Label(junk), "a").Inc()
		forever.Label(junk)
	}
	// The real service keeps sending: it is refused a slot while the junk is fresh.
	if got := s.Label("checkout"); got != Other {
		t.Fatalf("before the TTL: %q, want %q", got, Other)
	}
	now = now.Add(30 * time.Minute)
	s.Label("junk-07") // one junk name is still in use
	now = now.Add(31 * time.Minute)
	if got := s.Label("checkout"); got != "checkout" {
		t.Fatalf("after the junk aged out: %q, want its own label", got)
	}
	if got := forever.Label("checkout"); got != Other {
		t.Fatalf("without a TTL: %q, want %q (the squatting this fixes)", got, Other)
	}
	vec.WithLabelValues("checkout", "a").Inc()

	sort.Strings(evicted)
	if len(evicted) != 49 || evicted[0] != "junk-00" || evicted[7] != "junk-08" {
		t.Fatalf("evicted %d names: %v; want the 49 not seen for an hour", len(evicted), evicted)
	}
	if got := testutil.CollectAndCount(vec); got != 2 {
		t.Fatalf("series left = %d, want 2 (junk-07 and checkout)", got)
	}
	if got := s.Label("junk-07"); got != "junk-07" {
		t.Fatalf("a name in use lost its slot: %q", got)
	}
	// The freed slots are open to any name again, up to the cap.
	for i := range 48 {
		if got := s.Label(fmt.Sprintf("new-%02d", i)); got == Other {
			t.Fatalf("new-%02d refused with free slots", i)
		}
	}
	if got := s.Label("one-too-many"); got != Other {
		t.Fatalf("past the cap: %q", got)
	}
}

// A name seen within the TTL is never evicted, however many new names knock.
func TestSeenNamesStay(t *testing.T) {
	now := time.Unix(0, 0)
	s := NewServiceSetTTL(2, time.Minute, func() time.Time { return now })
	s.OnEvict(func(name string) { t.Errorf("evicted %q", name) })
	s.Label("a")
	s.Label("b")
	for i := range 100 {
		now = now.Add(10 * time.Second)
		s.Label("a")
		s.Label("b")
		if got := s.Label(fmt.Sprint("x", i)); got != Other {
			t.Fatalf("x%d = %q", i, got)
		}
	}
}

// LabelAt ages names by the time it is given, not by reading the set's clock: a record's path
// reads the clock once for all its labels.
func TestLabelAtUsesTheGivenTime(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := NewServiceSetTTL(2, time.Hour, func() time.Time { return t0 }) // never moves
	for _, name := range []string{"a", "b"} {
		if got := s.LabelAt(name, t0); got != name {
			t.Fatalf("%s: %q", name, got)
		}
	}
	if got := s.LabelAt("c", t0.Add(30*time.Minute)); got != Other {
		t.Fatalf("c within the TTL: %q, want %q", got, Other)
	}
	s.LabelAt("b", t0.Add(90*time.Minute)) // b seen again; a not since t0
	if got := s.LabelAt("c", t0.Add(90*time.Minute)); got != "c" {
		t.Fatalf("c once a aged out: %q, want c", got)
	}
	if got := s.LabelAt("b", t0.Add(90*time.Minute)); got != "b" {
		t.Fatalf("b, seen within the TTL: %q, want b", got)
	}
	v := NewVariantSet(1, time.Hour, func() time.Time { return t0 })
	if got, capped := v.LabelAt("canary", t0); got != "canary" || capped {
		t.Fatalf("canary: %q %v", got, capped)
	}
	if got, capped := v.LabelAt("baseline", t0.Add(2*time.Hour)); got != "baseline" || capped {
		t.Fatalf("baseline after canary aged out: %q %v", got, capped)
	}
}
