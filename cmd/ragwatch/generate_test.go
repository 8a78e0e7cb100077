package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeGenerator speaks OpenAI chat completions: it answers each generation prompt from the
// documents it holds, and keeps every prompt.
func fakeGenerator(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var prompts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := string(b)
		mu.Lock()
		prompts = append(prompts, body)
		mu.Unlock()
		var q, a string
		switch {
		case strings.Contains(body, "does NOT answer"):
			q, a = "What does the warranty cost in Japan?", ""
		case strings.Contains(body, "needs BOTH documents"):
			q, a = "How long is the warranty and who pays return shipping?", "Two years; the shop pays return shipping."
		case strings.Contains(body, "warranty lasts"):
			q, a = "How long does the warranty last?", "Two years."
		case strings.Contains(body, "Returns are free"):
			q, a = "Who pays for returns?", "Returns are free: the shop pays."
		default: // the third document gets the first one's question: a duplicate
			q, a = "How long does the warranty last?", "Two years."
		}
		content, _ := json.Marshal(fmt.Sprintf(`{"question":%q,"answer":%q}`, q, a))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gen-1","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}`, content)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), prompts...) }
}

func TestGenerateEvalSet(t *testing.T) {
	srv, prompts := fakeGenerator(t)
	dir := t.TempDir()
	cfg := writeTemp(t, dir, "ragwatch.yaml", fmt.Sprintf(`scoring:
  backend: openai
  openai: {base_url: "%s/v1/", model: gen-1, input_cost_per_mtok: 2, output_cost_per_mtok: 10}
`, srv.URL))
	// Traffic: d1 and d2 retrieved together; d1-copy repeats d1's text under another id; d3 alone.
	in := writeTemp(t, dir, "export.jsonl", `{"trace_id":"a","query":"q","documents":[{"id":"d1","content":"The warranty lasts two years. Contact jane@example.com."},{"id":"d2","content":"Returns are free: the shop pays shipping."}]}
{"trace_id":"b","query":"q","documents":[{"id":"d1-copy","content":"The  warranty lasts two years. Contact jane@example.com."},{"id":"d3","content":"Our stores open at nine."}]}
not json
`)
	out := filepath.Join(dir, "evalset.jsonl")
	code, stdout, stderr := runCmd("generate", "-c", cfg, "--input", in, "--output", out, "--size", "5", "--mix", "3,1,1")
	if !strings.Contains(stderr, "invalid record: line 3: invalid JSON") {
		t.Fatalf("stderr: %s", stderr)
	}
	// 3 single-document prompts (d1, d2, d3: d3's question repeats d1's and is dropped), 1
	// two-document and 1 unanswerable item: 4 of 5 written, so exit 1.
	if code != 1 || !strings.Contains(stdout, "3 documents, 4 items written: 2 single-document, 1 two-document, 1 unanswerable\n1 duplicate questions dropped, 0 failed calls, cost $0.0150\n") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, p := range prompts() {
		if strings.Contains(p, "jane@example.com") {
			t.Fatalf("a prompt carried the e-mail address: %s", p)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "jane@example.com") || !strings.Contains(string(data), "Contact [REDACTED:email].") {
		t.Fatalf("the eval set carries the e-mail address:\n%s", data)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			TraceID    string            `json:"trace_id"`
			Query      string            `json:"query"`
			Reference  string            `json:"reference"`
			Attributes map[string]string `json:"attributes"`
			Relevance  map[string]int    `json:"relevance"`
			Documents  []struct{ ID string }
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		kind := r.Attributes["synthetic.kind"]
		kinds[kind]++
		switch kind {
		case "multi_doc":
			if r.Attributes["synthetic.sources"] != "d1,d2" || len(r.Documents) != 2 || r.Relevance["d1"] != 1 || r.Relevance["d2"] != 1 {
				t.Fatalf("multi-doc item %s", line)
			}
		case "unanswerable":
			if r.Reference != "The documents do not contain the answer to this question." || r.Relevance[r.Documents[0].ID] != 0 {
				t.Fatalf("unanswerable item %s", line)
			}
		}
		if !strings.HasPrefix(r.TraceID, "synth-") || r.Query == "" {
			t.Fatalf("item %s", line)
		}
	}
	if kinds["single_doc"] != 2 || kinds["multi_doc"] != 1 || kinds["unanswerable"] != 1 {
		t.Fatalf("kinds %v", kinds)
	}
	// ragwatch eval reads the set as it is.
	if code, stdout, stderr := runEvalCmd("--input", out); code != 0 || !strings.HasPrefix(stdout, "4 records scored\n") {
		t.Fatalf("eval of the set: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A budget of $0.005 allows two calls ($0.003 each), then stops.
	code, stdout, _ = runCmd("generate", "-c", cfg, "--input", in, "--output", out, "--size", "5", "--budget-usd", "0.005")
	if code != 1 || !strings.Contains(stdout, "2 items written") || !strings.Contains(stdout, "stopped: the budget is spent") {
		t.Fatalf("budget: exit %d\n%s", code, stdout)
	}
}
