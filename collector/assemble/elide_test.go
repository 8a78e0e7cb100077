package assemble

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// elideSpans is a turn whose retriever names documents with and without ids, and one beyond
// the shared keys' indices.
func elideSpans() []sp {
	return []sp{rootSpan(ms(100)), {id: 2, parent: 1, name: "retriever", start: ms(10), end: ms(50), attrs: map[string]any{
		"openinference.span.kind":                 "RETRIEVER",
		"retrieval.documents.0.document.id":       "d0",
		"retrieval.documents.0.document.score":    0.9,
		"retrieval.documents.0.document.content":  strings.Repeat("the first passage ", 50),
		"retrieval.documents.1.document.content":  "without an id: its id is a hash of this text",
		"retrieval.documents.2.document.id":       "",
		"retrieval.documents.2.document.content":  "an empty id: the same",
		"retrieval.documents.3.document.id":       int64(7),
		"retrieval.documents.3.document.content":  "a number for an id",
		"retrieval.documents.3.document.metadata": `{"source": "wiki"}`,
		"retrieval.documents.20.document.id":      "d20",
		"retrieval.documents.20.document.content": "past the shared keys: copied",
	}}, {id: 3, parent: 1, name: "llm", start: ms(60), end: ms(90), attrs: map[string]any{
		"openinference.span.kind":               "LLM",
		"llm.input_messages.0.message.role":     "system",
		"llm.input_messages.0.message.content":  "Answer from the context:\n" + strings.Repeat("the first passage ", 50),
		"llm.input_messages.1.message.role":     "user",
		"llm.input_messages.1.message.content":  "an earlier question",
		"llm.input_messages.2.message.role":     "assistant",
		"llm.input_messages.2.message.content":  "an earlier answer",
		"llm.input_messages.3.message.role":     "user",
		"llm.input_messages.3.message.content":  "the question",
		"llm.output_messages.0.message.role":    "assistant",
		"llm.output_messages.0.message.content": "The answer [1]. Another claim [2, 3].",
	}}}
}

// A trace KeepContent refuses keeps its documents' ids, scores and metadata and loses the texts
// of documents with ids; documents without (their id is their text's hash) keep theirs, and so
// does every document of a trace it keeps. Nothing held points into the request's bytes.
func TestElidedTexts(t *testing.T) {
	want := map[string]*record.Record{}
	for _, tr := range []byte{1, 2} {
		res := assembleTD(build(t, tr, "s", elideSpans()...))
		if len(res.Records) != 1 {
			t.Fatalf("trace %d: %d records", tr, len(res.Records))
		}
		want[tidHex(tr)] = res.Records[0]
	}
	if n := len(want[tidHex(1)].Documents); n != 5 {
		t.Fatalf("pdata's record holds %d documents, want 5", n)
	}

	td := build(t, 1, "s", elideSpans()...)
	build(t, 2, "s", elideSpans()...).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{out: &sink{}, clk: &clock{t: base}}
	calls := map[pcommon.TraceID]int{}
	h.a, err = New(Settings{Config: defaultCfg(), Next: h.out, Now: h.clk.now, KeepContent: func(id pcommon.TraceID) bool {
		calls[id]++
		return id == tid(2)
	}})
	if err != nil {
		t.Fatal(err)
	}
	lim := span.Limits{MaxSpansPerRequest: 100, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	if n, err := h.a.ConsumeProto(context.Background(), body, lim); err != nil || n != 6 {
		t.Fatalf("ConsumeProto: %d spans, %v", n, err)
	}
	for i := range body {
		body[i] = 'x' // the transport reuses its buffers
	}
	if err := h.a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls[tid(1)] != 1 || calls[tid(2)] != 1 || len(calls) != 2 {
		t.Errorf("KeepContent called %v, want once per trace", calls)
	}
	recs, _ := h.out.got()
	slices.SortFunc(recs, func(a, b *record.Record) int { return strings.Compare(a.TraceID, b.TraceID) })
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}

	for i, r := range recs {
		// Input messages are held as views until pruning: the history and question must
		// survive the request's bytes being overwritten.
		if w := want[r.TraceID]; r.Query != w.Query || !reflect.DeepEqual(r.History, w.History) || len(r.History) != 2 {
			t.Errorf("record %d: query %q, history %+v, want %+v", i, r.Query, r.History, w.History)
		}
	}
	kept := recs[1]
	if kept.Elided {
		t.Error("the kept trace's record is marked elided")
	}
	sameRecords(t, []*record.Record{kept}, []*record.Record{want[tidHex(2)]})

	el := recs[0]
	if !el.Elided {
		t.Error("the refused trace's record is not marked elided")
	}
	w := *want[tidHex(1)]
	w.Documents = slices.Clone(w.Documents)
	var dropped []string
	for i := range w.Documents {
		if d := &w.Documents[i]; d.ID == "d0" || d.ID == "7" {
			dropped = append(dropped, d.ID)
			d.Content = ""
		}
	}
	if len(dropped) != 2 {
		t.Fatalf("pdata's documents %s", js(w.Documents))
	}
	// Its citations keep their document ids, not their claims.
	if len(w.Citations) != 2 || w.Citations[0].Text != "The answer." {
		t.Fatalf("pdata's citations %s", js(w.Citations))
	}
	w.Citations = slices.Clone(w.Citations)
	for i := range w.Citations {
		w.Citations[i].Text = ""
	}
	sameRecords(t, []*record.Record{el}, []*record.Record{&w})
}

