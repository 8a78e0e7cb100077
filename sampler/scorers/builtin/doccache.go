package builtin

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
)

// docEntry is what indexing derives from one document's content alone, whatever the other
// documents of the record: its sentences and windows as sets of local term ids (0, 1, … in
// order of first occurrence in the document) and the stem of each local id. A service
// retrieves its popular passages again and again; with a document's entry at hand, indexing
// it again is a matter of giving its stems this record's ids, not of splitting sentences and
// normalising words.
//
// An entry in the cache is never modified: the scoring goroutines read it without a lock.
type docEntry struct {
	content string     // the indexed content: the cache's key
	stems   string     // the stems of local ids 0, 1, … end to end (no pointer per stem for the GC to follow)
	ends    []int32    // by local id: where its stem ends in stems
	terms   []int32    // local ids; each sentence's and window's terms are a run of it, sorted and unique
	sents   []docSent  // the sentences that hold a term, in order
	wins    [][2]int32 // the windows of long sentences: runs of terms
	size    int        // bytes held, counted against the cache's bound
}

// docSent is one sentence of a document.
type docSent struct {
	uniq [2]int32 // its distinct terms, terms[from:to]; also its one window when wins is empty
	wins [2]int32 // the windows of a sentence of more than windowTerms terms, wins[from:to]
	neg  bool     // holds a negation cue
}

// windows returns how many windows the document has.
func (e *docEntry) windows() int {
	n := len(e.sents)
	for _, s := range e.sents {
		if s.wins[1] > s.wins[0] {
			n += int(s.wins[1]-s.wins[0]) - 1
		}
	}
	return n
}

// appendSet appends the sorted distinct ids of ids to e.terms and returns their run.
func (e *docEntry) appendSet(ids []int32) [2]int32 {
	from := len(e.terms)
	e.terms = append(e.terms, ids...)
	set := e.terms[from:]
	slices.Sort(set)
	set = slices.Compact(set)
	e.terms = e.terms[:from+len(set)]
	return [2]int32{int32(from), int32(len(e.terms))}
}

// Bytes counted for an entry beyond its content, stems and arrays: the entry itself, its
// slices' headers and its slot in the cache's map (an estimate that errs high).
const entryOverhead = 256

// sentSize is the size of a docSent.
const sentSize = 20

// clone returns a copy of e, whose stems (by local id) are stems, that refers to nothing of
// the record it was read from: the content and the stems share one new string, and each
// slice is allocated to its length.
func (e *docEntry) clone(stems []string) *docEntry {
	n := len(e.content)
	for _, s := range stems {
		n += len(s)
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(e.content)
	c := &docEntry{
		ends:  make([]int32, len(stems)),
		terms: slices.Clone(e.terms),
		sents: slices.Clone(e.sents),
		wins:  slices.Clone(e.wins),
	}
	for l, s := range stems {
		sb.WriteString(s)
		c.ends[l] = int32(sb.Len() - len(e.content))
	}
	buf := sb.String()
	c.content, c.stems = buf[:len(e.content)], buf[len(e.content):]
	c.size = entryOverhead + len(buf) + 4*len(c.ends) + 4*len(c.terms) + sentSize*len(c.sents) + 8*len(c.wins)
	return c
}

// docCacheBytes bounds the memory the builtin scorer keeps for the documents it indexed
// lately (their content and derived terms), shared by every scorer of the process: ≈ 1,200
// documents of 1 KB, a small share of a sidecar's memory (the GC keeps up to as much again).
const docCacheBytes = 4 << 20

// sharedDocCache serves every index of the process.
var sharedDocCache = newDocCache(docCacheBytes)

// docCache keeps the entries of recently indexed documents, keyed by their content (a map
// compares whole keys: two documents never share an entry), within a bound on the bytes they
// hold. It has two generations of at most half the bound each: new entries go to the current
// one; when it is full it becomes the previous one, whose entries are dropped; an entry found
// in the previous generation moves back to the current one. Documents read again and again
// stay, a stream of new documents costs each a map insertion. A nil *docCache keeps nothing.
//
// It is safe for concurrent use.
type docCache struct {
	half     int // bytes per generation
	maxEntry int // larger entries are not kept: they would push out many small ones

	mu                  sync.Mutex // guards the fields below
	cur, prev           map[string]*docEntry
	curBytes, prevBytes int
	hits, misses        int
}

func newDocCache(maxBytes int) *docCache {
	return &docCache{
		half: maxBytes / 2, maxEntry: maxBytes / 16,
		cur: map[string]*docEntry{}, prev: map[string]*docEntry{},
	}
}

// get returns the entry of content, nil when there is none.
func (c *docCache) get(content string) *docEntry {
	// An entry holds at least its content: a longer content cannot have one.
	if c == nil || content == "" || len(content) > c.maxEntry {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cur[content]; ok {
		c.hits++
		return e
	}
	if e, ok := c.prev[content]; ok {
		c.hits++
		delete(c.prev, content)
		c.prevBytes -= e.size
		c.insert(e)
		return e
	}
	c.misses++
	return nil
}

// put keeps a copy of e, whose stems (by local id) are stems: they and e may refer to the
// record's memory and to scratch buffers.
func (c *docCache) put(e *docEntry, stems []string) {
	if c == nil || len(e.content) > c.maxEntry {
		return
	}
	e = e.clone(stems)
	if e.size > c.maxEntry {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[e.content]; ok { // another goroutine read the same document
		return
	}
	if old, ok := c.prev[e.content]; ok {
		delete(c.prev, e.content)
		c.prevBytes -= old.size
	}
	c.insert(e)
}

// insert adds e to the current generation, turning it into the previous one first when e
// would not fit. c.mu is held.
func (c *docCache) insert(e *docEntry) {
	if c.curBytes+e.size > c.half {
		c.prev, c.prevBytes = c.cur, c.curBytes
		c.cur, c.curBytes = make(map[string]*docEntry, len(c.prev)), 0
	}
	c.cur[e.content] = e
	c.curBytes += e.size
}

// docCacheStats is what a cache holds and has served.
type docCacheStats struct {
	entries, bytes, hits, misses int
}

func (c *docCache) stats() docCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return docCacheStats{
		entries: len(c.cur) + len(c.prev), bytes: c.curBytes + c.prevBytes,
		hits: c.hits, misses: c.misses,
	}
}

// RegisterMetrics registers the document cache's metrics with reg: how often the builtin
// scorer found a document's index work done before, and what the cache holds. The cache is the
// process's, so a second registration with the same registry is not an error.
func RegisterMetrics(reg prometheus.Registerer) error {
	c := sharedDocCache
	lookups := func(hit bool) func() float64 {
		return func() float64 {
			st := c.stats()
			if hit {
				return float64(st.hits)
			}
			return float64(st.misses)
		}
	}
	const lookupsHelp = "Documents the builtin scorer indexed, by whether the index work of the same content was in its cache (result: hit, miss)."
	for _, col := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ragwatch_builtin_document_cache_lookups_total", Help: lookupsHelp,
			ConstLabels: prometheus.Labels{"result": "hit"}}, lookups(true)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ragwatch_builtin_document_cache_lookups_total", Help: lookupsHelp,
			ConstLabels: prometheus.Labels{"result": "miss"}}, lookups(false)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ragwatch_builtin_document_cache_bytes",
			Help: "Bytes the builtin scorer's cache of indexed documents holds (at most 4 MiB)."},
			func() float64 { return float64(c.stats().bytes) }),
	} {
		if _, err := promreg.Register(reg, col); err != nil {
			return fmt.Errorf("builtin scorer: register metrics: %w", err)
		}
	}
	return nil
}
