package span

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"unique"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/otlpwire"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// Decoding OTLP protobuf straight into Spans. FromTraces reads spans out of pdata, which first
// materialises the whole request: every span, attribute key and value a string or object of its
// own, most of them never read. DecodeProto walks the same bytes once and copies out only what
// FromTraces would keep: an attribute that assembly does not read is checked and skipped
// without an allocation, a kept value is one copy of its bytes.
//
// It answers every request as pdata's decoder and Limits.Check together do: the same spans from the same bytes, malformed where pdata fails,
// and the same first limit problem, with the same message. Its wire rules mirror pdata's own
// (go.opentelemetry.io/collector/pdata/internal/proto): a known field with another wire type is
// an error, an unknown one is skipped, repeated fields of a singular message merge, nesting
// deeper than 100 is an error, and ResourceSpans' deprecated field 1000 stands in for
// scope_spans only when there are none. FuzzDecodeProtoMatchesPdata (collector/otlp) holds the
// two to the same answers.

// The errors of pdata's decoder for ids, with its words.
var (
	errTraceIDLength = errors.New("unmarshal: invalid TraceID length")
	errSpanIDLength  = errors.New("unmarshal: invalid SpanID length")
)

var (
	requestSchema  = otlpwire.NewSchema(1, otlpwire.WTLen, "ResourceSpans")
	rsSchema       = otlpwire.NewSchema(1, otlpwire.WTLen, "Resource", 2, otlpwire.WTLen, "ScopeSpans", 3, otlpwire.WTLen, "SchemaUrl", 1000, otlpwire.WTLen, "DeprecatedScopeSpans")
	resourceSchema = otlpwire.NewSchema(1, otlpwire.WTLen, "Attributes", 2, otlpwire.WTVarint, "DroppedAttributesCount", 3, otlpwire.WTLen, "EntityRefs")
	entitySchema   = otlpwire.NewSchema(1, otlpwire.WTLen, "SchemaUrl", 2, otlpwire.WTLen, "Type", 3, otlpwire.WTLen, "IdKeys", 4, otlpwire.WTLen, "DescriptionKeys")
	ssSchema       = otlpwire.NewSchema(1, otlpwire.WTLen, "Scope", 2, otlpwire.WTLen, "Spans", 3, otlpwire.WTLen, "SchemaUrl")
	scopeSchema    = otlpwire.NewSchema(1, otlpwire.WTLen, "Name", 2, otlpwire.WTLen, "Version", 3, otlpwire.WTLen, "Attributes", 4, otlpwire.WTVarint, "DroppedAttributesCount")
	spanSchema     = otlpwire.NewSchema(1, otlpwire.WTLen, "TraceId", 2, otlpwire.WTLen, "SpanId", 3, otlpwire.WTLen, "TraceState", 4, otlpwire.WTLen, "ParentSpanId",
		5, otlpwire.WTLen, "Name", 6, otlpwire.WTVarint, "Kind", 7, otlpwire.WTI64, "StartTimeUnixNano", 8, otlpwire.WTI64, "EndTimeUnixNano",
		9, otlpwire.WTLen, "Attributes", 10, otlpwire.WTVarint, "DroppedAttributesCount", 11, otlpwire.WTLen, "Events", 12, otlpwire.WTVarint, "DroppedEventsCount",
		13, otlpwire.WTLen, "Links", 14, otlpwire.WTVarint, "DroppedLinksCount", 15, otlpwire.WTLen, "Status", 16, otlpwire.WTI32, "Flags")
	statusSchema = otlpwire.NewSchema(2, otlpwire.WTLen, "Message", 3, otlpwire.WTVarint, "Code")
	eventSchema  = otlpwire.NewSchema(1, otlpwire.WTI64, "TimeUnixNano", 2, otlpwire.WTLen, "Name", 3, otlpwire.WTLen, "Attributes", 4, otlpwire.WTVarint, "DroppedAttributesCount")
	linkSchema   = otlpwire.NewSchema(1, otlpwire.WTLen, "TraceId", 2, otlpwire.WTLen, "SpanId", 3, otlpwire.WTLen, "TraceState", 4, otlpwire.WTLen, "Attributes",
		5, otlpwire.WTVarint, "DroppedAttributesCount", 6, otlpwire.WTI32, "Flags")
	kvSchema   = otlpwire.NewSchema(1, otlpwire.WTLen, "Key", 2, otlpwire.WTLen, "Value", 3, otlpwire.WTVarint, "KeyStrindex")
	anySchema  = otlpwire.NewSchema(1, otlpwire.WTLen, "StringValue", 2, otlpwire.WTVarint, "BoolValue", 3, otlpwire.WTVarint, "IntValue", 4, otlpwire.WTI64, "DoubleValue", 5, otlpwire.WTLen, "ArrayValue", 6, otlpwire.WTLen, "KvlistValue", 7, otlpwire.WTLen, "BytesValue", 8, otlpwire.WTVarint, "StringValueStrindex")
	listSchema = otlpwire.NewSchema(1, otlpwire.WTLen, "Values") // ArrayValue and KeyValueList
)

