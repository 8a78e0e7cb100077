package join

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"time"
	"unsafe"

	"github.com/ragwatch/ragwatch/internal/hexid"
	"github.com/ragwatch/ragwatch/internal/offheap"
)

// table holds what the join remembers of each key — a trace (feedback and labels wait for
// their record by trace id), a shadow pair (by pair id) or a conversation session (by session
// id) — in memory that the garbage collector
// never has to scan: a slab of fixed-size slots without pointers, linked in arrival order (the
// oldest is evicted or expires first), and an open-addressing index from trace id to slot. At
// the default bound (200,000 traces) that is ≈ 45 bytes per trace instead of ≈ 300 with a map of
// pointers to entries in a container/list.
//
// Slab and index live outside the Go heap (internal/offheap), so that the garbage collector's
// heap goal, about twice the live heap, does not double them in resident memory too (≈ 9 MB
// at the default bound, a third of the process's own memory at 1,000 traces/s). The slab
// reserves room for max slots up front; the kernel adds its pages as slots are first used.
//
// A trace id of 32 lowercase hex characters (what OTLP carries) is kept as its 16 bytes; a
// span id of 16 as its 8; the service as a reference to one shared copy of its name.
// Whatever does not fit goes to small side maps, so nothing is lost: other trace ids to rawIDs
// (≈ 102 bytes per trace in all), other span ids and feedback waiting for its record to extra.
//
// Every slot carries its namespace (nsTrace, nsPair, nsSession): the index is shared, ids of
// different namespaces never match, and each namespace has its own arrival list and bound, so
// the oldest trace, pair or session is evicted or expires first within its own kind.
//
// A table is not safe for concurrent use: the Join guards it with its mutex.
type table struct {
	slotMem    *offheap.Array[slot]
	slots      []slot // slotMem's slots in use; its capacity is max
	cellMem    *offheap.Array[uint32]
	free       uint32        // first free slot + 1 (the free list is linked through slot.next)
	head, tail [numNS]uint32 // per namespace: oldest and newest slot + 1
	count      [numNS]int    // per namespace: keys held
	limit      [numNS]int    // per namespace: bound on count
	n          int           // keys held in all
	max        int           // bound on n: the sum of the limits

	// cells is the index: Robin Hood linear probing over power-of-two cells, each holding
	// slot index + 1 in its low idxBits bits and its distance from its home cell above. The
	// distance tells which cells share a probe's home, so a lookup reads a slot (to compare
	// ids) only for those, and a removal shifts the cells after it back without hashing.
	cells   []uint32
	mask    uint64
	idxBits uint
	maxDist uint32
	seed    maphash.Seed
	rawSeed maphash.Seed // second seed: a non-hex id's 16 bytes are two hashes of it

	rawIDs map[uint32]string // by slot index: trace ids not in OTLP's hex form (flagRawID)
	extra  map[uint32]*extra // by slot index

	svcNames  []string // interned services by id-1; refs counts the slots naming each
	svcRefs   []int
	svcByName map[string]uint32
	svcFree   []uint32
	lastSvc   uint32 // the id of the last service interned: records mostly repeat it
}

// slot is one remembered trace; it holds no pointers. 40 bytes: every field is packed, as the
// join keeps one for each of the last max_entries traces. The record's time is not kept:
// nothing joined later needs it (feedback and labels carry their own).
type slot struct {
	id         [16]byte // the trace id decoded from hex, or (flagRawID) two hashes of it
	span       [8]byte  // the record's span id decoded from hex (flagSpan)
	prev, next uint32   // arrival order (slot + 1); next also links the free list
	expires    int32    // whole seconds after Join.base, rounded up (expiresNS)
	// meta packs the record's service (the id of its interned name, 0 = none: svcBits bits),
	// the flags (4 bits, one spare) and the key's namespace (2 bits).
	meta uint32
}

// svcBits holds any service id: ids count the names the slots refer to, at most
// maxTableEntries.
const svcBits = 25

func (s *slot) svc() uint32      { return s.meta & (1<<svcBits - 1) }
func (s *slot) setSvc(id uint32) { s.meta = s.meta&^(1<<svcBits-1) | id }
func (s *slot) flags() uint8     { return uint8(s.meta>>svcBits) & 0xf }
func (s *slot) setFlags(f uint8) { s.meta = s.meta&^(0xf<<svcBits) | uint32(f)<<svcBits }
func (s *slot) ns() uint8        { return uint8(s.meta >> (svcBits + 4)) }

