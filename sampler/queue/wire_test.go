package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
	"github.com/ragwatch/ragwatch/scripts/synthrec"
)

// viaJSON is what a worker got for r before the binary form: json.Unmarshal(json.Marshal(r)).
func viaJSON(t testing.TB, r *record.Record) (*record.Record, error) {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var out record.Record
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("JSON of %+v does not decode: %v", r, err)
	}
	return &out, nil
}

// viaQueue is what a worker gets for r now: the publisher's encoding, then DecodeRecord.
func viaQueue(t testing.TB, r *record.Record, encoding string) (*record.Record, bool, error) {
	t.Helper()
	buf, err := encodeRecord(r, encoding)
	if err != nil {
		return nil, false, err
	}
	defer releaseBuf(buf)
	binary := IsBinaryRecord(buf.Bytes())
	var out record.Record
	if err := DecodeRecord(buf.Bytes(), &out); err != nil {
		t.Fatalf("the queue's encoding of %+v does not decode: %v", r, err)
	}
	return &out, binary, nil
}

// checkSame asserts that r comes out of the queue exactly as it came out of JSON, and reports
// whether it travelled in the binary form.
func checkSame(t *testing.T, r *record.Record) bool {
	t.Helper()
	want, werr := viaJSON(t, r)
	got, binary, gerr := viaQueue(t, r, EncodingBinary)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("JSON error %v, queue error %v", werr, gerr)
	}
	if werr != nil {
		return false
	}
	if !identical(reflect.ValueOf(got), reflect.ValueOf(want)) {
		t.Fatalf("the queue's record differs from JSON's (binary %v):\n got %#v\nwant %#v", binary, got, want)
	}
	if jgot, jbinary, _ := viaQueue(t, r, EncodingJSON); jbinary || !identical(reflect.ValueOf(jgot), reflect.ValueOf(want)) {
		t.Fatalf(`encoding "json" wrote binary %v or decoded %#v`, jbinary, jgot)
	}
	return binary
}

