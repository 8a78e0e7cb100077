package sampler

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/scorers/retrieval"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

type discardOffers struct{}

func (discardOffers) Offer(*record.Record) error { return nil }

// benchConfigs are the policies the benchmarks compare: the defaults (no rules, rate 0.1), the
// defaults at rate 0, a never rule (every record's decision kept, without content), and a
// negative_feedback rule (content kept for late feedback).
func benchConfigs() []struct {
	name string
	cfg  config.Sampling
} {
	def := config.Default().Sampling
	zero := def
	zero.Rate = 0
	private := def
	private.Rules = []config.SamplingRule{{Name: "private", Match: config.SamplingMatch{Routes: []string{"/admin"}}, Never: true}}
	fb := def
	fb.Rules = []config.SamplingRule{{Name: "negative_feedback", Match: config.SamplingMatch{NegativeFeedback: true}, Probability: one()}}
	return []struct {
		name string
		cfg  config.Sampling
	}{{"rules=none", def}, {"rules=none,rate=0", zero}, {"rules=private", private}, {"rules=negative_feedback", fb}}
}

// BenchmarkStageConsumeRecord measures the sampler's cost on the ingestion path with the
// recent cache on (sampling.recent defaults).
func BenchmarkStageConsumeRecord(b *testing.B) {
	for _, bc := range benchConfigs() {
		b.Run(bc.name, func(b *testing.B) {
			d := decide.New(bc.cfg, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry())
			s := NewStage(d, discardOffers{}, bc.cfg.Recent, nil)
			recs := make([]*record.Record, 4096)
			for i := range recs {
				recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15), Service: "chat",
					Query: "what is the refund window?", Answer: "30 days [1].", Documents: []record.Document{{ID: "d1", Content: "Refunds within 30 days."}}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			defer benchcpu.Report(b)()
			for i := 0; i < b.N; i++ {
				_ = s.ConsumeRecord(ctx, recs[i%len(recs)])
			}
		})
	}
}

// BenchmarkStageRecentMemory measures what the recent cache holds: the live heap (after
// runtime.GC) of a stage that consumed 10,000 distinct records like the loadgen's (five 1 KB
// documents, a query, a 500-byte answer), per record consumed. The records themselves are not
// kept by the benchmark, so what stays is what the stage holds.
func BenchmarkStageRecentMemory(b *testing.B) {
	const n = 10000
	doc := strings.Repeat("refund policy text ", 54) // ≈ 1 KB
	answer := strings.Repeat("the answer ", 45)
	for _, bc := range benchConfigs() {
		b.Run(bc.name, func(b *testing.B) {
			var held float64
			var cached int
			for i := 0; i < b.N; i++ {
				d := decide.New(bc.cfg, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry())
				var before, after runtimeMem
				before.read()
				s := NewStage(d, discardOffers{}, bc.cfg.Recent, nil)
				ctx := context.Background()
				for j := 0; j < n; j++ {
					r := &record.Record{TraceID: fmt.Sprintf("%032x", uint64(i*n+j)*0x9e3779b97f4a7c15), Service: "chat", Time: time.Unix(0, 0),
						Query: fmt.Sprintf("what is the refund window for order %d?", j), Answer: strings.Clone(answer)}
					r.Documents = make([]record.Document, 5)
					for k := range r.Documents {
						r.Documents[k] = record.Document{ID: fmt.Sprintf("doc-%d", k), Content: strings.Clone(doc)}
					}
					_ = s.ConsumeRecord(ctx, r)
				}
				after.read()
				held = float64(after.heap-before.heap) / n
				cached = s.recent.len()
			}
			b.ReportMetric(held, "heap-B/record")
			b.ReportMetric(float64(cached), "cached")
		})
	}
}

func BenchmarkSampled(b *testing.B) {
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = decide.Sampled(ids[i%len(ids)], 0.1)
	}
}

// runtimeMem is the live heap after a collection.
type runtimeMem struct{ heap int64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.heap = int64(s.HeapAlloc)
}

// BenchmarkStageRankings measures the stage's cost per record with documents when retrieval
// metrics are on (the default): keeping the record's ranking for relevance labels arriving
// later (rankings=on) against not keeping it (rankings=off).
func BenchmarkStageRankings(b *testing.B) {
	for _, keep := range []bool{false, true} {
		name := "rankings=off"
		if keep {
			name = "rankings=on"
		}
		b.Run(name, func(b *testing.B) {
			cfg := config.Default().Sampling
			d := decide.New(cfg, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry())
			s := NewStage(d, discardOffers{}, cfg.Recent, nil)
			s.ScoreAlways(retrieval.New(nil, nil), score.ConsumerFunc(func(context.Context, []score.Result) error { return nil }))
			if keep {
				if err := s.KeepRankings(cfg.Recent.MaxRecords, nil); err != nil {
					b.Fatal(err)
				}
			}
			recs := make([]*record.Record, 4096)
			for i := range recs {
				recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15), Service: "chat",
					Query: "what is the refund window?", Answer: "30 days [1].", Documents: []record.Document{
						{ID: "doc-00001"}, {ID: "doc-00002"}, {ID: "doc-00003"}, {ID: "doc-00004"}, {ID: "doc-00005"}}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = s.ConsumeRecord(ctx, recs[i%len(recs)])
			}
		})
	}
}

// BenchmarkStageRankingsMemory measures what the rankings kept for late relevance labels cost:
// the live heap (after runtime.GC) of 10,000 rankings of five 9-byte document ids, per ranking.
func BenchmarkStageRankingsMemory(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		k := newRankings(n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for j := range n {
			k.put(&record.Record{TraceID: fmt.Sprintf("%032x", uint64(j)*0x9e3779b97f4a7c15), Service: "chat", Documents: []record.Document{
				{ID: "doc-00001"}, {ID: "doc-00002"}, {ID: "doc-00003"}, {ID: "doc-00004"}, {ID: "doc-00005"}}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/ranking")
		runtime.KeepAlive(k)
	}
}
