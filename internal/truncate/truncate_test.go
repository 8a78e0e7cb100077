package truncate

import (
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"hello", -1, ""},
		{"", 3, ""},
		{"héllo", 2, "h"},         // é is 2 bytes: never half of it
		{"héllo", 3, "hé"},        // the whole rune fits
		{"a€b", 3, "a"},           // € is 3 bytes
		{"a€b", 4, "a€"},          //
		{"😀x", 3, ""},             // 4-byte rune, nothing fits
		{"ab\xffcd", 3, "ab\xff"}, // invalid bytes are cut like single bytes
	} {
		got := String(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("String(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
		if utf8.ValidString(tt.s) && !utf8.ValidString(got) {
			t.Errorf("String(%q, %d) = %q is not valid UTF-8", tt.s, tt.n, got)
		}
	}
}

func TestEllipsis(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 16, "short"},
		{"exactly", 7, "exactly"},
		{"much too long", 4, "much..."},
		{"né", 2, "n..."},
	} {
		if got := Ellipsis(tt.s, tt.n); got != tt.want {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzString(f *testing.F) {
	f.Add("héllo wörld €😀", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := String(s, n)
		if len(got) > max(n, 0) || len(got) > len(s) || s[:len(got)] != got {
			t.Fatalf("String(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q is not valid UTF-8", s, n, got)
		}
		if n >= 0 && len(s) > n && n-len(got) > utf8.UTFMax-1 {
			t.Fatalf("String(%q, %d) = %q cut more than a rune", s, n, got)
		}
	})
}
