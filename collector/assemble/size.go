package assemble

import (
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/offheap"
)

// Held-memory accounting (assembly.max_bytes, ragwatch_assembly_held_bytes). A held trace keeps
// alive: its trace struct and map entry, its []Span backing array, each span's attribute, event
// and link arrays, and the strings they point at (pdata allocates each decoded string on its
// own, so a held string keeps exactly its own allocation). Each is counted as the Go allocator
// rounds it (offheap.AllocBytes: its size class, plus the 8-byte header of pointerful objects
// over 512 bytes).
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

// allocBytes and strBytes are the Go heap's size classes, which internal/offheap keeps.
func allocBytes(n int64, pointers bool) int64 { return offheap.AllocBytes(n, pointers) }

func strBytes(s string) int64 { return offheap.StringBytes(s) }

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
