package sampler

import (
	"math"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/internal/offheap"
	"github.com/ragwatch/ragwatch/internal/record"
)

// entryBytes is what one entry costs without content: its 32-byte slot in the ring and its
// index cells (4 bytes each, 2 to 4 per slot), rounded up. Both live outside the Go heap;
// BenchmarkRecentEntryMemory measures them.
const entryBytes = 64

// state is what feedback arriving later may still do with an entry.
type state uint8

const (
	stateDead    state = iota // replaced by a newer entry for the same key; holds nothing
	stateSampled              // queued already: feedback must not queue it again
	stateSettled              // decided under rules feedback cannot change (kept without content)
	stateOpen                 // feedback may still sample it: kept with its content when it fits
	// stateAwaiting: sampled, and awaiting its answer (record.Record.AwaitsAnswer): kept with
	// its content, marked, until its answer comes (Stage.ConsumeContent) or answer_wait
	// passes (sweep), then queued. Leaving the cache at a bound, it is queued as it is.
	stateAwaiting
	// stateQueuedWithout: sampled and queued without the answer it awaited (after answer_wait,
	// at a bound, or too large to keep waiting): an answer coming now is too late.
	stateQueuedWithout
)

// recent remembers what was decided for the last records seen, bounded by count, bytes and
// age, so that feedback arriving after its record finds it: a record already queued is not
// queued again, and a record whose decision feedback may still change (stateOpen) keeps its
// content so that it can be sent to scoring then. Other entries hold no content.
//
// The entries are slots without pointers in an offheap.Table ring, oldest first, keyed by the
// table's seeded 64-bit hash of the record key (offheap.Hashed): outside the Go heap, so the garbage
// collector's heap goal does not double them in resident memory; the only pointers are the
// kept records, in a slice by slot allocated as content is first kept. So an entry without
// content costs entryBytes and no allocation. max_records bounds the slots: a key put again
// leaves its old slot dead (unindexed) until it is the oldest. Two live keys with the same hash
// (odds about n/2^64 for each lookup) are told apart when the entry holds its record;
// otherwise one record's decision answers for the other.
type recent struct {
	maxRecords int
	maxBytes   int64
	ttl        time.Duration

	mu      sync.Mutex                           // guards all below
	tab     *offheap.Table[offheap.Hashed, slot] // nil when maxRecords ≤ 0
	recs    []*record.Record                     // the kept records by slot; nil until one is kept
	epoch   time.Time                            // slot times count from here (the first put)
	bytes   int64
	content int // slots holding a record
	// awaiting counts the stateAwaiting slots; flush holds the records of those that left
	// the cache (at a bound, or a key put again) for the next sweep to queue.
	awaiting int
	flush    []*record.Record
}

type slot struct {
	at    int64   // nanoseconds since epoch
	p     float64 // the probability the record was decided at
	size  uint32  // bytes counted for the entry: entryBytes + its content
	state state
}

// entry is what get returns.
type entry struct {
	rec     *record.Record // nil: kept without content
	p       float64
	sampled bool // queued, or to be queued once its answer comes (stateAwaiting)
	settled bool
}

func newRecent(maxRecords int, maxBytes int64, ttl time.Duration) *recent {
	c := &recent{maxRecords: min(maxRecords, offheap.MaxEntries), maxBytes: maxBytes, ttl: ttl}
	if c.maxRecords > 0 {
		// A sparse index: most records are never looked up again, and a put looks its key
		// up first, mostly missing.
		c.tab = offheap.NewRing[offheap.Hashed, slot](offheap.LoadHalf, c.maxRecords)
	}
	return c
}

// hash hashes r.Key() without building it.
func (c *recent) hash(r *record.Record) offheap.Hashed {
	if r.SpanID == "" {
		return c.tab.Sum64(r.TraceID)
	}
	return c.tab.Sum64(r.TraceID, "/", r.SpanID)
}

