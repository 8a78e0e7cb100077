package join

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/internal/record"
)

// sessionState is what the join remembers of a conversation: how many turns it had and its
// last messages (oldest first, within conversation.max_history_turns and max_history_bytes).
// It is content: held in memory and in ragwatch's own KV bucket like the scoring queue holds
// records (docs/security.md).
type sessionState struct {
	Turns   int              `json:"turns"`
	History []record.Message `json:"history,omitempty"`
}

// sessionEntry is a session in the bucket (key "sess.<session id>").
type sessionEntry struct {
	SessionID string `json:"t"`
	sessionState
	Expires time.Time `json:"exp"`
}

// sessionLookupTimeout bounds the bucket read for a session this ragwatch does not know.
const sessionLookupTimeout = 2 * time.Second

// session gives r what it lacks from its session's earlier turns and remembers r's turn:
// Turn = the turns before + 1 when r has none, History = the remembered turns when r has
// none (a record that carries them, from its spans or its app, keeps its own and they update
// the state: turns = the larger). It returns r itself when it changed nothing or owned is set
// (r was handed over: it is filled in place), else a copy.
//
// Sessions are written to the KV bucket off the record path and read back at start: with
// PersistSeen (sidecars sharing the bucket) each session that took turns at most once per
// SessionFlushInterval, else all of them once, at shutdown (see Join.writer).
// With PersistSeen (sidecars sharing the bucket) a session this ragwatch does not hold is read
// from the bucket first (another ragwatch took its earlier turns); one that it holds is not
// read again, so turns of one session spread over several ragwatch processes at once can be
// numbered from a stale state. Records are numbered in the order they arrive: a turn that
// arrives before an earlier one takes the earlier number, and its history lacks that turn.
func (j *Join) session(ctx context.Context, r *record.Record, now time.Time, owned bool) *record.Record {
	id := r.SessionID
	var stored *sessionEntry
	j.mu.Lock()
	j.expireLocked(now)
	i := j.tab.findNS(nsSession, id)
	if i < 0 && j.s.KV != nil && j.s.PersistSeen { // sidecars share the bucket: another may hold the session
		// Read outside the lock; the session may have arrived meanwhile.
		j.mu.Unlock()
		stored = j.lookupSession(ctx, id, now)
		j.mu.Lock()
		i = j.tab.findNS(nsSession, id)
	}
	if i < 0 {
		i = j.addKeyLocked(j.tab.keyNS(nsSession, id), id, now)
		st := &sessionState{}
		if stored != nil {
			st = &stored.sessionState
		}
		j.tab.ext(i, id, true).sess = st
		j.pending[jSession]++
	} else {
		j.tab.touch(i, j.expiry(nsSession, now))
	}
	st := j.tab.ext(i, id, true).sess
	out := r
	// A history the record brought (posted, or from NATS) is bounded like one read from spans
	// (the assembler's are already within the bounds); those drops are counted. Trimming the
	// session's own memory below is not: no record loses a message it carried.
	brought := r.History // r's own, before it is filled in
	kept, dropped := record.TrimHistory(brought, j.s.MaxHistoryTurns, j.s.MaxHistoryBytes)
	if dropped > 0 {
		out = writable(r, owned)
		out.History = kept
	}
	if out.Turn == 0 || (out.History == nil && len(st.History) > 0) {
		if out == r {
			out = writable(r, owned)
		}
		if out.Turn == 0 {
			out.Turn = st.Turns + 1
		}
		if out.History == nil && len(st.History) > 0 {
			// Shared: no consumer changes a history's messages in place, and the session
			// replaces its slice rather than change it.
			out.History = slices.Clip(st.History)
		}
	}
	if st.Turns > 0 {
		j.count(jSession, oJoined, 1)
	}
	st.Turns = max(st.Turns, out.Turn)
	h := st.History
	if brought != nil {
		h = brought
	}
	// The session keeps its own copy of the turn, one allocation for both texts: the record's
	// may be views of larger buffers. Once trimming drops the question but keeps the answer,
	// the question's bytes stay with it until the answer goes too.
	var turn [2]record.Message
	n := 0
	qa := r.Query + r.Answer // a copy when both are set
	if r.Query == "" || r.Answer == "" {
		qa = strings.Clone(qa) // the one set, uncopied by +
	}
	if r.Query != "" {
		turn[n] = record.Message{Role: record.RoleUser, Content: qa[:len(r.Query)]}
		n++
	}
	if r.Answer != "" {
		turn[n] = record.Message{Role: record.RoleAssistant, Content: qa[len(r.Query):]}
		n++
	}
	st.History = appendTrimmed(h, turn[:n], j.s.MaxHistoryTurns, j.s.MaxHistoryBytes)
	var e sessionEntry
	async := j.async.Load()
	if j.s.KV != nil {
		if async { // the writer writes it (Join.writer), not the record path
			if j.s.PersistSeen {
				if j.sessDirty == nil {
					j.sessDirty = make(map[string]struct{})
				}
				j.sessDirty[id] = struct{}{}
			}
		} else {
			e = sessionEntry{SessionID: id, sessionState: sessionState{Turns: st.Turns, History: st.History}, Expires: j.expiresAt(i)}
		}
	}
	j.labelsLocked()
	j.mu.Unlock()
	if dropped > 0 {
		j.historyDropped.Add(float64(dropped))
	}
	if err := j.forwardOrphans(ctx, j.takeLate()); err != nil {
		j.log.Warn("join: forward orphans", "err", err)
	}
	if j.s.KV != nil && !async {
		j.persistValue(ctx, sessPrefix+kvKey(id), e)
	}
	return out
}

