package comparison

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/compare"
	"github.com/ragwatch/ragwatch/alerts/internal/lifecycle"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/config"
)

// Alert name and kind of a comparison whose candidate is worse than its baseline.
const (
	NameComparison = "RagwatchCandidateWorse"
	KindComparison = "comparison"
)

// Metric names of comparisons.
const (
	MetricComparisonDelta = "ragwatch_comparison_delta"
	MetricComparisonState = "ragwatch_comparison_state"
)

// Set holds the online comparisons (config `comparisons:`): per comparison, service and
// candidate variant, per metric, the two arms' weighted sums since the experiment started (or
// since its last window began), and the candidate's worst samples.
//
// Locking: mu guards everything below it. The alert engine calls in with its own lock held;
// the Set calls nothing back (Evaluate's diagnosis function must not call into the Set).
type Set struct {
	mu        sync.Mutex
	defs      []*comparison
	byMetric  map[string][]*comparison
	maxArms   int // candidates per comparison and service (variants.max_values)
	delta     *prometheus.GaugeVec
	state     *prometheus.GaugeVec
	dashboard string
	traceTmpl string
}

type comparison struct {
	cfg  config.Comparison
	opts compare.Options
	// arms: service label → candidate variant → the experiment.
	arms map[string]map[string]*experiment
}

type experiment struct {
	started time.Time
	metrics map[string]*armPair
}

// armPair is one metric of an experiment: the two arms' sums, the candidate's worst samples,
// and the metric's own alert — each worse metric of a candidate is its own alert, so every
// one reaches on-call with its interval.
type armPair struct {
	baseline, candidate slo.Sums
	worst               slo.Worst
	result              compare.Result
	machine             lifecycle.Machine
	last                *alerts.Alert
}

// firing reports whether some metric of the experiment has a firing alert.
func (ex *experiment) firing() bool {
	for _, p := range ex.metrics {
		if p.machine.Firing() {
			return true
		}
	}
	return false
}

// New builds the Set of the `comparisons:` section; maxArms bounds the candidates per
// comparison and service (variants.max_values), dashboard and traceTmpl are
// alerting.dashboard_url and alerting.trace_url_template.
func New(defs []config.Comparison, maxArms int, reg prometheus.Registerer, dashboard, traceTmpl string) (*Set, error) {
	c := &Set{dashboard: dashboard, traceTmpl: traceTmpl}
	c.delta = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricComparisonDelta,
		Help: "Weighted mean of the candidate minus the baseline's, per comparison and metric: the estimate and the always-valid confidence sequence's lower and upper bounds."},
		[]string{"comparison", "service", "candidate", "metric", "bound"})
	c.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricComparisonState,
		Help: "State of a comparison per metric (1 for the current state): collecting, candidate_worse, not_worse, inconclusive."},
		[]string{"comparison", "service", "candidate", "metric", "state"})
	for _, col := range []prometheus.Collector{c.delta, c.state} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	c.Update(defs, maxArms, dashboard, traceTmpl)
	return c, nil
}

// Update applies a (re)loaded config: a comparison whose test is defined the same way
// (definition) keeps its experiments; any other starts empty, and a removed one's gauges go
// away.
func (c *Set) Update(defs []config.Comparison, maxArms int, dashboard, traceTmpl string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dashboard, c.traceTmpl = dashboard, traceTmpl
	old := map[string]*comparison{}
	for _, cp := range c.defs {
		old[cp.cfg.Name] = cp
	}
	c.defs, c.byMetric, c.maxArms = nil, map[string][]*comparison{}, max(maxArms, 1)
	for _, d := range defs {
		cp := old[d.Name]
		next := &comparison{cfg: d}
		if cp != nil && cp.definition() == next.definition() {
			// Same test: the experiments go on; severity, labels, URLs and notifiers apply to them.
			delete(old, d.Name)
			cp.cfg = d
			for _, bySvc := range cp.arms {
				for _, ex := range bySvc {
					for _, p := range ex.metrics {
						if p.last != nil {
							p.last.Notifiers = d.Notifiers
						}
					}
				}
			}
		} else {
			cp = &comparison{cfg: d, opts: compare.Options{Margin: d.Margin, Alpha: d.Alpha, MinSamples: d.MinSamples,
				LowerIsBetter: d.LowerIsBetter},
				arms: map[string]map[string]*experiment{}}
		}
		c.defs = append(c.defs, cp)
		for _, m := range slices.Compact(slices.Sorted(slices.Values(d.Metrics))) {
			c.byMetric[m] = append(c.byMetric[m], cp)
		}
	}
	for name := range old {
		c.delta.DeletePartialMatch(prometheus.Labels{"comparison": name})
		c.state.DeletePartialMatch(prometheus.Labels{"comparison": name})
	}
}

