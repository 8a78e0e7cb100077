package join

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/natsconn"
)

// entry is the persisted state of one trace in the KV bucket: ids, times and feedback
// scores, no content.
type entry struct {
	TraceID    string    `json:"t"`
	Seen       bool      `json:"seen,omitempty"`
	Service    string    `json:"svc,omitempty"`
	SpanID     string    `json:"span,omitempty"`
	Variant    string    `json:"var,omitempty"` // absent in entries written before it was kept: none
	RecordTime time.Time `json:"rt,omitzero"`   // written for the bucket's readers; the join keeps no record time
	Pending    []pending `json:"p,omitempty"`
	Expires    time.Time `json:"exp"`
}

// Bucket key prefixes, one per input: record-seen states and pending feedback and labels live
// under separate keys so several ragwatch processes sharing one bucket never overwrite each
// other's; pairs and sessions have their own.
const (
	seenPrefix = "seen."
	pendPrefix = "pend."
	pairPrefix = "pair."
	sessPrefix = "sess."
)

// prefixes is the key prefix of what waits in each namespace.
var prefixes = [numNS]string{nsTrace: pendPrefix, nsPair: pairPrefix, nsSession: sessPrefix}

// kvKey maps a trace id to a valid KV key: ids made of safe characters are kept (readable with
// `nats kv get`), others are hashed.
func kvKey(traceID string) string {
	if len(traceID) > 0 && len(traceID) <= 128 {
		ok := true
		for i := 0; i < len(traceID); i++ {
			c := traceID[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
				ok = false
				break
			}
		}
		if ok {
			return traceID
		}
	}
	sum := sha256.Sum256([]byte(traceID))
	return "h_" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// pendStateLocked is the feedback waiting for the trace in slot i (key "pend.<trace>"; none
// deletes it).
func (j *Join) pendStateLocked(i int, traceID string) entry {
	return entry{TraceID: traceID, Pending: append([]pending(nil), j.tab.pendingOf(i)...), Expires: j.expiresAt(i)}
}

// opsQueueSize bounds the KV work waiting for the writer.
const opsQueueSize = 4096

// Kinds of queued KV work.
const (
	opSeen      = iota // put a record's seen state (e)
	opPend             // put the trace's pending feedback as it is now, or delete its key
	opCheck            // look up whether another ragwatch saw the trace's record
	opPairClaim        // store a pair's first half, or complete the pair with another's
	opPairDone         // mark a pair complete (exp)
	opDelete           // delete key
)

type op struct {
	kind    int
	traceID string // the trace, pair or session id
	e       *entry // opSeen; a pointer keeps the queue's buffer small (opsQueueSize ops live always)
	exp     time.Time
	key     string // opDelete
}

// writer does the queued KV work until Shutdown, then flushes the queued writes; lookups left
// in the queue are skipped (the feedback stays persisted and the next start's sweep looks).
func (j *Join) writer() {
	defer j.wg.Done()
	ctx := context.Background()
	// Sessions: written as they change, coalesced, only when other sidecars
	// read them from the shared bucket; else once, at shutdown.
	var flush <-chan time.Time
	if j.s.PersistSeen {
		t := time.NewTicker(j.s.SessionFlushInterval)
		defer t.Stop()
		flush = t.C
	}
	for {
		select {
		case o := <-j.ops:
			j.do(ctx, o, true)
		case <-flush:
			j.flushSessions(ctx)
		case <-j.stop:
			// Under mu: a session that saw the writer running marked itself dirty before
			// this, so the last flush below writes it; later ones write themselves.
			j.mu.Lock()
			j.async.Store(false)
			j.mu.Unlock()
			for {
				select {
				case o := <-j.ops:
					j.do(ctx, o, false)
				default:
					if j.s.PersistSeen {
						j.flushSessions(ctx)
					} else {
						j.writeAllSessions(ctx)
					}
					return
				}
			}
		}
	}
}

func (j *Join) do(ctx context.Context, o op, lookups bool) {
	switch o.kind {
	case opSeen:
		j.persist(ctx, seenPrefix+kvKey(o.e.TraceID), *o.e)
	case opPend:
		j.writePending(ctx, o.traceID)
	case opCheck:
		if !lookups {
			return
		}
		if st, ok := j.lookupSeen(ctx, o.traceID, j.now()); ok {
			_ = j.joinRemote(ctx, st, nil) // errors of the next stages are theirs to count
		}
	case opPairClaim:
		j.claimPair(ctx, o.traceID)
	case opPairDone:
		j.putPairDone(ctx, o.traceID, o.exp)
	case opDelete:
		j.deleteKV(ctx, o.key)
	}
}

// enqueue hands KV work to the writer without waiting; a full queue drops it (the join keeps
// working from memory, and the sweep retries lookups) and counts it.
func (j *Join) enqueue(o op) {
	select {
	case j.ops <- o:
	default:
		j.kvErrors.WithLabelValues("queue_full").Inc()
	}
}

// writePending stores the trace's pending feedback as the table holds it now, or deletes the
// key when none is left: queued writes of one trace cannot overwrite a newer state.
func (j *Join) writePending(ctx context.Context, traceID string) {
	j.mu.Lock()
	var e entry
	if i := j.tab.find(traceID); i >= 0 {
		e = j.pendStateLocked(i, traceID)
	}
	j.mu.Unlock()
	if len(e.Pending) == 0 {
		j.deleteKey(ctx, traceID)
		return
	}
	j.persist(ctx, pendPrefix+kvKey(traceID), e)
}

// persistSeen writes a record's state through the writer when it runs, else at once.
func (j *Join) persistSeen(ctx context.Context, e entry) {
	if j.s.KV == nil || !j.s.PersistSeen {
		return
	}
	if !j.async.Load() {
		j.persist(ctx, seenPrefix+kvKey(e.TraceID), e)
		return
	}
	j.enqueue(op{kind: opSeen, e: &e})
}

func (j *Join) persist(ctx context.Context, key string, e entry) { j.persistValue(ctx, key, e) }

// persistValue writes v's JSON under key.
func (j *Join) persistValue(ctx context.Context, key string, v any) {
	if j.s.KV == nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		j.kvErrors.WithLabelValues("put").Inc()
		return
	}
	_, err = j.s.KV.Put(context.WithoutCancel(ctx), key, data)
	if err == nil {
		j.storageFull.Store(false)
		return
	}
	j.putFailed(err)
}

