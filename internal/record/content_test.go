package record

import (
	"strings"
	"testing"
)

// MergeContent fills only what the record lacks: what the spans gave stays.
func TestMergeContent(t *testing.T) {
	r := &Record{TraceID: "t", Query: "from the spans", Documents: []Document{{ID: "doc-1", Content: "Refunds within 30 days."}}}
	c := &Content{Query: "from the event", Answer: "Refunds within 30 days [doc-1].", History: []Message{{Role: RoleUser, Content: "hi"}}}
	if !MergeContent(r, c) {
		t.Fatal("nothing merged")
	}
	if r.Query != "from the spans" || r.Answer != c.Answer || len(r.History) != 1 || len(r.Citations) != 1 || r.Citations[0].DocumentIDs[0] != "doc-1" {
		t.Fatalf("merged %+v", r)
	}
	if MergeContent(r, &Content{Answer: "another answer", Query: "q"}) || r.Answer != c.Answer {
		t.Fatalf("overwrote: %+v", r)
	}
	long := &Record{}
	MergeContent(long, &Content{Answer: strings.Repeat("a", MaxTextBytes+10)})
	if len(long.Answer) != MaxTextBytes {
		t.Fatalf("answer of %d bytes, want the limit %d", len(long.Answer), MaxTextBytes)
	}
	if (&Content{}).Empty() != true || c.Empty() {
		t.Fatal("Empty")
	}
}
