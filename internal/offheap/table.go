package offheap

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"reflect"
	"unsafe"
)

// MaxEntries bounds a Table: an entry's id + 1 and a probe distance of 7 bits share one 32-bit
// index cell.
const MaxEntries = 1 << 24

// MaxLanes bounds the lanes of a Table.
const MaxLanes = 8

// Table is a bounded keyed table outside the Go heap: a slab of entries (a key, a value, and
// their links in arrival order), an open-addressing index from key to entry, and a free list,
// so that an entry's id (its place in the slab) is stable while it lives and reused after.
// Callers keep whatever an entry cannot hold (strings, pointers) in their own maps or slices
// by id.
//
// Entries belong to lanes, each with its own bound and arrival order (oldest first): a key is
// looked up within its lane, so equal keys of different lanes are different entries. Nothing is
// evicted behind the caller's back: when Full(lane), the caller removes Oldest(lane) (and what
// it keeps by its id) before it adds. An entry may be Unindexed: Find no longer finds it, but
// it keeps its place in arrival order and counts towards its lane's bound until removed, for
// callers that age out a key's superseded entries in order.
//
// K and V must hold no pointers; K must also have no padding and no floating-point fields,
// because keys are hashed by their bytes. The hash is seeded per table: keys come from outside
// and must not choose their probe sequences.
//
// The index is Robin Hood linear probing over a power of two of 4-byte cells, each holding an
// entry's id + 1, a few bits of its key's hash and its distance from its home cell, filled up to
// a Load: a lookup reads an entry only for cells that share its home and hash bits, and a
// removal shifts the following cells back without hashing (no tombstones). The slab reserves
// every entry up front
// (the kernel adds pages as ids are first used); the index grows by doubling.
//
// A Table is not safe for concurrent use.
type Table[K comparable, V any] struct {
	mem     *Array[entry[K, V]]
	ents    []entry[K, V] // mem's entries up to the highest id ever used; capacity: the bound
	free    uint32        // first free id + 1; the free list is linked through entry.next
	lanes   []lane
	n       int // entries in arrival order, all lanes
	indexed int // entries the index finds

	// cells is the index: each cell holds an entry's id + 1 in its low idxBits bits, tagBits of
	// its key's hash above (so a probe reads an entry only when they match), and its distance
	// from its home cell at the top.
	cellMem   *Array[uint32]
	cells     []uint32
	mask      uint64
	idxBits   uint
	tagBits   uint
	distShift uint
	maxDist   uint32
	load      Load
	seeds     [2]maphash.Seed
}

type lane struct {
	head, tail uint32 // oldest and newest id + 1
	n, limit   int
}

// entry is one slot of the slab. prev packs the id + 1 of the entry before (idBits bits), the
// indexed flag and the lane; next is the id + 1 of the entry after, or of the next free one.
type entry[K, V any] struct {
	key        K
	val        V
	prev, next uint32
}

const (
	idBits      = 25 // holds MaxEntries (id + 1)
	idMask      = 1<<idBits - 1
	indexedFlag = 1 << idBits
	laneShift   = idBits + 1
	minCells    = 64
	distBits    = 7 // a probe distance of up to 127 cells; the bits left over hold the tag
)

// Load is how full a table's index may get before it doubles.
type Load uint8

const (
	// LoadHalf: at most half the cells in use (2 to 4 cells, 8 to 16 bytes, per entry); most
	// probes end at their first cell. For tables where lookups that miss are common.
	LoadHalf Load = 0
	// LoadDense: at most 7/8 of the cells in use (4.6 to 9 bytes per entry); probes run longer.
	// For large tables where memory counts more than a few nanoseconds a lookup.
	LoadDense Load = 3
)

