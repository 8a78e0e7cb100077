package assemble

import (
	"context"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

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

// withTraceState sets the tracestate of every span of td.
func withTraceState(td ptrace.Traces, ts string) ptrace.Traces {
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		spans.At(i).TraceState().FromRaw(ts)
	}
	return td
}