// newSlot is a slot of namespace ns for key id, expiring expires nanoseconds after Join.base.
func newSlot(id [16]byte, ns uint8, expires int64) slot {
	return slot{id: id, expires: expirySeconds(expires), meta: uint32(ns) << (svcBits + 4)}
}

// expirySeconds rounds an expiry in nanoseconds after Join.base up to whole seconds: an entry
// lives less than a second longer than asked, within the sweep's own granularity (a second at
// least). Division truncates towards zero, which rounds a past expiry (negative) up too.
func expirySeconds(ns int64) int32 {
	sec := ns / int64(time.Second)
	if ns%int64(time.Second) > 0 {
		sec++
	}
	return int32(min(max(sec, math.MinInt32), math.MaxInt32))
}

// expiresNS is the slot's expiry in nanoseconds after Join.base.
func (s *slot) expiresNS() int64 { return int64(s.expires) * int64(time.Second) }

// Namespaces of the table's keys.
const (
	nsTrace   uint8 = iota // a trace id: feedback and labels wait here for their record
	nsPair                 // a pair id: the first record of a shadow pair waits for the second
	nsSession              // a session id: a conversation's turn count and last turns
	numNS
)

const (
	flagSeen  uint8 = 1 << iota // the record was seen (here or, joined remotely, elsewhere)
	flagRawID                   // id is a hash: the trace id itself is in rawIDs
	flagSpan                    // span holds the record's span id
)

// extra is what a slot cannot hold. Few traces have one: those with feedback or labels
// waiting for their record, and those whose span id or time are not in the OTLP form. Every
// pair and session slot has one: its state.
type extra struct {
	id      string // the key's id (trace, pair or session id)
	spanID  string // a span id that is not 16 lowercase hex characters
	pending []pending
	pair    *pairState    // nsPair
	sess    *sessionState // nsSession
}

// maxTableEntries bounds max_entries so that a slot index and a probe distance of at least
// 7 bits share one uint32 cell (16.7 million traces ≈ 1 GiB).
const maxTableEntries = 1 << 24

const minCells = 64

// newTable returns a table for traces only (tests).
func newTable(maxEntries int) *table { return newTableNS([numNS]int{nsTrace: maxEntries}) }

// newTableNS returns a table holding at most limits[ns] keys of each namespace.
func newTableNS(limits [numNS]int) *table {
	maxEntries := 0
	for ns := range limits { // the sum stays within maxTableEntries: each namespace's bound is met first
		limits[ns] = min(max(limits[ns], 0), maxTableEntries-maxEntries)
		maxEntries += limits[ns]
	}
	maxEntries = max(maxEntries, 1)
	t := &table{max: maxEntries, limit: limits, seed: maphash.MakeSeed(), rawSeed: maphash.MakeSeed(),
		rawIDs: map[uint32]string{}, extra: map[uint32]*extra{}, svcByName: map[string]uint32{}}
	t.slotMem = offheap.New[slot](maxEntries)
	t.slots = t.slotMem.Slice()[:0]
	t.idxBits = uint(bits.Len32(uint32(maxEntries)))
	t.maxDist = 1<<(32-t.idxBits) - 1
	return t
}

// offHeapBytes is the memory of the slots and index cells in use, outside the Go heap.
func (t *table) offHeapBytes() int {
	return len(t.slots)*int(unsafe.Sizeof(slot{})) + len(t.cells)*4
}

// traceKey is a key (a trace id, or a pair or session id) in slot form.
type traceKey struct {
	id  [16]byte
	raw bool
	ns  uint8
}

func (t *table) key(traceID string) traceKey { return t.keyNS(nsTrace, traceID) }

func (t *table) keyNS(ns uint8, id string) traceKey {
	k := traceKey{ns: ns}
	if len(id) == 32 && hexid.Decode(k.id[:], id) {
		return k
	}
	k.raw = true
	h1, h2 := maphash.String(t.seed, id), maphash.String(t.rawSeed, id)
	for i := range 8 {
		k.id[i], k.id[8+i] = byte(h1>>(8*i)), byte(h2>>(8*i))
	}
	return k
}

// hash places a key in the index; the namespace moves a pair or session id away from the
// trace with the same id.
func (t *table) hash(id *[16]byte, ns uint8) uint64 {
	return maphash.Bytes(t.seed, id[:]) + uint64(ns)*0x9e3779b97f4a7c15
}

// find returns the slot holding traceID, or -1.
func (t *table) find(traceID string) int { return t.findNS(nsTrace, traceID) }

// findNS returns the slot holding id in namespace ns, or -1.
func (t *table) findNS(ns uint8, id string) int {
	if t.count[ns] == 0 {
		return -1
	}
	return t.lookup(t.keyNS(ns, id), id)
}

