package assemble

import (
	"reflect"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
)

// A span's facts start in the backing arrays the previous span of the pooled scratch left
// (facts.reset): a list must come out as if it were new, holes zero and nothing of the previous
// span's, and the arrays must be empty and zero when kept.
func TestFactsResetKeepsZeroedBuffers(t *testing.T) {
	attrs := func(kv ...any) []Attr {
		var out []Attr
		for i := 0; i < len(kv); i += 2 {
			var v Value
			switch x := kv[i+1].(type) {
			case string:
				v = Str(x)
			case float64:
				v = Double(x)
			}
			out = append(out, Attr{Key: kv[i].(string), Value: v})
		}
		return out
	}
	first := Span{Attrs: attrs(
		"retrieval.documents.0.document.id", "a", "retrieval.documents.0.document.content", "alpha",
		"retrieval.documents.1.document.id", "b", "retrieval.documents.1.document.score", 0.5,
		"retrieval.documents.2.document.id", "c",
		"llm.input_messages.0.message.role", "system", "llm.input_messages.0.message.content", "ctx",
		"llm.input_messages.1.message.role", "user", "llm.input_messages.1.message.content", "q1",
		"llm.output_messages.0.message.role", "assistant", "llm.output_messages.0.message.content", "a1",
	)}
	var f facts
	readFacts(&f, &first)
	if len(f.oiDocs) != 3 || f.oiDocs[1].ID != "b" || len(f.oiIn) != 2 || len(f.oiOut) != 1 {
		t.Fatalf("first span read wrong: docs %+v, in %+v, out %+v", f.oiDocs, f.oiIn, f.oiOut)
	}
	f.reset()
	if f.oiDocs != nil || f.oiIn != nil || f.oiOut != nil || f.feedbackRank != 0 {
		t.Fatalf("reset left lists: %+v %+v %+v", f.oiDocs, f.oiIn, f.oiOut)
	}
	if len(f.docBuf) != 0 || cap(f.docBuf) < 3 || len(f.inBuf) != 0 || cap(f.inBuf) < 2 || cap(f.outBuf) < 1 {
		t.Fatalf("reset kept no arrays: docs %d/%d, in %d/%d, out %d", len(f.docBuf), cap(f.docBuf), len(f.inBuf), cap(f.inBuf), cap(f.outBuf))
	}
	for i, d := range f.docBuf[:cap(f.docBuf)] {
		if d.ID != "" || d.Content != "" || d.Score != nil {
			t.Fatalf("kept document %d not zero: %+v", i, d)
		}
	}
	for i, m := range f.inBuf[:cap(f.inBuf)] {
		if m.role != "" || m.content != "" {
			t.Fatalf("kept message %d not zero: %+v", i, m)
		}
	}

	// The next span: a hole at document 0, one input message, no output messages.
	second := Span{Attrs: attrs(
		"retrieval.documents.1.document.id", "z",
		"llm.input_messages.0.message.role", "user", "llm.input_messages.0.message.content", "q2",
	)}
	readFacts(&f, &second)
	if len(f.oiDocs) != 2 || !isHole(f.oiDocs[0]) || f.oiDocs[1].ID != "z" || f.oiDocs[1].Score != nil || f.oiDocs[1].Content != "" {
		t.Fatalf("second span's documents: %+v", f.oiDocs)
	}
	if len(f.oiIn) != 1 || f.oiIn[0].content != "q2" || f.oiOut != nil {
		t.Fatalf("second span's messages: in %+v, out %+v", f.oiIn, f.oiOut)
	}
	if &f.oiDocs[0] != &f.docBuf[:1][0] {
		t.Error("the second span's documents did not start in the kept array")
	}

	// A span that names no documents has none (nil: the source is absent), buffer or not.
	f.reset()
	if want := (facts{docBuf: f.docBuf, inBuf: f.inBuf, outBuf: f.outBuf}); !reflect.DeepEqual(f, want) {
		t.Fatalf("reset left more than the three kept arrays:\n%#v", f)
	}
	readFacts(&f, &Span{Attrs: attrs("retrieval.documents.x.document.id", "bad")})
	if f.oiDocs != nil {
		t.Fatalf("a span without a valid document key has documents %+v", f.oiDocs)
	}
}

// Records do not share the scratch's kept arrays: a record's documents and history stay as
// they were when later traces are assembled through the same pool.
func TestRecordsOutliveTheScratch(t *testing.T) {
	trace := func(id byte, doc, q string) []Span {
		return FromTraces(build(t, id, "svc",
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
		), nil)
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

// The arena's strings are copies that later copies and new blocks leave alone; a long string
// gets its own allocation.
func TestStrArena(t *testing.T) {
	var a strArena
	src := []byte("0123456789abcdef")
	var got []string
	var want []string
	for i := range 200 { // several blocks
		b := src[:1+i%len(src)]
		got = append(got, a.str(b))
		want = append(want, string(b))
		src[0] ^= 1 // the request's bytes change: the copies must not
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("string %d is %q, want %q", i, got[i], want[i])
		}
	}
	if a.str(nil) != "" {
		t.Error("an empty string is not empty")
	}
	long := make([]byte, arenaMax+1)
	before := len(a.block)
	if s := a.str(long); len(s) != len(long) || len(a.block) != before {
		t.Errorf("a long string went into the block (%d bytes, block %d → %d)", len(s), before, len(a.block))
	}
}
