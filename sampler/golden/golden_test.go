package golden

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/scorers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeJudge speaks the OpenAI chat-completions wire format. It writes the G-Eval steps when
// asked for them, and otherwise the score that rate gives the question of the request.
type fakeJudge struct {
	*httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	rate  func(question string) int
}

func newFakeJudge(t *testing.T, rate func(string) int) *fakeJudge {
	f := &fakeJudge{rate: rate}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var content string
		if strings.Contains(string(body), "Write the evaluation steps") {
			content = `{"steps":["Read the ANSWER.","Pick the score."]}`
		} else {
			f.calls.Add(1)
			f.mu.Lock()
			rate := f.rate
			f.mu.Unlock()
			q := "?"
			for _, c := range []string{"q-a", "q-b", "q-c", "q-d"} {
				if strings.Contains(string(body), c) {
					q = c
				}
			}
			content = fmt.Sprintf(`{"reasoning":"ok","score":%d}`, rate(q))
		}
		c, _ := json.Marshal(content)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"judge-1",
"choices":[{"index":0,"message":{"role":"assistant","content":%s},"logprobs":null,"finish_reason":"stop"}],
"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}`, c)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeJudge) setRate(rate func(string) int) {
	f.mu.Lock()
	f.rate = rate
	f.mu.Unlock()
}

// The golden set: the people gave q-a and q-b 1 (polite), q-c and q-d 0.
const goldenSet = `{"trace_id":"g-a","query":"q-a","answer":"Thank you, gladly."  ,"labels":{"values":{"judge_tone":1}}}
{"trace_id":"g-b","query":"q-b","answer":"Of course, happy to help.","labels":{"values":{"judge_tone":1}}}

{"trace_id":"g-c","query":"q-c","answer":"No.","labels":{"values":{"judge_tone":0}}}
{"trace_id":"g-d","query":"q-d","answer":"Figure it out.","labels":{"values":{"judge_tone":0}}}
`

// agreeing rates like the people (5 → 1, 1 → 0 on the judge's 1-5 scale).
func agreeing(q string) int {
	if q == "q-a" || q == "q-b" {
		return 5
	}
	return 1
}

func judgeScorers(t *testing.T, url string) []score.Scorer {
	t.Helper()
	cfg := config.Default()
	cfg.Scoring.Backend = "builtin"
	cfg.Scoring.Metrics = []string{"faithfulness"}
	cfg.Scoring.RetrievalK = nil
	cfg.Scoring.OpenAI.BaseURL = config.SecretURL(url + "/v1/")
	cfg.Scoring.OpenAI.Model = "judge-1"
	judges := []config.Judge{{Name: "tone", Criteria: "whether the ANSWER is polite", Inputs: []string{"question", "answer"}, Backend: "openai"}}
	ss, err := scorers.Build(cfg.Scoring, nil, nil, scorers.WithJudges(judges, nil))
	if err != nil {
		t.Fatal(err)
	}
	score.RegisterJudgeMetrics("judge_tone")
	return ss
}

