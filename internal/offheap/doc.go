// Package offheap allocates large pointer-free arrays outside the Go heap, in anonymous memory
// mappings that the kernel backs with pages only when they are first written.
//
// Long-lived tables sized by configuration (the join's slots and index, the assembler's set of
// recently assembled trace ids, the alert engine's scores waiting for labels, the sampler's
// recent decisions) would otherwise count towards the garbage
// collector's heap goal, which lets the heap grow to about twice the live data (GOGC=100):
// every byte of such a table costs a second byte of headroom in resident memory although the
// collector never needs to scan it. Off the heap it costs its own pages only, and a
// reservation of the full bound costs nothing until it is used, so a table never copies itself
// to grow. The memory guard and GOMEMLIMIT do not see it; the tables' own bounds limit it.
//
// Index is the linear-probing index such tables share: 4-byte cells holding slot numbers, the
// keys staying in the caller's slots.
package offheap
