package builtin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// benchRecord is a record with a 5×1 KB context, a six-sentence cited answer, a question and a
// reference: every metric applies.
func benchRecord() *record.Record {
	topics := []string{"glacier", "volcano", "monsoon", "coral reef", "tundra"}
	var docs []record.Document
	for i, t := range topics {
		var b strings.Builder
		for k := 0; b.Len() < 1000; k++ {
			fmt.Fprintf(&b, "The %s studied in survey %d covered %d square kilometres in %d. ", t, k, 120+k*7, 1990+k)
			fmt.Fprintf(&b, "Researchers from the Institute of %s Studies reported that sediment levels rose by %d.%d percent. ", strings.ToUpper(t[:1])+t[1:], k, i)
		}
		docs = append(docs, record.Document{ID: fmt.Sprintf("doc-%d", i+1), Content: b.String()})
	}
	r := &record.Record{
		TraceID: "bench", Service: "bench", Time: time.Unix(0, 0),
		Query:     "How much did sediment levels rise near the glacier and the volcano?",
		Documents: docs,
		Answer: "The glacier studied in survey 2 covered 134 square kilometres in 1992 [1]. " +
			"Researchers from the Institute of Glacier Studies reported that sediment levels rose by 2.0 percent [1]. " +
			"The volcano survey 3 covered 141 square kilometres [2]. " +
			"Sediment levels near the volcano rose by 3.1 percent, according to the Institute of Volcano Studies [2]. " +
			"The monsoon was not studied in 1990 [3]. Dr. Smith of the U.S. survey led the tundra work [5].",
		Reference: "Sediment levels rose by 2.0 percent near the glacier and by 3.1 percent near the volcano.",
	}
	r.Normalize(time.Unix(0, 0))
	return r
}

func BenchmarkBuiltin(b *testing.B) {
	s := New(Options{})
	r := benchRecord()
	ctx := context.Background()
	res, err := s.Score(ctx, r)
	if err != nil || len(res) != len(MetricNames) {
		b.Fatalf("Score: %d results, err %v", len(res), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Score(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(res)), "ns/metric")
}

// BenchmarkBuiltinSynth scores loadgen's records (internal/synth: 5 × 1 KB documents drawn
// from a small set of articles), 200 turns in turn: documents repeat from record to record, as
// a service's popular passages do.
func BenchmarkBuiltinSynth(b *testing.B) {
	g := synth.New(synth.Options{Seed: 1})
	recs := make([]*record.Record, 200)
	for i := range recs {
		t := g.Next(time.Unix(0, 0))
		r := &record.Record{TraceID: "bench", Service: t.Service, Query: t.Query, Answer: t.Answer}
		for _, d := range t.Documents {
			sc := d.Score
			r.Documents = append(r.Documents, record.Document{ID: d.ID, Score: &sc, Content: d.Content})
		}
		r.Normalize(time.Unix(0, 0))
		recs[i] = r
	}
	scoreInTurn(b, recs)
}

// BenchmarkBuiltinNewDocuments scores benchRecord with documents never seen before: 2,000
// variants (10 MB) in turn, more than the builtin scorer keeps of the documents it read.
func BenchmarkBuiltinNewDocuments(b *testing.B) {
	base := benchRecord()
	recs := make([]*record.Record, 2000)
	for i := range recs {
		r := *base
		r.Documents = slices.Clone(base.Documents)
		for k := range r.Documents {
			r.Documents[k].Content = fmt.Sprintf("Edition %d. %s", i, r.Documents[k].Content)
		}
		recs[i] = &r
	}
	scoreInTurn(b, recs)
}

func BenchmarkFaithfulness(b *testing.B) {
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		Faithfulness(r.Answer, r.Documents)
	}
}

// scoreInTurn scores recs one after another, round and round, for b.N records.
func scoreInTurn(b *testing.B, recs []*record.Record) {
	s := New(Options{})
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Score(ctx, recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
