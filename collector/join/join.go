// Package join meets records with what arrives apart from them, whichever comes first: user
// feedback and human labels (by trace id), the second answer of a shadow pair (by pair id) and
// the earlier turns of a conversation (by session id). One bounded off-heap table keyed by
// namespaced ids, one KV bucket with a key prefix per input, one expiry loop and one counter
// family serve all four. The join sits in front of the record fan-out, so each feedback and
// label reaches the stages once, attached to what is known about its request.
package join

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Join outcomes, the `outcome` label of ragwatch_join_total.
const (
	OutcomeJoined   = "joined"   // met its record (or, for a pair, its other half)
	OutcomeOrphaned = "orphaned" // its wait ended without it (retention, pairs.wait, session_ttl)
	OutcomeEvicted  = "evicted"  // dropped at a bound (max_entries, max_pending, max_sessions)
	OutcomeIgnored  = "ignored"  // a third record with the pair id of a completed pair
)

// The joins, the `join` label of ragwatch_join_total and ragwatch_join_pending.
const (
	JoinFeedback = "feedback"
	JoinLabel    = "label"
	JoinPair     = "pair"
	JoinSession  = "session"
	JoinContent  = "content"
)

// join indexes, for the counter arrays.
const (
	jFeedback = iota
	jLabel
	jPair
	jSession
	jContent
	numJoins
)

var joinNames = [numJoins]string{JoinFeedback, JoinLabel, JoinPair, JoinSession, JoinContent}

var outcomes = []string{OutcomeJoined, OutcomeOrphaned, OutcomeEvicted, OutcomeIgnored}

const (
	oJoined = iota
	oOrphaned
	oEvicted
	oIgnored
)

// MaxPendingPerTrace bounds the feedback and labels held for one trace that has not arrived
// yet; the oldest beyond it is evicted.
const MaxPendingPerTrace = 16

// Settings configure a Join. Next and NextFeedback are required.
type Settings struct {
	// Retention is how long feedback and labels wait for their record and a record's ids are
	// remembered for feedback and labels arriving later (default 24h).
	Retention time.Duration
	// MaxEntries bounds the traces held (default 200000, at most 1<<24); the oldest is
	// dropped beyond it. Each costs ≈ 49 bytes (BenchmarkJoinMemory), more with feedback
	// waiting or ids not in OTLP's hex form.
	MaxEntries int
	// Next receives every record, with early feedback and labels attached, and its turn and
	// history filled from its session.
	Next record.Consumer
	// NextFeedback receives feedback that arrived after its record, and orphaned feedback.
	NextFeedback record.FeedbackConsumer
	// NextLabel receives labels that arrived after their record, and orphaned labels; nil
	// drops them (still counted).
	NextLabel record.LabelConsumer

	// NextContent receives what GenAI events that came after their record say of its turn
	// (record.Content from the assembler), naming the record as late feedback does; nil drops
	// it (still counted).
	NextContent record.ContentConsumer

	// NextPair receives each shadow pair once both records arrived (the first arrival first);
	// nil disables the pair join.
	NextPair record.PairConsumer
	// PairWait is how long the first record of a pair waits for the second (default 10m).
	PairWait time.Duration
	// MaxPendingPairs bounds the first records waiting (default 10000); the oldest is evicted.
	MaxPendingPairs int

	// SessionTTL is how long a session's turn count and last turns are remembered after its
	// last turn; 0 disables the session join.
	SessionTTL time.Duration
	// MaxSessions bounds the sessions remembered (default 20000); the least recent is evicted.
	MaxSessions int
	// MaxHistoryTurns and MaxHistoryBytes bound the history remembered per session (messages,
	// content bytes; 0: unbounded), as record.TrimHistory.
	MaxHistoryTurns int
	MaxHistoryBytes int
	// SessionFlushInterval is, with PersistSeen, how often the sessions that changed are
	// written to KV, each once however many turns it took meanwhile (default 1s). Without
	// PersistSeen no other process reads them: every session held is written once, at
	// shutdown, and a session read back at start is deleted from KV until then (a crash
	// loses them rather than bring back an older state). A KV write per turn would be the
	// largest cost of ingest.
	SessionFlushInterval time.Duration
	// KV persists the join state across restarts; nil keeps it in memory only.
	KV jetstream.KeyValue
	// PersistSeen also writes every record's ids to KV, so that feedback arriving after a
	// restart, or at another sidecar sharing the bucket, still finds its record. It costs one
	// KV write per record (the largest ingest cost) and one key per record for Retention, so
	// it is off by default: pending feedback is persisted either way.
	PersistSeen bool
	Registerer  prometheus.Registerer
	Logger      *slog.Logger
	Now         func() time.Time
	// SweepInterval is how often Start's loop orphans expired feedback, labels and pairs and
	// forgets expired sessions (default min(Retention/20, 1m), and at most PairWait/4).
	SweepInterval time.Duration
}

