package offheap

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

type cell struct {
	id   [16]byte
	n    int64
	next uint32
}

func TestArrayIsZeroedWritableAndOffHeap(t *testing.T) {
	const n = 4 << 20 // 4 Mi cells of 32 bytes: 128 MiB reserved
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	a := New[cell](n)
	defer a.Free()
	if a.Len() != n || len(a.Slice()) != n {
		t.Fatalf("len = %d, %d; want %d", a.Len(), len(a.Slice()), n)
	}
	if runtime.GOOS == "linux" && a.OnHeap() {
		t.Fatal("on Linux the array must be an anonymous mapping, not heap")
	}
	s := a.Slice()
	if s[0] != (cell{}) || s[n/2] != (cell{}) || s[n-1] != (cell{}) {
		t.Fatal("new array is not zeroed")
	}
	s[0].n, s[n-1].next, s[n/2].id[15] = 7, 9, 3
	if s[0].n != 7 || s[n-1].next != 9 || s[n/2].id[15] != 3 {
		t.Fatal("writes did not stick")
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Signed: HeapSys can shrink meanwhile (the runtime returns spans), and a difference of
	// unsigned values would wrap to an enormous growth.
	if grew := int64(after.HeapSys) - int64(before.HeapSys); !a.OnHeap() && grew > 64<<20 {
		t.Fatalf("heap grew by %d bytes for an off-heap array", grew)
	}
}

// TestReservationCostsNothingUntilUsed: a large bound reserved up front adds only the pages
// written to resident memory.
func TestReservationCostsNothingUntilUsed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	before := rssAnon(t)
	a := New[cell](32 << 20) // 1 GiB reserved
	defer a.Free()
	reserved := rssAnon(t)
	s := a.Slice()
	const touched = 1 << 20 // 32 MiB written
	for i := 0; i < touched; i++ {
		s[i].n = int64(i)
	}
	used := rssAnon(t)
	if grew := reserved - before; grew > 16<<20 {
		t.Errorf("reserving 1 GiB made RssAnon grow by %d MiB", grew>>20)
	}
	if grew := used - reserved; grew < 28<<20 || grew > 48<<20 {
		t.Errorf("writing 32 MiB made RssAnon grow by %d MiB, want ≈ 32", grew>>20)
	}
}

func TestPointerTypesAreRefused(t *testing.T) {
	for name, f := range map[string]func(){
		"pointer":        func() { New[*int](1) },
		"string":         func() { New[string](1) },
		"slice in array": func() { New[[2][]byte](1) },
		"map in struct":  func() { New[struct{ m map[int]int }](1) },
		"interface":      func() { New[any](1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic for a type with pointers")
				}
			}()
			f()
		})
	}
}

func TestEmptyAndFree(t *testing.T) {
	a := New[cell](0)
	if a.Len() != 0 || a.Slice() != nil {
		t.Fatal("empty array has elements")
	}
	a.Free()
	b := New[uint32](10)
	b.Free()
	b.Free() // idempotent
	if b.Len() != 0 {
		t.Fatal("freed array still has elements")
	}
}

func rssAnon(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}
