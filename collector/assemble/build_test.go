package assemble

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSortByEnd: sortByEnd orders as slices.SortStableFunc by end time does, equal ends in
// their order, for short lists (sorted in place) and long ones (sorted as a copy).
func TestSortByEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 7, smallTrace, smallTrace + 1, 200} {
		for range 50 {
			tr := &tree{nodes: make([]node, n)}
			for i := range tr.nodes {
				tr.nodes[i].end = base.Add(time.Duration(rng.IntN(5)) * time.Millisecond) // many ties
			}
			xs := rng.Perm(n)
			want := slices.Clone(xs)
			slices.SortStableFunc(want, func(x, y int) int { return tr.nodes[x].end.Compare(tr.nodes[y].end) })
			sortByEnd(tr, xs)
			if !slices.Equal(xs, want) {
				t.Fatalf("n=%d: sortByEnd %v, want %v", n, xs, want)
			}
		}
	}
}
