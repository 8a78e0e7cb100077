package judgeagreement

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/hexid"
	"github.com/ragwatch/ragwatch/internal/offheap"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// Agreement metric names.
const (
	MetricJudgeAgreement      = "ragwatch_judge_agreement"       // gauge {metric,judge,statistic}
	MetricJudgeAgreementBound = "ragwatch_judge_agreement_bound" // gauge {metric,judge,statistic,bound=lower|upper}
	MetricJudgeAgreementPairs = "ragwatch_judge_agreement_pairs" // gauge {metric,judge}
	MetricLabelsUnpaired      = "ragwatch_labels_unpaired_total" // counter {reason}
)

// Metric is the metric name an SLO watches to alert on a statistic of a judge's agreement
// with people on metric: agreement_spearman_faithfulness, agreement_mae_faithfulness,
// agreement_kappa_faithfulness. Every judge scoring the metric feeds it.
func Metric(statistic, metric string) string {
	return "agreement_" + statistic + "_" + metric
}

// Settings is the `alerting.agreement` section, converted once when the process is wired.
type Settings struct {
	Window     time.Duration // pairs older than this leave a series
	MinSamples int           // pairs a series needs before its statistics are exported and fed
	MaxPairs   int           // newest pairs kept per series
	MaxRecords int           // scored records remembered for labels that come later (read once by New)
	MaxSeries  int           // (metric, judge) series
	// PruneEvery is how often Start's loop drops pairs older than Window
	// (alerting.evaluation_interval).
	PruneEvery time.Duration
}

// Sink receives each statistic of a series once the series holds MinSamples pairs: the alert
// engine, whose SLOs on Metric(statistic, metric) it feeds. It is called without the
// Tracker's lock held.
type Sink interface {
	ObserveAgreement(metric string, v float64, now time.Time)
}

// Options builds a Tracker; Registerer, Now and Sink may be nil.
type Options struct {
	Settings   Settings
	Registerer prometheus.Registerer
	// Now is the clock (time.Now when nil).
	Now  func() time.Time
	Sink Sink
	// OnPair, when set, receives every pair the tracker makes: the record's service, the
	// metric, the judge label, the human value and the judge's raw value (score.Result.Raw
	// when a calibration map changed the published one, else the published value), so that a
	// calibration learner (sampler/labelcal) fits on what the scorer itself said. The
	// agreement the tracker exports is of the published values, the ones users see. It is
	// called without the Tracker's lock held, on the caller's goroutine: it must not block.
	OnPair func(service, metric, judge string, human, raw float64)
}

// judges are the `judge` label values: the backends that produce scores (score.Result.Scorer).
// Anything else (a result from outside the process) is "other".
var judges = map[string]bool{"builtin": true, "openai": true, "anthropic": true, "nli": true, "retrieval": true}

func judgeLabel(scorer string) string {
	if judges[scorer] {
		return scorer
	}
	return "other"
}

// The agreement state remembers every scored record until max_records newer ones push it out,
// labelled or not, for labels that may come later. Almost none are ever labelled, so what it
// keeps of each is small and held outside the Go heap, where the garbage collector's heap goal
// (about twice the live heap) does not double it in resident memory: a slot of an offheap.Table
// ring holding the record's key and scores (recordKey and heldRecord, no pointers, 112 bytes;
// a calibrated builtin score takes two of the slot's places, its raw value in the second)
// and its index cells, ≈ 138 bytes a record in all (BenchmarkAgreementMemory). What does not fit a slot lives in small maps by slot: the human
// values of labelled records, and scores past a slot's room or without a shared metric and
// scorer pair.

// heldScores is how many scores a slot holds; a record's further scores go to
// Tracker.more. The builtin scorer and the RAGAS-style judges give fewer.
const heldScores = 8

// recordKey identifies a record: its trace id and span id as bytes. An id in OTLP's lowercase
// hex form is kept decoded; any other as its hash (the table's seeded Sum128 of a trace id,
// Sum64 of a span id), which only another id with the same hash would match. The ids
// themselves are never needed back.
type recordKey struct {
	trace [16]byte
	span  [8]byte
	form  uint8 // keyUsed | keySpan | keyTraceHashed | keySpanHashed
}

const (
	keyUsed        uint8 = 1 << iota // the slot holds a record
	keySpan                          // the record was named with a span id
	keyTraceHashed                   // trace holds a hash of the trace id
	keySpanHashed                    // span holds a hash of the span id
)

