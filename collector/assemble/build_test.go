package assemble

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
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

func TestAttrMapsShared(t *testing.T) {
	c := newAttrMaps()
	route := string([]byte("search")) // a buffer of its own, as a view of a request would be
	a := c.get(route, "kb", "")
	if want := map[string]string{"route": "search", "data_source": "kb"}; !maps.Equal(a, want) {
		t.Fatalf("attributes = %v, want %v", a, want)
	}
	if unsafe.StringData(a["route"]) == unsafe.StringData(route) {
		t.Fatal("the shared map holds the caller's string, not a copy")
	}
	b := c.get("search", "kb", "")
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Fatal("the same attributes gave two maps")
	}
	if d := c.get("search", "", "kb"); !maps.Equal(d, map[string]string{"route": "search", "workflow": "kb"}) {
		t.Fatalf("attributes = %v: the data source and the workflow were mixed up", d)
	}
	if got := c.get("", "", ""); got != nil {
		t.Fatalf("no attributes gave %v, want nil", got)
	}
	long := strings.Repeat("r", maxAttrValue+10)
	if got := c.get(long, "", ""); len(got["route"]) != maxAttrValue {
		t.Fatalf("route of %d bytes kept, want %d", len(got["route"]), maxAttrValue)
	}
	// More tuples than slots: every answer is still right after its slot was taken over.
	for round := range 2 {
		for i := range 3 * len(c.slots) {
			r := fmt.Sprint("route-", i)
			if got := c.get(r, "", ""); !maps.Equal(got, map[string]string{"route": r}) {
				t.Fatalf("round %d: attributes = %v, want route %s", round, got, r)
			}
		}
	}
	var none *attrMaps
	if got := none.get("x", "", ""); !maps.Equal(got, map[string]string{"route": "x"}) {
		t.Fatalf("without a cache: %v", got)
	}
}
