package span

import (
	"testing"
)

// Cases from the OpenTelemetry tracestate probability-sampling spec and the W3C list syntax.
func TestUpstreamProbability(t *testing.T) {
	for _, tc := range []struct {
		tracestate string
		p          float64
		found, bad bool
	}{
		{"", 0, false, false},
		{"vendor=x", 0, false, false},
		{"ot=rv:abcdef01234567", 0, false, false}, // randomness only, no threshold
		{"ot=th:0", 1, true, false},
		{"ot=th:8", 0.5, true, false},
		{"ot=th:c", 0.25, true, false},
		{"ot=th:c0", 0.25, true, false},                    // trailing zeros change nothing
		{"ot=th:fd70a3d70a3d71", 0.01, true, false},        // the spec's 1% example
		{"ot=th:e666666666666", 0.1, true, false},          // 10%, rounded threshold
		{"vendor=x, ot=rv:01;th:8 ,z=1", 0.5, true, false}, // other members, spaces
		{"ot=p:0", 1, true, false},                         // the earlier p-value convention
		{"ot=p:3", 0.125, true, false},
		{"ot=th:8;p:3", 0.5, true, false}, // th wins
		{"ot=th:", 0, true, true},
		{"ot=th:C", 0, true, true},               // uppercase is not the spec's form
		{"ot=th:123456789abcdef", 0, true, true}, // 15 digits
		{"ot=th:xyz", 0, true, true},
		{"ot=p:63", 0, true, true}, // probability zero: no weight
		{"ot=p:64", 0, true, true},
		{"ot=p:-1", 0, true, true},
	} {
		p, found, err := UpstreamProbability(tc.tracestate)
		if found != tc.found || (err != nil) != tc.bad {
			t.Errorf("%q: found %v err %v, want found %v bad %v", tc.tracestate, found, err, tc.found, tc.bad)
			continue
		}
		if d := p - tc.p; d > 1e-9 || d < -1e-9 {
			t.Errorf("%q: p = %v, want %v", tc.tracestate, p, tc.p)
		}
	}
}