// anyv is an AnyValue as pdata ends up with it: the last of its oneof fields (f: 0 when none).
type anyv struct {
	f int32
	n uint64
	b []byte
}

// kv is a KeyValue as decoded: its key (the last key field) and value (the value fields merged).
type kv struct {
	key []byte
	val anyv
}

// readKV decodes and checks one KeyValue at pdata's nesting depth.
func readKV(b []byte, depth int) (kv, error) {
	var out kv
	if depth >= otlpwire.RecursionLimit {
		return out, otlpwire.ErrRecursionDepth
	}
	if out, ok := readKVFast(b); ok {
		return out, nil
	}
	return readKVSlow(b, depth)
}

// readKVFast reads the KeyValue every instrumentation writes, in one pass: a key and a value,
// in either order (pdata writes the value first, protobuf-go the key), each with a one-byte
// tag and a length of one or two bytes, the value holding one string (the same), boolean,
// integer or double, or nothing; and nothing else. ok is false for anything else, valid or
// not, which readKVSlow then reads: where ok, it answers exactly as readKVSlow does.
func readKVFast(b []byte) (out kv, ok bool) {
	var val []byte
	haveKey, haveVal := false, false
	for p := 0; p < len(b); {
		tag := b[p]
		f, next, ok := lenField(b, p+1)
		if !ok {
			return out, false
		}
		switch {
		case tag == 1<<3|otlpwire.WTLen && !haveKey:
			out.key, haveKey = f, true
		case tag == 2<<3|otlpwire.WTLen && !haveVal:
			val, haveVal = f, true
		default:
			return out, false
		}
		p = next
	}
	if !haveKey || !haveVal {
		return out, false
	}
	if len(val) == 0 {
		return out, true // an empty AnyValue
	}
	switch val[0] {
	case 1<<3 | otlpwire.WTLen: // string_value
		s, next, ok := lenField(val, 1)
		if !ok || next != len(val) {
			return out, false
		}
		out.val = anyv{f: 1, b: s}
	case 2<<3 | otlpwire.WTVarint, 3<<3 | otlpwire.WTVarint: // bool_value, int_value
		x, m := protowire.ConsumeVarint(val[1:])
		if m <= 0 || 1+m != len(val) {
			return out, false
		}
		out.val = anyv{f: int32(val[0] >> 3), n: x}
	case 4<<3 | otlpwire.WTI64: // double_value
		if len(val) != 9 {
			return out, false
		}
		out.val = anyv{f: 4, n: binary.LittleEndian.Uint64(val[1:])}
	default:
		return out, false
	}
	return out, true
}

// lenField reads a length of one or two bytes at p and the bytes it covers; ok is false for a
// longer length or one that runs past b.
func lenField(b []byte, p int) (f []byte, next int, ok bool) {
	if p >= len(b) {
		return nil, 0, false
	}
	n := int(b[p])
	p++
	if n >= 0x80 {
		if p >= len(b) || b[p] >= 0x80 {
			return nil, 0, false
		}
		n = n&0x7f | int(b[p])<<7
		p++
	}
	if n > len(b)-p {
		return nil, 0, false
	}
	return b[p : p+n], p + n, true
}

// readKVSlow is readKV for any KeyValue.
func readKVSlow(b []byte, depth int) (kv, error) {
	var out kv
	depth++
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, kvSchema)
		if err != nil {
			return out, err
		}
		pos = next
		switch f.Num {
		case 1:
			out.key = f.B
		case 2:
			if err := readAny(f.B, depth, &out.val); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// readAny decodes and checks one AnyValue into v: a field of the oneof replaces v, so merged
// occurrences end with the last one, as in pdata.
func readAny(b []byte, depth int, v *anyv) error {
	if depth >= otlpwire.RecursionLimit {
		return otlpwire.ErrRecursionDepth
	}
	depth++
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, anySchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 0:
			continue
		case 5, 6:
			if err := readList(f.B, depth, f.Num == 6); err != nil {
				return err
			}
		}
		*v = anyv{f: f.Num, n: f.N, b: f.B}
	}
	return nil
}

