package sampler

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// entryBytes is what one entry costs without content: its 32-byte slot in the ring and its
// map entry (a uint64 key and value, with the map's control bytes and spare capacity), rounded
// up. BenchmarkRecentEntryMemory measures it.
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
// The entries are slots without pointers in a ring, oldest first, found through a map from a
// seeded 64-bit hash of the record key to the entry's sequence number; the only pointers are the
// kept records, in a parallel slice allocated the first time content is kept. So an entry
// without content costs entryBytes and no allocation once the ring has grown, and the collector
// scans one word per slot only when content is kept at all. max_records bounds the slots: a key
// put again leaves its old slot empty until it is the oldest. Two live keys with the same hash
// (odds about n/2^64 for each lookup) are told apart when the entry holds its record; otherwise
// one record's decision answers for the other.
type recent struct {
	maxRecords int
	maxBytes   int64
	ttl        time.Duration
	seed       maphash.Seed

	mu      sync.Mutex       // guards all below
	slots   []slot           // ring; the n live slots start at head
	recs    []*record.Record // the kept records, parallel to slots; nil until one is kept
	head, n int
	first   uint64            // sequence number of slots[head]
	byKey   map[uint64]uint64 // key hash → sequence number of its slot
	epoch   time.Time         // slot times count from here (the first put)
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
	return &recent{maxRecords: maxRecords, maxBytes: maxBytes, ttl: ttl, seed: maphash.MakeSeed(), byKey: map[uint64]uint64{}}
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
	if seq, ok := c.byKey[h]; ok {
		c.kill(c.index(seq)) // its map entry is overwritten below
	}
	if c.n == c.maxRecords {
		c.pop()
	}
	if c.n == len(c.slots) {
		c.grow()
	}
	i := c.index(c.first + uint64(c.n))
	c.slots[i] = slot{hash: h, at: int64(now.Sub(c.epoch)), p: p, size: uint32(size), state: st}
	if cp != nil {
		if c.recs == nil {
			c.recs = make([]*record.Record, len(c.slots))
		}
		c.recs[i] = cp
		c.content++
	}
	c.byKey[h] = c.first + uint64(c.n)
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
	seq, ok := c.byKey[h]
	if !ok {
		return entry{}, false
	}
	i := c.index(seq)
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
	seq, ok := c.byKey[h]
	if !ok {
		return
	}
	i := c.index(seq)
	c.drop(i)
	s := &c.slots[i]
	c.bytes += entryBytes - int64(s.size)
	s.state, s.p, s.size = stateSampled, p, entryBytes
}

// len returns the number of live entries.
func (c *recent) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// stats returns the bytes counted against max_bytes and how many entries hold content.
func (c *recent) stats() (bytes int64, content int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.content
}

// index returns the ring position of a live sequence number. Callers hold mu.
func (c *recent) index(seq uint64) int {
	return (c.head + int(seq-c.first)) % len(c.slots)
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
	if s := c.slots[c.head]; s.state != stateDead {
		delete(c.byKey, s.hash) // a live slot is the one its hash maps to: a newer put kills it
	}
	c.kill(c.head)
	c.slots[c.head] = slot{}
	c.head = (c.head + 1) % len(c.slots)
	c.first++
	c.n--
}

// kill empties slot i; the slot stays in the ring until it is the oldest. The map entry for its
// hash, which points to it while it is live, is left to the caller. Callers hold mu.
func (c *recent) kill(i int) {
	s := &c.slots[i]
	if s.state == stateDead {
		return
	}
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

// grow doubles the ring, up to max_records, with the oldest slot first. Callers hold mu.
func (c *recent) grow() {
	size := min(max(2*len(c.slots), 64), c.maxRecords)
	slots := make([]slot, size)
	k := copy(slots, c.slots[c.head:])
	copy(slots[k:], c.slots[:c.head])
	if c.recs != nil {
		recs := make([]*record.Record, size)
		k := copy(recs, c.recs[c.head:])
		copy(recs[k:], c.recs[:c.head])
		c.recs = recs
	}
	c.slots, c.head = slots, 0
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