// FuzzElisionDropsOnlyTexts decodes the same bytes keeping every text and keeping none of the
// traces with an odd last id byte: the answers are the same (error or spans), and the spans
// differ only in documents' texts emptied, on spans marked elided; the records differ only in
// those texts and in Elided.
func FuzzElisionDropsOnlyTexts(f *testing.F) {
	seed := func(td ptrace.Traces) {
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	td := build(f, 1, "s", elideSpans()...)
	build(f, 2, "s", elideSpans()...).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	seed(td)
	seed(build(f, 3, "s", rootSpan(ms(100)), retrieverSpan(), llmSpan(ms(60), ms(90)), sp{id: 4, parent: 1, name: "rerank", start: ms(51), end: ms(55), attrs: map[string]any{
		"openinference.span.kind": "RERANKER", "reranker.input_documents.0.document.id": "d1", "reranker.input_documents.0.document.content": "c",
		"reranker.output_documents.0.document.id": "d1", "reranker.output_documents.0.document.content": "c", "reranker.output_documents.1.document.content": "x",
	}}))
	lim := span.Limits{MaxSpansPerRequest: 100, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	odd := func(id pcommon.TraceID) bool { return id[15]&1 == 0 }
	nan := cmpopts.EquateNaNs()
	f.Fuzz(func(t *testing.T, body []byte) {
		full, n1, err1 := span.DecodeProto(body, lim, nil, nil, nil)
		el, n2, err2 := span.DecodeProto(body, lim, nil, nil, odd)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) || n1 != n2 || len(full) != len(el) {
			t.Fatalf("full: %d spans %d %v; elided: %d spans %d %v", len(full), n1, err1, len(el), n2, err2)
		}
		for i := range full {
			a, b := full[i], el[i]
			if len(a.Attrs) != len(b.Attrs) {
				t.Fatalf("span %d: %d attributes, %d elided", i, len(a.Attrs), len(b.Attrs))
			}
			emptied := false
			for j := range a.Attrs {
				x, y := a.Attrs[j], b.Attrs[j]
				if cmp.Equal(x, y, nan) {
					continue
				}
				if x.Key != y.Key || !docContentKey(x.Key) || x.Value.Type != span.TypeStr || y.Value != (span.Value{Type: span.TypeStr}) {
					t.Fatalf("span %d attribute %d: %q=%v became %q=%v", i, j, x.Key, x.Value, y.Key, y.Value)
				}
				emptied = true
			}
			if emptied && (!b.Elided || odd(b.TraceID)) {
				t.Fatalf("span %d of trace %v: texts emptied, marked %v", i, b.TraceID, b.Elided)
			}
			a.Attrs, b.Attrs, b.Elided = nil, nil, false
			if !cmp.Equal(a, b, nan, cmp.AllowUnexported(span.Span{})) {
				t.Fatalf("span %d: %+v, elided %+v", i, a, b)
			}
		}
		if err1 != nil {
			return
		}
		r1, r2 := Assemble(full).Records, Assemble(el).Records
		if len(r1) != len(r2) {
			t.Fatalf("%d records, %d elided", len(r1), len(r2))
		}
		for i := range r1 {
			a, b := *r1[i], *r2[i]
			if len(a.Documents) != len(b.Documents) {
				t.Fatalf("record %d: %d documents, %d elided", i, len(a.Documents), len(b.Documents))
			}
			a.Documents = slices.Clone(a.Documents)
			for k := range a.Documents {
				if b.Documents[k].Content == "" && a.Documents[k].Content != "" && b.Elided {
					a.Documents[k].Content = ""
				}
			}
			if b.Elided && len(a.Citations) == len(b.Citations) {
				a.Citations = slices.Clone(a.Citations)
				for k := range a.Citations {
					if b.Citations[k].Text == "" {
						a.Citations[k].Text = "" // parsed from the answer: ids without claims
					}
				}
			}
			b.Elided = false
			if d := cmp.Diff(a, b, nan); d != "" {
				t.Fatalf("record %d (-full +elided):\n%s", i, d)
			}
		}
	})
}

// docContentKey reports whether k is the content of a document of OpenInference's flattened
// lists (the texts the decoder may elide).
func docContentKey(k string) bool {
	fam, rest, ok := conventions.FamilyOf(k)
	if !ok || fam > conventions.FamRerankOut {
		return false
	}
	_, field, ok := conventions.SplitIndex(rest, conventions.SharedIndex)
	return ok && field == "document.content"
}