// readList checks an ArrayValue (kvs false) or a KeyValueList.
func readList(b []byte, depth int, kvs bool) error {
	if depth >= otlpwire.RecursionLimit {
		return otlpwire.ErrRecursionDepth
	}
	depth++
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, listSchema)
		if err != nil {
			return err
		}
		pos = next
		if f.Num != 1 {
			continue
		}
		if kvs {
			_, err = readKV(f.B, depth)
		} else {
			var e anyv
			err = readAny(f.B, depth, &e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// The readers below walk bytes readKV has checked: they cannot fail.

func lastOneof(b []byte, v *anyv) {
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, anySchema)
		if err != nil {
			return
		}
		pos = next
		if f.Num != 0 {
			*v = anyv{f: f.Num, n: f.N, b: f.B}
		}
	}
}

func kvOf(b []byte) kv {
	var out kv
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, kvSchema)
		if err != nil {
			return out
		}
		pos = next
		switch f.Num {
		case 1:
			out.key = f.B
		case 2:
			lastOneof(f.B, &out.val)
		}
	}
	return out
}

// eachListItem calls fn with the bytes of each item of an ArrayValue or KeyValueList.
func eachListItem(b []byte, fn func([]byte) bool) {
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, listSchema)
		if err != nil {
			return
		}
		pos = next
		if f.Num == 1 && !fn(f.B) {
			return
		}
	}
}

// size is Limits' valueSize of the value: it stops counting past limit. (A value receiver: with
// a pointer one the recursion would move each item of a map or array to the heap.)
func (v anyv) size(limit int) int {
	switch v.f {
	case 1, 7:
		return len(v.b)
	case 5:
		total := 0
		eachListItem(v.b, func(item []byte) bool {
			if total > limit {
				return false
			}
			var e anyv
			lastOneof(item, &e)
			total += 1 + e.size(limit-total)
			return true
		})
		return total
	case 6:
		total := 0
		eachListItem(v.b, func(item []byte) bool {
			e := kvOf(item)
			total += len(e.key) + 1 + e.val.size(limit-total)
			return total <= limit
		})
		return total
	}
	return 8
}

// value is the Value fromPValue makes of the pdata value.
func (v *anyv) value() Value {
	switch v.f {
	case 1, 7:
		return Str(string(v.b))
	case 2:
		return Bool(v.n != 0)
	case 3:
		return Int(int64(v.n))
	case 4:
		return Double(math.Float64frombits(v.n))
	case 5, 6:
		return Raw(v.raw())
	}
	return Value{}
}

// raw is pcommon.Value.AsRaw of the pdata value.
func (v *anyv) raw() any {
	switch v.f {
	case 1:
		return string(v.b)
	case 2:
		return v.n != 0
	case 3:
		return int64(v.n)
	case 4:
		return math.Float64frombits(v.n)
	case 7:
		if len(v.b) == 0 {
			return []byte(nil)
		}
		return append([]byte(nil), v.b...)
	case 5:
		out := []any{}
		eachListItem(v.b, func(item []byte) bool {
			var e anyv
			lastOneof(item, &e)
			out = append(out, e.raw())
			return true
		})
		return out
	case 6:
		out := map[string]any{}
		eachListItem(v.b, func(item []byte) bool {
			e := kvOf(item)
			out[string(e.key)] = e.val.raw()
			return true
		})
		return out
	}
	return nil
}

