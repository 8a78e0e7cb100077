package reqsignal

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestWordsIsFields: Words counts as strings.Fields splits: every ASCII and Unicode space
// separates.
func TestWordsIsFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "word", "é", "\u00a0", "\u0085", "\u2003", " ", "\t", "\n", "\r", "\v", "\f", "\x1c", "x.y", "日本"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := Words(s), len(strings.Fields(s)); got != want {
			t.Fatalf("%q: %d words, want %d", s, got, want)
		}
	}
}
