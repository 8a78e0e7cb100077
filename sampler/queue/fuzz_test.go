package queue

import (
	"math"
	"testing"

	"github.com/ragwatch/ragwatch/internal/score"
)

// FuzzDecodeResult: whatever arrives on ragwatch.scores.* never crashes the decoder, and
// anything it accepts is a usable result.
func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"trace_id":"t","service":"s","metric":"faithfulness","value":0.5,"weight":2,"time":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"trace_id":"t","metric":"m","value":1e309}`))
	f.Add([]byte(`{"trace_id":"t","metric":"m","value":-0}`))
	f.Add([]byte(`{"trace_id":"t","metric":"ndcg@10","value":0.5,"weight":1e300}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r score.Result
		if _, err := decodeResult(data, &r, 100); err != nil {
			return
		}
		if r.TraceID == "" || !score.KnownMetric(r.Metric) || math.IsNaN(r.Value) || r.Value < 0 || r.Value > 1 ||
			!(r.Weight == 0 || r.Weight >= 1 && r.Weight <= 100.000001) {
			t.Fatalf("accepted %+v from %q", r, data)
		}
	})
}
