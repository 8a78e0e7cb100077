package assemble

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

func TestFeedbackSources(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]any
		evs   []ev
		want  *record.Feedback
	}{
		{"phoenix thumbs down label beats score 0", map[string]any{
			"annotations.0.annotation.label": "thumbs-down", "annotations.0.annotation.score": 0.0,
		}, nil, &record.Feedback{Score: -1}},
		{"score clamped", map[string]any{
			"annotations.0.annotation.name": "stars", "annotations.0.annotation.score": 4,
		}, nil, &record.Feedback{Score: 1}},
		{"human beats plain beats LLM", map[string]any{
			"annotations.0.annotation.label": "correct", "annotations.0.annotation.annotator_kind": "LLM",
			"annotations.1.annotation.score": 0.25,
			"annotations.2.annotation.score": -0.75, "annotations.2.annotation.annotator_kind": "HUMAN",
			"annotations.2.annotation.explanation": "wrong store",
		}, nil, &record.Feedback{Score: -0.75, Comment: "wrong store"}},
		{"evaluations alias is automated", map[string]any{
			"evaluations.0.evaluation.name": "relevance", "evaluations.0.evaluation.label": "irrelevant",
			"evaluations.0.evaluation.explanation": "off topic",
		}, nil, &record.Feedback{Score: -1, Comment: "off topic"}},
		{"genai evaluation event", nil, []ev{{name: "gen_ai.evaluation.result", at: ms(5), attrs: map[string]any{
			"gen_ai.evaluation.name": "faithfulness", "gen_ai.evaluation.score.value": 0.5,
			"gen_ai.evaluation.explanation": "partly supported",
		}}}, &record.Feedback{Score: 0.5, Comment: "partly supported", Time: base.Add(ms(5))}},
		{"rag.feedback number beats annotations", map[string]any{
			"rag.feedback": -1, "annotations.0.annotation.score": 1, "annotations.0.annotation.annotator_kind": "HUMAN",
		}, nil, &record.Feedback{Score: -1}},
		{"rag.feedback bool", map[string]any{"rag.feedback": true}, nil, &record.Feedback{Score: 1}},
		{"rag.feedback numeric string", map[string]any{"rag.feedback": "0.5"}, nil, &record.Feedback{Score: 0.5}},
		{"rag.feedback JSON label", map[string]any{"rag.feedback": `{"label":"👍","comment":"nice"}`}, nil, &record.Feedback{Score: 1, Comment: "nice"}},
		{"unknown label and no score", map[string]any{"annotations.0.annotation.label": "blue"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td := build(t, 1, "s",
				sp{id: 1, name: "turn", end: ms(100), attrs: map[string]any{"rag.query": "q", "rag.answer": "a", "rag.documents": `[{"id":"d"}]`}},
				sp{id: 2, parent: 1, name: "fb", start: ms(1), end: ms(2), attrs: tc.attrs, events: tc.evs},
			)
			res := assembleTD(td)
			if len(res.Records) != 1 {
				t.Fatalf("records: %s", js(res))
			}
			got := res.Records[0].Feedback
			if (got == nil) != (tc.want == nil) || (got != nil && (got.Score != tc.want.Score || got.Comment != tc.want.Comment || !got.Time.Equal(tc.want.Time))) {
				t.Fatalf("feedback %s, want %s", js(got), js(tc.want))
			}
		})
	}
}

// Feedback in a trace with no turn goes to the feedback consumer, addressed to the linked trace.
func TestOrphanFeedback(t *testing.T) {
	td := build(t, 2, "web", sp{id: 1, name: "POST /feedback", kind: ptrace.SpanKindServer, start: 0, end: ms(3), links: []byte{7},
		attrs: map[string]any{"annotations.0.annotation.label": "thumbs_up", "annotations.0.annotation.explanation": "thanks"}})
	res := assembleTD(td)
	if res.RAG || len(res.Records) != 0 {
		t.Fatalf("result %s", js(res))
	}
	want := record.Feedback{TraceID: tidHex(7), Service: "web", Score: 1, Comment: "thanks", Time: base.Add(ms(3))}
	if len(res.Feedback) != 1 || !res.Feedback[0].Time.Equal(want.Time) {
		t.Fatalf("feedback %+v, want %+v", res.Feedback, want)
	}
	if got := res.Feedback[0]; got.TraceID != want.TraceID || got.SpanID != "" || got.Service != want.Service ||
		got.Score != want.Score || got.Comment != want.Comment {
		t.Fatalf("feedback %+v, want %+v", got, want)
	}
}

