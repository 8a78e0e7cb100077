package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Outcomes of ragwatch_records_total.
const (
	OutcomeAssembled = "assembled" // a record from a trace whose local root arrived
	OutcomePartial   = "partial"   // a record from a trace assembled without its root (timeout, eviction, shutdown)
	OutcomeNotRAG    = "not_rag"   // a trace with no retrieval and no generation: counted, dropped
	OutcomeFeedback  = "feedback"  // feedback outside any turn, handed to the feedback consumer
	OutcomeDropped   = "dropped"   // a trace or feedback that could not be assembled or delivered
)

// Reasons of ragwatch_traces_evicted_total.
const (
	EvictMaxTraces = "max_traces"
	EvictMaxBytes  = "max_bytes"
	EvictMaxSpans  = "max_spans" // one trace reached maxSpansPerTrace
)

// maxSpansPerTrace bounds one trace: beyond, it is assembled with what it has.
const maxSpansPerTrace = 10000

// maxTrackedSpans bounds the traces whose dangling parents are tracked (each span added scans
// the spans held before it): a larger trace is never released early and waits assembly.wait.
const maxTrackedSpans = 64

// Reasons of ragwatch_assembly_released_total: what took a held trace out for assembly
// (evictions are counted in ragwatch_traces_evicted_total instead).
const (
	ReleaseComplete = "complete" // complete_wait after the trace was visibly complete
	ReleaseWait     = "wait"     // wait after a local root, or after the missing half arrived
	ReleaseTimeout  = "timeout"  // timeout after the first span: no root, or a half that never came
	ReleaseShutdown = "shutdown" // still held at shutdown
)

// Settings configures an Assembler.
type Settings struct {
	Config   config.Assembly         // wait, complete_wait, timeout, max_traces, max_bytes
	Next     record.Consumer         // receives each assembled record
	Feedback record.FeedbackConsumer // feedback found in a trace that holds no turn (may be nil)
	// Content receives what GenAI events that came as log records after their trace was
	// assembled say of the turn (the answer, the question, the history): record.Content
	// naming the trace and the event's span, to join the record that went by (may be nil:
	// such events are counted late_dropped).
	Content    record.ContentConsumer
	Registerer prometheus.Registerer // nil: metrics are not registered
	Logger     *slog.Logger          // nil: discard
	Now        func() time.Time      // nil: time.Now
	// UpstreamProbability is receivers.otlp.upstream_sampling_probability: the records of a
	// trace whose tracestate declares no sampling probability get it (0: none).
	UpstreamProbability float64
	// Conversation bounds the history records read from their generation's input messages
	// (max_history_turns, max_history_bytes; zero values: unbounded).
	Conversation config.Conversation
	// VariantAttributes are variants.attributes: the keys read, after rag.variant, for a
	// record's variant (nil: span.DefaultVariantAttributes).
	VariantAttributes []string
	// RetrievalTools are conventions.retrieval_tools: the AI SDK tools whose calls are
	// retrievals whatever their result's shape.
	RetrievalTools []string
	// KeepContent, when set, says whether the documents' texts of a trace are kept: the
	// protobuf decoder does not copy those of a trace it refuses (collector/span elide.go), and its records
	// carry record.Record.Elided. It is called once per trace and request, from the receivers'
	// goroutines. nil keeps every text.
	KeepContent func(pcommon.TraceID) bool
}

// Assembler holds spans by trace id until the trace is complete, then assembles and hands its
// records to Next. Memory is bounded by max_traces and max_bytes: beyond, the oldest trace is
// assembled early with what it has (and counted as evicted).
//
// Locking: mu guards the held traces, the deadline lists, the arrival list, the backlog and the
// recently-assembled set. procMu serialises assembly and delivery, which run without mu.
type Assembler struct {
	cfg      config.Assembly
	next     record.Consumer
	handoff  record.HandoffConsumer // next, when it takes records handed over
	feedback record.FeedbackConsumer
	content  record.ContentConsumer
	log      *slog.Logger
	now      func() time.Time
	m        *metrics
	upstream float64 // Settings.UpstreamProbability
	conv     config.Conversation
	variants span.VariantKeys
	opts     Options
	// keepContent is Settings.KeepContent.
	keepContent func(pcommon.TraceID) bool
	// early is set when complete_wait is shorter than wait: complete traces are tracked and
	// released at complete_wait. Unset, assembly runs exactly as before complete_wait existed.
	early bool
	// fastTickBytes is the constant fastTickBytes; tests lower it.
	fastTickBytes int64

	mu           sync.Mutex
	traces       map[pcommon.TraceID]*trace
	deadlines    [numLists]deadlineList
	oldest       *trace // arrival list, oldest first
	newest       *trace
	bytes        int64
	backlog      []*trace // evicted traces waiting for the worker
	backlogBytes int64
	lateFeedback []span.Span
	// lateEvents holds carriers of log-based events whose trace was assembled already, until
	// the worker reads them into record.Content for Settings.Content; at most max_traces.
	lateEvents []span.Span
	done       recentSet
	// eventsSeen is set by the first log-based event taken (AddEvents): from then on a new
	// trace waits for its generation's output as for a straggler span (outNeeded).
	eventsSeen bool

	procMu sync.Mutex

	runMu   sync.Mutex
	stop    chan struct{}
	kick    chan struct{}
	wg      sync.WaitGroup
	baseCtx context.Context
}