// identical is reflect.DeepEqual that also tells a negative zero from zero.
func identical(a, b reflect.Value) bool {
	if a.Kind() != b.Kind() || a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return identical(a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := range a.NumField() {
			if !identical(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !identical(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !identical(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

func TestBinaryRecordIsJSONsRecord(t *testing.T) {
	binaryCases := 0
	for name, v := range encodeCases() {
		r, ok := v.(*record.Record)
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			binary := checkSame(t, r)
			// What JSON would change travels as JSON; everything else in the binary form.
			if wantJSON := name == "bad utf-8"; binary == wantJSON {
				t.Fatalf("binary form %v, want %v", binary, !wantJSON)
			}
			if binary {
				binaryCases++
			}
		})
	}
	if binaryCases < 8 {
		t.Fatalf("%d cases in the binary form", binaryCases)
	}
	recs, err := synthrec.Records(3, 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !checkSame(t, r) {
			t.Fatalf("loadgen's record %s went as JSON", r.TraceID)
		}
	}
}

// TestBinaryRecordCarriesEveryField: a record with every field set comes out of the binary
// form as JSON gives it. A field added to record.Record fails here until it is set below (and,
// if the binary form does not carry it, until it does).
func TestBinaryRecordCarriesEveryField(t *testing.T) {
	s, at := 0.5, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := &record.Record{TraceID: "t", SpanID: "s", Service: "svc", ResponseID: "chatcmpl-1", SessionID: "se", UserID: "u",
		Time: at, Query: "q", Documents: []record.Document{{ID: "d", Score: &s, Content: "c", Metadata: map[string]any{"k": "v"}}},
		RetrievalNotSeen: true, Answer: "a", Citations: []record.Citation{{Text: "a", DocumentIDs: []string{"d"}}},
		Model: "m", Usage: record.Usage{InputTokens: 1, OutputTokens: 2}, Latency: record.Latency{Retrieval: 1, Generation: 2, Total: 3},
		Feedback: &record.Feedback{Score: 1, Comment: "ok", Time: at}, Variant: "v", PairID: "p", Turn: 2,
		History: []record.Message{{Role: record.RoleUser, Content: "h"}}, Labels: &record.Label{Values: map[string]float64{"faithfulness": 1}},
		Reference: "ref", Relevance: map[string]int{"d": 1}, Attributes: map[string]string{"route": "r"},
		UpstreamProbability: 0.5, Sampling: &record.Sampling{Probability: 0.5, Reason: "rate"}}
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && f.Tag.Get("json") != "-" && v.Field(i).IsZero() {
			t.Errorf("field %s is not set in the test record", f.Name)
		}
	}
	if !checkSame(t, r) {
		t.Fatal("the full record went as JSON")
	}
}

// TestBinaryRecordNeedsJSON: each value JSON changes or refuses sends the record as JSON (or
// fails as JSON fails), wherever it is in the record.
func TestBinaryRecordNeedsJSON(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := map[string]*record.Record{
		"bad utf-8 in a document":     {TraceID: "t", Documents: []record.Document{{ID: "d", Content: "caf\xe9"}}},
		"bad utf-8 in a citation id":  {TraceID: "t", Citations: []record.Citation{{Text: "c", DocumentIDs: []string{"\xff"}}}},
		"bad utf-8 in a label key":    {TraceID: "t", Labels: &record.Label{Values: map[string]float64{"\xfe": 1}}},
		"bad utf-8 in an attribute":   {TraceID: "t", Attributes: map[string]string{"route": "\xc3"}},
		"bad utf-8 in feedback":       {TraceID: "t", Feedback: &record.Feedback{Comment: "\x80"}},
		"bad utf-8 in history":        {TraceID: "t", History: []record.Message{{Role: "user", Content: "\xed\xa0\x80"}}},
		"a year JSON refuses":         {TraceID: "t", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"NaN score":                   {TraceID: "t", Documents: []record.Document{{ID: "d", Score: &nan}}},
		"infinite latency":            {TraceID: "t", Latency: record.Latency{Total: inf}},
		"NaN label":                   {TraceID: "t", Labels: &record.Label{Values: map[string]float64{"m": nan}}},
		"metadata JSON cannot encode": {TraceID: "t", Documents: []record.Document{{ID: "d", Metadata: map[string]any{"f": func() {}}}}},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			if checkSame(t, r) {
				t.Fatal("went in the binary form")
			}
		})
	}
	// A document's metadata is carried as its own JSON, which JSON's replacement of bad
	// UTF-8 has already touched: the record stays binary and decodes as JSON's.
	if !checkSame(t, &record.Record{TraceID: "t", Documents: []record.Document{{ID: "d", Metadata: map[string]any{"k\xfe": "\xff"}}}}) {
		t.Fatal("bad UTF-8 in metadata sent the record as JSON")
	}
}

// TestBinaryRecordRandom compares the two encodings on random records that use every field,
// with times in several zones (the process's own among them) and nested messages past the
// two-byte length the encoder first reserves.
func TestBinaryRecordRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", -5400), time.FixedZone("CEST", 7200), nil}
	alphabet := []rune("ab <>&\"\\\n\t\u2028é退🙂\x00")
	str := func(max int) string {
		n := rng.IntN(max + 1)
		if rng.IntN(50) == 0 {
			n = 16<<10 + rng.IntN(3000) // past a two-byte length
		}
		var b strings.Builder
		for b.Len() < n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	tm := func() time.Time {
		switch rng.IntN(8) {
		case 0, 1:
			return time.Time{}
		case 2: // the zero instant in another zone: JSON writes it, except under omitzero
			return time.Time{}.In(zones[2+rng.IntN(2)])
		}
		t := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
		if z := zones[rng.IntN(len(zones))]; z != nil {
			t = t.In(z)
		}
		return t
	}
	f := func() float64 {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return math.Copysign(0, -1)
		case 2:
			return math.MaxFloat64
		case 3:
			return 5e-324
		default:
			return rng.NormFloat64() * 1e3
		}
	}
	for i := range 1000 {
		r := &record.Record{TraceID: str(32), SpanID: str(16), Service: str(8), SessionID: str(8), UserID: str(8),
			Time: tm(), Query: str(200), Answer: str(300), Model: str(8), Variant: str(8), PairID: str(8),
			Turn: rng.IntN(100) - 5, Reference: str(50), UpstreamProbability: f(), RetrievalNotSeen: rng.IntN(2) == 0,
			ResponseID: str(24),
			Usage:      record.Usage{InputTokens: rng.Int64() - math.MaxInt64/2, OutputTokens: int64(rng.IntN(3))},
			Latency:    record.Latency{Retrieval: f(), Generation: f(), Total: f()}}
		for range rng.IntN(7) {
			d := record.Document{ID: str(6), Content: str(1500)}
			if rng.IntN(2) == 0 {
				s := f()
				d.Score = &s
			}
			if rng.IntN(4) == 0 {
				d.Metadata = map[string]any{str(4): str(10), "n": rng.Float64(), "l": []any{1, "x", nil, true}}
			} else if rng.IntN(8) == 0 {
				d.Metadata = map[string]any{}
			}
			r.Documents = append(r.Documents, d)
		}
		if rng.IntN(8) == 0 {
			r.Documents = []record.Document{}
		}
		for range rng.IntN(4) {
			c := record.Citation{Text: str(40)}
			switch rng.IntN(3) {
			case 0:
				c.DocumentIDs = []string{}
			case 1:
				c.DocumentIDs = []string{str(4), "", str(4)}
			}
			r.Citations = append(r.Citations, c)
		}
		for range rng.IntN(5) {
			r.History = append(r.History, record.Message{Role: str(9), Content: str(400)})
		}
		if rng.IntN(3) == 0 {
			r.Feedback = &record.Feedback{TraceID: "not in JSON", Score: f(), Comment: str(20), Time: tm()}
		}
		if rng.IntN(3) == 0 {
			r.Labels = &record.Label{TraceID: str(5), SpanID: str(3), Service: str(3), Reference: str(30), Labeler: str(5), Time: tm()}
			if rng.IntN(2) == 0 {
				r.Labels.Values = map[string]float64{str(8): rng.Float64(), "faithfulness": 0}
			}
			if rng.IntN(2) == 0 {
				r.Labels.Relevance = map[string]int{str(3): rng.IntN(5) - 1, "": 2}
			}
		}
		if rng.IntN(2) == 0 {
			r.Relevance = map[string]int{str(4): rng.IntN(4), str(4): math.MinInt64}
		}
		if rng.IntN(2) == 0 {
			r.Attributes = map[string]string{"route": str(10), "": ""}
		}
		if rng.IntN(2) == 0 {
			r.Sampling = &record.Sampling{Probability: f(), Reason: str(6)}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if !checkSame(t, r) {
				t.Fatal("went as JSON")
			}
		})
	}
}