// str is pcommon.Value.AsString of the pdata value (a resource's service.name).
func (v *anyv) str() string {
	switch v.f {
	case 1:
		return string(v.b)
	case 5, 6:
		// A structured service name (never seen in practice) is formatted by pdata itself, from
		// a request that holds only it: FromRaw would lose the order of its keys.
		var kvb []byte
		kvb = protowire.AppendTag(kvb, 1, protowire.BytesType)
		kvb = protowire.AppendString(kvb, "service.name")
		kvb = protowire.AppendTag(kvb, 2, protowire.BytesType)
		kvb = protowire.AppendVarint(kvb, uint64(protowire.SizeTag(protowire.Number(v.f))+protowire.SizeBytes(len(v.b))))
		kvb = protowire.AppendTag(kvb, protowire.Number(v.f), protowire.BytesType)
		kvb = protowire.AppendBytes(kvb, v.b)
		res := protowire.AppendTag(nil, 1, protowire.BytesType)
		res = protowire.AppendBytes(res, kvb)
		rs := protowire.AppendTag(nil, 1, protowire.BytesType)
		rs = protowire.AppendBytes(rs, res)
		req := protowire.AppendTag(nil, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, rs)
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(req)
		if err != nil || td.ResourceSpans().Len() == 0 {
			return ""
		}
		sv, _ := td.ResourceSpans().At(0).Resource().Attributes().Get("service.name")
		return sv.AsString()
	}
	pv := pcommon.NewValueEmpty()
	if err := pv.FromRaw(v.raw()); err != nil {
		return ""
	}
	return pv.AsString()
}

// view is b as a string without a copy, for lookups that do not keep it.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// inputMessage reports whether k is a key of an LLM span's input messages, which
// pruneSpanAttrs may drop.
func inputMessage(k string) bool {
	return len(k) > 14 && (k[0] == 'l' && strings.HasPrefix(k, "llm.input_messages.") || k[0] == 'g' && strings.HasPrefix(k, "gen_ai.prompt."))
}

// ownViews copies every string value of attrs that is still a view of the span's bytes b
// (a short one into strs).
func ownViews(attrs []Attr, b []byte, strs *strArena) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	for i := range attrs {
		s := attrs[i].Value.Str() // "" for any other type
		if s == "" {
			continue
		}
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p >= lo && p < hi {
			attrs[i].Value = Str(strs.str(unsafe.Slice(unsafe.StringData(s), len(s))))
		}
	}
}

// ownKey returns the held copy of a key: the shared one when it is well-known, else a copy
// (k is a view into the request's bytes, which are reused).
func ownKey(shared, k string) string {
	if len(k) > 0 && unsafe.StringData(shared) == unsafe.StringData(k) {
		return strings.Clone(k)
	}
	return shared
}

// attrCheck follows Limits.checkAttrs over one attribute map as its attributes are
// decoded: their count, and the first attribute over a limit.
type attrCheck struct {
	n     int
	first *Error
}

func (c *attrCheck) add(d *wireDec, a *kv, at position) {
	c.n++
	if c.first != nil || d.rej != nil {
		return // only the first problem of the request is told
	}
	max := d.lim.MaxAttributeValueBytes
	if len(a.key) > max {
		c.first = reject(ingest.ReasonLimits, "%s: an attribute key is %d bytes, more than the limit of %d", at, len(a.key), max)
	} else if a.val.size(max) > max {
		c.first = reject(ingest.ReasonLimits, "%s: attribute %q is over %d bytes, the limit for one value", at, truncate.Ellipsis(string(a.key), 64), max)
	}
}

// problem is Limits.checkAttrs' answer for the map.
func (c *attrCheck) problem(d *wireDec, at position) *Error {
	if c.n > d.lim.MaxAttributesPerSpan {
		return reject(ingest.ReasonLimits, "%s: %d attributes, more than the limit of %d", at, c.n, d.lim.MaxAttributesPerSpan)
	}
	return c.first
}

// wireDec is one request's decoding.
type wireDec struct {
	lim  Limits
	keys VariantKeys // where a span's variant is read from (variant.go)
	n    int         // spans of the request, as pdata's SpanCount
	rej  *Error      // the first problem the limits find, in their order
	buf  *attrBuf
	dst  []Span
	// keep is DecodeProto's keep (nil: every text is kept); last and lastKeep remember its
	// answer for the trace of the previous span (a trace's spans are usually adjacent).
	keep     func(pcommon.TraceID) bool
	last     pcommon.TraceID
	lastKeep bool
	strs     strArena // the held copies of short attribute values and span names
}

// strArena copies short strings out of a request's bytes into shared blocks: one allocation
// for many attribute values and span names of a request instead of one each. A block is never
// reused or grown, so its strings stay valid; a string that outlives its trace (a label value,
// a session's key) keeps its block alive, at most arenaBlock bytes.
type strArena struct{ block []byte }

const (
	arenaBlock = 1024
	arenaMax   = 128 // a longer string gets an allocation of its own
)

