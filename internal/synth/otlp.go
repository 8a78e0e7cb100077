package synth

import (
	"context"
	"encoding/binary"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span names and OpenInference keys the synthetic app reports.
const (
	kindKey = "openinference.span.kind"
	// FeatureFlagEvent and FeatureFlagKey report a turn's variant: the OpenTelemetry
	// feature-flag evaluation event of the flag that picked the prompt.
	FeatureFlagEvent = "feature_flag.evaluation"
	FeatureFlagKey   = "prompt"
)

// AppendTraces adds t as a three-span OpenInference trace (CHAIN root, RETRIEVER, LLM) to td,
// in one ResourceSpans per call (without the root when t.NoRoot). The span ids derive from the
// trace id.
func AppendTraces(td ptrace.Traces, t *Turn) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", t.Service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("ragwatch-synth")
	tid := pcommon.TraceID(t.TraceID)
	root, ret, llm := spanIDs(t.TraceID)

	start := pcommon.NewTimestampFromTime(t.Start)
	if !t.NoRoot {
		chain := ss.Spans().AppendEmpty()
		chain.SetTraceID(tid)
		chain.SetSpanID(root)
		chain.SetName("rag.pipeline")
		chain.SetKind(ptrace.SpanKindServer)
		chain.SetStartTimestamp(start)
		chain.SetEndTimestamp(pcommon.NewTimestampFromTime(t.Start.Add(t.Total)))
		a := chain.Attributes()
		a.PutStr(kindKey, "CHAIN")
		a.PutStr("input.value", t.Query)
		a.PutStr("output.value", t.Answer)
		a.PutStr("session.id", t.SessionID)
		a.PutStr("user.id", t.UserID)
		a.PutStr("metadata", `{"route":"`+t.Route+`"}`)
		if t.Variant != "" {
			ev := chain.Events().AppendEmpty()
			ev.SetName(FeatureFlagEvent)
			ev.SetTimestamp(start)
			ev.Attributes().PutStr("feature_flag.key", FeatureFlagKey)
			ev.Attributes().PutStr("feature_flag.result.variant", t.Variant)
		}
	}

	rsp := ss.Spans().AppendEmpty()
	rsp.SetTraceID(tid)
	rsp.SetSpanID(ret)
	rsp.SetParentSpanID(root)
	rsp.SetName("retrieve")
	rsp.SetStartTimestamp(start)
	rsp.SetEndTimestamp(pcommon.NewTimestampFromTime(t.Start.Add(t.Retrieval)))
	a := rsp.Attributes()
	a.PutStr(kindKey, "RETRIEVER")
	a.PutStr("input.value", t.Query)
	for i, d := range t.Documents {
		p := "retrieval.documents." + strconv.Itoa(i) + ".document."
		a.PutStr(p+"id", d.ID)
		a.PutDouble(p+"score", d.Score)
		a.PutStr(p+"content", d.Content)
	}

	for i := 0; i < t.ExtraSpans; i++ {
		x := ss.Spans().AppendEmpty()
		x.SetTraceID(tid)
		var id pcommon.SpanID
		binary.BigEndian.PutUint64(id[:], binary.BigEndian.Uint64(root[:])^uint64(0x3333333333333333+i))
		x.SetSpanID(id)
		x.SetParentSpanID(root)
		x.SetName("chain.step")
		x.SetStartTimestamp(start)
		x.SetEndTimestamp(pcommon.NewTimestampFromTime(t.Start.Add(t.Total)))
		x.Attributes().PutStr(kindKey, "CHAIN")
	}

	lsp := ss.Spans().AppendEmpty()
	lsp.SetTraceID(tid)
	lsp.SetSpanID(llm)
	lsp.SetParentSpanID(root)
	lsp.SetName("llm")
	genStart := t.Start.Add(t.Retrieval)
	lsp.SetStartTimestamp(pcommon.NewTimestampFromTime(genStart))
	lsp.SetEndTimestamp(pcommon.NewTimestampFromTime(genStart.Add(t.Generation)))
	a = lsp.Attributes()
	a.PutStr(kindKey, "LLM")
	a.PutStr("llm.model_name", t.Model)
	a.PutStr("llm.input_messages.0.message.role", "system")
	a.PutStr("llm.input_messages.0.message.content", systemPrompt)
	a.PutStr("llm.input_messages.1.message.role", "user")
	a.PutStr("llm.input_messages.1.message.content", t.Query)
	a.PutStr("llm.output_messages.0.message.role", "assistant")
	a.PutStr("llm.output_messages.0.message.content", t.Answer)
	a.PutInt("llm.token_count.prompt", int64(t.InputTokens))
	a.PutInt("llm.token_count.completion", int64(t.OutputTokens))
	a.PutInt("llm.token_count.total", int64(t.InputTokens+t.OutputTokens))
}

const systemPrompt = "Answer from the numbered documents only and cite them as [n]."

func spanIDs(tid [16]byte) (root, ret, llm pcommon.SpanID) {
	base := binary.BigEndian.Uint64(tid[8:]) | 1
	binary.BigEndian.PutUint64(root[:], base)
	binary.BigEndian.PutUint64(ret[:], base^0x1111111111111111)
	binary.BigEndian.PutUint64(llm[:], base^0x2222222222222222)
	return root, ret, llm
}

