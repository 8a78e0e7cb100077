package queue

import (
	"testing"
)

// FuzzDecodePair: whatever sits on the scoring stream marked as a pair job never crashes the
// decoder, and anything it accepts has two records and a usable probability.
func FuzzDecodePair(f *testing.F) {
	f.Add([]byte(`{"comparison":"rerank","probability":0.5,"a":{"trace_id":"a"},"b":{"trace_id":"b"}}`))
	f.Add([]byte(`{"probability":0,"a":{"trace_id":"a"},"b":{"trace_id":"b"}}`))
	f.Add([]byte(`{"probability":1,"a":{"trace_id":"a"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := DecodePair(data)
		if err != nil {
			return
		}
		if j.A.TraceID == "" || j.B.TraceID == "" || !(j.Probability > 0 && j.Probability <= 1) {
			t.Fatalf("accepted %+v from %q", j, data)
		}
	})
}

func TestDecodePair(t *testing.T) {
	tests := []struct{ in, err string }{
		{`{"comparison":"x","probability":0.5,"a":{"trace_id":"a"},"b":{"trace_id":"b"}}`, ""},
		{`{"probability":0.5,"a":{"trace_id":"a"},"b":{}}`, "pair job: a record's trace_id is missing"},
		{`{"probability":2,"a":{"trace_id":"a"},"b":{"trace_id":"b"}}`, "pair job: probability 2 outside (0, 1]"},
		{`[`, "undecodable pair job: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		_, err := DecodePair([]byte(tt.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.err {
			t.Errorf("%s: %q, want %q", tt.in, got, tt.err)
		}
	}
}