// str returns a copy of b.
func (a *strArena) str(b []byte) string {
	n := len(b)
	switch {
	case n == 0:
		return ""
	case n > arenaMax:
		return string(b)
	case cap(a.block)-len(a.block) < n:
		a.block = make([]byte, 0, arenaBlock)
	}
	a.block = append(a.block, b...)
	return unsafe.String(&a.block[len(a.block)-n], n)
}

// keeps reports whether the documents' texts of trace id are kept.
func (d *wireDec) keeps(id pcommon.TraceID) bool {
	if d.keep == nil {
		return true
	}
	if id != d.last || id.IsEmpty() {
		d.last, d.lastKeep = id, d.keep(id)
	}
	return d.lastKeep
}

// DecodeProto appends to dst one Span per span of the OTLP ExportTraceServiceRequest b, as
// FromTraces would from pdata's decoding of b followed by lim.Check, and returns them with the
// number of spans of the request. It reads variants from keys (nil: the defaults), and keeps
// the documents' texts only of the traces keep names (elide.go; nil keeps all). A request
// pdata cannot decode, or that the limits refuse, appends nothing and returns an *Error.
// Nothing returned points into b.
func DecodeProto(b []byte, lim Limits, dst []Span, keys VariantKeys, keep func(pcommon.TraceID) bool) ([]Span, int, *Error) {
	if keys == nil {
		keys = defaultVariantKeys
	}
	d := wireDec{lim: lim, keys: keys, dst: dst, buf: attrBufs.Get().(*attrBuf), keep: keep}
	defer d.buf.release()
	start := len(dst)
	fail := func(werr *Error) ([]Span, int, *Error) {
		ReleaseSpans(d.dst[start:])
		clear(d.dst[start:])
		return d.dst[:start], 0, werr
	}
	rs := 0
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, requestSchema)
		if err == nil && f.Num == 1 {
			err = d.resourceSpans(f.B, rs)
			rs++
		}
		if err != nil {
			return fail(&Error{Reason: ingest.ReasonMalformed, Msg: err.Error()})
		}
		pos = next
	}
	if d.n > lim.MaxSpansPerRequest {
		return fail(reject(ingest.ReasonLimits, "request holds %d spans, more than the limit of %d", d.n, lim.MaxSpansPerRequest))
	}
	if d.rej != nil {
		return fail(d.rej)
	}
	return d.dst, d.n, nil
}

func (d *wireDec) resourceSpans(b []byte, rs int) error {
	// First the resource (its occurrences merge) and whether scope_spans is there: pdata takes
	// the deprecated field 1000 only when it is not.
	hasScopes := false
	var service kv
	found := false
	var attrs attrCheck
	var resVariant variantPick
	var resSeen variantSeen // the resource's occurrences merge: a key's first one counts
	at := position{rs: rs, kind: atResource}
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, rsSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			if err := d.resource(f.B, &attrs, at, &service, &found, &resVariant, &resSeen); err != nil {
				return err
			}
		case 2:
			hasScopes = true
		}
	}
	if d.rej == nil {
		d.rej = attrs.problem(d, at)
	}
	name := ""
	switch {
	case found && service.val.f == 1:
		// unique's canonical copy: a sidecar sees one service or a few, so a request's name
		// costs no allocation (an entry no handle holds goes at a collection; the next
		// request's name is then copied once again).
		name = unique.Make(string(service.val.b)).Value()
	case found:
		name = service.val.str()
	}
	ss := 0
	for pos := 0; pos < len(b); {
		f, next, _ := otlpwire.ReadField(b, pos, rsSchema) // checked above
		pos = next
		switch {
		case f.Num == 2 || (f.Num == 1000 && !hasScopes):
			if err := d.scopeSpans(f.B, rs, ss, name, true, resVariant); err != nil {
				return err
			}
			ss++
		case f.Num == 1000:
			if err := d.scopeSpans(f.B, rs, 0, name, false, resVariant); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *wireDec) resource(b []byte, attrs *attrCheck, at position, service *kv, found *bool, variant *variantPick, seen *variantSeen) error {
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, resourceSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			a, err := readKV(f.B, 0)
			if err != nil {
				return err
			}
			attrs.add(d, &a, at)
			variant.consider(d.keys, seen, &a)
			if !*found && view(a.key) == "service.name" {
				*service, *found = a, true
			}
		case 3:
			if err := otlpwire.Validate(f.B, entitySchema); err != nil {
				return err
			}
		}
	}
	return nil
}

