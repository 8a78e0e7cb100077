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
