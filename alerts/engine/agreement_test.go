package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts/judgeagreement"
	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// A judge that drifts away from people fires the SLO on its Spearman agreement, like any SLO.
func TestAgreementSLOFiresOnDriftingJudge(t *testing.T) {
	h := newHarness(t, `
slos:
  - name: judge-agrees
    metric: agreement_spearman_faithfulness
    objective: 0.7
    alert_below: 0.5
    window: 30m
    min_samples: 10
    for: 2m
drift: {detectors: []}
`, nil)
	// The tracker feeds the engine as the service wires them (alerting.agreement: window 1d,
	// min_samples 10, max_pairs 20).
	tracker, err := judgeagreement.New(judgeagreement.Options{Settings: judgeagreement.Settings{Window: 24 * time.Hour,
		MinSamples: 10, MaxPairs: 20, MaxRecords: 100, MaxSeries: 64}, Registerer: h.reg, Now: h.clk.Now, Sink: h.e})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	feed := func(count int, judge func(human float64) float64) {
		for range count {
			hv := float64((n*37)%100) / 100 // a spread of human values
			id := fmt.Sprint("r", n)
			if err := tracker.ConsumeScores(ctx, []score.Result{{TraceID: id, Service: "search", Metric: "faithfulness",
				Value: judge(hv), Weight: 1, Scorer: "openai"}}); err != nil {
				t.Fatal(err)
			}
			if err := tracker.ConsumeLabel(ctx, record.Label{TraceID: id, Values: map[string]float64{"faithfulness": hv}}); err != nil {
				t.Fatal(err)
			}
			n++
			h.clk.Add(time.Minute)
			h.e.Evaluate(ctx)
		}
	}
	feed(40, func(x float64) float64 { return x*0.8 + 0.1 }) // a faithful judge: ρ = 1
	spearman := func() float64 {
		return testutil.Sum(t, h.reg, "ragwatch_judge_agreement", map[string]string{"metric": "faithfulness", "judge": "openai", "statistic": agreement.Spearman})
	}
	if got := spearman(); got != 1 {
		t.Fatalf("spearman of a faithful judge = %v", got)
	}
	if p := h.phase("judge-agrees", AgreementService, "page"); p != phaseInactive {
		t.Fatalf("faithful judge: phase %s", p)
	}
	feed(40, func(x float64) float64 { return 1 - x }) // the judge now ranks backwards
	if got := spearman(); got > -0.9 {
		t.Fatalf("spearman of a reversed judge = %v", got)
	}
	if p := h.phase("judge-agrees", AgreementService, "page"); p != phaseFiring {
		t.Fatalf("drifting judge: phase %s, want firing", p)
	}
	var fired bool
	for _, a := range h.rec.sent {
		fired = fired || (a.Name != "" && a.Labels["service"] == AgreementService)
	}
	if !fired {
		t.Errorf("no alert for service %q sent: %+v", AgreementService, h.rec.sent)
	}
}
