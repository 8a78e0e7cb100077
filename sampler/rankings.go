package sampler

import (
	"strings"
	"sync"

	"github.com/ragwatch/ragwatch/internal/record"
)

// rankings keeps what the retrieval metrics need of the last records with documents, so that
// relevance labels arriving after their record (export → label → post back: the usual case)
// are scored as labels that came with it: the document ids in the order returned, and the
// record's ids, variant, turn and upstream probability. No content. Bounded by count (a ring):
// the oldest ranking goes first, and a label for a record whose ranking went is counted
// (ragwatch_late_relevance_labels_total{outcome="not_kept"}), not scored.
//
// Each ranking costs ≈ 260 bytes with five 9-byte ids (BenchmarkStageRankingsMemory): the ids
// are copied into one string, so a ranking holds no memory of the record it came from.
type rankings struct {
	max   int
	mu    sync.Mutex // guards all below
	ring  []ranking  // grows to max; then the oldest is at next
	next  int
	byKey map[string]int
}

type ranking struct {
	key      string // record.Key(); "" for a free slot
	service  string
	variant  string
	turn     int
	upstream float64
	ids      string   // the document ids, concatenated
	ends     []uint32 // where each id ends in ids
}

func newRankings(n int) *rankings {
	if n <= 0 {
		return nil
	}
	return &rankings{max: n, byKey: map[string]int{}}
}

// put keeps r's ranking, replacing an older one for its key.
func (k *rankings) put(r *record.Record) {
	if k == nil || len(r.Documents) == 0 {
		return
	}
	n := 0
	for i := range r.Documents {
		n += len(r.Documents[i].ID)
	}
	var b strings.Builder
	b.Grow(n)
	ends := make([]uint32, len(r.Documents))
	for i := range r.Documents {
		b.WriteString(r.Documents[i].ID)
		ends[i] = uint32(b.Len())
	}
	rk := ranking{key: r.Key(), service: r.Service, variant: r.Variant, turn: r.Turn,
		upstream: r.UpstreamProbability, ids: b.String(), ends: ends}
	k.mu.Lock()
	defer k.mu.Unlock()
	if i, ok := k.byKey[rk.key]; ok {
		k.ring[i] = rk
		return
	}
	i := len(k.ring)
	if i < k.max {
		k.ring = append(k.ring, rk)
	} else {
		i = k.next
		delete(k.byKey, k.ring[i].key) // the oldest goes
		k.ring[i] = rk
		k.next = (k.next + 1) % k.max
	}
	k.byKey[rk.key] = i
}

// record returns a record carrying the ranking kept for key (document ids only), or nil.
func (k *rankings) record(traceID, spanID string) *record.Record {
	if k == nil {
		return nil
	}
	key := traceID
	if spanID != "" {
		key += "/" + spanID
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	i, ok := k.byKey[key]
	if !ok {
		return nil
	}
	rk := &k.ring[i]
	r := &record.Record{TraceID: traceID, SpanID: spanID, Service: rk.service, Variant: rk.variant,
		Turn: rk.turn, UpstreamProbability: rk.upstream, Documents: make([]record.Document, len(rk.ends))}
	start := uint32(0)
	for j, end := range rk.ends {
		r.Documents[j].ID = rk.ids[start:end]
		start = end
	}
	return r
}

func (k *rankings) len() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.byKey)
}
