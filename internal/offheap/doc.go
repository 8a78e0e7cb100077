// Package offheap holds the process's long-lived keyed tables outside the Go heap, and what the
// process knows of the Go heap's own allocation sizes.
//
// Long-lived tables sized by configuration (the join's keys, the assembler's set of recently
// assembled trace ids, the judge agreement tracker's scores waiting for labels, the sampler's
// recent decisions) would otherwise count towards the garbage collector's heap goal, which
// lets the heap grow to about twice the live data (GOGC=100): every byte of such a table costs
// a second byte of headroom in resident memory although the collector never needs to scan it.
// Off the heap it costs its own pages only, and a reservation of the full bound costs nothing
// until it is used, so a table never copies itself to grow. The memory guard and GOMEMLIMIT do
// not see it; the tables' own bounds limit it.
//
//   - Array: a fixed-length array of pointer-free values in an anonymous mapping.
//   - Table: the one keyed table those users share: pointer-free entries in a slab, stable and
//     reused ids, arrival order (linked, with lanes and Touch; or a ring), a seeded Robin Hood
//     index, and seeded hashes for string keys (Sum64, Sum128, Hashed). Callers say what they
//     store and how many; what an entry cannot hold they keep by its id.
//   - Index: a second key over a Table's entries (4-byte cells of entry ids, the keys staying
//     in the entries), for a caller that finds entries two ways.
//   - AllocBytes and StringBytes: the Go allocator's size classes, for bounds that count the
//     heap a held value takes (assembly.max_bytes).
package offheap