// Hostile or odd trees: parent cycles, duplicates, missing parents never crash and still give a
// record.
func TestOddTrees(t *testing.T) {
	ret := map[string]any{"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d"}
	llm := map[string]any{"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "a"}
	t.Run("cycle", func(t *testing.T) {
		res := assembleTD(build(t, 1, "s",
			sp{id: 1, parent: 2, name: "x", end: ms(10), attrs: ret},
			sp{id: 2, parent: 1, name: "y", start: ms(1), end: ms(10), attrs: llm},
		))
		if len(res.Records) != 1 || res.Records[0].Answer != "a" || len(res.Records[0].Documents) != 1 {
			t.Fatalf("%s", js(res))
		}
	})
	t.Run("duplicate span", func(t *testing.T) {
		spans := span.FromTraces(build(t, 1, "s", rootSpan(ms(900)), retrieverSpan(), llmSpan(ms(60), ms(800))), nil, nil)
		spans = append(spans, spans...)
		res := Assemble(spans)
		if len(res.Records) != 1 || len(res.Records[0].Documents) != 1 {
			t.Fatalf("%s", js(res))
		}
	})
	t.Run("siblings under a missing parent", func(t *testing.T) {
		res := assembleTD(build(t, 1, "s",
			sp{id: 2, parent: 9, name: "r", start: ms(5), end: ms(10), attrs: ret},
			sp{id: 3, parent: 9, name: "g", start: ms(11), end: ms(30), attrs: llm},
		))
		want := []*record.Record{{TraceID: tidHex(1), SpanID: sidHex(9), Service: "s", Time: base.Add(ms(5)),
			Documents: []record.Document{{ID: "d"}}, Answer: "a",
			Latency: record.Latency{Retrieval: 5, Generation: 19, Total: 25}}}
		sameRecords(t, res.Records, want)
	})
	t.Run("two roots", func(t *testing.T) {
		res := assembleTD(build(t, 1, "s",
			sp{id: 2, name: "r", start: ms(5), end: ms(10), attrs: ret},
			sp{id: 3, name: "g", start: ms(11), end: ms(30), attrs: llm},
		))
		want := []*record.Record{{TraceID: tidHex(1), Service: "s", Time: base.Add(ms(5)),
			Documents: []record.Document{{ID: "d"}}, Answer: "a",
			Latency: record.Latency{Retrieval: 5, Generation: 19, Total: 25}}}
		sameRecords(t, res.Records, want)
	})
	t.Run("generation only", func(t *testing.T) {
		res := assembleTD(build(t, 1, "s", sp{id: 1, name: "chat", end: time.Second, attrs: map[string]any{
			"gen_ai.operation.name": "chat", "gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"hi"}]}]`,
			"gen_ai.input.messages": `[{"role":"user","content":"hello"}]`,
		}}))
		want := []*record.Record{{TraceID: tidHex(1), SpanID: sidHex(1), Service: "s", Time: base, Query: "hello", Answer: "hi",
			Latency: record.Latency{Generation: 1000, Total: 1000}, RetrievalNotSeen: true}}
		sameRecords(t, res.Records, want)
	})
}

// A reranker that reports only its input documents still gives them when nothing else does.
func TestRerankerInputOnly(t *testing.T) {
	res := assembleTD(build(t, 1, "s",
		sp{id: 1, name: "chain", end: ms(100)},
		sp{id: 2, parent: 1, name: "rerank", start: ms(1), end: ms(10), attrs: map[string]any{
			"openinference.span.kind":                     "RERANKER",
			"reranker.input_documents.0.document.id":      "x",
			"reranker.input_documents.0.document.content": "X",
			"reranker.input_documents.1.document.content": "Y",
		}},
		sp{id: 3, parent: 1, name: "llm", start: ms(11), end: ms(90), attrs: map[string]any{
			"openinference.span.kind": "LLM", "llm.choices.0.completion.text": "ok",
		}},
	))
	want := []record.Document{{ID: "x", Content: "X"}, {ID: contentID("Y"), Content: "Y"}}
	if len(res.Records) != 1 || js(res.Records[0].Documents) != js(want) {
		t.Fatalf("%s", js(res.Records))
	}
}