// traceOf is the key of the record's trace, without its span: a label naming only the trace
// joins the trace's latest record named with a span (Tracker.byTrace).
func (k recordKey) traceOf() recordKey {
	return recordKey{trace: k.trace, form: keyUsed | k.form&keyTraceHashed}
}

// heldRecord is what a record's slot holds beside its key: the scores it came with, each as the
// index + 1 of its service, metric and scorer in Tracker.judges (0: no score; the scores held
// come first). A score with a raw value (score.Result.Raw) is followed by an entry of the same
// id with rawFlag set, holding the raw value.
type heldRecord struct {
	ids    [heldScores]uint16
	values [heldScores]float64
}

// count is the number of scores the slot holds.
func (r *heldRecord) count() int {
	n := 0
	for n < heldScores && r.ids[n] != 0 {
		n++
	}
	return n
}

// rawFlag marks a slot entry holding the raw value of the score before it.
const rawFlag uint16 = 1 << 15

// heldScore is a score kept outside a slot (Tracker.more).
type heldScore struct {
	metricScorer
	value, raw float64 // raw == value when the result had no raw value
}

// metricScorer names a score: the record's service, its metric and the scorer that gave it.
// The service rides along so that a pair made when a label comes later still knows it.
type metricScorer struct{ service, metric, scorer string }

type seriesKey struct{ metric, judge string }

// labelled is what a record's labels left: the human values by metric, and the metrics already
// paired with a score.
type labelled struct {
	human  map[string]float64
	paired map[string]bool
}

// maxInterned bounds the shared service, metric and scorer triples (Tracker.judges); a score
// of another is kept with its own names in Tracker.more. Below rawFlag.
const maxInterned = 4096

// Tracker pairs human labels with the scores of the same record and metric and exports, per
// metric and judge, their agreement. It implements record.Consumer (labels riding on a
// record), record.LabelConsumer and score.Consumer.
//
// Locking: mu guards everything below it; the Sink is called after mu is released.
type Tracker struct {
	now    func() time.Time
	sink   Sink
	onPair func(service, metric, judge string, human, raw float64)

	stateMu sync.Mutex // serialises Start and Shutdown
	stop    chan struct{}
	done    chan struct{}

	mu  sync.Mutex
	cfg Settings
	// recs holds a slot for each of the last cfg.MaxRecords records, found by key; byTrace
	// finds a trace's latest record named with a span id among them (by recordKey.traceOf).
	recs    *offheap.Table[recordKey, heldRecord]
	byTrace *offheap.Index
	more    map[int32][]heldScore
	labels  map[int32]*labelled
	series  map[seriesKey]*agreement.Window
	// judges holds one copy of each service, metric and scorer the slots name, by id − 1: the
	// results arrive decoded, each with its own copy of every string.
	judges   []metricScorer
	judgeIDs map[metricScorer]uint16
	// lastJudge is the id judgeID returned last (0: none).
	lastJudge uint16

	value, bound, pairs *prometheus.GaugeVec
	unpaired            *prometheus.CounterVec
}

var (
	_ record.Consumer      = (*Tracker)(nil)
	_ record.LabelConsumer = (*Tracker)(nil)
	_ score.Consumer       = (*Tracker)(nil)
)

// New builds a Tracker; nothing runs until Start.
func New(o Options) (*Tracker, error) {
	cfg := o.Settings
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 1
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	cfg.MaxRecords = min(cfg.MaxRecords, offheap.MaxEntries)
	a := &Tracker{now: o.Now, sink: o.Sink, onPair: o.OnPair, cfg: cfg,
		recs: offheap.NewRing[recordKey, heldRecord](offheap.LoadHalf, cfg.MaxRecords), byTrace: offheap.NewIndex(cfg.MaxRecords),
		more: map[int32][]heldScore{}, labels: map[int32]*labelled{},
		series: map[seriesKey]*agreement.Window{}, judgeIDs: map[metricScorer]uint16{},
		value: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricJudgeAgreement,
			Help: "Agreement of a judge's scores with human labels over alerting.agreement.window: mae (lower is better), spearman, kappa (at 0.5)."},
			[]string{"metric", "judge", "statistic"}),
		bound: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricJudgeAgreementBound,
			Help: "95% confidence bound of ragwatch_judge_agreement."}, []string{"metric", "judge", "statistic", "bound"}),
		pairs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricJudgeAgreementPairs,
			Help: "Pairs of a human label and a judge's score in the agreement window."}, []string{"metric", "judge"}),
		unpaired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricLabelsUnpaired,
			Help: "Human label values never paired with a score: evicted (alerting.agreement.max_records), series_limit (max_series), invalid."},
			[]string{"reason"}),
	}
	for _, r := range []string{"evicted", "series_limit", "invalid"} {
		a.unpaired.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{a.value, a.bound, a.pairs, a.unpaired} {
		if err := o.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("judge agreement metrics: %w", err)
		}
	}
	return a, nil
}

