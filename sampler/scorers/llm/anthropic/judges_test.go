package anthropic

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// A configured judge over the Messages API: steps generated once, examples in the prompt,
// everything redacted, and the parsed score (Anthropic returns no log-probabilities).
func TestCustomJudge(t *testing.T) {
	srv := newServer(t,
		message(`{"steps":["Read the ANSWER.","Pick the score."]}`, "end_turn", 40, 10),
		message(`{"reasoning":"Warm and clear.","score":4}`, "end_turn", 200, 12),
		message(`{"reasoning":"Curt.","score":2}`, "end_turn", 210, 12),
	)
	j := llm.NewJudge(New(Config{BaseURL: srv.URL, Model: "claude-judge", APIKey: "sk-ant-secret"}), llm.JudgeOptions{})
	d := llm.JudgeDef{Metric: "judge_tone", Criteria: "tone: whether the ANSWER is polite", Min: 1, Max: 5,
		Inputs:   []string{llm.InputHistory, llm.InputAnswer},
		Examples: []llm.Example{{Answer: "Ask someone else. Mail ops@example.org", Score: 1}}}
	sc, err := llm.NewScorer(j, llm.ScorerOptions{Metrics: []string{score.CitationPrecision}, Judges: []llm.JudgeDef{d}})
	if err != nil {
		t.Fatal(err)
	}
	r := &record.Record{TraceID: "t1", Service: "svc", Query: "And on Sunday?", Answer: "Yes, 10 to 4.",
		History: []record.Message{{Role: "user", Content: "Are you open Saturday? I am bob@example.net"}, {Role: "assistant", Content: "Yes."}}}
	var got []float64
	for range 2 {
		res, err := sc.Score(context.Background(), r)
		if err != nil || len(res) != 1 || res[0].Method != score.MethodParsed || res[0].JudgeVersion != d.Version() {
			t.Fatalf("results %+v, %v", res, err)
		}
		got = append(got, res[0].Value)
	}
	if got[0] != 0.75 || got[1] != 0.25 {
		t.Fatalf("values %v, want [0.75 0.25]", got)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.reqs) != 3 {
		t.Fatalf("%d requests, want 3 (steps once)", len(srv.reqs))
	}
	prompt := fmt.Sprint(srv.reqs[1]["messages"])
	for _, want := range []string{"<<<EXAMPLE index=1 score=1>>>", "[REDACTED:email]", "<<<HISTORY>>>\nUSER: Are you open Saturday? I am [REDACTED:email]\nASSISTANT: Yes.\n<<<END HISTORY>>>",
		"1. Read the ANSWER.\n2. Pick the score."} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "@example") {
		t.Errorf("prompt not redacted:\n%s", prompt)
	}
}
