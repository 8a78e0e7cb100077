package queue

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
	"github.com/ragwatch/ragwatch/scripts/synthrec"
)

// encodeCases are records whose JSON takes the encoder's less common paths.
func encodeCases() map[string]any {
	score := 0.5
	zero := 0.0
	negZero := math.Copysign(0, -1)
	big := 1e21
	tiny := 5e-324
	return map[string]any{
		"empty":     &record.Record{},
		"trace id":  &record.Record{TraceID: "t"},
		"html":      &record.Record{TraceID: "<t&t>", Query: "a < b && c > d", Answer: "<script>alert('x')</script> & \u2028\u2029"},
		"unicode":   &record.Record{TraceID: "t", Query: "Wie lange dauert die Erstattung? 退款需要多长时间？ 🙂", Answer: "\x00\x01\x1f\"\\/\t\n\r"},
		"bad utf-8": &record.Record{TraceID: "t\xff", Query: "a\xc3(b", Answer: "\xed\xa0\x80 surrogate", Attributes: map[string]string{"k\xfe": "v\x80"}},
		"numbers": &record.Record{TraceID: "t", UpstreamProbability: tiny, Turn: math.MaxInt32,
			Usage:     record.Usage{InputTokens: math.MaxInt64, OutputTokens: 1},
			Latency:   record.Latency{Retrieval: 1e-7, Generation: big, Total: 123456789.125},
			Documents: []record.Document{{ID: "a", Score: &score}, {ID: "b", Score: &zero}, {ID: "c", Score: &negZero}, {ID: "d"}},
			Feedback:  &record.Feedback{Score: -1, Comment: "no", TraceID: "hidden", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))},
			Sampling:  &record.Sampling{Probability: 1.0 / 3, Reason: "rate"}},
		"metadata": &record.Record{TraceID: "t", Documents: []record.Document{{ID: "d", Metadata: map[string]any{
			"z": 1, "a": []any{"x", 2.5, nil, true, map[string]any{"n": json.Number("12.50")}}, "m": "<&>", "": "",
		}}}},
		"empty collections": &record.Record{TraceID: "t", Documents: []record.Document{}, Citations: []record.Citation{{Text: ""}},
			History: []record.Message{}, Attributes: map[string]string{}, Relevance: map[string]int{}, Labels: &record.Label{}},
		"times": &record.Record{TraceID: "t", Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
			Labels: &record.Label{Values: map[string]float64{"b": 0.1, "a": 1}, Relevance: map[string]int{"d": -1}, Time: time.Unix(1e9, 0).In(time.FixedZone("", -5400))}},
		"long":       &record.Record{TraceID: "t", Answer: strings.Repeat("x<y ", 100000)},
		"pair":       &PairJob{Comparison: "none", Probability: 0.25, A: record.Record{TraceID: "a"}, B: record.Record{TraceID: "b", Answer: "<b>"}},
		"empty pair": &PairJob{},
	}
}

// encode writes exactly what json.Marshal did before it: the workers' decoding and the
// dead-letter stream operators read see the same bytes.
func TestEncodeIsJSONMarshal(t *testing.T) {
	recs, err := synthrec.Records(3, 500)
	if err != nil {
		t.Fatal(err)
	}
	cases := encodeCases()
	for i, r := range recs {
		if i%50 == 0 {
			cases["synth "+r.TraceID] = r
		}
	}
	check := func(t *testing.T, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("encode differs from json.Marshal:\n got %.300q\nwant %.300q", buf.Bytes(), want)
		}
		releaseBuf(buf)
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) { check(t, v) })
	}
	// Every synth record, through recycled buffers of every size in turn.
	for _, r := range recs {
		check(t, r)
	}
	if _, err := encode(&record.Record{TraceID: "t", Documents: []record.Document{{ID: "d", Metadata: map[string]any{"f": func() {}}}}}); err == nil {
		t.Fatal("a value json.Marshal refuses was encoded")
	}
}

// BenchmarkPublishEncode is publish's encoding of loadgen's records (scripts/synthrec), in
// turn: marshal is json.Marshal (the encoding before), pooled is encode, whose buffer goes back
// to the pool as the acknowledgement's arrival returns it.
func BenchmarkPublishEncode(b *testing.B) {
	recs, err := synthrec.Records(1, 2000)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.Report(b)()
		i := 0
		for b.Loop() {
			if _, err := json.Marshal(recs[i%len(recs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("pooled", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.Report(b)()
		i := 0
		for b.Loop() {
			buf, err := encode(recs[i%len(recs)])
			if err != nil {
				b.Fatal(err)
			}
			releaseBuf(buf)
			i++
		}
	})
}
