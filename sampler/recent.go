package sampler

import (
	"container/list"
	"sync"
	"time"

	"github.com/ragwatch/ragwatch/collector/record"
)

// recent remembers the last records seen, bounded by count, bytes and age, so that negative
// feedback arriving after its record can still send the record (with its content) to scoring.
// Records already sampled are kept without content: only the fact that they were queued.
type recent struct {
	maxRecords int
	maxBytes   int64
	ttl        time.Duration

	mu    sync.Mutex // guards all below
	order *list.List // of *entry, oldest first
	byKey map[string]*list.Element
	bytes int64
}

type entry struct {
	key     string
	rec     *record.Record // nil once sampled
	p       float64        // the probability the record was decided at
	sampled bool
	at      time.Time
	size    int64
}

func newRecent(maxRecords int, maxBytes int64, ttl time.Duration) *recent {
	return &recent{maxRecords: maxRecords, maxBytes: maxBytes, ttl: ttl, order: list.New(), byKey: map[string]*list.Element{}}
}

// put stores r (a shallow copy; stages treat records as read-only) under its key.
func (c *recent) put(r *record.Record, p float64, sampled bool, now time.Time) {
	if c.maxRecords <= 0 {
		return
	}
	e := &entry{key: r.Key(), p: p, sampled: sampled, at: now, size: 64 + int64(len(r.TraceID)+len(r.SpanID))}
	if !sampled {
		cp := *r
		e.rec = &cp
		e.size += recordSize(r)
	}
	if e.size > c.maxBytes && c.maxBytes > 0 {
		e.rec, e.size = nil, 64 // too large to keep: remember the decision only
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok {
		c.remove(el)
	}
	c.byKey[e.key] = c.order.PushBack(e)
	c.bytes += e.size
	c.evict(now)
}

// get returns the live entry for key.
func (c *recent) get(key string, now time.Time) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evict(now)
	el, ok := c.byKey[key]
	if !ok {
		return entry{}, false
	}
	return *el.Value.(*entry), true
}

// markSampled drops the content of key's entry and remembers it was queued.
func (c *recent) markSampled(key string, p float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		e := el.Value.(*entry)
		c.bytes -= e.size
		e.rec, e.sampled, e.p, e.size = nil, true, p, 64+int64(len(key))
		c.bytes += e.size
	}
}

// len returns the number of entries.
func (c *recent) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// evict drops the oldest entries past any bound. Callers hold mu.
func (c *recent) evict(now time.Time) {
	for c.order.Len() > 0 {
		el := c.order.Front()
		e := el.Value.(*entry)
		if c.order.Len() <= c.maxRecords && (c.maxBytes <= 0 || c.bytes <= c.maxBytes) && now.Sub(e.at) < c.ttl {
			return
		}
		c.remove(el)
	}
}

func (c *recent) remove(el *list.Element) {
	e := el.Value.(*entry)
	c.order.Remove(el)
	delete(c.byKey, e.key)
	c.bytes -= e.size
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
