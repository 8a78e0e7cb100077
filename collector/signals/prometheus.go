package signals

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// promRecorder records to client_golang metrics. Each service gets its children resolved once
// (series), so the hot path does no label hashing.
type promRecorder struct {
	requests  *prometheus.CounterVec
	documents *prometheus.HistogramVec
	score     *prometheus.HistogramVec
	topScore  *prometheus.HistogramVec
	tokens    *prometheus.HistogramVec
	feedback  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	empty     *prometheus.CounterVec
	notSeen   *prometheus.CounterVec
	citations *prometheus.HistogramVec
	refusals  *prometheus.CounterVec

	series sync.Map // seriesKey -> *promSeries; bounded by cardinality.ServiceSet and cardinality.VariantSet
}

// seriesKey names one (service, variant) pair of label values.
type seriesKey struct{ service, variant string }

// promSeries holds one service's children, all created up front so every series of a service
// exists (at zero) from its first record on.
type promSeries struct {
	requests  prometheus.Counter
	documents prometheus.Observer
	score     gatedObserver
	topScore  gatedObserver
	tokens    prometheus.Observer
	feedback  [numSentiments]gatedCounter
	duration  [numStages]gatedObserver
	empty     prometheus.Counter
	notSeen   prometheus.Counter
	citations prometheus.Observer
	refusals  prometheus.Counter
}

// gatedObserver is a histogram child that takes exemplars through its gate.
type gatedObserver struct {
	h    prometheus.Observer
	gate *exemplarGate
}

func (o gatedObserver) observe(v float64, ex func() prometheus.Labels, now int64) {
	if eo, ok := o.h.(prometheus.ExemplarObserver); ok && now != 0 && o.gate.allow(v, now) {
		eo.ObserveWithExemplar(v, ex())
		return
	}
	o.h.Observe(v)
}

// gatedCounter is a counter child that takes exemplars through its gate.
type gatedCounter struct {
	c    prometheus.Counter
	gate *exemplarGate
}

func (c gatedCounter) inc(ex func() prometheus.Labels, now int64) {
	if ea, ok := c.c.(prometheus.ExemplarAdder); ok && now != 0 && c.gate.allow(0, now) {
		ea.AddWithExemplar(1, ex())
		return
	}
	c.c.Inc()
}

func newPromRecorder(reg prometheus.Registerer) (*promRecorder, error) {
	// Every metric is named, described and bucketed by the signal catalog (reqsignal).
	hist := func(d *reqsignal.Metric, labelNames ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, labelNames)
	}
	counter := func(d *reqsignal.Metric, labelNames ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, labelNames)
	}
	p := &promRecorder{
		requests:  counter(&reqsignal.MetricRequests, "service", "variant"),
		documents: hist(&reqsignal.MetricDocuments, "service", "variant"),
		score:     hist(&reqsignal.MetricScore, "service", "variant"),
		topScore:  hist(&reqsignal.MetricTopScore, "service", "variant"),
		tokens:    hist(&reqsignal.MetricTokens, "service", "variant"),
		feedback:  counter(&reqsignal.MetricFeedback, "service", "variant", "sentiment"),
		duration:  hist(&reqsignal.MetricDuration, "service", "variant", "stage"),
		empty:     counter(&reqsignal.MetricEmpty, "service", "variant"),
		notSeen:   counter(&reqsignal.MetricNotSeen, "service", "variant"),
		citations: hist(&reqsignal.MetricCitations, "service", "variant"),
		refusals:  counter(&reqsignal.MetricRefusals, "service", "variant"),
	}
	for _, c := range []prometheus.Collector{p.requests, p.documents, p.score, p.topScore, p.tokens,
		p.feedback, p.duration, p.empty, p.citations, p.refusals, p.notSeen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("signals: register metrics: %w", err)
		}
	}
	return p, nil
}