func items(t *testing.T) []Item {
	t.Helper()
	it, err := ReadItems(strings.NewReader(goldenSet), "golden.jsonl", 10, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func TestCanaryNoticesDrift(t *testing.T) {
	judge := newFakeJudge(t, agreeing)
	reg := prometheus.NewRegistry()
	clock := testutil.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	budget := decide.NewBudget(config.SamplingBudget{USDPerDay: 100, Prices: map[string]config.ModelPrice{
		"judge-1": {InputPerMTok: 2, OutputPerMTok: 10}}}, clock.Now, nil, nil)
	var reports []Report
	c, err := New(Settings{Items: items(t), Scorers: judgeScorers(t, judge.URL), Interval: time.Hour,
		Tolerance: 0.1, MaxChanged: 0.25, MaxAgreementDrop: 0.1, Budget: budget, Registerer: reg, Now: clock.Now,
		Sink: func(_ context.Context, r Report) { reports = append(reports, r) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if got := c.due(ctx); got != ReasonFirst {
		t.Fatalf("due = %q, want first", got)
	}
	rep, err := c.Run(ctx, ReasonFirst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeOK || len(rep.Series) != 1 {
		t.Fatalf("first run %+v", rep)
	}
	s := rep.Series[0]
	if s.Judge != "openai" || s.Metric != "judge_tone" || s.N != 4 || !s.Defined || s.Agreement != 1 || s.Drift || s.Previous != nil {
		t.Fatalf("first series %+v", s)
	}
	// 5 judge calls (the judge's steps, written once, and 4 ratings) of 1000 + 100 tokens at
	// $2 and $10 per million: $0.003 each.
	if math.Abs(rep.CostUSD-5*0.003) > 1e-12 || math.Abs(budget.Spent()-rep.CostUSD) > 1e-12 {
		t.Fatalf("cost %v, budget spent %v, want 0.015 both", rep.CostUSD, budget.Spent())
	}
	if got := testutil.Sum(t, reg, "ragwatch_golden_agreement", map[string]string{"judge": "openai", "metric": "judge_tone"}); got != 1 {
		t.Fatalf("ragwatch_golden_agreement = %v", got)
	}
	clock.Add(30 * time.Minute)
	if got := c.due(ctx); got != "" {
		t.Fatalf("due after 30m of 1h = %q", got)
	}

	// The hosted model changes behind its name: it now rates q-a 1 and q-c 5.
	judge.setRate(func(q string) int {
		switch q {
		case "q-a":
			return 1
		case "q-c":
			return 5
		}
		return agreeing(q)
	})
	clock.Add(31 * time.Minute)
	if got := c.due(ctx); got != ReasonSchedule {
		t.Fatalf("due after 61m = %q", got)
	}
	rep, err = c.Run(ctx, ReasonSchedule)
	if err != nil {
		t.Fatal(err)
	}
	s = rep.Series[0]
	if rep.Outcome != OutcomeDrift || !s.Drift || s.Agreement != 0.5 || s.Previous == nil || *s.Previous != 1 || s.Compared != 4 {
		t.Fatalf("second run %+v / %+v", rep, s)
	}
	if len(s.Changed) != 2 || s.Changed[0] != (Change{Item: "g-a", Previous: 1, Current: 0, Human: 1}) || s.Changed[1] != (Change{Item: "g-c", Previous: 0, Current: 1, Human: 0}) {
		t.Fatalf("changed %+v", s.Changed)
	}
	wantReasons := []string{
		"agreement fell from 1.000 to 0.500 (95% CI [0.000, 1.000]), more than 0.100",
		"2 of 4 items moved by more than 0.100 since the previous run: g-a 1.00→0.00, g-c 0.00→1.00",
	}
	if strings.Join(s.Reasons, "\n") != strings.Join(wantReasons, "\n") {
		t.Fatalf("reasons:\n%s", strings.Join(s.Reasons, "\n"))
	}
	if len(reports) != 2 || testutil.Sum(t, reg, "ragwatch_golden_drift", nil) != 1 ||
		testutil.Sum(t, reg, "ragwatch_golden_items_changed", nil) != 2 ||
		testutil.Sum(t, reg, "ragwatch_golden_runs_total", map[string]string{"outcome": "drift"}) != 1 ||
		math.Abs(testutil.Sum(t, reg, "ragwatch_golden_cost_usd_total", nil)-0.027) > 1e-12 {
		t.Fatalf("reports %d, metrics not updated", len(reports))
	}

	// The same answers again: nothing moved since the previous run, but the floor still fails.
	c.s.MinAgreement = 0.8
	rep, _ = c.Run(ctx, ReasonManual)
	if s = rep.Series[0]; !s.Drift || len(s.Changed) != 0 || len(s.Reasons) != 1 || !strings.Contains(s.Reasons[0], "below the floor 0.800") {
		t.Fatalf("third run %+v", s)
	}
}

func TestCanaryBudgetStopsRun(t *testing.T) {
	judge := newFakeJudge(t, agreeing)
	clock := testutil.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	// $0.007 a day: the first item costs $0.006 (the steps and its rating), the second is
	// still allowed and brings the day to $0.009, the third is not.
	budget := decide.NewBudget(config.SamplingBudget{USDPerDay: 0.007, Prices: map[string]config.ModelPrice{
		"judge-1": {InputPerMTok: 2, OutputPerMTok: 10}}}, clock.Now, nil, nil)
	store := &MemoryStore{}
	c, err := New(Settings{Items: items(t), Scorers: judgeScorers(t, judge.URL), Budget: budget, Store: store, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Run(context.Background(), ReasonFirst)
	if err != nil || rep.Outcome != OutcomeBudget || len(rep.Series) != 0 {
		t.Fatalf("run %+v, %v", rep, err)
	}
	if judge.calls.Load() != 2 {
		t.Fatalf("%d judge calls, want 2 (stopped when the budget was spent)", judge.calls.Load())
	}
	if s, _ := store.Load(context.Background()); s != nil {
		t.Fatalf("a cut run was kept: %+v", s)
	}
}

// The previous run survives a restart in the KV bucket, and a judge whose version differs
// from it starts a run on the next check.
func TestCanaryKVAndVersionChange(t *testing.T) {
	srv := testutil.RunJetStream(t)
	_, js := testutil.Connect(t, srv)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstreamConfig("ragwatch_golden"))
	if err != nil {
		t.Fatal(err)
	}
	judge := newFakeJudge(t, agreeing)
	clock := testutil.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	version := "v1@judge-1"
	settings := Settings{Items: items(t), Scorers: judgeScorers(t, judge.URL), Store: KVStore{KV: kv}, Now: clock.Now,
		Interval: time.Hour, CheckInterval: 5 * time.Millisecond, Tolerance: 0.1, MaxChanged: 0.2, MaxAgreementDrop: 0.1,
		Versions: func() map[string]string { return map[string]string{"judge_tone": version} }}
	runs := make(chan Report, 4)
	settings.Sink = func(_ context.Context, r Report) { runs <- r }
	first, err := New(settings)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-runs
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Reason != ReasonFirst || r.Series[0].Version != "v1@judge-1" {
		t.Fatalf("first %+v", r)
	}

	// A restarted process (a new canary on the same bucket) sees the stored run.
	second, err := New(settings)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.due(ctx); got != "" {
		t.Fatalf("due after restart = %q, want nothing (interval not over)", got)
	}
	version = "v2@judge-1" // a reload changed the judge's prompt
	if got := second.due(ctx); got != ReasonChanged {
		t.Fatalf("due after the version changed = %q", got)
	}
	rep, err := second.Run(ctx, ReasonChanged)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Series[0]; s.PreviousVersion != "v1@judge-1" || s.Version != "v2@judge-1" || s.Drift ||
		len(s.Reasons) != 1 || s.Reasons[0] != "the judge changed (v1@judge-1 → v2@judge-1)" {
		t.Fatalf("after the change %+v", s)
	}
}

func TestReadItemsErrors(t *testing.T) {
	now := time.Unix(0, 0)
	for in, want := range map[string]string{
		`{"query":"q","answer":"a","labels":{"values":{"x":1}}}`:                "g: line 1: trace_id is required: it names the item in alerts",
		`{"trace_id":"a","query":"q","answer":"a"}`:                             "g: line 1: labels.values is empty: a golden item needs human judgements",
		`{"trace_id":"a","query":"q","answer":"a","labels":{"values":{"x":2}}}`: "g: line 1: labels: values.x: must be between 0 and 1",
		"{\"trace_id\":\"a\",\"query\":\"q\",\"labels\":{\"values\":{\"x\":1}}}\n{\"trace_id\":\"a\",\"query\":\"q\",\"labels\":{\"values\":{\"x\":1}}}": `g: line 2: trace_id "a" is also on line 1`,
		"\n\n{nope": "g: line 3: invalid JSON: invalid character 'n' looking for beginning of object key string",
		"\n":        "g: no items",
	} {
		_, err := ReadItems(strings.NewReader(in), "g", 10, now)
		if err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	many := `{"trace_id":"x","query":"q","labels":{"values":{"x":1}}}` + "\n" + `{"trace_id":"y","query":"q","labels":{"values":{"x":1}}}` + "\n"
	if _, err := ReadItems(strings.NewReader(many), "g", 1, now); err == nil || err.Error() != "g: more than 1 items (golden.max_items)" {
		t.Errorf("max: %v", err)
	}
}

// Two replicas on one store: once either has run, the other sees the run and is not due.
func TestCanaryReplicasShareTheSchedule(t *testing.T) {
	judge := newFakeJudge(t, agreeing)
	clock := testutil.NewClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	store := &MemoryStore{}
	s := Settings{Items: items(t), Scorers: judgeScorers(t, judge.URL), Store: store, Now: clock.Now, Interval: time.Hour}
	a, _ := New(s)
	b, _ := New(s)
	ctx := context.Background()
	if a.due(ctx) != ReasonFirst || b.due(ctx) != ReasonFirst {
		t.Fatal("both replicas should be due before any run")
	}
	if _, err := a.Run(ctx, ReasonFirst); err != nil {
		t.Fatal(err)
	}
	if got := b.due(ctx); got != "" {
		t.Fatalf("replica b is due (%q) right after a ran", got)
	}
	clock.Add(time.Hour)
	if got := b.due(ctx); got != ReasonSchedule {
		t.Fatalf("replica b after the interval: %q", got)
	}
	// a runs the next round first: b, which saw the earlier run, must see this one too.
	if _, err := a.Run(ctx, ReasonSchedule); err != nil {
		t.Fatal(err)
	}
	if got := b.due(ctx); got != "" {
		t.Fatalf("replica b is due (%q) right after a's second run", got)
	}
}
