package span

import (
	"unique"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ragwatch/ragwatch/collector/conventions"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/otlpwire"
)

// Decoding OTLP logs: the log records that are events of the conventions (GenAI events, as the
// official OpenTelemetry GenAI instrumentations emit their prompts and answers) become events
// of their span; every other log record is skipped at the cost of its header. Like
// DecodeProto, DecodeLogs walks the protobuf once (wire.go's readers and checks) and copies
// out only what a span event of the same name would keep.

// LogEventAttr is the attribute under which a log record's body that is not a map is handed to
// the readers (span.MessageFromEvent reads it as a message). A map body's entries become
// attributes of their own: the body of a log-based GenAI event holds what the span event's
// attributes held (`{"content": …}`, a choice's `{"message": {…}}`).
const LogEventAttr = "body"

// logValue is v.value() with a string left a view of the request's bytes: logRecord copies it
// (ownViews) only once the event is kept; a system message, often the whole prompt with its
// documents, never is.
func logValue(v *anyv) Value {
	if v.f == 1 {
		return Str(view(v.b))
	}
	return v.value()
}

// logBodyKey is the attribute key of a body entry: a well-known one shared, else a copy.
func logBodyKey(k []byte) string {
	switch view(k) {
	case "content":
		return "content"
	case "message":
		return "message"
	case "role":
		return "role"
	case "finish_reason":
		return "finish_reason"
	case "index":
		return "index"
	}
	return string(k)
}

// eventNameAttr is the attribute that names a log-based event before OTLP's
// LogRecord.event_name existed (semantic conventions before v1.36, and SDKs that still write it).
const eventNameAttr = "event.name"

var (
	logsRequestSchema = otlpwire.NewSchema(1, otlpwire.WTLen, "ResourceLogs")
	rlSchema          = otlpwire.NewSchema(1, otlpwire.WTLen, "Resource", 2, otlpwire.WTLen, "ScopeLogs", 3, otlpwire.WTLen, "SchemaUrl", 1000, otlpwire.WTLen, "DeprecatedScopeLogs")
	slSchema          = otlpwire.NewSchema(1, otlpwire.WTLen, "Scope", 2, otlpwire.WTLen, "LogRecords", 3, otlpwire.WTLen, "SchemaUrl")
	logRecordSchema   = otlpwire.NewSchema(1, otlpwire.WTI64, "TimeUnixNano", 2, otlpwire.WTVarint, "SeverityNumber", 3, otlpwire.WTLen, "SeverityText",
		5, otlpwire.WTLen, "Body", 6, otlpwire.WTLen, "Attributes", 7, otlpwire.WTVarint, "DroppedAttributesCount", 8, otlpwire.WTI32, "Flags",
		9, otlpwire.WTLen, "TraceId", 10, otlpwire.WTLen, "SpanId", 11, otlpwire.WTI64, "ObservedTimeUnixNano", 12, otlpwire.WTLen, "EventName")
)

// LogCounts says what the log records of one request were.
type LogCounts struct {
	Records int // log records in the request
	Events  int // events of the conventions with a trace id and span id: returned as carriers
	NoSpan  int // events of the conventions without a trace id or span id: dropped
	Unread  int // events no reader reads (a system or tool message, keepMessageEvent): dropped
	Other   int // every other log record: dropped
}

// DecodeLogs appends to dst one carrier Span (EventsOnly) per log record of the OTLP
// ExportLogsServiceRequest b that is an event of the conventions (conventions.EventOf, by the
// record's event_name or, when that is empty, its event.name attribute) and names its span:
// TraceID, SpanID, Service and one Event, whose attributes are the record's (filtered as a span
// event's are) and its body: a map body's entries as attributes of their own, any other body
// as LogEventAttr. A request that is not OTLP protobuf, or that lim
// refuses (records per request as MaxSpansPerRequest, attributes per record, value sizes, the
// body as one value), appends nothing and returns an *Error. Nothing returned points into b.
func DecodeLogs(b []byte, lim Limits, dst []Span) ([]Span, LogCounts, *Error) {
	d := wireDec{lim: lim, keys: defaultVariantKeys, dst: dst, buf: attrBufs.Get().(*attrBuf)}
	defer d.buf.release()
	start := len(dst)
	var c LogCounts
	fail := func(werr *Error) ([]Span, LogCounts, *Error) {
		ReleaseSpans(d.dst[start:])
		clear(d.dst[start:])
		return d.dst[:start], LogCounts{}, werr
	}
	rl := 0
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, logsRequestSchema)
		if err == nil && f.Num == 1 {
			err = d.resourceLogs(f.B, rl, &c)
			rl++
		}
		if err != nil {
			return fail(&Error{Reason: ingest.ReasonMalformed, Msg: err.Error()})
		}
		pos = next
	}
	if c.Records > lim.MaxSpansPerRequest {
		return fail(reject(ingest.ReasonLimits, "request holds %d log records, more than the limit of %d", c.Records, lim.MaxSpansPerRequest))
	}
	if d.rej != nil {
		return fail(d.rej)
	}
	return d.dst, c, nil
}

