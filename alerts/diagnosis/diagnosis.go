package diagnosis

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/alerts/internal/ring"
	"github.com/ragwatch/ragwatch/alerts/slo"
	"github.com/ragwatch/ragwatch/internal/cardinality"
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

// Settings is the `alerting.diagnosis` section, converted once when the engine is built.
type Settings struct {
	Thresholds diagnose.Thresholds
	// Window is how far back the statistics reach; 0 takes diagnose.DefaultThresholds and
	// 15 minutes.
	Window time.Duration
}

// Diagnoser keeps, per service label (and per variant of it, up to maxDiagVariants), the
// weighted statistics of the metrics the patterns of alerts/diagnose read, and the findings of
// the last Diagnose. The state is not persisted: after a restart the diagnosis says "none"
// until a window of new values has come in.
//
// Locking: mu guards everything below it. The alert engine calls Record and Scores before
// taking its own lock, and For with it held; the Diagnoser calls nothing back.
type Diagnoser struct {
	services *cardinality.ServiceSet

	mu       sync.Mutex
	th       diagnose.Thresholds
	window   time.Duration
	width    time.Duration
	windows  map[diagKey]*ring.Ring[diagBucket]
	variants map[string]int // per service, the variants in windows
	findings map[diagKey][]diagnose.Finding
	gauge    *prometheus.GaugeVec
}

// New builds a Diagnoser whose service labels are those of services (the process's one set).
func New(s Settings, services *cardinality.ServiceSet, reg prometheus.Registerer) (*Diagnoser, error) {
	d := &Diagnoser{services: services,
		th:     s.Thresholds,
		window: s.Window, windows: map[diagKey]*ring.Ring[diagBucket]{},
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
		return nil, fmt.Errorf("diagnosis metrics: %w", err)
	}
	return d, nil
}

// buckets returns the buckets at now of service and, when it has one, of its variant (nil
// when the service keeps maxDiagVariants others already).
func (d *Diagnoser) buckets(service, variant string, now time.Time) (svc, v *diagBucket) {
	svc = d.bucket(diagKey{service: service}, now)
	if variant != "" {
		k := diagKey{service, variant}
		if _, ok := d.windows[k]; ok || d.variants[service] < maxDiagVariants {
			v = d.bucket(k, now)
		}
	}
	return svc, v
}

func (d *Diagnoser) bucket(key diagKey, now time.Time) *diagBucket {
	r, ok := d.windows[key]
	if !ok {
		r = ring.New[diagBucket](d.width, d.window)
		d.windows[key] = r
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

// Record feeds a record's top retrieval score (record.ScoreStats), weighted by the traffic the
// record stands for (1/p of upstream sampling), under service's label value.
func (d *Diagnoser) Record(service, variant string, top, weight float64, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb, v := d.buckets(service, variant, now)
	for _, b := range []*diagBucket{sb, v} {
		if b != nil {
			m := b.Means[diagnose.RetrievalScoreTop]
			m.Add(top, weight)
			b.Means[diagnose.RetrievalScoreTop] = m
		}
	}
}

// Scores feeds the scores the patterns read; the scores of one request (same service and
// trace) in one batch also feed the pairs' joint moments.
func (d *Diagnoser) Scores(results []score.Result, now time.Time) {
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
	if len(byReq) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, vals := range byReq {
		svc, v := d.buckets(d.services.LabelAt(k.service, now), k.variant, now)
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

// Diagnose recomputes every service's findings at now and sets ragwatch_diagnosis. A
// service with nothing in the window, or whose label the shared set evicted, is dropped.
func (d *Diagnoser) Diagnose(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.findings)
	for key, r := range d.windows {
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
		if !seen || (service != cardinality.Other && !d.services.Admitted(service)) {
			delete(d.windows, key)
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
			v := 0.0
			if on {
				v = 1
			}
			d.gauge.WithLabelValues(service, p).Set(v)
		}
	}
}

// For is the diagnosis an alert on metric for service carries, as of the last Diagnose: the
// variant's own when the alert is about one (an SLO filtered on it, a comparison's candidate)
// and its metric pairs show a pattern, else the service's.
func (d *Diagnoser) For(service, variant, metric string) *alerts.Diagnosis {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := diagnose.Pick(d.findings[diagKey{service: service}], metric)
	if variant != "" {
		if vf := diagnose.Pick(d.findings[diagKey{service, variant}], metric); vf.Pattern != diagnose.None {
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
