package assemble

import (
	"strings"
	"testing"
)

// TestQuickKindSameAsByKey checks quickKind's first-byte dispatch against the plain switch by key
// it replaced (quickKindRef), on every key it reads and near misses, with every value that
// matters, alone and in pairs.
func TestQuickKindSameAsByKey(t *testing.T) {
	keys := []string{"openinference.span.kind", "gen_ai.operation.name", "llm.request.type", "rag.documents",
		"gen_ai.retrieval.documents", "db.vector.query.top_k", "db.vector.query.result_count", "rag.answer",
		"gen_ai.output.messages", "retrieval.documents.0.document.id", "reranker.output_documents.1.document.id",
		"llm.output_messages.0.message.role", "llm.choices.0.text", "gen_ai.completion.0.content",
		"retrieval.documents.", "gen_ai.completion", "llm.choices", "rag.answers", "rag.answe", "db.vector.query",
		"openinference.span.kin", "input.value", "reranker.input_documents.0.document.id", "x", ""}
	values := []Value{{}, Str("RETRIEVER"), Str("reranker"), Str("LLM"), Str("llm"), Str("CHAIN"),
		Str("retrieval"), Str("VECTOR_DB_RETRIEVE"), Str("chat"), Str("Chat"), Str("text_completion"),
		Str("generate_content"), Str("completion"), Str("embeddings"), Int(1)}
	check := func(s *Span) {
		t.Helper()
		r1, g1 := quickKind(s)
		r2, g2 := quickKindRef(s)
		if r1 != r2 || g1 != g2 {
			t.Fatalf("%+v: quickKind = %v, %v; by key %v, %v", s.Attrs, r1, g1, r2, g2)
		}
	}
	var attrs []Attr
	for _, k := range keys {
		for _, v := range values {
			attrs = append(attrs, Attr{Key: k, Value: v})
		}
	}
	for i := range attrs {
		check(&Span{Attrs: attrs[i : i+1]})
		for j := range attrs {
			check(&Span{Attrs: []Attr{attrs[i], attrs[j]}})
		}
	}
	check(&Span{Attrs: attrs})
	check(&Span{Events: []Event{{Name: "gen_ai.choice"}}})
	check(&Span{Events: []Event{{Name: "db.query.result"}}})
}

func quickKindRef(s *Span) (ret, gen bool) {
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
		case "llm.request.type":
			switch s.Attrs[i].Value.Str() {
			case "chat", "completion":
				gen = true
			}
		case "rag.documents", "gen_ai.retrieval.documents", "db.vector.query.top_k", "db.vector.query.result_count":
			ret = true
		case "rag.answer", "gen_ai.output.messages":
			gen = true
		default:
			switch {
			case strings.HasPrefix(k, "retrieval.documents."), strings.HasPrefix(k, "reranker.output_documents."):
				ret = true
			case strings.HasPrefix(k, "llm.output_messages."), strings.HasPrefix(k, "llm.choices."),
				strings.HasPrefix(k, "gen_ai.completion."):
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
	a, b := Span{TraceID: [16]byte{1}}, Span{TraceID: [16]byte{2}}
	for _, c := range []struct {
		spans []Span
		want  int
	}{
		{[]Span{a}, 1},
		{[]Span{a, a}, 2},
		{[]Span{a, a, a, a, a, b, b, b, b, b}, 5},
		{[]Span{a, b, a, b, a, b}, 6},
		{[]Span{a, b, b, b, b, b, b, b, b, b, b}, 8},
		{[]Span{a, a, a, a, a, a, a, a, a, a, b}, 8},
		{[]Span{a, a, b, a, a}, 2},
	} {
		if got := spanCapHint(c.spans); got != c.want {
			t.Errorf("spanCapHint(%d spans) = %d, want %d", len(c.spans), got, c.want)
		}
	}
}
