package offheap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

type testKey [16]byte

type testVal struct {
	n   int64
	tag uint32
}

// checkTable compares the table with the model: every indexed key found with its value, the
// arrival order of each lane, the counts, and each index cell's distance from its home.
func checkTable(t *testing.T, tab *Table[testKey, testVal], order [][]testKey, ids [][]int, live []map[testKey]int, absent []testKey) {
	t.Helper()
	total, indexed := 0, 0
	for l := range order {
		var got []testKey
		var gotIDs []int
		for i := tab.Oldest(l); i >= 0; i = tab.Newer(i) {
			got = append(got, *tab.Key(i))
			gotIDs = append(gotIDs, i)
			if tab.Lane(i) != l {
				t.Fatalf("entry %d in lane %d's order says lane %d", i, l, tab.Lane(i))
			}
		}
		if !slices.Equal(got, order[l]) || !slices.Equal(gotIDs, ids[l]) {
			t.Fatalf("lane %d: order %x ids %v, want %x ids %v", l, got, gotIDs, order[l], ids[l])
		}
		if tab.Len(l) != len(order[l]) {
			t.Fatalf("lane %d: Len %d, want %d", l, tab.Len(l), len(order[l]))
		}
		total += len(order[l])
		for k, id := range live[l] {
			if got := tab.Find(l, k); got != id {
				t.Fatalf("lane %d: Find(%x) = %d, want %d", l, k, got, id)
			}
			if v := tab.Val(id); v.n != int64(id)*7 || v.tag != uint32(l) {
				t.Fatalf("lane %d: entry %d holds %+v", l, id, *v)
			}
		}
		indexed += len(live[l])
		for _, k := range absent {
			if i := tab.Find(l, k); i >= 0 {
				t.Fatalf("lane %d: Find(%x) = %d, want absent", l, k, i)
			}
		}
	}
	if tab.Total() != total || tab.Indexed() != indexed {
		t.Fatalf("Total %d Indexed %d, want %d %d", tab.Total(), tab.Indexed(), total, indexed)
	}
	idMask := uint32(1)<<tab.idxBits - 1
	cells := 0
	for pos, c := range tab.cells {
		if c == 0 {
			continue
		}
		cells++
		i := c&idMask - 1
		if !tab.IsIndexed(int(i)) {
			t.Fatalf("cell %d holds unindexed entry %d", pos, i)
		}
		home := tab.Hash(tab.Lane(int(i)), tab.Key(int(i))) & tab.mask
		if want := (uint64(pos) - home) & tab.mask; uint64(c>>tab.distShift) != want {
			t.Fatalf("cell %d: distance %d, want %d", pos, c>>tab.distShift, want)
		}
		if tag := c >> tab.idxBits & (1<<tab.tagBits - 1); tag != tab.tag(tab.Hash(tab.Lane(int(i)), tab.Key(int(i)))) {
			t.Fatalf("cell %d: tag %#x", pos, tag)
		}
	}
	if cells != indexed {
		t.Fatalf("%d cells for %d indexed entries", cells, indexed)
	}
}

