package evalexport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/hexid"
	"github.com/ragwatch/ragwatch/internal/promreg"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/truncate"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
)

// Kinds of evaluator, as Phoenix's annotator_kind names them (lower case here):
// an LLM judge, code (the builtin scorer, NLI, retrieval metrics) or a person.
const (
	KindLLM   = "llm"
	KindCode  = "code"
	KindHuman = "human"
)

// HumanScorer is the scorer of an evaluation that a human label gave.
const HumanScorer = "human"

// MaxExplanation bounds the bytes of an explanation that leave the process.
const MaxExplanation = 4096

// Evaluation is one judgement of one record, as every destination sends it.
type Evaluation struct {
	// TraceID and SpanID name the evaluated turn (OTLP hex; record.Record.SpanID, "" for a
	// record from the API that named no span); ResponseID the provider's id of the response
	// that gave its answer, when the trace named one (gen_ai.response.id).
	TraceID, SpanID string
	ResponseID      string
	Service         string
	Variant         string
	// Name is the metric (faithfulness, judge_tone, ndcg@10, ...).
	Name  string
	Value float64
	// Label is a categorical reading of Value, when it has one ("" otherwise).
	Label       string
	Explanation string
	Scorer      string
	Model       string
	// Weight is 1/p, p the record's inclusion probability.
	Weight       float64
	Method       string
	JudgeVersion string
	// Kind is KindLLM, KindCode or KindHuman.
	Kind string
	Time time.Time
	// Comparison names the comparison of a pairwise verdict ("" for other evaluations).
	Comparison string
}

// PairwiseName is the evaluation name of a shadow pair's verdict.
const PairwiseName = "pairwise"

// FromPairVerdict is the verdict on a shadow pair as two evaluations, one on each record, each
// from its own side: label win, loss, tie or inconsistent, value 1, 0 or 0.5 (an inconsistent
// verdict counts as a tie, as in ragwatch_pairwise_total).
func FromPairVerdict(comparison string, a, b *record.Record, v pairwise.Verdict, weight float64, now time.Time) []Evaluation {
	kind := KindCode
	if v.Model != "" {
		kind = KindLLM
	}
	mirror := map[string]string{pairwise.Win: pairwise.Loss, pairwise.Loss: pairwise.Win}
	out := make([]Evaluation, 0, 2)
	for _, side := range []struct {
		r       *record.Record
		outcome string
	}{{b, v.Outcome}, {a, cmp.Or(mirror[v.Outcome], v.Outcome)}} {
		value := 0.5
		switch side.outcome {
		case pairwise.Win:
			value = 1
		case pairwise.Loss:
			value = 0
		}
		out = append(out, Evaluation{
			TraceID: side.r.TraceID, SpanID: side.r.SpanID, ResponseID: side.r.ResponseID, Service: side.r.Service, Variant: side.r.Variant,
			Name: PairwiseName, Value: value, Label: side.outcome, Explanation: v.Reasoning,
			Scorer: v.Judge, Model: v.Model, Weight: weight, Kind: kind, Time: now, Comparison: comparison,
		})
	}
	return out
}

// FromResult is the evaluation of a score result: an LLM judge's when it names a model.
func FromResult(r *score.Result) Evaluation {
	kind := KindCode
	if r.Model != "" {
		kind = KindLLM
	}
	return Evaluation{
		TraceID: r.TraceID, SpanID: r.SpanID, ResponseID: r.ResponseID, Service: r.Service, Variant: r.Variant,
		Name: r.Metric, Value: r.Value, Label: label(r.Metric, r.Value), Explanation: r.Explanation,
		Scorer: r.Scorer, Model: r.Model, Weight: r.Weight, Method: r.Method, JudgeVersion: r.JudgeVersion,
		Kind: kind, Time: r.Time,
	}
}

// label reads the metrics whose value is a verdict rather than a degree.
func label(metric string, v float64) string {
	if metric == score.RefusalCorrect {
		if v >= 0.5 {
			return "correct"
		}
		return "incorrect"
	}
	return ""
}

