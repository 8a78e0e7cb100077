package otlpwire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The schemas of collector/span's trace decoder, as it declares them.
var (
	requestSchema  = NewSchema(1, WTLen, "ResourceSpans")
	rsSchema       = NewSchema(1, WTLen, "Resource", 2, WTLen, "ScopeSpans", 3, WTLen, "SchemaUrl", 1000, WTLen, "DeprecatedScopeSpans")
	resourceSchema = NewSchema(1, WTLen, "Attributes", 2, WTVarint, "DroppedAttributesCount", 3, WTLen, "EntityRefs")
	ssSchema       = NewSchema(1, WTLen, "Scope", 2, WTLen, "Spans", 3, WTLen, "SchemaUrl")
	spanSchema     = NewSchema(1, WTLen, "TraceId", 2, WTLen, "SpanId", 3, WTLen, "TraceState", 4, WTLen, "ParentSpanId",
		5, WTLen, "Name", 6, WTVarint, "Kind", 7, WTI64, "StartTimeUnixNano", 8, WTI64, "EndTimeUnixNano",
		9, WTLen, "Attributes", 10, WTVarint, "DroppedAttributesCount", 11, WTLen, "Events", 12, WTVarint, "DroppedEventsCount",
		13, WTLen, "Links", 14, WTVarint, "DroppedLinksCount", 15, WTLen, "Status", 16, WTI32, "Flags")
	statusSchema = NewSchema(2, WTLen, "Message", 3, WTVarint, "Code")
	eventSchema  = NewSchema(1, WTI64, "TimeUnixNano", 2, WTLen, "Name", 3, WTLen, "Attributes", 4, WTVarint, "DroppedAttributesCount")
	linkSchema   = NewSchema(1, WTLen, "TraceId", 2, WTLen, "SpanId", 3, WTLen, "TraceState", 4, WTLen, "Attributes",
		5, WTVarint, "DroppedAttributesCount", 6, WTI32, "Flags")
	kvSchema   = NewSchema(1, WTLen, "Key", 2, WTLen, "Value", 3, WTVarint, "KeyStrindex")
	anySchema  = NewSchema(1, WTLen, "StringValue", 2, WTVarint, "BoolValue", 3, WTVarint, "IntValue", 4, WTI64, "DoubleValue", 5, WTLen, "ArrayValue", 6, WTLen, "KvlistValue", 7, WTLen, "BytesValue", 8, WTVarint, "StringValueStrindex")
	listSchema = NewSchema(1, WTLen, "Values") // ArrayValue and KeyValueList
)

// ReadField's fast path (one-byte tags, lengths of one or two bytes, one-byte varints) must
// answer exactly as readFieldSlow does from the same position: the same field, the same next
// position, the same error. Every two-byte input, then 20,000 random longer ones weighted
// towards the fast path's edges, against the schemas of collector/span's trace decoder (copied here).
func TestReadFieldFastPathMatchesSlow(t *testing.T) {
	schemas := map[string]*Schema{
		"request": requestSchema, "resource_spans": rsSchema, "resource": resourceSchema,
		"scope_spans": ssSchema, "span": spanSchema, "event": eventSchema, "link": linkSchema,
		"key_value": kvSchema, "any_value": anySchema, "list": listSchema, "status": statusSchema,
	}
	check := func(t *testing.T, name string, s *Schema, b []byte, pos int) {
		t.Helper()
		f1, p1, err1 := ReadField(b, pos, s)
		f2, p2, err2 := readFieldSlow(b, pos, s)
		if f1.Num != f2.Num || f1.N != f2.N || !bytes.Equal(f1.B, f2.B) || (f1.B == nil) != (f2.B == nil) || p1 != p2 || (err1 == nil) != (err2 == nil) ||
			(err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("%s: % x at %d: fast (%d %d %q) %d %v, slow (%d %d %q) %d %v", name, b, pos, f1.Num, f1.N, f1.B, p1, err1, f2.Num, f2.N, f2.B, p2, err2)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	edges := []byte{0x00, 0x01, 0x02, 0x05, 0x7f, 0x80, 0x81, 0xff}
	for name, s := range schemas {
		for i := range 1 << 16 {
			check(t, name, s, []byte{byte(i >> 8), byte(i)}, 0)
		}
		buf := make([]byte, 2, 10)
		for range 20000 {
			buf = append(buf[:2], make([]byte, 1+rng.IntN(8))...) // after a field of two bytes
			b := buf[2:]
			for i := range b {
				if rng.IntN(2) == 0 {
					b[i] = edges[rng.IntN(len(edges))]
				} else {
					b[i] = byte(rng.Uint32())
				}
			}
			if rng.IntN(2) == 0 { // a known field's tag first
				b[0] = byte(1+rng.IntN(16))<<3 | byte(rng.IntN(6))
			}
			check(t, name, s, b, 0)
			buf[0], buf[1] = 0x08, 0x01
			check(t, name, s, buf, 2)
		}
	}
	// The fast path's cases, with what they must give.
	long := append([]byte{0x4a, 0xac, 0x02}, bytes.Repeat([]byte{'x'}, 300)...) // field 9, 300 bytes
	// A three-byte length (40,000) goes to the slow path, which must not read it as two bytes.
	longer := append([]byte{0x4a, 0xc0, 0xb8, 0x02}, bytes.Repeat([]byte{'x'}, 40000)...)
	cases := []struct {
		b    []byte
		num  int32
		n    uint64
		blen int
		next int
	}{
		{[]byte{0x0a, 0x02, 'a', 'b'}, 1, 0, 2, 4}, // field 1, two bytes
		{long, 9, 0, 300, 303},                     // a two-byte length
		{longer, 9, 0, 40000, 40004},
		{[]byte{0x30, 0x05}, 6, 5, 0, 2},                       // field 6 (kind), varint 5
		{[]byte{0x30, 0x96, 0x01}, 6, 150, 0, 3},               // a two-byte varint: the slow path
		{[]byte{0x0a, 0x80, 0x00}, 1, 0, 0, 3},                 // a length in two bytes, not minimal
		{[]byte{0x88, 0x01, 0x01}, 0, 0, 0, 3},                 // field 17 is unknown: skipped
		{[]byte{0x85, 0x01, 1, 2, 3, 4}, 16, 0x04030201, 0, 6}, // field 16 (flags), fixed32
	}
	for _, c := range cases {
		f, next, err := ReadField(c.b, 0, spanSchema)
		if err != nil || f.Num != c.num || f.N != c.n || len(f.B) != c.blen || next != c.next {
			t.Errorf("% x: got field %d n %d, %d bytes, next %d, err %v; want %d %d %d %d", c.b[:min(len(c.b), 6)], f.Num, f.N, len(f.B), next, err, c.num, c.n, c.blen, c.next)
		}
	}
	// Cut short, a length cut short, no length, wrong wire types (kind as bytes, flags as bytes).
	for _, b := range [][]byte{{0x0a, 0x03, 'a'}, {0x0a, 0x80}, {0x0a}, {0x32, 0x01}, {0x82, 0x01, 0x01, 'z'}} {
		if _, _, err := ReadField(b, 0, spanSchema); err == nil {
			t.Errorf("% x: no error", b)
		}
	}
}
