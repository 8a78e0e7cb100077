package offheap

import (
	"testing"
	"unsafe"
)

// TestStringsCountsReferences: one copy of each string, its own (not a slice of the caller's
// buffer), dropped with its last reference, its id reused.
func TestStringsCountsReferences(t *testing.T) {
	var x Strings
	buf := "support-bot|search"
	a1, a2 := x.Ref(buf[:11]), x.Ref("support-bot")
	b := x.Ref(buf[12:])
	if a1 != 1 || a2 != 1 || b != 2 || x.Ref("") != 0 || x.Len() != 2 {
		t.Fatalf("ids %d %d %d, %d held", a1, a2, b, x.Len())
	}
	if n := x.Name(a1); n != "support-bot" || unsafe.StringData(n) == unsafe.StringData(buf) {
		t.Fatalf("name %q shares the caller's buffer", n)
	}
	if x.refs[a1-1] != 2 || x.refs[b-1] != 1 {
		t.Fatalf("refs %v", x.refs)
	}
	x.Unref(a1)
	if x.Name(a1) != "support-bot" || x.Len() != 2 {
		t.Fatal("dropped with a reference left")
	}
	x.Unref(a2)
	x.Unref(0)
	if x.Len() != 1 || x.byName["support-bot"] != 0 || x.last == a1 {
		t.Fatalf("not dropped with its last reference: %v", x.byName)
	}
	if c := x.Ref("billing"); c != a1 || x.Name(c) != "billing" || len(x.names) != 2 {
		t.Fatalf("billing got id %d (names %v), want the freed %d", c, x.names, a1)
	}
	if x.Name(0) != "" {
		t.Fatal("id 0 is not the empty string")
	}
}