// TestDecodeRecordRefusesMalformed: a binary record cut short, with a field of the wrong wire
// type, or with a time that is not RFC 3339 is an error, not a partial record.
func TestDecodeRecordRefusesMalformed(t *testing.T) {
	buf, err := encodeRecord(&record.Record{TraceID: "t", Query: "q", Documents: []record.Document{{ID: "d", Content: "c"}}}, EncodingBinary)
	if err != nil {
		t.Fatal(err)
	}
	good := bytes.Clone(buf.Bytes())
	releaseBuf(buf)
	withField := func(b []byte) []byte { return append([]byte(recordMagic), b...) }
	cases := map[string][]byte{
		"cut":                 good[:len(good)-1],
		"wrong wire type":     withField(protowire.AppendVarint(protowire.AppendTag(nil, fTraceID, protowire.VarintType), 1)),
		"nested wrong type":   withField(protowire.AppendBytes(protowire.AppendTag(nil, fDocument, protowire.BytesType), protowire.AppendTag(nil, fDocContent, protowire.Fixed64Type))),
		"bad time":            withField(protowire.AppendString(protowire.AppendTag(nil, fTime, protowire.BytesType), "yesterday")),
		"bad metadata":        withField(protowire.AppendBytes(protowire.AppendTag(nil, fDocument, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, fDocMetadata, protowire.BytesType), "{"))),
		"length past the end": withField([]byte{byte(fQuery<<3 | 2), 0x7f, 'q'}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			r := record.Record{Model: "left over"}
			if err := DecodeRecord(data, &r); err == nil {
				t.Fatalf("decoded %+v", r)
			}
			if !reflect.DeepEqual(r, record.Record{}) {
				t.Fatalf("a failed decode left %+v", r)
			}
		})
	}
	// An unknown field (a later version's) is skipped.
	later := append(bytes.Clone(good), protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "new")...)
	var r record.Record
	if err := DecodeRecord(later, &r); err != nil || r.TraceID != "t" || r.Query != "q" || len(r.Documents) != 1 || r.Documents[0].Content != "c" {
		t.Fatalf("record with a later field: %+v, %v", r, err)
	}
}

