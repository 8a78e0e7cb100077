package engine

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
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

// AgreementService is the `service` an agreement SLO's instance is kept under: agreement is
// measured over the labels of every service together.
const AgreementService = "all"

// AgreementMetric is the metric name an SLO watches to alert on a statistic of a judge's
// agreement with people on metric: agreement_spearman_faithfulness, agreement_mae_faithfulness,
// agreement_kappa_faithfulness. Every judge scoring the metric feeds it.
func AgreementMetric(statistic, metric string) string {
	return "agreement_" + statistic + "_" + metric
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
// (about twice the live heap) does not double it in resident memory: a fixed slot of ids and
// scores (heldRecord, no pointers, 112 bytes) and its index cells, ≈ 138 bytes a record in all
// (BenchmarkAgreementMemory). What does not fit a slot lives in small maps by slot: the human
// values of labelled records, and scores past a slot's room or without a shared metric and
// scorer pair.

// heldScores is how many scores a slot holds; a record's further scores go to
// agreementState.more. The builtin scorer and the RAGAS-style judges give fewer.
const heldScores = 8

// recordKey identifies a record: its trace id and span id as bytes. An id in OTLP's lowercase
// hex form is kept decoded; any other as its hash (maphash with the state's own seeds: 128 bits
// of a trace id, 64 of a span id), which only another id with the same hash would match. The
// ids themselves are never needed back.
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
// joins the trace's latest record named with a span (agreementState.byTrace).
func (k recordKey) traceOf() recordKey {
	return recordKey{trace: k.trace, form: keyUsed | k.form&keyTraceHashed}
}

// heldRecord is one record's slot: its key and the scores it came with, each as the index + 1
// of its metric and scorer pair in agreementState.judges.
type heldRecord struct {
	key    recordKey
	n      uint8 // scores in ids and values
	ids    [heldScores]uint16
	values [heldScores]float64
}

// heldScore is a score kept outside a slot (agreementState.more).
type heldScore struct {
	metricScorer
	value float64
}

// metricScorer names a score: its metric and the scorer that gave it.
type metricScorer struct{ metric, scorer string }

type seriesKey struct{ metric, judge string }

// labelled is what a record's labels left: the human values by metric, and the metrics already
// paired with a score.
type labelled struct {
	human  map[string]float64
	paired map[string]bool
}

// maxInterned bounds the shared metric and scorer pairs (agreementState.judges); a score of
// another pair is kept with its own names in agreementState.more.
const maxInterned = 1024

// agreementState pairs human labels with the scores of the same record and metric. Guarded by
// Engine.mu.
type agreementState struct {
	cfg  config.Agreement
	mem  *offheap.Array[heldRecord]
	recs []heldRecord // mem's slots: a ring of cfg.MaxRecords, recs[next] the oldest
	next int
	// index finds a record's slot (byKey) and a trace's latest record named with a span id
	// (byTrace, keyed by recordKey.traceOf), outside the Go heap too.
	index  [2]*offheap.Index
	more   map[int32][]heldScore
	labels map[int32]*labelled
	seeds  [2]maphash.Seed // for ids not in hex form, and the index
	series map[seriesKey]*agreement.Window
	// judges holds one copy of each metric and scorer pair the slots name, by id − 1: the
	// results arrive decoded, each with its own copy of every string.
	judges   []metricScorer
	judgeIDs map[metricScorer]uint16

	value, bound, pairs *prometheus.GaugeVec
	unpaired            *prometheus.CounterVec
}

func newAgreement(cfg config.Agreement, reg prometheus.Registerer) (*agreementState, error) {
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 1
	}
	a := &agreementState{cfg: cfg, mem: offheap.New[heldRecord](cfg.MaxRecords),
		index: [2]*offheap.Index{offheap.NewIndex(cfg.MaxRecords), offheap.NewIndex(cfg.MaxRecords)}, more: map[int32][]heldScore{},
		labels: map[int32]*labelled{}, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
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
	a.recs = a.mem.Slice()
	for _, r := range []string{"evicted", "series_limit", "invalid"} {
		a.unpaired.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{a.value, a.bound, a.pairs, a.unpaired} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// offHeapBytes is the memory of the slots and the index, outside the Go heap (reserved: the
// kernel adds its pages as they are first used).
func (a *agreementState) offHeapBytes() int {
	return len(a.recs)*int(unsafe.Sizeof(heldRecord{})) + a.index[byKey].Bytes() + a.index[byTrace].Bytes()
}

// The indexes of agreementState.index.
const (
	byKey   = iota // a record's key → its slot
	byTrace        // recordKey.traceOf → the slot of the trace's latest record named with a span id
)

// indexKey is slot i's key in index ix.
func (a *agreementState) indexKey(ix int, i uint32) recordKey {
	if ix == byTrace {
		return a.recs[i].key.traceOf()
	}
	return a.recs[i].key
}

func (a *agreementState) hash(k recordKey) uint64 {
	return maphash.Comparable(a.seeds[1], k)
}

// find returns the slot k names in index ix and its cell, or -1 and the empty cell where k
// would go.
func (a *agreementState) find(ix int, k recordKey) (slot int32, cell uint64) {
	i, cell := a.index[ix].Find(a.hash(k), func(s uint32) bool { return a.indexKey(ix, s) == k })
	return int32(i), cell
}

// unindex empties cell c of index ix.
func (a *agreementState) unindex(ix int, c uint64) {
	a.index[ix].Delete(c, func(s uint32) uint64 { return a.hash(a.indexKey(ix, s)) })
}

// key returns the key of the record traceID names with spanID (none: "").
func (a *agreementState) key(traceID, spanID string) recordKey {
	k := recordKey{form: keyUsed}
	if !hexid.Decode(k.trace[:], traceID) {
		k.form |= keyTraceHashed
		h1, h2 := maphash.String(a.seeds[0], traceID), maphash.String(a.seeds[1], traceID)
		binary.LittleEndian.PutUint64(k.trace[:8], h1)
		binary.LittleEndian.PutUint64(k.trace[8:], h2)
	}
	if spanID != "" {
		k.form |= keySpan
		if !hexid.Decode(k.span[:], spanID) {
			k.form |= keySpanHashed
			binary.LittleEndian.PutUint64(k.span[:], maphash.String(a.seeds[0], spanID))
		}
	}
	return k
}

// judgeID returns the id of the shared pair of metric and scorer (judges index + 1), adding it
// while fewer than maxInterned are held, else 0.
func (a *agreementState) judgeID(metric, scorer string) uint16 {
	if id, ok := a.judgeIDs[metricScorer{metric, scorer}]; ok {
		return id
	}
	if len(a.judges) >= maxInterned {
		return 0
	}
	ms := metricScorer{strings.Clone(metric), strings.Clone(scorer)}
	a.judges = append(a.judges, ms)
	id := uint16(len(a.judges))
	a.judgeIDs[ms] = id
	return id
}

// entry returns the slot of a record, taking the oldest slot (and forgetting its record) for
// one not held.
func (a *agreementState) entry(traceID, spanID string) int32 {
	k := a.key(traceID, spanID)
	if spanID == "" {
		if i, _ := a.find(byTrace, k.traceOf()); i >= 0 {
			return i // a label naming only the trace joins its latest record
		}
	}
	if i, _ := a.find(byKey, k); i >= 0 {
		return i
	}
	i := int32(a.next)
	a.next = (a.next + 1) % len(a.recs)
	a.forget(i)
	a.recs[i] = heldRecord{key: k}
	_, c := a.find(byKey, k)
	a.index[byKey].Set(c, uint32(i))
	if spanID != "" {
		// The trace's latest record from now on: in place of an earlier one's cell.
		_, c := a.find(byTrace, k.traceOf())
		a.index[byTrace].Set(c, uint32(i))
	}
	return i
}

// forget empties slot i, counting the label values it held that never met a score.
func (a *agreementState) forget(i int32) {
	r := &a.recs[i]
	if r.key.form&keyUsed == 0 {
		return
	}
	if l := a.labels[i]; l != nil {
		if n := len(l.human) - len(l.paired); n > 0 {
			a.unpaired.WithLabelValues("evicted").Add(float64(n))
		}
		delete(a.labels, i)
	}
	delete(a.more, i)
	if j, c := a.find(byKey, r.key); j == i {
		a.unindex(byKey, c)
	}
	if j, c := a.find(byTrace, r.key.traceOf()); j == i {
		a.unindex(byTrace, c)
	}
	*r = heldRecord{}
}

// setScore keeps v as slot i's score of metric (by scorer), in place of an earlier one.
func (a *agreementState) setScore(i int32, metric, scorer string, v float64) {
	r := &a.recs[i]
	id := a.judgeID(metric, scorer)
	for j := range int(r.n) {
		if a.judges[r.ids[j]-1].metric != metric {
			continue
		}
		if id != 0 {
			r.ids[j], r.values[j] = id, v
			return
		}
		// The new pair is not shared: the score moves out of the slot.
		copy(r.ids[j:r.n], r.ids[j+1:r.n])
		copy(r.values[j:r.n], r.values[j+1:r.n])
		r.n--
		break
	}
	more := a.more[i]
	h := heldScore{metricScorer{metric, scorer}, v}
	if id != 0 {
		h.metricScorer = a.judges[id-1]
	}
	for j := range more {
		if more[j].metric == metric {
			more[j] = h
			return
		}
	}
	if id != 0 && r.n < heldScores {
		r.ids[r.n], r.values[r.n] = id, v
		r.n++
		return
	}
	a.more[i] = append(more, h)
}

// score returns slot i's score of metric and the scorer that gave it.
func (a *agreementState) score(i int32, metric string) (v float64, scorer string, ok bool) {
	r := &a.recs[i]
	for j := range int(r.n) {
		if ms := a.judges[r.ids[j]-1]; ms.metric == metric {
			return r.values[j], ms.scorer, true
		}
	}
	for _, h := range a.more[i] {
		if h.metric == metric {
			return h.value, h.scorer, true
		}
	}
	return 0, "", false
}

// ConsumeLabel implements record.LabelConsumer: a label that arrived after its record is paired
// with the scores the engine kept for that record, or waits (bounded) for them.
func (e *Engine) ConsumeLabel(_ context.Context, l record.Label) error {
	if e.agree == nil || len(l.Values) == 0 || l.TraceID == "" {
		return nil
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noteLabel(l.TraceID, l.SpanID, l.Values, now)
	return nil
}

// noteLabel remembers a label's values and pairs those whose scores are known. Called with
// e.mu held.
func (e *Engine) noteLabel(traceID, spanID string, values map[string]float64, now time.Time) {
	a := e.agree
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
	e.pair(i, l, now)
}

// noteScores remembers results by record and pairs those whose labels are known. Called with
// e.mu held.
func (e *Engine) noteScores(results []score.Result, now time.Time) {
	a := e.agree
	for k := range results {
		res := &results[k]
		if res.TraceID == "" || math.IsNaN(res.Value) {
			continue
		}
		i := a.entry(res.TraceID, res.SpanID)
		a.setScore(i, res.Metric, res.Scorer, res.Value)
		if l := a.labels[i]; l != nil {
			if _, ok := l.human[res.Metric]; ok {
				e.pair(i, l, now)
			}
		}
	}
}

// pair adds a pair for every metric of slot i with both a human value (l) and a score, once,
// and updates that series' statistics. Called with e.mu held.
func (e *Engine) pair(i int32, l *labelled, now time.Time) {
	a := e.agree
	for m, h := range l.human {
		if l.paired[m] {
			continue
		}
		v, scorer, ok := a.score(i, m)
		if !ok {
			continue
		}
		if l.paired == nil {
			l.paired = map[string]bool{}
		}
		l.paired[m] = true
		k := seriesKey{metric: m, judge: judgeLabel(scorer)}
		w := a.series[k]
		if w == nil {
			if len(a.series) >= a.cfg.MaxSeries {
				a.unpaired.WithLabelValues("series_limit").Inc()
				continue
			}
			w = &agreement.Window{Age: time.Duration(a.cfg.Window), Max: a.cfg.MaxPairs}
			a.series[k] = w
		}
		w.Add(agreement.Pair{Human: h, Judge: v, Time: now})
		e.updateAgreement(k, w, now)
	}
}

// updateAgreement exports a series' statistics and, once it holds min_samples pairs, feeds each
// to the SLOs on agreement_<statistic>_<metric> (weight 1). Called with e.mu held.
func (e *Engine) updateAgreement(k seriesKey, w *agreement.Window, now time.Time) {
	a := e.agree
	a.pairs.WithLabelValues(k.metric, k.judge).Set(float64(w.Len()))
	if w.Len() < a.cfg.MinSamples {
		return
	}
	for _, st := range agreement.Statistics {
		est := agreement.Compute(st, w.Pairs())
		if !est.OK {
			continue
		}
		a.value.WithLabelValues(k.metric, k.judge, st).Set(est.Value)
		a.bound.WithLabelValues(k.metric, k.judge, st, "lower").Set(est.Lower)
		a.bound.WithLabelValues(k.metric, k.judge, st, "upper").Set(est.Upper)
		name := AgreementMetric(st, k.metric)
		for _, r := range e.byMetric[name] {
			if r.service != "" && r.service != AgreementService {
				continue
			}
			r.add(e.instance(r, AgreementService), now, est.Value, 1, slo.Sample{Value: est.Value, Time: now})
		}
	}
}

// pruneAgreement drops pairs older than the window from every series and refreshes the pair
// counts; run by Evaluate. Called with e.mu held.
func (e *Engine) pruneAgreement(now time.Time) {
	if e.agree == nil {
		return
	}
	for k, w := range e.agree.series {
		w.Prune(now)
		e.agree.pairs.WithLabelValues(k.metric, k.judge).Set(float64(w.Len()))
	}
}

// updateAgreementConfig applies a reloaded alerting.agreement: window, max_pairs, min_samples
// and max_series apply at once (to the pairs already held too); max_records is read once by New.
// Called with e.mu held.
func (e *Engine) updateAgreementConfig(c config.Agreement) {
	if e.agree == nil {
		return
	}
	c.MaxRecords = e.agree.cfg.MaxRecords
	e.agree.cfg = c
	for _, w := range e.agree.series {
		w.Age, w.Max = time.Duration(c.Window), c.MaxPairs
	}
}