// TestTableMatchesModel adds, touches, unindexes and removes random keys in two lanes, with
// keys that repeat across lanes, and checks the table against ordered lists and maps after
// each step; maxDist 1 forces index rebuilds on nearly every collision.
func TestTableMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		limits  []int
		maxDist uint32
		load    Load
	}{{[]int{1, 1}, 0, LoadHalf}, {[]int{7, 3}, 0, LoadDense}, {[]int{300, 100}, 0, LoadHalf}, {[]int{300, 100}, 1, LoadDense},
		{[]int{3000, 10}, 0, LoadDense}, {[]int{3000, 10}, 0, LoadHalf}} {
		t.Run(fmt.Sprintf("%v,maxDist=%d,load=%d", tc.limits, tc.maxDist, tc.load), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.limits[0]), 7))
			tab := NewTable[testKey, testVal](tc.load, tc.limits...)
			if tc.maxDist > 0 {
				tab.maxDist = tc.maxDist
			}
			pool := make([]testKey, 2*(tc.limits[0]+tc.limits[1])+3)
			for i := range pool {
				for j := range pool[i] {
					pool[i][j] = byte(rng.Uint32())
				}
			}
			order, ids := make([][]testKey, 2), make([][]int, 2)
			live := []map[testKey]int{{}, {}}
			steps := 20 * (tc.limits[0] + tc.limits[1])
			for step := range steps {
				l := rng.IntN(2)
				k := pool[rng.IntN(len(pool))]
				id, ok := live[l][k]
				if got := tab.Find(l, k); got != id && ok || !ok && got >= 0 {
					t.Fatalf("step %d: Find = %d, want %d (%v)", step, got, id, ok)
				}
				pos := slices.Index(ids[l], id)
				switch op := rng.IntN(10); {
				case !ok && op < 7: // add; at the bound the oldest goes first
					if tab.Full(l) {
						old := tab.Oldest(l)
						if live[l][*tab.Key(old)] == old {
							delete(live[l], *tab.Key(old))
						}
						tab.Remove(old)
						order[l], ids[l] = order[l][1:], ids[l][1:]
					}
					id := tab.Add(l, k, testVal{tag: uint32(l)})
					tab.Val(id).n = int64(id) * 7
					order[l], ids[l] = append(order[l], k), append(ids[l], id)
					live[l][k] = id
				case ok && op < 4: // touch
					tab.Touch(id)
					order[l] = append(slices.Delete(order[l], pos, pos+1), k)
					ids[l] = append(slices.Delete(ids[l], pos, pos+1), id)
				case ok && op < 6: // unindex: stays in order
					tab.Unindex(id)
					delete(live[l], k)
				case ok: // remove
					tab.Remove(id)
					delete(live[l], k)
					order[l] = slices.Delete(order[l], pos, pos+1)
					ids[l] = slices.Delete(ids[l], pos, pos+1)
				}
				if tc.limits[0] < 50 || step%max(tc.limits[0]/10, 7) == 0 {
					checkTable(t, tab, order, ids, live, nil)
				}
			}
			checkTable(t, tab, order, ids, live, nil)
			if len(tab.ents) > tab.Cap() || tab.Cap() != tc.limits[0]+tc.limits[1] {
				t.Fatalf("%d entries used of a slab of %d, limits %v", len(tab.ents), tab.Cap(), tc.limits)
			}
			tab.Free()
		})
	}
}

// TestTableCollisions: the same key in every lane is a different entry in each, and removing
// one keeps the others found; keys forced into probe runs of at most one cell (maxDist 1) make
// the index grow until every key is found.
func TestTableCollisions(t *testing.T) {
	tab := NewTable[testKey, testVal](LoadHalf, 5, 5, 5, 5, 5, 5, 5, 5)
	var k testKey
	for l := range MaxLanes {
		id := tab.Add(l, k, testVal{n: int64(l)})
		if id != l {
			t.Fatalf("lane %d: id %d, want %d (fresh ids in order)", l, id, l)
		}
	}
	for l := range MaxLanes {
		if id := tab.Find(l, k); id != l || tab.Val(id).n != int64(l) {
			t.Fatalf("lane %d: Find = %d", l, id)
		}
	}
	tab.Remove(3)
	if tab.Find(3, k) != -1 {
		t.Fatal("removed key found")
	}
	for _, l := range []int{0, 1, 2, 4, 5, 6, 7} {
		if id := tab.Find(l, k); id != l {
			t.Fatalf("after a removal, lane %d: Find = %d", l, id)
		}
	}
	tab2 := NewTable[testKey, testVal](LoadHalf, 200)
	tab2.maxDist = 1
	for i := range 200 {
		tab2.Add(0, testKey{byte(i), byte(i >> 8)}, testVal{n: int64(i)})
	}
	for i := range 200 {
		if id := tab2.Find(0, testKey{byte(i), byte(i >> 8)}); id != i {
			t.Fatalf("key %d: Find = %d", i, id)
		}
	}
	if len(tab2.cells) < 512 {
		t.Fatalf("%d cells: with probes of at most 1 the index must have grown past 256", len(tab2.cells))
	}
}

