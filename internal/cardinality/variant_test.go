package cardinality

import (
	"strings"
	"testing"
	"time"
)

func TestVariantSet(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewVariantSet(2, time.Minute, func() time.Time { return now })
	check := func(in, want string, wantCapped bool) {
		t.Helper()
		if got, capped := s.Label(in); got != want || capped != wantCapped {
			t.Fatalf("Label(%q) = %q, %v; want %q, %v", in, got, capped, want, wantCapped)
		}
	}
	check("", "", false) // no variant: the label stays empty and takes no slot
	check("baseline", "baseline", false)
	check("canary", "canary", false)
	check("third", Other, true)
	check("", "", false)
	check("baseline", "baseline", false)
	check(strings.Repeat("x", 200), Other, true)

	var evicted []string
	s.OnEvict(func(v string) { evicted = append(evicted, v) })
	now = now.Add(2 * time.Minute)
	check("baseline", "baseline", false) // refreshed
	check("next", "next", false)         // canary aged out; next takes its slot
	if len(evicted) != 1 || evicted[0] != "canary" {
		t.Fatalf("evicted %v, want [canary]", evicted)
	}

	var nilSet *VariantSet
	if got, capped := nilSet.Label("a"); got != "" || capped {
		t.Fatalf("nil set: %q %v", got, capped)
	}
}
