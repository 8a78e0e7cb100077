package assemble

import (
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Records do not share the scratch's kept arrays: a record's documents and history stay as
// they were when later traces are assembled through the same pool.
func TestRecordsOutliveTheScratch(t *testing.T) {
	trace := func(id byte, doc, q string) []span.Span {
		return span.FromTraces(build(t, id, "svc",
			sp{id: 1, name: "chain", end: ms(30), attrs: map[string]any{"openinference.span.kind": "CHAIN", "input.value": q, "output.value": "answer " + doc}},
			sp{id: 2, parent: 1, name: "retrieve", start: ms(1), end: ms(5), attrs: map[string]any{
				"openinference.span.kind":           "RETRIEVER",
				"retrieval.documents.0.document.id": doc, "retrieval.documents.0.document.content": "text of " + doc,
				"retrieval.documents.1.document.id": doc + "-2", "retrieval.documents.1.document.content": "more of " + doc,
			}},
			sp{id: 3, parent: 1, name: "llm", start: ms(6), end: ms(29), attrs: map[string]any{
				"openinference.span.kind":               "LLM",
				"llm.input_messages.0.message.role":     "user",
				"llm.input_messages.0.message.content":  "earlier " + q,
				"llm.input_messages.1.message.role":     "assistant",
				"llm.input_messages.1.message.content":  "earlier answer",
				"llm.input_messages.2.message.role":     "user",
				"llm.input_messages.2.message.content":  q,
				"llm.output_messages.0.message.role":    "assistant",
				"llm.output_messages.0.message.content": "answer " + doc,
			}},
		), nil, nil)
	}
	first := Assemble(trace(1, "d1", "q1")).Records
	if len(first) != 1 {
		t.Fatalf("%d records", len(first))
	}
	want := js(first[0])
	for i := range 20 {
		Assemble(trace(byte(2+i), "other", "another question"))
	}
	if got := js(first[0]); got != want {
		t.Fatalf("the first record changed when later traces were assembled:\n got %s\nwant %s", got, want)
	}
	if r := first[0]; len(r.Documents) != 2 || r.Documents[0].ID != "d1" || len(r.History) != 2 || r.History[0] != (record.Message{Role: record.RoleUser, Content: "earlier q1"}) {
		t.Fatalf("first record: %s", want)
	}
}
