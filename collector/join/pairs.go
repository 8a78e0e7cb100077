package join

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/record"
)

// pairState is a shadow pair the join knows: the first record while it waits for the second,
// nil once the pair completed (kept until pairs.wait passes so that a third record with the
// same pair id is recognised and ignored).
type pairState struct {
	first *record.Record
}

// sameRecord reports whether a and b are the same turn (a redelivery), not two halves.
func sameRecord(a, b *record.Record) bool {
	return a.TraceID == b.TraceID && a.SpanID == b.SpanID
}

// pair joins r, which carries a pair id, to its pair: when the first half waits here, it is
// returned (the caller hands both to NextPair after Next) and the pair is marked complete;
// otherwise r is held as the first half (a shallow copy: stages treat records as read-only)
// until pairs.wait passes. With a KV bucket the first half is also claimed there, so a pair
// completes across a restart and across ragwatch processes sharing the bucket.
func (j *Join) pair(ctx context.Context, r *record.Record, now time.Time) *record.Record {
	id := r.PairID
	j.mu.Lock()
	j.expireLocked(now)
	if i := j.tab.findNS(nsPair, id); i >= 0 {
		ps := j.tab.ext(i, id, true).pair
		switch {
		case ps.first == nil: // the pair completed: a third record
			j.mu.Unlock()
			j.count(jPair, oIgnored, 1)
			return nil
		case sameRecord(ps.first, r): // the first again (a redelivery)
			j.mu.Unlock()
			return nil
		}
		first := ps.first
		ps.first = nil
		j.pending[jPair]--
		exp := j.expiresAt(i)
		j.labelsLocked()
		j.mu.Unlock()
		j.count(jPair, oJoined, 1)
		j.persistPairDone(ctx, id, exp)
		return first
	}
	i := j.addKeyLocked(j.tab.keyNS(nsPair, id), id, now)
	c := *r
	j.tab.ext(i, id, true).pair = &pairState{first: &c}
	j.pending[jPair]++
	j.labelsLocked()
	j.mu.Unlock()
	errs := j.forwardOrphans(ctx, j.takeLate())
	if errs != nil {
		j.log.Warn("join: forward orphans", "err", errs)
	}
	if j.s.KV != nil {
		if j.async.Load() {
			j.enqueue(op{kind: opPairClaim, traceID: id})
		} else {
			j.claimPair(ctx, id)
		}
	}
	return nil
}

// pairEntry is what the bucket holds of a pair (key "pair.<pair id>"): the first record while
// it waits, or Done once the pair completed.
type pairEntry struct {
	PairID  string         `json:"t"`
	First   *record.Record `json:"first,omitempty"`
	Done    bool           `json:"done,omitempty"`
	Expires time.Time      `json:"exp"`
}

// claimPair stores the first half waiting here under "pair.<id>", unless the key exists: then
// another ragwatch (or an earlier run) holds a first half, and the one here completes the pair
// with it, or the pair completed already and the one here is a third record.
func (j *Join) claimPair(ctx context.Context, id string) {
	ctx = context.WithoutCancel(ctx)
	j.mu.Lock()
	i := j.tab.findNS(nsPair, id)
	if i < 0 || j.tab.ext(i, id, true).pair.first == nil {
		j.mu.Unlock()
		return
	}
	mine := j.tab.ext(i, id, true).pair.first
	e := pairEntry{PairID: id, First: mine, Expires: j.expiresAt(i)}
	j.mu.Unlock()
	key := pairPrefix + kvKey(id)
	data, err := json.Marshal(e)
	if err != nil {
		j.kvErrors.WithLabelValues("put").Inc()
		return
	}
	_, err = j.s.KV.Create(ctx, key, data)
	if err == nil {
		j.storageFull.Store(false)
		return
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		j.putFailed(err)
		return
	}
	kve, err := j.s.KV.Get(ctx, key)
	if err != nil {
		j.kvErrors.WithLabelValues("get").Inc()
		return
	}
	var st pairEntry
	if err := json.Unmarshal(kve.Value(), &st); err != nil || st.PairID != id {
		j.kvErrors.WithLabelValues("get").Inc()
		return
	}
	now := j.now()
	switch {
	case st.Done && st.Expires.After(now): // completed elsewhere: the one here is a third record
		if j.takeFirst(id, mine) {
			j.count(jPair, oIgnored, 1)
		}
	case st.First != nil && st.Expires.After(now) && !sameRecord(st.First, mine):
		// Another ragwatch holds the first half: this one completes the pair.
		if !j.takeFirst(id, mine) {
			return
		}
		j.count(jPair, oJoined, 1)
		j.persistPairDone(ctx, id, st.Expires)
		if err := j.s.NextPair.ConsumePair(ctx, st.First, mine); err != nil {
			j.log.Warn("pair consumer failed", "err", err)
		}
	case st.First == nil || !st.Expires.After(now): // a stale entry: replace it
		if _, err := j.s.KV.Update(ctx, key, data, kve.Revision()); err != nil {
			j.putFailed(err)
		}
	}
}

// takeFirst marks the pair complete here if mine still waits in it; false when it no longer
// does (completed or expired meanwhile).
func (j *Join) takeFirst(id string, mine *record.Record) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	i := j.tab.findNS(nsPair, id)
	if i < 0 {
		return false
	}
	ps := j.tab.ext(i, id, true).pair
	if ps.first != mine {
		return false
	}
	ps.first = nil
	j.pending[jPair]--
	j.labelsLocked()
	return true
}

// checkPairDone looks up a first half waiting here in the bucket: when another ragwatch
// completed its pair (and counted it joined), it stops waiting, not orphaned.
func (j *Join) checkPairDone(ctx context.Context, id string) {
	kve, err := j.s.KV.Get(context.WithoutCancel(ctx), pairPrefix+kvKey(id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			j.kvErrors.WithLabelValues("get").Inc()
		}
		return
	}
	var st pairEntry
	if err := json.Unmarshal(kve.Value(), &st); err != nil || st.PairID != id || !st.Done {
		return
	}
	j.mu.Lock()
	if i := j.tab.findNS(nsPair, id); i >= 0 {
		if ps := j.tab.ext(i, id, true).pair; ps.first != nil {
			ps.first = nil
			j.pending[jPair]--
			j.labelsLocked()
		}
	}
	j.mu.Unlock()
}

// persistPairDone marks the pair complete in the bucket (the first half's record is no longer
// kept there), through the writer when it runs.
func (j *Join) persistPairDone(ctx context.Context, id string, exp time.Time) {
	if j.s.KV == nil {
		return
	}
	if j.async.Load() {
		j.enqueue(op{kind: opPairDone, traceID: id, exp: exp})
		return
	}
	j.putPairDone(ctx, id, exp)
}

func (j *Join) putPairDone(ctx context.Context, id string, exp time.Time) {
	j.persistValue(ctx, pairPrefix+kvKey(id), pairEntry{PairID: id, Done: true, Expires: exp})
}
