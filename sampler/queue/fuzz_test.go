package queue

import (
	"math"
	"testing"

	"github.com/ragwatch/ragwatch/internal/score"
)

// FuzzDecodeResults: whatever arrives on ragwatch.scores.* never crashes the decoder, anything
// it accepts is a usable result, and every result of a message is either accepted or rejected
// once, never both.
func FuzzDecodeResults(f *testing.F) {
	const one = `{"trace_id":"t","service":"s","metric":"faithfulness","value":0.5,"weight":2,"time":"2026-01-01T00:00:00Z"}`
	f.Add([]byte(one))
	f.Add([]byte(`{"trace_id":"t","metric":"m","value":1e309}`))
	f.Add([]byte(`{"trace_id":"t","metric":"m","value":-0}`))
	f.Add([]byte(`{"trace_id":"t","metric":"ndcg@10","value":0.5,"weight":1e300}`))
	f.Add([]byte(`[` + one + `,` + one + `]`))
	f.Add([]byte(`[` + one + `,{"trace_id":"t","metric":"mrr","value":2},{"value":"x"}]`))
	f.Add([]byte(`[` + one + `,null]`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(` [` + one + `] `))
	f.Add([]byte(one + `{}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		results, rejected := decodeResults(data, 100)
		for _, r := range results {
			if r.TraceID == "" || !score.KnownMetric(r.Metric) || math.IsNaN(r.Value) || r.Value < 0 || r.Value > 1 ||
				!(r.Weight == 0 || r.Weight >= 1 && r.Weight <= 100.000001) {
				t.Fatalf("accepted %+v from %q", r, data)
			}
		}
		if len(results)+len(rejected) == 0 {
			t.Fatalf("%q: neither accepted nor rejected", data)
		}
		if len(results)+len(rejected) > MaxScoresPerMessage {
			t.Fatalf("%q: %d results and %d rejections, over the bound of %d", data, len(results), len(rejected), MaxScoresPerMessage)
		}
		last := -1
		for _, r := range rejected {
			if r.reason == "" || r.err == nil {
				t.Fatalf("%q: rejection without reason or error: %+v", data, r)
			}
			if r.index < 0 {
				// The message as a whole (or its only result): nothing else comes from it.
				if len(rejected) != 1 || len(results) != 0 {
					t.Fatalf("%q: a whole-message rejection alongside %d results, %d rejections", data, len(results), len(rejected))
				}
				continue
			}
			if r.index <= last {
				t.Fatalf("%q: rejections out of order: %+v", data, rejected)
			}
			last = r.index
		}
		if last >= len(results)+len(rejected) {
			t.Fatalf("%q: rejection at index %d of %d elements", data, last, len(results)+len(rejected))
		}
	})
}