func (p *promRecorder) seriesFor(service, variant string) *promSeries {
	key := seriesKey{service, variant}
	if s, ok := p.series.Load(key); ok {
		return s.(*promSeries)
	}
	s := &promSeries{
		requests:  p.requests.WithLabelValues(service, variant),
		documents: p.documents.WithLabelValues(service, variant),
		score:     gatedObserver{p.score.WithLabelValues(service, variant), newExemplarGate(reqsignal.ScoreBuckets)},
		topScore:  gatedObserver{p.topScore.WithLabelValues(service, variant), newExemplarGate(reqsignal.ScoreBuckets)},
		tokens:    p.tokens.WithLabelValues(service, variant),
		empty:     p.empty.WithLabelValues(service, variant),
		notSeen:   p.notSeen.WithLabelValues(service, variant),
		citations: p.citations.WithLabelValues(service, variant),
		refusals:  p.refusals.WithLabelValues(service, variant),
	}
	for i := range s.feedback {
		s.feedback[i] = gatedCounter{p.feedback.WithLabelValues(service, variant, Sentiment(i).String()), newExemplarGate(nil)}
	}
	for i := range s.duration {
		s.duration[i] = gatedObserver{p.duration.WithLabelValues(service, variant, reqsignal.LatencyStage(i).String()), newExemplarGate(reqsignal.DurationBuckets)}
	}
	actual, _ := p.series.LoadOrStore(key, s)
	return actual.(*promSeries)
}

// forget deletes a service's series and its cached children: an evicted label's children
// must not be reused, they are no longer part of the vectors.
func (p *promRecorder) forget(service string) {
	p.forgetMatch("service", service, func(k seriesKey) bool { return k.service == service })
}

// forgetVariant deletes an evicted variant label's series and cached children.
func (p *promRecorder) forgetVariant(variant string) {
	p.forgetMatch("variant", variant, func(k seriesKey) bool { return k.variant == variant })
}

func (p *promRecorder) forgetMatch(name, value string, match func(seriesKey) bool) {
	p.series.Range(func(k, _ any) bool {
		if match(k.(seriesKey)) {
			p.series.Delete(k)
		}
		return true
	})
	l := prometheus.Labels{name: value}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{p.requests, p.documents,
		p.score, p.topScore, p.tokens, p.feedback, p.duration, p.empty, p.citations, p.refusals, p.notSeen} {
		v.DeletePartialMatch(l)
	}
}

// Record implements Recorder. Exemplars (trace_id, and span_id when known) go on the duration
// and score histograms and on the feedback counter: the places where a user wants to jump from
// a slow, poorly grounded or disliked request to its trace.
func (p *promRecorder) Record(_ context.Context, o Observation) {
	s := p.seriesFor(o.Service, o.Variant)
	now := o.now // 0: no exemplar
	var labels prometheus.Labels
	ex := func() prometheus.Labels { // built once per record, only if a gate lets one through
		if labels == nil {
			labels = prometheus.Labels{"trace_id": o.TraceID}
			if o.SpanID != "" {
				labels["span_id"] = o.SpanID
			}
		}
		return labels
	}
	if o.Request {
		w := o.weight()
		s.requests.Add(w)
		switch {
		case !o.Retrieved:
			s.notSeen.Add(w)
		case o.Documents == 0:
			s.documents.Observe(0)
			s.empty.Add(w)
		default:
			s.documents.Observe(float64(o.Documents))
		}
		if o.Scored {
			s.score.observe(o.MeanScore, ex, now)
			s.topScore.observe(o.TopScore, ex, now)
		}
		if o.Answered {
			s.tokens.Observe(float64(o.AnswerTokens))
		}
		if o.CitationsKnown {
			s.citations.Observe(float64(o.Citations))
		}
		if o.Refusal {
			s.refusals.Add(w)
		}
		for i, ms := range o.LatencyMS {
			if ms > 0 {
				s.duration[i].observe(ms/1000, ex, now)
			}
		}
	}
	if o.HasFeedback {
		s.feedback[o.Sentiment].inc(ex, now)
	}
}

// Shutdown implements Recorder; Prometheus is scraped, nothing to flush.
func (p *promRecorder) Shutdown(context.Context) error { return nil }
