package offheap

import "math/bits"

// Index finds entries of a table its caller keeps (a Table's, by a second key): linear probing
// over a power of two of 4-byte cells, at least twice the slots, each holding a slot number + 1 (0: empty), in an
// Array outside the Go heap. The keys stay in the caller's slots; the caller gives a key's
// hash and says whether a slot holds the key. Deleting moves the cells after the emptied one
// back (no tombstones), so lookups stay short however many keys came and went.
//
// An Index is not safe for concurrent use.
type Index struct {
	mem   *Array[uint32]
	cells []uint32
	mask  uint64
}

// NewIndex returns an empty index for up to slots slots (at most 1<<31).
func NewIndex(slots int) *Index {
	n := 1 << bits.Len(uint(max(2*slots, 2)-1))
	mem := New[uint32](n)
	return &Index{mem: mem, cells: mem.Slice(), mask: uint64(n - 1)}
}

// Find probes from hash h for the slot holding the key, as holds says, and returns it with its
// cell; or -1 and the empty cell where the key would go (Set).
func (x *Index) Find(h uint64, holds func(slot uint32) bool) (slot int, cell uint64) {
	for cell = h & x.mask; ; cell = (cell + 1) & x.mask {
		v := x.cells[cell]
		if v == 0 {
			return -1, cell
		}
		if holds(v - 1) {
			return int(v - 1), cell
		}
	}
}

// Set puts slot into cell: the empty cell Find returned for its key, or the cell of a slot that
// held the same key before.
func (x *Index) Set(cell uint64, slot uint32) { x.cells[cell] = slot + 1 }

// Delete empties cell and moves the cells after it back; hash gives the hash of the key a slot
// holds.
func (x *Index) Delete(cell uint64, hash func(slot uint32) uint64) {
	for j := (cell + 1) & x.mask; x.cells[j] != 0; j = (j + 1) & x.mask {
		home := hash(x.cells[j]-1) & x.mask
		// The cell at j may move back when its home is not cyclically in (cell, j].
		if (j-home)&x.mask >= (j-cell)&x.mask {
			x.cells[cell] = x.cells[j]
			cell = j
		}
	}
	x.cells[cell] = 0
}

// Bytes is the memory of the cells (reserved; the kernel adds pages as they are first used).
func (x *Index) Bytes() int { return 4 * len(x.cells) }

// Len counts the cells in use (for tests: it reads every cell).
func (x *Index) Len() int {
	n := 0
	for _, c := range x.cells {
		if c != 0 {
			n++
		}
	}
	return n
}

// Free returns the cells' memory at once; the Index must not be used afterwards.
func (x *Index) Free() {
	x.mem.Free()
	x.cells = nil
}
