package span

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

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
