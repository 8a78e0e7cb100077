package offheap

import (
	"fmt"
	"reflect"
	"runtime"
	"unsafe"
)

// Array is a fixed-length array of T outside the Go heap. Its memory is returned to the system
// when the Array becomes unreachable (or on Free), so nothing may keep a pointer into Slice()
// beyond the Array's lifetime. T must hold no pointers: the garbage collector does not scan it.
type Array[T any] struct {
	s []T
	m *mapping
}

// mapping is the memory behind an Array; the cleanup attached to the Array releases it.
type mapping struct {
	mem  []byte
	heap bool // allocated on the Go heap (no mappings on this platform, or mmap failed)
}

// New returns an Array of n zero values of T. It panics if T holds pointers.
func New[T any](n int) *Array[T] {
	t := reflect.TypeFor[T]()
	if hasPointers(t) {
		panic(fmt.Sprintf("offheap: %s holds pointers", t))
	}
	a := &Array[T]{}
	size := uintptr(n) * t.Size()
	if n <= 0 || size == 0 {
		return a
	}
	if size/t.Size() != uintptr(n) {
		panic(fmt.Sprintf("offheap: %d × %d bytes overflows", n, t.Size()))
	}
	mem, err := mapAnon(int(size))
	m := &mapping{mem: mem}
	if err != nil {
		// Fall back to the heap rather than fail: the table still works, it only costs more.
		m.mem, m.heap = make([]byte, size), true
	}
	a.m = m
	a.s = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(m.mem))), n)
	runtime.AddCleanup(a, func(m *mapping) { m.release() }, m)
	return a
}

// Slice returns the array's elements. The slice is valid while the Array is reachable.
func (a *Array[T]) Slice() []T { return a.s }

// Len is the number of elements.
func (a *Array[T]) Len() int { return len(a.s) }

// OnHeap reports whether the elements live on the Go heap after all (the platform has no
// anonymous mappings, or the mapping failed).
func (a *Array[T]) OnHeap() bool { return a.m != nil && a.m.heap }

// Free returns the memory at once. The Array and every slice taken from it must not be used
// afterwards.
func (a *Array[T]) Free() {
	if a.m != nil {
		a.m.release()
	}
	a.s, a.m = nil, nil
}

func (m *mapping) release() {
	if m.mem == nil {
		return
	}
	if !m.heap {
		_ = unmapAnon(m.mem)
	}
	m.mem = nil
}

// hasPointers reports whether values of t hold anything the garbage collector would have to
// trace.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	default: // pointers, strings, slices, maps, channels, functions, interfaces, unsafe.Pointer
		return true
	}
}