// Watches reports whether a comparison watches metric.
func (c *Set) Watches(metric string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byMetric[metric]) > 0
}

// Observe adds one value of metric from a request of service served by variant; label is the
// bounded service label, under which experiments are kept (a comparison for one configured
// service keeps them under its name). A value or weight that is not finite, or a negative
// weight, is ignored.
func (c *Set) Observe(metric, service, label, variant string, x, w float64, s slo.Sample, now time.Time) {
	if variant == "" || math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cp := range c.byMetric[metric] {
		key := label
		if cp.cfg.Service != "" {
			if cp.cfg.Service != service {
				continue
			}
			key = service
		}
		if variant == cp.cfg.Baseline {
			for _, ex := range cp.arms[key] {
				ex.pair(metric).baseline.Add(x, w)
			}
			continue
		}
		if cp.cfg.Candidate != "" && variant != cp.cfg.Candidate {
			continue
		}
		ex := cp.experiment(key, variant, now, c.maxArms)
		if ex == nil {
			continue
		}
		p := ex.pair(metric)
		p.candidate.Add(x, w)
		p.worst.Offer(s, cp.badness)
	}
}

// badness orders the candidate's samples for evidence: the lowest are the worst, or the
// highest when lower is better.
func (cp *comparison) badness(v float64) float64 {
	if cp.cfg.LowerIsBetter {
		return v
	}
	return -v
}

// experiment returns (creating) the experiment of a candidate; nil when the service already
// has maxArms candidates.
func (cp *comparison) experiment(service, candidate string, now time.Time, maxArms int) *experiment {
	bySvc := cp.arms[service]
	if bySvc == nil {
		bySvc = map[string]*experiment{}
		cp.arms[service] = bySvc
	}
	ex := bySvc[candidate]
	if ex == nil {
		if len(bySvc) >= maxArms {
			return nil
		}
		ex = &experiment{started: now, metrics: map[string]*armPair{}}
		bySvc[candidate] = ex
	}
	return ex
}

func (ex *experiment) pair(metric string) *armPair {
	p := ex.metrics[metric]
	if p == nil {
		p = &armPair{machine: lifecycle.Machine{Phase: lifecycle.Inactive}}
		ex.metrics[metric] = p
	}
	return p
}

