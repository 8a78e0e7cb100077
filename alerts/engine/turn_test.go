package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/score"
)

const turnCfg = `
slos:
  - name: relevancy
    metric: answer_relevancy
    alert_below: 0.7
    window: 10m
  - name: relevancy-late-turns
    metric: answer_relevancy
    min_turn: 3
    alert_below: 0.7
    window: 10m
drift: {detectors: []}
`

// An SLO with min_turn counts only the scores of that turn or later: later turns that answer
// worse breach it while the SLO over every turn holds.
func TestMinTurnFiltersScores(t *testing.T) {
	h := newHarness(t, turnCfg, nil)
	var rs []score.Result
	for i := 0; i < 40; i++ {
		rs = append(rs,
			score.Result{TraceID: fmt.Sprint("first-", i), Service: "search", Metric: "answer_relevancy", Value: 1, Weight: 1, Turn: 1},
			score.Result{TraceID: fmt.Sprint("later-", i), Service: "search", Metric: "answer_relevancy", Value: 0.5, Weight: 1, Turn: 3 + i%4},
			score.Result{TraceID: fmt.Sprint("unknown-", i), Service: "search", Metric: "answer_relevancy", Value: 1, Weight: 1})
	}
	if err := h.e.ConsumeScores(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	h.e.Evaluate(context.Background())
	if p := h.phase("relevancy-late-turns", "search", "page"); p != phaseFiring { // for: 0
		t.Errorf("later turns at 0.5 must breach: %s", p)
	}
	if p := h.phase("relevancy", "search", "page"); p != phaseInactive {
		t.Errorf("every turn at 0.83 must hold: %s", p)
	}
	if got := promtestutil.ToFloat64(h.e.m.value.WithLabelValues("relevancy-late-turns", "search")); got != 0.5 {
		t.Errorf("slo_value of the later turns = %v, want 0.5", got)
	}
	if got := promtestutil.ToFloat64(h.e.m.value.WithLabelValues("relevancy", "search")); got < 0.8333 || got > 0.8334 {
		t.Errorf("slo_value of every turn = %v, want 100/120", got)
	}
}

func TestMinTurnValidation(t *testing.T) {
	_, err := config.Parse([]byte("slos:\n  - {name: x, metric: answer_relevancy, alert_below: 0.5, window: 10m, min_turn: -1}\n"))
	if err == nil || !strings.Contains(err.Error(), "min_turn") {
		t.Fatalf("error %v, want one naming min_turn", err)
	}
}
