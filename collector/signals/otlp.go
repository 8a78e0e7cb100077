package signals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/reqsignal"
)

// otlpRecorder records to OpenTelemetry SDK instruments read by a periodic reader that pushes
// to an OTLP endpoint. Recording only updates in-memory aggregates.
type otlpRecorder struct {
	provider *sdkmetric.MeterProvider

	requests  metric.Int64Counter
	documents metric.Int64Histogram
	score     metric.Float64Histogram
	topScore  metric.Float64Histogram
	tokens    metric.Int64Histogram
	feedback  metric.Int64Counter
	duration  metric.Float64Histogram
	empty     metric.Int64Counter
	notSeen   metric.Int64Counter
	citations metric.Int64Histogram
	refusals  metric.Int64Counter

	attrs sync.Map // seriesKey -> *otlpAttrs; bounded by cardinality.ServiceSet and cardinality.VariantSet
}

// otlpAttrs holds one service's prebuilt measurement options so recording does not build
// attribute sets.
type otlpAttrs struct {
	add       []metric.AddOption
	rec       []metric.RecordOption
	stage     [numStages][]metric.RecordOption
	sentiment [numSentiments][]metric.AddOption

	// Exemplar gates of the series that take exemplars (see ExemplarInterval).
	scoreGate, topScoreGate *exemplarGate
	durationGate            [numStages]*exemplarGate
	feedbackGate            [numSentiments]*exemplarGate
}

// countingExporter counts failed exports; the SDK only hands them to the global error handler.
type countingExporter struct {
	sdkmetric.Exporter
	errs   prometheus.Counter
	logger *slog.Logger
}

func (e countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	if err != nil {
		e.errs.Inc()
		e.logger.Warn("OTLP metrics export failed", "err", err)
	}
	return err
}

func newOTLPExporter(ctx context.Context, c config.OTLPMetrics) (sdkmetric.Exporter, error) {
	if c.Timeout <= 0 { // config.Default sets 10s; a hand-built config gets the exporter's default
		c.Timeout = 10 * time.Second
	}
	endpoint := c.Endpoint.Reveal()
	url := strings.Contains(endpoint, "://")
	switch c.Protocol {
	case "grpc":
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithTimeout(c.Timeout)}
		if url {
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(endpoint))
		} else {
			opts = append(opts, otlpmetricgrpc.WithEndpoint(endpoint))
		}
		if c.Insecure {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlpmetricgrpc.WithHeaders(c.RevealHeaders()))
		}
		return otlpmetricgrpc.New(ctx, opts...)
	case "http":
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithTimeout(c.Timeout)}
		if url {
			// A base URL such as http://collector:4318 gets the standard metrics path.
			u := endpoint
			if u2 := strings.TrimSuffix(u, "/"); !strings.Contains(u2[strings.Index(u2, "://")+3:], "/") {
				u = u2 + "/v1/metrics"
			}
			opts = append(opts, otlpmetrichttp.WithEndpointURL(u))
		} else {
			opts = append(opts, otlpmetrichttp.WithEndpoint(endpoint))
		}
		if c.Insecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(c.RevealHeaders()))
		}
		return otlpmetrichttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("protocol must be grpc or http, got %q", c.Protocol)
}

func newOTLPRecorder(ctx context.Context, c config.OTLPMetrics, errs prometheus.Counter, logger *slog.Logger) (*otlpRecorder, error) {
	exp, err := newOTLPExporter(ctx, c)
	if err != nil {
		return nil, err
	}
	var ropts []sdkmetric.PeriodicReaderOption
	if c.Interval > 0 {
		ropts = append(ropts, sdkmetric.WithInterval(c.Interval))
	}
	if c.Timeout > 0 {
		ropts = append(ropts, sdkmetric.WithTimeout(c.Timeout))
	}
	reader := sdkmetric.NewPeriodicReader(countingExporter{exp, errs, logger}, ropts...)
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(reader),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "ragwatch"))),
	)
	r, err := newOTLPInstruments(provider)
	if err != nil {
		return nil, errors.Join(err, provider.Shutdown(ctx))
	}
	return r, nil
}

func newOTLPInstruments(provider *sdkmetric.MeterProvider) (*otlpRecorder, error) {
	m := provider.Meter("github.com/ragwatch/ragwatch/collector/signals")
	r := &otlpRecorder{provider: provider}
	var errs []error
	keep := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	// Every instrument is named, described and bucketed by the signal catalog (reqsignal), as the
	// Prometheus metrics are.
	i64c := func(d *reqsignal.Metric) metric.Int64Counter {
		c, err := m.Int64Counter(d.OTLPName, metric.WithUnit(d.OTLPUnit), metric.WithDescription(d.Help))
		keep(err)
		return c
	}
	i64h := func(d *reqsignal.Metric) metric.Int64Histogram {
		h, err := m.Int64Histogram(d.OTLPName, metric.WithUnit(d.OTLPUnit), metric.WithDescription(d.Help),
			metric.WithExplicitBucketBoundaries(d.Buckets...))
		keep(err)
		return h
	}
	f64h := func(d *reqsignal.Metric) metric.Float64Histogram {
		h, err := m.Float64Histogram(d.OTLPName, metric.WithUnit(d.OTLPUnit), metric.WithDescription(d.Help),
			metric.WithExplicitBucketBoundaries(d.Buckets...))
		keep(err)
		return h
	}
	r.requests = i64c(&reqsignal.MetricRequests)
	r.documents = i64h(&reqsignal.MetricDocuments)
	r.score = f64h(&reqsignal.MetricScore)
	r.topScore = f64h(&reqsignal.MetricTopScore)
	r.tokens = i64h(&reqsignal.MetricTokens)
	r.feedback = i64c(&reqsignal.MetricFeedback)
	r.duration = f64h(&reqsignal.MetricDuration)
	r.empty = i64c(&reqsignal.MetricEmpty)
	r.notSeen = i64c(&reqsignal.MetricNotSeen)
	r.citations = i64h(&reqsignal.MetricCitations)
	r.refusals = i64c(&reqsignal.MetricRefusals)
	if len(errs) > 0 {
		return nil, fmt.Errorf("create OTLP instruments: %w", errors.Join(errs...))
	}
	return r, nil
}