// Join is the join of feedback, labels, shadow pairs and sessions to their records. Its
// methods are safe for concurrent use.
type Join struct {
	s   Settings
	log *slog.Logger
	now func() time.Time

	joinTotal      *prometheus.CounterVec
	outcome        [numJoins][4]prometheus.Counter // by join and outcome index
	kvErrors       *prometheus.CounterVec
	historyDropped prometheus.Counter

	// base is the origin of the expiry times held in the table (nanoseconds after base, with
	// the clock's monotonic reading when it has one, like time.Time's own comparisons).
	base time.Time
	ttl  [numNS]int64 // per namespace: how long a key lives after its last touch

	mu      sync.Mutex    // guards tab, pending, late
	tab     *table        // the keys remembered, oldest first within each namespace
	pending [numJoins]int // feedback and labels waiting, pairs waiting, sessions remembered
	// labels is pending[jLabel] as of the last labelsLocked, read without mu by LabelWaiting:
	// every increment is followed by labelsLocked before mu is released.
	labels atomic.Int64
	late   []orphan // orphans found under the lock, forwarded by the caller after unlocking
	// sessDirty holds the sessions changed since the writer last wrote them (with KV, once
	// the writer runs); guarded by mu.
	sessDirty map[string]struct{}

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	// ops queues the KV work of the record and feedback paths (seen states, pending feedback,
	// lookups of records other sidecars saw) for the writer started by Start with a bucket, so
	// neither path waits for a KV round trip. Bounded: beyond it work is dropped and counted.
	ops   chan op
	async atomic.Bool

	storageFull atomic.Bool // the last KV write was refused for lack of storage
}

// pending is feedback or a label waiting for its record, in the form persisted to the KV
// bucket: a small tagged union, a label when Label is set, else feedback. Its own ids are
// empty, the trace id being the entry's.
type pending struct {
	Feedback record.Feedback `json:"f,omitzero"` // feedback always has a time: "f" is written as before
	Label    *record.Label   `json:"l,omitempty"`
	SpanID   string          `json:"span,omitempty"`
	Service  string          `json:"svc,omitempty"`
}

// kind is the join the pending item belongs to.
func (p *pending) kind() int {
	if p.Label != nil {
		return jLabel
	}
	return jFeedback
}

var (
	_ record.Consumer         = (*Join)(nil)
	_ record.FeedbackConsumer = (*Join)(nil)
	_ record.LabelConsumer    = (*Join)(nil)
	_ record.ContentConsumer  = (*Join)(nil)
)

