package sampler

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/collector/record"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
	"github.com/ragwatch/ragwatch/sampler/decide"
)

type discardOffers struct{}

func (discardOffers) Offer(*record.Record) error { return nil }

// BenchmarkStageConsumeRecord measures the sampler's cost on the ingestion path at the default
// rate (10%) with the default rules-free config and the recent cache on.
func BenchmarkStageConsumeRecord(b *testing.B) {
	cfg := config.Default().Sampling
	d := decide.New(cfg, nil, labels.NewServiceSet(10), nil, prometheus.NewRegistry())
	s := NewStage(d, discardOffers{}, cfg.Recent, nil)
	recs := make([]*record.Record, 4096)
	for i := range recs {
		recs[i] = &record.Record{TraceID: fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15), Service: "chat",
			Query: "what is the refund window?", Answer: "30 days [1].", Documents: []record.Document{{ID: "d1", Content: "Refunds within 30 days."}}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = s.ConsumeRecord(ctx, recs[i%len(recs)])
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