// NewTable returns an empty table with one lane for each limit, holding at most limits[l]
// entries in lane l (each at least 0; all together at most MaxEntries, later lanes cut first),
// its index growing up to load.
func NewTable[K comparable, V any](load Load, limits ...int) *Table[K, V] {
	checkKey(reflect.TypeFor[K]())
	if len(limits) == 0 || len(limits) > MaxLanes {
		panic(fmt.Sprintf("offheap: %d lanes, want 1 to %d", len(limits), MaxLanes))
	}
	t := &Table[K, V]{load: load, lanes: make([]lane, len(limits)), seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	total := 0
	for l, n := range limits {
		n = min(max(n, 0), MaxEntries-total)
		t.lanes[l].limit = n
		total += n
	}
	total = max(total, 1)
	t.mem = New[entry[K, V]](total)
	t.ents = t.mem.Slice()[:0]
	t.idxBits = uint(bits.Len32(uint32(total)))
	t.tagBits = 32 - t.idxBits - min(32-t.idxBits, distBits)
	t.distShift = t.idxBits + t.tagBits
	t.maxDist = 1<<(32-t.distShift) - 1
	return t
}

// checkKey panics unless t's values are equal exactly when their bytes are: no pointers, no
// padding, no floats.
func checkKey(t reflect.Type) {
	if hasPointers(t) {
		panic(fmt.Sprintf("offheap: key %s holds pointers", t))
	}
	var ok func(reflect.Type) bool
	ok = func(t reflect.Type) bool {
		switch t.Kind() {
		case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
			return false
		case reflect.Array:
			return t.Len() == 0 || ok(t.Elem())
		case reflect.Struct:
			var sum uintptr
			for i := range t.NumField() {
				f := t.Field(i)
				if !ok(f.Type) {
					return false
				}
				sum += f.Type.Size()
			}
			return sum == t.Size()
		}
		return true
	}
	if !ok(t) {
		panic(fmt.Sprintf("offheap: key %s has padding or floats: equal keys could differ in bytes", t))
	}
}

// Cap is the bound on all lanes together.
func (t *Table[K, V]) Cap() int { return t.mem.Len() }

// Len is the number of entries in lane l, unindexed ones included.
func (t *Table[K, V]) Len(l int) int { return t.lanes[l].n }

// Total is the number of entries in all lanes, unindexed ones included.
func (t *Table[K, V]) Total() int { return t.n }

// Indexed is the number of entries Find can find.
func (t *Table[K, V]) Indexed() int { return t.indexed }

// Limit is lane l's bound.
func (t *Table[K, V]) Limit(l int) int { return t.lanes[l].limit }

// Full reports whether adding to lane l needs its oldest entry removed first.
func (t *Table[K, V]) Full(l int) bool { return t.lanes[l].n >= t.lanes[l].limit }

// Bytes is the memory of the entries and index cells in use, outside the Go heap: the slab up
// to the highest id used, and the index.
func (t *Table[K, V]) Bytes() int {
	return len(t.ents)*int(unsafe.Sizeof(entry[K, V]{})) + 4*len(t.cells)
}

// EntryBytes is what one entry takes in the slab, without its index cells.
func (t *Table[K, V]) EntryBytes() int { return int(unsafe.Sizeof(entry[K, V]{})) }

// Key returns entry id's key.
func (t *Table[K, V]) Key(id int) *K { return &t.ents[id].key }

// Val returns entry id's value, to read or change in place.
func (t *Table[K, V]) Val(id int) *V { return &t.ents[id].val }

// Lane returns the lane of entry id.
func (t *Table[K, V]) Lane(id int) int { return int(t.ents[id].prev >> laneShift) }

// IsIndexed reports whether Find finds entry id (it was not Unindexed).
func (t *Table[K, V]) IsIndexed(id int) bool { return t.ents[id].prev&indexedFlag != 0 }

// Oldest returns the oldest entry of lane l, or -1.
func (t *Table[K, V]) Oldest(l int) int { return int(t.lanes[l].head) - 1 }

// Newer returns the entry after id in its lane's arrival order, or -1.
func (t *Table[K, V]) Newer(id int) int { return int(t.ents[id].next) - 1 }

// Hash is the table's seeded hash of key k in lane l.
func (t *Table[K, V]) Hash(l int, k *K) uint64 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k))
	return maphash.Bytes(t.seeds[0], b) + uint64(l)*0x9e3779b97f4a7c15
}