// offHeapBytes is the memory of the slots and the indexes, outside the Go heap.
func (a *Tracker) offHeapBytes() int { return a.recs.Bytes() + a.byTrace.Bytes() }

// lookup returns the slot holding the record of key k, or -1.
func (a *Tracker) lookup(k recordKey) int32 { return int32(a.recs.Find(0, k)) }

// findTrace returns the slot of the latest record named with a span id of the trace whose key
// (recordKey.traceOf) is k, or -1, and its cell in byTrace.
func (a *Tracker) findTrace(k recordKey) (slot int32, cell uint64) {
	i, cell := a.byTrace.Find(a.recs.Hash(0, &k), func(s uint32) bool {
		r := a.recs.Key(int(s))
		return r.form&keySpan != 0 && r.traceOf() == k
	})
	return int32(i), cell
}

// key returns the key of the record traceID names with spanID (none: "").
func (a *Tracker) key(traceID, spanID string) recordKey {
	k := recordKey{form: keyUsed}
	if !hexid.Decode(k.trace[:], traceID) {
		k.form |= keyTraceHashed
		k.trace = a.recs.Sum128(traceID)
	}
	if spanID != "" {
		k.form |= keySpan
		if !hexid.Decode(k.span[:], spanID) {
			k.form |= keySpanHashed
			binary.LittleEndian.PutUint64(k.span[:], uint64(a.recs.Sum64(spanID)))
		}
	}
	return k
}

// judgeID returns the id of the shared service, metric and scorer (judges index + 1), adding
// it while fewer than maxInterned are held, else 0.
func (a *Tracker) judgeID(service, metric, scorer string) uint16 {
	if id := a.lastJudge; id != 0 && a.judges[id-1] == (metricScorer{service, metric, scorer}) {
		return id // results come in runs of the same service and scorer
	}
	if id, ok := a.judgeIDs[metricScorer{service, metric, scorer}]; ok {
		a.lastJudge = id
		return id
	}
	if len(a.judges) >= maxInterned {
		return 0
	}
	ms := metricScorer{strings.Clone(service), strings.Clone(metric), strings.Clone(scorer)}
	a.judges = append(a.judges, ms)
	id := uint16(len(a.judges))
	a.judgeIDs[ms] = id
	a.lastJudge = id
	return id
}

// entry returns the slot of a record, taking the oldest slot (and forgetting its record) for
// one not held.
func (a *Tracker) entry(traceID, spanID string) int32 {
	k := a.key(traceID, spanID)
	if spanID == "" {
		if i, _ := a.findTrace(k.traceOf()); i >= 0 {
			return i // a label naming only the trace joins its latest record
		}
	}
	if i := a.lookup(k); i >= 0 {
		return i
	}
	if a.recs.Full(0) {
		a.forget(int32(a.recs.Oldest(0)))
	}
	i := int32(a.recs.Add(0, k, heldRecord{}))
	if spanID != "" {
		// The trace's latest record from now on: in place of an earlier one's cell.
		_, c := a.findTrace(k.traceOf())
		a.byTrace.Set(c, uint32(i))
	}
	return i
}

// forget drops the oldest slot, i, counting the label values it held that never met a score.
func (a *Tracker) forget(i int32) {
	if l := a.labels[i]; l != nil {
		if n := len(l.human) - len(l.paired); n > 0 {
			a.unpaired.WithLabelValues("evicted").Add(float64(n))
		}
		delete(a.labels, i)
	}
	delete(a.more, i)
	if k := a.recs.Key(int(i)); k.form&keySpan != 0 {
		if j, c := a.findTrace(k.traceOf()); j == i {
			a.byTrace.Delete(c, func(s uint32) uint64 { k := a.recs.Key(int(s)).traceOf(); return a.recs.Hash(0, &k) })
		}
	}
	a.recs.Remove(int(i))
}