// FuzzDecodeRecord: no input crashes DecodeRecord, and a record it accepts goes through the
// queue again unchanged.
func FuzzDecodeRecord(f *testing.F) {
	// Small seeds: the fuzzer spends up to a minute minimizing each new input it finds, in
	// proportion to its size.
	recs, err := synthrec.Records(1, 1)
	if err != nil {
		f.Fatal(err)
	}
	for name, v := range encodeCases() {
		if r, ok := v.(*record.Record); ok && name != "long" {
			recs = append(recs, r)
		}
	}
	for _, r := range recs {
		if buf, err := encodeRecord(r, EncodingBinary); err == nil {
			f.Add(bytes.Clone(buf.Bytes()))
			releaseBuf(buf)
		}
	}
	f.Add([]byte(recordMagic))
	f.Add([]byte(`{"trace_id":"t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r record.Record
		if err := DecodeRecord(data, &r); err != nil {
			return
		}
		again, _, err := viaQueue(t, &r, EncodingBinary)
		if err != nil {
			return // JSON refuses it too (a NaN, a year past 9999): never published
		}
		want, err := viaJSON(t, &r)
		if err != nil {
			t.Fatalf("the queue encoded what JSON refuses: %v", err)
		}
		if !identical(reflect.ValueOf(again), reflect.ValueOf(want)) {
			t.Fatalf("a decoded record does not go through the queue unchanged:\n got %#v\nwant %#v", again, want)
		}
	})
}

// BenchmarkRecordEncoding is a record's trip through the queue on loadgen's records, in turn:
// the publisher's encoding and the worker's decoding, binary against JSON.
func BenchmarkRecordEncoding(b *testing.B) {
	recs, err := synthrec.Records(1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []string{EncodingBinary, EncodingJSON} {
		b.Run(enc, func(b *testing.B) {
			b.ReportAllocs()
			stop := benchcpu.Report(b)
			size, i := 0, 0
			for b.Loop() {
				buf, err := encodeRecord(recs[i%len(recs)], enc)
				if err != nil {
					b.Fatal(err)
				}
				size += buf.Len()
				var r record.Record
				if err := DecodeRecord(buf.Bytes(), &r); err != nil || r.TraceID == "" {
					b.Fatal("decode failed", err)
				}
				releaseBuf(buf)
				i++
			}
			stop()
			b.ReportMetric(float64(size)/float64(i), "bytes/record")
		})
	}
}
