package span

import (
	"fmt"
	"math"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/conventions"
)

// Span is the part of an OTLP span that assembly reads: ids, timing, the resource's service name,
// and only the attributes and events of the conventions in docs/conventions.md. FromTraces builds
// Spans from pdata; tests and the offline path may build them by hand.
type Span struct {
	TraceID      pcommon.TraceID
	SpanID       pcommon.SpanID
	ParentSpanID pcommon.SpanID
	// RemoteParent is true when the OTLP span flags say the parent lives in another process.
	RemoteParent bool
	// pooled is set by FromTraces: the attribute slices come from attrPools and go back there
	// once the trace is assembled (never a caller's own slices).
	pooled bool
	// EventsOnly marks a carrier of log-based events (DecodeLogs): only TraceID, SpanID,
	// Service and Events are set, and the events belong to the span SpanID names, which
	// JoinEvents moves them onto before assembly. A carrier is never a span of its own.
	EventsOnly bool
	Name       string
	Kind       ptrace.SpanKind
	Start, End time.Time
	Service    string
	Attrs      []Attr
	Events     []Event
	Links      []Link
	// UpstreamP is the sampling probability the span's tracestate declares (ot=th or ot=p, see
	// UpstreamProbability): 0 when it declares none, -1 when the declaration is malformed.
	UpstreamP float64
	// Variant is the best variant the span carries (variant.go) and VariantRank its key's rank:
	// 1 for rag.variant, 2.. for variants.attributes in order, 0 when it carries none.
	Variant     string
	VariantRank uint8
	// Elided is set by the protobuf decoder when it left documents' texts of the span
	// uncopied (DecodeProto's keep).
	Elided bool
}

// Attr is one attribute.
type Attr struct {
	Key   string
	Value Value
}

// Event is one span event of a convention that assembly reads.
type Event struct {
	Name  string
	Time  time.Time
	Attrs []Attr
}

// Link points at another span (a feedback span may link to the turn it rates).
type Link struct {
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// ValueType says which field of a Value is set.
type ValueType uint8

// Value types.
const (
	TypeEmpty ValueType = iota
	TypeStr
	TypeInt
	TypeDouble
	TypeBool
	TypeRaw // a slice or map, []any / map[string]any, read with Raw
)

// Value is an attribute value, in 24 bytes (an attribute in 40): held spans keep every
// attribute assembly reads, and each is copied out of the decoder's scratch and cleared on
// release, once per span. Like log/slog.Value, it keeps a string as its data pointer and
// length, a number as its bits, and a structured value behind a pointer.
type Value struct {
	p    unsafe.Pointer // TypeStr: the string's bytes; TypeRaw: an *any
	n    uint64         // TypeStr: the string's length; numbers: math.Float64bits
	Type ValueType
}

// Str makes a string Value.
func Str(s string) Value {
	return Value{Type: TypeStr, p: unsafe.Pointer(unsafe.StringData(s)), n: uint64(len(s))}
}

// Int makes an integer Value.
func Int(n int64) Value { return Value{Type: TypeInt, n: math.Float64bits(float64(n))} }

// Double makes a floating-point Value.
func Double(f float64) Value { return Value{Type: TypeDouble, n: math.Float64bits(f)} }

// Bool makes a boolean Value: 1 or 0.
func Bool(b bool) Value {
	f := 0.0
	if b {
		f = 1
	}
	return Value{Type: TypeBool, n: math.Float64bits(f)}
}

// Raw makes a structured Value: a slice or map as pcommon.Value.AsRaw makes them.
func Raw(x any) Value {
	p := new(any)
	*p = x
	return Value{Type: TypeRaw, p: unsafe.Pointer(p)}
}

// Equal reports whether v and w hold the same value: the same type and string, number (bit
// for bit) or structured value (reflect.DeepEqual). go-cmp compares Values with it.
func (v Value) Equal(w Value) bool {
	switch {
	case v.Type != w.Type:
		return false
	case v.Type == TypeStr:
		return v.Str() == w.Str()
	case v.Type == TypeRaw:
		return reflect.DeepEqual(v.Raw(), w.Raw())
	}
	return v.n == w.n
}

// GoString spells v as the call that makes it, so that %#v shows a Value's content rather
// than its pointer.
func (v Value) GoString() string {
	switch v.Type {
	case TypeStr:
		return fmt.Sprintf("assemble.Str(%q)", v.Str())
	case TypeInt:
		return fmt.Sprintf("assemble.Int(%d)", int64(v.Num()))
	case TypeDouble:
		return fmt.Sprintf("assemble.Double(%#v)", v.Num())
	case TypeBool:
		return fmt.Sprintf("assemble.Bool(%t)", v.Num() != 0)
	case TypeRaw:
		return fmt.Sprintf("assemble.Raw(%#v)", v.Raw())
	}
	return "assemble.Value{}"
}

// Str is a string value, "" for any other type.
func (v Value) Str() string {
	if v.Type != TypeStr {
		return ""
	}
	return unsafe.String((*byte)(v.p), int(v.n))
}

// Num is a number of any type (a bool is 0 or 1), 0 for any other type.
func (v Value) Num() float64 {
	switch v.Type {
	case TypeInt, TypeDouble, TypeBool:
		return math.Float64frombits(v.n)
	}
	return 0
}

// Raw is a structured value ([]any or map[string]any), nil for any other type.
func (v Value) Raw() any {
	if v.Type != TypeRaw || v.p == nil { // nil: a Value{Type: TypeRaw} built by hand
		return nil
	}
	return *(*any)(v.p)
}

// Local-root rule flags of the OTLP Span.flags field.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// Limits on what one span may keep, so that one hostile span cannot hold unbounded memory
// beyond max_bytes accounting.
const (
	maxAttrsPerSpan  = 4096
	maxEventsPerSpan = 1024
	maxLinksPerSpan  = 8
)

// IsLocalRoot reports whether the span is a root of its process's part of the trace: it has no
// parent, the OTLP flags say its parent is remote, or (when the flags do not say) it is a SERVER
// or CONSUMER span, whose parent by definition lives in the caller.
func (s *Span) IsLocalRoot() bool {
	if s.ParentSpanID.IsEmpty() || s.RemoteParent {
		return true
	}
	return s.Kind == ptrace.SpanKindServer || s.Kind == ptrace.SpanKindConsumer
}

// FromTraces appends to dst one Span per span of td, keeping only what assembly reads, with
// variants read from keys (nil: the defaults). Strings are shared with td (pdata strings are
// immutable), so td may be reused afterwards.
func FromTraces(td ptrace.Traces, dst []Span, keys VariantKeys) []Span {
	if keys == nil {
		keys = defaultVariantKeys
	}
	buf := attrBufs.Get().(*attrBuf)
	defer buf.release()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := ""
		if v, ok := rs.Resource().Attributes().Get("service.name"); ok {
			service = v.AsString()
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s := fromSpan(spans.At(k), service, buf)
				s.Variant, s.VariantRank = keys.read(spans.At(k), rs.Resource().Attributes())
				dst = append(dst, s)
			}
		}
	}
	return dst
}

