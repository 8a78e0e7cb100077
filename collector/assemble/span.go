package assemble

import (
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
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
	Name         string
	Kind         ptrace.SpanKind
	Start, End   time.Time
	Service      string
	Attrs        []Attr
	Events       []Event
	Links        []Link
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
	TypeRaw // a slice or map, held in Raw as []any / map[string]any
)

// Value is an attribute value. Numbers of every kind are kept in Num.
type Value struct {
	Type ValueType
	Str  string
	Num  float64
	Raw  any
}

// Str makes a string Value.
func Str(s string) Value { return Value{Type: TypeStr, Str: s} }

// Int makes an integer Value.
func Int(n int64) Value { return Value{Type: TypeInt, Num: float64(n)} }

// Double makes a floating-point Value.
func Double(f float64) Value { return Value{Type: TypeDouble, Num: f} }

// Bool makes a boolean Value.
func Bool(b bool) Value {
	v := Value{Type: TypeBool}
	if b {
		v.Num = 1
	}
	return v
}

// RawValue makes a structured Value from []any or map[string]any.
func RawValue(x any) Value { return Value{Type: TypeRaw, Raw: x} }

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

// FromTraces appends to dst one Span per span of td, keeping only what assembly reads. Strings
// are shared with td (pdata strings are immutable), so td may be reused afterwards.
func FromTraces(td ptrace.Traces, dst []Span) []Span {
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
				dst = append(dst, fromSpan(spans.At(k), service))
			}
		}
	}
	return dst
}

func fromSpan(ps ptrace.Span, service string) Span {
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
	}
	s.Attrs = copyAttrs(ps.Attributes(), true)
	if evs := ps.Events(); evs.Len() > 0 {
		for i := 0; i < evs.Len() && len(s.Events) < maxEventsPerSpan; i++ {
			ev := evs.At(i)
			if !keepEvent(ev.Name()) {
				continue
			}
			s.Events = append(s.Events, Event{
				Name:  ev.Name(),
				Time:  ev.Timestamp().AsTime(),
				Attrs: copyAttrs(ev.Attributes(), false),
			})
		}
	}
	if links := ps.Links(); links.Len() > 0 {
		n := min(links.Len(), maxLinksPerSpan)
		s.Links = make([]Link, n)
		for i := 0; i < n; i++ {
			s.Links[i] = Link{TraceID: links.At(i).TraceID(), SpanID: links.At(i).SpanID()}
		}
	}
	return s
}

// copyAttrs copies the attributes assembly reads (all of them when filter is false).
func copyAttrs(m pcommon.Map, filter bool) []Attr {
	if m.Len() == 0 {
		return nil
	}
	var out []Attr
	for k, v := range m.All() {
		if filter && !keepAttr(k) {
			continue
		}
		if out == nil {
			out = getAttrs(min(m.Len(), maxAttrsPerSpan))
		}
		if len(out) == maxAttrsPerSpan {
			break
		}
		out = append(out, Attr{Key: k, Value: fromPValue(v)})
	}
	return out
}

// Attribute slices of held spans are recycled once their trace is assembled (the Assembler
// calls releaseSpans; nothing of a record points into them). Pools by capacity class.
var attrPools [4]sync.Pool // capacities 8, 16, 32, 64

func attrClass(n int) int {
	switch {
	case n <= 8:
		return 0
	case n <= 16:
		return 1
	case n <= 32:
		return 2
	case n <= 64:
		return 3
	}
	return -1
}

func getAttrs(n int) []Attr {
	c := attrClass(n)
	if c < 0 {
		return make([]Attr, 0, n)
	}
	if p, ok := attrPools[c].Get().(*[]Attr); ok {
		return (*p)[:0]
	}
	return make([]Attr, 0, 8<<c)
}

// releaseSpans returns the spans' attribute slices to the pools. The spans must not be used
// afterwards.
func releaseSpans(spans []Span) {
	for i := range spans {
		as := spans[i].Attrs
		spans[i].Attrs = nil
		if c := attrClass(cap(as)); c >= 0 && cap(as) == 8<<c {
			as = as[:cap(as)]
			clear(as)
			as = as[:0]
			attrPools[c].Put(&as)
		}
	}
}

func fromPValue(v pcommon.Value) Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return Value{Type: TypeStr, Str: v.Str()}
	case pcommon.ValueTypeInt:
		return Value{Type: TypeInt, Num: float64(v.Int())}
	case pcommon.ValueTypeDouble:
		return Value{Type: TypeDouble, Num: v.Double()}
	case pcommon.ValueTypeBool:
		return Bool(v.Bool())
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		return Value{Type: TypeRaw, Raw: v.AsRaw()}
	case pcommon.ValueTypeBytes:
		return Value{Type: TypeStr, Str: string(v.Bytes().AsRaw())}
	default:
		return Value{}
	}
}

// keepAttr reports whether a span attribute belongs to a convention assembly reads. It looks at
// the first dotted segment only, so it costs a few comparisons per attribute.
func keepAttr(k string) bool {
	head := k
	if i := strings.IndexByte(k, '.'); i >= 0 {
		head = k[:i]
	}
	switch head {
	case "openinference", "input", "output", "retrieval", "reranker", "llm", "session", "user",
		"enduser", "tag", "annotations", "evaluations", "gen_ai", "traceloop", "db", "rag":
		return true
	case "metadata":
		return k == "metadata"
	}
	return false
}

func keepEvent(name string) bool {
	return strings.HasPrefix(name, "gen_ai.") || name == "db.query.result" || name == "db.search.result"
}
