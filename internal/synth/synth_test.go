package synth

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestGeneratorIsReproducibleAndHealthyAnswersAreSupported(t *testing.T) {
	a, b := New(Options{Seed: 7}), New(Options{Seed: 7})
	for i := 0; i < 200; i++ {
		x, y := a.Next(t0), b.Next(t0)
		if x.TraceID != y.TraceID || x.Answer != y.Answer || x.Query != y.Query {
			t.Fatalf("turn %d differs between generators with the same seed", i)
		}
		if len(x.Documents) != 5 {
			t.Fatalf("documents = %d, want 5", len(x.Documents))
		}
		for j := 1; j < len(x.Documents); j++ {
			if x.Documents[j].Score > x.Documents[j-1].Score {
				t.Fatalf("documents not sorted by score: %+v", x.Documents)
			}
		}
		// The cited document holds the answer's sentence.
		claim := strings.TrimSuffix(x.Answer[:strings.LastIndexByte(x.Answer, '[')], " ")
		pos := int(x.Answer[strings.LastIndexByte(x.Answer, '[')+1] - '0')
		if !strings.Contains(x.Documents[pos-1].Content, claim) {
			t.Fatalf("healthy turn cites [%d] %s which lacks %q", pos, x.Documents[pos-1].ID, claim)
		}
		if x.Documents[0].Score < 0.45 {
			t.Fatalf("healthy top score %.2f too low", x.Documents[0].Score)
		}
	}
}

func TestDegradedTurnsCiteUnsupportingDocuments(t *testing.T) {
	g := New(Options{Seed: 3})
	g.SetDegraded(true)
	for i := 0; i < 100; i++ {
		x := g.Next(t0)
		if !x.Degraded {
			t.Fatal("turn not marked degraded")
		}
		claim := strings.TrimSuffix(x.Answer[:strings.LastIndexByte(x.Answer, '[')], " ")
		for _, d := range x.Documents {
			if d.Score > 0.37 {
				t.Fatalf("degraded score %.2f, want < 0.37", d.Score)
			}
			if strings.Contains(d.Content, claim) {
				t.Fatalf("degraded turn retrieved the supporting document %s", d.ID)
			}
		}
	}
}

func TestDocumentSize(t *testing.T) {
	g := New(Options{Seed: 1, DocBytes: 1024})
	for _, id := range g.ids {
		if n := len(g.content[id]); n < 900 || n > 1024 {
			t.Errorf("%s: %d bytes, want about 1 KB", id, n)
		}
	}
}

func TestEmitThroughSDKKeepsTraceIDAndShape(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(IDGenerator{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	turn := New(Options{Seed: 9}).Next(t0)
	Emit(context.Background(), tp.Tracer("test"), &turn)
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("spans = %d, want 3", len(spans))
	}
	kinds := map[string]string{}
	for _, s := range spans {
		if [16]byte(s.SpanContext().TraceID()) != turn.TraceID {
			t.Fatalf("trace id %s, want %x", s.SpanContext().TraceID(), turn.TraceID)
		}
		for _, kv := range s.Attributes() {
			if kv.Key == kindKey {
				kinds[s.Name()] = kv.Value.AsString()
			}
		}
	}
	want := map[string]string{"rag.pipeline": "CHAIN", "retrieve": "RETRIEVER", "llm": "LLM"}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("span %s kind %q, want %q", k, kinds[k], v)
		}
	}
	if got := spans[0].EndTime().Sub(spans[0].StartTime()); got != turn.Retrieval {
		t.Errorf("retriever duration %s, want %s", got, turn.Retrieval)
	}
}

func TestAppendTraces(t *testing.T) {
	td := ptrace.NewTraces()
	turn := New(Options{Seed: 2}).Next(t0)
	AppendTraces(td, &turn)
	if td.SpanCount() != 3 {
		t.Fatalf("spans = %d", td.SpanCount())
	}
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	if sp.At(1).ParentSpanID() != sp.At(0).SpanID() || sp.At(2).ParentSpanID() != sp.At(0).SpanID() {
		t.Fatal("children do not point at the root")
	}
	if v, _ := sp.At(1).Attributes().Get("retrieval.documents.4.document.id"); v.Str() != turn.Documents[4].ID {
		t.Errorf("document 4 id %q, want %q", v.Str(), turn.Documents[4].ID)
	}
}

