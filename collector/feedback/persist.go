package feedback

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
)

// entry is the persisted state of one trace in the KV bucket: ids, times and feedback
// scores, no content.
type entry struct {
	TraceID    string    `json:"t"`
	Seen       bool      `json:"seen,omitempty"`
	Service    string    `json:"svc,omitempty"`
	SpanID     string    `json:"span,omitempty"`
	RecordTime time.Time `json:"rt,omitzero"`
	Pending    []pending `json:"p,omitempty"`
	Expires    time.Time `json:"exp"`
}

// Bucket key prefixes: record-seen states and pending feedback live under separate keys so
// several ragwatch processes sharing one bucket never overwrite each other's.
const (
	seenPrefix = "seen."
	pendPrefix = "pend."
)

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

// writer persists queued record states until Shutdown, then flushes what is queued.
func (j *Join) writer() {
	defer j.wg.Done()
	for {
		select {
		case e := <-j.writes:
			j.persist(context.Background(), seenPrefix+kvKey(e.TraceID), e)
		case <-j.stop:
			j.async.Store(false)
			for {
				select {
				case e := <-j.writes:
					j.persist(context.Background(), seenPrefix+kvKey(e.TraceID), e)
				default:
					return
				}
			}
		}
	}
}

// persistSeen writes a record's state through the writer when it runs, else at once. A full
// queue drops the write (the join keeps working from memory) and counts it.
func (j *Join) persistSeen(ctx context.Context, e entry) {
	if j.s.KV == nil || !j.s.PersistSeen {
		return
	}
	if !j.async.Load() {
		j.persist(ctx, seenPrefix+kvKey(e.TraceID), e)
		return
	}
	select {
	case j.writes <- e:
	default:
		j.kvErrors.WithLabelValues("queue_full").Inc()
	}
}

func (j *Join) persist(ctx context.Context, key string, e entry) {
	if j.s.KV == nil {
		return
	}
	data, err := json.Marshal(e)
	if err != nil {
		j.kvErrors.WithLabelValues("put").Inc()
		return
	}
	if _, err := j.s.KV.Put(context.WithoutCancel(ctx), key, data); err != nil {
		j.kvErrors.WithLabelValues("put").Inc()
		j.log.Warn("persist feedback join state", "err", err)
	}
}

// persistPending writes the trace's pending feedback, or deletes the key when none is left.
func (j *Join) persistPending(ctx context.Context, e entry) {
	if len(e.Pending) == 0 {
		j.remove(ctx, e.TraceID)
		return
	}
	j.persist(ctx, pendPrefix+kvKey(e.TraceID), e)
}

func (j *Join) remove(ctx context.Context, traceID string) {
	if j.s.KV == nil {
		return
	}
	if err := j.s.KV.Delete(context.WithoutCancel(ctx), pendPrefix+kvKey(traceID)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		j.kvErrors.WithLabelValues("delete").Inc()
		j.log.Warn("delete feedback join state", "err", err)
	}
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

// load reads the persisted entries, oldest expiry first.
func (j *Join) load(ctx context.Context) error {
	if j.s.KV == nil {
		return nil
	}
	w, err := j.s.KV.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("feedback: read join state: %w", err)
	}
	defer func() { _ = w.Stop() }()
	byTrace := map[string]*entry{}
	for {
		var kve jetstream.KeyValueEntry
		select {
		case kve = <-w.Updates():
		case <-ctx.Done():
			return fmt.Errorf("feedback: read join state: %w", ctx.Err())
		}
		if kve == nil {
			break // initial values done
		}
		var e entry
		if err := json.Unmarshal(kve.Value(), &e); err != nil || e.TraceID == "" {
			j.kvErrors.WithLabelValues("load").Inc()
			continue
		}
		m := byTrace[e.TraceID]
		if m == nil {
			m = &entry{TraceID: e.TraceID}
			byTrace[e.TraceID] = m
		}
		switch {
		case strings.HasPrefix(kve.Key(), seenPrefix):
			m.Seen, m.Service, m.SpanID, m.RecordTime = true, e.Service, e.SpanID, e.RecordTime
		case strings.HasPrefix(kve.Key(), pendPrefix):
			m.Pending = e.Pending
		}
		if e.Expires.After(m.Expires) {
			m.Expires = e.Expires
		}
	}
	loaded := make([]*entry, 0, len(byTrace))
	for _, e := range byTrace {
		if e.Seen && len(e.Pending) > 0 {
			// Seen (here or elsewhere) while feedback waited: joined at the next sweep.
			e.Seen, e.Service, e.SpanID, e.RecordTime = false, "", "", time.Time{}
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
			j.dropLocked(j.tab.oldest())
		}
		i := j.tab.add(j.tab.key(e.TraceID), e.TraceID, int64(e.Expires.Sub(j.base)))
		if e.Seen {
			j.tab.setSeen(i, e.TraceID, e.Service, e.SpanID, e.RecordTime)
		}
		if len(e.Pending) > 0 {
			j.tab.ext(i, e.TraceID, true).pending = e.Pending
			j.pending += len(e.Pending)
		}
	}
	j.gaugesLocked()
	j.mu.Unlock()
	j.log.Info("feedback join state loaded", "traces", len(loaded))
	return j.forwardOrphans(ctx, j.takeLate())
}
