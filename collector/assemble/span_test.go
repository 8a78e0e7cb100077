package assemble

import (
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
)

// A recycled slice keeps nothing reachable from the pool, and slices beyond the pools' sizes
// are neither pooled nor refused.
func TestSlicePoolsClearWhatTheyKeep(t *testing.T) {
	spans := getTraceSpans(5)
	if len(spans) != 0 || cap(spans) != 5 {
		t.Fatalf("getTraceSpans(5): len %d cap %d, want 0 5", len(spans), cap(spans))
	}
	spans = append(spans, Span{Name: "retrieve", Attrs: []Attr{{Key: "k", Value: Str("v")}}}, Span{Name: "llm"})
	putTraceSpans(spans)
	if whole := spans[:cap(spans)]; whole[0].Name != "" || whole[0].Attrs != nil || whole[1].Name != "" {
		t.Fatalf("put left %+v in the pooled array", whole[:2])
	}
	big := getTraceSpans(maxPooledTraceSpans + 4)
	if cap(big) != maxPooledTraceSpans+4 {
		t.Fatalf("getTraceSpans(%d): cap %d", maxPooledTraceSpans+4, cap(big))
	}
	big = append(big, Span{Name: "kept"})
	putTraceSpans(big) // too large for the pools: left as it is
	if big[0].Name != "kept" {
		t.Fatal("a slice the pools do not take was cleared")
	}
	attrs := getAttrs(3)
	if len(attrs) != 3 || cap(attrs) != 3 {
		t.Fatalf("getAttrs(3): len %d cap %d", len(attrs), cap(attrs))
	}
}

func TestCompactDocs(t *testing.T) {
	whole := []record.Document{{ID: "a"}, {Content: "b"}}
	if got := compactDocs(whole); len(got) != 2 || &got[0] != &whole[0] {
		t.Fatalf("a list without holes is copied or changed: %+v", got)
	}
	holed := []record.Document{{ID: "a"}, {}, {Content: "c"}, {}}
	got := compactDocs(holed)
	if len(got) != 2 || got[0].ID != "a" || got[1].Content != "c" || &got[0] == &holed[0] {
		t.Fatalf("compactDocs(%+v) = %+v, want a and c in a new slice", holed, got)
	}
}
