package span

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

var (
	logTrace = pcommon.TraceID{1, 2, 3, 15: 4}
	logSpan  = pcommon.SpanID{5, 6, 7, 7: 8}
)

// logsProto encodes the log records fill adds, under a resource of service "rag-app".
func logsProto(t testing.TB, fill func(plog.LogRecordSlice)) []byte {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "rag-app")
	fill(rl.ScopeLogs().AppendEmpty().LogRecords())
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// genAIEvent adds a log record of the span logSpan named name, by event_name or (attr) by the
// event.name attribute, with body set by body.
func genAIEvent(rs plog.LogRecordSlice, name string, attr bool, body func(pcommon.Value)) plog.LogRecord {
	lr := rs.AppendEmpty()
	lr.SetTraceID(logTrace)
	lr.SetSpanID(logSpan)
	lr.SetTimestamp(pcommon.NewTimestampFromTime(time.Unix(1700000000, 0)))
	if attr {
		lr.Attributes().PutStr("event.name", name)
	} else {
		lr.SetEventName(name)
	}
	lr.Attributes().PutStr("gen_ai.system", "openai")
	if body != nil {
		body(lr.Body())
	}
	return lr
}

func TestDecodeLogsGenAIEvents(t *testing.T) {
	b := logsProto(t, func(rs plog.LogRecordSlice) {
		// v1.36 and the OpenTelemetry JS and Python instrumentations: content in the body.
		genAIEvent(rs, "gen_ai.user.message", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", "What is the refund window?")
		})
		genAIEvent(rs, "gen_ai.system.message", true, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", "You answer from the context: ...")
		})
		genAIEvent(rs, "gen_ai.choice", true, func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutInt("index", 0)
			m.PutStr("finish_reason", "stop")
			m.PutEmptyMap("message").PutStr("content", "30 days [1].")
		})
		// Not an event of the conventions: its header is read, nothing else.
		other := rs.AppendEmpty()
		other.SetTraceID(logTrace)
		other.SetSpanID(logSpan)
		other.Body().SetStr("GET /healthz 200")
		// An event without its span.
		genAIEvent(rs, "gen_ai.user.message", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", "orphan")
		}).SetSpanID(pcommon.SpanID{})
	})
	got, c, werr := DecodeLogs(b, Limits{}.WithDefaults(), nil)
	if werr != nil {
		t.Fatal(werr)
	}
	if want := (LogCounts{Records: 5, Events: 2, NoSpan: 1, Unread: 1, Other: 1}); c != want {
		t.Errorf("counts %+v, want %+v", c, want)
	}
	if len(got) != 2 {
		t.Fatalf("%d carriers, want 2", len(got))
	}
	for _, s := range got {
		if !s.EventsOnly || s.TraceID != logTrace || s.SpanID != logSpan || s.Service != "rag-app" || len(s.Events) != 1 {
			t.Fatalf("carrier %+v", s)
		}
		if !s.Events[0].Time.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("event time %v", s.Events[0].Time)
		}
	}
	// The same reader as span events reads them.
	if got[0].Events[0].Name != "gen_ai.user.message" || got[1].Events[0].Name != "gen_ai.choice" {
		t.Fatalf("events %q %q", got[0].Events[0].Name, got[1].Events[0].Name)
	}
	if m := MessageFromEvent(&got[0].Events[0], "user"); m.Role != "user" || m.Text() != "What is the refund window?" {
		t.Errorf("user message %+v", m)
	}
	if m := MessageFromEvent(&got[1].Events[0], "assistant"); m.Text() != "30 days [1]." {
		t.Errorf("choice %+v", m)
	}
	for _, a := range got[1].Events[0].Attrs {
		if a.Key == "event.name" {
			t.Errorf("event.name kept as an attribute")
		}
	}
	ReleaseSpans(got)
}

// v1.37+: the inference details event carries the messages as attributes; only those are kept.
func TestDecodeLogsOperationDetails(t *testing.T) {
	b := logsProto(t, func(rs plog.LogRecordSlice) {
		lr := genAIEvent(rs, "gen_ai.client.inference.operation.details", false, nil)
		lr.Attributes().PutStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"q?"}]}]`)
		lr.Attributes().PutStr("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"a."}]}]`)
		lr.Attributes().PutStr("gen_ai.request.model", "gpt-4o-mini")
	})
	got, c, werr := DecodeLogs(b, Limits{}.WithDefaults(), nil)
	if werr != nil || c.Events != 1 || len(got) != 1 {
		t.Fatalf("%v %+v %d", werr, c, len(got))
	}
	var keys []string
	for _, a := range got[0].Events[0].Attrs {
		keys = append(keys, a.Key)
	}
	if strings.Join(keys, ",") != "gen_ai.input.messages,gen_ai.output.messages" {
		t.Errorf("kept %v", keys)
	}
	ReleaseSpans(got)
}