// Evaluate tests every experiment, updates the gauges and returns the alerts that fire or
// resolve now (firing alerts are returned on every evaluation, as SLO alerts are): one alert
// per comparison, service, candidate and worse metric. diagnosis gives each firing alert the
// diagnosis of its own metric.
func (c *Set) Evaluate(now time.Time, diagnosis func(service, variant, metric string) *alerts.Diagnosis) []alerts.Alert {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []alerts.Alert
	for _, cp := range c.defs {
		for _, service := range slices.Sorted(maps.Keys(cp.arms)) {
			for _, cand := range slices.Sorted(maps.Keys(cp.arms[service])) {
				ex := cp.arms[service][cand]
				if w := time.Duration(cp.cfg.Window); w > 0 && now.Sub(ex.started) >= w && !ex.firing() {
					// A new window is a new experiment: the sequence is valid within each. The
					// metrics' alerts (none firing) stay listed until their retention ends.
					ex.started = now
					for _, p := range ex.metrics {
						*p = armPair{machine: p.machine, last: p.last}
					}
				}
				for _, m := range slices.Compact(slices.Sorted(slices.Values(cp.cfg.Metrics))) {
					p := ex.pair(m)
					p.result = compare.Evaluate(p.baseline, p.candidate, cp.opts)
					c.export(cp, service, cand, m, p.result)
					worse := p.result.State == compare.CandidateWorse
					tr := p.machine.Step(now, worse, !worse, 0, 0)
					switch {
					case p.machine.Firing():
						a := c.alert(cp, service, cand, m, ex, now)
						a.Status, a.StartsAt = alerts.StatusFiring, p.machine.FiringSince
						a.Diagnosis = diagnosis(service, cand, m) // the candidate's metric pairs, else the service's
						p.last = &a
						out = append(out, a)
					case tr == lifecycle.Resolved && p.last != nil:
						a := *p.last
						a.Status, a.EndsAt = alerts.StatusResolved, now
						p.last = &a
						out = append(out, a)
					}
				}
			}
		}
	}
	return out
}

func (c *Set) export(cp *comparison, service, cand, metric string, r compare.Result) {
	l := []string{cp.cfg.Name, service, cand, metric}
	c.delta.WithLabelValues(append(l, "estimate")...).Set(slo.Finite(r.Delta))
	c.delta.WithLabelValues(append(l, "lower")...).Set(slo.Finite(r.Lower))
	c.delta.WithLabelValues(append(l, "upper")...).Set(slo.Finite(r.Upper))
	for _, st := range compare.States {
		v := 0.0
		if st == r.State {
			v = 1
		}
		c.state.WithLabelValues(append(l, string(st))...).Set(v)
	}
}

func (c *Set) alert(cp *comparison, service, cand, metric string, ex *experiment, _ time.Time) alerts.Alert {
	p := ex.pair(metric)
	r := p.result
	labels := map[string]string{"alertname": NameComparison, "comparison": cp.cfg.Name, "service": service,
		"severity": cp.cfg.Severity, "candidate": cand, "baseline": cp.cfg.Baseline, "metric": metric}
	for k, v := range cp.cfg.Labels {
		labels[k] = v
	}
	dashboard := cp.cfg.DashboardURL.Reveal()
	if dashboard == "" {
		dashboard = c.dashboard
	}
	a := alerts.Alert{Fingerprint: alerts.Fingerprint(labels), Name: NameComparison, Kind: KindComparison,
		Rule: cp.cfg.Name, Service: service, Severity: cp.cfg.Severity, Labels: labels, Metric: metric,
		Value: slo.Finite(r.Delta), Threshold: -cp.cfg.Margin, Comparator: "<", Window: cp.cfg.Window,
		N: r.CandidateN, RunbookURL: cp.cfg.RunbookURL.Reveal(), DashboardURL: dashboard,
		Notifiers: cp.cfg.Notifiers, Evidence: []alerts.Evidence{}}
	if !math.IsInf(r.Lower, 0) && !math.IsInf(r.Upper, 0) {
		a.Interval = &alerts.Interval{Lower: r.Lower, Upper: r.Upper, Level: 1 - cp.cfg.Alpha}
	}
	for _, s := range slo.MergeWorst([]slo.Worst{p.worst}, cp.badness) {
		a.Evidence = append(a.Evidence, alerts.Evidence{TraceID: s.TraceID, SpanID: s.SpanID, Value: s.Value,
			Time: s.Time, URL: alerts.TraceURL(c.traceTmpl, s.TraceID, service)})
	}
	side, worseBy := "below", -a.Value
	if cp.cfg.LowerIsBetter {
		a.Threshold, a.Comparator, side, worseBy = cp.cfg.Margin, ">", "above", a.Value
	}
	a.Summary = fmt.Sprintf("Comparison %s: %s of %s is worse than %s by %s (margin %s) for %s", cp.cfg.Name,
		metric, cand, cp.cfg.Baseline, alerts.FormatValue(worseBy), alerts.FormatValue(cp.cfg.Margin), service)
	a.Description = fmt.Sprintf("The weighted mean of %s is %s for variant %s (%d samples) and %s for baseline %s (%d samples): delta %s, always-valid %g%% confidence sequence %s, entirely %s %s.",
		metric, alerts.FormatValue(r.CandMean), cand, r.CandidateN, alerts.FormatValue(r.BaselineMean), cp.cfg.Baseline,
		r.BaselineN, alerts.FormatValue(r.Delta), 100*(1-cp.cfg.Alpha), a.IntervalText(), side, alerts.FormatValue(a.Threshold))
	return a
}

