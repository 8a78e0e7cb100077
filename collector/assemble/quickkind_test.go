package assemble

import (
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
)

// TestQuickKindSameAsByKey checks quickKind, derived from the conventions' table, against a plain
// switch by key (quickKindRef), on every key it reads and near misses, with every value that
// matters, alone and in pairs.
func TestQuickKindSameAsByKey(t *testing.T) {
	keys := []string{"openinference.span.kind", "gen_ai.operation.name", "llm.request.type", "rag.documents",
		"gen_ai.retrieval.documents", "db.vector.query.top_k", "db.vector.query.result_count", "rag.answer",
		"gen_ai.output.messages", "retrieval.documents.0.document.id", "reranker.output_documents.1.document.id",
		"llm.output_messages.0.message.role", "llm.choices.0.text", "gen_ai.completion.0.content",
		"retrieval.documents.", "gen_ai.completion", "llm.choices", "rag.answers", "rag.answe", "db.vector.query",
		"openinference.span.kin", "input.value", "reranker.input_documents.0.document.id", "x", "", "ai.operationId",
		"ai.toolCall.result", "ai.response.text"}
	values := []span.Value{{}, span.Str("RETRIEVER"), span.Str("reranker"), span.Str("LLM"), span.Str("llm"), span.Str("CHAIN"),
		span.Str("retrieval"), span.Str("VECTOR_DB_RETRIEVE"), span.Str("chat"), span.Str("Chat"), span.Str("text_completion"),
		span.Str("generate_content"), span.Str("completion"), span.Str("embeddings"), span.Int(1),
		span.Str("ai.generateText"), span.Str("ai.streamObject.doStream"), span.Str("ai.toolCall"), span.Str("ai.embed"),
		span.Str("ai.generatetext"), span.Str("ai.embedMany.doEmbed")}
	check := func(s *span.Span) {
		t.Helper()
		r1, g1, _ := quickKind(s)
		r2, g2 := quickKindRef(s)
		if r1 != r2 || g1 != g2 {
			t.Fatalf("%+v: quickKind = %v, %v; by key %v, %v", s.Attrs, r1, g1, r2, g2)
		}
	}
	var attrs []span.Attr
	for _, k := range keys {
		for _, v := range values {
			attrs = append(attrs, span.Attr{Key: k, Value: v})
		}
	}
	for i := range attrs {
		check(&span.Span{Attrs: attrs[i : i+1]})
		for j := range attrs {
			check(&span.Span{Attrs: []span.Attr{attrs[i], attrs[j]}})
		}
	}
	check(&span.Span{Attrs: attrs})
	check(&span.Span{Events: []span.Event{{Name: "gen_ai.choice"}}})
	check(&span.Span{Events: []span.Event{{Name: "db.query.result"}}})
}

func quickKindRef(s *span.Span) (ret, gen bool) {
	for i := range s.Attrs {
		k := s.Attrs[i].Key
		switch k {
		case "openinference.span.kind":
			switch strings.ToUpper(s.Attrs[i].Value.Str()) {
			case "RETRIEVER", "RERANKER":
				ret = true
			case "LLM":
				gen = true
			}
		case "gen_ai.operation.name":
			switch strings.ToLower(s.Attrs[i].Value.Str()) {
			case "retrieval", "vector_db_retrieve":
				ret = true
			case "chat", "text_completion", "generate_content", "completion":
				gen = true
			}
		case "llm.request.type": // lower-cased, as facts.Read reads it (since the conventions' table)
			switch strings.ToLower(s.Attrs[i].Value.Str()) {
			case "chat", "completion":
				gen = true
			}
		case "ai.operationId": // as the AI SDK spells it; a tool call may be a retrieval
			switch s.Attrs[i].Value.Str() {
			case "ai.toolCall":
				ret = true
			case "ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject",
				"ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate", "ai.streamObject.doStream":
				gen = true
			}
		case "rag.documents", "gen_ai.retrieval.documents", "db.vector.query.top_k", "db.vector.query.result_count":
			ret = true
		case "rag.answer", "gen_ai.output.messages":
			gen = true
		default:
			under := func(prefix string) bool { return len(k) > len(prefix) && strings.HasPrefix(k, prefix) }
			switch {
			case under("retrieval.documents."), under("reranker.output_documents."):
				ret = true
			case under("llm.output_messages."), under("llm.choices."), under("gen_ai.completion."):
				gen = true
			}
		}
	}
	for i := range s.Events {
		switch s.Events[i].Name {
		case "db.query.result", "db.search.result":
			ret = true
		case "gen_ai.choice", "gen_ai.content.completion":
			gen = true
		}
	}
	return ret, gen
}

// TestSpanCapHint checks the capacity given to a new trace's spans: its run when the request
// carries several of its spans together, else room for the rest of the request up to 8.
func TestSpanCapHint(t *testing.T) {
	a, b := span.Span{TraceID: [16]byte{1}}, span.Span{TraceID: [16]byte{2}}
	for _, c := range []struct {
		spans []span.Span
		want  int
	}{
		{[]span.Span{a}, 1},
		{[]span.Span{a, a}, 2},
		{[]span.Span{a, a, a, a, a, b, b, b, b, b}, 5},
		{[]span.Span{a, b, a, b, a, b}, 6},
		{[]span.Span{a, b, b, b, b, b, b, b, b, b, b}, 8},
		{[]span.Span{a, a, a, a, a, a, a, a, a, a, b}, 8},
		{[]span.Span{a, a, b, a, a}, 2},
	} {
		if got := spanCapHint(c.spans); got != c.want {
			t.Errorf("spanCapHint(%d spans) = %d, want %d", len(c.spans), got, c.want)
		}
	}
}