// TestTableEvictsOldestByCapacityAndAge: at the bound the caller removes Oldest, which is the
// first added unless touched since; entries carrying an expiry leave oldest first.
func TestTableEvictsOldestByCapacityAndAge(t *testing.T) {
	tab := NewTable[testKey, testVal](LoadHalf, 3)
	for i := range 3 {
		tab.Add(0, testKey{byte(i)}, testVal{n: int64(10 * i)}) // n: expiry
	}
	if !tab.Full(0) || tab.Oldest(0) != 0 {
		t.Fatalf("full %v oldest %d", tab.Full(0), tab.Oldest(0))
	}
	tab.Touch(0) // 0 becomes the newest: 1 is the oldest now
	tab.Val(0).n = 40
	if tab.Oldest(0) != 1 {
		t.Fatalf("oldest after touching 0: %d, want 1", tab.Oldest(0))
	}
	tab.Remove(tab.Oldest(0))
	id := tab.Add(0, testKey{9}, testVal{n: 50})
	if id != 1 {
		t.Fatalf("new entry got id %d, want 1 (the freed id)", id)
	}
	var got []byte
	for i := tab.Oldest(0); i >= 0; i = tab.Newer(i) {
		got = append(got, tab.Key(i)[0])
	}
	if !slices.Equal(got, []byte{2, 0, 9}) {
		t.Fatalf("order %v, want [2 0 9]", got)
	}
	// Expire everything due by 45: the oldest first, stopping at the first not due.
	var expired []byte
	for i := tab.Oldest(0); i >= 0 && tab.Val(i).n <= 45; i = tab.Oldest(0) {
		expired = append(expired, tab.Key(i)[0])
		tab.Remove(i)
	}
	if !slices.Equal(expired, []byte{2, 0}) || tab.Len(0) != 1 || tab.Find(0, testKey{9}) != 1 {
		t.Fatalf("expired %v, %d left", expired, tab.Len(0))
	}
}

// TestTableReusesIDs: removed ids come back newest-freed first, and the slab never grows past
// the highest id used.
func TestTableReusesIDs(t *testing.T) {
	tab := NewTable[testKey, testVal](LoadHalf, 10)
	for i := range 10 {
		tab.Add(0, testKey{byte(i)}, testVal{})
	}
	tab.Remove(4)
	tab.Remove(7)
	if a, b := tab.Add(0, testKey{20}, testVal{}), tab.Add(0, testKey{21}, testVal{}); a != 7 || b != 4 {
		t.Fatalf("reused ids %d, %d; want 7, 4", a, b)
	}
	if len(tab.ents) != 10 {
		t.Fatalf("slab in use %d, want 10", len(tab.ents))
	}
	if *tab.Val(7) != (testVal{}) {
		t.Fatalf("reused entry not cleared: %+v", *tab.Val(7))
	}
}

// TestTableBytes: the memory the table reports is its slab entries in use and its cells.
func TestTableBytes(t *testing.T) {
	tab := NewTable[testKey, testVal](LoadDense, 1000)
	if tab.EntryBytes() != int(unsafe.Sizeof(entry[testKey, testVal]{})+unsafe.Sizeof(link{})) || tab.EntryBytes() != 16+16+8 {
		t.Fatalf("entry is %d bytes, want 40", tab.EntryBytes())
	}
	if tab.Bytes() != 0 {
		t.Fatalf("empty table: %d bytes", tab.Bytes())
	}
	for i := range 100 {
		tab.Add(0, testKey{byte(i)}, testVal{})
	}
	// 100 entries at a load of at most 7/8 (LoadDense): 128 cells.
	if got, want := tab.Bytes(), 100*40+128*4; got != want || len(tab.cells) != 128 {
		t.Fatalf("Bytes = %d with %d cells, want %d", got, len(tab.cells), want)
	}
	tab.Remove(50)
	if got := tab.Bytes(); got != 100*40+128*4 {
		t.Fatalf("after a removal Bytes = %d: the slab in use does not shrink", got)
	}
	half := NewTable[testKey, testVal](LoadHalf, 1000)
	for i := range 100 {
		half.Add(0, testKey{byte(i)}, testVal{})
	}
	// At a load of at most 1/2: 256 cells.
	if got, want := half.Bytes(), 100*40+256*4; got != want {
		t.Fatalf("LoadHalf: Bytes = %d, want %d", got, want)
	}
	// A ring has no links: 32 bytes an entry. Its slab in use stops at the bound.
	ring := NewRing[testKey, testVal](LoadHalf, 50)
	for i := range 100 {
		if ring.Full(0) {
			ring.Remove(ring.Oldest(0))
		}
		ring.Add(0, testKey{byte(i)}, testVal{})
	}
	if got, want := ring.Bytes(), 50*32+128*4; got != want || ring.EntryBytes() != 32 {
		t.Fatalf("ring: Bytes = %d, want %d", got, want)
	}
}

