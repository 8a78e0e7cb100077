package sampler

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/internal/offheap"
	"github.com/ragwatch/ragwatch/internal/record"
)

// entryBytes is what one entry costs without content: its 32-byte slot in the ring and its
// index cells (4 bytes each, at least two per slot), rounded up. Both live outside the Go heap;
// BenchmarkRecentEntryMemory measures them.
const entryBytes = 64

// state is what feedback arriving later may still do with an entry.
type state uint8

const (
	stateDead    state = iota // replaced by a newer entry for the same key; holds nothing
	stateSampled              // queued already: feedback must not queue it again
	stateSettled              // decided under rules feedback cannot change (kept without content)
	stateOpen                 // feedback may still sample it: kept with its content when it fits
)

// recent remembers what was decided for the last records seen, bounded by count, bytes and
// age, so that feedback arriving after its record finds it: a record already queued is not
// queued again, and a record whose decision feedback may still change (stateOpen) keeps its
// content so that it can be sent to scoring then. Other entries hold no content.
//
// The entries are slots without pointers in a ring, oldest first, found through a linear-probing
// index of ring positions keyed by a seeded 64-bit hash of the record key. Ring and index live
// outside the Go heap (internal/offheap), so the garbage collector's heap goal does not double
// them in resident memory; the only pointers are the kept records, in a parallel slice
// allocated the first time content is kept. So an entry without content costs entryBytes and no
// allocation once the ring has grown. max_records bounds the slots: a key put again leaves its
// old slot empty until it is the oldest. Two live keys with the same hash (odds about n/2^64 for
// each lookup) are told apart when the entry holds its record; otherwise one record's decision
// answers for the other.
type recent struct {
	maxRecords int
	maxBytes   int64
	ttl        time.Duration
	seed       maphash.Seed

	mu      sync.Mutex           // guards all below
	slotMem *offheap.Array[slot] // the ring's memory
	slots   []slot               // ring; the n slots in use start at head
	recs    []*record.Record     // the kept records, parallel to slots; nil until one is kept
	index   *offheap.Index       // ring positions of the live slots, by hash
	head, n int
	live    int       // slots not dead: the index's entries
	epoch   time.Time // slot times count from here (the first put)
	bytes   int64
	content int // slots holding a record
}

type slot struct {
	hash  uint64
	at    int64   // nanoseconds since epoch
	p     float64 // the probability the record was decided at
	size  uint32  // bytes counted for the entry: entryBytes + its content
	state state
}

// entry is what get returns.
type entry struct {
	rec     *record.Record // nil: kept without content
	p       float64
	sampled bool
	settled bool
}

func newRecent(maxRecords int, maxBytes int64, ttl time.Duration) *recent {
	return &recent{maxRecords: maxRecords, maxBytes: maxBytes, ttl: ttl, seed: maphash.MakeSeed()}
}

