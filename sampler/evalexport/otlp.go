package evalexport

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/config"
)

// EventName is the OpenTelemetry GenAI semantic conventions' event of an evaluation result.
const EventName = "gen_ai.evaluation.result"

// Attribute keys of the event: the conventions' own, then ragwatch's.
const (
	AttrEvaluationName   = "gen_ai.evaluation.name"
	AttrScoreValue       = "gen_ai.evaluation.score.value"
	AttrScoreLabel       = "gen_ai.evaluation.score.label"
	AttrExplanation      = "gen_ai.evaluation.explanation"
	AttrResponseID       = "gen_ai.response.id"
	AttrScorer           = "ragwatch.evaluation.scorer"
	AttrModel            = "ragwatch.evaluation.model"
	AttrWeight           = "ragwatch.evaluation.weight"
	AttrMethod           = "ragwatch.evaluation.method"
	AttrJudgeVersion     = "ragwatch.evaluation.judge_version"
	AttrEvaluatorKind    = "ragwatch.evaluator.kind"
	AttrService          = "ragwatch.service"
	AttrVariant          = "ragwatch.variant"
	AttrComparison       = "ragwatch.comparison"
	instrumentationScope = "github.com/ragwatch/ragwatch/sampler/evalexport"
)

// OTLP sends evaluations as `gen_ai.evaluation.result` events (OTLP log records with that
// event name) through the OpenTelemetry Go SDK's OTLP log exporter, gRPC or HTTP. Each event
// carries the trace id and span id of the evaluated turn, so a trace backend shows it on that
// span (on the trace when the record names no span). Batching and the queue bound are the
// Exporter's; retries are the SDK exporter's (network errors and the retryable OTLP codes,
// with backoff, for up to evaluations.retry_for).
type OTLP struct {
	exp     sdklog.Exporter
	logger  otellog.Logger
	collect *collector
	timeout time.Duration
}

// NewOTLP builds the OTLP destination of c (c.OTLP.Endpoint must be set). No connection is
// made until the first export.
func NewOTLP(c config.Evaluations) (*OTLP, error) {
	exp, err := newOTLPExporter(c)
	if err != nil {
		return nil, fmt.Errorf("build OTLP evaluation exporter: %w", err)
	}
	return newOTLPWith(exp, c.Timeout+c.RetryFor), nil
}

func newOTLPExporter(c config.Evaluations) (sdklog.Exporter, error) {
	o := c.OTLP
	endpoint := o.Endpoint.Reveal()
	isURL := strings.Contains(endpoint, "://")
	ctx := context.Background()
	if o.Protocol == "http" {
		opts := []otlploghttp.Option{
			otlploghttp.WithTimeout(c.Timeout),
			otlploghttp.WithRetry(otlploghttp.RetryConfig{
				Enabled: c.RetryFor > 0, InitialInterval: 500 * time.Millisecond, MaxInterval: 5 * time.Second, MaxElapsedTime: c.RetryFor,
			}),
			otlploghttp.WithHeaders(o.RevealHeaders()),
		}
		if isURL {
			opts = append(opts, otlploghttp.WithEndpointURL(endpoint))
			if u, err := url.Parse(endpoint); err == nil && (u.Path == "" || u.Path == "/") {
				opts = append(opts, otlploghttp.WithURLPath("/v1/logs")) // a bare collector URL
			}
		} else {
			opts = append(opts, otlploghttp.WithEndpoint(endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlploghttp.WithInsecure())
		}
		return otlploghttp.New(ctx, opts...)
	}
	opts := []otlploggrpc.Option{
		otlploggrpc.WithTimeout(c.Timeout),
		otlploggrpc.WithRetry(otlploggrpc.RetryConfig{
			Enabled: c.RetryFor > 0, InitialInterval: 500 * time.Millisecond, MaxInterval: 5 * time.Second, MaxElapsedTime: c.RetryFor,
		}),
		otlploggrpc.WithHeaders(o.RevealHeaders()),
	}
	if isURL {
		opts = append(opts, otlploggrpc.WithEndpointURL(endpoint))
	} else {
		opts = append(opts, otlploggrpc.WithEndpoint(endpoint))
	}
	if o.Insecure {
		opts = append(opts, otlploggrpc.WithInsecure())
	}
	return otlploggrpc.New(ctx, opts...)
}

// newOTLPWith sends through exp; each Send is bounded by timeout.
func newOTLPWith(exp sdklog.Exporter, timeout time.Duration) *OTLP {
	c := &collector{}
	provider := sdklog.NewLoggerProvider(
		sdklog.WithProcessor(c),
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "ragwatch"))),
		// The explanation is cut to MaxExplanation bytes before; nothing else is long.
		sdklog.WithAttributeCountLimit(32),
	)
	return &OTLP{exp: exp, logger: provider.Logger(instrumentationScope), collect: c, timeout: timeout}
}