// lookup returns the slot holding the trace of key k (traceID), or -1.
func (t *table) lookup(k traceKey, traceID string) int {
	if t.count[k.ns] == 0 {
		return -1
	}
	pos := t.hash(&k.id, k.ns) & t.mask
	idxMask := uint32(1)<<t.idxBits - 1
	for d := uint32(0); ; d++ {
		c := t.cells[pos]
		cd := c >> t.idxBits
		if c == 0 || cd < d {
			return -1
		}
		if cd == d {
			i := c&idxMask - 1
			s := &t.slots[i]
			if s.id == k.id && s.ns() == k.ns && (s.flags()&flagRawID != 0) == k.raw && (!k.raw || t.rawIDs[i] == traceID) {
				return int(i)
			}
		}
		pos = (pos + 1) & t.mask
	}
}

// full reports whether adding a trace needs the oldest evicted first.
func (t *table) full() bool { return t.fullNS(nsTrace) }

// fullNS reports whether adding a key of namespace ns needs its oldest evicted first.
func (t *table) fullNS(ns uint8) bool { return t.count[ns] >= t.limit[ns] }

// add remembers a new trace (absent, and the table not full) as the newest and returns its
// slot.
func (t *table) add(k traceKey, traceID string, expires int64) int {
	var i uint32
	if t.free != 0 {
		i = t.free - 1
		t.free = t.slots[i].next
	} else {
		// No free slot means fewer than max were ever used (n < max here): the slab has room.
		i = uint32(len(t.slots))
		t.slots = t.slots[:i+1]
	}
	s := &t.slots[i]
	*s = newSlot(k.id, k.ns, expires)
	if k.raw {
		s.setFlags(flagRawID)
		t.rawIDs[i] = traceID
	}
	t.link(i)
	t.n++
	t.count[k.ns]++
	if uint64(t.n) > uint64(len(t.cells))/8*7 || !t.place(i) {
		t.rebuild(max(2*len(t.cells), minCells))
	}
	return int(i)
}

// remove forgets slot i. Its extra, if any, is dropped: callers take what they need first.
func (t *table) remove(i int) {
	s := &t.slots[i]
	pos := t.hash(&s.id, s.ns()) & t.mask
	idxMask := uint32(1)<<t.idxBits - 1
	for t.cells[pos]&idxMask != uint32(i)+1 {
		pos = (pos + 1) & t.mask
	}
	for { // shift the cells after it back by one, up to an empty cell or one at its home
		next := (pos + 1) & t.mask
		c := t.cells[next]
		if c>>t.idxBits == 0 { // empty, or at its home
			t.cells[pos] = 0
			break
		}
		t.cells[pos] = c - 1<<t.idxBits
		pos = next
	}
	t.unlink(uint32(i))
	t.svcUnref(s.svc())
	if s.flags()&flagRawID != 0 {
		delete(t.rawIDs, uint32(i))
	}
	delete(t.extra, uint32(i))
	t.count[s.ns()]--
	*s = slot{next: t.free}
	t.free = uint32(i) + 1
	t.n--
}

// place puts slot i's cell into the index; false when a cell would land too far from its
// home, leaving some cell (maybe i's) out: the caller rebuilds the index then.
func (t *table) place(i uint32) bool {
	pos := t.hash(&t.slots[i].id, t.slots[i].ns()) & t.mask
	cur, d := i+1, uint32(0)
	for {
		c := t.cells[pos]
		if c == 0 {
			t.cells[pos] = d<<t.idxBits | cur
			return true
		}
		if cd := c >> t.idxBits; cd < d { // Robin Hood: the poorer probe takes the cell
			t.cells[pos] = d<<t.idxBits | cur
			cur, d = c&(uint32(1)<<t.idxBits-1), cd
		}
		pos = (pos + 1) & t.mask
		if d++; d > t.maxDist {
			return false
		}
	}
}

// rebuild re-indexes every slot into at least size cells (a power of two).
func (t *table) rebuild(size int) {
	for {
		old := t.cellMem
		t.cellMem = offheap.New[uint32](size)
		t.cells = t.cellMem.Slice()
		if old != nil {
			old.Free() // nothing refers to the old cells any more
		}
		t.mask = uint64(size - 1)
		ok := true
		for ns := range t.head {
			for i := t.head[ns]; i != 0 && ok; i = t.slots[i-1].next {
				ok = t.place(i - 1)
			}
		}
		if ok {
			return
		}
		size *= 2
	}
}

