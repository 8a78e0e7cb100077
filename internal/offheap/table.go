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

// Table is a bounded keyed table outside the Go heap: a slab of entries (a key and a value),
// their arrival order, and an open-addressing index from key to entry, so that an entry's id
// (its place in the slab) is stable while it lives and reused after. Callers keep whatever an
// entry cannot hold (strings, pointers) in their own maps or slices by id.
//
// A table made by NewTable has lanes, each with its own bound and arrival order (oldest first):
// a key is looked up within its lane, so equal keys of different lanes are different entries.
// Any entry may be removed, and Touch makes one the newest again; freed ids are reused. Its
// order costs 8 bytes an entry of links, beside the slab.
//
// A table made by NewRing has one lane whose order is the slab itself, a ring: entries leave
// oldest first only (Remove of another panics), no Touch, and nothing beyond the entries.
//
// Nothing is evicted behind the caller's back: when Full(lane), the caller removes
// Oldest(lane) (and what it keeps by its id) before it adds. An entry may be Unindexed: Find no
// longer finds it, but it keeps its place in arrival order and counts towards its lane's bound
// until removed, for callers that age out a key's superseded entries in order.
//
// K and V must hold no pointers; K must also have no padding and no floating-point fields,
// because keys are hashed by their bytes. The hash is seeded per table: keys come from outside
// and must not choose their probe sequences.
//
// The index is Robin Hood linear probing over a power of two of 4-byte cells, each holding an
// entry's id + 1, a few bits of its key's hash and its distance from its home cell, filled up to
// a Load: a lookup reads an entry only for cells that share its home and hash bits, and a
// removal shifts the following cells back without hashing (no tombstones). The slab reserves
// every entry up front (the kernel adds pages as ids are first used); the index grows by
// doubling.
//
// A Table is not safe for concurrent use.
type Table[K comparable, V any] struct {
	mem   *Array[entry[K, V]]
	ents  []entry[K, V] // mem's entries up to the highest id ever used; capacity: the bound
	lanes []lane
	n     int // entries in arrival order, all lanes
	// indexed counts the entries the index finds.
	indexed int

	// Linked tables (NewTable): the order, lane and indexed flag of each entry, and the free
	// list. Rings leave these nil and keep their order in lanes[0]: head is the oldest id.
	linkMem *Array[link]
	links   []link
	free    uint32 // first free id + 1; the free list is linked through link.next

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
	hashed    bool // K is Hashed: keys are their own hash
}

// Hashed is a key that is already a seeded hash: the table's own Sum64 of what the caller
// keys by. The index uses it as it is instead of hashing it again.
type Hashed uint64

type lane struct {
	head, tail uint32 // linked: oldest and newest id + 1; ring: head is the oldest id
	n, limit   int
}

type entry[K, V any] struct {
	key K
	val V
}

// link is a linked table's order of one entry. prev packs the id + 1 of the entry before
// (idBits bits), the indexed flag and the lane; next is the id + 1 of the entry after, or of
// the next free one.
type link struct{ prev, next uint32 }

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

// NewTable returns an empty linked table with one lane for each limit, holding at most
// limits[l] entries in lane l (each at least 0; all together at most MaxEntries, later lanes
// cut first), its index growing up to load.
func NewTable[K comparable, V any](load Load, limits ...int) *Table[K, V] {
	if len(limits) == 0 || len(limits) > MaxLanes {
		panic(fmt.Sprintf("offheap: %d lanes, want 1 to %d", len(limits), MaxLanes))
	}
	t := newTable[K, V](load, limits)
	t.linkMem = New[link](t.Cap())
	t.links = t.linkMem.Slice()
	return t
}

// NewRing returns an empty ring of at most limit entries (at most MaxEntries), its index
// growing up to load.
func NewRing[K comparable, V any](load Load, limit int) *Table[K, V] {
	return newTable[K, V](load, []int{limit})
}

