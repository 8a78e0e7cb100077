package signals

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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
	citations *prometheus.HistogramVec
	refusals  *prometheus.CounterVec

	series sync.Map // seriesKey -> *promSeries; bounded by labels.ServiceSet and labels.VariantSet
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
	hist := func(name, help string, buckets []float64, labelNames ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labelNames)
	}
	p := &promRecorder{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_requests_total",
			Help: "RAG requests seen, by service: each record counts 1/p when only a sample with probability p reaches ragwatch (tracestate ot=th, receivers.otlp.upstream_sampling_probability).",
		}, []string{"service", "variant"}),
		documents: hist("ragwatch_retrieved_documents",
			"Documents in the final context of a request.", DocumentBuckets, "service", "variant"),
		score: hist("ragwatch_retrieval_score",
			"Mean document score of a request (requests whose documents carry scores).", ScoreBuckets, "service", "variant"),
		topScore: hist("ragwatch_retrieval_top_score",
			"Best document score of a request (requests whose documents carry scores).", ScoreBuckets, "service", "variant"),
		tokens: hist("ragwatch_answer_tokens",
			"Answer length: output tokens from usage, else words of the answer.", TokenBuckets, "service", "variant"),
		feedback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_feedback_total",
			Help: "User feedback received, by sentiment (score > 0 positive, < 0 negative, 0 neutral).",
		}, []string{"service", "variant", "sentiment"}),
		duration: hist("ragwatch_request_duration_seconds",
			"Duration of a request's stages (retrieval, generation, total); unmeasured stages are not observed.",
			DurationBuckets, "service", "variant", "stage"),
		empty: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_empty_retrievals_total",
			Help: "Requests whose final context holds no document (weighted like ragwatch_requests_total).",
		}, []string{"service", "variant"}),
		citations: hist("ragwatch_citations_per_answer",
			"Citations per answer (requests with an answer).", CitationBuckets, "service", "variant"),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ragwatch_refusals_total",
			Help: "Requests whose answer declines to answer for lack of information (\"I don't know\", \"the documents do not say\"), weighted like ragwatch_requests_total.",
		}, []string{"service", "variant"}),
	}
	for _, c := range []prometheus.Collector{p.requests, p.documents, p.score, p.topScore, p.tokens,
		p.feedback, p.duration, p.empty, p.citations, p.refusals} {
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
		score:     gatedObserver{p.score.WithLabelValues(service, variant), newExemplarGate(ScoreBuckets)},
		topScore:  gatedObserver{p.topScore.WithLabelValues(service, variant), newExemplarGate(ScoreBuckets)},
		tokens:    p.tokens.WithLabelValues(service, variant),
		empty:     p.empty.WithLabelValues(service, variant),
		citations: p.citations.WithLabelValues(service, variant),
		refusals:  p.refusals.WithLabelValues(service, variant),
	}
	for i := range s.feedback {
		s.feedback[i] = gatedCounter{p.feedback.WithLabelValues(service, variant, Sentiment(i).String()), newExemplarGate(nil)}
	}
	for i := range s.duration {
		s.duration[i] = gatedObserver{p.duration.WithLabelValues(service, variant, Stage(i).String()), newExemplarGate(DurationBuckets)}
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
		p.score, p.topScore, p.tokens, p.feedback, p.duration, p.empty, p.citations, p.refusals} {
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
		s.documents.Observe(float64(o.Documents))
		if o.Documents == 0 {
			s.empty.Add(w)
		}
		if o.Scored {
			s.score.observe(o.MeanScore, ex, now)
			s.topScore.observe(o.TopScore, ex, now)
		}
		if o.Answered {
			s.tokens.Observe(float64(o.AnswerTokens))
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
