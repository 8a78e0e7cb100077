package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ragwatch/ragwatch/internal/record"
)

// The scoring stream carries a sampled record in one of two forms, told apart by their first
// bytes: JSON (docs/record.md; what a replay or an older publisher sends) or the binary form
// below, which is what the publisher writes when scoring.queue.encoding is "binary" (the
// default). Both decode to the same record: the binary form is protobuf's wire format
// (protowire) behind recordMagic, with the fields of the record's JSON and nothing else, so a
// record comes out of the queue exactly as json.Unmarshal(json.Marshal(r)) would give it.
// Publishing and decoding it cost a fraction of JSON's, whose escaping and unescaping of every
// document's text were a tenth of the process's CPU on the defaults at full speed
// (docs/performance.md).
//
// A record the binary form cannot carry exactly as JSON would — a string that is not valid
// UTF-8 (JSON replaces its bytes), a float JSON refuses, a time outside RFC 3339 — is
// published as JSON instead: appendRecord says so and the caller encodes JSON.

// recordMagic starts the binary form: a NUL, which no JSON text starts with, "rwr" and the
// form's version.
const recordMagic = "\x00rwr\x01"

// Encodings of scoring.queue.encoding.
const (
	EncodingBinary = "binary"
	EncodingJSON   = "json"
)

// Field numbers of the binary form. Unknown fields are skipped when decoding, so a later
// version may add fields; a changed meaning takes a new recordMagic version.
const (
	fTraceID protowire.Number = iota + 1
	fSpanID
	fService
	fSessionID
	fUserID
	fTime
	fQuery
	fDocument
	fAnswer
	fCitation
	fModel
	fInputTokens
	fOutputTokens
	fLatencyRetrieval
	fLatencyGeneration
	fLatencyTotal
	fFeedback
	fVariant
	fPairID
	fTurn
	fHistory
	fLabels
	fReference
	fRelevance
	fAttribute
	fUpstreamProbability
	fSampling
	fRetrievalNotSeen
	fResponseID
)

// Fields of the nested messages.
const (
	fDocID protowire.Number = iota + 1
	fDocScore
	fDocContent
	fDocMetadata // the metadata object's JSON
)

const (
	fCiteText protowire.Number = iota + 1
	fCiteDocumentID
	fCiteEmptyIDs // 1: document_ids is [] rather than null
)

const (
	fFeedbackScore protowire.Number = iota + 1
	fFeedbackComment
	fFeedbackTime
)

const (
	fMsgRole protowire.Number = iota + 1
	fMsgContent
)

const (
	fLabelTraceID protowire.Number = iota + 1
	fLabelSpanID
	fLabelService
	fLabelValue
	fLabelRelevance
	fLabelReference
	fLabelLabeler
	fLabelTime
)

const (
	fSamplingProbability protowire.Number = iota + 1
	fSamplingReason
)

// Map entries: key 1, value 2.
const (
	fKey protowire.Number = iota + 1
	fValue
)

// errNotBinary makes appendRecord's caller fall back to JSON.
var errNotBinary = errors.New("record needs JSON")

// recordSize estimates the binary form's size, to grow the buffer once.
func recordSize(r *record.Record) int {
	n := 64 + len(r.TraceID) + len(r.SpanID) + len(r.Service) + len(r.SessionID) + len(r.UserID) +
		len(r.Query) + len(r.Answer) + len(r.Model) + len(r.ResponseID) + len(r.Variant) + len(r.PairID) + len(r.Reference)
	for i := range r.Documents {
		n += 24 + len(r.Documents[i].ID) + len(r.Documents[i].Content)
	}
	for i := range r.History {
		n += 16 + len(r.History[i].Content)
	}
	for i := range r.Citations {
		n += 8 + len(r.Citations[i].Text)
		for _, id := range r.Citations[i].DocumentIDs {
			n += 4 + len(id)
		}
	}
	return n
}

// encoder appends a record's binary form; err is set by the first field that needs JSON.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) str(num protowire.Number, s string) {
	if s == "" {
		return
	}
	if !utf8.ValidString(s) {
		e.err = errNotBinary
		return
	}
	e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
	e.b = protowire.AppendString(e.b, s)
}

// key is a map key or a value written even when empty.
func (e *encoder) key(num protowire.Number, s string) {
	if !utf8.ValidString(s) {
		e.err = errNotBinary
		return
	}
	e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
	e.b = protowire.AppendString(e.b, s)
}

