// Package feedback joins user feedback to its record by trace id. Feedback arrives from NATS,
// POST /api/v1/feedback and OTLP annotations, usually seconds to hours after the answer and
// sometimes before the trace is assembled; the join sits in the record flow so each feedback
// reaches the signals, the sampler and the alerts exactly once, attached to what is known
// about its request.
package feedback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
)

// Join outcomes, the `outcome` label of ragwatch_feedback_join_total.
const (
	OutcomeJoined   = "joined"
	OutcomeOrphaned = "orphaned"
)

// MaxPendingPerTrace bounds the feedback held for one trace that has not arrived yet; older
// feedback beyond it is orphaned.
const MaxPendingPerTrace = 16

// Settings configure a Join. Next and NextFeedback are required.
type Settings struct {
	// Retention is how long feedback waits for its record and a record's ids are remembered
	// for feedback arriving later (default 24h).
	Retention time.Duration
	// MaxEntries bounds the traces held (default 200000, at most 1<<24); the oldest is
	// dropped beyond it. Each costs ≈ 61 bytes (BenchmarkJoinMemory), more with feedback
	// waiting or ids not in OTLP's hex form.
	MaxEntries int
	// Next receives every record, with early feedback attached.
	Next record.Consumer
	// NextFeedback receives feedback that arrived after its record, and orphaned feedback.
	NextFeedback record.FeedbackConsumer
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
	// SweepInterval is how often Start's loop orphans expired feedback (default
	// min(Retention/20, 1m)).
	SweepInterval time.Duration
}

// Join is the feedback join. Its methods are safe for concurrent use.
type Join struct {
	s   Settings
	log *slog.Logger
	now func() time.Time

	joinTotal *prometheus.CounterVec
	joined    prometheus.Counter
	orphaned  prometheus.Counter
	pendingG  prometheus.Gauge
	tracked   prometheus.Gauge
	kvErrors  *prometheus.CounterVec

	// base is the origin of the expiry times held in the table (nanoseconds after base, with
	// the clock's monotonic reading when it has one, like time.Time's own comparisons).
	base      time.Time
	retention int64

	mu      sync.Mutex // guards tab, pending, late
	tab     *table     // the traces remembered, oldest first
	pending int
	late    []orphan // orphans found under the lock, forwarded by the caller after unlocking

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

// pending is feedback waiting for its record, in the form persisted to the KV bucket: the
// feedback's own ids are empty, the trace id being the entry's.
type pending struct {
	Feedback record.Feedback `json:"f"`
	SpanID   string          `json:"span,omitempty"`
	Service  string          `json:"svc,omitempty"`
}

var (
	_ record.Consumer         = (*Join)(nil)
	_ record.FeedbackConsumer = (*Join)(nil)
)

// New creates a Join. Call Start to load the persisted state and run the expiry loop.
func New(s Settings) (*Join, error) {
	if s.Next == nil || s.NextFeedback == nil {
		return nil, errors.New("feedback: Next and NextFeedback are required")
	}
	if s.Retention <= 0 {
		s.Retention = 24 * time.Hour
	}
	if s.MaxEntries <= 0 {
		s.MaxEntries = 200000
	}
	s.MaxEntries = min(s.MaxEntries, maxTableEntries)
	if s.SweepInterval <= 0 {
		s.SweepInterval = min(s.Retention/20, time.Minute)
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
	j := &Join{
		s:         s,
		log:       s.Logger,
		now:       s.Now,
		base:      s.Now(),
		retention: int64(s.Retention),
		tab:       newTable(s.MaxEntries),
		stop:      make(chan struct{}),
		joinTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_feedback_join_total",
			Help: "Feedback by join outcome: joined to its record (whichever arrived first) or orphaned (no record within feedback.retention).",
		}, []string{"outcome"}),
		pendingG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_feedback_pending",
			Help: "Feedback waiting for its record.",
		}),
		tracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_feedback_tracked_traces",
			Help: "Traces the feedback join remembers (records seen and traces with pending feedback).",
		}),
		kvErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_feedback_state_errors_total",
			Help: "Failed reads and writes of the persisted feedback join state, by operation (put, delete, get, load, queue_full, storage_full; load_skipped: entries not loaded at start beyond max_entries).",
		}, []string{"op"}),
	}
	j.joined = j.joinTotal.WithLabelValues(OutcomeJoined)
	j.orphaned = j.joinTotal.WithLabelValues(OutcomeOrphaned)
	for _, c := range []prometheus.Collector{j.joinTotal, j.pendingG, j.tracked, j.kvErrors} {
		if err := s.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("feedback: register metrics: %w", err)
		}
	}
	return j, nil
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