// put remembers the decision for r under its key, replacing an older entry for the key. With
// keep (stateOpen, stateAwaiting) it keeps a shallow copy of r (stages treat records as
// read-only), unless the copy alone would exceed max_bytes: then only the decision is kept, or
// for stateAwaiting nothing, and put reports false.
func (c *recent) put(r *record.Record, p float64, st state, keep bool, now time.Time) bool {
	if c.tab == nil {
		return false
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
	if st == stateAwaiting && cp == nil {
		return false // waits only with its content
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch.IsZero() {
		c.epoch = now
	}
	if i := c.tab.Find(0, h); i >= 0 {
		c.kill(i)
	}
	if c.tab.Full(0) {
		c.pop()
	}
	i := c.tab.Add(0, h, slot{at: int64(now.Sub(c.epoch)), p: p, size: uint32(size), state: st})
	if cp != nil {
		if i >= len(c.recs) {
			recs := make([]*record.Record, min(max(2*len(c.recs), 64, i+1), c.tab.Cap()))
			copy(recs, c.recs)
			c.recs = recs
		}
		c.recs[i] = cp
		c.content++
	}
	if st == stateAwaiting {
		c.awaiting++
	}
	c.bytes += size
	c.evict(now)
	return true
}

// get returns the live entry for r's key.
func (c *recent) get(r *record.Record, now time.Time) (entry, bool) {
	if c.tab == nil {
		return entry{}, false
	}
	h := c.hash(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evict(now)
	i := c.tab.Find(0, h)
	if i < 0 {
		return entry{}, false
	}
	s := c.tab.Val(i)
	e := entry{p: s.p, sampled: s.state == stateSampled || s.state == stateAwaiting || s.state == stateQueuedWithout, settled: s.state == stateSettled}
	if i < len(c.recs) {
		e.rec = c.recs[i]
	}
	if e.rec != nil && !sameKey(e.rec, r) {
		return entry{}, false // another key with the same hash
	}
	return e, true
}

// markSampled drops the content of r's entry and remembers it was queued at p.
func (c *recent) markSampled(r *record.Record, p float64) {
	if c.tab == nil {
		return
	}
	h := c.hash(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.tab.Find(0, h)
	if i < 0 {
		return
	}
	c.release(i, stateSampled)
	c.tab.Val(i).p = p
}

// release drops slot i's content and sets its state st (stateSampled or stateQueuedWithout).
// Callers hold mu.
func (c *recent) release(i int, st state) {
	s := c.tab.Val(i)
	if s.state == stateAwaiting {
		c.awaiting--
	}
	c.drop(i)
	c.bytes += entryBytes - int64(s.size)
	s.state, s.size = st, entryBytes
}

// Outcomes of content that came after its record (record.Content), the `outcome` label of
// ragwatch_late_content_total.
const (
	LateContentScored     = "scored"      // the answer a sampled record awaited: queued with it
	LateContentMerged     = "merged"      // merged into a record kept here that waits (for its answer, or for feedback)
	LateContentUnchanged  = "unchanged"   // the record had it already (its spans gave it), or came with its answer
	LateContentTooLate    = "too_late"    // the record was queued without it: after sampling.recent.answer_wait
	LateContentNotSampled = "not_sampled" // the record was not sampled: its trace id or the rules, which the content does not change
	LateContentNotKept    = "not_kept"    // the record is not kept here: past sampling.recent's bounds, or never seen by this process
)

// mergeContent merges lc into the record of key's entry (record.MergeContent, on a copy): a sampled
// record that awaited its answer and now has it is returned, to be queued (its entry keeps the
// decision only); one that still lacks it, or a record kept open for feedback, keeps the merged
// copy. ok is false when no entry holds the key.
func (c *recent) mergeContent(key *record.Record, lc *record.Content, now time.Time) (queue *record.Record, outcome string, ok bool) {
	if c.tab == nil {
		return nil, "", false
	}
	h := c.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evict(now)
	i := c.tab.Find(0, h)
	if i < 0 {
		return nil, "", false
	}
	var rec *record.Record
	if i < len(c.recs) {
		rec = c.recs[i]
	}
	if rec != nil && !sameKey(rec, key) {
		return nil, "", false // another key with the same hash
	}
	s := c.tab.Val(i)
	switch {
	case s.state == stateQueuedWithout:
		return nil, LateContentTooLate, true
	case s.state == stateSettled:
		return nil, LateContentNotSampled, true
	case rec == nil && s.state == stateSampled:
		return nil, LateContentUnchanged, true // came whole: nothing awaited
	case rec == nil:
		return nil, LateContentNotKept, true // open, too large to keep
	}
	cp := *rec
	if !record.MergeContent(&cp, lc) {
		return nil, LateContentUnchanged, true
	}
	if s.state == stateAwaiting && cp.Answer != "" {
		cp.AwaitsAnswer = false
		c.release(i, stateSampled)
		return &cp, LateContentScored, true
	}
	n := entryBytes + recordSize(&cp)
	if n > math.MaxUint32 || (c.maxBytes > 0 && n > c.maxBytes) {
		return nil, LateContentUnchanged, true // the merged copy would not fit: keep what is kept
	}
	c.recs[i] = &cp
	c.bytes += n - int64(s.size)
	s.size = uint32(n)
	c.evict(now)
	return nil, LateContentMerged, true
}

// sweep takes the records that awaited their answer for wait or longer (all with all) out of
// waiting, with those that left the cache meanwhile, for the caller to queue as they are.
func (c *recent) sweep(now time.Time, wait time.Duration, all bool) []*record.Record {
	if c.tab == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.awaiting > 0 && !c.epoch.IsZero() {
		age := int64(now.Sub(c.epoch))
		for i := c.tab.Oldest(0); i >= 0 && c.awaiting > 0; i = c.tab.Newer(i) {
			s := c.tab.Val(i)
			if !all && age-s.at < int64(wait) {
				break // the ring is in arrival order: the rest waited less
			}
			if s.state == stateAwaiting {
				c.flush = append(c.flush, c.recs[i])
				c.release(i, stateQueuedWithout)
			}
		}
	}
	c.evict(now)
	out := c.flush
	c.flush = nil
	return out
}

// len returns the number of live entries.
func (c *recent) len() int {
	if c.tab == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tab.Indexed()
}

// stats returns the bytes counted against max_bytes and how many entries hold content.
func (c *recent) stats() (bytes int64, content int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.content
}

// evict drops the oldest entries past any bound. Callers hold mu.
func (c *recent) evict(now time.Time) {
	age := int64(now.Sub(c.epoch))
	for i := c.tab.Oldest(0); i >= 0; i = c.tab.Oldest(0) {
		s := c.tab.Val(i)
		if s.state != stateDead && c.tab.Len(0) <= c.maxRecords && (c.maxBytes <= 0 || c.bytes <= c.maxBytes) && age-s.at < int64(c.ttl) {
			return
		}
		c.pop()
	}
}

// pop drops the oldest slot. Callers hold mu.
func (c *recent) pop() {
	i := c.tab.Oldest(0)
	if c.tab.Val(i).state != stateDead {
		c.kill(i)
	}
	c.tab.Remove(i)
}

// kill empties the live slot i; the slot stays in the ring, unindexed, until it is the oldest.
// Callers hold mu.
func (c *recent) kill(i int) {
	c.tab.Unindex(i)
	s := c.tab.Val(i)
	if s.state == stateAwaiting {
		c.awaiting--
		c.flush = append(c.flush, c.recs[i]) // sampled: queued by the next sweep
	}
	c.drop(i)
	c.bytes -= int64(s.size)
	s.state, s.size = stateDead, 0
}

// drop releases slot i's record. Callers hold mu.
func (c *recent) drop(i int) {
	if i < len(c.recs) && c.recs[i] != nil {
		c.recs[i] = nil
		c.content--
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