type trace struct {
	id       pcommon.TraceID
	spans    []span.Span
	bytes    int64 // what the trace keeps alive (size.go), overhead included
	overhead int64 // traceOverhead(spans) when last counted
	first    time.Time
	deadline time.Time
	rootSeen bool
	trueRoot bool // a span without parent arrived
	hasRet   bool
	hasGen   bool
	// out holds outSeen, outNeeded and eventsHeld, in one byte so that a held trace keeps its
	// size class (160 bytes).
	out      uint8
	deferred bool
	list     int8 // the deadline list holding the trace, or -1
	// dangling counts held spans whose parent span is not held (trackParent); -1 once the
	// trace outgrew maxTrackedSpans. Tracked only when the Assembler is early.
	dangling  int8
	dlPrev    *trace // neighbours in that list
	dlNext    *trace
	prev      *trace
	next      *trace
	evictedBy string
}

// New builds an Assembler. Call Start to assemble on time; without Start, traces are held until
// Shutdown.
func New(s Settings) (*Assembler, error) {
	if s.Next == nil {
		return nil, errors.New("assemble: Next consumer is required")
	}
	if err := s.Config.Validate(); err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	if s.Config.MaxBytes == 0 { // not derived by the caller from a memory limit
		s.Config.MaxBytes = config.DefaultAssemblyMaxBytes
	}
	m, err := newMetrics(s.Registerer)
	if err != nil {
		return nil, fmt.Errorf("assemble: register metrics: %w", err)
	}
	handoff, _ := s.Next.(record.HandoffConsumer) // records are made here and not read after delivery
	a := &Assembler{
		cfg:         s.Config,
		next:        s.Next,
		handoff:     handoff,
		feedback:    s.Feedback,
		content:     s.Content,
		log:         s.Logger,
		now:         s.Now,
		m:           m,
		upstream:    s.UpstreamProbability,
		conv:        s.Conversation,
		opts:        Options{RetrievalTools: slices.Clone(s.RetrievalTools)},
		keepContent: s.KeepContent,
		early:       s.Config.CompleteWait < s.Config.Wait,
		traces:      make(map[pcommon.TraceID]*trace),
		done:        newRecentSet(min(max(s.Config.MaxTraces, 1024), 1<<17)),
		kick:        make(chan struct{}, 1),
		baseCtx:     context.Background(),
	}
	a.fastTickBytes = fastTickBytes
	if s.VariantAttributes != nil {
		a.variants = span.NewVariantKeys(s.VariantAttributes)
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// Held returns how many traces are held now.
func (a *Assembler) Held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.traces)
}

// ConsumeTraces takes the spans of td into the held traces. It copies what it reads (td may be
// reused), never calls downstream consumers and returns quickly.
func (a *Assembler) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	buf := spanBufs.Get().(*[]span.Span)
	spans := span.FromTraces(td, (*buf)[:0], a.variants)
	if len(spans) > 0 {
		a.Add(spans) // copies each span into its trace
	}
	if cap(spans) <= maxPooledSpanBuf {
		clear(spans)
		*buf = spans[:0]
		spanBufs.Put(buf)
	}
	return nil
}

// spanBufs holds ConsumeTraces' scratch []span.Span (Add copies the spans it files).
var spanBufs = sync.Pool{New: func() any { return new([]span.Span) }}

const maxPooledSpanBuf = 1024