func fromSpan(ps ptrace.Span, service string, buf *attrBuf) Span {
	flags := ps.Flags()
	s := Span{
		TraceID:      ps.TraceID(),
		SpanID:       ps.SpanID(),
		ParentSpanID: ps.ParentSpanID(),
		RemoteParent: flags&flagHasIsRemote != 0 && flags&flagIsRemote != 0,
		Name:         ps.Name(),
		Kind:         ps.Kind(),
		Start:        ps.StartTimestamp().AsTime(),
		End:          ps.EndTimestamp().AsTime(),
		Service:      service,
		pooled:       true,
	}
	if ts := ps.TraceState().AsRaw(); ts != "" {
		if p, found, err := UpstreamProbability(ts); err != nil {
			s.UpstreamP = -1
		} else if found {
			s.UpstreamP = p
		}
	}
	if evs := ps.Events(); evs.Len() > 0 {
		for i := 0; i < evs.Len() && len(s.Events) < maxEventsPerSpan; i++ {
			ev := evs.At(i)
			name := ev.Name()
			if !conventions.KeptEvent(name) {
				continue
			}
			e := Event{Name: name, Time: ev.Timestamp().AsTime()}
			buf.attrs = appendAttrs(buf.attrs[:0], ev.Attributes(), eventAttrFilter(name))
			buf.used = max(buf.used, len(buf.attrs))
			if !keepMessageEvent(&e, buf.attrs) {
				continue
			}
			e.Attrs = buf.take()
			if s.Events == nil {
				s.Events = make([]Event, 0, min(evs.Len()-i, maxEventsPerSpan))
			}
			s.Events = append(s.Events, e)
		}
	}
	buf.attrs = appendAttrs(buf.attrs[:0], ps.Attributes(), filterSpan)
	buf.used = max(buf.used, len(buf.attrs))
	buf.attrs = pruneSpanAttrs(buf.attrs, &s, &buf.msgs)
	s.Attrs = buf.take()
	if links := ps.Links(); links.Len() > 0 {
		n := min(links.Len(), maxLinksPerSpan)
		s.Links = make([]Link, n)
		for i := 0; i < n; i++ {
			s.Links[i] = Link{TraceID: links.At(i).TraceID(), SpanID: links.At(i).SpanID()}
		}
	}
	return s
}

// Attribute filters of appendAttrs.
const (
	filterNone        = iota // every attribute
	filterSpan               // conventions.KeptKey
	filterGenAIEvents        // keepGenAIEventAttr
)

