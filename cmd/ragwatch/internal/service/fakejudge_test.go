package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// FakeJudge, for the tests of this package and of service_test, is an LLM judge speaking the OpenAI chat-completions wire format (an httptest
// server): reply gives the model's message content for a request body, and every request body
// is kept for the test to read (Sent).
type FakeJudge struct {
	*httptest.Server
	mu      sync.Mutex // guards prompts
	prompts []string
}

func NewFakeJudge(t *testing.T, reply func(body string) string) *FakeJudge {
	t.Helper()
	j := &FakeJudge{}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		j.mu.Lock()
		j.prompts = append(j.prompts, string(b))
		j.mu.Unlock()
		content, _ := json.Marshal(reply(string(b)))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"judge-1",
"choices":[{"index":0,"message":{"role":"assistant","content":%s},"logprobs":null,"finish_reason":"stop"}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, content)
	}))
	t.Cleanup(j.Close)
	return j
}

// Sent is a copy of the request bodies received so far.
func (j *FakeJudge) Sent() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.prompts...)
}