// float writes f; always is for the fields JSON writes when zero, which keep a negative zero
// (JSON's omitempty leaves out both zeros, and the field decodes as +0).
func (e *encoder) float(num protowire.Number, f float64, always bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.err = errNotBinary
		return
	}
	if f == 0 && !always {
		return
	}
	e.b = protowire.AppendTag(e.b, num, protowire.Fixed64Type)
	e.b = protowire.AppendFixed64(e.b, math.Float64bits(f))
}

func (e *encoder) int(num protowire.Number, v int64) {
	if v == 0 {
		return
	}
	e.b = protowire.AppendTag(e.b, num, protowire.VarintType)
	e.b = protowire.AppendVarint(e.b, protowire.EncodeZigZag(v))
}

// time writes t as RFC 3339 text, what JSON writes. omitZero is JSON's omitzero, which leaves
// out any time whose IsZero holds, in whatever zone; without it only the zero time.Time is
// left out (JSON's "0001-01-01T00:00:00Z" decodes to it again).
func (e *encoder) time(num protowire.Number, t time.Time, omitZero bool) {
	if t == (time.Time{}) || omitZero && t.IsZero() {
		return
	}
	text, err := t.MarshalText()
	if err != nil {
		e.err = errNotBinary
		return
	}
	e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
	e.b = protowire.AppendBytes(e.b, text)
}