// setScore keeps v (raw: the scorer's own value, == v when no calibration map was applied) as
// slot i's score of metric (by service and scorer), in place of an earlier one.
func (a *Tracker) setScore(i int32, service, metric, scorer string, v, raw float64) {
	r := a.recs.Val(int(i))
	id := a.judgeID(service, metric, scorer)
	n := r.count()
	// An earlier score of the metric (and its raw value) leaves the slot.
	for j := 0; j < n; {
		if a.judges[r.ids[j]&^rawFlag-1].metric != metric {
			j++
			continue
		}
		copy(r.ids[j:n], r.ids[j+1:n])
		copy(r.values[j:n], r.values[j+1:n])
		n--
		r.ids[n], r.values[n] = 0, 0
	}
	need := 1
	if raw != v {
		need = 2
	}
	more := a.more[i]
	for j := range more {
		if more[j].metric == metric {
			more = append(more[:j], more[j+1:]...)
			break
		}
	}
	if id != 0 && n+need <= heldScores {
		r.ids[n], r.values[n] = id, v
		if need == 2 {
			r.ids[n+1], r.values[n+1] = id|rawFlag, raw
		}
		if len(more) == 0 && a.more[i] != nil {
			delete(a.more, i)
		} else if len(more) > 0 {
			a.more[i] = more
		}
		return
	}
	h := heldScore{metricScorer{service, metric, scorer}, v, raw}
	if id != 0 {
		h.metricScorer = a.judges[id-1]
	}
	a.more[i] = append(more, h)
}

// score returns slot i's score of metric, its raw value and the names it came with.
func (a *Tracker) score(i int32, metric string) (v, raw float64, ms metricScorer, ok bool) {
	r := a.recs.Val(int(i))
	n := r.count()
	for j := range n {
		id := r.ids[j]
		if id&rawFlag != 0 {
			continue
		}
		if ms := a.judges[id-1]; ms.metric == metric {
			raw := r.values[j]
			if j+1 < n && r.ids[j+1] == id|rawFlag {
				raw = r.values[j+1]
			}
			return r.values[j], raw, ms, true
		}
	}
	for _, h := range a.more[i] {
		if h.metric == metric {
			return h.value, h.raw, h.metricScorer, true
		}
	}
	return 0, 0, metricScorer{}, false
}

// observation is one statistic for the Sink, or (pair set) one pair for Options.OnPair.
type observation struct {
	metric string
	value  float64
	pair   *madePair
}

// madePair is a pair for Options.OnPair.
type madePair struct {
	service, metric, judge string
	human, raw             float64
}

// ConsumeRecord implements record.Consumer: the labels a record carries wait (bounded) for its
// scores.
func (a *Tracker) ConsumeRecord(_ context.Context, r *record.Record) error {
	if r.Labels == nil || len(r.Labels.Values) == 0 || r.TraceID == "" {
		return nil
	}
	now := a.now()
	a.mu.Lock()
	out := a.noteLabel(r.TraceID, r.SpanID, r.Labels.Values, now, nil)
	a.mu.Unlock()
	a.send(out, now)
	return nil
}

// ConsumeLabel implements record.LabelConsumer: a label that arrived after its record is paired
// with the scores kept for that record, or waits (bounded) for them.
func (a *Tracker) ConsumeLabel(_ context.Context, l record.Label) error {
	if len(l.Values) == 0 || l.TraceID == "" {
		return nil
	}
	now := a.now()
	a.mu.Lock()
	out := a.noteLabel(l.TraceID, l.SpanID, l.Values, now, nil)
	a.mu.Unlock()
	a.send(out, now)
	return nil
}

// ConsumeScores implements score.Consumer: results are remembered by record and paired with
// the labels already known.
func (a *Tracker) ConsumeScores(_ context.Context, results []score.Result) error {
	now := a.now()
	a.mu.Lock()
	out := a.noteScores(results, now, nil)
	a.mu.Unlock()
	a.send(out, now)
	return nil
}

// send hands the statistics to the Sink, without mu held.
func (a *Tracker) send(out []observation, now time.Time) {
	for _, o := range out {
		switch {
		case o.pair != nil:
			p := o.pair
			a.onPair(p.service, p.metric, p.judge, p.human, p.raw)
		case a.sink != nil:
			a.sink.ObserveAgreement(o.metric, o.value, now)
		}
	}
}

// noteLabel remembers a label's values and pairs those whose scores are known, appending the
// statistics for the Sink to out. Called with a.mu held.
func (a *Tracker) noteLabel(traceID, spanID string, values map[string]float64, now time.Time, out []observation) []observation {
	i := a.entry(traceID, spanID)
	l := a.labels[i]
	if l == nil {
		l = &labelled{human: make(map[string]float64, len(values))}
		a.labels[i] = l
	}
	for m, v := range values {
		if math.IsNaN(v) || v < 0 || v > 1 {
			a.unpaired.WithLabelValues("invalid").Inc()
			continue
		}
		l.human[m] = v
	}
	return a.pair(i, l, now, out)
}

