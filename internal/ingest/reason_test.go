package ingest

import (
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

func TestDecodeReason(t *testing.T) {
	for in, want := range map[string]string{
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]`: ReasonLimits,
		`{"trace_id":`:         ReasonMalformed,
		``:                     ReasonMalformed,
		`{"trace_id":"t"}`:     ReasonInvalid,
		`[{"query":"q"},null]`: ReasonInvalid,
	} {
		_, err := record.DecodeJSONLimits([]byte(in), time.Unix(0, 0), 0, 0)
		if err == nil {
			t.Fatalf("%q decoded", in)
		}
		if got := DecodeReason(err); got != want {
			t.Errorf("DecodeReason(%v) = %q, want %q", err, got, want)
		}
	}
}
