package anthropic

import (
	"context"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// A later turn over the Messages API: the rewrite goes out first with the (redacted) history,
// and the relevancy rubric then judges the standalone question with the history beside it.
func TestLaterTurnOverMessagesAPI(t *testing.T) {
	srv := newServer(t,
		message(`{"question":"Is the downtown store open on Sunday?"}`, "end_turn", 90, 12),
		message(`{"reasoning":"direct","score":4}`, "end_turn", 150, 20),
	)
	sc, _ := scorer(t, srv, score.AnswerRelevancy, llm.JudgeOptions{})
	r := rec()
	r.Turn, r.Query, r.Answer = 2, "Is it open on Sunday?", "Yes, from 10 to 4."
	r.History = []record.Message{
		{Role: record.RoleUser, Content: "Where is the downtown store? Call me on +1 415 555 0100."},
		{Role: record.RoleAssistant, Content: "At 5 Main Street."},
	}
	res, err := sc.Score(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Value != 0.75 || res[0].InputTokens != 240 || res[0].OutputTokens != 32 {
		t.Fatalf("results %+v", res)
	}
	if len(srv.reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(srv.reqs))
	}
	user := func(i int) string {
		return srv.reqs[i]["messages"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	}
	history := "<<<HISTORY>>>\nUSER: Where is the downtown store? Call me on [REDACTED:phone].\nASSISTANT: At 5 Main Street.\n<<<END HISTORY>>>\n"
	if !strings.HasPrefix(user(0), history+"<<<QUESTION>>>\nIs it open on Sunday?\n<<<END QUESTION>>>\nRewrite the QUESTION") {
		t.Errorf("rewrite prompt:\n%s", user(0))
	}
	if !strings.HasPrefix(user(1), history+"<<<QUESTION>>>\nIs the downtown store open on Sunday?\n<<<END QUESTION>>>") {
		t.Errorf("relevancy prompt:\n%s", user(1))
	}
}
