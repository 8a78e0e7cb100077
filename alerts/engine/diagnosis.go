package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/alerts/internal/ring"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// diagBuckets is the number of buckets of the diagnosis window: a trend compares the older six
// with the newer six.
const diagBuckets = 12

// diagBucket is one time bucket of a service's pair statistics.
type diagBucket struct {
	Means map[string]diagnose.Mean
	Pairs map[string]diagnose.Moments
}

// diagnoser keeps, per service label, the weighted statistics of the metrics the patterns of
// alerts/diagnose read, and the findings of the last evaluation. All of it is guarded by the
// engine's mu. The state is not persisted: after a restart the diagnosis says "none" until a
// window of new values has come in.
type diagnoser struct {
	th       diagnose.Thresholds
	window   time.Duration
	width    time.Duration
	services map[string]*ring.Ring[diagBucket]
	findings map[string][]diagnose.Finding
	gauge    *prometheus.GaugeVec
}

func newDiagnoser(c config.Diagnosis, reg prometheus.Registerer) (*diagnoser, error) {
	d := &diagnoser{
		th:     diagnose.Thresholds{Low: c.Low, High: c.High, MinSamples: int64(c.MinSamples), Drop: c.Drop},
		window: time.Duration(c.Window), services: map[string]*ring.Ring[diagBucket]{},
		findings: map[string][]diagnose.Finding{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: alerts.MetricDiagnosis,
			Help: "1 when a service's metric pairs show the diagnosis pattern (alerts/diagnose), else 0."}, []string{"service", "pattern"}),
	}
	if d.window <= 0 {
		def := diagnose.DefaultThresholds()
		d.th, d.window = def, 15*time.Minute
	}
	d.width = max(time.Second, d.window/diagBuckets)
	if err := reg.Register(d.gauge); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *diagnoser) bucket(service string, now time.Time) *diagBucket {
	r, ok := d.services[service]
	if !ok {
		r = ring.New[diagBucket](d.width, d.window)
		d.services[service] = r
	}
	b := r.At(now)
	if b != nil && b.Means == nil {
		b.Means, b.Pairs = map[string]diagnose.Mean{}, map[string]diagnose.Moments{}
	}
	return b
}

// diagRecord feeds a record's top retrieval score. Called with e.mu held.
func (e *Engine) diagRecord(r *record.Record, now time.Time) {
	scores := r.Scores()
	if len(scores) == 0 {
		return
	}
	top := slices.Max(scores)
	if b := e.diag.bucket(e.services.Label(r.Service), now); b != nil {
		m := b.Means[diagnose.RetrievalScoreTop]
		m.Add(top, 1)
		b.Means[diagnose.RetrievalScoreTop] = m
	}
}

// diagScores feeds the scores the patterns read; the scores of one request (same service and
// trace) in one batch also feed the pairs' joint moments. Called with e.mu held.
func (e *Engine) diagScores(results []score.Result, now time.Time) {
	type key struct{ service, trace string }
	type val struct{ x, w float64 }
	byReq := map[key]map[string]val{}
	for i := range results {
		res := &results[i]
		if !diagnose.Watched(res.Metric) || !finite(res.Value) || !finite(res.Weight) || res.Weight < 0 {
			continue
		}
		w := res.Weight
		if w == 0 {
			w = 1
		}
		k := key{res.Service, res.TraceID}
		if byReq[k] == nil {
			byReq[k] = map[string]val{}
		}
		byReq[k][res.Metric] = val{res.Value, w}
	}
	for k, vals := range byReq {
		b := e.diag.bucket(e.services.Label(k.service), now)
		if b == nil {
			continue
		}
		names := slices.Sorted(maps.Keys(vals))
		for _, m := range names {
			s := b.Means[m]
			s.Add(vals[m].x, vals[m].w)
			b.Means[m] = s
		}
		for _, p := range diagnose.PairsOf(names) {
			pk := diagnose.PairKey(p[0], p[1])
			mo := b.Pairs[pk]
			mo.Add(vals[p[0]].x, vals[p[1]].x, vals[p[0]].w)
			b.Pairs[pk] = mo
		}
	}
}

// diagnoseAll recomputes every service's findings at now and sets ragwatch_diagnosis. A
// service with nothing in the window, or whose label the shared set evicted, is dropped.
// Called with e.mu held.
func (e *Engine) diagnoseAll(now time.Time) {
	d := e.diag
	clear(d.findings)
	for service, r := range d.services {
		w := diagnose.Window{Means: map[string]diagnose.Mean{}, Older: map[string]diagnose.Mean{},
			Newer: map[string]diagnose.Mean{}, Pairs: map[string]diagnose.Moments{}}
		hi := r.Index(now)
		n := r.Buckets(d.window)
		seen := false
		r.Range(hi-n+1, hi, func(b *diagBucket) {
			seen = true
			for m, s := range b.Means {
				t := w.Means[m]
				t.Merge(s)
				w.Means[m] = t
			}
			for k, s := range b.Pairs {
				t := w.Pairs[k]
				t.Merge(s)
				w.Pairs[k] = t
			}
		})
		half := func(lo, hi int64, into map[string]diagnose.Mean) {
			r.Range(lo, hi, func(b *diagBucket) {
				for m, s := range b.Means {
					t := into[m]
					t.Merge(s)
					into[m] = t
				}
			})
		}
		half(hi-n+1, hi-n/2, w.Older)
		half(hi-n/2+1, hi, w.Newer)
		if !seen || (service != labels.Other && !e.services.Admitted(service)) {
			delete(d.services, service)
			d.gauge.DeletePartialMatch(prometheus.Labels{"service": service})
			continue
		}
		found := diagnose.Diagnose(w, d.th)
		d.findings[service] = found
		for _, p := range diagnose.Patterns {
			on := slices.ContainsFunc(found, func(f diagnose.Finding) bool { return f.Pattern == p })
			d.gauge.WithLabelValues(service, p).Set(b2f(on))
		}
	}
}

// diagnosisFor is the diagnosis an alert on metric for service carries. Called with e.mu held.
func (e *Engine) diagnosisFor(service, metric string) *alerts.Diagnosis {
	f := diagnose.Pick(e.diag.findings[service], metric)
	out := &alerts.Diagnosis{Pattern: f.Pattern, Explanation: f.Explanation, Numbers: make([]alerts.Figure, 0, len(f.Numbers))}
	for _, n := range f.Numbers {
		out.Numbers = append(out.Numbers, alerts.Figure{Name: n.Name, Value: n.Value})
	}
	return out
}

func finite(x float64) bool { return x == x && x-x == 0 }