func newTable[K comparable, V any](load Load, limits []int) *Table[K, V] {
	checkKey(reflect.TypeFor[K]())
	t := &Table[K, V]{load: load, lanes: make([]lane, len(limits)), seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		hashed: reflect.TypeFor[K]() == reflect.TypeFor[Hashed]()}
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

// Full reports whether adding to lane l needs its oldest entry removed first.
func (t *Table[K, V]) Full(l int) bool { return t.lanes[l].n >= t.lanes[l].limit }

// Bytes is the memory in use outside the Go heap: the entries (and a linked table's links) up
// to the highest id used, and the index cells.
func (t *Table[K, V]) Bytes() int { return len(t.ents)*t.EntryBytes() + 4*len(t.cells) }

// EntryBytes is what one entry takes, without its index cells: its slot, and its links in a
// linked table.
func (t *Table[K, V]) EntryBytes() int {
	n := int(unsafe.Sizeof(entry[K, V]{}))
	if t.links != nil {
		n += int(unsafe.Sizeof(link{}))
	}
	return n
}

// Key returns entry id's key.
func (t *Table[K, V]) Key(id int) *K { return &t.ents[id].key }

// Val returns entry id's value, to read or change in place.
func (t *Table[K, V]) Val(id int) *V { return &t.ents[id].val }

// Lane returns the lane of entry id.
func (t *Table[K, V]) Lane(id int) int {
	if t.links == nil {
		return 0
	}
	return int(t.links[id].prev >> laneShift)
}

// IsIndexed reports whether Find finds entry id (it was not Unindexed).
func (t *Table[K, V]) IsIndexed(id int) bool {
	if t.links == nil {
		return t.cellOf(uint32(id)) >= 0
	}
	return t.links[id].prev&indexedFlag != 0
}

// Oldest returns the oldest entry of lane l, or -1.
func (t *Table[K, V]) Oldest(l int) int {
	if t.links == nil {
		if t.lanes[0].n == 0 {
			return -1
		}
		return int(t.lanes[0].head)
	}
	return int(t.lanes[l].head) - 1
}

// Newer returns the entry after id in its lane's arrival order, or -1.
func (t *Table[K, V]) Newer(id int) int {
	if t.links == nil {
		r := &t.lanes[0]
		if (id-int(r.head)+r.limit)%r.limit+1 >= r.n {
			return -1
		}
		return (id + 1) % r.limit
	}
	return int(t.links[id].next) - 1
}

// Hash is the table's seeded hash of key k in lane l.
func (t *Table[K, V]) Hash(l int, k *K) uint64 {
	if t.hashed {
		return *(*uint64)(unsafe.Pointer(k)) + uint64(l)*0x9e3779b97f4a7c15
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k))
	return maphash.Bytes(t.seeds[0], b) + uint64(l)*0x9e3779b97f4a7c15
}

// Sum64 is a seeded 64-bit hash of the strings' concatenation, built without concatenating
// them: for keys that are strings, kept as their Hashed hash.
func (t *Table[K, V]) Sum64(parts ...string) Hashed {
	if len(parts) == 1 {
		return Hashed(maphash.String(t.seeds[1], parts[0]))
	}
	var h maphash.Hash
	h.SetSeed(t.seeds[1])
	for _, p := range parts {
		h.WriteString(p)
	}
	return Hashed(h.Sum64())
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
	if t.indexed == 0 {
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
			if t.ents[i].key == k && (t.links == nil || int(t.links[i].prev>>laneShift) == l) {
				return int(i)
			}
		}
		pos = (pos + 1) & t.mask
	}
}

// Add puts key k with value v into lane l as its newest entry and returns its id. The key must
// not be indexed in the lane already, and the lane must not be Full.
func (t *Table[K, V]) Add(l int, k K, v V) int {
	ln := &t.lanes[l]
	if ln.n >= ln.limit {
		panic("offheap: Add to a full lane")
	}
	var i uint32
	switch {
	case t.links == nil: // the slot after the newest
		i = uint32((int(ln.head) + ln.n) % ln.limit)
		if int(i) >= len(t.ents) {
			t.ents = t.ents[:i+1]
		}
	case t.free != 0:
		i = t.free - 1
		t.free = t.links[i].next
	default:
		// No free entry means fewer than the bound were ever used: the slab has room.
		i = uint32(len(t.ents))
		t.ents = t.ents[:i+1]
	}
	t.ents[i] = entry[K, V]{k, v}
	if t.links != nil {
		t.links[i].prev = uint32(l)<<laneShift | indexedFlag
		t.link(i)
	}
	t.n++
	ln.n++
	t.indexed++
	if uint64(t.indexed) > uint64(len(t.cells))>>1+uint64(t.load)*uint64(len(t.cells))>>3 {
		t.rebuild(max(2*len(t.cells), minCells), i+1)
	} else if out := t.place(i); out != 0 {
		t.rebuild(2*len(t.cells), out)
	}
	return int(i)
}

// Unindex takes entry id out of the index; it keeps its place in arrival order and in its
// lane's count until Remove.
func (t *Table[K, V]) Unindex(id int) {
	if t.links != nil && t.links[id].prev&indexedFlag == 0 {
		return
	}
	pos := t.cellOf(uint32(id))
	if pos < 0 {
		return // a ring's entry, unindexed already
	}
	t.unplace(uint64(pos))
	if t.links != nil {
		t.links[id].prev &^= indexedFlag
	}
	t.indexed--
}