// appendAttrs appends the attributes filter accepts, at most maxAttrsPerSpan.
func appendAttrs(out []Attr, m pcommon.Map, filter int) []Attr {
	if m.Len() == 0 {
		return out
	}
	for k, v := range m.All() {
		switch filter {
		case filterSpan:
			var keep bool
			if k, keep = conventions.KeptKey(k); !keep {
				continue
			}
		case filterGenAIEvents:
			if !conventions.EventKey(k) {
				continue
			}
		}
		if len(out) == maxAttrsPerSpan {
			break
		}
		out = append(out, Attr{Key: k, Value: fromPValue(v)})
	}
	return out
}

// attrBuf is FromTraces' scratch: attributes are gathered and pruned there, then copied into a
// slice of exactly their number, so a held span keeps no spare capacity.
type attrBuf struct {
	attrs []Attr
	used  int       // attrs[:used] may hold references: cleared on release
	msgs  []Message // pruneSpanAttrs' scratch
	kvs   [][]byte  // the decoder's scratch: a span's encoded attributes, views of the request
	el    elision   // the decoder's scratch: the documents' texts a span may not keep
}

var attrBufs = sync.Pool{New: func() any { return &attrBuf{attrs: make([]Attr, 0, 64)} }}

// take returns a copy of the gathered attributes in a slice of their exact length (nil when
// none) and empties the scratch.
func (b *attrBuf) take() []Attr {
	n := len(b.attrs)
	if n == 0 {
		return nil
	}
	out := getAttrs(n)
	copy(out, b.attrs)
	b.attrs = b.attrs[:0]
	return out
}

func (b *attrBuf) release() {
	if cap(b.attrs) > 1024 || cap(b.kvs) > 1024 {
		return // a hostile span's scratch is not kept
	}
	clear(b.attrs[:b.used]) // no strings of this request stay reachable from the pool
	b.used = 0
	clear(b.kvs[:cap(b.kvs)]) // views of the request, from every span it read
	b.kvs = b.kvs[:0]
	attrBufs.Put(b)
}

// Attribute slices of held spans are recycled once their trace is assembled (the Assembler
// calls ReleaseSpans; nothing of a record points into them), and so are the held traces' span
// slices (PutTraceSpans).
const (
	maxPooledAttrs = 64
	// MaxPooledTraceSpans is the largest held trace's span slice that GetTraceSpans recycles:
	// the assembler sizes a new trace's slice at most this large.
	MaxPooledTraceSpans = 8
)

var (
	attrPools      = make(slicePools[Attr], maxPooledAttrs+1)
	traceSpanPools = make(slicePools[Span], MaxPooledTraceSpans+1)
)

// slicePools recycles slices by exact capacity, one pool for each up to len(p)-1. A pool holds
// a pointer to the array's first element, so Put does not allocate.
type slicePools[T any] []sync.Pool

// get returns a slice of length and capacity n.
func (p slicePools[T]) get(n int) []T {
	if n < len(p) {
		if e, ok := p[n].Get().(*T); ok {
			return unsafe.Slice(e, n)
		}
	}
	return make([]T, n)
}

// put clears s's array, so that nothing stays reachable from the pool, and keeps it.
func (p slicePools[T]) put(s []T) {
	n := cap(s)
	if n == 0 || n >= len(p) {
		return
	}
	s = s[:n]
	clear(s)
	p[n].Put(&s[0])
}

func getAttrs(n int) []Attr { return attrPools.get(n) }
func putAttrs(as []Attr)    { attrPools.put(as) }

// GetTraceSpans returns an empty slice for a held trace's spans with room for n.
func GetTraceSpans(n int) []Span { return traceSpanPools.get(n)[:0] }

// PutTraceSpans recycles an assembled trace's span slice, after ReleaseSpans. Nothing of a
// record points into it: records copy what they keep of a span, and the assembly's scratch
// is released before.
func PutTraceSpans(spans []Span) { traceSpanPools.put(spans) }

// ReleaseSpans returns the spans' attribute slices to the pools. The spans must not be used
// afterwards.
func ReleaseSpans(spans []Span) {
	for i := range spans {
		if !spans[i].pooled {
			continue
		}
		putAttrs(spans[i].Attrs)
		spans[i].Attrs = nil
		for j := range spans[i].Events {
			putAttrs(spans[i].Events[j].Attrs)
			spans[i].Events[j].Attrs = nil
		}
	}
}

func fromPValue(v pcommon.Value) Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return Str(v.Str())
	case pcommon.ValueTypeInt:
		return Int(v.Int())
	case pcommon.ValueTypeDouble:
		return Double(v.Double())
	case pcommon.ValueTypeBool:
		return Bool(v.Bool())
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		return Raw(v.AsRaw())
	case pcommon.ValueTypeBytes:
		return Str(string(v.Bytes().AsRaw()))
	default:
		return Value{}
	}
}
