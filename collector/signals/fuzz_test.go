package signals

import (
	"context"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// FuzzConsumeRecord feeds records with arbitrary ids, scores, latencies, feedback and answers
// (all of which come from outside) through every recorder that runs in process. Exemplar labels
// are where this could go wrong: client_golang panics on an exemplar that is not valid UTF-8
// or longer than 128 runes.
func FuzzConsumeRecord(f *testing.F) {
	f.Add(traceA, spanA, "svc", "Paris [1].", 0.5, 35.0, 1.0, int64(27), 3)
	f.Add("", "", "", "", math.NaN(), math.Inf(1), math.NaN(), int64(-1), 0)
	f.Add("\xff\xfe", "span with spaces", string(make([]byte, 300)), "\u00a0\u2003", math.Inf(-1), -5.0, -2.0, int64(0), 1000)
	reg := prometheus.NewRegistry()
	s, err := New(Settings{Signals: config.Signals{MaxServices: 5}, Registerer: reg})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, traceID, spanID, service, answer string, docScore, latency, feedback float64, tokens int64, docs int) {
		r := &record.Record{
			TraceID: traceID, SpanID: spanID, Service: service, Answer: answer,
			Usage:    record.Usage{OutputTokens: tokens},
			Latency:  record.Latency{Retrieval: latency, Generation: -latency, Total: latency * 2},
			Feedback: &record.Feedback{Score: feedback},
		}
		for i := range docs % 50 {
			v := docScore * float64(i)
			r.Documents = append(r.Documents, record.Document{ID: "d", Score: &v})
		}
		if err := s.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := s.ConsumeFeedback(context.Background(), record.Feedback{TraceID: traceID, SpanID: spanID, Service: service, Score: feedback}); err != nil {
			t.Fatal(err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if h := m.GetHistogram(); h != nil && (math.IsInf(h.GetSampleSum(), 0) || math.IsNaN(h.GetSampleSum())) {
					t.Fatalf("%s sum became %v", mf.GetName(), h.GetSampleSum())
				}
			}
		}
	})
}
