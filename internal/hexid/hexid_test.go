package hexid

import (
	"encoding/hex"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string // hex of the bytes; "" when Decode must refuse
	}{
		{"0af7651916cd43dd8448eb211c80319c", 16, "0af7651916cd43dd8448eb211c80319c"},
		{"b7ad6b7169203331", 8, "b7ad6b7169203331"},
		{"00000000000000000000000000000000", 16, "00000000000000000000000000000000"},
		{"0AF7651916CD43DD8448EB211C80319C", 16, ""}, // upper case would not encode back the same
		{"0af7651916cd43dd8448eb211c80319", 16, ""},  // one digit short
		{"0af7651916cd43dd8448eb211c80319cc", 16, ""},
		{"0af7651916cd43dd8448eb211c80319g", 16, ""},
		{"t1", 1, ""},
		{"", 16, ""},
	} {
		dst := make([]byte, tc.n)
		ok := Decode(dst, tc.in)
		if ok != (tc.want != "") {
			t.Errorf("Decode(%q) = %v", tc.in, ok)
			continue
		}
		if ok && hex.EncodeToString(dst) != tc.want {
			t.Errorf("Decode(%q) = %x", tc.in, dst)
		}
		if ok && Encode(dst) != tc.in {
			t.Errorf("Encode(Decode(%q)) = %q", tc.in, Encode(dst))
		}
	}
}

// Every byte value round-trips, and every character that is not a lowercase hex digit is
// refused in either place of a pair.
func TestDecodeEveryByte(t *testing.T) {
	for c := range 256 {
		b := []byte{byte(c)}
		var got [1]byte
		if !Decode(got[:], Encode(b)) || got[0] != byte(c) {
			t.Fatalf("%#x does not round-trip", c)
		}
		isHex := c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
		if Decode(got[:], string([]byte{byte(c), '0'})) != isHex || Decode(got[:], string([]byte{'0', byte(c)})) != isHex {
			t.Errorf("%q: accepted = %v, want %v", rune(c), !isHex, isHex)
		}
	}
}

func TestTraceSpan(t *testing.T) {
	tr := [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sp := [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	traceID, spanID := TraceSpan(tr, sp)
	if traceID != "4bf92f3577b34da6a3ce929d0e0e4736" || spanID != "00f067aa0ba902b7" {
		t.Fatalf("TraceSpan = %q, %q", traceID, spanID)
	}
	if traceID != Encode(tr[:]) || spanID != Encode(sp[:]) {
		t.Fatal("TraceSpan differs from Encode")
	}
	if n := testing.AllocsPerRun(100, func() { traceID, spanID = TraceSpan(tr, sp) }); n != 1 {
		t.Fatalf("%v allocations, want 1", n)
	}
}
