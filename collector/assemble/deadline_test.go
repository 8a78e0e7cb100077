package assemble

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDeadlineListsStaySorted files traces with random deadlines (earlier and later than those
// filed, as a clock stepping back would) in random lists, moves and removes them, and checks
// after every step that each list is linked both ways and sorted, and that nextDeadline is the
// earliest of all.
func TestDeadlineListsStaySorted(t *testing.T) {
	h := newHarness(t, defaultCfg())
	a := h.a
	r := rand.New(rand.NewPCG(3, 4))
	trs := make([]*trace, 300)
	for i := range trs {
		trs[i] = &trace{list: -1}
	}
	scheduled := map[*trace]bool{}
	for step := range 20000 {
		tr := trs[r.IntN(len(trs))]
		if r.IntN(4) == 0 {
			a.unschedule(tr)
			delete(scheduled, tr)
		} else {
			a.schedule(tr, base.Add(time.Duration(r.IntN(1000))*time.Millisecond), r.IntN(numLists))
			scheduled[tr] = true
		}
		n := 0
		var earliest *trace
		for l := range a.deadlines {
			var prev *trace
			for p := a.deadlines[l].head; p != nil; p = p.dlNext {
				n++
				if p.dlPrev != prev || int(p.list) != l || !scheduled[p] {
					t.Fatalf("step %d: list %d badly linked", step, l)
				}
				if prev != nil && p.deadline.Before(prev.deadline) {
					t.Fatalf("step %d: list %d out of order", step, l)
				}
				if earliest == nil || p.deadline.Before(earliest.deadline) {
					earliest = p
				}
				prev = p
			}
			if a.deadlines[l].tail != prev {
				t.Fatalf("step %d: list %d tail wrong", step, l)
			}
		}
		if n != len(scheduled) {
			t.Fatalf("step %d: %d traces in the lists, %d scheduled", step, n, len(scheduled))
		}
		if next := a.nextDeadline(); (next == nil) != (earliest == nil) || (next != nil && !next.deadline.Equal(earliest.deadline)) {
			t.Fatalf("step %d: nextDeadline is not the earliest", step)
		}
	}
}