// Emit records t through an OpenTelemetry SDK tracer, exactly as an OpenInference-instrumented
// app would, with the turn's own timestamps. The tracer provider must use an id generator that
// honours the trace id in ctx (see IDGenerator) for t.TraceID to be kept; otherwise the SDK
// picks its own.
func Emit(ctx context.Context, tracer trace.Tracer, t *Turn) trace.SpanContext {
	ctx = withTraceID(ctx, t.TraceID)
	ctx, root := tracer.Start(ctx, "rag.pipeline", trace.WithTimestamp(t.Start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String(kindKey, "CHAIN"),
			attribute.String("input.value", t.Query),
			attribute.String("output.value", t.Answer),
			attribute.String("session.id", t.SessionID),
			attribute.String("user.id", t.UserID),
			attribute.String("metadata", `{"route":"`+t.Route+`"}`),
		))
	if t.Variant != "" {
		root.AddEvent(FeatureFlagEvent, trace.WithTimestamp(t.Start), trace.WithAttributes(
			attribute.String("feature_flag.key", FeatureFlagKey),
			attribute.String("feature_flag.result.variant", t.Variant)))
	}
	attrs := make([]attribute.KeyValue, 0, 2+3*len(t.Documents))
	attrs = append(attrs, attribute.String(kindKey, "RETRIEVER"), attribute.String("input.value", t.Query))
	for i, d := range t.Documents {
		p := "retrieval.documents." + strconv.Itoa(i) + ".document."
		attrs = append(attrs,
			attribute.String(p+"id", d.ID),
			attribute.Float64(p+"score", d.Score),
			attribute.String(p+"content", d.Content))
	}
	_, rsp := tracer.Start(ctx, "retrieve", trace.WithTimestamp(t.Start), trace.WithAttributes(attrs...))
	rsp.End(trace.WithTimestamp(t.Start.Add(t.Retrieval)))

	genStart := t.Start.Add(t.Retrieval)
	_, lsp := tracer.Start(ctx, "llm", trace.WithTimestamp(genStart), trace.WithAttributes(
		attribute.String(kindKey, "LLM"),
		attribute.String("llm.model_name", t.Model),
		attribute.String("llm.input_messages.0.message.role", "system"),
		attribute.String("llm.input_messages.0.message.content", systemPrompt),
		attribute.String("llm.input_messages.1.message.role", "user"),
		attribute.String("llm.input_messages.1.message.content", t.Query),
		attribute.String("llm.output_messages.0.message.role", "assistant"),
		attribute.String("llm.output_messages.0.message.content", t.Answer),
		attribute.Int("llm.token_count.prompt", t.InputTokens),
		attribute.Int("llm.token_count.completion", t.OutputTokens),
		attribute.Int("llm.token_count.total", t.InputTokens+t.OutputTokens),
	))
	lsp.End(trace.WithTimestamp(genStart.Add(t.Generation)))
	sc := root.SpanContext()
	root.End(trace.WithTimestamp(t.Start.Add(t.Total)))
	return sc
}

// Scope of the GenAI events AppendLogs writes: the OpenTelemetry OpenAI instrumentation for
// Node, whose recorded export is cmd/ragwatch/internal/service/testdata/genai-openai-node.
const (
	genAIScope        = "@opentelemetry/instrumentation-openai"
	genAIScopeVersion = "0.20.0"
)

// AppendLogs adds to ld, in one ResourceLogs per call, the GenAI events an app instrumented by
// the OpenTelemetry OpenAI instrumentation with content capture emits for t's generation, in
// the shape of its recorded export (testdata/genai-openai-node): gen_ai.system.message,
// gen_ai.user.message and gen_ai.choice log records named by the event.name attribute, content
// in the body, with the trace id and span id of t's LLM span (the one AppendTraces writes). It
// returns the number of log records added.
func AppendLogs(ld plog.Logs, t *Turn) int {
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", t.Service)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(genAIScope)
	sl.Scope().SetVersion(genAIScopeVersion)
	_, _, llm := spanIDs(t.TraceID)
	genStart := pcommon.NewTimestampFromTime(t.Start.Add(t.Retrieval))
	genEnd := pcommon.NewTimestampFromTime(t.Start.Add(t.Retrieval + t.Generation))
	event := func(name string, at pcommon.Timestamp) pcommon.Map {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(at)
		lr.SetObservedTimestamp(at)
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetFlags(plog.DefaultLogRecordFlags.WithIsSampled(true))
		lr.SetTraceID(pcommon.TraceID(t.TraceID))
		lr.SetSpanID(llm)
		lr.Attributes().PutStr("event.name", name)
		lr.Attributes().PutStr("gen_ai.system", "openai")
		return lr.Body().SetEmptyMap()
	}
	event("gen_ai.system.message", genStart).PutStr("content", systemPrompt)
	event("gen_ai.user.message", genStart).PutStr("content", t.Query)
	choice := event("gen_ai.choice", genEnd)
	choice.PutStr("finish_reason", "stop")
	choice.PutInt("index", 0)
	choice.PutEmptyMap("message").PutStr("content", t.Answer)
	return sl.LogRecords().Len()
}
