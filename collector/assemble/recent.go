package assemble

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/internal/offheap"
)

// recentSet remembers the ids of the last n assembled traces, so that spans arriving after
// their trace was assembled are counted as late instead of starting a new partial trace.
//
// It is an offheap.Table ring of ids, oldest forgotten first: outside the Go heap, so the
// garbage collector neither scans it nor doubles it in its heap goal. 16 bytes per id plus 8
// to 16 of index (LoadHalf: most spans of a new trace miss, and a miss ends sooner in
// a sparse index; 50,000 ids by default: ≈ 1.3 MB, against ≈ 3 MB of heap, doubled, for a Go
// map and ring).
type recentSet struct {
	tab *offheap.Table[pcommon.TraceID, struct{}]
}

func newRecentSet(n int) recentSet {
	return recentSet{tab: offheap.NewRing[pcommon.TraceID, struct{}](offheap.LoadHalf, min(max(n, 1), offheap.MaxEntries))}
}

func (r *recentSet) has(id pcommon.TraceID) bool { return r.tab.Find(0, id) >= 0 }

func (r *recentSet) add(id pcommon.TraceID) {
	if r.tab.Find(0, id) >= 0 {
		return
	}
	if r.tab.Full(0) {
		r.tab.Remove(r.tab.Oldest(0))
	}
	r.tab.Add(0, id, struct{}{})
}
