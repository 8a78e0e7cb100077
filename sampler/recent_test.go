package sampler

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// model is the recent cache written the plain way: a slice of entries, oldest first, searched
// by key. A key put again leaves an empty slot that counts against max_records until it is the
// oldest, as in the ring.
type model struct {
	max      int
	maxBytes int64
	ttl      time.Duration
	slots    []mslot
}

type mslot struct {
	key  string
	rec  *record.Record
	p    float64
	st   state
	at   time.Time
	size int64
}

func (m *model) bytes() (n int64) {
	for _, s := range m.slots {
		n += s.size
	}
	return n
}

func (m *model) evict(now time.Time) {
	for len(m.slots) > 0 {
		s := m.slots[0]
		if s.st != stateDead && len(m.slots) <= m.max && (m.maxBytes <= 0 || m.bytes() <= m.maxBytes) && now.Sub(s.at) < m.ttl {
			return
		}
		m.slots = m.slots[1:]
	}
}

func (m *model) find(key string) int {
	for i, s := range m.slots {
		if s.st != stateDead && s.key == key {
			return i
		}
	}
	return -1
}

func (m *model) put(r *record.Record, p float64, st state, keep bool, now time.Time) {
	s := mslot{key: r.Key(), p: p, st: st, at: now, size: entryBytes}
	if keep && (m.maxBytes <= 0 || entryBytes+recordSize(r) <= m.maxBytes) {
		s.rec, s.size = r, entryBytes+recordSize(r)
	}
	if i := m.find(s.key); i >= 0 {
		m.slots[i] = mslot{st: stateDead}
	}
	if len(m.slots) == m.max {
		m.slots = m.slots[1:]
	}
	m.slots = append(m.slots, s)
	m.evict(now)
}

func (m *model) get(r *record.Record, now time.Time) (entry, bool) {
	m.evict(now)
	i := m.find(r.Key())
	if i < 0 {
		return entry{}, false
	}
	s := m.slots[i]
	return entry{rec: s.rec, p: s.p, sampled: s.st == stateSampled, settled: s.st == stateSettled}, true
}

func (m *model) markSampled(r *record.Record, p float64) {
	if i := m.find(r.Key()); i >= 0 {
		m.slots[i].rec, m.slots[i].st, m.slots[i].p, m.slots[i].size = nil, stateSampled, p, entryBytes
	}
}

func (m *model) stats() (live, content int, bytes int64) {
	for _, s := range m.slots {
		if s.st != stateDead {
			live++
			if s.rec != nil {
				content++
			}
		}
	}
	return live, content, m.bytes()
}

// The table behaves as the model through random puts, lookups, markings and time steps that
// fill it, replace keys and evict by count, bytes and age.
func TestRecentMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]*record.Record, 400)
	for i := range keys {
		keys[i] = &record.Record{TraceID: fmt.Sprintf("%032x", i)}
		switch i % 7 {
		case 1:
			keys[i].SpanID = fmt.Sprintf("%016x", i%3)
		case 2: // the same Key as a trace id "<id>/<span>" with no span id
			keys[i] = &record.Record{TraceID: keys[i-1].TraceID + "/" + keys[i-1].SpanID}
		}
	}
	for _, bounds := range []struct {
		max      int
		maxBytes int64
	}{{150, 0}, {150, 60 << 10}, {10, 8 << 10}, {1, 0}} {
		t.Run(fmt.Sprintf("max_records=%d,max_bytes=%d", bounds.max, bounds.maxBytes), func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			c := newRecent(bounds.max, bounds.maxBytes, time.Minute)
			m := &model{max: bounds.max, maxBytes: bounds.maxBytes, ttl: time.Minute}
			for op := 0; op < 20000; op++ {
				k := keys[rng.IntN(len(keys))]
				switch x := rng.IntN(10); {
				case x < 5:
					r := *k
					r.Query = strings.Repeat("q", rng.IntN(3000))
					p := float64(rng.IntN(4)) / 4
					st := []state{stateSampled, stateSettled, stateOpen}[rng.IntN(3)]
					keep := st == stateOpen && rng.IntN(4) > 0
					c.put(&r, p, st, keep, now)
					m.put(&r, p, st, keep, now)
				case x < 8:
					got, ok := c.get(k, now)
					want, wok := m.get(k, now)
					if ok != wok || got.p != want.p || got.sampled != want.sampled || got.settled != want.settled ||
						(got.rec == nil) != (want.rec == nil) || got.rec != nil && (got.rec.Key() != want.rec.Key() || got.rec.Query != want.rec.Query) {
						t.Fatalf("op %d: get(%s) = %+v, %v; model %+v, %v", op, k.Key(), got, ok, want, wok)
					}
				case x < 9:
					c.markSampled(k, 0.5)
					m.markSampled(k, 0.5)
				default:
					now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
				}
				live, content, bytes := m.stats()
				gb, gc := c.stats()
				if c.len() != live || gc != content || gb != bytes {
					t.Fatalf("op %d: %d entries, %d with content, %d bytes; model %d, %d, %d", op, c.len(), gc, gb, live, content, bytes)
				}
				if c.tab.Total() > bounds.max || c.tab.Cap() != bounds.max {
					t.Fatalf("op %d: %d slots in a table of %d, max_records %d", op, c.tab.Total(), c.tab.Cap(), bounds.max)
				}
			}
		})
	}
}

// Two keys with the same hash are told apart when the entry holds its record.
func TestRecentHashCollisionWithContent(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newRecent(10, 0, time.Minute)
	a := &record.Record{TraceID: "00000000000000000000000000000001", Query: "a"}
	b := &record.Record{TraceID: "00000000000000000000000000000002"}
	c.put(a, 0.1, stateOpen, true, now)
	if e, ok := c.get(a, now); !ok || e.rec.Query != "a" {
		t.Fatalf("get(a) = %+v, %v", e, ok)
	}
	// As if a hashed like b: a's entry and record under b's hash.
	i := c.tab.Find(0, c.hash(a))
	rec, s := c.recs[i], *c.tab.Val(i)
	c.tab.Remove(i)
	j := c.tab.Add(0, c.hash(b), s)
	c.recs[i], c.recs[j] = nil, rec
	if e, ok := c.get(b, now); ok {
		t.Fatalf("get(b) found a's entry %+v", e)
	}
}

func TestRecentDisabled(t *testing.T) {
	c := newRecent(0, 0, time.Minute)
	r := &record.Record{TraceID: idLow, Query: "q"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.put(r, 0.1, stateOpen, true, now)
	c.markSampled(r, 1)
	if _, ok := c.get(r, now); ok || c.len() != 0 {
		t.Fatal("max_records 0 keeps entries")
	}
}

// BenchmarkRecentEntryMemory measures what one entry without content holds, on the Go heap and
// outside it (entryBytes should not be below their sum): 10,000 entries, all the cache holds by
// default.
func BenchmarkRecentEntryMemory(b *testing.B) {
	const n = 10000
	recs := make([]*record.Record, n)
	for i := range recs {
		recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", i)}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var held, off float64
	for i := 0; i < b.N; i++ {
		var before, after runtimeMem
		before.read()
		c := newRecent(n, 0, time.Minute)
		for _, r := range recs {
			c.put(r, 0.1, stateSettled, false, now)
		}
		after.read()
		held = float64(after.heap-before.heap) / n
		off = float64(c.tab.Bytes()) / n
		if c.len() != n {
			b.Fatal(c.len())
		}
	}
	b.ReportMetric(held, "heap-B/entry")
	b.ReportMetric(off, "offheap-B/entry")
}