// Remove forgets entry id; its id is reused by a later Add. In a ring only the oldest entry
// may be removed.
func (t *Table[K, V]) Remove(id int) {
	t.Unindex(id)
	i := uint32(id)
	if t.links == nil {
		r := &t.lanes[0]
		if r.n == 0 || i != r.head {
			panic("offheap: a ring removes its oldest entry only")
		}
		r.head = (r.head + 1) % uint32(r.limit)
		r.n--
		t.n--
		t.ents[i] = entry[K, V]{}
		return
	}
	t.unlink(i)
	t.lanes[t.links[i].prev>>laneShift].n--
	t.n--
	t.ents[i] = entry[K, V]{}
	t.links[i] = link{next: t.free}
	t.free = i + 1
}

// Touch makes entry id the newest of its lane. Rings have no Touch.
func (t *Table[K, V]) Touch(id int) {
	if t.links == nil {
		panic("offheap: Touch on a ring")
	}
	t.unlink(uint32(id))
	t.link(uint32(id))
}

// Free returns the table's memory at once; the table must not be used afterwards.
func (t *Table[K, V]) Free() {
	t.mem.Free()
	if t.linkMem != nil {
		t.linkMem.Free()
	}
	if t.cellMem != nil {
		t.cellMem.Free()
	}
	t.ents, t.links, t.cells = nil, nil, nil
}

// tag is the bits of hash h a cell keeps: the top ones (the home cell comes from the bottom).
func (t *Table[K, V]) tag(h uint64) uint32 {
	if t.tagBits == 0 {
		return 0
	}
	return uint32(h >> (64 - t.tagBits))
}

// cellOf returns the index cell holding entry i, or -1 when none does.
func (t *Table[K, V]) cellOf(i uint32) int64 {
	if len(t.cells) == 0 {
		return -1
	}
	pos := t.Hash(t.Lane(int(i)), &t.ents[i].key) & t.mask
	idMask := uint32(1)<<t.idxBits - 1
	for d := uint32(0); ; d++ {
		c := t.cells[pos]
		if c == 0 || c>>t.distShift < d {
			return -1
		}
		if c&idMask == i+1 {
			return int64(pos)
		}
		pos = (pos + 1) & t.mask
	}
}

// unplace empties cell pos and shifts the cells after it back by one, up to an empty cell or
// one at its home.
func (t *Table[K, V]) unplace(pos uint64) {
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

// place puts entry i's cell into the index. It returns 0, or, when a cell would land too far
// from its home, the id + 1 of the entry whose cell it left out (maybe i's): the caller
// rebuilds the index then.
func (t *Table[K, V]) place(i uint32) uint32 {
	h := t.Hash(t.Lane(int(i)), &t.ents[i].key)
	pos := h & t.mask
	cur, d := t.tag(h)<<t.idxBits|(i+1), uint32(0)
	for {
		c := t.cells[pos]
		if c == 0 {
			t.cells[pos] = d<<t.distShift | cur
			return 0
		}
		if cd := c >> t.distShift; cd < d { // Robin Hood: the poorer probe takes the cell
			t.cells[pos] = d<<t.distShift | cur
			cur, d = c&(uint32(1)<<t.distShift-1), cd
		}
		pos = (pos + 1) & t.mask
		if d++; d > t.maxDist {
			return cur & (uint32(1)<<t.idxBits - 1)
		}
	}
}

// rebuild indexes the entries of the cells again, with entry out − 1 (left out of them), into
// at least size cells (a power of two). The old cells stay until the new ones hold every entry.
func (t *Table[K, V]) rebuild(size int, out uint32) {
	idMask := uint32(1)<<t.idxBits - 1
	oldMem, old := t.cellMem, t.cells
	for {
		t.cellMem = New[uint32](size)
		t.cells = t.cellMem.Slice()
		t.mask = uint64(size - 1)
		ok := t.place(out-1) == 0
		for _, c := range old {
			if !ok {
				break
			}
			if c != 0 {
				ok = t.place(c&idMask-1) == 0
			}
		}
		if ok {
			break
		}
		t.cellMem.Free()
		size *= 2
	}
	if oldMem != nil {
		oldMem.Free() // nothing refers to the old cells any more
	}
}

func (t *Table[K, V]) link(i uint32) {
	e := &t.links[i]
	ln := &t.lanes[e.prev>>laneShift]
	e.prev, e.next = e.prev&^idMask|ln.tail, 0
	if ln.tail != 0 {
		t.links[ln.tail-1].next = i + 1
	} else {
		ln.head = i + 1
	}
	ln.tail = i + 1
}

func (t *Table[K, V]) unlink(i uint32) {
	e := &t.links[i]
	ln := &t.lanes[e.prev>>laneShift]
	prev := e.prev & idMask
	if prev != 0 {
		t.links[prev-1].next = e.next
	} else {
		ln.head = e.next
	}
	if e.next != 0 {
		n := &t.links[e.next-1]
		n.prev = n.prev&^idMask | prev
	} else {
		ln.tail = prev
	}
	e.prev &^= idMask
	e.next = 0
}
