package record

import (
	"strings"
	"testing"
	"time"
)

func TestCheckJSONDepthAndBatch(t *testing.T) {
	rec := `{"trace_id":"0123456789abcdef0123456789abcdef","span_id":"0123456789abcdef","service":"s","query":"q","answer":"a [x],{y}"}`
	batch := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(rec+",", n), ",") + "]" }
	for _, tc := range []struct {
		name, data string
		depth, max int
		want       string
	}{
		{"deep", strings.Repeat("[", 65) + strings.Repeat("]", 65), 64, 0, "JSON nests deeper than the limit of 64"},
		{"depth at limit", strings.Repeat("[", 64) + strings.Repeat("]", 64), 64, 0, ""},
		{"brackets in strings do not count", `{"a":"` + strings.Repeat("[{", 100) + `"}`, 2, 0, ""},
		{"batch at limit", batch(3), 0, 3, ""},
		{"batch over limit", batch(4), 0, 3, "batch holds more than the limit of 3 items"},
		{"commas inside records do not count", `[{"a":[1,2,3,4,5]}]`, 0, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSON([]byte(tc.data), tc.depth, tc.max)
			got := ""
			if err != nil {
				got = err.Error()
				if !IsLimit(err) {
					t.Fatalf("%v is not a LimitError", err)
				}
			}
			if got != tc.want {
				t.Fatalf("CheckJSON = %q, want %q", got, tc.want)
			}
		})
	}
	recs, err := DecodeJSONLimits([]byte(batch(2)), time.Unix(0, 0), 0, 2)
	if err != nil || len(recs) != 2 {
		t.Fatalf("DecodeJSONLimits = %d records, %v", len(recs), err)
	}
	if _, err := DecodeJSONLimits([]byte(batch(1001)), time.Unix(0, 0), 0, 0); err == nil || err.Error() != "batch holds more than the limit of 1000 items" {
		t.Fatalf("default batch limit: %v", err)
	}
}