// Name implements Destination.
func (o *OTLP) Name() string { return "otlp" }

// Send implements Destination: one OTLP export request for the batch.
func (o *OTLP) Send(ctx context.Context, batch []Evaluation) error {
	o.collect.records = o.collect.records[:0]
	for i := range batch {
		ev := &batch[i]
		tid, _ := traceID(ev.TraceID) // the Exporter sends only placeable ones
		o.logger.Emit(ctx, Event(ev))
		// The record carries the evaluated span's context, not the caller's.
		r := &o.collect.records[len(o.collect.records)-1]
		r.SetTraceID(tid)
		if sid, ok := spanID(ev.SpanID); ok {
			r.SetSpanID(sid)
			r.SetTraceFlags(trace.FlagsSampled)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	err := o.exp.Export(ctx, o.collect.records)
	clear(o.collect.records) // let the records' attributes go
	return err
}

// Shutdown implements Destination.
func (o *OTLP) Shutdown(ctx context.Context) error { return o.exp.Shutdown(ctx) }

// Event is the log record of one evaluation: the event name, the conventions' attributes and
// ragwatch's. Trace context is set by the caller.
func Event(ev *Evaluation) otellog.Record {
	var r otellog.Record
	r.SetEventName(EventName)
	r.SetTimestamp(ev.Time)
	r.SetSeverity(otellog.SeverityInfo)
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		attribute.String(AttrEvaluationName, ev.Name),
		attribute.Float64(AttrScoreValue, ev.Value),
	)
	if ev.Label != "" {
		attrs = append(attrs, attribute.String(AttrScoreLabel, ev.Label))
	}
	if ev.Explanation != "" {
		attrs = append(attrs, attribute.String(AttrExplanation, ev.Explanation))
	}
	if ev.ResponseID != "" {
		attrs = append(attrs, attribute.String(AttrResponseID, ev.ResponseID))
	}
	attrs = append(attrs,
		attribute.String(AttrScorer, ev.Scorer),
		attribute.String(AttrEvaluatorKind, ev.Kind),
		attribute.Float64(AttrWeight, ev.Weight),
	)
	for _, kv := range []struct{ k, v string }{
		{AttrModel, ev.Model}, {AttrMethod, ev.Method}, {AttrJudgeVersion, ev.JudgeVersion},
		{AttrService, ev.Service}, {AttrVariant, ev.Variant}, {AttrComparison, ev.Comparison},
	} {
		if kv.v != "" {
			attrs = append(attrs, attribute.String(kv.k, kv.v))
		}
	}
	r.AddAttributes(attrs...)
	return r
}

// collector is the provider's one processor: it keeps copies of the records of one Send, which
// then go to the exporter as one request. Only the destination's goroutine emits.
type collector struct {
	records []sdklog.Record
}

func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}

func (c *collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collector) Shutdown(context.Context) error                         { return nil }
func (c *collector) ForceFlush(context.Context) error                       { return nil }