func (d *wireDec) resourceLogs(b []byte, rl int, c *LogCounts) error {
	hasScopes := false
	var service kv
	found := false
	var attrs attrCheck
	var variant variantPick // unused: a carrier has no variant of its own
	var seen variantSeen
	at := logPosition{rl: rl, resource: true}
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, rlSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			if err := d.resource(f.B, &attrs, position{}, &service, &found, &variant, &seen); err != nil {
				return err
			}
		case 2:
			hasScopes = true
		}
	}
	if d.rej == nil && attrs.n > d.lim.MaxAttributesPerSpan {
		d.rej = reject(ingest.ReasonLimits, "%s: %d attributes, more than the limit of %d", at, attrs.n, d.lim.MaxAttributesPerSpan)
	}
	if d.rej == nil && attrs.first != nil {
		// attrCheck words its problem for a trace request's resource: name the log request's.
		d.rej = reject(attrs.first.Reason, "%s: an attribute (or its key) is over %d bytes, the limit for one value", at, d.lim.MaxAttributeValueBytes)
	}
	name := ""
	switch {
	case found && service.val.f == 1:
		name = unique.Make(string(service.val.b)).Value()
	case found:
		name = service.val.str()
	}
	sl := 0
	for pos := 0; pos < len(b); {
		f, next, _ := otlpwire.ReadField(b, pos, rlSchema) // checked above
		pos = next
		if f.Num == 2 || (f.Num == 1000 && !hasScopes) {
			if err := d.scopeLogs(f.B, rl, sl, name, c); err != nil {
				return err
			}
			sl++
		} else if f.Num == 1000 {
			if err := d.scopeLogs(f.B, rl, 0, "", nil); err != nil { // checked, not kept (pdata drops it)
				return err
			}
		}
	}
	return nil
}