// FromLabel is the evaluations a human label gives its record: one per metric value, in
// metric order, marked as a person's judgement. Relevance grades and reference answers are
// inputs of scorers, not judgements of the answer, and are not exported.
func FromLabel(l *record.Label, now time.Time) []Evaluation {
	if len(l.Values) == 0 {
		return nil
	}
	at := l.Time
	if at.IsZero() {
		at = now
	}
	metrics := make([]string, 0, len(l.Values))
	for m := range l.Values {
		metrics = append(metrics, m)
	}
	slices.Sort(metrics)
	out := make([]Evaluation, len(metrics))
	for i, m := range metrics {
		v := l.Values[m]
		out[i] = Evaluation{
			TraceID: l.TraceID, SpanID: l.SpanID, Service: l.Service, Name: m, Value: v,
			Label: label(m, v), Scorer: HumanScorer, Weight: 1, Kind: KindHuman, Time: at,
		}
	}
	return out
}

// Destination sends batches of evaluations to one backend. Send is called from one goroutine
// at a time, retries what may succeed later, and returns an error only for a batch it gave up
// on; it must not log the batch's content or a credential.
type Destination interface {
	Name() string // bounded: "otlp", "langfuse", "phoenix"
	Send(ctx context.Context, batch []Evaluation) error
	Shutdown(ctx context.Context) error
}

// Reasons of ragwatch_evaluation_export_dropped_total.
const (
	ReasonQueueFull    = "queue_full"    // the destination's queue was full
	ReasonExportFailed = "export_failed" // the destination gave up on the batch (retries spent, or a permanent error)
	ReasonNoTrace      = "no_trace"      // the destination cannot place it: the trace id is not OTLP hex
	ReasonStopped      = "stopped"       // offered after Shutdown
)

// Metrics are the exporter's counters, shared by its destinations (their label).
type Metrics struct {
	Exported *prometheus.CounterVec
	Dropped  *prometheus.CounterVec
	Failures *prometheus.CounterVec
	Retries  *prometheus.CounterVec
}

// NewMetrics registers (or reuses) the counters on reg; nil reg keeps them unregistered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Exported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_evaluation_exported_total",
			Help: "Evaluations (score results and human labels) a destination accepted.",
		}, []string{"destination"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_evaluation_export_dropped_total",
			Help: "Evaluations not exported, by destination and reason (queue_full, export_failed, no_trace, stopped).",
		}, []string{"destination", "reason"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_evaluation_export_failures_total",
			Help: "Batches of evaluations a destination gave up on (retries spent, or a permanent error).",
		}, []string{"destination"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_evaluation_export_retries_total",
			Help: "Requests to Langfuse or Phoenix sent again after a network error, 429 or 5xx.",
		}, []string{"destination"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.Exported, err = promreg.Register(reg, m.Exported); err != nil {
		return nil, err
	}
	if m.Dropped, err = promreg.Register(reg, m.Dropped); err != nil {
		return nil, err
	}
	if m.Failures, err = promreg.Register(reg, m.Failures); err != nil {
		return nil, err
	}
	if m.Retries, err = promreg.Register(reg, m.Retries); err != nil {
		return nil, err
	}
	return m, nil
}

// Settings builds an Exporter. Metrics, Redact, Logger and Now may be nil.
type Settings struct {
	Config config.Evaluations
	// Redact cleans every explanation before it leaves (the process's redactor); nil leaves
	// text as it is (redaction disabled).
	Redact  func(string) string
	Metrics *Metrics
	Logger  *slog.Logger
	Now     func() time.Time
}

// Exporter hands evaluations to its destinations without blocking: a score.Consumer (the
// results this process scored), a record.LabelConsumer (human labels: those the join hands on
// after their record, and those a scored record carried) and a consumer of shadow pairs'
// verdicts (ConsumePairVerdict). Start starts one goroutine per destination; Shutdown sends what is queued (within
// its context) and stops them. Safe for concurrent use.
type Exporter struct {
	set    Settings
	queues []*destQueue

	ctx    context.Context // cancelled when Shutdown's context ends: in-flight sends give up
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup

	started, stopped atomic.Bool
	stopOnce         sync.Once
}

