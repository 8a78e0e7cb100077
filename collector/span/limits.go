package span

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// Limits bound what one OTLP request may carry, whichever transport brought it (collector/otlp's
// gRPC and HTTP receivers, collector/natsin) and whichever decoder reads it (Check after
// pdata's decoding, DecodeProto from the wire). A zero field takes its default.
type Limits struct {
	// MaxRequestBytes bounds one HTTP body after decompression and one gRPC message.
	MaxRequestBytes int
	// MaxSpansPerRequest bounds the spans of one request.
	MaxSpansPerRequest int
	// MaxAttributesPerSpan bounds the attributes of one span, one event, one link and the
	// resource.
	MaxAttributesPerSpan int
	// MaxEventsPerSpan bounds the events and the links of one span (each).
	MaxEventsPerSpan int
	// MaxAttributeValueBytes bounds one attribute value: a string's or bytes' length, the sum
	// for arrays and maps. Also applied to span names.
	MaxAttributeValueBytes int
	// MaxJSONDepth bounds the nesting of an OTLP/JSON body.
	MaxJSONDepth int
}

// Defaults. RAG spans carry documents and prompts in attributes, so value and count limits sit
// well above the SDK's own defaults (128 attributes), while still stopping attribute bombs.
const (
	DefaultMaxRequestBytes        = 16 << 20
	DefaultMaxSpansPerRequest     = 10000
	DefaultMaxAttributesPerSpan   = 2048
	DefaultMaxEventsPerSpan       = 1024
	DefaultMaxAttributeValueBytes = 1 << 20
	DefaultMaxJSONDepth           = 64
)

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	set(&l.MaxSpansPerRequest, DefaultMaxSpansPerRequest)
	set(&l.MaxAttributesPerSpan, DefaultMaxAttributesPerSpan)
	set(&l.MaxEventsPerSpan, DefaultMaxEventsPerSpan)
	set(&l.MaxAttributeValueBytes, DefaultMaxAttributeValueBytes)
	set(&l.MaxJSONDepth, DefaultMaxJSONDepth)
	return l
}

// Error is a request refused: Reason is the `reason` label of ragwatch_ingest_rejected_total
// (ingest.ReasonMalformed when the bytes are not an OTLP request, ReasonInvalid or ReasonLimits
// when they are one the limits refuse), Msg is what the client is told; it names positions,
// never content.
type Error struct {
	Reason string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func reject(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Check validates a request pdata decoded, as DecodeProto does while it decodes: every span
// needs a non-zero trace id and span id, and counts and sizes must stay within l, which should
// have its defaults applied (WithDefaults). It returns the number of spans and the first
// problem found, with the position of the offending span, never its content.
//
// It runs for every request, so it allocates nothing unless it rejects: positions are kept as
// indexes and formatted only into the Error.
func (l Limits) Check(td ptrace.Traces) (int, *Error) {
	n := td.SpanCount()
	if n > l.MaxSpansPerRequest {
		return n, reject(ingest.ReasonLimits, "request holds %d spans, more than the limit of %d", n, l.MaxSpansPerRequest)
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		if r := l.checkAttrs(rs.Resource().Attributes(), position{rs: i, kind: atResource}); r != nil {
			return n, r
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				if r := l.checkSpan(spans.At(k), position{rs: i, ss: j, span: k, kind: atSpan}); r != nil {
					return n, r
				}
			}
		}
	}
	return n, nil
}

// position locates a problem in a request without formatting it.
type position struct {
	rs, ss, span, sub int
	kind              uint8
}

const (
	atResource uint8 = iota // resource_spans[rs].resource
	atSpan                  // resource_spans[rs].scope_spans[ss].spans[span]
	atEvent                 // ... .spans[span].events[sub]
	atLink                  // ... .spans[span].links[sub]
)

func (p position) String() string {
	if p.kind == atResource {
		return fmt.Sprintf("resource_spans[%d].resource", p.rs)
	}
	s := fmt.Sprintf("resource_spans[%d].scope_spans[%d].spans[%d]", p.rs, p.ss, p.span)
	switch p.kind {
	case atEvent:
		s += fmt.Sprintf(".events[%d]", p.sub)
	case atLink:
		s += fmt.Sprintf(".links[%d]", p.sub)
	}
	return s
}

func (l Limits) checkSpan(s ptrace.Span, at position) *Error {
	if s.TraceID().IsEmpty() {
		return reject(ingest.ReasonInvalid, "%s: trace_id must be 16 bytes, not all zero (hex-encoded in OTLP/JSON)", at)
	}
	if s.SpanID().IsEmpty() {
		return reject(ingest.ReasonInvalid, "%s: span_id must be 8 bytes, not all zero (hex-encoded in OTLP/JSON)", at)
	}
	if len(s.Name()) > l.MaxAttributeValueBytes {
		return reject(ingest.ReasonLimits, "%s: name is %d bytes, more than the limit of %d", at, len(s.Name()), l.MaxAttributeValueBytes)
	}
	if r := l.checkAttrs(s.Attributes(), at); r != nil {
		return r
	}
	events := s.Events()
	if events.Len() > l.MaxEventsPerSpan {
		return reject(ingest.ReasonLimits, "%s: %d events, more than the limit of %d", at, events.Len(), l.MaxEventsPerSpan)
	}
	for e := 0; e < events.Len(); e++ {
		if r := l.checkAttrs(events.At(e).Attributes(), position{rs: at.rs, ss: at.ss, span: at.span, sub: e, kind: atEvent}); r != nil {
			return r
		}
	}
	links := s.Links()
	if links.Len() > l.MaxEventsPerSpan {
		return reject(ingest.ReasonLimits, "%s: %d links, more than the limit of %d", at, links.Len(), l.MaxEventsPerSpan)
	}
	for e := 0; e < links.Len(); e++ {
		if r := l.checkAttrs(links.At(e).Attributes(), position{rs: at.rs, ss: at.ss, span: at.span, sub: e, kind: atLink}); r != nil {
			return r
		}
	}
	return nil
}

func (l Limits) checkAttrs(m pcommon.Map, at position) *Error {
	if m.Len() > l.MaxAttributesPerSpan {
		return reject(ingest.ReasonLimits, "%s: %d attributes, more than the limit of %d", at, m.Len(), l.MaxAttributesPerSpan)
	}
	for k, v := range m.All() {
		if len(k) > l.MaxAttributeValueBytes {
			return reject(ingest.ReasonLimits, "%s: an attribute key is %d bytes, more than the limit of %d", at, len(k), l.MaxAttributeValueBytes)
		}
		if size := valueSize(v, l.MaxAttributeValueBytes); size > l.MaxAttributeValueBytes {
			return reject(ingest.ReasonLimits, "%s: attribute %q is over %d bytes, the limit for one value", at, truncate.Ellipsis(k, 64), l.MaxAttributeValueBytes)
		}
	}
	return nil
}

// valueSize is the content size of v, counting strings, bytes and keys, with a small cost for
// every scalar so that a huge array of tiny values is bounded too. It stops counting past
// limit.
func valueSize(v pcommon.Value, limit int) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return len(v.Str())
	case pcommon.ValueTypeBytes:
		return v.Bytes().Len()
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		total := 0
		for i := 0; i < s.Len() && total <= limit; i++ {
			total += 1 + valueSize(s.At(i), limit-total)
		}
		return total
	case pcommon.ValueTypeMap:
		total := 0
		v.Map().Range(func(k string, x pcommon.Value) bool {
			total += len(k) + 1 + valueSize(x, limit-total)
			return total <= limit
		})
		return total
	default:
		return 8
	}
}