// New creates a Join. Call Start to load the persisted state and run the expiry loop.
func New(s Settings) (*Join, error) {
	if s.Next == nil || s.NextFeedback == nil {
		return nil, errors.New("join: Next and NextFeedback are required")
	}
	if s.Retention <= 0 {
		s.Retention = 24 * time.Hour
	}
	if s.MaxEntries <= 0 {
		s.MaxEntries = 200000
	}
	s.MaxEntries = min(s.MaxEntries, maxTableEntries)
	if s.PairWait <= 0 {
		s.PairWait = 10 * time.Minute
	}
	if s.MaxPendingPairs <= 0 {
		s.MaxPendingPairs = 10000
	}
	if s.MaxSessions <= 0 {
		s.MaxSessions = 20000
	}
	if s.SessionTTL < 0 {
		s.SessionTTL = 0
	}
	if s.SweepInterval <= 0 {
		s.SweepInterval = min(s.Retention/20, time.Minute)
		if s.NextPair != nil {
			s.SweepInterval = min(s.SweepInterval, s.PairWait/4)
		}
		if s.SessionTTL > 0 {
			s.SweepInterval = min(s.SweepInterval, s.SessionTTL/4)
		}
		s.SweepInterval = max(s.SweepInterval, time.Second)
	}
	if s.SessionFlushInterval <= 0 {
		s.SessionFlushInterval = time.Second
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Registerer == nil {
		s.Registerer = prometheus.NewRegistry()
	}
	limits := [numNS]int{nsTrace: s.MaxEntries}
	if s.NextPair != nil {
		limits[nsPair] = s.MaxPendingPairs
	}
	if s.SessionTTL > 0 {
		limits[nsSession] = s.MaxSessions
	}
	j := &Join{
		s:    s,
		log:  s.Logger,
		now:  s.Now,
		base: s.Now(),
		ttl:  [numNS]int64{nsTrace: int64(s.Retention), nsPair: int64(s.PairWait), nsSession: int64(s.SessionTTL)},
		tab:  newTableNS(limits),
		stop: make(chan struct{}),
		joinTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_join_total",
			Help: "What the join met, by join (feedback, label, pair, session, content) and outcome: joined (met its record whichever came first; a pair's second half; a turn given its session's earlier turns; GenAI content that came after its record, handed on naming it), orphaned (its wait ended: feedback.retention, pairs.wait, conversation.session_ttl; content whose record the join does not remember), evicted (dropped at a bound), ignored (a third record of a pair; content of a trace of several turns whose span is no awaiting turn's answering generation).",
		}, []string{"join", "outcome"}),
		kvErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_join_state_errors_total",
			Help: "Failed reads and writes of the persisted join state, by operation (put, delete, get, load, queue_full, storage_full; load_skipped: entries not loaded at start beyond max_entries).",
		}, []string{"op"}),
		historyDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_conversation_history_dropped_total",
			Help: "Conversation history messages dropped, oldest first, to fit conversation.max_history_turns and conversation.max_history_bytes.",
		}),
	}
	for ji, name := range joinNames {
		for oi, o := range outcomes {
			j.outcome[ji][oi] = j.joinTotal.WithLabelValues(name, o)
		}
	}
	held := heldGauges{
		j: j,
		pending: prometheus.NewDesc("ragwatch_join_pending",
			"What the join holds, by join: feedback and labels waiting for their record, first records of pairs waiting for the second, sessions remembered.",
			[]string{"join"}, nil),
		tracked: prometheus.NewDesc("ragwatch_join_tracked_traces",
			"Traces the join remembers (records seen and traces with feedback or labels waiting).", nil, nil),
	}
	for _, c := range []prometheus.Collector{j.joinTotal, held, j.kvErrors} {
		if err := s.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("join: register metrics: %w", err)
		}
	}
	// The assembler counts the history it trims from spans in the same counter: share it.
	var err error
	if j.historyDropped, err = promreg.Register(s.Registerer, j.historyDropped); err != nil {
		return nil, fmt.Errorf("join: register metrics: %w", err)
	}
	return j, nil
}

// count adds n to the counter of join ji and outcome oi.
func (j *Join) count(ji, oi int, n int) {
	if n > 0 {
		j.outcome[ji][oi].Add(float64(n))
	}
}

// Start loads the persisted state (if a KV bucket is set) and starts the expiry loop. It
// returns once the state is loaded.
func (j *Join) Start(ctx context.Context) error {
	if err := j.load(ctx); err != nil {
		return err
	}
	j.Sweep(ctx)
	if j.s.KV != nil {
		if j.ops == nil {
			j.ops = make(chan op, opsQueueSize)
		}
		j.async.Store(true)
		j.wg.Add(1)
		go j.writer()
	}
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		t := time.NewTicker(j.s.SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-j.stop:
				return
			case <-t.C:
				j.Sweep(context.Background())
			}
		}
	}()
	return nil
}

