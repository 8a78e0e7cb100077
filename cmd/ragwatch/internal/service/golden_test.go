package service_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const goldenServiceConfig = `
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1, budget: {usd_per_day: 10, prices: {judge-1: {input_per_mtok: 2, output_per_mtok: 10}}}}
scoring:
  backend: builtin
  metrics: [faithfulness]
  openai: {base_url: "%s/v1/", model: judge-1}
drift: {detectors: []}
judges:
  - name: tone
    criteria: %s
    inputs: [question, answer]
    backend: openai
notifiers:
  - {name: hook, type: webhook, url: "%s/hook", max_retries: 0, timeout: 2s}
golden:
  file: %s
  check_interval: 20ms
  tolerance: 0.1
  max_changed: 0.25
`

// The golden set is judged when ragwatch starts; a reload that changes the judge's prompt
// runs it again at once, and the new prompt's answers (which the fake model now gives the
// other way round on two items) fire RagwatchJudgeDrift naming those items, with the cost
// charged to the scoring budget.
func TestGoldenCanaryEndToEnd(t *testing.T) {
	var flipped atomic.Bool
	judge := service.NewFakeJudge(t, func(body string) string {
		if strings.Contains(body, "Write the evaluation steps") {
			return `{"steps":["Read the ANSWER.","Pick the score."]}`
		}
		polite := strings.Contains(body, "gladly") || strings.Contains(body, "happy to help")
		if flipped.Load() && (strings.Contains(body, "gladly") || strings.Contains(body, "Figure it out")) {
			polite = !polite
		}
		if polite {
			return `{"reasoning":"polite","score":5}`
		}
		return `{"reasoning":"rude","score":1}`
	})
	hook := newCollector(t)
	dir := t.TempDir()
	set := filepath.Join(dir, "golden.jsonl")
	if err := os.WriteFile(set, []byte(`{"trace_id":"g-a","query":"Can you help?","answer":"Thank you, gladly.","labels":{"values":{"judge_tone":1}}}
{"trace_id":"g-b","query":"Can you help?","answer":"Of course, happy to help.","labels":{"values":{"judge_tone":1}}}
{"trace_id":"g-c","query":"Can you help?","answer":"No.","labels":{"values":{"judge_tone":0}}}
{"trace_id":"g-d","query":"Can you help?","answer":"Figure it out.","labels":{"values":{"judge_tone":0}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := func(criteria string) string {
		return fmt.Sprintf(goldenServiceConfig, judge.URL, criteria, hook.URL, set)
	}
	e := startReloadEnv(t, cfg("whether the ANSWER is polite"))
	runs := func(reason, outcome string) float64 {
		return testutil.Sum(t, e.app.Registry, "ragwatch_golden_runs_total", map[string]string{"reason": reason, "outcome": outcome})
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the first golden run", func() bool { return runs("first", "ok") == 1 })
	agreement := testutil.Sum(t, e.app.Registry, "ragwatch_golden_agreement", map[string]string{"judge": "openai", "metric": "judge_tone"})
	if agreement != 1 {
		t.Fatalf("agreement after the first run = %v, want 1", agreement)
	}
	// 5 calls (steps + 4 ratings) of 10 + 5 tokens at $2 / $10 per million tokens.
	if got, want := testutil.Sum(t, e.app.Registry, "ragwatch_golden_cost_usd_total", nil), 5*(10*2+5*10)/1e6; math.Abs(got-want) > 1e-12 {
		t.Fatalf("golden cost %v, want %v", got, want)
	}
	if got := 10 - testutil.Sum(t, e.app.Registry, "ragwatch_sampling_budget_remaining_usd", nil); got < 5*(10*2+5*10)/1e6-1e-12 {
		t.Fatalf("the budget spent %v, want at least the golden run's cost", got)
	}

	flipped.Store(true)
	e.write(t, cfg("whether the ANSWER is polite and kind"))
	if code, body := e.reload(t); code != 200 {
		t.Fatalf("reload %d %v", code, body)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "a run for the changed judge", func() bool { return runs("judge_changed", "drift") == 1 })
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the drift alert at the webhook", func() bool {
		return strings.Contains(hook.all(), "RagwatchJudgeDrift")
	})
	got := hook.all()
	for _, want := range []string{`"judge":"openai"`, `"metric":"judge_tone"`, "g-a 1.00→0.00", "g-d 0.00→1.00", "agreement fell from 1.000 to 0.500", "the judge changed ("} {
		if !strings.Contains(got, want) {
			t.Fatalf("the webhook's alert lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"gladly", "Figure it out"} {
		if strings.Contains(got, never) {
			t.Fatalf("the alert carries golden content %q:\n%s", never, got)
		}
	}
}