func (t *table) link(i uint32) {
	s := &t.slots[i]
	ns := s.ns()
	s.prev, s.next = t.tail[ns], 0
	if t.tail[ns] != 0 {
		t.slots[t.tail[ns]-1].next = i + 1
	} else {
		t.head[ns] = i + 1
	}
	t.tail[ns] = i + 1
}

func (t *table) unlink(i uint32) {
	s := &t.slots[i]
	ns := s.ns()
	if s.prev != 0 {
		t.slots[s.prev-1].next = s.next
	} else {
		t.head[ns] = s.next
	}
	if s.next != 0 {
		t.slots[s.next-1].prev = s.prev
	} else {
		t.tail[ns] = s.prev
	}
	s.prev, s.next = 0, 0
}

// touch makes slot i the newest, expiring at expires.
func (t *table) touch(i int, expires int64) {
	t.unlink(uint32(i))
	t.link(uint32(i))
	t.slots[i].expires = expirySeconds(expires)
}

// oldest returns the oldest trace slot, or -1.
func (t *table) oldest() int { return t.oldestNS(nsTrace) }

// oldestNS returns the oldest slot of namespace ns, or -1.
func (t *table) oldestNS(ns uint8) int { return int(t.head[ns]) - 1 }

// ext returns slot i's extra, creating it (for traceID) when create is set.
func (t *table) ext(i int, traceID string, create bool) *extra {
	x := t.extra[uint32(i)]
	if x == nil && create {
		x = &extra{id: traceID}
		t.extra[uint32(i)] = x
	}
	return x
}

// tidy drops slot i's extra when the slot holds everything again.
func (t *table) tidy(i int) {
	x := t.extra[uint32(i)]
	if x != nil && x.spanID == "" && len(x.pending) == 0 && x.pair == nil && x.sess == nil {
		delete(t.extra, uint32(i))
	}
}

// pendingOf returns the feedback waiting in slot i.
func (t *table) pendingOf(i int) []pending {
	if x := t.extra[uint32(i)]; x != nil {
		return x.pending
	}
	return nil
}

// setSeen records that the record of slot i (its trace traceID) was seen, with its ids.
func (t *table) setSeen(i int, traceID, service, spanID string) {
	s := &t.slots[i]
	s.setFlags(s.flags()&flagRawID | flagSeen)
	if id := t.svcRef(service); id != s.svc() {
		t.svcUnref(s.svc())
		s.setSvc(id)
	} else {
		t.svcUnref(id) // the slot already held a reference
	}
	x := t.extra[uint32(i)]
	if x != nil {
		x.spanID = ""
	}
	switch {
	case spanID == "":
	case len(spanID) == 16 && hexid.Decode(s.span[:], spanID):
		s.setFlags(s.flags() | flagSpan)
	default:
		x = t.ext(i, traceID, true)
		x.spanID = spanID
	}
	t.tidy(i)
}

// seen returns the record ids of slot i: whether it was seen, its service and span id.
func (t *table) seen(i int) (ok bool, service, spanID string) {
	s := &t.slots[i]
	if s.flags()&flagSeen == 0 {
		return false, "", ""
	}
	if id := s.svc(); id != 0 {
		service = t.svcNames[id-1]
	}
	if s.flags()&flagSpan != 0 {
		spanID = hexid.Encode(s.span[:])
	}
	if x := t.extra[uint32(i)]; x != nil && x.spanID != "" {
		spanID = x.spanID
	}
	return true, service, spanID
}

// svcRef returns the id of the interned service name, adding a reference.
func (t *table) svcRef(name string) uint32 {
	if name == "" {
		return 0
	}
	id := t.lastSvc
	if id == 0 || t.svcNames[id-1] != name {
		id = t.svcByName[name]
		if id == 0 {
			name = strings.Clone(name) // not a slice of a larger buffer the record may hold
			if n := len(t.svcFree); n > 0 {
				id = t.svcFree[n-1]
				t.svcFree = t.svcFree[:n-1]
				t.svcNames[id-1] = name
			} else {
				t.svcNames = append(t.svcNames, name)
				t.svcRefs = append(t.svcRefs, 0)
				id = uint32(len(t.svcNames))
			}
			t.svcByName[name] = id
		}
		t.lastSvc = id
	}
	t.svcRefs[id-1]++
	return id
}

func (t *table) svcUnref(id uint32) {
	if id == 0 {
		return
	}
	if t.svcRefs[id-1]--; t.svcRefs[id-1] > 0 {
		return
	}
	delete(t.svcByName, t.svcNames[id-1])
	t.svcNames[id-1] = ""
	t.svcFree = append(t.svcFree, id)
	if t.lastSvc == id {
		t.lastSvc = 0
	}
}
