// Package hexid turns the ids OTLP carries in text (trace and span ids, lowercase hex) into
// their bytes and back, so tables that hold many of them keep 16 or 8 bytes instead of a
// string. Only lowercase hex decodes: an id that does not is kept some other way by the
// caller, so that decoding and encoding always give the same text back.
package hexid

// Decode fills dst from s, two lowercase hex digits a byte, and reports whether s was exactly
// that (2 × len(dst) digits, no other character). A table, not comparisons: random digits
// would mispredict a branch on every other character.
func Decode(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	bad := byte(0)
	for i := range dst {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo&15
	}
	return bad&0x10 == 0
}

// unhex maps a lowercase hex digit to its value, anything else to 0x10.
var unhex = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = byte(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0x10
		}
	}
	return t
}()

const digits = "0123456789abcdef"

// TraceSpan returns a trace id and a span id as lowercase hex, in one allocation: a record
// names both, and a second string per record is measurable on the ingest path.
func TraceSpan(trace [16]byte, span [8]byte) (traceID, spanID string) {
	var buf [48]byte
	for i, c := range trace {
		buf[2*i], buf[2*i+1] = digits[c>>4], digits[c&15]
	}
	for i, c := range span {
		buf[32+2*i], buf[32+2*i+1] = digits[c>>4], digits[c&15]
	}
	s := string(buf[:])
	return s[:32], s[32:]
}

// Encode returns b as lowercase hex: what Decode took.
func Encode(b []byte) string {
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}