// putFailed counts a refused write.
func (j *Join) putFailed(err error) {
	if j.storageFailed(err) {
		return
	}
	j.kvErrors.WithLabelValues("put").Inc()
	j.log.Warn("persist join state", "err", err)
}

// storageFailed counts err as storage_full when it is one, warning once until a write
// succeeds again: the bucket is at feedback.max_bytes, or the store cannot write (its volume
// is full; natsconn.StoreHealth refuses at once until it heals). The join goes on from memory.
func (j *Join) storageFailed(err error) bool {
	if !natsconn.IsStorageFull(err) {
		return false
	}
	j.kvErrors.WithLabelValues("storage_full").Inc()
	if !j.storageFull.Swap(true) {
		j.log.Warn("join state not persisted: the bucket is full (feedback.max_bytes) or its store cannot write; the join goes on from memory", "err", err)
	}
	return true
}

// StorageFull reports whether the last write to the bucket was refused for lack of storage;
// /readyz reports it.
func (j *Join) StorageFull() bool { return j.storageFull.Load() }

// persistPending writes the trace's pending feedback (e, taken under the lock), or deletes the
// key when none is left: through the writer when it runs, else at once.
func (j *Join) persistPending(ctx context.Context, e entry) {
	if j.s.KV == nil {
		return
	}
	if j.async.Load() {
		j.enqueue(op{kind: opPend, traceID: e.TraceID})
		return
	}
	if len(e.Pending) == 0 {
		j.deleteKey(ctx, e.TraceID)
		return
	}
	j.persist(ctx, pendPrefix+kvKey(e.TraceID), e)
}

// remove deletes the trace's pending feedback from the bucket: through the writer when it
// runs (which deletes it unless new feedback came meanwhile), else at once.
func (j *Join) remove(ctx context.Context, traceID string) {
	if j.s.KV == nil {
		return
	}
	if j.async.Load() {
		j.enqueue(op{kind: opPend, traceID: traceID})
		return
	}
	j.deleteKey(ctx, traceID)
}

func (j *Join) deleteKey(ctx context.Context, traceID string) {
	j.deleteKV(ctx, pendPrefix+kvKey(traceID))
}

func (j *Join) deleteKV(ctx context.Context, key string) {
	if err := j.s.KV.Delete(context.WithoutCancel(ctx), key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		if j.storageFailed(err) {
			return
		}
		j.kvErrors.WithLabelValues("delete").Inc()
		j.log.Warn("delete join state", "err", err)
	}
}