func TestAppendTracesWithoutRoot(t *testing.T) {
	td := ptrace.NewTraces()
	turn := New(Options{Seed: 2, Spans: 5, NoRoot: true}).Next(t0)
	if !turn.NoRoot {
		t.Fatal("turn.NoRoot = false with Options.NoRoot")
	}
	AppendTraces(td, &turn)
	if td.SpanCount() != 4 {
		t.Fatalf("spans = %d, want 4 (5 without the root)", td.SpanCount())
	}
	root, _, _ := spanIDs(turn.TraceID)
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < sp.Len(); i++ {
		if sp.At(i).SpanID() == root {
			t.Fatalf("span %d is the root", i)
		}
		if sp.At(i).ParentSpanID() != root {
			t.Fatalf("span %d (%s) parent %s, want the missing root %s", i, sp.At(i).Name(), sp.At(i).ParentSpanID(), root)
		}
	}
}

// shape is what a log record looks like, without its values: its scope, event name, severity,
// flags, attribute keys and body keys (nested maps as key{...}), whether it names a span.
func shape(sl plog.ScopeLogs, lr plog.LogRecord) string {
	var keys func(m pcommon.Map) string
	keys = func(m pcommon.Map) string {
		var out []string
		m.Range(func(k string, v pcommon.Value) bool {
			if v.Type() == pcommon.ValueTypeMap {
				k += "{" + keys(v.Map()) + "}"
			}
			out = append(out, k)
			return true
		})
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	name, _ := lr.Attributes().Get("event.name")
	body := "not a map"
	if lr.Body().Type() == pcommon.ValueTypeMap {
		body = keys(lr.Body().Map())
	}
	return fmt.Sprintf("%s %s %s sev=%d flags=%d attrs=%s body=%s span=%v", sl.Scope().Name(), sl.Scope().Version(),
		name.Str(), lr.SeverityNumber(), lr.Flags(), keys(lr.Attributes()), body, !lr.TraceID().IsEmpty() && !lr.SpanID().IsEmpty())
}

// AppendLogs writes the records of the recorded export of the OpenAI instrumentation
// (cmd/ragwatch/internal/service/testdata/genai-openai-node), record for record in shape, on
// the LLM span AppendTraces writes, with the turn's prompt, question and answer.
func TestAppendLogsHasTheShapeOfTheRecordedInstrumentation(t *testing.T) {
	b, err := os.ReadFile("../../cmd/ragwatch/internal/service/testdata/genai-openai-node/001-logs.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
	if err != nil {
		t.Fatal(err)
	}
	sl := rec.ResourceLogs().At(0).ScopeLogs().At(0)
	var want []string
	for i := range 3 { // one generation: system message, user message, choice
		want = append(want, shape(sl, sl.LogRecords().At(i)))
	}

	turn := New(Options{Seed: 5}).Next(t0)
	ld := plog.NewLogs()
	if n := AppendLogs(ld, &turn); n != 3 {
		t.Fatalf("AppendLogs added %d records, want 3", n)
	}
	got := ld.ResourceLogs().At(0).ScopeLogs().At(0)
	for i := range 3 {
		if s := shape(got, got.LogRecords().At(i)); s != want[i] {
			t.Errorf("record %d:\n got  %s\n want %s", i, s, want[i])
		}
	}
	td := ptrace.NewTraces()
	AppendTraces(td, &turn)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	llm := spans.At(spans.Len() - 1)
	for i := range 3 {
		lr := got.LogRecords().At(i)
		if lr.TraceID() != llm.TraceID() || lr.SpanID() != llm.SpanID() || llm.Name() != "llm" {
			t.Errorf("record %d names span %s of trace %s, want the LLM span %s", i, lr.SpanID(), lr.TraceID(), llm.SpanID())
		}
	}
	text := func(i int, path ...string) string {
		v := got.LogRecords().At(i).Body()
		for _, k := range path {
			v, _ = v.Map().Get(k)
		}
		return v.Str()
	}
	if text(0, "content") != systemPrompt || text(1, "content") != turn.Query || text(2, "message", "content") != turn.Answer {
		t.Errorf("contents %q, %q, %q; want the prompt, the question and the answer", text(0, "content"), text(1, "content"), text(2, "message", "content"))
	}
}
