package span

import (
	"testing"
)

// A recycled slice keeps nothing reachable from the pool, and slices beyond the pools' sizes
// are neither pooled nor refused.
func TestSlicePoolsClearWhatTheyKeep(t *testing.T) {
	spans := GetTraceSpans(5)
	if len(spans) != 0 || cap(spans) != 5 {
		t.Fatalf("GetTraceSpans(5): len %d cap %d, want 0 5", len(spans), cap(spans))
	}
	spans = append(spans, Span{Name: "retrieve", Attrs: []Attr{{Key: "k", Value: Str("v")}}}, Span{Name: "llm"})
	PutTraceSpans(spans)
	if whole := spans[:cap(spans)]; whole[0].Name != "" || whole[0].Attrs != nil || whole[1].Name != "" {
		t.Fatalf("put left %+v in the pooled array", whole[:2])
	}
	big := GetTraceSpans(MaxPooledTraceSpans + 4)
	if cap(big) != MaxPooledTraceSpans+4 {
		t.Fatalf("GetTraceSpans(%d): cap %d", MaxPooledTraceSpans+4, cap(big))
	}
	big = append(big, Span{Name: "kept"})
	PutTraceSpans(big) // too large for the pools: left as it is
	if big[0].Name != "kept" {
		t.Fatal("a slice the pools do not take was cleared")
	}
	attrs := getAttrs(3)
	if len(attrs) != 3 || cap(attrs) != 3 {
		t.Fatalf("getAttrs(3): len %d cap %d", len(attrs), cap(attrs))
	}
}