// scopeSpans decodes the spans of one ScopeSpans; keep false only checks them (the deprecated
// scope spans pdata drops).
func (d *wireDec) scopeSpans(b []byte, rs, ss int, service string, keep bool, resVariant variantPick) error {
	span := 0
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, ssSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			err = d.scope(f.B)
		case 2:
			err = d.span(f.B, position{rs: rs, ss: ss, span: span, kind: atSpan}, service, keep, resVariant)
			span++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *wireDec) scope(b []byte) error {
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, scopeSchema)
		if err != nil {
			return err
		}
		pos = next
		if f.Num == 3 {
			if _, err := readKV(f.B, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

func readID(dst []byte, b []byte, idErr error) error {
	switch len(b) {
	case 0:
		clear(dst)
	case len(dst):
		copy(dst, b)
	default:
		return idErr
	}
	return nil
}

// span decodes one span as fromSpan reads it, and follows checkSpan's limits.
func (d *wireDec) span(b []byte, at position, service string, keep bool, resVariant variantPick) error {
	var (
		s                       Span
		traceState, name        []byte
		start, end              uint64
		flags                   uint32
		nAttrs, nEvents, nLinks int
		attrs                   attrCheck
		evProblem, linkProblem  *Error
		kind                    int32
		traceID                 [16]byte
		spanID, parent          [8]byte
		err                     error
		checking                = keep && d.rej == nil
		evChecks, linkChecks    attrCheck
		evIndex, linkIndex      int
		spanVariant, evVariant  variantPick
		spanSeen                variantSeen
	)
	// Pass 1: the scalar fields (the last occurrence wins), the counts and the attributes'
	// bytes (read in pass 3).
	buf := d.buf
	buf.kvs = buf.kvs[:0]
	for pos := 0; pos < len(b); {
		var f otlpwire.Field
		if f, pos, err = otlpwire.ReadField(b, pos, spanSchema); err != nil {
			return err
		}
		switch f.Num {
		case 1:
			err = readID(traceID[:], f.B, errTraceIDLength)
		case 2:
			err = readID(spanID[:], f.B, errSpanIDLength)
		case 3:
			traceState = f.B
		case 4:
			err = readID(parent[:], f.B, errSpanIDLength)
		case 5:
			name = f.B
		case 6:
			kind = int32(f.N)
		case 7:
			start = f.N
		case 8:
			end = f.N
		case 9:
			nAttrs++
			buf.kvs = append(buf.kvs, f.B)
		case 11:
			nEvents++
		case 13:
			nLinks++
		case 15:
			err = otlpwire.Validate(f.B, statusSchema)
		case 16:
			flags = uint32(f.N)
		}
		if err != nil {
			return err
		}
	}
	s = Span{
		TraceID:      pcommon.TraceID(traceID),
		SpanID:       pcommon.SpanID(spanID),
		ParentSpanID: pcommon.SpanID(parent),
		RemoteParent: flags&flagHasIsRemote != 0 && flags&flagIsRemote != 0,
		Name:         d.strs.str(name),
		Kind:         ptrace.SpanKind(kind),
		Start:        pcommon.Timestamp(start).AsTime(),
		End:          pcommon.Timestamp(end).AsTime(),
		Service:      service,
		pooled:       true,
	}
	if len(traceState) > 0 {
		if p, found, err := UpstreamProbability(view(traceState)); err != nil {
			s.UpstreamP = -1
		} else if found {
			s.UpstreamP = p
		}
	}
	if nLinks > 0 && keep {
		s.Links = make([]Link, min(nLinks, maxLinksPerSpan))
	}
	// Pass 2: events and links (fromSpan reads the events before the attributes: pruning
	// reads them). Pass 3: the attributes gathered in pass 1.
	if nEvents > 0 || nLinks > 0 {
		for pos := 0; pos < len(b); {
			f, next, _ := otlpwire.ReadField(b, pos, spanSchema) // checked in pass 1
			pos = next
			switch f.Num {
			case 11:
				evChecks = attrCheck{}
				err = d.event(f.B, &s, keep, nEvents-evIndex, &evChecks, position{rs: at.rs, ss: at.ss, span: at.span, sub: evIndex, kind: atEvent}, &evVariant)
				if checking && evProblem == nil {
					evProblem = evChecks.problem(d, position{rs: at.rs, ss: at.ss, span: at.span, sub: evIndex, kind: atEvent})
				}
				evIndex++
			case 13:
				linkChecks = attrCheck{}
				lat := position{rs: at.rs, ss: at.ss, span: at.span, sub: linkIndex, kind: atLink}
				var l Link
				l, err = d.link(f.B, &linkChecks, lat)
				if keep && linkIndex < len(s.Links) {
					s.Links[linkIndex] = l
				}
				if checking && linkProblem == nil {
					linkProblem = linkChecks.problem(d, lat)
				}
				linkIndex++
			}
			if err != nil {
				ReleaseSpans([]Span{s})
				return err
			}
		}
	}
	buf.attrs = buf.attrs[:0]
	var el *elision // documents' texts this span may not keep
	views := false  // an attribute holds a view of b
	if keep && !d.keeps(s.TraceID) {
		el = &buf.el
		el.reset()
	}
	if nAttrs > 0 {
		for _, kvb := range buf.kvs {
			a, err := readKV(kvb, 0)
			if err != nil {
				buf.used = max(buf.used, len(buf.attrs)) // release clears them, views included
				ReleaseSpans([]Span{s})
				return err
			}
			if checking {
				attrs.add(d, &a, at)
			}
			if !keep {
				continue
			}
			spanVariant.consider(d.keys, &spanSeen, &a)
			k, ok := conventions.KeptKey(view(a.key))
			if !ok || len(buf.attrs) == maxAttrsPerSpan {
				continue
			}
			v := Value{}
			// Held as views of the request, and copied by ownViews only if still there once
			// el.resolve has dropped the documents' texts of a refused trace and
			// pruneSpanAttrs the input messages no reader reads (an LLM span's system message
			// often holds the whole context again).
			if (el != nil && el.consider(k, &a.val, len(buf.attrs))) || (a.val.f == 1 && inputMessage(k)) {
				v, views = Str(view(a.val.b)), true
			} else if a.val.f == 1 || a.val.f == 7 {
				v = Str(d.strs.str(a.val.b)) // as value() does, held in the arena
			} else {
				v = a.val.value()
			}
			buf.attrs = append(buf.attrs, Attr{Key: ownKey(k, view(a.key)), Value: v})
		}
		if el != nil {
			s.Elided = el.resolve(buf.attrs)
		}
	}
	if !keep {
		buf.attrs = buf.attrs[:0]
		ReleaseSpans([]Span{s})
		return nil
	}
	buf.used = max(buf.used, len(buf.attrs))
	buf.attrs = pruneSpanAttrs(buf.attrs, &s, &buf.msgs)
	if views {
		ownViews(buf.attrs, b, &d.strs)
	}
	s.Attrs = buf.take()
	// VariantKeys.read: for each key in order, the span's attribute, then a feature-flag
	// event's, then the resource's; so the lowest rank wins and, on a tie, that order.
	best := spanVariant
	for _, p := range []variantPick{evVariant, resVariant} {
		if p.rank != 0 && (best.rank == 0 || p.rank < best.rank) {
			best = p
		}
	}
	s.Variant, s.VariantRank = best.val, best.rank
	d.n++
	d.dst = append(d.dst, s)
	if !checking || d.rej != nil {
		return nil
	}
	max := d.lim.MaxAttributeValueBytes
	switch {
	case s.TraceID.IsEmpty():
		d.rej = reject(ingest.ReasonInvalid, "%s: trace_id must be 16 bytes, not all zero (hex-encoded in OTLP/JSON)", at)
	case s.SpanID.IsEmpty():
		d.rej = reject(ingest.ReasonInvalid, "%s: span_id must be 8 bytes, not all zero (hex-encoded in OTLP/JSON)", at)
	case len(name) > max:
		d.rej = reject(ingest.ReasonLimits, "%s: name is %d bytes, more than the limit of %d", at, len(name), max)
	case attrs.problem(d, at) != nil:
		d.rej = attrs.problem(d, at)
	case nEvents > d.lim.MaxEventsPerSpan:
		d.rej = reject(ingest.ReasonLimits, "%s: %d events, more than the limit of %d", at, nEvents, d.lim.MaxEventsPerSpan)
	case evProblem != nil:
		d.rej = evProblem
	case nLinks > d.lim.MaxEventsPerSpan:
		d.rej = reject(ingest.ReasonLimits, "%s: %d links, more than the limit of %d", at, nLinks, d.lim.MaxEventsPerSpan)
	case linkProblem != nil:
		d.rej = linkProblem
	}
	return nil
}

// event decodes one span event into s.Events when fromSpan keeps it; left is the number of
// events from this one on (fromSpan's capacity for s.Events).
func (d *wireDec) event(b []byte, s *Span, keep bool, left int, checks *attrCheck, at position, variant *variantPick) error {
	var name []byte
	var ts uint64
	nAttrs := 0
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, eventSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			ts = f.N
		case 2:
			name = f.B
		case 3:
			nAttrs++
		}
	}
	flag := view(name) == featureFlagEvent || view(name) == legacyFeatureFlagEvent
	var seen variantSeen // each event's attributes are read with their own Get
	keep = keep && len(s.Events) < maxEventsPerSpan && conventions.KeptEvent(view(name))
	filter := filterNone
	if keep {
		filter = eventAttrFilter(view(name))
	}
	buf := d.buf
	buf.attrs = buf.attrs[:0]
	if nAttrs > 0 {
		for pos := 0; pos < len(b); {
			f, next, _ := otlpwire.ReadField(b, pos, eventSchema)
			pos = next
			if f.Num != 3 {
				continue
			}
			a, err := readKV(f.B, 0)
			if err != nil {
				return err
			}
			checks.add(d, &a, at)
			if flag {
				variant.consider(d.keys, &seen, &a)
			}
			if !keep || len(buf.attrs) == maxAttrsPerSpan {
				continue
			}
			k := view(a.key)
			if filter == filterGenAIEvents && !conventions.EventKey(k) {
				continue
			}
			shared, _ := conventions.FixedKey(k)
			buf.attrs = append(buf.attrs, Attr{Key: ownKey(shared, k), Value: a.val.value()})
		}
	}
	if !keep {
		return nil
	}
	buf.used = max(buf.used, len(buf.attrs))
	e := Event{Name: string(name), Time: pcommon.Timestamp(ts).AsTime()}
	if !keepMessageEvent(&e, buf.attrs) {
		buf.attrs = buf.attrs[:0]
		return nil
	}
	e.Attrs = buf.take()
	if s.Events == nil {
		s.Events = make([]Event, 0, min(left, maxEventsPerSpan))
	}
	s.Events = append(s.Events, e)
	return nil
}

