package span

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// readField's fast path (one-byte tags, lengths of one or two bytes, one-byte varints) must
// answer exactly as readFieldSlow does from the same position: the same field, the same next
// position, the same error. Every two-byte input, then 20,000 random longer ones weighted
// towards the fast path's edges, against every schema the decoder reads.
func TestReadFieldFastPathMatchesSlow(t *testing.T) {
	schemas := map[string]*schema{
		"request": requestSchema, "resource_spans": rsSchema, "resource": resourceSchema,
		"scope_spans": ssSchema, "span": spanSchema, "event": eventSchema, "link": linkSchema,
		"key_value": kvSchema, "any_value": anySchema, "list": listSchema, "status": statusSchema,
	}
	check := func(t *testing.T, name string, s *schema, b []byte, pos int) {
		t.Helper()
		f1, p1, err1 := readField(b, pos, s)
		f2, p2, err2 := readFieldSlow(b, pos, s)
		if f1.num != f2.num || f1.n != f2.n || !bytes.Equal(f1.b, f2.b) || (f1.b == nil) != (f2.b == nil) || p1 != p2 || (err1 == nil) != (err2 == nil) ||
			(err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%s: % x at %d: fast (%d %d %q) %d %v, slow (%d %d %q) %d %v", name, b, pos, f1.num, f1.n, f1.b, p1, err1, f2.num, f2.n, f2.b, p2, err2)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	edges := []byte{0x00, 0x01, 0x02, 0x05, 0x7f, 0x80, 0x81, 0xff}
	for name, s := range schemas {
		for i := range 1 << 16 {
			check(t, name, s, []byte{byte(i >> 8), byte(i)}, 0)
		}
		buf := make([]byte, 2, 10)
		for range 20000 {
			buf = append(buf[:2], make([]byte, 1+rng.IntN(8))...) // after a field of two bytes
			b := buf[2:]
			for i := range b {
				if rng.IntN(2) == 0 {
					b[i] = edges[rng.IntN(len(edges))]
				} else {
					b[i] = byte(rng.Uint32())
				}
			}
			if rng.IntN(2) == 0 { // a known field's tag first
				b[0] = byte(1+rng.IntN(16))<<3 | byte(rng.IntN(6))
			}
			check(t, name, s, b, 0)
			buf[0], buf[1] = 0x08, 0x01
			check(t, name, s, buf, 2)
		}
	}
	// The fast path's cases, with what they must give.
	long := append([]byte{0x4a, 0xac, 0x02}, bytes.Repeat([]byte{'x'}, 300)...) // field 9, 300 bytes
	// A three-byte length (40,000) goes to the slow path, which must not read it as two bytes.
	longer := append([]byte{0x4a, 0xc0, 0xb8, 0x02}, bytes.Repeat([]byte{'x'}, 40000)...)
	cases := []struct {
		b    []byte
		num  int32
		n    uint64
		blen int
		next int
	}{
		{[]byte{0x0a, 0x02, 'a', 'b'}, 1, 0, 2, 4}, // field 1, two bytes
		{long, 9, 0, 300, 303},                     // a two-byte length
		{longer, 9, 0, 40000, 40004},
		{[]byte{0x30, 0x05}, 6, 5, 0, 2},                       // field 6 (kind), varint 5
		{[]byte{0x30, 0x96, 0x01}, 6, 150, 0, 3},               // a two-byte varint: the slow path
		{[]byte{0x0a, 0x80, 0x00}, 1, 0, 0, 3},                 // a length in two bytes, not minimal
		{[]byte{0x88, 0x01, 0x01}, 0, 0, 0, 3},                 // field 17 is unknown: skipped
		{[]byte{0x85, 0x01, 1, 2, 3, 4}, 16, 0x04030201, 0, 6}, // field 16 (flags), fixed32
	}
	for _, c := range cases {
		f, next, err := readField(c.b, 0, spanSchema)
		if err != nil || f.num != c.num || f.n != c.n || len(f.b) != c.blen || next != c.next {
			t.Errorf("% x: got field %d n %d, %d bytes, next %d, err %v; want %d %d %d %d", c.b[:min(len(c.b), 6)], f.num, f.n, len(f.b), next, err, c.num, c.n, c.blen, c.next)
		}
	}
	// Cut short, a length cut short, no length, wrong wire types (kind as bytes, flags as bytes).
	for _, b := range [][]byte{{0x0a, 0x03, 'a'}, {0x0a, 0x80}, {0x0a}, {0x32, 0x01}, {0x82, 0x01, 0x01, 'z'}} {
		if _, _, err := readField(b, 0, spanSchema); err == nil {
			t.Errorf("% x: no error", b)
		}
	}
}

// readKVFast answers exactly as readKVSlow does wherever it answers, and answers for the usual
// shapes: KeyValues of every value type, then the same bytes cut, extended and flipped.
func TestReadKVFastMatchesSlow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kvBytes := func(key string, value []byte, valueFirst bool) []byte {
		k := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		v := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), value)
		if valueFirst { // as pdata writes it
			return append(v, k...)
		}
		return append(k, v...)
	}
	anyOf := func(kind int) []byte {
		var v []byte
		switch kind {
		case 0:
			v = protowire.AppendTag(v, 1, protowire.BytesType)
			v = protowire.AppendString(v, strings.Repeat("x", rng.IntN(300)))
		case 1:
			v = protowire.AppendTag(v, 2, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(rng.IntN(2)))
		case 2:
			v = protowire.AppendTag(v, 3, protowire.VarintType)
			v = protowire.AppendVarint(v, rng.Uint64()>>rng.IntN(64))
		case 3:
			v = protowire.AppendTag(v, 4, protowire.Fixed64Type)
			v = protowire.AppendFixed64(v, rng.Uint64())
		case 4: // empty
		case 5: // a list: the slow path's
			v = protowire.AppendTag(v, 5, protowire.BytesType)
			v = protowire.AppendBytes(v, nil)
		case 6: // two oneof fields, merged: the last wins (the slow path's)
			v = protowire.AppendTag(v, 1, protowire.BytesType)
			v = protowire.AppendString(v, "first")
			v = protowire.AppendTag(v, 3, protowire.VarintType)
			v = protowire.AppendVarint(v, 7)
		}
		return v
	}
	same := func(b []byte) (fast bool) {
		t.Helper()
		f, ok := readKVFast(b)
		s, err := readKVSlow(b, 1)
		if !ok {
			return false
		}
		if err != nil || !bytes.Equal(f.key, s.key) || f.val.f != s.val.f || f.val.n != s.val.n || !bytes.Equal(f.val.b, s.val.b) {
			t.Fatalf("% x: fast %+v, slow %+v %v", b, f, s, err)
		}
		return true
	}
	for i := range 20000 {
		kind := i % 7
		key := strings.Repeat("k", rng.IntN(130))
		b := kvBytes(key, anyOf(kind), i%2 == 0)
		// Every value type but a list, in either order, is the fast path's.
		if fast := same(b); !fast && kind < 5 {
			t.Fatalf("kind %d not read by the fast path: % x", kind, b[:min(len(b), 40)])
		}
		// The same bytes damaged.
		c := slices.Clone(b)
		switch rng.IntN(4) {
		case 0:
			c = c[:rng.IntN(len(c)+1)]
		case 1:
			c = append(c, byte(rng.IntN(256)), byte(rng.IntN(256)))
		default:
			c[rng.IntN(len(c))] ^= byte(1 << rng.IntN(8))
		}
		same(c)
	}
}
