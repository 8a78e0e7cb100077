package scorers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/score"
)

const judgesYAML = `
scoring:
  backend: builtin
  metrics: [faithfulness]
  openai: {base_url: %s/v1/, model: gpt-judge}
judges:
  - name: tone
    criteria: %s
    steps: [Read the ANSWER., Pick the score.]
    inputs: [question, answer]
    backend: openai
    when: {services: [svc]}
`

// A judge on a backend no metric uses gets a scorer of its own, scores its metric with its
// version, and a new definition from Prepare changes the version.
func TestBuildWithJudges(t *testing.T) {
	srv, _ := judgeServer(t)
	c, err := config.Parse(fmt.Appendf(nil, judgesYAML, srv.URL, "whether the ANSWER is polite"))
	if err != nil {
		t.Fatal(err)
	}
	set := NewJudgeSet()
	ss, err := Build(c.Scoring, prometheus.NewRegistry(), nil, WithJudges(c.Judges, set))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(ss)) != "[builtin openai]" {
		t.Fatalf("scorers %v", names(ss))
	}
	if !score.KnownMetric("judge_tone") || score.KnownMetric("judge_unconfigured") {
		t.Fatal("judge metrics not registered for results from outside")
	}
	res, err := ss[1].Score(context.Background(), rec())
	if err != nil {
		t.Fatal(err)
	}
	v1 := set.Versions()["judge_tone"]
	if len(res) != 1 || res[0].Metric != "judge_tone" || res[0].Value != 0.75 || res[0].JudgeVersion != v1 || v1 == "" ||
		res[0].Method != score.MethodParsed {
		t.Fatalf("results %+v", res)
	}
	other := rec()
	other.Service = "billing"
	if res, err := ss[1].Score(context.Background(), other); err != nil || len(res) != 0 {
		t.Fatalf("a record outside the judge's scope was scored: %+v %v", res, err)
	}

	c2, err := config.Parse(fmt.Appendf(nil, judgesYAML, srv.URL, "whether the ANSWER is warm"))
	if err != nil {
		t.Fatal(err)
	}
	commit, err := set.Prepare(c2.Judges, c2.Scoring)
	if err != nil {
		t.Fatal(err)
	}
	if set.Versions()["judge_tone"] != v1 {
		t.Fatal("Prepare changed the judges before commit")
	}
	commit()
	res, err = ss[1].Score(context.Background(), rec())
	if err != nil || len(res) != 1 || res[0].JudgeVersion == v1 || res[0].JudgeVersion != set.Versions()["judge_tone"] {
		t.Fatalf("after the change: %+v %v (old version %s)", res, err, v1)
	}

	c2.Judges[0].Backend = "anthropic"
	c2.Scoring.Anthropic.Model = "claude"
	if _, err := set.Prepare(c2.Judges, c2.Scoring); err == nil || !strings.Contains(err.Error(), "backend anthropic was not running") {
		t.Fatalf("a judge on a backend not running was accepted: %v", err)
	}
}

// A process that scores only with the built-in scorer cannot take a judge on reload (its
// backend has no scorer); one that does not score at all accepts it for its worker pods.
func TestPrepareWithoutLLMScorer(t *testing.T) {
	c, err := config.Parse(fmt.Appendf(nil, judgesYAML, "http://127.0.0.1:1", "whether the ANSWER is polite"))
	if err != nil {
		t.Fatal(err)
	}
	set := NewJudgeSet()
	if _, err := Build(c.Scoring, prometheus.NewRegistry(), nil, WithJudges(nil, set)); err != nil {
		t.Fatal(err)
	}
	if _, err := set.Prepare(c.Judges, c.Scoring); err == nil || !strings.Contains(err.Error(), "backend openai was not running") {
		t.Fatalf("Prepare = %v", err)
	}
	commit, err := NewJudgeSet().Prepare(c.Judges, c.Scoring)
	if err != nil {
		t.Fatal(err)
	}
	commit()
}
