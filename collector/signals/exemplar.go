package signals

import (
	"sort"
	"sync/atomic"
	"time"
)

// ExemplarInterval is how often at most one bucket of one series offers a new exemplar, in
// Prometheus and in OTLP alike. client_golang keeps only the latest exemplar per bucket and the
// OTel SDK keeps one sampled exemplar per bucket per export; a scrape or an export comes every
// 15 s or so, so one offer per bucket per second loses nothing a user can see, while an offer
// costs about ten allocations in client_golang and a clock read plus a reservoir update in the
// OTel SDK. Rare buckets (the slow request, the poor retrieval) always get theirs because their
// last offer is old.
const ExemplarInterval = time.Second

// exemplarGate lets one exemplar per bucket through per ExemplarInterval. Lock-free: a lost
// race only means one exemplar more or less.
type exemplarGate struct {
	bounds []float64      // nil for a counter: one slot
	last   []atomic.Int64 // unix nanoseconds of the last exemplar, per bucket (+Inf last)
}

func newExemplarGate(bounds []float64) *exemplarGate {
	return &exemplarGate{bounds: bounds, last: make([]atomic.Int64, len(bounds)+1)}
}

func (g *exemplarGate) allow(v float64, now int64) bool {
	i := 0
	if g.bounds != nil {
		i = sort.SearchFloat64s(g.bounds, v) // first bound >= v: the bucket "le" holds v
	}
	slot := &g.last[i]
	last := slot.Load()
	if last != 0 && now-last < int64(ExemplarInterval) {
		return false
	}
	return slot.CompareAndSwap(last, now)
}
