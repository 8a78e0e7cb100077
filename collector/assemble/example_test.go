package assemble_test

import (
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/span"
)

// Assemble works without timers: read the spans of one trace and get its records.
func ExampleAssemble() {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	add := func(id, parent byte, from, to time.Duration, attrs map[string]any) {
		s := spans.AppendEmpty()
		s.SetTraceID(pcommon.TraceID{0x4b, 15: 1})
		s.SetSpanID(pcommon.SpanID{7: id})
		if parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{7: parent})
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(from)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(to)))
		_ = s.Attributes().FromRaw(attrs)
	}
	add(1, 0, 0, 900*time.Millisecond, map[string]any{"openinference.span.kind": "CHAIN", "input.value": "Reset my password?"})
	add(2, 1, 5*time.Millisecond, 40*time.Millisecond, map[string]any{
		"openinference.span.kind":                "RETRIEVER",
		"retrieval.documents.0.document.id":      "kb-7",
		"retrieval.documents.0.document.score":   0.82,
		"retrieval.documents.0.document.content": "Open Settings, then Security.",
	})
	add(3, 1, 50*time.Millisecond, 880*time.Millisecond, map[string]any{
		"openinference.span.kind":               "LLM",
		"llm.model_name":                        "gpt-4o-mini",
		"llm.output_messages.0.message.role":    "assistant",
		"llm.output_messages.0.message.content": "Open Settings, then Security [1].",
	})

	res := assemble.Assemble(span.FromTraces(td, nil, nil))
	out, _ := json.Marshal(res.Records[0])
	fmt.Println(string(out))
	// Output:
	// {"trace_id":"4b000000000000000000000000000001","span_id":"0000000000000001","service":"support-bot","time":"2026-11-29T12:00:00Z","query":"Reset my password?","documents":[{"id":"kb-7","score":0.82,"content":"Open Settings, then Security."}],"answer":"Open Settings, then Security [1].","citations":[{"text":"Open Settings, then Security.","document_ids":["kb-7"]}],"model":"gpt-4o-mini","usage":{},"latency_ms":{"retrieval":35,"generation":830,"total":900}}
}
