package span

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/ingest"
)

// TestLimitsCheckPositions pins every rejection message of Limits.check, with the offending
// span away from index 0 at each level, so the position is formatted exactly.
func TestLimitsCheckPositions(t *testing.T) {
	l := Limits{MaxSpansPerRequest: 8, MaxAttributesPerSpan: 3, MaxEventsPerSpan: 2, MaxAttributeValueBytes: 100}.WithDefaults()
	// build returns a valid request of 2 resources × 2 scopes × 2 spans; the span at
	// resource_spans[1].scope_spans[1].spans[1] is passed to edit.
	build := func(edit func(rs ptrace.ResourceSpans, sp ptrace.Span)) ptrace.Traces {
		td := ptrace.NewTraces()
		for i := range 2 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", "svc")
			for j := range 2 {
				spans := rs.ScopeSpans().AppendEmpty().Spans()
				for k := range 2 {
					sp := spans.AppendEmpty()
					sp.SetTraceID(pcommon.TraceID{1, byte(i), byte(j), byte(k)})
					sp.SetSpanID(pcommon.SpanID{1, byte(k)})
					sp.SetName("op")
					sp.Attributes().PutStr("k", "v")
					sp.Events().AppendEmpty().Attributes().PutStr("e", "v")
					sp.Events().AppendEmpty().Attributes().PutStr("e", "v")
					sp.Links().AppendEmpty().Attributes().PutStr("l", "v")
					sp.Links().AppendEmpty().Attributes().PutStr("l", "v")
					if i == 1 && j == 1 && k == 1 && edit != nil {
						edit(rs, sp)
					}
				}
			}
		}
		return td
	}
	const at = "resource_spans[1].scope_spans[1].spans[1]"
	long := strings.Repeat("x", 101)
	tests := []struct {
		name   string
		edit   func(rs ptrace.ResourceSpans, sp ptrace.Span)
		reason string
		msg    string
	}{
		{"valid", nil, "", ""},
		{"zero trace id", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.SetTraceID(pcommon.TraceID{}) },
			ingest.ReasonInvalid, at + ": trace_id must be 16 bytes, not all zero (hex-encoded in OTLP/JSON)"},
		{"zero span id", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.SetSpanID(pcommon.SpanID{}) },
			ingest.ReasonInvalid, at + ": span_id must be 8 bytes, not all zero (hex-encoded in OTLP/JSON)"},
		{"long name", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.SetName(long) },
			ingest.ReasonLimits, at + ": name is 101 bytes, more than the limit of 100"},
		{"too many attributes", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			for _, k := range []string{"a", "b", "c"} {
				sp.Attributes().PutInt(k, 1)
			}
		}, ingest.ReasonLimits, at + ": 4 attributes, more than the limit of 3"},
		{"long key", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Attributes().PutStr(long, "v") },
			ingest.ReasonLimits, at + ": an attribute key is 101 bytes, more than the limit of 100"},
		{"long value", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Attributes().PutStr("doc", long) },
			ingest.ReasonLimits, at + `: attribute "doc" is over 100 bytes, the limit for one value`},
		{"long bytes", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Attributes().PutEmptyBytes("b").FromRaw([]byte(long)) },
			ingest.ReasonLimits, at + `: attribute "b" is over 100 bytes, the limit for one value`},
		{"big array of scalars", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			s := sp.Attributes().PutEmptySlice("ids")
			for range 12 { // 12 × (1 + 8) = 108 bytes
				s.AppendEmpty().SetInt(7)
			}
		}, ingest.ReasonLimits, at + `: attribute "ids" is over 100 bytes, the limit for one value`},
		{"array within the limit", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			s := sp.Attributes().PutEmptySlice("ids")
			for range 11 { // 99 bytes
				s.AppendEmpty().SetInt(7)
			}
		}, "", ""},
		{"big map", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			m := sp.Attributes().PutEmptyMap("meta")
			m.PutStr("source", strings.Repeat("y", 90)) // 6 + 1 + 90
			m.PutBool("ok", true)                       // 2 + 1 + 8
		}, ingest.ReasonLimits, at + `: attribute "meta" is over 100 bytes, the limit for one value`},
		{"long attribute key is truncated in the message", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			sp.Attributes().PutStr(strings.Repeat("k", 70), long)
		}, ingest.ReasonLimits, at + `: attribute "` + strings.Repeat("k", 64) + `..." is over 100 bytes, the limit for one value`},
		{"too many events", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Events().AppendEmpty() },
			ingest.ReasonLimits, at + ": 3 events, more than the limit of 2"},
		{"event attribute", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Events().At(1).Attributes().PutStr("e", long) },
			ingest.ReasonLimits, at + `.events[1]: attribute "e" is over 100 bytes, the limit for one value`},
		{"too many links", func(_ ptrace.ResourceSpans, sp ptrace.Span) { sp.Links().AppendEmpty() },
			ingest.ReasonLimits, at + ": 3 links, more than the limit of 2"},
		{"link attributes", func(_ ptrace.ResourceSpans, sp ptrace.Span) {
			for _, k := range []string{"a", "b", "c"} {
				sp.Links().At(1).Attributes().PutInt(k, 1)
			}
		}, ingest.ReasonLimits, at + ".links[1]: 4 attributes, more than the limit of 3"},
		{"resource attribute", func(rs ptrace.ResourceSpans, _ ptrace.Span) { rs.Resource().Attributes().PutStr("r", long) },
			ingest.ReasonLimits, `resource_spans[1].resource: attribute "r" is over 100 bytes, the limit for one value`},
		{"too many spans", func(rs ptrace.ResourceSpans, _ ptrace.Span) { rs.ScopeSpans().At(0).Spans().AppendEmpty() },
			ingest.ReasonLimits, "request holds 9 spans, more than the limit of 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := build(tt.edit)
			n, rej := l.Check(td)
			if n != td.SpanCount() {
				t.Errorf("spans = %d, want %d", n, td.SpanCount())
			}
			var reason, msg string
			if rej != nil {
				reason, msg = rej.Reason, rej.Msg
			}
			if reason != tt.reason || msg != tt.msg {
				t.Errorf("got %q %q\nwant %q %q", reason, msg, tt.reason, tt.msg)
			}
		})
	}
}
