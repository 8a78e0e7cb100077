package synth

import (
	"context"
	"strings"
	"testing"
	"time"

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
