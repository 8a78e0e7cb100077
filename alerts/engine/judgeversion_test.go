package engine

import (
	"context"
	"testing"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/score"
)

// A judge metric's window holds one definition version: a new version empties it, and results
// of a replaced version still arriving are dropped.
func TestJudgeVersionResetsWindow(t *testing.T) {
	t.Setenv("JUDGE_KEY", "k")
	h := newHarness(t, `
scoring: {openai: {model: m, api_key_env: JUDGE_KEY}}
judges:
  - {name: tone, criteria: "tone: whether the ANSWER is polite", inputs: [answer], backend: openai}
slos:
  - {name: tone, metric: judge_tone, alert_below: 0.5, min_samples: 3, window: 10m}
drift: {detectors: []}
`, nil)
	feed := func(version string, vals ...float64) {
		t.Helper()
		for _, v := range vals {
			if err := h.e.ConsumeScores(context.Background(), []score.Result{{TraceID: "t", Service: "shop",
				Metric: "judge_tone", Value: v, Weight: 1, JudgeVersion: version}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	window := func() (int64, float64) {
		h.e.mu.Lock()
		defer h.e.mu.Unlock()
		r := h.e.byMetric["judge_tone"][0]
		s := r.windowSums(r.instances["shop"], h.clk.Now(), r.fineS)
		return s.N, s.WX
	}
	feed("v1", 0.2, 0.2, 0.2)
	if n, wx := window(); n != 3 || wx != 0.6000000000000001 {
		t.Fatalf("window after v1: n %d, sum %v", n, wx)
	}
	feed("v2", 0.9)
	if n, wx := window(); n != 1 || wx != 0.9 {
		t.Fatalf("window after the first v2 result: n %d, sum %v", n, wx)
	}
	feed("v1", 0.1) // in flight from before the change
	feed("v2", 0.8)
	if n, wx := window(); n != 2 || wx != 1.7000000000000002 {
		t.Fatalf("window with a late v1 result: n %d, sum %v", n, wx)
	}
	if got := promtestutil.ToFloat64(h.e.m.rejected.WithLabelValues("old_judge_version")); got != 1 {
		t.Fatalf("old_judge_version rejections = %v", got)
	}
	// Results without a version (every other scorer) are not affected.
	feed("", 0.5)
	if n, _ := window(); n != 3 {
		t.Fatalf("window n %d after an unversioned result", n)
	}
}
