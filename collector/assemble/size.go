package assemble

import (
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/span"
)

// Held-memory accounting (assembly.max_bytes, ragwatch_assembly_held_bytes). A held trace keeps
// alive: its trace struct and map entry, its []Span backing array, each span's attribute, event
// and link arrays, and the strings they point at (pdata allocates each decoded string on its
// own, so a held string keeps exactly its own allocation). Each is counted as the Go allocator
// rounds it: its size class, plus the 8-byte header of pointerful objects over 512 bytes.
// TestHeldBytesMatchHeap holds thousands of traces and checks the total against the heap.

var (
	spanBytes  = int64(unsafe.Sizeof(span.Span{}))
	attrBytes  = int64(unsafe.Sizeof(span.Attr{}))
	eventBytes = int64(unsafe.Sizeof(span.Event{}))
	linkBytes  = int64(unsafe.Sizeof(span.Link{}))
	// traceFixed is a held trace's own struct plus its entry in the map of held traces (a
	// Swiss-table slot of id and pointer, at a load between 7/16 and 7/8: ≈ 40 bytes).
	traceFixed = allocBytes(int64(unsafe.Sizeof(trace{})), true) +
		int64(unsafe.Sizeof(pcommon.TraceID{})+unsafe.Sizeof(&trace{}))*5/3
)

// sizeClasses are the Go allocator's small size classes (internal/runtime/gc).
var sizeClasses = [...]int64{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912,
	8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576,
	27264, 28672, 32768}

// classOf8 and classOf128 map a size to its class as the runtime does: by 8-byte steps up to
// 1024 bytes, by 128-byte steps above.
var classOf8, classOf128 = func() (c8 [1024/8 + 1]uint8, c128 [(32768-1024)/128 + 1]uint8) {
	c := 0
	for i := range c8 {
		for sizeClasses[c] < int64(i*8) {
			c++
		}
		c8[i] = uint8(c)
	}
	for i := range c128 {
		for sizeClasses[c] < int64(1024+i*128) {
			c++
		}
		c128[i] = uint8(c)
	}
	return c8, c128
}()

// allocBytes is the heap an allocation of n bytes takes.
func allocBytes(n int64, pointers bool) int64 {
	if n <= 0 {
		return 0
	}
	if pointers && n > 512 {
		n += 8 // malloc header
	}
	switch {
	case n <= 1024:
		return sizeClasses[classOf8[(n+7)/8]]
	case n <= 32768:
		return sizeClasses[classOf128[(n-1024+127)/128]]
	}
	return (n + 8191) &^ 8191
}

// strBytes is the heap a string of its own allocation takes. Strings under 16 bytes share the
// allocator's 16-byte tiny blocks; one held keeps its whole block.
func strBytes(s string) int64 {
	switch n := int64(len(s)); {
	case n == 0:
		return 0
	case n < 16:
		return 16
	default:
		return allocBytes(n, false)
	}
}

// spanSize is what a held span keeps alive: its slot in the trace's []Span, and everything its
// fields point at.
func spanSize(s *span.Span) int64 {
	n := spanBytes + strBytes(s.Name) + strBytes(s.Service) + strBytes(s.Variant)
	n += attrsSize(s.Attrs)
	if cap(s.Events) > 0 {
		n += allocBytes(int64(cap(s.Events))*eventBytes, true)
		for i := range s.Events {
			n += strBytes(s.Events[i].Name) + attrsSize(s.Events[i].Attrs)
		}
	}
	if cap(s.Links) > 0 {
		n += allocBytes(int64(cap(s.Links))*linkBytes, false)
	}
	return n
}

func attrsSize(as []span.Attr) int64 {
	if cap(as) == 0 {
		return 0
	}
	n := allocBytes(int64(cap(as))*attrBytes, true)
	for i := range as {
		n += keyBytes(as[i].Key) + strBytes(as[i].Value.Str())
		if as[i].Value.Type == span.TypeRaw {
			n += 16 + rawSize(as[i].Value.Raw(), 0) // the Value's box, then what it holds
		}
	}
	return n
}

// rawSize estimates a structured value made by pcommon.Value.AsRaw: maps and slices of
// interface values, strings and numbers boxed.
func rawSize(x any, depth int) int64 {
	if depth > 32 {
		return 16
	}
	switch v := x.(type) {
	case string:
		return 16 + strBytes(v) // the boxed header and the bytes
	case []any:
		n := 24 + allocBytes(int64(len(v))*16, true)
		for _, e := range v {
			n += rawSize(e, depth+1)
		}
		return n
	case map[string]any:
		// A Swiss-table group holds 8 slots of key (16) and value (16) plus 8 control bytes.
		n := 48 + allocBytes(int64((len(v)+6)/7)*(8+8*32), true)
		for k, e := range v {
			n += strBytes(k) + rawSize(e, depth+1)
		}
		return n
	case []byte:
		return 24 + allocBytes(int64(len(v)), false)
	case nil:
		return 0
	default:
		return 8 // a boxed number or bool
	}
}

// traceOverhead is what a held trace costs beyond its spans' size: its struct and map entry,
// and the unused capacity of its []Span (each span's own slot is in its size).
func traceOverhead(spans []span.Span) int64 {
	return traceFixed + allocBytes(int64(cap(spans))*spanBytes, true) - int64(len(spans))*spanBytes
}
