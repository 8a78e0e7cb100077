package assemble

import (
	"context"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/ptrace"
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

// withTraceState sets the tracestate of every span of td.
func withTraceState(td ptrace.Traces, ts string) ptrace.Traces {
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		spans.At(i).TraceState().FromRaw(ts)
	}
	return td
}

// The root's declared probability reaches the record; a malformed one is ignored and counted,
// and then, as for a trace that declares none, the configured upstream probability applies.
func TestAssemblerUpstreamProbability(t *testing.T) {
	for _, tc := range []struct {
		name, tracestate string
		configured       float64
		want, invalid    float64
	}{
		{"declared", "ot=th:c", 0, 0.25, 0},
		{"declared wins over the config", "ot=th:8", 0.1, 0.5, 0},
		{"none declared", "", 0, 0, 0},
		{"none declared, configured", "", 0.1, 0.1, 0},
		{"malformed", "ot=th:zz", 0, 0, 1},
		{"malformed, configured", "ot=th:zz", 0.1, 0.1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultCfg())
			h.a.upstream = tc.configured
			h.consumeAt(t, 0, withTraceState(build(t, 1, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))), tc.tracestate))
			h.processAt(t, 3*time.Second)
			recs, _ := h.out.got()
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			if got := recs[0].UpstreamProbability; got != tc.want {
				t.Errorf("UpstreamProbability = %v, want %v", got, tc.want)
			}
			if got := promtestutil.ToFloat64(h.a.m.badTraceState); got != tc.invalid {
				t.Errorf("ragwatch_tracestate_invalid_total = %v, want %v", got, tc.invalid)
			}
			_ = h.a.Shutdown(context.Background())
		})
	}
}