// removeKey deletes what waited for the key of namespace ns from the bucket: through the
// writer when it runs, else at once.
func (j *Join) removeKey(ctx context.Context, ns uint8, id string) {
	if ns == nsTrace {
		j.remove(ctx, id)
		return
	}
	if j.s.KV == nil {
		return
	}
	key := prefixes[ns] + kvKey(id)
	if j.async.Load() {
		j.enqueue(op{kind: opDelete, key: key})
		return
	}
	j.deleteKV(ctx, key)
}

// lookupSeen reads the record-seen state another ragwatch (or an earlier run) wrote to the
// shared bucket.
func (j *Join) lookupSeen(ctx context.Context, traceID string, now time.Time) (entry, bool) {
	if j.s.KV == nil {
		return entry{}, false
	}
	kve, err := j.s.KV.Get(context.WithoutCancel(ctx), seenPrefix+kvKey(traceID))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			j.kvErrors.WithLabelValues("get").Inc()
		}
		return entry{}, false
	}
	var st entry
	if err := json.Unmarshal(kve.Value(), &st); err != nil || st.TraceID != traceID || !st.Expires.After(now) {
		return entry{}, false
	}
	return st, true
}

// load reads the persisted entries, oldest expiry first. It holds at most max_entries traces
// while reading, however large the bucket: beyond, the traces expiring first are skipped
// (counted as op="load_skipped"), as they would be evicted first once loaded.
func (j *Join) load(ctx context.Context) error {
	if j.s.KV == nil {
		return nil
	}
	w, err := j.s.KV.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("join: read join state: %w", err)
	}
	defer func() { _ = w.Stop() }()
	set := loadSet{max: j.s.MaxEntries, byTrace: map[string]*loadEntry{}}
	var pairs []pairEntry
	var sessions []sessionEntry
	now := j.now()
	for {
		var kve jetstream.KeyValueEntry
		select {
		case kve = <-w.Updates():
		case <-ctx.Done():
			return fmt.Errorf("join: read join state: %w", ctx.Err())
		}
		if kve == nil {
			break // initial values done
		}
		switch key := kve.Key(); {
		case strings.HasPrefix(key, pairPrefix):
			var e pairEntry
			if err := json.Unmarshal(kve.Value(), &e); err != nil || e.PairID == "" {
				j.kvErrors.WithLabelValues("load").Inc()
			} else if j.s.NextPair != nil && e.Expires.After(now) {
				pairs = append(pairs, e)
			}
			continue
		case strings.HasPrefix(key, sessPrefix):
			var e sessionEntry
			if err := json.Unmarshal(kve.Value(), &e); err != nil || e.SessionID == "" {
				j.kvErrors.WithLabelValues("load").Inc()
			} else if j.s.SessionTTL > 0 && e.Expires.After(now) {
				sessions = append(sessions, e)
			}
			continue
		}
		var e entry
		if err := json.Unmarshal(kve.Value(), &e); err != nil || e.TraceID == "" {
			j.kvErrors.WithLabelValues("load").Inc()
			continue
		}
		m := set.get(e.TraceID, e.Expires)
		if m == nil {
			continue
		}
		switch {
		case strings.HasPrefix(kve.Key(), seenPrefix):
			m.Seen, m.Service, m.SpanID, m.Variant, m.RecordTime = true, e.Service, e.SpanID, e.Variant, e.RecordTime
		case strings.HasPrefix(kve.Key(), pendPrefix):
			m.Pending = e.Pending
		}
	}
	if set.skipped > 0 {
		j.kvErrors.WithLabelValues("load_skipped").Add(float64(set.skipped))
		j.log.Warn("join state: the bucket holds more traces than feedback.max_entries; those expiring first were not loaded",
			"max_entries", j.s.MaxEntries, "skipped", set.skipped)
	}
	loaded := make([]*entry, 0, len(set.heap))
	for _, le := range set.heap {
		e := &le.entry
		if e.Seen && len(e.Pending) > 0 {
			// Seen (here or elsewhere) while feedback waited: joined at the next sweep.
			e.Seen, e.Service, e.SpanID, e.Variant, e.RecordTime = false, "", "", "", time.Time{}
		}
		loaded = append(loaded, e)
	}
	sort.SliceStable(loaded, func(a, b int) bool { return loaded[a].Expires.Before(loaded[b].Expires) })
	j.mu.Lock()
	for _, e := range loaded {
		if j.tab.find(e.TraceID) >= 0 {
			continue
		}
		if len(e.Pending) > MaxPendingPerTrace {
			e.Pending = e.Pending[len(e.Pending)-MaxPendingPerTrace:]
		}
		for j.tab.full() { // the oldest go, as when more traces arrive than max_entries
			j.dropLocked(j.tab.oldest(), true)
		}
		i := j.tab.add(j.tab.key(e.TraceID), e.TraceID, int64(e.Expires.Sub(j.base)))
		if e.Seen {
			j.tab.setSeen(i, e.TraceID, e.Service, e.SpanID, e.Variant)
		}
		if len(e.Pending) > 0 {
			j.tab.ext(i, e.TraceID, true).pending = e.Pending
			for _, p := range e.Pending {
				j.pending[p.kind()]++
			}
		}
	}
	// Pairs and sessions, oldest expiry first, so the bound keeps the newest.
	sort.Slice(pairs, func(a, b int) bool { return pairs[a].Expires.Before(pairs[b].Expires) })
	for _, e := range pairs {
		if j.tab.findNS(nsPair, e.PairID) >= 0 || (!e.Done && e.First == nil) {
			continue
		}
		for j.tab.fullNS(nsPair) {
			j.dropLocked(j.tab.oldestNS(nsPair), true)
		}
		i := j.tab.add(j.tab.keyNS(nsPair, e.PairID), e.PairID, int64(e.Expires.Sub(j.base)))
		ps := &pairState{}
		if !e.Done {
			ps.first = e.First
			j.pending[jPair]++
		}
		j.tab.ext(i, e.PairID, true).pair = ps
	}
	sort.Slice(sessions, func(a, b int) bool { return sessions[a].Expires.Before(sessions[b].Expires) })
	for _, e := range sessions {
		if j.tab.findNS(nsSession, e.SessionID) >= 0 {
			continue
		}
		for j.tab.fullNS(nsSession) {
			j.dropLocked(j.tab.oldestNS(nsSession), true)
		}
		i := j.tab.add(j.tab.keyNS(nsSession, e.SessionID), e.SessionID, int64(e.Expires.Sub(j.base)))
		st := e.sessionState
		j.tab.ext(i, e.SessionID, true).sess = &st
		j.pending[jSession]++
	}
	j.labelsLocked()
	j.mu.Unlock()
	if !j.s.PersistSeen {
		// Sessions are written again at shutdown: a crash before then must not bring back
		// these older states at the next start.
		for _, e := range sessions {
			j.deleteKV(ctx, sessPrefix+kvKey(e.SessionID))
		}
	}
	j.log.Info("join state loaded", "traces", len(loaded), "pairs", len(pairs), "sessions", len(sessions))
	return j.forwardOrphans(ctx, j.takeLate())
}

