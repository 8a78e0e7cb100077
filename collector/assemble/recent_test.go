package assemble

import (
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TestRecentSetModel checks the set against the plain ring and map it replaced, over random
// adds and lookups of ids drawn from a small pool (so ids repeat, leave and come back), for
// sizes that make the index tiny (long probe runs, wrap-around) and larger ones.
func TestRecentSetModel(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 1000} {
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		r := newRecentSet(n)
		ring := make([]pcommon.TraceID, n)
		ids := map[pcommon.TraceID]bool{}
		next, full := 0, false
		pool := make([]pcommon.TraceID, 3*n+5)
		for i := range pool {
			for j := range 16 {
				pool[i][j] = byte(rng.Uint32())
			}
		}
		for step := range 20000 {
			id := pool[rng.IntN(len(pool))]
			if got, want := r.has(id), ids[id]; got != want {
				t.Fatalf("n=%d step %d: has(%x) = %v, want %v", n, step, id, got, want)
			}
			if rng.IntN(2) == 0 {
				continue
			}
			r.add(id)
			if !ids[id] {
				if full {
					delete(ids, ring[next])
				}
				ring[next] = id
				ids[id] = true
				if next++; next == n {
					next, full = 0, true
				}
			}
		}
		for _, id := range pool { // every id once more, after all the churn
			if r.has(id) != ids[id] {
				t.Fatalf("n=%d: has(%x) = %v at the end", n, id, r.has(id))
			}
		}
		if r.tab.Indexed() != len(ids) || r.tab.Len(0) != len(ids) {
			t.Fatalf("n=%d: %d ids indexed, %d held, want %d", n, r.tab.Indexed(), r.tab.Len(0), len(ids))
		}
	}
}

func BenchmarkRecentSet(b *testing.B) {
	r := newRecentSet(50000)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]pcommon.TraceID, 1<<16)
	for i := range ids {
		for j := range 16 {
			ids[i][j] = byte(rng.Uint32())
		}
	}
	for i := 0; b.Loop(); i++ {
		id := ids[i&(len(ids)-1)]
		if !r.has(id) {
			r.add(id)
		}
	}
}
