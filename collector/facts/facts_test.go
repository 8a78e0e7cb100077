package facts

import (
	"reflect"
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/collector/span/spantest"
)

// A span's facts start in the backing arrays the previous span of the pooled scratch left
// (reset): a list must come out as if it were new, holes zero and nothing of the previous
// span's, and the arrays must be empty and zero when kept.
func TestFactsResetKeepsZeroedBuffers(t *testing.T) {
	attrs := func(kv ...any) []span.Attr {
		var out []span.Attr
		for i := 0; i < len(kv); i += 2 {
			var v span.Value
			switch x := kv[i+1].(type) {
			case string:
				v = span.Str(x)
			case float64:
				v = span.Double(x)
			}
			out = append(out, span.Attr{Key: kv[i].(string), Value: v})
		}
		return out
	}
	first := span.Span{Attrs: attrs(
		"retrieval.documents.0.document.id", "a", "retrieval.documents.0.document.content", "alpha",
		"retrieval.documents.1.document.id", "b", "retrieval.documents.1.document.score", 0.5,
		"retrieval.documents.2.document.id", "c",
		"llm.input_messages.0.message.role", "system", "llm.input_messages.0.message.content", "ctx",
		"llm.input_messages.1.message.role", "user", "llm.input_messages.1.message.content", "q1",
		"llm.output_messages.0.message.role", "assistant", "llm.output_messages.0.message.content", "a1",
	)}
	var f Facts
	Read(&f, &first)
	if len(f.oiDocs) != 3 || f.oiDocs[1].ID != "b" || len(f.oiIn) != 2 || len(f.oiOut) != 1 {
		t.Fatalf("first span read wrong: docs %+v, in %+v, out %+v", f.oiDocs, f.oiIn, f.oiOut)
	}
	f.Reset()
	if f.oiDocs != nil || f.oiIn != nil || f.oiOut != nil || f.FeedbackRank != 0 {
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
		if m.Role != "" || m.Content != "" {
			t.Fatalf("kept message %d not zero: %+v", i, m)
		}
	}

	// The next span: a hole at document 0, one input message, no output messages.
	second := span.Span{Attrs: attrs(
		"retrieval.documents.1.document.id", "z",
		"llm.input_messages.0.message.role", "user", "llm.input_messages.0.message.content", "q2",
	)}
	Read(&f, &second)
	if len(f.oiDocs) != 2 || !isHole(f.oiDocs[0]) || f.oiDocs[1].ID != "z" || f.oiDocs[1].Score != nil || f.oiDocs[1].Content != "" {
		t.Fatalf("second span's documents: %+v", f.oiDocs)
	}
	if len(f.oiIn) != 1 || f.oiIn[0].Content != "q2" || f.oiOut != nil {
		t.Fatalf("second span's messages: in %+v, out %+v", f.oiIn, f.oiOut)
	}
	if &f.oiDocs[0] != &f.docBuf[:1][0] {
		t.Error("the second span's documents did not start in the kept array")
	}

	// A span that names no documents has none (nil: the source is absent), buffer or not.
	f.Reset()
	if want := (Facts{docBuf: f.docBuf, inBuf: f.inBuf, outBuf: f.outBuf}); !reflect.DeepEqual(f, want) {
		t.Fatalf("reset left more than the three kept arrays:\n%#v", f)
	}
	Read(&f, &span.Span{Attrs: attrs("retrieval.documents.x.document.id", "bad")})
	if f.oiDocs != nil {
		t.Fatalf("a span without a valid document key has documents %+v", f.oiDocs)
	}
}

func TestLabelScore(t *testing.T) {
	for label, want := range map[string]float64{"Thumbs Up": 1, "thumbs-down": -1, "👎": -1, "Neutral": 0, "PASS": 1, "hallucinated": -1} {
		got, ok := labelScore(label)
		if !ok || got != want {
			t.Errorf("labelScore(%q) = %v, %v; want %v", label, got, ok, want)
		}
	}
	if _, ok := labelScore("purple"); ok {
		t.Error("unknown label mapped")
	}
}

func TestContentIDIsStable(t *testing.T) {
	if got := contentID("Passwords expire yearly."); got != "ha63033a5c0484d48" {
		t.Fatalf("contentID = %q", got)
	}
	if a, b, a2 := contentID("a"), contentID("b"), contentID("a"); a == b || a != a2 {
		t.Fatal("contentID is not a stable hash")
	}
}

// TestReadFactsSharedKeys checks that Read reads an attribute under a shared key (by its
// address, readIndexed) exactly as under the same key's text.
func TestReadFactsSharedKeys(t *testing.T) {
	for n, s := range spantest.SharedKeySpans() {
		shared, text := spantest.BothSpellings(t, s)
		var byAddr, byText Facts
		Read(&byAddr, &shared)
		Read(&byText, &text)
		if !reflect.DeepEqual(byAddr, byText) {
			t.Errorf("span %d (%s, %d attributes): read by address\n%+v\nby text\n%+v", n, s.Name, len(s.Attrs), byAddr, byText)
		}
	}
}

// FuzzReadersFromAny checks that the readers of structured values never panic.
func FuzzReadersFromAny(f *testing.F) {
	for _, s := range []string{`[{"role":"user","parts":[{"type":"text","content":"q"}]}]`, `{"a":"b"}`,
		`[{"page_content":"x","metadata":{"id":"1"}}]`, `null`, `[1,"a",{"role":1}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = DocsFromAny(span.ParseJSON(s))
		_ = messagesFromAny(span.ParseJSON(s))
	})
}
