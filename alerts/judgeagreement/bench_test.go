package judgeagreement

import (
	"context"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// BenchmarkConsumeScores is the tracker's share of the score path (the alert engine's
// BenchmarkConsumeScores is the other): one result of an unlabelled record, remembered for a
// label that may come.
func BenchmarkConsumeScores(b *testing.B) {
	a, err := New(Options{Settings: defaults()})
	if err != nil {
		b.Fatal(err)
	}
	res := []score.Result{{TraceID: "t", Service: "search", Metric: "citation_precision", Value: 0.8, Weight: 4, Scorer: "builtin"}}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res[0].Value = float64(i%100) / 100
		i++
		if err := a.ConsumeScores(ctx, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConsumeRecord is the tracker's share of the record path: a record without labels.
func BenchmarkConsumeRecord(b *testing.B) {
	a, err := New(Options{Settings: defaults()})
	if err != nil {
		b.Fatal(err)
	}
	r := &record.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "search"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := a.ConsumeRecord(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