var (
	_ score.Consumer       = (*Exporter)(nil)
	_ record.LabelConsumer = (*Exporter)(nil)
)

type destQueue struct {
	dest Destination
	in   chan Evaluation
	// The destination's counters, resolved once.
	exported, full, failed, noTrace, stopped prometheus.Counter
	failures                                 prometheus.Counter
}

// NewWith builds an Exporter over the given destinations (New builds them from the config).
func NewWith(s Settings, dests ...Destination) (*Exporter, error) {
	if s.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		s.Metrics = m
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Redact == nil {
		s.Redact = func(x string) string { return x }
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Exporter{set: s, ctx: ctx, cancel: cancel, stop: make(chan struct{})}
	m := s.Metrics
	for _, d := range dests {
		n := d.Name()
		e.queues = append(e.queues, &destQueue{
			dest:     d,
			in:       make(chan Evaluation, s.Config.QueueSize),
			exported: m.Exported.WithLabelValues(n),
			full:     m.Dropped.WithLabelValues(n, ReasonQueueFull),
			failed:   m.Dropped.WithLabelValues(n, ReasonExportFailed),
			noTrace:  m.Dropped.WithLabelValues(n, ReasonNoTrace),
			stopped:  m.Dropped.WithLabelValues(n, ReasonStopped),
			failures: m.Failures.WithLabelValues(n),
		})
	}
	return e, nil
}

// ConsumeScores implements score.Consumer: it queues the results for every destination and
// returns at once; a full queue drops and counts. A pair's pairwise_win_rate score is left out:
// its verdict is exported on both records by ConsumePairVerdict.
func (e *Exporter) ConsumeScores(_ context.Context, results []score.Result) error {
	for i := range results {
		if results[i].Metric == score.PairwiseWinRate {
			continue // the pair's verdict goes out on both records (ConsumePairVerdict)
		}
		e.offer(FromResult(&results[i]))
	}
	return nil
}

// ConsumeLabel implements record.LabelConsumer: each value of a label is exported as a
// person's judgement of that metric on the labelled record, next to the judge's score.
func (e *Exporter) ConsumeLabel(_ context.Context, l record.Label) error {
	for _, ev := range FromLabel(&l, e.set.Now()) {
		e.offer(ev)
	}
	return nil
}

// ConsumePairVerdict implements worker.PairVerdictConsumer: a judged shadow pair, exported on
// both records.
func (e *Exporter) ConsumePairVerdict(_ context.Context, comparison string, a, b *record.Record, v pairwise.Verdict, weight float64) {
	for _, ev := range FromPairVerdict(comparison, a, b, v, weight, e.set.Now()) {
		e.offer(ev)
	}
}

func (e *Exporter) offer(ev Evaluation) {
	for _, q := range e.queues {
		if e.stopped.Load() {
			q.stopped.Inc()
			continue
		}
		select {
		case q.in <- ev:
		default:
			q.full.Inc()
		}
	}
}

// Start starts one sending goroutine per destination.
func (e *Exporter) Start(context.Context) error {
	if e.stopped.Load() || !e.started.CompareAndSwap(false, true) {
		return errors.New("evaluation exporter: Start after Start or Shutdown")
	}
	for _, q := range e.queues {
		e.wg.Add(1)
		go e.run(q)
	}
	return nil
}

// Shutdown stops taking evaluations, sends what the queues hold until ctx ends (then gives
// up on the rest, counted as export_failed), and shuts the destinations down. Idempotent, and
// safe without Start.
func (e *Exporter) Shutdown(ctx context.Context) error {
	var err error
	e.stopOnce.Do(func() {
		e.stopped.Store(true)
		close(e.stop)
		done := make(chan struct{})
		go func() { e.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			e.cancel() // in-flight sends give up; the loops drop the rest
			<-done
		}
		e.cancel()
		var errs []error
		for _, q := range e.queues {
			if derr := q.dest.Shutdown(ctx); derr != nil {
				errs = append(errs, fmt.Errorf("shut down %s evaluation exporter: %w", q.dest.Name(), derr))
			}
		}
		err = errors.Join(errs...)
	})
	return err
}

// run batches the queue of one destination: a batch is sent when it holds max_batch
// evaluations or flush_interval after its first one arrived.
func (e *Exporter) run(q *destQueue) {
	defer e.wg.Done()
	max := e.set.Config.MaxBatch
	batch := make([]Evaluation, 0, max)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(batch) > 0 {
			e.send(q, batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case ev := <-q.in:
			batch = append(batch, ev)
			if len(batch) >= max {
				timer.Stop()
				flush()
			} else if len(batch) == 1 {
				timer.Reset(e.set.Config.FlushInterval)
			}
		case <-timer.C:
			flush()
		case <-e.stop:
			timer.Stop()
			for {
				select {
				case ev := <-q.in:
					batch = append(batch, ev)
					if len(batch) >= max {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// send redacts a batch and hands it to the destination, counting the outcome. After
// Shutdown's context ended it drops the batch at once.
func (e *Exporter) send(q *destQueue, batch []Evaluation) {
	if e.ctx.Err() != nil {
		q.failed.Add(float64(len(batch)))
		return
	}
	for i := range batch {
		if x := batch[i].Explanation; x != "" {
			batch[i].Explanation = truncate.String(e.set.Redact(x), MaxExplanation)
		}
	}
	placed := batch[:0:0]
	for _, ev := range batch {
		if _, ok := traceID(ev.TraceID); !ok {
			q.noTrace.Inc()
			continue
		}
		placed = append(placed, ev)
	}
	if len(placed) < len(batch) {
		batch = placed
	}
	if len(batch) == 0 {
		return
	}
	if err := q.dest.Send(e.ctx, batch); err != nil {
		failed := len(batch)
		var pe *PartialError
		if errors.As(err, &pe) && pe.Failed >= 0 && pe.Failed < failed {
			failed = pe.Failed
		}
		q.failures.Inc()
		q.failed.Add(float64(failed))
		q.exported.Add(float64(len(batch) - failed))
		// The error names the destination and the status, never a key or the content.
		e.set.Logger.Warn("evaluation export failed; evaluations dropped", "destination", q.dest.Name(),
			"evaluations", failed, "of", len(batch), "err", err)
		return
	}
	q.exported.Add(float64(len(batch)))
}

// PartialError is what a Destination returns when only Failed evaluations of a batch were
// not taken (the others were).
type PartialError struct {
	Failed int
	Err    error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d evaluations failed: %v", e.Failed, e.Err)
}
func (e *PartialError) Unwrap() error { return e.Err }

// traceID decodes an OTLP trace id (32 lowercase hex digits, not all zero). Records from
// the API may carry any id; no trace backend can place those.
func traceID(id string) (trace.TraceID, bool) {
	var t trace.TraceID
	return t, hexid.Decode(t[:], id) && t.IsValid()
}

// spanID decodes an OTLP span id (16 lowercase hex digits, not all zero).
func spanID(id string) (trace.SpanID, bool) {
	var s trace.SpanID
	return s, hexid.Decode(s[:], id) && s.IsValid()
}

// New builds the Exporter of s.Config's destinations; nil (and no error) when none is set.
func New(s Settings) (*Exporter, error) {
	c := s.Config
	if !c.Enabled() {
		return nil, nil
	}
	if s.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		s.Metrics = m
	}
	var dests []Destination
	fail := func(err error) (*Exporter, error) {
		for _, d := range dests {
			_ = d.Shutdown(context.Background())
		}
		return nil, err
	}
	if c.OTLP.Endpoint != "" {
		d, err := NewOTLP(c)
		if err != nil {
			return fail(err)
		}
		dests = append(dests, d)
	}
	if c.Langfuse.URL != "" {
		d, err := NewLangfuse(c, s.Metrics)
		if err != nil {
			return fail(err)
		}
		dests = append(dests, d)
	}
	if c.Phoenix.URL != "" {
		d, err := NewPhoenix(c, s.Metrics)
		if err != nil {
			return fail(err)
		}
		dests = append(dests, d)
	}
	return NewWith(s, dests...)
}
