package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/anthropic"
	"github.com/ragwatch/ragwatch/sampler/scorers/llm/openai"
)

// decide is a judge's policy: given the prompt, it returns the winner ("1", "2" or "tie").
type decide func(prompt string) string

// positionBiased always prefers the answer shown first, whatever it says.
func positionBiased(string) string { return "1" }

// prefersGrounded prefers the answer that does not contain "Moon", in either position.
func prefersGrounded(prompt string) string {
	first := between(prompt, "<<<ANSWER 1>>>", "<<<END ANSWER 1>>>")
	second := between(prompt, "<<<ANSWER 2>>>", "<<<END ANSWER 2>>>")
	switch {
	case strings.Contains(first, "Moon") && !strings.Contains(second, "Moon"):
		return "2"
	case strings.Contains(second, "Moon") && !strings.Contains(first, "Moon"):
		return "1"
	}
	return "tie"
}

func between(s, open, end string) string {
	_, rest, _ := strings.Cut(s, open)
	in, _, _ := strings.Cut(rest, end)
	return in
}

// judgeServer speaks the OpenAI chat-completions or the Anthropic Messages wire format and
// answers each pairwise question with policy, recording the prompts.
type judgeServer struct {
	mu      sync.Mutex
	prompts []string
	*httptest.Server
}

func newJudgeServer(t *testing.T, vendor string, policy decide) *judgeServer {
	s := &judgeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
			t.Errorf("request %s: %v", body, err)
			w.WriteHeader(400)
			return
		}
		last := req.Messages[len(req.Messages)-1] // OpenAI sends the system prompt first
		prompt := fmt.Sprint(last.Content)
		if parts, ok := last.Content.([]any); ok && len(parts) > 0 { // content blocks
			prompt = fmt.Sprint(parts[0].(map[string]any)["text"])
		}
		s.mu.Lock()
		s.prompts = append(s.prompts, prompt)
		s.mu.Unlock()
		reply, _ := json.Marshal(fmt.Sprintf(`{"reasoning":"compared","winner":%q,"confidence":4}`, policy(prompt)))
		w.Header().Set("Content-Type", "application/json")
		switch vendor {
		case "openai":
			if r.URL.Path != "/v1/chat/completions" {
				t.Errorf("path %s", r.URL.Path)
			}
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"judge-1",
"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],
"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`, reply)
		case "anthropic":
			if r.URL.Path != "/v1/messages" {
				t.Errorf("path %s", r.URL.Path)
			}
			fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-judge",
"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":100,"output_tokens":10}}`, reply)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func pairJudge(vendor, url string) *llm.PairJudge {
	var b llm.Backend
	switch vendor {
	case "openai":
		b = openai.New(openai.Config{BaseURL: url + "/v1/", Model: "judge-1", APIKey: "sk-test"})
	case "anthropic":
		b = anthropic.New(anthropic.Config{BaseURL: url, Model: "claude-judge", APIKey: "sk-ant-test"})
	}
	return llm.NewPairJudge(llm.NewJudge(b, llm.JudgeOptions{Pricing: llm.Pricing{InputPerMTok: 1, OutputPerMTok: 10}}), 0, 0)
}

func TestPairJudgePositionSwap(t *testing.T) {
	docs := []record.Document{{ID: "d1", Content: "The Eiffel Tower is 330 metres tall and was completed in 1889."}}
	query := "How tall is the Eiffel Tower? Reply to jane.doe@example.com"
	grounded := &record.Record{TraceID: "a", Query: query, Documents: docs, Answer: "It is 330 metres tall."}
	invented := &record.Record{TraceID: "b", Query: query, Documents: docs, Answer: "It is 330 metres tall and was built on the Moon."}
	tests := []struct {
		policy  decide
		a, b    *record.Record
		winner  string
		outcome string
	}{
		{positionBiased, grounded, invented, pairwise.WinnerTie, pairwise.Inconsistent},
		{prefersGrounded, invented, grounded, pairwise.WinnerB, pairwise.Win},
		{prefersGrounded, grounded, invented, pairwise.WinnerA, pairwise.Loss},
		{prefersGrounded, grounded, grounded, pairwise.WinnerTie, pairwise.Tie},
	}
	for _, vendor := range []string{"openai", "anthropic"} {
		for i, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d-%s", vendor, i, tt.outcome), func(t *testing.T) {
				srv := newJudgeServer(t, vendor, tt.policy)
				v, err := pairJudge(vendor, srv.URL).JudgePair(context.Background(), tt.a, tt.b)
				if err != nil {
					t.Fatal(err)
				}
				if v.Winner != tt.winner || v.Outcome != tt.outcome {
					t.Fatalf("got %s/%s, want %s/%s (%s)", v.Winner, v.Outcome, tt.winner, tt.outcome, v.Reasoning)
				}
				if v.Judge != vendor || v.InputTokens != 200 || v.OutputTokens != 20 || v.CostUSD != (200*1+20*10)/1e6 {
					t.Fatalf("usage %+v", v)
				}
				wantConf := 0.8
				if tt.outcome == pairwise.Inconsistent {
					wantConf = 0
				}
				if v.Confidence != wantConf {
					t.Fatalf("confidence %v, want %v", v.Confidence, wantConf)
				}
				if len(srv.prompts) != 2 {
					t.Fatalf("%d questions, want 2 (one per position)", len(srv.prompts))
				}
				// The two questions show the answers in both orders.
				if between(srv.prompts[0], "<<<ANSWER 1>>>", "<<<END ANSWER 1>>>") != between(srv.prompts[1], "<<<ANSWER 2>>>", "<<<END ANSWER 2>>>") {
					t.Fatal("the second question does not swap the answers")
				}
				for _, p := range srv.prompts {
					if strings.Contains(p, "jane.doe@example.com") {
						t.Fatalf("prompt not redacted: %s", p)
					}
				}
			})
		}
	}
}
