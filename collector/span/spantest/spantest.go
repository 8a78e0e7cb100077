// Package spantest holds spans for the tests of the packages that read them.
package spantest

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/collector/span"
)

// SharedKeySpans are spans of every indexed family of shared keys: every field and index, with
// holes, fields repeated, values of every type, next to fixed keys; then every family in one
// span, and a list spelled both shared and unshared.
func SharedKeySpans() []span.Span {
	prefixes := []string{"retrieval.documents.", "reranker.input_documents.", "reranker.output_documents.",
		"llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion."}
	fieldsOf := [][]string{conventions.DocFields, conventions.DocFields, conventions.DocFields, conventions.MsgFields, conventions.MsgFields, conventions.LegacyFields, conventions.LegacyFields}
	values := []span.Value{span.Str("text"), span.Str("user"), span.Str(""), span.Str(`[{"type": "text", "text": "block"}]`), span.Str(" 0.75 "),
		span.Str("assistant"), span.Double(0.5), span.Int(3), span.Bool(true), span.Raw(map[string]any{"route": "faq"}), {}}
	var spans []span.Span
	for p, prefix := range prefixes {
		for _, idx := range [][]int{{0}, {2}, {0, 1, 2, 3, 4}, {15, 3}, {conventions.SharedIndex - 1}} {
			for vi := range values {
				var as []span.Attr
				for _, i := range idx {
					for fi, field := range fieldsOf[p] {
						as = append(as, span.Attr{Key: prefix + strconv.Itoa(i) + "." + field, Value: values[(vi+fi+i)%len(values)]})
					}
				}
				kind := []string{"RETRIEVER", "LLM"}[vi%2]
				as = append(as, span.Attr{Key: as[0].Key, Value: values[(vi+1)%len(values)]}, // read twice: the last wins
					span.Attr{Key: "openinference.span.kind", Value: span.Str(kind)}, span.Attr{Key: "input.value", Value: span.Str("q")})
				spans = append(spans, span.Span{Name: "s", Attrs: as})
			}
		}
	}
	var all []span.Attr
	for _, s := range spans {
		all = append(all, s.Attrs...)
	}
	return append(spans, span.Span{Name: "all", Attrs: all}, span.Span{Name: "mixed", Attrs: []span.Attr{
		{Key: "retrieval.documents.0.document.id", Value: span.Str("a")},
		{Key: "retrieval.documents.01.document.content", Value: span.Str("unshared spelling")},
		{Key: "retrieval.documents.20.document.id", Value: span.Str("beyond the shared indices")},
		{Key: "retrieval.documents.1.document.score", Value: span.Double(0.25)},
		{Key: "llm.input_messages.0.message.role", Value: span.Str("user")},
		{Key: "llm.input_messages.00.message.content", Value: span.Str("unshared spelling")},
		{Key: "llm.input_messages.1.message.contents.0.message_content.text", Value: span.Str("part")},
		{Key: "llm.input_messages.2.message.role", Value: span.Str("system")},
		{Key: "llm.input_messages.2.message.content", Value: span.Str("context")},
	}})
}

// BothSpellings returns s with every key its shared copy (conventions.KeptKey), and with every key a heap
// copy, which readers read by its text.
func BothSpellings(t testing.TB, s span.Span) (shared, text span.Span) {
	shared, text = s, s
	shared.Attrs, text.Attrs = slices.Clone(s.Attrs), slices.Clone(s.Attrs)
	n := 0
	for i := range s.Attrs {
		shared.Attrs[i].Key, _ = conventions.KeptKey(s.Attrs[i].Key)
		text.Attrs[i].Key = strings.Clone(s.Attrs[i].Key)
		if _, ok := conventions.Shared(shared.Attrs[i].Key); ok {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("span %s: no shared key", s.Name)
	}
	return shared, text
}