// loadSet holds the traces read at start, at most max of them: a min-heap by expiry, so the
// traces expiring first give way when the bucket holds more.
type loadSet struct {
	max     int
	byTrace map[string]*loadEntry
	heap    []*loadEntry
	skipped int
}

type loadEntry struct {
	entry
	idx int // position in heap
}

// get returns the entry of traceID, raising its expiry to exp, or a new one; nil when the set
// is full of traces expiring later.
func (s *loadSet) get(traceID string, exp time.Time) *loadEntry {
	if m := s.byTrace[traceID]; m != nil {
		if exp.After(m.Expires) {
			m.Expires = exp
			s.down(m.idx)
		}
		return m
	}
	if len(s.heap) >= s.max {
		if !exp.After(s.heap[0].Expires) {
			s.skipped++
			return nil
		}
		delete(s.byTrace, s.heap[0].TraceID)
		s.skipped++
		m := &loadEntry{entry: entry{TraceID: traceID, Expires: exp}}
		s.heap[0] = m
		s.byTrace[traceID] = m
		s.down(0)
		return m
	}
	m := &loadEntry{entry: entry{TraceID: traceID, Expires: exp}, idx: len(s.heap)}
	s.heap = append(s.heap, m)
	s.byTrace[traceID] = m
	s.up(m.idx)
	return m
}

func (s *loadSet) less(a, b int) bool { return s.heap[a].Expires.Before(s.heap[b].Expires) }

func (s *loadSet) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.heap[a].idx, s.heap[b].idx = a, b
}

func (s *loadSet) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *loadSet) down(i int) {
	s.heap[i].idx = i
	for {
		l, small := 2*i+1, i
		if l < len(s.heap) && s.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(s.heap) && s.less(r, small) {
			small = r
		}
		if small == i {
			return
		}
		s.swap(i, small)
		i = small
	}
}