// hash hashes r.Key() without building it.
func (c *recent) hash(r *record.Record) uint64 {
	if r.SpanID == "" {
		return maphash.String(c.seed, r.TraceID)
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(r.TraceID)
	h.WriteByte('/')
	h.WriteString(r.SpanID)
	return h.Sum64()
}

// put remembers the decision for r under its key, replacing an older entry for the key. With
// keep (stateOpen only) it keeps a shallow copy of r (stages treat records as read-only), unless
// the copy alone would exceed max_bytes: then only the decision is kept.
func (c *recent) put(r *record.Record, p float64, st state, keep bool, now time.Time) {
	if c.maxRecords <= 0 {
		return
	}
	h := c.hash(r)
	size := int64(entryBytes)
	var cp *record.Record
	if keep {
		if n := entryBytes + recordSize(r); (c.maxBytes <= 0 || n <= c.maxBytes) && n <= math.MaxUint32 {
			cpy := *r
			cp, size = &cpy, n
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.IsZero() {
		c.epoch = now
	}
	if i, cell := c.find(h); i >= 0 {
		c.kill(i, cell)
	}
	if c.n == c.maxRecords {
		c.pop()
	}
	if c.n == len(c.slots) {
		c.grow()
	}
	i := (c.head + c.n) % len(c.slots)
	c.slots[i] = slot{hash: h, at: int64(now.Sub(c.epoch)), p: p, size: uint32(size), state: st}
	if cp != nil {
		if c.recs == nil {
			c.recs = make([]*record.Record, len(c.slots))
		}
		c.recs[i] = cp
		c.content++
	}
	c.add(i)
	c.n++
	c.bytes += size
	c.evict(now)
}

// get returns the live entry for r's key.
func (c *recent) get(r *record.Record, now time.Time) (entry, bool) {
	h := c.hash(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evict(now)
	i, _ := c.find(h)
	if i < 0 {
		return entry{}, false
	}
	s := c.slots[i]
	e := entry{p: s.p, sampled: s.state == stateSampled, settled: s.state == stateSettled}
	if c.recs != nil {
		e.rec = c.recs[i]
	}
	if e.rec != nil && !sameKey(e.rec, r) {
		return entry{}, false // another key with the same hash
	}
	return e, true
}

// markSampled drops the content of r's entry and remembers it was queued at p.
func (c *recent) markSampled(r *record.Record, p float64) {
	h := c.hash(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := c.find(h)
	if i < 0 {
		return
	}
	c.drop(i)
	s := &c.slots[i]
	c.bytes += entryBytes - int64(s.size)
	s.state, s.p, s.size = stateSampled, p, entryBytes
}

// len returns the number of live entries.
func (c *recent) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

// stats returns the bytes counted against max_bytes and how many entries hold content.
func (c *recent) stats() (bytes int64, content int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.content
}

// find returns the ring position of the live slot with hash h and its index cell, or -1.
// Callers hold mu.
func (c *recent) find(h uint64) (i int, cell uint64) {
	if c.live == 0 {
		return -1, 0
	}
	return c.index.Find(h, func(s uint32) bool { return c.slots[s].hash == h })
}

// add indexes the live slot at ring position i (its hash absent). Callers hold mu.
func (c *recent) add(i int) {
	_, cell := c.index.Find(c.slots[i].hash, func(uint32) bool { return false })
	c.index.Set(cell, uint32(i))
	c.live++
}

// unindex empties cell. Callers hold mu.
func (c *recent) unindex(cell uint64) {
	c.index.Delete(cell, func(s uint32) uint64 { return c.slots[s].hash })
	c.live--
}

// evict drops the oldest entries past any bound. Callers hold mu.
func (c *recent) evict(now time.Time) {
	age := int64(now.Sub(c.epoch))
	for c.n > 0 {
		s := &c.slots[c.head]
		if s.state != stateDead && c.n <= c.maxRecords && (c.maxBytes <= 0 || c.bytes <= c.maxBytes) && age-s.at < int64(c.ttl) {
			return
		}
		c.pop()
	}
}

// pop drops the oldest slot. Callers hold mu.
func (c *recent) pop() {
	if c.slots[c.head].state != stateDead {
		// A live slot is the one its hash finds: a newer put kills the older.
		_, cell := c.find(c.slots[c.head].hash)
		c.kill(c.head, cell)
	}
	c.slots[c.head] = slot{}
	c.head = (c.head + 1) % len(c.slots)
	c.n--
}

// kill empties the live slot i, found at index cell; the slot stays in the ring until it is
// the oldest. Callers hold mu.
func (c *recent) kill(i int, cell uint64) {
	c.unindex(cell)
	s := &c.slots[i]
	c.drop(i)
	c.bytes -= int64(s.size)
	s.state, s.size = stateDead, 0
}

// drop releases slot i's record. Callers hold mu.
func (c *recent) drop(i int) {
	if c.recs != nil && c.recs[i] != nil {
		c.recs[i] = nil
		c.content--
	}
}

// grow doubles the ring, up to max_records, with the oldest slot first, and indexes it again
// in twice as many cells. Callers hold mu.
func (c *recent) grow() {
	size := min(max(2*len(c.slots), 64), c.maxRecords)
	mem := offheap.New[slot](size)
	slots := mem.Slice()
	k := copy(slots, c.slots[c.head:c.head+min(c.n, len(c.slots)-c.head)])
	copy(slots[k:], c.slots[:c.n-k])
	if c.recs != nil {
		recs := make([]*record.Record, size)
		k := copy(recs, c.recs[c.head:c.head+min(c.n, len(c.recs)-c.head)])
		copy(recs[k:], c.recs[:c.n-k])
		c.recs = recs
	}
	if c.slotMem != nil {
		c.slotMem.Free() // nothing refers to the old ring any more
	}
	c.slotMem, c.slots, c.head = mem, slots, 0
	if c.index != nil {
		c.index.Free()
	}
	c.index, c.live = offheap.NewIndex(size), 0
	for i := range c.n {
		if c.slots[i].state != stateDead {
			c.add(i)
		}
	}
}

// sameKey reports whether a and b have the same Key, without building it when it can.
func sameKey(a, b *record.Record) bool {
	if a.SpanID == b.SpanID {
		return a.TraceID == b.TraceID
	}
	return a.Key() == b.Key()
}

func recordSize(r *record.Record) int64 {
	n := len(r.Query) + len(r.Answer) + len(r.Reference) + len(r.Service) + len(r.Model) + 256
	for i := range r.Documents {
		n += len(r.Documents[i].ID) + len(r.Documents[i].Content) + 64 + 64*len(r.Documents[i].Metadata)
	}
	for i := range r.Citations {
		n += len(r.Citations[i].Text) + 32*len(r.Citations[i].DocumentIDs)
	}
	for k, v := range r.Attributes {
		n += len(k) + len(v) + 32
	}
	n += 32 * len(r.Relevance)
	return int64(n)
}