// Sum64 is a seeded 64-bit hash of the strings' concatenation, built without concatenating
// them: for keys that are strings, kept as their hash.
func (t *Table[K, V]) Sum64(parts ...string) uint64 {
	if len(parts) == 1 {
		return maphash.String(t.seeds[1], parts[0])
	}
	var h maphash.Hash
	h.SetSeed(t.seeds[1])
	for _, p := range parts {
		h.WriteString(p)
	}
	return h.Sum64()
}

// Sum128 is a seeded 128-bit hash of s (two independent 64-bit hashes): for string keys kept
// as 16 bytes, which another string matches with odds of 2^-128.
func (t *Table[K, V]) Sum128(s string) (sum [16]byte) {
	h1, h2 := maphash.String(t.seeds[0], s), maphash.String(t.seeds[1], s)
	for i := range 8 {
		sum[i], sum[8+i] = byte(h1>>(8*i)), byte(h2>>(8*i))
	}
	return sum
}

// Find returns the indexed entry of lane l with key k, or -1.
func (t *Table[K, V]) Find(l int, k K) int {
	if t.lanes[l].n == 0 || t.indexed == 0 {
		return -1
	}
	h := t.Hash(l, &k)
	pos := h & t.mask
	idMask := uint32(1)<<t.idxBits - 1
	want := t.tag(h) << t.idxBits // the cell's low bits but the id
	lowMask := uint32(1)<<t.distShift - 1
	for d := uint32(0); ; d++ {
		c := t.cells[pos]
		cd := c >> t.distShift
		if c == 0 || cd < d {
			return -1
		}
		if cd == d && c&lowMask&^idMask == want {
			i := c&idMask - 1
			if e := &t.ents[i]; e.key == k && int(e.prev>>laneShift) == l {
				return int(i)
			}
		}
		pos = (pos + 1) & t.mask
	}
}

// Add puts key k with value v into lane l as its newest entry and returns its id. The key must
// not be indexed in the lane already, and the lane must not be Full.
func (t *Table[K, V]) Add(l int, k K, v V) int {
	if t.Full(l) {
		panic("offheap: Add to a full lane")
	}
	var i uint32
	if t.free != 0 {
		i = t.free - 1
		t.free = t.ents[i].next
	} else {
		// No free entry means fewer than the bound were ever used: the slab has room.
		i = uint32(len(t.ents))
		t.ents = t.ents[:i+1]
	}
	e := &t.ents[i]
	e.key, e.val, e.prev, e.next = k, v, uint32(l)<<laneShift|indexedFlag, 0
	t.link(i)
	t.n++
	t.lanes[l].n++
	t.indexed++
	if uint64(t.indexed) > uint64(len(t.cells))>>1+uint64(t.load)*uint64(len(t.cells))>>3 || !t.place(i) {
		t.rebuild(max(2*len(t.cells), minCells))
	}
	return int(i)
}

// Unindex takes entry id out of the index; it keeps its place in arrival order and in its
// lane's count until Remove.
func (t *Table[K, V]) Unindex(id int) {
	e := &t.ents[id]
	if e.prev&indexedFlag == 0 {
		return
	}
	t.unplace(uint32(id))
	e.prev &^= indexedFlag
	t.indexed--
}

// Remove forgets entry id; its id is reused by a later Add.
func (t *Table[K, V]) Remove(id int) {
	t.Unindex(id)
	i := uint32(id)
	t.unlink(i)
	t.lanes[t.ents[i].prev>>laneShift].n--
	t.n--
	t.ents[i] = entry[K, V]{next: t.free}
	t.free = i + 1
}

// Touch makes entry id the newest of its lane.
func (t *Table[K, V]) Touch(id int) {
	t.unlink(uint32(id))
	t.link(uint32(id))
}