// appendTrimmed returns h followed by add, bounded as record.TrimHistory bounds it, in one
// new slice of its length (nothing dropped stays reachable through it); h itself when add is
// empty and h is within the bounds.
func appendTrimmed(h, add []record.Message, maxTurns, maxBytes int) []record.Message {
	n := len(h) + len(add)
	at := func(i int) record.Message {
		if i < len(h) {
			return h[i]
		}
		return add[i-len(h)]
	}
	start := 0
	if maxTurns > 0 && n > maxTurns {
		start = n - maxTurns
	}
	if maxBytes > 0 {
		size := 0
		for i := n - 1; i >= start; i-- {
			size += len(at(i).Content)
			if size > maxBytes {
				start = i + 1
				break
			}
		}
	}
	if len(add) == 0 && start == 0 {
		return h
	}
	out := make([]record.Message, 0, n-start)
	if start < len(h) {
		out = append(out, h[start:]...)
	}
	return append(out, add[max(start-len(h), 0):]...)
}

// flushSessions writes the sessions changed since the last flush.
func (j *Join) flushSessions(ctx context.Context) {
	j.mu.Lock()
	dirty := j.sessDirty
	j.sessDirty = nil
	j.mu.Unlock()
	for id := range dirty {
		j.writeSession(ctx, id)
	}
}

// writeAllSessions writes every session held, at shutdown when sessions are not written as
// they change.
func (j *Join) writeAllSessions(ctx context.Context) {
	j.mu.Lock()
	var ids []string
	for i := j.tab.oldestNS(nsSession); i >= 0; i = j.tab.next(i) {
		if x := j.tab.ext(i, "", false); x != nil {
			ids = append(ids, x.id)
		}
	}
	j.mu.Unlock()
	for _, id := range ids {
		j.writeSession(ctx, id)
	}
}

// writeSession stores the session as the table holds it now (queued writes of one session
// cannot overwrite a newer state); a session no longer held is deleted.
func (j *Join) writeSession(ctx context.Context, id string) {
	j.mu.Lock()
	var e *sessionEntry
	if i := j.tab.findNS(nsSession, id); i >= 0 {
		st := j.tab.ext(i, id, true).sess
		e = &sessionEntry{SessionID: id, sessionState: sessionState{Turns: st.Turns, History: st.History}, Expires: j.expiresAt(i)}
	}
	j.mu.Unlock()
	if e == nil {
		j.deleteKV(ctx, sessPrefix+kvKey(id))
		return
	}
	j.persistValue(ctx, sessPrefix+kvKey(id), e)
}

// lookupSession reads a session another ragwatch (or an earlier run) wrote to the bucket.
func (j *Join) lookupSession(ctx context.Context, id string, now time.Time) *sessionEntry {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionLookupTimeout)
	defer cancel()
	kve, err := j.s.KV.Get(ctx, sessPrefix+kvKey(id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			j.kvErrors.WithLabelValues("get").Inc()
		}
		return nil
	}
	var e sessionEntry
	if err := json.Unmarshal(kve.Value(), &e); err != nil || e.SessionID != id || !e.Expires.After(now) {
		return nil
	}
	return &e
}
