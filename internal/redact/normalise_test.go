package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalise(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain ascii", "plain ascii"},
		{"4111\u00a01111\u20091111\u202f1111", "4111 1111 1111 1111"},
		{"a  b\n\n\tc", "a b c"},
		{"\uff14\uff11\uff11\uff11", "4111"},
		{"a\u200bb\u00adc", "abc"},
		{"415\u2013555\u2212" + "0132", "415-555-0132"},
		{"jane\uff20example\uff0ecom", "jane@example.com"},
		{"x\x00y", "xy"},
		{"“a” «b» €1", "\"a\" \"b\" \"1"},
	} {
		n := normalise(tc.in)
		if got := string(n.b); got != tc.want {
			t.Errorf("normalise(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactKeepsTheRestByteForByte checks that only the detected span changes, in the
// original text: the no-break spaces, fullwidth digits and newline around it stay as written.
func TestRedactKeepsTheRestByteForByte(t *testing.T) {
	r, _ := New(nil, nil, nil)
	in := "Ｎｏｔｅ：\u00a0card\n４１１１\u00a0１１１１\u00a0１１１１\u00a0１１１１\u3000thanks ✓"
	want := "Ｎｏｔｅ：\u00a0card\n[REDACTED:card]\u3000thanks ✓"
	if got := r.String(in); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	clean := "Grüße\u00a0aus Köln,\n\n  2 cents\tper GB — ２０２６"
	if got := r.String(clean); got != clean {
		t.Fatalf("text without personal data changed: %q", got)
	}
}

// FuzzNormalise checks the offset map on any input: it never panics, every normalised byte
// maps to a range inside the input, ranges never go backwards, the normal form is never
// longer than the decomposition of the input needs (NFKD expands a rune to at most 18 runes,
// U+FDFA: 33 bytes from 3, so 18 bytes per input byte bounds it), and redacting text that holds nothing to redact returns it byte for byte.
func FuzzNormalise(f *testing.F) {
	for _, s := range []string{"", "a", "4111\u00a01111", "  \n ", "\uff14\ufb01\u00bd", "\xff\xfe", "x\x00y", "a\u200b", "ŉ ǆ ﷺ"} {
		f.Add(s)
	}
	r, err := New(nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := normalise(s)
		if n.from != nil && (len(n.from) != len(n.b) || len(n.to) != len(n.b)) {
			t.Fatalf("map lengths %d %d for %d bytes", len(n.from), len(n.to), len(n.b))
		}
		if len(n.b) > 18*len(s) {
			t.Fatalf("normal form of %d bytes (%d runes) is %d bytes", len(s), utf8.RuneCountInString(s), len(n.b))
		}
		prev := 0
		for i := range n.b {
			a, e := n.span(i, i+1)
			if a < 0 || e > len(s) || a >= e || a < prev {
				t.Fatalf("byte %d maps to [%d,%d) (previous start %d) in %q", i, a, e, prev, s)
			}
			prev = a
		}
		out := r.String(s)
		if !strings.Contains(out, "[REDACTED:") && out != s {
			t.Fatalf("nothing redacted but text changed: %q -> %q", s, out)
		}
		// What is outside the markers is the input's own bytes, in order.
		rest := out
		for {
			i := strings.Index(rest, "[REDACTED:")
			if i < 0 {
				break
			}
			if !strings.Contains(s, rest[:i]) {
				t.Fatalf("output piece %q is not from the input %q", rest[:i], s)
			}
			j := strings.IndexByte(rest[i:], ']')
			rest = rest[i+j+1:]
		}
		if !strings.HasSuffix(s, rest) {
			t.Fatalf("output tail %q is not the input's tail %q", rest, s)
		}
	})
}