// forget drops the cached attribute set of an evicted service label. The OTel SDK keeps the
// label's cumulative series until the process ends: it has no way to delete one.
func (r *otlpRecorder) forget(service string) {
	deleteKeys(&r.attrs, func(k seriesKey) bool { return k.service == service })
}

// forgetVariant drops the cached attribute sets of an evicted variant label.
func (r *otlpRecorder) forgetVariant(variant string) {
	deleteKeys(&r.attrs, func(k seriesKey) bool { return k.variant == variant })
}

func (r *otlpRecorder) attrsFor(service, variant string) *otlpAttrs {
	key := seriesKey{service, variant}
	if a, ok := r.attrs.Load(key); ok {
		return a.(*otlpAttrs)
	}
	base := []attribute.KeyValue{attribute.String("service", service)}
	if variant != "" {
		base = append(base, attribute.String("variant", variant))
	}
	with := func(kv attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), kv)...)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(base...))
	a := &otlpAttrs{
		add:          []metric.AddOption{opt},
		rec:          []metric.RecordOption{opt},
		scoreGate:    newExemplarGate(reqsignal.ScoreBuckets),
		topScoreGate: newExemplarGate(reqsignal.ScoreBuckets),
	}
	for i := range a.stage {
		a.stage[i] = []metric.RecordOption{metric.WithAttributeSet(with(attribute.String("stage", reqsignal.LatencyStage(i).String())))}
		a.durationGate[i] = newExemplarGate(reqsignal.DurationBuckets)
	}
	for i := range a.sentiment {
		a.sentiment[i] = []metric.AddOption{metric.WithAttributeSet(with(attribute.String("sentiment", Sentiment(i).String())))}
		a.feedbackGate[i] = newExemplarGate(nil)
	}
	actual, _ := r.attrs.LoadOrStore(key, a)
	return actual.(*otlpAttrs)
}

// exemplarContext carries the record's trace (and span) as a sampled span context, so the
// SDK's trace-based exemplar filter attaches them to the measurement.
func exemplarContext(ctx context.Context, traceID, spanID string) context.Context {
	if len(traceID) != 32 {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	cfg := trace.SpanContextConfig{TraceID: tid, TraceFlags: trace.FlagsSampled}
	if len(spanID) == 16 {
		if sid, err := trace.SpanIDFromHex(spanID); err == nil {
			cfg.SpanID = sid
		}
	}
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
}

// exemplarCtx hands out the context that carries the record's trace, built at most once per
// record and only when a gate lets an exemplar through; otherwise the plain context, which the
// SDK's trace-based exemplar filter passes over.
type exemplarCtx struct {
	ctx, xctx       context.Context
	now             int64
	traceID, spanID string
}

func (e *exemplarCtx) get(g *exemplarGate, v float64) context.Context {
	if e.now == 0 || !g.allow(v, e.now) {
		return e.ctx
	}
	if e.xctx == nil {
		e.xctx = exemplarContext(e.ctx, e.traceID, e.spanID)
	}
	return e.xctx
}

// Record implements Recorder. As with Prometheus, only the duration, score and feedback
// instruments take the trace as an exemplar, through the same per-bucket gates; the counts of
// requests, documents, tokens and citations gain nothing from one.
func (r *otlpRecorder) Record(ctx context.Context, o Observation) {
	a := r.attrsFor(o.Service, o.Variant)
	ex := exemplarCtx{ctx: ctx, now: o.now, traceID: o.TraceID, spanID: o.SpanID}
	if o.Request {
		r.requests.Add(ctx, 1, a.add...)
		switch {
		case !o.Retrieved:
			r.notSeen.Add(ctx, 1, a.add...)
		case o.Documents == 0:
			r.documents.Record(ctx, 0, a.rec...)
			r.empty.Add(ctx, 1, a.add...)
		default:
			r.documents.Record(ctx, int64(o.Documents), a.rec...)
		}
		if o.Scored {
			r.score.Record(ex.get(a.scoreGate, o.MeanScore), o.MeanScore, a.rec...)
			r.topScore.Record(ex.get(a.topScoreGate, o.TopScore), o.TopScore, a.rec...)
		}
		if o.Answered {
			r.tokens.Record(ctx, o.AnswerTokens, a.rec...)
		}
		if o.CitationsKnown {
			r.citations.Record(ctx, int64(o.Citations), a.rec...)
		}
		if o.Refusal {
			r.refusals.Add(ctx, 1, a.add...)
		}
		for i, ms := range o.LatencyMS {
			if ms > 0 {
				v := ms / 1000
				r.duration.Record(ex.get(a.durationGate[i], v), v, a.stage[i]...)
			}
		}
	}
	if o.HasFeedback {
		r.feedback.Add(ex.get(a.feedbackGate[o.Sentiment], 0), 1, a.sentiment[o.Sentiment]...)
	}
}

// Shutdown implements Recorder: the provider collects and exports one last time.
func (r *otlpRecorder) Shutdown(ctx context.Context) error {
	if err := r.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down OTLP metrics: %w", err)
	}
	return nil
}