// Shutdown stops the expiry loop and flushes queued state writes. Pending feedback stays in the KV bucket for the next start.
// Idempotent and safe without Start.
func (j *Join) Shutdown(ctx context.Context) error {
	j.once.Do(func() { close(j.stop) })
	done := make(chan struct{})
	go func() { j.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ConsumeRecord passes r to Next. Its session's turn and history fill what r lacks, feedback
// and labels for r's trace that arrived earlier are attached, all on a copy (r stays
// untouched); each such feedback or label counts as joined. A record with a pair id that
// completes a shadow pair goes on to NextPair too, after Next.
func (j *Join) ConsumeRecord(ctx context.Context, r *record.Record) error {
	return j.consume(ctx, r, false)
}

// ConsumeHandoff is ConsumeRecord for a record its producer gives up (record.HandoffConsumer):
// what the join fills in, it fills in r itself instead of a copy.
func (j *Join) ConsumeHandoff(ctx context.Context, r *record.Record) error {
	return j.consume(ctx, r, true)
}

var _ record.HandoffConsumer = (*Join)(nil)

// writable returns r to fill in when the join owns it, else a copy of it.
func writable(r *record.Record, owned bool) *record.Record {
	if owned {
		return r
	}
	c := *r
	return &c
}

// consume is ConsumeRecord, filling r in place when owned.
func (j *Join) consume(ctx context.Context, r *record.Record, owned bool) error {
	if r == nil {
		return errors.New("join: nil record")
	}
	now := j.now()
	if j.s.SessionTTL > 0 && r.SessionID != "" {
		out := j.session(ctx, r, now, owned)
		owned = owned || out != r // the session's copy is the join's own
		r = out
	}
	persistSeen := j.s.KV != nil && j.s.PersistSeen
	j.mu.Lock()
	j.expireLocked(now)
	k := j.tab.key(r.TraceID)
	i := j.tab.lookup(k, r.TraceID)
	var matched []pending
	if i < 0 {
		i = j.addKeyLocked(k, r.TraceID, now)
	} else {
		if x := j.tab.ext(i, "", false); x != nil && len(x.pending) > 0 {
			kept := x.pending[:0]
			for _, p := range x.pending {
				if p.SpanID == "" || r.SpanID == "" || p.SpanID == r.SpanID {
					matched = append(matched, p)
					j.pending[p.kind()]--
				} else {
					kept = append(kept, p)
				}
			}
			clear(x.pending[len(kept):])
			x.pending = kept
		}
		j.tab.touch(i, j.expiry(nsTrace, now))
	}
	j.tab.setSeen(i, r.TraceID, r.Service, r.SpanID, r.Variant)
	if r.AwaitsAnswer && r.AnswerSpanID != "" {
		j.tab.noteAnswer(i, r.TraceID, r.AnswerSpanID, r.SpanID)
	}
	var seen, pend entry
	if persistSeen {
		seen = entry{TraceID: r.TraceID, Seen: true, Service: r.Service, SpanID: r.SpanID, Variant: r.Variant, RecordTime: r.Time, Expires: j.expiresAt(i)}
	}
	if len(matched) > 0 {
		pend = j.pendStateLocked(i, r.TraceID)
	}
	j.labelsLocked()
	evicted := j.late
	j.late = nil
	j.mu.Unlock()

	if persistSeen {
		j.persistSeen(ctx, seen)
	}
	if len(matched) == 0 && len(evicted) == 0 && (j.s.NextPair == nil || r.PairID == "") {
		return j.s.Next.ConsumeRecord(ctx, r)
	}
	if len(matched) > 0 {
		j.persistPending(ctx, pend)
	}
	out := r
	var lateFB []pending
	if len(matched) > 0 {
		var fbs, labels []pending
		for _, p := range matched {
			if p.Label != nil {
				labels = append(labels, p)
			} else {
				fbs = append(fbs, p)
			}
		}
		j.count(jFeedback, oJoined, len(fbs))
		j.count(jLabel, oJoined, len(labels))
		c := writable(r, owned)
		if len(fbs) > 0 {
			if r.Feedback == nil {
				// The newest feedback rides on the record; any earlier ones follow as feedback.
				f := fbs[len(fbs)-1].Feedback
				c.Feedback = &f
				lateFB = fbs[:len(fbs)-1]
			} else {
				lateFB = fbs
			}
		}
		if len(labels) > 0 {
			c.Labels = mergeLabels(c.Labels, labels)
		}
		out = c
	}
	var first *record.Record // the other half of out's pair, when out completes one
	if j.s.NextPair != nil && r.PairID != "" {
		first = j.pair(ctx, out, now)
	}
	errs := []error{j.s.Next.ConsumeRecord(ctx, out)}
	for _, p := range lateFB {
		errs = append(errs, j.s.NextFeedback.ConsumeFeedback(ctx, p.joined(r.TraceID, r.SpanID, r.Service, r.Variant)))
	}
	if first != nil {
		errs = append(errs, j.s.NextPair.ConsumePair(ctx, first, out))
	}
	errs = append(errs, j.forwardOrphans(ctx, evicted))
	return errors.Join(errs...)
}

// LabelWaiting reports whether a label waits here for a record of the OTLP trace id: that
// record will be sampled with probability 1 (labelled), so assembly keeps its documents' texts
// (assemble.Settings.KeepContent). Without labels waiting it is one atomic load.
func (j *Join) LabelWaiting(traceID [16]byte) bool {
	if j.labels.Load() == 0 {
		return false
	}
	var b [32]byte
	hex.Encode(b[:], traceID[:])
	j.mu.Lock()
	defer j.mu.Unlock()
	i := j.tab.find(string(b[:]))
	if i < 0 {
		return false
	}
	if x := j.tab.ext(i, "", false); x != nil {
		for _, p := range x.pending {
			if p.Label != nil {
				return true
			}
		}
	}
	return false
}

// ConsumeFeedback accepts feedback from NATS or the HTTP API (record.DecodeFeedback validated it) or
// found in a trace (OTLP annotations, feedback spans). f must carry its TraceID; a zero Time
// becomes now.
func (j *Join) ConsumeFeedback(ctx context.Context, f record.Feedback) error {
	if f.TraceID == "" {
		return errors.New("join: feedback without trace_id")
	}
	traceID := f.TraceID
	p := pending{SpanID: f.SpanID, Service: f.Service}
	f.TraceID, f.SpanID, f.Service = "", "", "" // held by pending and the table, not twice
	p.Feedback = f
	return j.add(ctx, traceID, p)
}

// ConsumeContent accepts what GenAI events that came after their trace was assembled say of
// its turn (the assembler's record.Content). It never waits: the assembler hands it on only
// after the trace's records went by. When the join remembers the trace's record, it goes on to
// NextContent naming that record (its span id, service and variant, as late feedback does) and
// counts joined. In a trace of several turns it names the turn that awaits the answer of the
// event's span (record.Record.AnswerSpanID, remembered for records that await their answer);
// content of any other span is ignored. A trace not remembered (no record: not RAG; or forgotten past
// feedback.retention or max_entries): orphaned. It returns NextContent's error.
func (j *Join) ConsumeContent(ctx context.Context, c record.Content) error {
	if c.TraceID == "" {
		return errors.New("join: content without trace_id")
	}
	now := j.now()
	j.mu.Lock()
	j.expireLocked(now)
	oi := oOrphaned
	if i := j.tab.find(c.TraceID); i >= 0 {
		if seen, service, spanID, variant := j.tab.seen(i); seen {
			oi = oJoined
			if j.tab.slot(i).flags()&flagTurns != 0 {
				// Several turns: the one whose answer the events name, when it awaits one.
				if turn, ok := j.tab.turnOfAnswer(i, c.SpanID); ok {
					spanID = turn
				} else {
					oi = oIgnored
				}
			}
			c.SpanID, c.Variant = spanID, variant
			if service != "" {
				c.Service = service
			}
		}
	}
	j.mu.Unlock()
	j.count(jContent, oi, 1)
	errs := []error{j.forwardOrphans(ctx, j.takeLate())}
	if oi == oJoined && j.s.NextContent != nil {
		errs = append(errs, j.s.NextContent.ConsumeContent(ctx, c))
	}
	return errors.Join(errs...)
}

// ConsumeLabel accepts a human label from NATS or the HTTP API (record.DecodeLabels validated it).
// l must carry its TraceID; a zero Time becomes now. Before its record it waits and rides on
// the record's Labels; after, it goes on to NextLabel naming the record.
func (j *Join) ConsumeLabel(ctx context.Context, l record.Label) error {
	if l.TraceID == "" {
		return errors.New("join: label without trace_id")
	}
	traceID := l.TraceID
	p := pending{SpanID: l.SpanID, Service: l.Service}
	l.TraceID, l.SpanID, l.Service = "", "", ""
	if l.Time.IsZero() {
		l.Time = j.now()
	}
	p.Label = &l
	return j.add(ctx, traceID, p)
}

// add joins feedback or a label to a seen record (forwarding it) or keeps it pending.
func (j *Join) add(ctx context.Context, traceID string, p pending) error {
	now := j.now()
	if p.Label == nil && p.Feedback.Time.IsZero() {
		p.Feedback.Time = now
	}
	j.mu.Lock()
	j.expireLocked(now)
	i := j.tab.find(traceID)
	if i >= 0 && j.tab.slot(i).flags()&flagSeen != 0 {
		return j.forwardLateUnlock(ctx, traceID, i, p)
	}
	async := j.async.Load()
	if !async {
		j.mu.Unlock()
		// Another ragwatch sharing the bucket may have seen the record. Once started, the
		// writer asks the bucket instead (checkSeen), off the caller's goroutine.
		if st, ok := j.lookupSeen(ctx, traceID, now); ok {
			return j.joinRemote(ctx, st, &p)
		}
		j.mu.Lock()
		j.expireLocked(now)
		i = j.tab.find(traceID)
		if i >= 0 && j.tab.slot(i).flags()&flagSeen != 0 { // the record came meanwhile
			return j.forwardLateUnlock(ctx, traceID, i, p)
		}
	}
	var dropped []pending
	newTrace := i < 0
	if newTrace {
		i = j.addLocked(traceID, now)
	}
	x := j.tab.ext(i, traceID, true)
	x.pending = append(x.pending, p)
	j.pending[p.kind()]++
	if len(x.pending) > MaxPendingPerTrace {
		d := x.pending[0]
		dropped = append(dropped, d)
		n := copy(x.pending, x.pending[1:])
		x.pending[n] = pending{}
		x.pending = x.pending[:n]
		j.pending[d.kind()]--
	}
	pend := j.pendStateLocked(i, traceID)
	j.labelsLocked()
	j.mu.Unlock()
	orphans := j.takeLate()
	for _, d := range dropped {
		orphans = append(orphans, orphan{ns: nsTrace, id: traceID, p: d, evicted: true})
	}
	j.persistPending(ctx, pend)
	if async && newTrace { // one lookup per trace; the sweep looks again for those still waiting
		j.enqueue(op{kind: opCheck, traceID: traceID})
	}
	return j.forwardOrphans(ctx, orphans)
}

// forwardLateUnlock sends feedback or a label for the seen record in slot i on alone. Called
// with j.mu held; releases it.
func (j *Join) forwardLateUnlock(ctx context.Context, traceID string, i int, p pending) error {
	_, service, spanID, variant := j.tab.seen(i)
	j.mu.Unlock()
	if p.SpanID != "" {
		spanID = p.SpanID
	}
	if service == "" {
		service = p.Service
	}
	j.count(p.kind(), oJoined, 1)
	return j.forward(ctx, p, traceID, spanID, service, variant)
}

// forward hands feedback or a label on alone, naming its record and the record's variant
// ("" when it never met its record), so per-variant signals count late feedback where they
// count feedback that came with the record.
func (j *Join) forward(ctx context.Context, p pending, traceID, spanID, service, variant string) error {
	if p.Label != nil {
		if j.s.NextLabel == nil {
			return nil
		}
		l := *p.Label
		l.TraceID, l.SpanID, l.Service, l.Variant = traceID, spanID, service, variant
		return j.s.NextLabel.ConsumeLabel(ctx, l)
	}
	return j.s.NextFeedback.ConsumeFeedback(ctx, p.joined(traceID, spanID, service, variant))
}

// joinRemote joins the pending feedback and labels of a trace (plus extra) to a record another
// ragwatch saw: each is forwarded alone and counted joined.
func (j *Join) joinRemote(ctx context.Context, st entry, extra *pending) error {
	now := j.now()
	j.mu.Lock()
	i := j.tab.find(st.TraceID)
	if i < 0 {
		i = j.addLocked(st.TraceID, now)
	}
	var taken []pending
	if x := j.tab.ext(i, "", false); x != nil {
		taken, x.pending = x.pending, nil
	}
	for _, p := range taken {
		j.pending[p.kind()]--
	}
	if extra != nil {
		taken = append(taken, *extra)
	}
	j.tab.setSeen(i, st.TraceID, st.Service, st.SpanID, st.Variant)
	pend := j.pendStateLocked(i, st.TraceID)
	j.labelsLocked()
	j.mu.Unlock()
	if len(taken) > 0 && (extra == nil || len(taken) > 1) {
		j.persistPending(ctx, pend) // clears the stored pending feedback
	}
	errs := []error{j.forwardOrphans(ctx, j.takeLate())}
	for _, p := range taken {
		spanID := st.SpanID
		if p.SpanID != "" {
			spanID = p.SpanID
		}
		j.count(p.kind(), oJoined, 1)
		errs = append(errs, j.forward(ctx, p, st.TraceID, spanID, st.Service, st.Variant))
	}
	return errors.Join(errs...)
}

// maxRemoteChecks bounds the bucket reads of one sweep.
const maxRemoteChecks = 1000

// checkRemote looks up, for feedback and labels still waiting, whether another ragwatch
// sharing the bucket has seen their record, and for first records of pairs still waiting,
// whether another ragwatch has completed their pair.
func (j *Join) checkRemote(ctx context.Context, now time.Time) {
	if j.s.KV == nil {
		return
	}
	var ids, pairs []string
	j.mu.Lock()
	waiting := 0 // only traces with an extra can have feedback waiting: walk the order for them only
	for i, x := range j.tab.extra {
		if len(x.pending) > 0 && j.tab.slot(int(i)).flags()&flagSeen == 0 {
			waiting++
		}
	}
	for i := j.tab.oldest(); i >= 0 && len(ids) < min(waiting, maxRemoteChecks); i = j.tab.next(i) {
		if x := j.tab.ext(i, "", false); x != nil && len(x.pending) > 0 && j.tab.slot(i).flags()&flagSeen == 0 {
			ids = append(ids, x.id)
		}
	}
	for i := j.tab.oldestNS(nsPair); i >= 0 && len(pairs) < maxRemoteChecks; i = j.tab.next(i) {
		if x := j.tab.ext(i, "", false); x != nil && x.pair != nil && x.pair.first != nil {
			pairs = append(pairs, x.id)
		}
	}
	j.mu.Unlock()
	for _, id := range ids {
		if st, ok := j.lookupSeen(ctx, id, now); ok {
			_ = j.joinRemote(ctx, st, nil)
		}
	}
	for _, id := range pairs {
		j.checkPairDone(ctx, id)
	}
}

// Sweep orphans the feedback, labels and pair halves whose wait has passed and forgets
// expired traces and sessions. Start runs it periodically; tests call it with their clock.
func (j *Join) Sweep(ctx context.Context) {
	now := j.now()
	j.checkRemote(ctx, now)
	j.mu.Lock()
	j.expireLocked(now)
	j.labelsLocked()
	j.mu.Unlock()
	_ = j.forwardOrphans(ctx, j.takeLate())
}

// Pending returns how many feedback events and labels wait for their record.
func (j *Join) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending[jFeedback] + j.pending[jLabel]
}

// orphan is what left the table without meeting its record: feedback or a label (nsTrace),
// the first record of a pair, or a session.
type orphan struct {
	ns      uint8
	id      string
	p       pending
	deleted bool // the entry left the state: delete it from the KV bucket
	evicted bool // at a bound, not at the end of its wait
}

// forwardOrphans counts orphaned and evicted feedback and labels and still hands them on
// alone, without a record, so every feedback is counted once in ragwatch_feedback_total and no
// label posted for a record ragwatch never saw is lost. Pair halves and sessions are counted
// and deleted from the bucket.
func (j *Join) forwardOrphans(ctx context.Context, orphans []orphan) error {
	if len(orphans) == 0 {
		return nil
	}
	var errs []error
	deleted := map[string]bool{}
	for _, o := range orphans {
		key := prefixes[o.ns] + kvKey(o.id)
		// Without PersistSeen no session is in the bucket before shutdown writes them.
		if o.deleted && !deleted[key] && (o.ns != nsSession || j.s.PersistSeen) {
			deleted[key] = true
			j.removeKey(ctx, o.ns, o.id)
		}
		oi := oOrphaned
		if o.evicted {
			oi = oEvicted
		}
		switch o.ns {
		case nsPair:
			j.count(jPair, oi, 1)
			continue
		case nsSession:
			j.count(jSession, oi, 1)
			continue
		}
		j.count(o.p.kind(), oi, 1)
		j.log.Debug("orphaned: no record within retention", "join", joinNames[o.p.kind()], "trace_id", o.id)
		errs = append(errs, j.forward(ctx, o.p, o.id, o.p.SpanID, o.p.Service, ""))
	}
	return errors.Join(errs...)
}

// expiry is the expiry of a key of namespace ns touched at now, in the table's form.
func (j *Join) expiry(ns uint8, now time.Time) int64 { return int64(now.Sub(j.base)) + j.ttl[ns] }

// expiresAt is slot i's expiry as a time, for the KV bucket.
func (j *Join) expiresAt(i int) time.Time {
	return j.base.Add(time.Duration(j.tab.slot(i).expiresNS()))
}

// expireLocked drops expired entries of every namespace; what waited goes to j.late as
// orphans.
func (j *Join) expireLocked(now time.Time) {
	if j.tab.len() == 0 {
		return
	}
	off := int64(now.Sub(j.base))
	for ns := range numNS {
		for i := j.tab.oldestNS(ns); i >= 0 && j.tab.slot(i).expiresNS() <= off; i = j.tab.oldestNS(ns) {
			j.dropLocked(i, false)
		}
	}
}

// dropLocked removes slot i and queues what waited in it in j.late as orphans (evicted at a
// bound, else orphaned), marking the entry for deletion from the KV bucket (so a restart does
// not orphan it twice). Traces without feedback simply expire from the bucket by its TTL, and
// completed pairs stay there as the mark that ignores a third record.
func (j *Join) dropLocked(i int, evicted bool) {
	ns := j.tab.ns(i)
	if x := j.tab.ext(i, "", false); x != nil {
		switch ns {
		case nsTrace:
			for _, p := range x.pending {
				j.pending[p.kind()]--
				j.late = append(j.late, orphan{ns: nsTrace, id: x.id, p: p, deleted: true, evicted: evicted})
			}
		case nsPair:
			if x.pair != nil && x.pair.first != nil {
				j.pending[jPair]--
				j.late = append(j.late, orphan{ns: nsPair, id: x.id, deleted: true, evicted: evicted})
			}
		case nsSession:
			j.pending[jSession]--
			delete(j.sessDirty, x.id)
			j.late = append(j.late, orphan{ns: nsSession, id: x.id, deleted: true, evicted: evicted})
		}
	}
	j.tab.remove(i)
}

// addLocked remembers a new trace, evicting the oldest at the bound, and returns its slot.
func (j *Join) addLocked(traceID string, now time.Time) int {
	return j.addKeyLocked(j.tab.key(traceID), traceID, now)
}

// addKeyLocked remembers a new key of k's namespace, evicting its oldest at the bound, and
// returns its slot.
func (j *Join) addKeyLocked(k traceKey, id string, now time.Time) int {
	for j.tab.fullNS(k.ns) {
		j.dropLocked(j.tab.oldestNS(k.ns), true)
	}
	return j.tab.add(k, id, j.expiry(k.ns, now))
}

// labelsLocked publishes pending[jLabel] to LabelWaiting, which reads it without mu.
func (j *Join) labelsLocked() {
	j.labels.Store(int64(j.pending[jLabel]))
}

// heldGauges reports what the join holds when it is scraped, read under mu, rather than
// gauges set on every change: the record path paid five atomic stores per record for them.
type heldGauges struct {
	j                *Join
	pending, tracked *prometheus.Desc
}

func (g heldGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.pending
	ch <- g.tracked
}

func (g heldGauges) Collect(ch chan<- prometheus.Metric) {
	g.j.mu.Lock()
	pending, tracked := g.j.pending, g.j.tab.countNS(nsTrace)
	g.j.mu.Unlock()
	for ji, name := range joinNames {
		if ji == jContent {
			continue // never waits
		}
		ch <- prometheus.MustNewConstMetric(g.pending, prometheus.GaugeValue, float64(pending[ji]), name)
	}
	ch <- prometheus.MustNewConstMetric(g.tracked, prometheus.GaugeValue, float64(tracked))
}

// takeLate returns the orphans collected under the lock, to forward outside it.
func (j *Join) takeLate() []orphan {
	j.mu.Lock()
	out := j.late
	j.late = nil
	j.mu.Unlock()
	return out
}

// joined is the feedback as it goes on, naming the request it judges and its variant.
func (p pending) joined(traceID, spanID, service, variant string) record.Feedback {
	f := p.Feedback
	f.TraceID, f.SpanID, f.Service, f.Variant = traceID, spanID, service, variant
	return f
}