// Add takes spans already read (FromTraces, or the offline path) into the held traces.
func (a *Assembler) Add(spans []span.Span) {
	now := a.now()
	kick := false
	a.mu.Lock()
	light := a.bytes <= a.fastTickBytes
	// A request usually carries a trace's spans one after another: tr stays the trace of the
	// previous span while the id repeats, so a run of spans costs one lookup. A held trace is
	// never in the recently-assembled set (an id enters it only when its trace leaves the map),
	// so the set is asked only about ids that are not held.
	var tr *trace
	for i := range spans {
		s := &spans[i]
		if tr == nil || tr.id != s.TraceID {
			tr = a.traces[s.TraceID]
		}
		if tr == nil {
			if a.done.has(s.TraceID) {
				a.m.late.Inc()
				if hasFeedback(s) && len(a.lateFeedback) < a.cfg.MaxTraces {
					a.lateFeedback = append(a.lateFeedback, *s)
					kick = true
				}
				continue
			}
			tr = a.newTrace(s.TraceID, now, spanCapHint(spans[i:]))
		}
		if len(tr.spans) == maxSpansPerTrace {
			// A trace this large is assembled now; its further spans count as late.
			a.evict(tr, EvictMaxSpans)
			tr = nil // no longer held: the next span of its id is found in the set
			kick = true
			a.m.late.Inc()
			continue
		}
		if a.early {
			tr.trackParent(s)
		}
		tr.spans = append(tr.spans, *s)
		oh := traceOverhead(tr.spans)
		size := spanSize(s) + oh - tr.overhead
		tr.overhead = oh
		tr.bytes += size
		a.bytes += size
		ret, gen, out := quickKind(s)
		wasTurn := tr.hasRet && tr.hasGen
		tr.hasRet = tr.hasRet || ret
		tr.hasGen = tr.hasGen || gen
		if out {
			tr.out |= outSeen
		}
		switch {
		case s.IsLocalRoot():
			tr.rootSeen = true
			tr.trueRoot = tr.trueRoot || s.ParentSpanID.IsEmpty()
			tr.deferred = false
			if a.early && tr.complete() {
				a.schedule(tr, minTime(now.Add(a.cfg.CompleteWait), tr.first.Add(a.cfg.Timeout+a.cfg.Wait)), listComplete)
			} else {
				a.schedule(tr, minTime(now.Add(a.cfg.Wait), tr.first.Add(a.cfg.Timeout+a.cfg.Wait)), listWait)
			}
		case a.early && tr.complete() != (tr.list == listComplete):
			tr.deferred = false
			if tr.list != listComplete {
				// Complete after its true root (the root came first, or the missing half came
				// later): released at complete_wait, never later than it was due.
				a.schedule(tr, minTime(now.Add(a.cfg.CompleteWait), tr.deadline), listComplete)
			} else {
				// No longer complete (a span names a parent not held, or the trace outgrew
				// maxTrackedSpans): more spans are on their way, wait as after a root.
				a.schedule(tr, minTime(now.Add(a.cfg.Wait), tr.first.Add(a.cfg.Timeout+a.cfg.Wait)), listWait)
			}
		case tr.deferred && !wasTurn && tr.hasRet && tr.hasGen:
			// The half a held trace waited for: assemble once its stragglers are in.
			tr.deferred = false
			a.schedule(tr, now.Add(a.cfg.Wait), listWait)
		}
	}
	for len(a.traces) > a.cfg.MaxTraces {
		a.evictOldest(EvictMaxTraces)
		kick = true
	}
	for a.bytes > a.cfg.MaxBytes && a.oldest != nil {
		a.evictOldest(EvictMaxBytes)
		kick = true
	}
	if light && a.bytes > a.fastTickBytes {
		// Heavy now: wake the worker, which then ticks at its fast period, rather than let
		// traces pile up until the slow tick it is sleeping on.
		kick = true
	}
	a.m.held.Set(float64(len(a.traces)))
	a.m.heldBytes.Set(float64(a.bytes))
	a.mu.Unlock()
	if kick {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// complete reports whether the trace looks whole: its true root (no parent) arrived, it holds a
// retrieval and a generation, and every held span's parent is held. Exporters send spans as
// they end and children end before their parent, so only stragglers of reordered exports (or
// spans of other processes whose parents are held) can still come.
func (tr *trace) complete() bool {
	return tr.trueRoot && tr.hasRet && tr.hasGen && tr.dangling == 0 && (tr.out&outSeen != 0 || tr.out&outNeeded == 0)
}

// Bits of trace.out.
const (
	// outSeen: a span or event carries a generation's output (an answer key or a gen_ai.choice
	// event: a sign of a generation in the conventions' table, not only a span kind).
	outSeen uint8 = 1 << iota
	// outNeeded: the trace was first seen after log-based events had arrived, so it is complete
	// only with its output, which may still come as a log record.
	outNeeded
	// eventsHeld: carriers of log-based events are among the spans (span.JoinEvents at assembly).
	eventsHeld
)

// newTrace files a new held trace of id, first seen now, with room for n spans. Called with mu
// held.
func (a *Assembler) newTrace(id pcommon.TraceID, now time.Time, n int) *trace {
	tr := &trace{id: id, first: now, list: -1, spans: span.GetTraceSpans(n)}
	if a.eventsSeen {
		tr.out = outNeeded
	}
	a.traces[id] = tr
	a.schedule(tr, now.Add(a.cfg.Timeout), listTimeout)
	a.pushNewest(tr)
	tr.overhead = traceOverhead(tr.spans)
	tr.bytes = tr.overhead
	a.bytes += tr.overhead
	return tr
}

// trackParent updates tr.dangling for s, about to be appended to tr.spans: s dangles unless it
// has no parent or its parent is held; the held spans whose parent is s stop dangling, unless
// a span with s's id was held already (a duplicate: they never dangled). One pass over the
// spans held, no allocation; beyond maxTrackedSpans spans the trace is no longer tracked.
func (tr *trace) trackParent(s *span.Span) {
	if tr.dangling < 0 {
		return
	}
	if len(tr.spans) >= maxTrackedSpans {
		tr.dangling = -1
		return
	}
	parentHeld := s.ParentSpanID.IsEmpty()
	dup := false
	var children int8
	for i := range tr.spans {
		h := &tr.spans[i]
		if h.EventsOnly {
			continue // a carrier of its span's log-based events, not the span
		}
		parentHeld = parentHeld || h.SpanID == s.ParentSpanID
		dup = dup || h.SpanID == s.SpanID
		if h.ParentSpanID == s.SpanID {
			children++
		}
	}
	if !parentHeld {
		tr.dangling++
	}
	if !dup && !s.SpanID.IsEmpty() {
		tr.dangling -= children
	}
}

// spanCapHint is the capacity of a new trace's []span.Span, for its first span spans[0]: the run of
// spans of its id that start spans, when the request carries several of them together (the
// request then holds the trace, or this part of it, whole: a 5-span trace keeps 5 slots, not
// 8); else room for the rest of the request, at most 8 spans, as spans arriving one by one
// between other traces' are likely to be followed by more.
func spanCapHint(spans []span.Span) int {
	run := 1
	for run < span.MaxPooledTraceSpans && run < len(spans) && spans[run].TraceID == spans[0].TraceID {
		run++
	}
	if run > 1 {
		return run
	}
	return min(len(spans), span.MaxPooledTraceSpans)
}

// evictOldest moves the oldest trace to the backlog, to be assembled early by the worker. The
// backlog itself is bounded like the held traces; beyond, its oldest trace is dropped and counted.
// Called with mu held.
func (a *Assembler) evictOldest(reason string) {
	a.evict(a.oldest, reason)
}

// evict moves tr to the backlog (see evictOldest). Called with mu held.
func (a *Assembler) evict(tr *trace, reason string) {
	a.remove(tr)
	a.done.add(tr.id)
	tr.evictedBy = reason
	a.m.evicted.WithLabelValues(reason).Inc()
	a.backlog = append(a.backlog, tr)
	a.backlogBytes += tr.bytes
	for len(a.backlog) > 0 && (len(a.backlog) > a.cfg.MaxTraces || a.backlogBytes > a.cfg.MaxBytes) {
		if len(a.backlog) == 1 && len(a.backlog[0].spans) > 0 && a.backlogBytes <= 2*a.cfg.MaxBytes {
			break // one trace alone may exceed max_bytes: assemble it rather than drop it
		}
		a.backlogBytes -= a.backlog[0].bytes
		a.backlog[0] = nil
		a.backlog = a.backlog[1:]
		a.m.records.WithLabelValues(OutcomeDropped).Inc()
		a.log.Warn("assembly backlog full: dropped a trace", "reason", reason)
	}
	a.log.Debug("trace evicted", "reason", reason)
}

// remove takes tr out of the map, its deadline list and the arrival list. Called with mu held.
func (a *Assembler) remove(tr *trace) {
	delete(a.traces, tr.id)
	a.unschedule(tr)
	if tr.prev != nil {
		tr.prev.next = tr.next
	} else {
		a.oldest = tr.next
	}
	if tr.next != nil {
		tr.next.prev = tr.prev
	} else {
		a.newest = tr.prev
	}
	tr.prev, tr.next = nil, nil
	a.bytes -= tr.bytes
}

func (a *Assembler) pushNewest(tr *trace) {
	tr.prev = a.newest
	if a.newest != nil {
		a.newest.next = tr
	} else {
		a.oldest = tr
	}
	a.newest = tr
}

// Start starts the background worker that assembles traces when their time comes. It returns
// at once.
func (a *Assembler) Start(ctx context.Context) error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.stop != nil {
		return nil
	}
	a.baseCtx = context.WithoutCancel(ctx)
	a.stop = make(chan struct{})
	a.wg.Add(1)
	every, fast := a.tickIntervals()
	go a.loop(a.stop, every, fast)
	return nil
}

// tickIntervals gives the worker's two periods. every bounds how late a due trace is
// assembled while few traces are held: a quarter of wait, between 10 ms and 250 ms. Large
// bursts handed downstream cost less per trace: a tick of a quarter of complete_wait cost
// ≈ 15 % more CPU per trace at 1,000 traces/s (docs/performance.md), where the traces held
// weigh a few MB whatever the tick. fast is the period while the traces held weigh more than
// fastTickBytes: at full speed most of ragwatch's memory is traces whose complete_wait is
// over, waiting for the next tick, so the worker ticks eight times as often, and at least
// every quarter of complete_wait when complete traces leave early; a complete trace then
// leaves within 1.25 × complete_wait of its root.
func (a *Assembler) tickIntervals() (every, fast time.Duration) {
	every = min(max(a.cfg.Wait/4, 10*time.Millisecond), 250*time.Millisecond)
	fast = every / 8
	if a.early {
		fast = min(fast, a.cfg.CompleteWait/4)
	}
	return every, max(fast, time.Millisecond)
}

// fastTickBytes is the weight of held traces above which the worker ticks at its fast
// period (tickIntervals).
const fastTickBytes = 8 << 20

func (a *Assembler) loop(stop <-chan struct{}, every, fast time.Duration) {
	defer a.wg.Done()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-a.kick:
		}
		a.process(a.baseCtx, a.now(), false)
		t.Reset(a.nextTick(every, fast))
	}
}