// ConsumeRecord passes r to Next. Feedback for r's trace that arrived earlier is attached (on
// a copy: r stays untouched); each such feedback counts as joined.
func (j *Join) ConsumeRecord(ctx context.Context, r *record.Record) error {
	if r == nil {
		return errors.New("feedback: nil record")
	}
	now := j.now()
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
				} else {
					kept = append(kept, p)
				}
			}
			clear(x.pending[len(kept):])
			x.pending = kept
			j.pending -= len(matched)
		}
		j.tab.touch(i, j.expiry(now))
	}
	j.tab.setSeen(i, r.TraceID, r.Service, r.SpanID, r.Time)
	var seen, pend entry
	if persistSeen {
		seen = entry{TraceID: r.TraceID, Seen: true, Service: r.Service, SpanID: r.SpanID, RecordTime: r.Time, Expires: j.expiresAt(i)}
	}
	if len(matched) > 0 {
		pend = j.pendStateLocked(i, r.TraceID)
	}
	j.gaugesLocked()
	evicted := j.late
	j.late = nil
	j.mu.Unlock()

	if persistSeen {
		j.persistSeen(ctx, seen)
	}
	if len(matched) == 0 && len(evicted) == 0 {
		return j.s.Next.ConsumeRecord(ctx, r)
	}
	if len(matched) > 0 {
		j.persistPending(ctx, pend)
	}
	out := r
	var late []pending
	if len(matched) > 0 {
		j.joined.Add(float64(len(matched)))
		if r.Feedback == nil {
			// The newest feedback rides on the record; any earlier ones follow as feedback.
			c := *r
			f := matched[len(matched)-1].Feedback
			c.Feedback = &f
			out = &c
			late = matched[:len(matched)-1]
		} else {
			late = matched
		}
	}
	errs := []error{j.s.Next.ConsumeRecord(ctx, out)}
	for _, p := range late {
		errs = append(errs, j.s.NextFeedback.ConsumeFeedback(ctx, p.joined(r.TraceID, r.SpanID, r.Service)))
	}
	errs = append(errs, j.forwardOrphans(ctx, evicted))
	return errors.Join(errs...)
}

// ConsumeFeedback accepts feedback from NATS or the HTTP API (DecodeEvents validated it) or
// found in a trace (OTLP annotations, feedback spans). f must carry its TraceID; a zero Time
// becomes now.
func (j *Join) ConsumeFeedback(ctx context.Context, f record.Feedback) error {
	if f.TraceID == "" {
		return errors.New("feedback: no trace_id")
	}
	traceID := f.TraceID
	p := pending{SpanID: f.SpanID, Service: f.Service}
	f.TraceID, f.SpanID, f.Service = "", "", "" // held by pending and the table, not twice
	p.Feedback = f
	return j.add(ctx, traceID, p)
}

// add joins feedback to a seen record (forwarding it) or keeps it pending.
func (j *Join) add(ctx context.Context, traceID string, p pending) error {
	now := j.now()
	if p.Feedback.Time.IsZero() {
		p.Feedback.Time = now
	}
	j.mu.Lock()
	j.expireLocked(now)
	i := j.tab.find(traceID)
	if i >= 0 && j.tab.slots[i].flags&flagSeen != 0 {
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
		if i >= 0 && j.tab.slots[i].flags&flagSeen != 0 { // the record came meanwhile
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
	j.pending++
	if len(x.pending) > MaxPendingPerTrace {
		dropped = append(dropped, x.pending[0])
		n := copy(x.pending, x.pending[1:])
		x.pending[n] = pending{}
		x.pending = x.pending[:n]
		j.pending--
	}
	pend := j.pendStateLocked(i, traceID)
	j.gaugesLocked()
	j.mu.Unlock()
	orphans := j.takeLate()
	for _, d := range dropped {
		orphans = append(orphans, orphan{traceID: traceID, p: d})
	}
	j.persistPending(ctx, pend)
	if async && newTrace { // one lookup per trace; the sweep looks again for those still waiting
		j.enqueue(op{kind: opCheck, traceID: traceID})
	}
	return j.forwardOrphans(ctx, orphans)
}

// forwardLateUnlock sends feedback for the seen record in slot i on as late feedback. Called
// with j.mu held; releases it.
func (j *Join) forwardLateUnlock(ctx context.Context, traceID string, i int, p pending) error {
	_, service, spanID, _ := j.tab.seen(i)
	j.mu.Unlock()
	if p.SpanID != "" {
		spanID = p.SpanID
	}
	if service == "" {
		service = p.Service
	}
	j.joined.Inc()
	return j.s.NextFeedback.ConsumeFeedback(ctx, p.joined(traceID, spanID, service))
}

// joinRemote joins the pending feedback of a trace (plus extra) to a record another ragwatch
// saw: each is forwarded as late feedback and counted joined.
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
	j.pending -= len(taken)
	if extra != nil {
		taken = append(taken, *extra)
	}
	j.tab.setSeen(i, st.TraceID, st.Service, st.SpanID, st.RecordTime)
	pend := j.pendStateLocked(i, st.TraceID)
	j.gaugesLocked()
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
		j.joined.Inc()
		errs = append(errs, j.s.NextFeedback.ConsumeFeedback(ctx, p.joined(st.TraceID, spanID, st.Service)))
	}
	return errors.Join(errs...)
}

