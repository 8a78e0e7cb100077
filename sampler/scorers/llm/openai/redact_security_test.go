package openai

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
)

// pii is realistic support-chat text with an e-mail address, a Luhn-valid card number, an
// IBAN (mod-97 valid), an IP address and a phone number.
const pii = "Hi, I'm jane.doe@example.com, my card 4111 1111 1111 1111 was charged twice; " +
	"refund to DE89 3704 0044 0532 0130 00 please. I logged in from 203.0.113.7, call me on +49 30 1234567."

// TestJudgePromptsAreRedactedByDefault sends a record full of personal data through a real
// OpenAI-protocol judge (an httptest server) and checks none of it reaches the server, while
// the redaction markers and the rest of the text do.
func TestJudgePromptsAreRedactedByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		redact func(string) string
		leaks  bool
	}{
		{"default", nil, false},
		{"explicitly off", llm.NoRedaction, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			s.chat = []reply{completion(`{"reasoning":"fine","score":4}`, 10, 5)}
			b := New(Config{BaseURL: s.URL + "/v1/", Model: "judge-1"})
			sc, err := llm.NewScorer(llm.NewJudge(b, llm.JudgeOptions{Redact: tc.redact}), llm.ScorerOptions{Metrics: []string{score.RubricRelevance}})
			if err != nil {
				t.Fatal(err)
			}
			res, err := sc.Score(context.Background(), &record.Record{
				TraceID: "0123456789abcdef0123456789abcdef", Service: "support", Query: pii, Answer: "Refund issued to " + pii,
			})
			if err != nil || len(res) != 1 || res[0].Value != 0.75 {
				t.Fatalf("Score = %+v, %v", res, err)
			}
			reqs := s.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			wire, _ := json.Marshal(reqs[0])
			sent := string(wire)
			secrets := []string{"jane.doe@example.com", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "203.0.113.7", "1234567"}
			for _, p := range secrets {
				if strings.Contains(sent, p) != tc.leaks {
					t.Errorf("request contains %q = %v, want %v", p, !tc.leaks, tc.leaks)
				}
			}
			if !tc.leaks {
				for _, m := range []string{"[REDACTED:email]", "[REDACTED:card]", "[REDACTED:iban]", "[REDACTED:ip]", "[REDACTED:phone]", "charged twice"} {
					if strings.Count(sent, m) != 2 { // once in the question, once in the answer
						t.Errorf("request holds %q %d times, want 2:\n%s", m, strings.Count(sent, m), sent)
					}
				}
			}
		})
	}
}
