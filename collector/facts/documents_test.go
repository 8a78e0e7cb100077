package facts

import (
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
)

func TestCompactDocs(t *testing.T) {
	whole := []record.Document{{ID: "a"}, {Content: "b"}}
	if got := CompactDocs(whole); len(got) != 2 || &got[0] != &whole[0] {
		t.Fatalf("a list without holes is copied or changed: %+v", got)
	}
	holed := []record.Document{{ID: "a"}, {}, {Content: "c"}, {}}
	got := CompactDocs(holed)
	if len(got) != 2 || got[0].ID != "a" || got[1].Content != "c" || &got[0] == &holed[0] {
		t.Fatalf("CompactDocs(%+v) = %+v, want a and c in a new slice", holed, got)
	}
}