// Free returns the table's memory at once; the table must not be used afterwards.
func (t *Table[K, V]) Free() {
	t.mem.Free()
	if t.cellMem != nil {
		t.cellMem.Free()
	}
	t.ents, t.cells = nil, nil
}

// tag is the bits of hash h a cell keeps: the top ones (the home cell comes from the bottom).
func (t *Table[K, V]) tag(h uint64) uint32 {
	if t.tagBits == 0 {
		return 0
	}
	return uint32(h >> (64 - t.tagBits))
}

// cellOf returns the index cell holding entry i.
func (t *Table[K, V]) cellOf(i uint32) uint64 {
	e := &t.ents[i]
	pos := t.Hash(int(e.prev>>laneShift), &e.key) & t.mask
	idMask := uint32(1)<<t.idxBits - 1
	for t.cells[pos]&idMask != i+1 {
		pos = (pos + 1) & t.mask
	}
	return pos
}

// unplace empties entry i's cell and shifts the cells after it back by one, up to an empty
// cell or one at its home.
func (t *Table[K, V]) unplace(i uint32) {
	pos := t.cellOf(i)
	for {
		next := (pos + 1) & t.mask
		c := t.cells[next]
		if c>>t.distShift == 0 { // empty, or at its home
			t.cells[pos] = 0
			return
		}
		t.cells[pos] = c - 1<<t.distShift
		pos = next
	}
}

// place puts entry i's cell into the index; false when a cell would land too far from its
// home, leaving some cell (maybe i's) out: the caller rebuilds the index then.
func (t *Table[K, V]) place(i uint32) bool {
	e := &t.ents[i]
	h := t.Hash(int(e.prev>>laneShift), &e.key)
	pos := h & t.mask
	cur, d := t.tag(h)<<t.idxBits|(i+1), uint32(0)
	for {
		c := t.cells[pos]
		if c == 0 {
			t.cells[pos] = d<<t.distShift | cur
			return true
		}
		if cd := c >> t.distShift; cd < d { // Robin Hood: the poorer probe takes the cell
			t.cells[pos] = d<<t.distShift | cur
			cur, d = c&(uint32(1)<<t.distShift-1), cd
		}
		pos = (pos + 1) & t.mask
		if d++; d > t.maxDist {
			return false
		}
	}
}

// rebuild indexes every indexed entry again into at least size cells (a power of two).
func (t *Table[K, V]) rebuild(size int) {
	for {
		old := t.cellMem
		t.cellMem = New[uint32](size)
		t.cells = t.cellMem.Slice()
		if old != nil {
			old.Free() // nothing refers to the old cells any more
		}
		t.mask = uint64(size - 1)
		ok := true
		for l := range t.lanes {
			for i := t.lanes[l].head; i != 0 && ok; i = t.ents[i-1].next {
				if t.ents[i-1].prev&indexedFlag != 0 {
					ok = t.place(i - 1)
				}
			}
		}
		if ok {
			return
		}
		size *= 2
	}
}

func (t *Table[K, V]) link(i uint32) {
	e := &t.ents[i]
	ln := &t.lanes[e.prev>>laneShift]
	e.prev, e.next = e.prev&^idMask|ln.tail, 0
	if ln.tail != 0 {
		t.ents[ln.tail-1].next = i + 1
	} else {
		ln.head = i + 1
	}
	ln.tail = i + 1
}

func (t *Table[K, V]) unlink(i uint32) {
	e := &t.ents[i]
	ln := &t.lanes[e.prev>>laneShift]
	prev := e.prev & idMask
	if prev != 0 {
		p := &t.ents[prev-1]
		p.next = e.next
	} else {
		ln.head = e.next
	}
	if e.next != 0 {
		n := &t.ents[e.next-1]
		n.prev = n.prev&^idMask | prev
	} else {
		ln.tail = prev
	}
	e.prev &^= idMask
	e.next = 0
}