// noteScores remembers results by record and pairs those whose labels are known. Called with
// a.mu held.
func (a *Tracker) noteScores(results []score.Result, now time.Time, out []observation) []observation {
	for k := range results {
		res := &results[k]
		if res.TraceID == "" || math.IsNaN(res.Value) {
			continue
		}
		raw := res.RawValue()
		if math.IsNaN(raw) {
			raw = res.Value
		}
		i := a.entry(res.TraceID, res.SpanID)
		a.setScore(i, res.Service, res.Metric, res.Scorer, res.Value, raw)
		if l := a.labels[i]; l != nil {
			if _, ok := l.human[res.Metric]; ok {
				out = a.pair(i, l, now, out)
			}
		}
	}
	return out
}

// pair adds a pair for every metric of slot i with both a human value (l) and a score, once,
// and updates that series' statistics. Called with a.mu held.
func (a *Tracker) pair(i int32, l *labelled, now time.Time, out []observation) []observation {
	for m, h := range l.human {
		if l.paired[m] {
			continue
		}
		v, raw, ms, ok := a.score(i, m)
		if !ok {
			continue
		}
		if l.paired == nil {
			l.paired = map[string]bool{}
		}
		l.paired[m] = true
		k := seriesKey{metric: m, judge: judgeLabel(ms.scorer)}
		if a.onPair != nil {
			out = append(out, observation{pair: &madePair{ms.service, m, k.judge, h, raw}})
		}
		w := a.series[k]
		if w == nil {
			if len(a.series) >= a.cfg.MaxSeries {
				a.unpaired.WithLabelValues("series_limit").Inc()
				continue
			}
			w = &agreement.Window{Age: a.cfg.Window, Max: a.cfg.MaxPairs}
			a.series[k] = w
		}
		w.Add(agreement.Pair{Human: h, Judge: v, Time: now})
		out = a.update(k, w, out)
	}
	return out
}

// update exports a series' statistics and, once it holds min_samples pairs, appends each for
// the Sink (the SLOs on agreement_<statistic>_<metric>). Called with a.mu held.
func (a *Tracker) update(k seriesKey, w *agreement.Window, out []observation) []observation {
	a.pairs.WithLabelValues(k.metric, k.judge).Set(float64(w.Len()))
	if w.Len() < a.cfg.MinSamples {
		return out
	}
	for _, st := range agreement.Statistics {
		est := agreement.Compute(st, w.Pairs())
		if !est.OK {
			continue
		}
		a.value.WithLabelValues(k.metric, k.judge, st).Set(est.Value)
		a.bound.WithLabelValues(k.metric, k.judge, st, "lower").Set(est.Lower)
		a.bound.WithLabelValues(k.metric, k.judge, st, "upper").Set(est.Upper)
		out = append(out, observation{metric: Metric(st, k.metric), value: est.Value})
	}
	return out
}

// Prune drops pairs older than the window from every series and refreshes the pair counts;
// Start's loop runs it every Settings.PruneEvery.
func (a *Tracker) Prune(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, w := range a.series {
		w.Prune(now)
		a.pairs.WithLabelValues(k.metric, k.judge).Set(float64(w.Len()))
	}
}

// Update applies a reloaded alerting.agreement: window, max_pairs, min_samples and max_series
// apply at once (to the pairs already held too); max_records and the prune interval are read
// once by New.
func (a *Tracker) Update(c Settings) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c.MaxRecords, c.PruneEvery = a.cfg.MaxRecords, a.cfg.PruneEvery
	a.cfg = c
	for _, w := range a.series {
		w.Age, w.Max = c.Window, c.MaxPairs
	}
}

// Start starts the loop that prunes old pairs. It returns at once.
func (a *Tracker) Start(context.Context) error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.stop != nil {
		return errors.New("judge agreement already started")
	}
	every := a.cfg.PruneEvery
	if every <= 0 {
		every = time.Minute
	}
	a.stop, a.done = make(chan struct{}), make(chan struct{})
	go a.loop(every, a.stop, a.done)
	return nil
}

func (a *Tracker) loop(every time.Duration, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			a.Prune(a.now())
		}
	}
}

// Shutdown stops the loop. It is idempotent and safe without Start.
func (a *Tracker) Shutdown(ctx context.Context) error {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.stop == nil {
		return nil
	}
	done := a.done
	close(a.stop)
	a.stop, a.done = nil, nil
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