// TestTableRefusesUnhashableKeys: keys whose equal values could differ in bytes.
func TestTableRefusesUnhashableKeys(t *testing.T) {
	for name, f := range map[string]func(){
		"padding": func() {
			NewTable[struct {
				a uint8
				b uint32
			}, int](LoadHalf, 1)
		},
		"float":   func() { NewTable[float64, int](LoadHalf, 1) },
		"pointer": func() { NewTable[*int, int](LoadHalf, 1) },
		"lanes":   func() { NewTable[testKey, int](LoadHalf) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
	NewTable[struct {
		a [3]byte
		b uint8
		c uint32
	}, int](LoadHalf, 1).Free() // no padding: fine
}

func TestTableSums(t *testing.T) {
	tab := NewTable[testKey, testVal](LoadHalf, 1)
	if tab.Sum64("ab", "/", "c") != tab.Sum64("ab/c") || tab.Sum64("a") == tab.Sum64("b") {
		t.Fatal("Sum64 is not the hash of the concatenation")
	}
	// A Hashed key is its own hash: its home cell comes from its bits as they are.
	h := NewRing[Hashed, testVal](LoadHalf, 100)
	if k := tab.Sum64("x"); h.Hash(0, &k) != uint64(k) || h.Hash(1, &k) != uint64(k)+0x9e3779b97f4a7c15 {
		t.Fatal("a Hashed key was hashed again")
	}
	for i := range 100 {
		h.Add(0, Hashed(i<<20), testVal{n: int64(i)}) // all at home cell 0: one probe run
	}
	for i := range 100 {
		if id := h.Find(0, Hashed(i<<20)); id != i {
			t.Fatalf("Hashed key %d: Find = %d", i, id)
		}
	}
	if x1, x2 := tab.Sum128("x"), tab.Sum128("x"); x1 != x2 || x1 == tab.Sum128("y") {
		t.Fatal("Sum128 not a function of its input")
	}
	other := NewTable[testKey, testVal](LoadHalf, 1)
	if other.Sum128("x") == tab.Sum128("x") {
		t.Fatal("two tables share a seed")
	}
}

// FuzzTable runs a program of operations read from the input against the table and a
// map-and-lists model: each byte picks an operation, a lane and a key of a small pool.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 201, 202, 100, 101})
	f.Add([]byte("the quick brown fox jumps over the lazy dog"))
	f.Fuzz(func(t *testing.T, prog []byte) {
		tab := NewTable[testKey, testVal](LoadHalf, 4, 2)
		tab.maxDist = 2
		order, ids := make([][]testKey, 2), make([][]int, 2)
		live := []map[testKey]int{{}, {}}
		for _, b := range prog {
			l, k := int(b>>3&1), testKey{b & 7}
			id, ok := live[l][k]
			if got := tab.Find(l, k); ok && got != id || !ok && got >= 0 {
				t.Fatalf("Find(%d, %d) = %d, want %d (%v)", l, k[0], got, id, ok)
			}
			pos := slices.Index(ids[l], id)
			switch op := b >> 4; {
			case !ok && op < 10:
				if tab.Full(l) {
					old := tab.Oldest(l)
					if live[l][*tab.Key(old)] == old {
						delete(live[l], *tab.Key(old))
					}
					tab.Remove(old)
					order[l], ids[l] = order[l][1:], ids[l][1:]
				}
				id := tab.Add(l, k, testVal{tag: uint32(l)})
				tab.Val(id).n = int64(id) * 7
				order[l], ids[l] = append(order[l], k), append(ids[l], id)
				live[l][k] = id
			case ok && op < 6:
				tab.Touch(id)
				order[l] = append(slices.Delete(order[l], pos, pos+1), k)
				ids[l] = append(slices.Delete(ids[l], pos, pos+1), id)
			case ok && op < 11:
				tab.Unindex(id)
				delete(live[l], k)
			case ok:
				tab.Remove(id)
				delete(live[l], k)
				order[l] = slices.Delete(order[l], pos, pos+1)
				ids[l] = slices.Delete(ids[l], pos, pos+1)
			}
			checkTable(t, tab, order, ids, live, nil)
		}
	})
}

// TestRingMatchesModel: a ring is a FIFO of its bound: ids in order, oldest removed first,
// unindexed entries keeping their place.
func TestRingMatchesModel(t *testing.T) {
	for _, limit := range []int{1, 2, 7, 100, 1000} {
		for _, load := range []Load{LoadHalf, LoadDense} {
			rng := rand.New(rand.NewPCG(uint64(limit), 3))
			runRing(t, NewRing[testKey, testVal](load, limit), func() byte { return byte(rng.IntN(256)) }, 30*limit+100, limit < 20)
		}
	}
}

// runRing runs a program of next() bytes against ring and a model, checking each step when
// every is set (else at the end).
func runRing(t *testing.T, ring *Table[testKey, testVal], next func() byte, steps int, every bool) {
	t.Helper()
	var order []testKey
	var ids []int
	live := map[testKey]int{}
	for range steps {
		b := next()
		k := testKey{b & 31, b >> 7}
		id, ok := live[k]
		if got := ring.Find(0, k); ok && got != id || !ok && got >= 0 {
			t.Fatalf("Find(%x) = %d, want %d (%v)", k[:2], got, id, ok)
		}
		switch {
		case !ok && b&64 == 0:
			if ring.Full(0) {
				old := ring.Oldest(0)
				if old != ids[0] {
					t.Fatalf("oldest %d, want %d", old, ids[0])
				}
				if live[order[0]] == old {
					delete(live, order[0])
				}
				ring.Remove(old)
				order, ids = order[1:], ids[1:]
			}
			id := ring.Add(0, k, testVal{tag: 0})
			ring.Val(id).n = int64(id) * 7
			if len(ids) > 0 && id != (ids[len(ids)-1]+1)%ring.Cap() {
				t.Fatalf("ring id %d after %d", id, ids[len(ids)-1])
			}
			order, ids = append(order, k), append(ids, id)
			live[k] = id
		case ok && b&64 != 0:
			ring.Unindex(id)
			delete(live, k)
			if ring.IsIndexed(id) {
				t.Fatalf("entry %d unindexed but IsIndexed", id)
			}
		case len(ids) > 0 && b&32 != 0:
			old := ring.Oldest(0)
			if live[order[0]] == old {
				delete(live, order[0])
			}
			ring.Remove(old)
			order, ids = order[1:], ids[1:]
		}
		if every {
			checkTable(t, ring, [][]testKey{order}, [][]int{ids}, []map[testKey]int{live}, nil)
		}
	}
	checkTable(t, ring, [][]testKey{order}, [][]int{ids}, []map[testKey]int{live}, nil)
	if len(ids) > 0 {
		func() {
			defer func() {
				if recover() == nil && len(ids) > 1 {
					t.Fatal("a ring removed an entry that was not its oldest")
				}
			}()
			ring.Remove(ids[len(ids)-1])
		}()
	}
}

// FuzzRing runs a program read from the input against a ring of 5 and a model, with probes of
// at most 2 cells so that the index rebuilds often.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 201, 202, 100, 101, 64, 65, 96})
	f.Fuzz(func(t *testing.T, prog []byte) {
		ring := NewRing[testKey, testVal](LoadDense, 5)
		ring.maxDist = 2
		i := 0
		runRing(t, ring, func() byte { i++; return prog[i-1] }, len(prog), true)
	})
}