// message writes a nested message: fill appends its fields after a length placeholder of
// two bytes (room for 16 KiB), which is widened when the message is longer. A length under
// 128 stays in two bytes: a varint with a redundant zero byte, which protobuf decoders read
// as its value.
func (e *encoder) message(num protowire.Number, fill func()) {
	e.b = protowire.AppendTag(e.b, num, protowire.BytesType)
	at := len(e.b)
	e.b = append(e.b, 0, 0)
	fill()
	size := len(e.b) - at - 2
	if size < 1<<14 {
		e.b[at] = byte(size) | 0x80
		e.b[at+1] = byte(size >> 7)
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	l := protowire.AppendVarint(tmp[:0], uint64(size))
	e.b = append(e.b, l[2:]...) // grow by the extra length bytes
	copy(e.b[at+len(l):], e.b[at+2:at+2+size])
	copy(e.b[at:], l)
}

func (e *encoder) stringMap(num protowire.Number, m map[string]string) {
	for k, v := range m {
		e.message(num, func() { e.key(fKey, k); e.str(fValue, v) })
	}
}

func (e *encoder) intMap(num protowire.Number, m map[string]int) {
	for k, v := range m {
		e.message(num, func() { e.key(fKey, k); e.int(fValue, int64(v)) })
	}
}

func (e *encoder) floatMap(num protowire.Number, m map[string]float64) {
	for k, v := range m {
		e.message(num, func() { e.key(fKey, k); e.float(fValue, v, true) })
	}
}

// appendRecord appends r's binary form to b. It returns errNotBinary when r must travel as
// JSON to come out of the queue as JSON would give it, and JSON's error when the metadata of
// a document cannot be marshalled.
func appendRecord(b []byte, r *record.Record) ([]byte, error) {
	e := encoder{b: append(b, recordMagic...)}
	e.str(fTraceID, r.TraceID)
	e.str(fSpanID, r.SpanID)
	e.str(fService, r.Service)
	e.str(fSessionID, r.SessionID)
	e.str(fUserID, r.UserID)
	e.time(fTime, r.Time, false)
	e.str(fQuery, r.Query)
	if r.RetrievalNotSeen {
		e.int(fRetrievalNotSeen, 1)
	}
	e.str(fResponseID, r.ResponseID)
	for i := range r.Documents {
		d := &r.Documents[i]
		e.message(fDocument, func() {
			e.str(fDocID, d.ID)
			if d.Score != nil {
				e.float(fDocScore, *d.Score, true)
			}
			e.str(fDocContent, d.Content)
			if len(d.Metadata) > 0 && e.err == nil {
				meta, err := json.Marshal(d.Metadata)
				if err != nil {
					e.err = err
					return
				}
				e.b = protowire.AppendTag(e.b, fDocMetadata, protowire.BytesType)
				e.b = protowire.AppendBytes(e.b, meta)
			}
		})
	}
	e.str(fAnswer, r.Answer)
	for i := range r.Citations {
		c := &r.Citations[i]
		e.message(fCitation, func() {
			e.str(fCiteText, c.Text)
			for _, id := range c.DocumentIDs {
				e.key(fCiteDocumentID, id)
			}
			if c.DocumentIDs != nil && len(c.DocumentIDs) == 0 {
				e.int(fCiteEmptyIDs, 1)
			}
		})
	}
	e.str(fModel, r.Model)
	e.int(fInputTokens, r.Usage.InputTokens)
	e.int(fOutputTokens, r.Usage.OutputTokens)
	e.float(fLatencyRetrieval, r.Latency.Retrieval, false)
	e.float(fLatencyGeneration, r.Latency.Generation, false)
	e.float(fLatencyTotal, r.Latency.Total, false)
	if f := r.Feedback; f != nil {
		e.message(fFeedback, func() {
			e.float(fFeedbackScore, f.Score, true)
			e.str(fFeedbackComment, f.Comment)
			e.time(fFeedbackTime, f.Time, true)
		})
	}
	e.str(fVariant, r.Variant)
	e.str(fPairID, r.PairID)
	e.int(fTurn, int64(r.Turn))
	for i := range r.History {
		m := &r.History[i]
		e.message(fHistory, func() { e.str(fMsgRole, m.Role); e.str(fMsgContent, m.Content) })
	}
	if l := r.Labels; l != nil {
		e.message(fLabels, func() {
			e.str(fLabelTraceID, l.TraceID)
			e.str(fLabelSpanID, l.SpanID)
			e.str(fLabelService, l.Service)
			e.floatMap(fLabelValue, l.Values)
			e.intMap(fLabelRelevance, l.Relevance)
			e.str(fLabelReference, l.Reference)
			e.str(fLabelLabeler, l.Labeler)
			e.time(fLabelTime, l.Time, true)
		})
	}
	e.str(fReference, r.Reference)
	e.intMap(fRelevance, r.Relevance)
	e.stringMap(fAttribute, r.Attributes)
	e.float(fUpstreamProbability, r.UpstreamProbability, false)
	if s := r.Sampling; s != nil {
		e.message(fSampling, func() {
			e.float(fSamplingProbability, s.Probability, true)
			e.str(fSamplingReason, s.Reason)
		})
	}
	if e.err != nil {
		return b, e.err
	}
	return e.b, nil
}

// IsBinaryRecord reports whether data is a record in the binary form.
func IsBinaryRecord(data []byte) bool { return bytes.HasPrefix(data, []byte(recordMagic)) }

// DecodeRecord decodes a queued record, in the binary form or JSON, into r.
func DecodeRecord(data []byte, r *record.Record) error {
	if !IsBinaryRecord(data) {
		return json.Unmarshal(data, r)
	}
	d := decoder{b: data[len(recordMagic):]}
	d.record(r)
	if d.err != nil {
		*r = record.Record{}
		return fmt.Errorf("binary record: %w", d.err)
	}
	return nil
}

// decoder reads the binary form; err is set by the first malformed field, after which every
// read returns zero values.
type decoder struct {
	b   []byte
	err error
}

// next reads a field's tag; ok is false at the end of the message or after an error.
func (d *decoder) next() (protowire.Number, protowire.Type, bool) {
	if d.err != nil || len(d.b) == 0 {
		return 0, 0, false
	}
	num, typ, n := protowire.ConsumeTag(d.b)
	if n < 0 {
		d.err = protowire.ParseError(n)
		return 0, 0, false
	}
	d.b = d.b[n:]
	return num, typ, true
}

func (d *decoder) fail(num protowire.Number, typ protowire.Type, want protowire.Type) bool {
	if typ == want {
		return false
	}
	d.err = fmt.Errorf("field %d: wire type %d, want %d", num, typ, want)
	return true
}

func (d *decoder) bytes(num protowire.Number, typ protowire.Type) []byte {
	if d.fail(num, typ, protowire.BytesType) {
		return nil
	}
	v, n := protowire.ConsumeBytes(d.b)
	if n < 0 {
		d.err = protowire.ParseError(n)
		return nil
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(num protowire.Number, typ protowire.Type) string {
	return string(d.bytes(num, typ))
}

func (d *decoder) float(num protowire.Number, typ protowire.Type) float64 {
	if d.fail(num, typ, protowire.Fixed64Type) {
		return 0
	}
	v, n := protowire.ConsumeFixed64(d.b)
	if n < 0 {
		d.err = protowire.ParseError(n)
		return 0
	}
	d.b = d.b[n:]
	return math.Float64frombits(v)
}

func (d *decoder) int(num protowire.Number, typ protowire.Type) int64 {
	if d.fail(num, typ, protowire.VarintType) {
		return 0
	}
	v, n := protowire.ConsumeVarint(d.b)
	if n < 0 {
		d.err = protowire.ParseError(n)
		return 0
	}
	d.b = d.b[n:]
	return protowire.DecodeZigZag(v)
}

func (d *decoder) time(num protowire.Number, typ protowire.Type) time.Time {
	var t time.Time
	if text := d.bytes(num, typ); d.err == nil {
		if err := t.UnmarshalText(text); err != nil {
			d.err = fmt.Errorf("field %d: %w", num, err)
		}
	}
	return t
}

func (d *decoder) skip(num protowire.Number, typ protowire.Type) {
	n := protowire.ConsumeFieldValue(num, typ, d.b)
	if n < 0 {
		d.err = protowire.ParseError(n)
		return
	}
	d.b = d.b[n:]
}

// sub returns a decoder of the nested message in the field; its error, if any, is the
// caller's to take with join.
func (d *decoder) sub(num protowire.Number, typ protowire.Type) decoder {
	return decoder{b: d.bytes(num, typ)}
}

// join takes a nested message's error.
func (d *decoder) join(sub *decoder) {
	if d.err == nil {
		d.err = sub.err
	}
}

// entry decodes a map entry: its key, and the field of its value, whose wire type is checked
// by the read of the decoder it returns.
func (d *decoder) entry(num protowire.Number, typ protowire.Type) (key string, value decoder, vtyp protowire.Type) {
	sub := d.sub(num, typ)
	vtyp = protowire.BytesType
	for n, t, ok := sub.next(); ok; n, t, ok = sub.next() {
		switch n {
		case fKey:
			key = sub.str(n, t)
		case fValue:
			// The value's bytes: from here to the end of this field.
			start := sub.b
			sub.skip(n, t)
			value, vtyp = decoder{b: start[:len(start)-len(sub.b)]}, t
		default:
			sub.skip(n, t)
		}
	}
	d.join(&sub)
	return key, value, vtyp
}

func (d *decoder) stringEntry(num protowire.Number, typ protowire.Type, m map[string]string) map[string]string {
	k, v, t := d.entry(num, typ)
	var s string
	if len(v.b) > 0 {
		s = v.str(fValue, t)
		d.join(&v)
	}
	if m == nil {
		m = map[string]string{}
	}
	m[k] = s
	return m
}

func (d *decoder) floatEntry(num protowire.Number, typ protowire.Type, m map[string]float64) map[string]float64 {
	k, v, t := d.entry(num, typ)
	var f float64
	if len(v.b) > 0 {
		f = v.float(fValue, t)
		d.join(&v)
	}
	if m == nil {
		m = map[string]float64{}
	}
	m[k] = f
	return m
}

// intEntry decodes one entry of a map of ints into m (allocated on the first entry).
func (d *decoder) intEntry(num protowire.Number, typ protowire.Type, m map[string]int) map[string]int {
	k, v, t := d.entry(num, typ)
	var i int64
	if len(v.b) > 0 {
		i = v.int(fValue, t)
		d.join(&v)
	}
	if (i < math.MinInt || i > math.MaxInt) && d.err == nil {
		d.err = fmt.Errorf("field %d: %d out of range", num, i)
	}
	if m == nil {
		m = map[string]int{}
	}
	m[k] = int(i)
	return m
}

func (d *decoder) document(num protowire.Number, typ protowire.Type) record.Document {
	var doc record.Document
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fDocID:
			doc.ID = s.str(n, t)
		case fDocScore:
			v := s.float(n, t)
			doc.Score = &v
		case fDocContent:
			doc.Content = s.str(n, t)
		case fDocMetadata:
			if data := s.bytes(n, t); s.err == nil {
				var meta map[string]any
				if err := json.Unmarshal(data, &meta); err != nil {
					s.err = fmt.Errorf("document metadata: %w", err)
				}
				doc.Metadata = meta
			}
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return doc
}

func (d *decoder) citation(num protowire.Number, typ protowire.Type) record.Citation {
	var c record.Citation
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fCiteText:
			c.Text = s.str(n, t)
		case fCiteDocumentID:
			c.DocumentIDs = append(c.DocumentIDs, s.str(n, t))
		case fCiteEmptyIDs:
			if s.int(n, t) == 1 && c.DocumentIDs == nil {
				c.DocumentIDs = []string{}
			}
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return c
}

func (d *decoder) feedback(num protowire.Number, typ protowire.Type) *record.Feedback {
	f := &record.Feedback{}
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fFeedbackScore:
			f.Score = s.float(n, t)
		case fFeedbackComment:
			f.Comment = s.str(n, t)
		case fFeedbackTime:
			f.Time = s.time(n, t)
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return f
}

func (d *decoder) message(num protowire.Number, typ protowire.Type) record.Message {
	var m record.Message
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fMsgRole:
			m.Role = s.str(n, t)
		case fMsgContent:
			m.Content = s.str(n, t)
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return m
}

func (d *decoder) label(num protowire.Number, typ protowire.Type) *record.Label {
	l := &record.Label{}
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fLabelTraceID:
			l.TraceID = s.str(n, t)
		case fLabelSpanID:
			l.SpanID = s.str(n, t)
		case fLabelService:
			l.Service = s.str(n, t)
		case fLabelValue:
			l.Values = s.floatEntry(n, t, l.Values)
		case fLabelRelevance:
			l.Relevance = s.intEntry(n, t, l.Relevance)
		case fLabelReference:
			l.Reference = s.str(n, t)
		case fLabelLabeler:
			l.Labeler = s.str(n, t)
		case fLabelTime:
			l.Time = s.time(n, t)
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return l
}

func (d *decoder) sampling(num protowire.Number, typ protowire.Type) *record.Sampling {
	sm := &record.Sampling{}
	s := d.sub(num, typ)
	for n, t, ok := s.next(); ok; n, t, ok = s.next() {
		switch n {
		case fSamplingProbability:
			sm.Probability = s.float(n, t)
		case fSamplingReason:
			sm.Reason = s.str(n, t)
		default:
			s.skip(n, t)
		}
	}
	d.join(&s)
	return sm
}

func (d *decoder) record(r *record.Record) {
	for num, typ, ok := d.next(); ok; num, typ, ok = d.next() {
		switch num {
		case fTraceID:
			r.TraceID = d.str(num, typ)
		case fSpanID:
			r.SpanID = d.str(num, typ)
		case fService:
			r.Service = d.str(num, typ)
		case fSessionID:
			r.SessionID = d.str(num, typ)
		case fUserID:
			r.UserID = d.str(num, typ)
		case fTime:
			r.Time = d.time(num, typ)
		case fQuery:
			r.Query = d.str(num, typ)
		case fDocument:
			r.Documents = append(r.Documents, d.document(num, typ))
		case fAnswer:
			r.Answer = d.str(num, typ)
		case fCitation:
			r.Citations = append(r.Citations, d.citation(num, typ))
		case fModel:
			r.Model = d.str(num, typ)
		case fInputTokens:
			r.Usage.InputTokens = d.int(num, typ)
		case fOutputTokens:
			r.Usage.OutputTokens = d.int(num, typ)
		case fLatencyRetrieval:
			r.Latency.Retrieval = d.float(num, typ)
		case fLatencyGeneration:
			r.Latency.Generation = d.float(num, typ)
		case fLatencyTotal:
			r.Latency.Total = d.float(num, typ)
		case fFeedback:
			r.Feedback = d.feedback(num, typ)
		case fVariant:
			r.Variant = d.str(num, typ)
		case fPairID:
			r.PairID = d.str(num, typ)
		case fTurn:
			v := d.int(num, typ)
			if v < math.MinInt || v > math.MaxInt {
				d.err = fmt.Errorf("turn %d out of range", v)
			}
			r.Turn = int(v)
		case fHistory:
			r.History = append(r.History, d.message(num, typ))
		case fLabels:
			r.Labels = d.label(num, typ)
		case fReference:
			r.Reference = d.str(num, typ)
		case fRelevance:
			r.Relevance = d.intEntry(num, typ, r.Relevance)
		case fAttribute:
			r.Attributes = d.stringEntry(num, typ, r.Attributes)
		case fUpstreamProbability:
			r.UpstreamProbability = d.float(num, typ)
		case fSampling:
			r.Sampling = d.sampling(num, typ)
		case fRetrievalNotSeen:
			r.RetrievalNotSeen = d.int(num, typ) != 0
		case fResponseID:
			r.ResponseID = d.str(num, typ)
		default:
			d.skip(num, typ)
		}
	}
}
