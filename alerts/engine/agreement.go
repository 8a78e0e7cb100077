package engine

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/agreement"
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

// pending is what the engine remembers of one record until its label and its scores have met:
// its scores by metric, the label's values, and the metrics already paired.
//
// Every scored record has one until max_records newer ones push it out, labelled or not, so
// it is kept small (BenchmarkAgreementMemory): scores as a slice of the record's size (a
// record has a handful of metrics), each naming its metric and scorer through one shared
// pair (agreementState.sharedPair), the service name shared through agreementState.intern.
type pending struct {
	key, service string
	scores       []heldScore
	human        map[string]float64
	paired       map[string]bool
}

// heldScore is one metric's latest score of a pending record.
type heldScore struct {
	*metricScorer
	value float64
}

// metricScorer names a score: its metric and the scorer that gave it.
type metricScorer struct{ metric, scorer string }

// score returns the index of the record's score of metric m in p.scores, or -1.
func (p *pending) score(m string) int {
	return slices.IndexFunc(p.scores, func(h heldScore) bool { return h.metric == m })
}

// maxInterned bounds agreementState.names; names beyond it are kept as they come.
const maxInterned = 1024

type seriesKey struct{ metric, judge string }

// agreementState pairs human labels with the scores of the same record and metric. Guarded by
// Engine.mu.
type agreementState struct {
	cfg     config.Agreement
	byKey   map[string]*pending
	byTrace map[string]string // trace id → key of its latest record, for labels without a span
	order   []string          // keys in arrival order, a ring of cfg.MaxRecords
	next    int
	series  map[seriesKey]*agreement.Window
	// names holds one copy of each service name the pending records keep, and judges one
	// metric and scorer pair for their scores: the results arrive decoded, each with its own
	// copy of every string.
	names  map[string]string
	judges map[metricScorer]*metricScorer

	value, bound, pairs *prometheus.GaugeVec
	unpaired            *prometheus.CounterVec
}

func newAgreement(cfg config.Agreement, reg prometheus.Registerer) (*agreementState, error) {
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 1
	}
	a := &agreementState{cfg: cfg, byKey: map[string]*pending{}, byTrace: map[string]string{},
		order: make([]string, cfg.MaxRecords), series: map[seriesKey]*agreement.Window{}, names: map[string]string{}, judges: map[metricScorer]*metricScorer{},
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
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// intern returns the shared copy of name (name itself once maxInterned names are held).
func (a *agreementState) intern(name string) string {
	if c, ok := a.names[name]; ok {
		return c
	}
	if len(a.names) < maxInterned {
		a.names[name] = name
	}
	return name
}

// sharedPair returns the shared pair of metric and scorer (a pair of its own once maxInterned
// pairs are held).
func (a *agreementState) sharedPair(metric, scorer string) *metricScorer {
	k := metricScorer{metric, scorer}
	if c, ok := a.judges[k]; ok {
		return c
	}
	c := &metricScorer{a.intern(metric), a.intern(scorer)}
	if len(a.judges) < maxInterned {
		a.judges[*c] = c
	}
	return c
}

// entry returns (creating, evicting the oldest when full) the pending state of a record.
func (a *agreementState) entry(traceID, spanID, service string) *pending {
	service = a.intern(service)
	key := traceID
	if spanID != "" {
		key += "/" + spanID
	} else if k, ok := a.byTrace[traceID]; ok {
		key = k // a label naming only the trace joins its latest record
	}
	if p, ok := a.byKey[key]; ok {
		if p.service == "" {
			p.service = service
		}
		return p
	}
	if old := a.order[a.next]; old != "" {
		if p := a.byKey[old]; p != nil {
			if n := len(p.human) - len(p.paired); n > 0 {
				a.unpaired.WithLabelValues("evicted").Add(float64(n))
			}
			delete(a.byKey, old)
			if tid, _, _ := strings.Cut(old, "/"); a.byTrace[tid] == old {
				delete(a.byTrace, tid)
			}
		}
	}
	a.order[a.next] = key
	a.next = (a.next + 1) % len(a.order)
	p := &pending{key: key, service: service}
	a.byKey[key] = p
	if spanID != "" {
		a.byTrace[key[:len(traceID)]] = key // the key's own bytes, not the result's copy
	}
	return p
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
	e.noteLabel(l.TraceID, l.SpanID, l.Service, l.Values, now)
	return nil
}

// noteLabel remembers a label's values and pairs those whose scores are known. Called with
// e.mu held.
func (e *Engine) noteLabel(traceID, spanID, service string, values map[string]float64, now time.Time) {
	p := e.agree.entry(traceID, spanID, service)
	if p.human == nil {
		p.human = make(map[string]float64, len(values))
	}
	for m, v := range values {
		if math.IsNaN(v) || v < 0 || v > 1 {
			e.agree.unpaired.WithLabelValues("invalid").Inc()
			continue
		}
		p.human[m] = v
	}
	e.pair(p, now)
}

// noteScores remembers results by record and pairs those whose labels are known. Called with
// e.mu held.
func (e *Engine) noteScores(results []score.Result, now time.Time) {
	for i := range results {
		res := &results[i]
		if res.TraceID == "" || math.IsNaN(res.Value) {
			continue
		}
		p := e.agree.entry(res.TraceID, res.SpanID, res.Service)
		h := heldScore{metricScorer: e.agree.sharedPair(res.Metric, res.Scorer), value: res.Value}
		if j := p.score(h.metric); j >= 0 {
			p.scores[j] = h
		} else {
			if len(p.scores) == cap(p.scores) {
				// A record's results arrive together: room for all of them at once keeps the
				// slice at the record's size, not at append's next power of two.
				p.scores = slices.Grow(p.scores, sameRecord(results[i:]))
			}
			p.scores = append(p.scores, h)
		}
		if _, labelled := p.human[res.Metric]; labelled {
			e.pair(p, now)
		}
	}
}

// sameRecord counts the results of rs that score the record of rs[0].
func sameRecord(rs []score.Result) int {
	n := 0
	for i := range rs {
		if rs[i].TraceID == rs[0].TraceID && rs[i].SpanID == rs[0].SpanID {
			n++
		}
	}
	return n
}

// pair adds a pair for every metric of p with both a human value and a score, once, and
// updates that series' statistics. Called with e.mu held.
func (e *Engine) pair(p *pending, now time.Time) {
	a := e.agree
	for m, h := range p.human {
		i := p.score(m)
		if i < 0 || p.paired[m] {
			continue
		}
		res := p.scores[i]
		if p.paired == nil {
			p.paired = map[string]bool{}
		}
		p.paired[m] = true
		k := seriesKey{metric: m, judge: judgeLabel(res.scorer)}
		w := a.series[k]
		if w == nil {
			if len(a.series) >= a.cfg.MaxSeries {
				a.unpaired.WithLabelValues("series_limit").Inc()
				continue
			}
			w = &agreement.Window{Age: time.Duration(a.cfg.Window), Max: a.cfg.MaxPairs}
			a.series[k] = w
		}
		w.Add(agreement.Pair{Human: h, Judge: res.value, Time: now})
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