func TestDecodeLogsRefuses(t *testing.T) {
	lim := Limits{MaxSpansPerRequest: 2, MaxAttributeValueBytes: 64}.WithDefaults()
	three := logsProto(t, func(rs plog.LogRecordSlice) {
		for range 3 {
			rs.AppendEmpty().Body().SetStr("x")
		}
	})
	bigBody := logsProto(t, func(rs plog.LogRecordSlice) {
		genAIEvent(rs, "gen_ai.user.message", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", strings.Repeat("x", 100))
		})
	})
	bigAttr := logsProto(t, func(rs plog.LogRecordSlice) {
		rs.AppendEmpty().Attributes().PutStr("k", strings.Repeat("x", 100))
	})
	bigResource := func() []byte {
		ld := plog.NewLogs()
		ld.ResourceLogs().AppendEmpty().Resource().Attributes().PutStr("k8s.pod.labels", strings.Repeat("x", 100))
		b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	for _, c := range []struct {
		name   string
		b      []byte
		reason string
		msg    string
	}{
		{"records", three, ingest.ReasonLimits, "request holds 3 log records, more than the limit of 2"},
		{"body", bigBody, ingest.ReasonLimits, "resource_logs[0].scope_logs[0].log_records[0]: body is over 64 bytes, the limit for one value"},
		{"attribute", bigAttr, ingest.ReasonLimits, `resource_logs[0].scope_logs[0].log_records[0]: attribute "k" is over 64 bytes, the limit for one value`},
		{"resource attribute", bigResource, ingest.ReasonLimits, "resource_logs[0].resource: an attribute (or its key) is over 64 bytes, the limit for one value"},
		{"malformed", []byte{0x0a, 0x05, 0x01}, ingest.ReasonMalformed, "unexpected EOF"},
		{"wrong wire type", []byte{0x08, 0x01}, ingest.ReasonMalformed, "proto: wrong wireType = 0 for field ResourceLogs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, werr := DecodeLogs(c.b, lim, nil)
			if werr == nil || werr.Reason != c.reason || werr.Msg != c.msg || len(got) != 0 {
				t.Fatalf("got %d carriers, %+v; want %s %q", len(got), werr, c.reason, c.msg)
			}
		})
	}
}

func TestJoinEvents(t *testing.T) {
	b := logsProto(t, func(rs plog.LogRecordSlice) {
		genAIEvent(rs, "gen_ai.choice", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutEmptyMap("message").PutStr("content", "answer")
		})
		genAIEvent(rs, "gen_ai.user.message", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", "lost")
		}).SetSpanID(pcommon.SpanID{9, 7: 9})
	})
	carriers, _, werr := DecodeLogs(b, Limits{}.WithDefaults(), nil)
	if werr != nil || len(carriers) != 2 {
		t.Fatal(werr, len(carriers))
	}
	spans := []Span{
		carriers[0],
		{TraceID: logTrace, SpanID: pcommon.SpanID{1, 7: 1}, Name: "rag"},
		{TraceID: logTrace, SpanID: logSpan, Name: "chat gpt-4o-mini", Events: []Event{{Name: "gen_ai.user.message", Attrs: []Attr{{Key: "content", Value: Str("q")}}}}},
		carriers[1],
	}
	out, joined, orphaned := JoinEvents(spans)
	if joined != 1 || orphaned != 1 || len(out) != 2 {
		t.Fatalf("joined %d orphaned %d, %d spans", joined, orphaned, len(out))
	}
	if out[0].Name != "rag" || out[1].Name != "chat gpt-4o-mini" || len(out[1].Events) != 2 || out[1].Events[1].Name != "gen_ai.choice" {
		t.Fatalf("spans %+v", out)
	}
	if m := MessageFromEvent(&out[1].Events[1], "assistant"); m.Text() != "answer" {
		t.Errorf("joined choice reads %+v", m)
	}
	if spans[2].TraceID != (pcommon.TraceID{}) || spans[3].TraceID != (pcommon.TraceID{}) {
		t.Error("slots past the spans kept")
	}
	ReleaseSpans(out)
}

