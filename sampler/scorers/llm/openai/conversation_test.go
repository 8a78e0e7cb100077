package openai

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// thirdTurn is the third turn of a conversation whose earlier turns hold an e-mail address
// and a long first message.
func thirdTurn() *record.Record {
	return &record.Record{
		TraceID: "conv-1", Service: "support-bot", Turn: 3,
		History: []record.Message{
			{Role: record.RoleUser, Content: "Hi, I am comparing plans for our team " + strings.Repeat("and our budget ", 20)},
			{Role: record.RoleAssistant, Content: "Pro costs $20 a month."},
			{Role: record.RoleUser, Content: "Write to jane.doe@example.com about Enterprise.\nHow much is Enterprise?"},
			{Role: record.RoleAssistant, Content: "Enterprise costs $50 a month."},
		},
		Query:  "Does it include SSO?",
		Answer: "Yes, Enterprise includes SSO [ent].",
		Documents: []record.Document{
			{ID: "ent", Content: "Enterprise costs $50 a month and includes SSO."},
			{ID: "pro", Content: "Pro costs $20 a month."},
		},
	}
}

func conversationScorer(t *testing.T, srv *server, metrics []string) *llm.Scorer {
	t.Helper()
	j := llm.NewJudge(New(Config{BaseURL: srv.URL + "/v1/", Model: "judge-1", APIKey: "sk-test-123"}), llm.JudgeOptions{})
	sc, err := llm.NewScorer(j, llm.ScorerOptions{Metrics: metrics, MaxTextBytes: 200,
		Now: func() time.Time { return time.Unix(1700000000, 0).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// A later turn: one rewrite question first, whose standalone question both metrics then judge;
// the history goes out bounded (the oldest message does not fit 200 bytes), one message a
// line, and redacted.
func TestLaterTurnRewriteHistoryBoundsAndRedaction(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{
		completion(`{"question":"Does the Enterprise plan include SSO?"}`, 120, 12),
		completion(`{"reasoning":"direct","score":5}`, 200, 20),
		completion(`{"verdicts":[{"index":0,"useful":true,"reason":"says SSO"},{"index":1,"useful":false,"reason":"Pro"}]}`, 300, 30),
	}
	sc := conversationScorer(t, srv, []string{score.AnswerRelevancy, score.ContextPrecision})
	res, err := sc.Score(context.Background(), thirdTurn())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]score.Result{}
	for _, x := range res {
		got[x.Metric] = x
	}
	if len(res) != 2 || got[score.AnswerRelevancy].Value != 1 || got[score.ContextPrecision].Value != 1 {
		t.Fatalf("results %+v", res)
	}
	// The rewrite's tokens are charged to the metric that asked first.
	if ar := got[score.AnswerRelevancy]; ar.InputTokens != 320 || ar.OutputTokens != 32 {
		t.Errorf("answer_relevancy tokens %d/%d, want 320/32", ar.InputTokens, ar.OutputTokens)
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (one rewrite, shared)", len(reqs))
	}
	history := "<<<HISTORY>>>\n" +
		"ASSISTANT: Pro costs $20 a month.\n" +
		"USER: Write to [REDACTED:email] about Enterprise. How much is Enterprise?\n" +
		"ASSISTANT: Enterprise costs $50 a month.\n" +
		"<<<END HISTORY>>>\n"
	rewrite := messages(t, reqs[0])
	if !strings.Contains(rewrite[0][1], "rewrite the last question of a conversation") {
		t.Errorf("rewrite system prompt %q", rewrite[0][1])
	}
	if !strings.HasPrefix(rewrite[1][1], history+"<<<QUESTION>>>\nDoes it include SSO?\n<<<END QUESTION>>>\nRewrite the QUESTION as one standalone question") {
		t.Errorf("rewrite prompt:\n%s", rewrite[1][1])
	}
	relevancy := messages(t, reqs[1])[1][1]
	if !strings.HasPrefix(relevancy, history+"<<<QUESTION>>>\nDoes the Enterprise plan include SSO?\n<<<END QUESTION>>>") {
		t.Errorf("relevancy prompt:\n%s", relevancy)
	}
	precision := messages(t, reqs[2])[1][1]
	if !strings.HasPrefix(precision, "<<<QUESTION>>>\nDoes the Enterprise plan include SSO?\n<<<END QUESTION>>>") {
		t.Errorf("context precision prompt:\n%s", precision)
	}
	for i, r := range reqs {
		for _, m := range messages(t, r) {
			if strings.Contains(m[1], "jane.doe") || strings.Contains(m[1], "budget") {
				t.Errorf("request %d sends %q", i, m[1])
			}
		}
	}
	t.Logf("rewrite prompt: %d bytes of system prompt, %d bytes of user prompt (%d of them history)",
		len(rewrite[0][1]), len(rewrite[1][1]), len(history))
}

// A first turn, or a record without history, asks no rewrite and sends no history.
func TestFirstTurnAsksNoRewrite(t *testing.T) {
	srv := newServer(t)
	srv.chat = []reply{completion(`{"reasoning":"direct","score":5}`, 200, 20)}
	sc := conversationScorer(t, srv, []string{score.AnswerRelevancy})
	r := thirdTurn()
	r.Turn, r.History = 1, nil
	if _, err := sc.Score(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || strings.Contains(messages(t, reqs[0])[1][1], "HISTORY") {
		t.Fatalf("%d requests: %v", len(reqs), reqs)
	}
}

// A refusal: answer relevancy asks whether the documents answer the question, and
// refusal_correct follows the verdict; with nothing retrieved nothing is asked. Faithfulness
// and the citation metrics, configured too, are neither asked nor scored: a refusal makes no
// claim (score.ClaimMetric), as with the builtin scorer.
func TestRefusalRelevancyAndRefusalCorrect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		docs      []record.Document
		script    []reply
		relevancy float64
		correct   float64
	}{
		{"unwarranted", thirdTurn().Documents, []reply{
			completion(`{"question":"Does the Enterprise plan include SSO?"}`, 100, 10),
			completion(`{"reasoning":"ent says so","answerable":true}`, 200, 10),
		}, 0, 0},
		{"correct", []record.Document{{ID: "pro", Content: "Pro costs $20 a month."}}, []reply{
			completion(`{"question":"Does the Enterprise plan include SSO?"}`, 100, 10),
			completion(`{"reasoning":"nothing about SSO","answerable":false}`, 200, 10),
		}, 1, 1},
		{"nothing retrieved", nil, []reply{completion(`{"question":"Does the Enterprise plan include SSO?"}`, 100, 10)}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			srv.chat = tc.script
			sc := conversationScorer(t, srv, []string{score.AnswerRelevancy, score.Faithfulness, score.CitationPrecision, score.CitationRecall})
			r := thirdTurn()
			r.Answer, r.Documents = "I couldn't find anything about SSO in the documents [1].", tc.docs
			if len(tc.docs) > 0 {
				r.Citations = []record.Citation{{Text: r.Answer, DocumentIDs: []string{tc.docs[0].ID}}}
			}
			res, err := sc.Score(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2 || res[0].Metric != score.AnswerRelevancy || res[0].Value != tc.relevancy ||
				res[1].Metric != score.RefusalCorrect || res[1].Value != tc.correct {
				t.Fatalf("results %+v", res)
			}
			reqs := srv.requests()
			if len(reqs) != len(tc.script) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.script))
			}
			if len(reqs) == 2 {
				check := messages(t, reqs[1])[1][1]
				if !strings.Contains(check, "<<<QUESTION>>>\nDoes the Enterprise plan include SSO?\n<<<END QUESTION>>>") ||
					!strings.Contains(check, "<<<HISTORY>>>") || !strings.Contains(check, "<<<DOCUMENT index=0") {
					t.Errorf("answerable prompt:\n%s", check)
				}
			}
		})
	}
}