func (d *wireDec) link(b []byte, checks *attrCheck, at position) (Link, error) {
	var l Link
	var tid [16]byte
	var sid [8]byte
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, linkSchema)
		if err != nil {
			return l, err
		}
		pos = next
		switch f.Num {
		case 1:
			err = readID(tid[:], f.B, errTraceIDLength)
		case 2:
			err = readID(sid[:], f.B, errSpanIDLength)
		case 4:
			var a kv
			if a, err = readKV(f.B, 0); err == nil {
				checks.add(d, &a, at)
			}
		}
		if err != nil {
			return l, err
		}
	}
	return Link{TraceID: pcommon.TraceID(tid), SpanID: pcommon.SpanID(sid)}, nil
}

// variantPick is the best variant one source of a span carries (its attributes, its
// feature-flag events, its resource), read as VariantKeys.read reads pdata: the value of the
// lowest-ranked key whose first occurrence is a usable variant.
type variantPick struct {
	val  string
	rank uint8
}

// variantSeen marks the keys whose first occurrence was read (pdata's Map.Get reads only it).
type variantSeen [4]uint64

// consider reads a as a variant of keys, unless its key's first occurrence was read already.
func (p *variantPick) consider(keys VariantKeys, seen *variantSeen, a *kv) {
	k := view(a.key)
	i := -1
	for j, key := range keys {
		if j >= 255 {
			break
		}
		if key == k {
			i = j
			break
		}
	}
	if i < 0 || seen[i/64]&(1<<(i%64)) != 0 {
		return
	}
	seen[i/64] |= 1 << (i % 64)
	if p.rank != 0 && uint8(i+1) >= p.rank {
		return
	}
	switch a.val.f {
	case 1, 2, 3, 4: // string, bool, int, double: what variantValue takes
	default:
		return
	}
	v := strings.TrimSpace(a.val.str())
	if v == "" {
		return
	}
	p.val, p.rank = strings.Clone(truncate.String(v, record.MaxVariantLength)), uint8(i+1)
}