// FuzzDecodeLogs: any bytes decode or are refused, never a panic; bytes pdata cannot decode are
// refused as malformed.
func FuzzDecodeLogs(f *testing.F) {
	f.Add(logsProto(f, func(rs plog.LogRecordSlice) {
		genAIEvent(rs, "gen_ai.choice", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutEmptyMap("message").PutStr("content", "answer")
		})
		rs.AppendEmpty().Body().SetStr("x")
	}))
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, werr := DecodeLogs(b, Limits{}.WithDefaults(), nil)
		_, perr := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
		if perr != nil && (werr == nil || werr.Reason != ingest.ReasonMalformed) {
			t.Fatalf("pdata: %v; DecodeLogs: %v", perr, werr)
		}
		if perr == nil && werr != nil && werr.Reason == ingest.ReasonMalformed {
			t.Fatalf("pdata decodes it; DecodeLogs: %v", werr)
		}
		ReleaseSpans(got)
	})
}

// BenchmarkDecodeLogs decodes a log export of 50 GenAI turns as the OpenAI instrumentation sends
// them (a system, a user message and a choice each: 100 carriers, 50 system messages dropped)
// and 150 plain log lines of the same app, which cost only their header.
func BenchmarkDecodeLogs(b *testing.B) {
	body := logsProto(b, func(rs plog.LogRecordSlice) {
		for i := range 50 {
			sys := genAIEvent(rs, "gen_ai.system.message", true, func(v pcommon.Value) {
				v.SetEmptyMap().PutStr("content", strings.Repeat("Answer from the context. [doc] Some retrieved text. ", 40))
			})
			user := genAIEvent(rs, "gen_ai.user.message", true, func(v pcommon.Value) {
				v.SetEmptyMap().PutStr("content", "What is the refund window?")
			})
			choice := genAIEvent(rs, "gen_ai.choice", true, func(v pcommon.Value) {
				m := v.SetEmptyMap()
				m.PutStr("finish_reason", "stop")
				m.PutInt("index", 0)
				m.PutEmptyMap("message").PutStr("content", "Refunds are accepted within 30 days of delivery [doc-refunds].")
			})
			for _, lr := range []plog.LogRecord{sys, user, choice} {
				lr.SetTraceID(pcommon.TraceID{byte(i), 15: 1})
			}
			for range 3 {
				lr := rs.AppendEmpty()
				lr.SetTraceID(pcommon.TraceID{byte(i), 15: 1})
				lr.SetSpanID(logSpan)
				lr.SetSeverityText("INFO")
				lr.Body().SetStr("GET /ask 200 in 812 ms")
				lr.Attributes().PutStr("http.route", "/ask")
				lr.Attributes().PutInt("http.status_code", 200)
			}
		}
	})
	lim := Limits{}.WithDefaults()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var dst []Span
	cpu0, n := benchcpu.Now(), 0
	for b.Loop() {
		n++
		var c LogCounts
		var werr *Error
		dst, c, werr = DecodeLogs(body, lim, dst[:0])
		if werr != nil || c.Events != 100 || c.Other != 150 {
			b.Fatal(werr, c)
		}
		ReleaseSpans(dst)
		clear(dst)
	}
	b.ReportMetric(float64(benchcpu.Now()-cpu0)/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(benchcpu.Now()-cpu0)/float64(n)/300, "cpu-ns/record")
}

// The carriers keep nothing of the request's bytes, which the receiver reuses: the strings
// of a kept event are copied (short ones into the arena, long ones on their own), while those
// of a dropped system message are never copied at all.
func TestDecodeLogsKeepsNothingOfTheRequest(t *testing.T) {
	long := strings.Repeat("Refunds are accepted within 30 days of delivery. ", 10)
	b := logsProto(t, func(rs plog.LogRecordSlice) {
		genAIEvent(rs, "gen_ai.system.message", true, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", long)
		})
		genAIEvent(rs, "gen_ai.user.message", true, func(v pcommon.Value) {
			v.SetEmptyMap().PutStr("content", "What is the refund window?")
		})
		genAIEvent(rs, "gen_ai.choice", false, func(v pcommon.Value) {
			v.SetEmptyMap().PutEmptyMap("message").PutStr("content", long)
		})
		genAIEvent(rs, "gen_ai.user.message", false, func(v pcommon.Value) {
			v.SetStr("And the shipping time?") // a body that is not a map
		})
	})
	carriers, c, werr := DecodeLogs(b, Limits{}.WithDefaults(), nil)
	if werr != nil || c.Events != 3 || c.Unread != 1 {
		t.Fatal(werr, c)
	}
	for i := range b {
		b[i] = 'x'
	}
	for i, want := range []string{"What is the refund window?", long, "And the shipping time?"} {
		role := "user"
		if i == 1 {
			role = "assistant"
		}
		if m := MessageFromEvent(&carriers[i].Events[0], role); m.Text() != want {
			t.Errorf("carrier %d reads %q after the request's bytes were reused, want %q", i, m.Text(), want)
		}
	}
	ReleaseSpans(carriers)
}
