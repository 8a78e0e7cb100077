package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/alerts/internal/ring"
	"github.com/ragwatch/ragwatch/alerts/slo"
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
	Means map[string]slo.Sums
	Pairs map[string]diagnose.Moments
}

// maxDiagVariants bounds the variants of one service whose statistics are kept apart, besides
// the service's own (all variants together); later variants only feed the service's.
const maxDiagVariants = 16

// diagKey names the statistics of a service (variant "": all its variants), or of one
// variant of it.
type diagKey struct{ service, variant string }

// diagnoser keeps, per service label (and per variant of it, up to maxDiagVariants), the weighted statistics of the metrics the patterns of
// alerts/diagnose read, and the findings of the last evaluation. All of it is guarded by the
// engine's mu. The state is not persisted: after a restart the diagnosis says "none" until a
// window of new values has come in.
type diagnoser struct {
	th       diagnose.Thresholds
	window   time.Duration
	width    time.Duration
	services map[diagKey]*ring.Ring[diagBucket]
	variants map[string]int // per service, the variants in services
	findings map[diagKey][]diagnose.Finding
	gauge    *prometheus.GaugeVec
}

func newDiagnoser(c config.Diagnosis, reg prometheus.Registerer) (*diagnoser, error) {
	d := &diagnoser{
		th:     diagnose.Thresholds{Low: c.Low, High: c.High, MinSamples: int64(c.MinSamples), Drop: c.Drop},
		window: time.Duration(c.Window), services: map[diagKey]*ring.Ring[diagBucket]{},
		variants: map[string]int{}, findings: map[diagKey][]diagnose.Finding{},
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

// buckets returns the buckets at now of service and, when it has one, of its variant (nil
// when the service keeps maxDiagVariants others already).
func (d *diagnoser) buckets(service, variant string, now time.Time) (svc, v *diagBucket) {
	svc = d.bucket(diagKey{service: service}, now)
	if variant != "" {
		k := diagKey{service, variant}
		if _, ok := d.services[k]; ok || d.variants[service] < maxDiagVariants {
			v = d.bucket(k, now)
		}
	}
	return svc, v
}

func (d *diagnoser) bucket(key diagKey, now time.Time) *diagBucket {
	r, ok := d.services[key]
	if !ok {
		r = ring.New[diagBucket](d.width, d.window)
		d.services[key] = r
		if key.variant != "" {
			d.variants[key.service]++
		}
	}
	b := r.At(now)
	if b != nil && b.Means == nil {
		b.Means, b.Pairs = map[string]slo.Sums{}, map[string]diagnose.Moments{}
	}
	return b
}

// diagRecord feeds a record's top retrieval score, weighted by the traffic the record stands
// for (1/p of upstream sampling). Called with e.mu held.
func (e *Engine) diagRecord(r *record.Record, svc *serviceLabel, now time.Time) {
	top, _, n := r.ScoreStats()
	if n == 0 {
		return
	}
	sb, v := e.diag.buckets(e.labelOf(svc), r.Variant, now)
	for _, b := range []*diagBucket{sb, v} {
		if b != nil {
			m := b.Means[diagnose.RetrievalScoreTop]
			m.Add(top, r.UpstreamWeight())
			b.Means[diagnose.RetrievalScoreTop] = m
		}
	}
}

// diagScores feeds the scores the patterns read; the scores of one request (same service and
// trace) in one batch also feed the pairs' joint moments. Called with e.mu held.
func (e *Engine) diagScores(results []score.Result, now time.Time) {
	type key struct{ service, variant, trace string }
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
		k := key{res.Service, res.Variant, res.TraceID}
		if byReq[k] == nil {
			byReq[k] = map[string]val{}
		}
		byReq[k][res.Metric] = val{res.Value, w}
	}
	for k, vals := range byReq {
		svc, v := e.diag.buckets(e.services.LabelAt(k.service, now), k.variant, now)
		names := slices.Sorted(maps.Keys(vals))
		for _, b := range []*diagBucket{svc, v} {
			if b == nil {
				continue
			}
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
}

// diagnoseAll recomputes every service's findings at now and sets ragwatch_diagnosis. A
// service with nothing in the window, or whose label the shared set evicted, is dropped.
// Called with e.mu held.
func (e *Engine) diagnoseAll(now time.Time) {
	d := e.diag
	clear(d.findings)
	for key, r := range d.services {
		service, variant := key.service, key.variant
		w := diagnose.Window{Means: map[string]slo.Sums{}, Older: map[string]slo.Sums{},
			Newer: map[string]slo.Sums{}, Pairs: map[string]diagnose.Moments{}}
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
		half := func(lo, hi int64, into map[string]slo.Sums) {
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
			delete(d.services, key)
			if variant != "" {
				if d.variants[service]--; d.variants[service] <= 0 {
					delete(d.variants, service)
				}
			} else {
				d.gauge.DeletePartialMatch(prometheus.Labels{"service": service})
			}
			continue
		}
		found := diagnose.Diagnose(w, d.th)
		d.findings[key] = found
		if variant != "" {
			continue // the gauge is per service
		}
		for _, p := range diagnose.Patterns {
			on := slices.ContainsFunc(found, func(f diagnose.Finding) bool { return f.Pattern == p })
			d.gauge.WithLabelValues(service, p).Set(b2f(on))
		}
	}
}

// diagnosisFor is the diagnosis an alert on metric for service carries: the variant's own when
// the alert is about one (an SLO filtered on it, a comparison's candidate) and its metric pairs
// show a pattern, else the service's. Called with e.mu held.
func (e *Engine) diagnosisFor(service, variant, metric string) *alerts.Diagnosis {
	f := diagnose.Pick(e.diag.findings[diagKey{service: service}], metric)
	if variant != "" {
		if vf := diagnose.Pick(e.diag.findings[diagKey{service, variant}], metric); vf.Pattern != diagnose.None {
			f = vf
		}
	}
	out := &alerts.Diagnosis{Pattern: f.Pattern, Explanation: f.Explanation, Numbers: make([]alerts.Figure, 0, len(f.Numbers))}
	for _, n := range f.Numbers {
		out.Numbers = append(out.Numbers, alerts.Figure{Name: n.Name, Value: n.Value})
	}
	return out
}

func finite(x float64) bool { return x == x && x-x == 0 }