// nextTick is how long the worker waits for its next tick: fast while the traces held weigh
// more than fastTickBytes, else every.
func (a *Assembler) nextTick(every, fast time.Duration) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bytes > a.fastTickBytes {
		return fast
	}
	return every
}

// Shutdown stops the worker, then assembles and delivers every trace still held. It is
// idempotent and safe without Start.
func (a *Assembler) Shutdown(ctx context.Context) error {
	a.runMu.Lock()
	if a.stop != nil {
		close(a.stop)
		a.wg.Wait()
		a.stop = nil
	}
	a.runMu.Unlock()
	return a.process(ctx, a.now(), true)
}

// process assembles the traces due at now (all held traces when all is set), the evicted
// backlog and late feedback, and delivers their records.
func (a *Assembler) process(ctx context.Context, now time.Time, all bool) error {
	a.procMu.Lock()
	defer a.procMu.Unlock()
	a.mu.Lock()
	due := a.backlog
	a.backlog, a.backlogBytes = nil, 0
	for {
		tr := a.nextDeadline()
		if tr == nil || (!all && tr.deadline.After(now)) {
			break
		}
		if !all && a.holdLonger(tr, now) {
			tr.deferred = true
			a.schedule(tr, tr.first.Add(a.cfg.Timeout), listDeferred)
			continue
		}
		a.m.released[releaseReason(tr, all)].Inc()
		a.remove(tr)
		a.done.add(tr.id)
		due = append(due, tr)
	}
	late := a.lateFeedback
	a.lateFeedback = nil
	lateEvents := a.lateEvents
	a.lateEvents = nil
	a.m.held.Set(float64(len(a.traces)))
	a.m.heldBytes.Set(float64(a.bytes))
	a.mu.Unlock()

	var errs []error
	for _, tr := range due {
		if err := a.finish(ctx, tr); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range late {
		res := AssembleWith(late[i:i+1], &a.opts)
		if err := a.deliverFeedback(ctx, res.Feedback); err != nil {
			errs = append(errs, err)
		}
	}
	if len(lateEvents) > 0 {
		// After the traces due: a record always goes by before the late content of its trace.
		errs = append(errs, a.deliverLateEvents(ctx, lateEvents))
	}
	return errors.Join(errs...)
}

// Indices of releaseReasons (and metrics.released).
const (
	relComplete = iota
	relWait
	relTimeout
	relShutdown
)

var releaseReasons = [...]string{relComplete: ReleaseComplete, relWait: ReleaseWait, relTimeout: ReleaseTimeout, relShutdown: ReleaseShutdown}

// releaseReason says what releases tr now: its deadline list, or shutdown (all). Called with
// mu held.
func releaseReason(tr *trace, all bool) int {
	switch {
	case all:
		return relShutdown
	case tr.list == listComplete:
		return relComplete
	case tr.list == listWait:
		return relWait
	}
	return relTimeout // listTimeout, listDeferred
}

// holdLonger reports whether a trace whose root+wait deadline came should wait on until its
// timeout (or until the missing half arrives): it has a retrieval but no generation yet (the
// generation runs in another process or its exporter is slower), or it has a generation but no
// retrieval and only roots with a remote parent (an LLM gateway's spans, exported before the
// calling application's). Called with mu held.
func (a *Assembler) holdLonger(tr *trace, now time.Time) bool {
	if tr.deferred || !tr.rootSeen || !now.Before(tr.first.Add(a.cfg.Timeout)) {
		return false
	}
	return (tr.hasRet && !tr.hasGen) || (tr.hasGen && !tr.hasRet && !tr.trueRoot)
}

// finish assembles one trace and delivers its records.
func (a *Assembler) finish(ctx context.Context, tr *trace) error {
	if tr.out&eventsHeld != 0 {
		var joined, orphaned int
		tr.spans, joined, orphaned = span.JoinEvents(tr.spans)
		a.m.events[evJoined].Add(float64(joined))
		a.m.events[evOrphaned].Add(float64(orphaned))
		if len(tr.spans) == 0 {
			// Events whose spans never came (counted orphaned): no trace to count.
			span.PutTraceSpans(tr.spans)
			tr.spans = nil
			return nil
		}
	}
	res := AssembleWith(tr.spans, &a.opts)
	span.ReleaseSpans(tr.spans)
	span.PutTraceSpans(tr.spans)
	tr.spans = nil
	if !res.RAG {
		a.m.notRAG.Inc()
	}
	outcome := a.m.assembled
	if !tr.rootSeen {
		outcome = a.m.partial
	}
	if res.UpstreamP < 0 {
		a.m.badTraceState.Inc()
	}
	// The trace's generation gave no output while GenAI events come as log records (since
	// before the trace, or for the trace itself): the answer may still come, after the record
	// (AddEvents, deliverLateEvents).
	awaits := tr.out&(outNeeded|eventsHeld) != 0 && tr.out&outSeen == 0
	var errs []error
	for _, r := range res.Records {
		outcome.Inc()
		if awaits && r.Answer == "" {
			r.AwaitsAnswer = true
		}
		if r.UpstreamProbability == 0 && a.upstream > 0 {
			r.UpstreamProbability = a.upstream
		}
		a.trimHistory(r)
		id := r.TraceID
		var err error
		if a.handoff != nil {
			err = a.handoff.ConsumeHandoff(ctx, r) // r is not read again here
		} else {
			err = a.next.ConsumeRecord(ctx, r)
		}
		if err != nil {
			a.m.deliveryErrors.WithLabelValues("records").Inc()
			a.log.Warn("record consumer failed", "trace_id", id, "err", err)
			errs = append(errs, err)
		}
	}
	if err := a.deliverFeedback(ctx, res.Feedback); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (a *Assembler) deliverFeedback(ctx context.Context, fbs []record.Feedback) error {
	var errs []error
	for _, f := range fbs {
		if a.feedback == nil {
			a.m.records.WithLabelValues(OutcomeDropped).Inc()
			continue
		}
		a.m.records.WithLabelValues(OutcomeFeedback).Inc()
		if err := a.feedback.ConsumeFeedback(ctx, f); err != nil {
			a.m.deliveryErrors.WithLabelValues("feedback").Inc()
			a.log.Warn("feedback consumer failed", "trace_id", f.TraceID, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// quickKind says whether a span is a retrieval or a generation by the cheap signs only: what
// the conventions' table says the presence of a key or an event means (Sign) and the span
// kinds its values name (KindOf); facts.Read decides at assembly.
//
// out is set when a key or event says the span holds a generation's output (an answer).
func quickKind(s *span.Span) (ret, gen, out bool) {
	for i := range s.Attrs {
		key, sign := signOf(s.Attrs[i].Key)
		if key != nil {
			switch key.Field {
			case conventions.OIKind, conventions.Operation, conventions.LLMRequestType, conventions.AIOperation:
				switch conventions.KindOf(key.Field, conventions.Normalize(key.Field, s.Attrs[i].Value.Str())) {
				case conventions.KindRetrieval, conventions.KindTool:
					// A tool call may be a retrieval (its result decides, at assembly): the
					// trace is taken as holding one for timing only.
					ret = true
				case conventions.KindGeneration, conventions.KindCall:
					gen = true
				}
			}
		}
		ret = ret || sign&conventions.SignRetrieval != 0
		out = out || sign&conventions.SignGeneration != 0
	}
	for i := range s.Events {
		if e, ok := conventions.EventOf(s.Events[i].Name); ok {
			ret = ret || e.Sign&conventions.SignRetrieval != 0
			out = out || e.Sign&conventions.SignGeneration != 0
		}
	}
	return ret, gen || out, out
}

// hasFeedback reports whether a span carries feedback (checked for late spans only).
func hasFeedback(s *span.Span) bool {
	for i := range s.Attrs {
		if _, sign := signOf(s.Attrs[i].Key); sign&conventions.SignFeedback != 0 {
			return true
		}
	}
	for i := range s.Events {
		if e, ok := conventions.EventOf(s.Events[i].Name); ok && e.Sign&conventions.SignFeedback != 0 {
			return true
		}
	}
	return false
}

// signOf returns the row of the conventions' table k is (nil for a key of a family) and what
// its presence says: by its address when it is a shared copy, else by its text.
func signOf(k string) (*conventions.Key, conventions.Sign) {
	if in, ok := conventions.Shared(k); ok {
		if in.Fixed {
			return in.Key, in.Key.Sign
		}
		return nil, conventions.Families[in.Fam].Sign
	}
	if key, ok := conventions.Lookup(k); ok {
		return key, key.Sign
	}
	if fam, _, ok := conventions.FamilyOf(k); ok {
		return nil, conventions.Families[fam].Sign
	}
	return nil, 0
}

// Held traces wait in deadline order in four intrusive lists, one per kind of deadline, each
// kept sorted: a new trace's timeout (first arrival + timeout), a wait after a root or after the
// missing half arrived (now + wait), a complete trace's complete_wait (now + complete_wait),
// and a deferral to the timeout. Deadlines of one kind are set in nearly increasing order, so
// sorted insertion from the tail costs O(1) in practice (a heap cost O(log n) comparisons of
// scattered traces for every trace). The next due trace is the earliest of the four heads.
const (
	listTimeout = iota
	listWait
	listComplete
	listDeferred
	numLists
)

type deadlineList struct{ head, tail *trace }

// schedule sets tr's deadline and files it in list, after every trace due no later. Called
// with mu held.
func (a *Assembler) schedule(tr *trace, deadline time.Time, list int) {
	a.unschedule(tr)
	tr.deadline = deadline
	l := &a.deadlines[list]
	p := l.tail
	for p != nil && p.deadline.After(deadline) {
		p = p.dlPrev
	}
	tr.list = int8(list)
	tr.dlPrev = p
	if p == nil {
		tr.dlNext = l.head
		l.head = tr
	} else {
		tr.dlNext = p.dlNext
		p.dlNext = tr
	}
	if tr.dlNext == nil {
		l.tail = tr
	} else {
		tr.dlNext.dlPrev = tr
	}
}

// unschedule takes tr out of its deadline list, if any. Called with mu held.
func (a *Assembler) unschedule(tr *trace) {
	if tr.list < 0 {
		return
	}
	l := &a.deadlines[tr.list]
	if tr.dlPrev != nil {
		tr.dlPrev.dlNext = tr.dlNext
	} else {
		l.head = tr.dlNext
	}
	if tr.dlNext != nil {
		tr.dlNext.dlPrev = tr.dlPrev
	} else {
		l.tail = tr.dlPrev
	}
	tr.dlPrev, tr.dlNext, tr.list = nil, nil, -1
}

// nextDeadline returns the held trace due first, or nil. Called with mu held.
func (a *Assembler) nextDeadline() *trace {
	var first *trace
	for i := range a.deadlines {
		if h := a.deadlines[i].head; h != nil && (first == nil || h.deadline.Before(first.deadline)) {
			first = h
		}
	}
	return first
}

type metrics struct {
	records        *prometheus.CounterVec
	evicted        *prometheus.CounterVec
	late           prometheus.Counter
	deliveryErrors *prometheus.CounterVec
	held           prometheus.Gauge
	heldBytes      prometheus.Gauge
	releasedVec    *prometheus.CounterVec
	badTraceState  prometheus.Counter
	historyDropped prometheus.Counter
	logRecords     *prometheus.CounterVec
	events         [len(logOutcomes)]prometheus.Counter    // by logOutcomes' index, resolved once
	released       [len(releaseReasons)]prometheus.Counter // by releaseReason, resolved once
	// The records' outcomes every trace counts, resolved once.
	assembled, partial, notRAG prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_records_total",
			Help: "Assembly outcomes: records assembled (assembled, partial), traces that are not RAG (not_rag), feedback handed on (feedback), traces or feedback dropped (dropped).",
		}, []string{"outcome"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_traces_evicted_total",
			Help: "Traces assembled early because the held traces reached assembly.max_traces or assembly.max_bytes, or one trace reached 10000 spans.",
		}, []string{"reason"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_late_spans_total",
			Help: "Spans that arrived after their trace was assembled; their feedback is still handed on.",
		}),
		deliveryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_assembly_delivery_errors_total",
			Help: "Errors returned by the consumers of assembled records and feedback.",
		}, []string{"consumer"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_assembly_traces_held",
			Help: "Traces held waiting for their spans.",
		}),
		heldBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ragwatch_assembly_held_bytes",
			Help: "Heap bytes the traces held for assembly keep alive (spans, their attributes, events and strings, per-trace overhead): what assembly.max_bytes bounds.",
		}),
		releasedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_assembly_released_total",
			Help: "Held traces taken out for assembly, by what released them: complete (assembly.complete_wait after the trace was visibly complete), wait (assembly.wait after a local root or the missing half), timeout (assembly.timeout: no root, or a half that never came), shutdown. Evictions are counted in ragwatch_traces_evicted_total.",
		}, []string{"reason"}),
		badTraceState: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ragwatch_tracestate_invalid_total",
			Help: "Assembled traces whose tracestate `ot` entry declares a malformed sampling probability (th or p): it is ignored, as if none were declared.",
		}),
		historyDropped: newHistoryDropped(),
		logRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_log_records_total",
			Help: "OTLP log records taken in, by what became of them: GenAI events joined to their span at assembly (joined), whose span never arrived (orphaned), that arrived after their trace was assembled and were handed on to join its record (late) or were dropped (late_dropped: nothing read in them, more than assembly.max_traces waiting, or their trace at its span bound), without a trace or span id (no_span), that no reader reads (unread: system and tool messages); every other log record (ignored).",
		}, []string{"outcome"}),
	}
	for i, o := range logOutcomes {
		m.events[i] = m.logRecords.WithLabelValues(o)
	}
	for i, r := range releaseReasons {
		m.released[i] = m.releasedVec.WithLabelValues(r)
	}
	for _, o := range []string{OutcomeAssembled, OutcomePartial, OutcomeNotRAG, OutcomeFeedback, OutcomeDropped} {
		m.records.WithLabelValues(o)
	}
	m.assembled = m.records.WithLabelValues(OutcomeAssembled)
	m.partial = m.records.WithLabelValues(OutcomePartial)
	m.notRAG = m.records.WithLabelValues(OutcomeNotRAG)
	for _, r := range []string{EvictMaxTraces, EvictMaxBytes, EvictMaxSpans} {
		m.evicted.WithLabelValues(r)
	}
	for _, c := range []string{"records", "feedback", "content"} {
		m.deliveryErrors.WithLabelValues(c)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.records, m.evicted, m.late, m.deliveryErrors, m.held, m.heldBytes, m.releasedVec, m.badTraceState, m.logRecords} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Shared with the session join, which trims the histories it gives: one counter.
	var err error
	if m.historyDropped, err = promreg.Register(reg, m.historyDropped); err != nil {
		return nil, err
	}
	return m, nil
}

// ConsumeProto decodes one OTLP protobuf ExportTraceServiceRequest (span.DecodeProto) and takes its
// spans into the held traces, as ConsumeTraces does with pdata's decoding of the same bytes. It
// returns the number of spans of the request, or the *span.Error that refuses it: then nothing
// is taken. body may be reused once it returns.
func (a *Assembler) ConsumeProto(_ context.Context, body []byte, lim span.Limits) (int, error) {
	buf := spanBufs.Get().(*[]span.Span)
	spans, n, werr := span.DecodeProto(body, lim, (*buf)[:0], a.variants, a.keepContent)
	if werr == nil && len(spans) > 0 {
		a.Add(spans) // copies each span into its trace
	}
	if cap(spans) <= maxPooledSpanBuf {
		clear(spans)
		*buf = spans[:0]
		spanBufs.Put(buf)
	}
	if werr != nil {
		return 0, werr
	}
	return n, nil
}
