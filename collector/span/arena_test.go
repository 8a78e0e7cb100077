package span

import "testing"

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