// Alerts lists the comparisons' firing alerts and those resolved within retention.
func (c *Set) Alerts(now time.Time, retention time.Duration) []alerts.Alert {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []alerts.Alert
	for _, cp := range c.defs {
		for _, bySvc := range cp.arms {
			for _, ex := range bySvc {
				for _, p := range ex.metrics {
					if a, ok := lifecycle.Listed(p.last, p.machine.Firing(), now, retention); ok {
						out = append(out, a)
					}
				}
			}
		}
	}
	return out
}

// Status is one comparison, service, candidate and metric in GET /api/v1/comparisons.
type Status struct {
	Comparison    string   `json:"comparison"`
	Service       string   `json:"service"`
	Metric        string   `json:"metric"`
	Baseline      string   `json:"baseline"`
	Candidate     string   `json:"candidate"`
	BaselineN     int64    `json:"baseline_n"`
	CandidateN    int64    `json:"candidate_n"`
	BaselineMean  *float64 `json:"baseline_mean"`
	CandidateMean *float64 `json:"candidate_mean"`
	Delta         float64  `json:"delta"`
	// Lower and Upper bound the always-valid confidence sequence of delta (null while
	// unbounded).
	Lower  *float64 `json:"lower"`
	Upper  *float64 `json:"upper"`
	Margin float64  `json:"margin"`
	Alpha  float64  `json:"alpha"`
	State  string   `json:"state"`
	// WorstTraceIDs are the candidate's worst samples on the metric, worst first.
	WorstTraceIDs []string  `json:"worst_trace_ids"`
	Since         time.Time `json:"since"`
}

// Statuses lists every comparison's state, by comparison, service, candidate and metric.
func (c *Set) Statuses() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []Status{}
	fin := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	for _, cp := range c.defs {
		for _, service := range slices.Sorted(maps.Keys(cp.arms)) {
			for _, cand := range slices.Sorted(maps.Keys(cp.arms[service])) {
				ex := cp.arms[service][cand]
				for _, m := range cp.cfg.Metrics {
					p := ex.pair(m)
					r := compare.Evaluate(p.baseline, p.candidate, cp.opts)
					st := Status{Comparison: cp.cfg.Name, Service: service, Metric: m, Baseline: cp.cfg.Baseline,
						Candidate: cand, BaselineN: r.BaselineN, CandidateN: r.CandidateN, BaselineMean: fin(r.BaselineMean),
						CandidateMean: fin(r.CandMean), Delta: slo.Finite(r.Delta), Lower: fin(r.Lower), Upper: fin(r.Upper),
						Margin: cp.cfg.Margin, Alpha: cp.cfg.Alpha, State: string(r.State), WorstTraceIDs: []string{}, Since: ex.started}
					for _, s := range slo.MergeWorst([]slo.Worst{p.worst}, cp.badness) {
						st.WorstTraceIDs = append(st.WorstTraceIDs, s.TraceID)
					}
					out = append(out, st)
				}
			}
		}
	}
	return out
}