// scopeLogs decodes the log records of one ScopeLogs; c nil only checks them.
func (d *wireDec) scopeLogs(b []byte, rl, sl int, service string, c *LogCounts) error {
	rec := 0
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, slSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			err = d.scope(f.B)
		case 2:
			err = d.logRecord(f.B, logPosition{rl: rl, sl: sl, rec: rec}, service, c)
			rec++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// logPosition locates a log record in a request, for the limits' messages.
type logPosition struct {
	rl, sl, rec int
	resource    bool
}

func (p logPosition) String() string {
	if p.resource {
		return "resource_logs[" + itoa(p.rl) + "].resource"
	}
	return "resource_logs[" + itoa(p.rl) + "].scope_logs[" + itoa(p.sl) + "].log_records[" + itoa(p.rec) + "]"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// logRecord reads one log record's header (ids, times, event name) and its attributes' keys
// only, and decodes the rest only when it is an event of the conventions.
func (d *wireDec) logRecord(b []byte, at logPosition, service string, c *LogCounts) error {
	var (
		traceID       [16]byte
		spanID        [8]byte
		ts, observed  uint64
		eventName     []byte
		body          []byte
		hasBody       bool
		nAttrs        int
		attrs         attrCheck
		attrNameValue []byte
	)
	buf := d.buf
	buf.kvs = buf.kvs[:0]
	for pos := 0; pos < len(b); {
		f, next, err := otlpwire.ReadField(b, pos, logRecordSchema)
		if err != nil {
			return err
		}
		pos = next
		switch f.Num {
		case 1:
			ts = f.N
		case 11:
			observed = f.N
		case 5:
			var v anyv
			if err = readAny(f.B, 0, &v); err == nil {
				body, hasBody = f.B, true
			}
		case 6:
			var a kv
			if a, err = readKV(f.B, 0); err == nil {
				nAttrs++
				attrs.n++
				if d.rej == nil && attrs.first == nil && (len(a.key) > d.lim.MaxAttributeValueBytes || a.val.size(d.lim.MaxAttributeValueBytes) > d.lim.MaxAttributeValueBytes) {
					attrs.first = reject(ingest.ReasonLimits, "%s: attribute %q is over %d bytes, the limit for one value", at, truncName(a.key), d.lim.MaxAttributeValueBytes)
				}
				if view(a.key) == eventNameAttr && a.val.f == 1 {
					attrNameValue = a.val.b
				}
				buf.kvs = append(buf.kvs, f.B)
			}
		case 9:
			err = readID(traceID[:], f.B, errTraceIDLength)
		case 10:
			err = readID(spanID[:], f.B, errSpanIDLength)
		case 12:
			eventName = f.B
		}
		if err != nil {
			return err
		}
	}
	if c == nil {
		return nil
	}
	c.Records++
	if d.rej == nil {
		switch {
		case attrs.n > d.lim.MaxAttributesPerSpan:
			d.rej = reject(ingest.ReasonLimits, "%s: %d attributes, more than the limit of %d", at, attrs.n, d.lim.MaxAttributesPerSpan)
		case attrs.first != nil:
			d.rej = attrs.first
		}
		if d.rej == nil && hasBody {
			var v anyv
			lastOneof(body, &v)
			if v.size(d.lim.MaxAttributeValueBytes) > d.lim.MaxAttributeValueBytes {
				d.rej = reject(ingest.ReasonLimits, "%s: body is over %d bytes, the limit for one value", at, d.lim.MaxAttributeValueBytes)
			}
		}
	}
	name := view(eventName)
	if name == "" {
		name = view(attrNameValue)
	}
	ev, ok := conventions.EventOf(name)
	if !ok || d.rej != nil {
		c.Other++
		return nil
	}
	if pcommon.TraceID(traceID).IsEmpty() || pcommon.SpanID(spanID).IsEmpty() {
		c.NoSpan++
		return nil
	}
	if ts == 0 {
		ts = observed
	}
	filter := eventAttrFilter(ev.Name)
	buf.attrs = buf.attrs[:0]
	for _, kvb := range buf.kvs {
		if len(buf.attrs) == maxAttrsPerSpan {
			break
		}
		a, _ := readKV(kvb, 0) // checked above
		k := view(a.key)
		if k == eventNameAttr || (filter == filterGenAIEvents && !conventions.EventKey(k)) {
			continue
		}
		shared, _ := conventions.FixedKey(k)
		buf.attrs = append(buf.attrs, Attr{Key: ownKey(shared, k), Value: logValue(&a.val)})
	}
	if hasBody && filter != filterGenAIEvents {
		var v anyv
		lastOneof(body, &v)
		switch {
		case v.f == 6:
			// A map body's entries are what the span event's attributes were (content,
			// message, role): read as those, without a map of the whole body.
			eachListItem(v.b, func(item []byte) bool {
				if len(buf.attrs) < maxAttrsPerSpan {
					e := kvOf(item)
					buf.attrs = append(buf.attrs, Attr{Key: logBodyKey(e.key), Value: logValue(&e.val)})
				}
				return true
			})
		case v.f != 0:
			buf.attrs = append(buf.attrs, Attr{Key: LogEventAttr, Value: logValue(&v)})
		}
	}
	buf.used = max(buf.used, len(buf.attrs))
	e := Event{Name: ev.Name, Time: pcommon.Timestamp(ts).AsTime()}
	if !keepMessageEvent(&e, buf.attrs) {
		buf.attrs = buf.attrs[:0]
		c.Unread++
		return nil
	}
	ownViews(buf.attrs, b, &d.strs)
	e.Attrs = buf.take()
	c.Events++
	d.dst = append(d.dst, Span{
		TraceID:    pcommon.TraceID(traceID),
		SpanID:     pcommon.SpanID(spanID),
		Service:    service,
		Events:     []Event{e},
		EventsOnly: true,
		pooled:     true,
	})
	return nil
}

func truncName(k []byte) string {
	if len(k) > 64 {
		k = k[:64]
	}
	return string(k)
}

// JoinEvents moves the events of the carriers among spans (EventsOnly, from DecodeLogs) onto
// the span of the same id they belong to, and returns spans without the carriers, with how
// many carriers were joined and how many found no span of theirs (their events are dropped).
// spans is reused in place; the slots past the returned length are cleared.
func JoinEvents(spans []Span) (out []Span, joined, orphaned int) {
	// In place: the carriers are read where they are, then the spans close over them (a
	// separate slice of carriers would copy each once more).
	for ci := range spans {
		c := &spans[ci]
		if !c.EventsOnly {
			continue
		}
		target := -1
		for i := range spans {
			if !spans[i].EventsOnly && spans[i].SpanID == c.SpanID {
				target = i
				break
			}
		}
		if target < 0 {
			orphaned++
			ReleaseSpans(spans[ci : ci+1])
			continue
		}
		t := &spans[target]
		for _, e := range c.Events {
			switch {
			case len(t.Events) >= maxEventsPerSpan:
				if c.pooled {
					putAttrs(e.Attrs)
				}
				continue
			case c.pooled && !t.pooled:
				// ReleaseSpans skips t: hand the pooled slice back now and keep a copy.
				attrs := append([]Attr(nil), e.Attrs...)
				putAttrs(e.Attrs)
				e.Attrs = attrs
			case !c.pooled && t.pooled:
				// ReleaseSpans would hand t's events to the pools: give it a pooled copy.
				attrs := getAttrs(len(e.Attrs))
				copy(attrs, e.Attrs)
				e.Attrs = attrs
			}
			t.Events = append(t.Events, e)
		}
		c.Events = nil
		joined++
	}
	n := 0
	for i := range spans {
		if spans[i].EventsOnly {
			continue
		}
		if n != i {
			spans[n] = spans[i]
		}
		n++
	}
	clear(spans[n:])
	return spans[:n], joined, orphaned
}
