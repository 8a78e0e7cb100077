package redact

import (
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// text is what the detectors search: the input in a normalised form, with the byte range of
// the input each of its bytes came from, so that a span found in the normalised form is
// replaced in the input itself and everything else goes out byte for byte.
//
// The normal form:
//   - every non-ASCII rune is replaced by its compatibility decomposition (NFKD, per rune):
//     fullwidth digits and letters ("４１１１", "＠") become ASCII, "①" becomes "1";
//   - every run of white space (unicode.IsSpace and the Zs category: newline, tab, no-break
//     space, thin space, narrow no-break space, ideographic space, …) becomes one ASCII space,
//     so "4111  1111\n1111\u00a01111" reads as four groups separated by one space;
//   - dashes (Pd: hyphen, en and em dash, …) and the minus sign become '-'; other non-ASCII
//     punctuation and symbols without a decomposition (“ ” « » 「 」 € …) become '"';
//   - format characters (Cf: zero-width space and joiners, soft hyphen, byte-order mark) are
//     dropped, so they cannot be planted inside a number to hide it.
//
// Bytes already claimed by a detector are masked with 0x00, which no detector matches, so a
// later detector cannot take part of a redacted span (the masks are written on a copy).
type text struct {
	b []byte
	// from[i], to[i]: the input range that b[i] came from; nil when b is the input itself.
	from, to []int32
	owned    bool // b may be written (it is not the input string's memory)
}

// identityForm reports whether s is its own normal form: ASCII, no white space other than
// single ASCII spaces. Most sampled text that holds nothing to redact is of this form, and
// it is searched in place, without a copy.
func identityForm(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || (c < ' ' && (c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r')) ||
			(c == ' ' && i+1 < len(s) && s[i+1] == ' ') || c == 0 {
			return false
		}
	}
	return true
}

// normalise returns the normal form of s.
func normalise(s string) text {
	if identityForm(s) {
		// Read-only view of the string; mask copies it before the first write.
		return text{b: unsafe.Slice(unsafe.StringData(s), len(s))}
	}
	t := text{b: make([]byte, 0, len(s)+8), from: make([]int32, 0, len(s)+8), to: make([]int32, 0, len(s)+8), owned: true}
	emit := func(p []byte, from, to int) {
		for _, c := range p {
			t.b = append(t.b, c)
			t.from = append(t.from, int32(from))
			t.to = append(t.to, int32(to))
		}
	}
	var one [1]byte
	space := false // the last byte emitted is a space standing for a run of white space
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case r == 0:
			// NUL is the mask byte; in the input it stands for nothing.
		case unicode.IsSpace(r) || unicode.Is(unicode.Zs, r):
			if space {
				t.to[len(t.to)-1] = int32(i + size)
			} else {
				one[0] = ' '
				emit(one[:], i, i+size)
			}
			i += size
			space = true
			continue
		case r < utf8.RuneSelf:
			one[0] = byte(r)
			emit(one[:], i, i+size)
		case r == utf8.RuneError && size == 1:
			one[0] = '?' // invalid UTF-8: a byte that no detector takes
			emit(one[:], i, i+size)
		case unicode.Is(unicode.Cf, r):
			// zero-width and other format characters: dropped
		case unicode.Is(unicode.Pd, r) || r == '\u2212':
			one[0] = '-'
			emit(one[:], i, i+size)
		default:
			if d := norm.NFKD.PropertiesString(s[i:]).Decomposition(); d != nil {
				emit(d, i, i+size)
			} else if unicode.IsPunct(r) || unicode.IsSymbol(r) {
				// Quotes, brackets, currency signs: one ASCII '"', which no detector takes as
				// part of a number, a word or an address, so that "“4111 1111 1111 1111”"
				// reads as a number in quotes rather than as one glued to a letter.
				one[0] = '"'
				emit(one[:], i, i+size)
			} else {
				emit([]byte(s[i:i+size]), i, i+size)
			}
		}
		space = false
		i += size
	}
	return t
}

// span returns the input range of the normalised range [a, e).
func (t *text) span(a, e int) (int, int) {
	if t.from == nil {
		return a, e
	}
	return int(t.from[a]), int(t.to[e-1])
}

// own makes b a copy that mask may write, before the first detector runs on it.
func (t *text) own() {
	if !t.owned {
		t.b = append([]byte(nil), t.b...)
		t.owned = true
	}
}

// mask overwrites [a, e) of the normal form with 0x00; own must have been called.
func (t *text) mask(a, e int) {
	for i := a; i < e; i++ {
		t.b[i] = 0
	}
}
