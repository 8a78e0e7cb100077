package assemble

import (
	"hash/maphash"
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/internal/offheap"
)

// recentSet remembers the ids of the last n assembled traces, so that spans arriving after
// their trace was assembled are counted as late instead of starting a new partial trace.
//
// It is a ring of ids, oldest overwritten first, indexed by a linear-probing hash table at
// most half full whose cells hold a ring position and 32 bits of the id's hash (so a probe
// reads the ring only on a likely match, and a removal finds each cell's home without hashing
// again). Both live outside the Go heap (internal/offheap), so the garbage collector neither
// scans them nor doubles them in its heap goal: 16 bytes per id plus 16 to 32 of index (50,000
// ids by default: ≈ 1.8 MB, against ≈ 3 MB of heap, doubled, for a Go map and ring). The hash
// is seeded: trace ids come from outside and must not choose their probe sequences.
type recentSet struct {
	ringMem *offheap.Array[pcommon.TraceID]
	ring    []pcommon.TraceID
	cellMem *offheap.Array[uint64]
	cells   []uint64 // hash<<32 | ring position + 1; 0 is empty
	mask    uint64
	next    int
	full    bool
	seed    maphash.Seed
}

func newRecentSet(n int) recentSet {
	n = min(max(n, 1), 1<<30)
	size := 1 << bits.Len(uint(2*n-1)) // a power of two ≥ 2n, at most 2^31: mask fits the hash bits
	r := recentSet{
		ringMem: offheap.New[pcommon.TraceID](n),
		cellMem: offheap.New[uint64](size),
		mask:    uint64(size - 1),
		seed:    maphash.MakeSeed(),
	}
	r.ring, r.cells = r.ringMem.Slice(), r.cellMem.Slice()
	return r
}

func (r *recentSet) hash(id *pcommon.TraceID) uint64 {
	return maphash.Bytes(r.seed, id[:]) >> 32 << 32
}

// find returns the cell holding id, or -1.
func (r *recentSet) find(id *pcommon.TraceID) int {
	h := r.hash(id)
	for pos := h >> 32 & r.mask; ; pos = (pos + 1) & r.mask {
		c := r.cells[pos]
		if c == 0 {
			return -1
		}
		if c&^(1<<32-1) == h && r.ring[uint32(c)-1] == *id {
			return int(pos)
		}
	}
}

func (r *recentSet) has(id pcommon.TraceID) bool { return r.find(&id) >= 0 }

func (r *recentSet) add(id pcommon.TraceID) {
	if r.find(&id) >= 0 {
		return
	}
	if r.full {
		r.delete(r.find(&r.ring[r.next]))
	}
	r.ring[r.next] = id
	h := r.hash(&id)
	pos := h >> 32 & r.mask
	for r.cells[pos] != 0 {
		pos = (pos + 1) & r.mask
	}
	r.cells[pos] = h | uint64(r.next+1)
	r.next++
	if r.next == len(r.ring) {
		r.next, r.full = 0, true
	}
}

// delete empties cell i and moves later cells of the same probe runs back into the gap, so
// that every id stays reachable from its home without tombstones.
func (r *recentSet) delete(i int) {
	hole := uint64(i)
	for j := (hole + 1) & r.mask; r.cells[j] != 0; j = (j + 1) & r.mask {
		home := r.cells[j] >> 32 & r.mask
		// The cell at j may fill the hole when the hole lies on its probe path: cyclically
		// within [home, j).
		if (j-home)&r.mask >= (j-hole)&r.mask {
			r.cells[hole] = r.cells[j]
			hole = j
		}
	}
	r.cells[hole] = 0
}
