package offheap

import (
	"math/rand/v2"
	"testing"
)

// The index agrees with a map through random inserts and deletes over few cells, where
// probes collide and wrap around: every key held is found in its slot, every other is not.
// Hashes are taken modulo a few values so that many keys share a home cell.
func TestIndexMatchesAMap(t *testing.T) {
	const slots = 13
	x := NewIndex(slots)
	if len(x.cells) != 32 {
		t.Fatalf("%d cells for %d slots, want 32", len(x.cells), slots)
	}
	keys := make([]int, slots) // the caller's slots: the key each holds, -1 for none
	for i := range keys {
		keys[i] = -1
	}
	hash := func(k int) uint64 { return uint64(k%7) * 5 }
	where := map[int]uint32{}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 50000 {
		k := rng.IntN(40)
		i, cell := x.Find(hash(k), func(s uint32) bool { return keys[s] == k })
		if s, ok := where[k]; ok != (i >= 0) || ok && uint32(i) != s {
			t.Fatalf("step %d: key %d found in %d, held in %d (%v)", step, k, i, s, ok)
		}
		switch {
		case i >= 0: // delete it
			x.Delete(cell, func(s uint32) uint64 { return hash(keys[s]) })
			keys[i] = -1
			delete(where, k)
		case len(where) < slots: // insert it into a free slot
			s := uint32(0)
			for keys[s] >= 0 {
				s++
			}
			x.Set(cell, s)
			keys[s], where[k] = k, s
		}
		if x.Len() != len(where) {
			t.Fatalf("step %d: %d cells in use, %d keys", step, x.Len(), len(where))
		}
	}
	if x.Bytes() != 128 {
		t.Errorf("Bytes = %d", x.Bytes())
	}
	x.Free()
}