// maxRemoteChecks bounds the bucket reads of one sweep.
const maxRemoteChecks = 1000

// checkRemote looks up, for feedback still waiting, whether another ragwatch sharing the
// bucket has seen its record.
func (j *Join) checkRemote(ctx context.Context, now time.Time) {
	if j.s.KV == nil {
		return
	}
	var ids []string
	j.mu.Lock()
	waiting := 0 // only traces with an extra can have feedback waiting: walk the order for them only
	for i, x := range j.tab.extra {
		if len(x.pending) > 0 && j.tab.slots[i].flags&flagSeen == 0 {
			waiting++
		}
	}
	for i := j.tab.oldest(); i >= 0 && len(ids) < min(waiting, maxRemoteChecks); i = int(j.tab.slots[i].next) - 1 {
		if x := j.tab.ext(i, "", false); x != nil && len(x.pending) > 0 && j.tab.slots[i].flags&flagSeen == 0 {
			ids = append(ids, x.traceID)
		}
	}
	j.mu.Unlock()
	for _, id := range ids {
		if st, ok := j.lookupSeen(ctx, id, now); ok {
			_ = j.joinRemote(ctx, st, nil)
		}
	}
}

// Sweep orphans the feedback whose retention has passed and forgets expired traces. Start
// runs it periodically; tests call it with their clock.
func (j *Join) Sweep(ctx context.Context) {
	now := j.now()
	j.checkRemote(ctx, now)
	j.mu.Lock()
	j.expireLocked(now)
	j.gaugesLocked()
	j.mu.Unlock()
	_ = j.forwardOrphans(ctx, j.takeLate())
}

// Pending returns how many feedback events wait for their record.
func (j *Join) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending
}

type orphan struct {
	traceID string
	p       pending
	deleted bool // the entry left the state: delete it from the KV bucket
}

// forwardOrphans counts orphaned feedback and still hands it to NextFeedback, without a
// record, so every feedback is counted once in ragwatch_feedback_total.
func (j *Join) forwardOrphans(ctx context.Context, orphans []orphan) error {
	if len(orphans) == 0 {
		return nil
	}
	var errs []error
	deleted := map[string]bool{}
	for _, o := range orphans {
		if o.deleted && !deleted[o.traceID] {
			deleted[o.traceID] = true
			j.remove(ctx, o.traceID)
		}
		j.orphaned.Inc()
		j.log.Debug("feedback orphaned: no record within retention", "trace_id", o.traceID)
		errs = append(errs, j.s.NextFeedback.ConsumeFeedback(ctx, o.p.joined(o.traceID, o.p.SpanID, o.p.Service)))
	}
	return errors.Join(errs...)
}

// expiry is the expiry of a trace touched at now, in the table's form.
func (j *Join) expiry(now time.Time) int64 { return int64(now.Sub(j.base)) + j.retention }

// expiresAt is slot i's expiry as a time, for the KV bucket.
func (j *Join) expiresAt(i int) time.Time { return j.base.Add(time.Duration(j.tab.slots[i].expires)) }

// expireLocked drops expired entries; their pending feedback goes to j.late as orphans.
func (j *Join) expireLocked(now time.Time) {
	if j.tab.n == 0 {
		return
	}
	off := int64(now.Sub(j.base))
	for i := j.tab.oldest(); i >= 0 && j.tab.slots[i].expires <= off; i = j.tab.oldest() {
		j.dropLocked(i)
	}
}

// dropLocked removes slot i and queues its pending feedback in j.late as orphans, marking
// the entry for deletion from the KV bucket (so a restart does not orphan it twice). Entries
// without feedback simply expire from the bucket by its TTL.
func (j *Join) dropLocked(i int) {
	if x := j.tab.ext(i, "", false); x != nil {
		j.pending -= len(x.pending)
		for _, p := range x.pending {
			j.late = append(j.late, orphan{traceID: x.traceID, p: p, deleted: true})
		}
	}
	j.tab.remove(i)
}

// addLocked remembers a new trace, evicting the oldest at the bound, and returns its slot.
func (j *Join) addLocked(traceID string, now time.Time) int {
	return j.addKeyLocked(j.tab.key(traceID), traceID, now)
}

func (j *Join) addKeyLocked(k traceKey, traceID string, now time.Time) int {
	for j.tab.full() {
		j.dropLocked(j.tab.oldest())
	}
	return j.tab.add(k, traceID, j.expiry(now))
}

func (j *Join) gaugesLocked() {
	j.pendingG.Set(float64(j.pending))
	j.tracked.Set(float64(j.tab.n))
}

// takeLate returns the orphans collected under the lock, to forward outside it.
func (j *Join) takeLate() []orphan {
	j.mu.Lock()
	out := j.late
	j.late = nil
	j.mu.Unlock()
	return out
}

// joined is the feedback as it goes on, naming the request it judges.
func (p pending) joined(traceID, spanID, service string) record.Feedback {
	f := p.Feedback
	f.TraceID, f.SpanID, f.Service = traceID, spanID, service
	return f
}
