package scorers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func parse(t *testing.T, y string) config.Scoring {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c.Scoring
}

func names(ss []score.Scorer) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

func rec() *record.Record {
	r := &record.Record{TraceID: "t1", Service: "svc", Query: "What is the capital of France?",
		Answer:    "Paris is the capital of France [1].",
		Documents: []record.Document{{ID: "d1", Content: "Paris is the capital and largest city of France."}, {ID: "d2", Content: "Lyon is a city."}},
		Reference: "Paris.", Relevance: map[string]int{"d1": 1}}
	r.Normalize(r.Time)
	return r
}

func TestDefaultBuildsBuiltinAndRetrieval(t *testing.T) {
	ss, err := Build(parse(t, ""), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(ss)) != "[builtin retrieval]" {
		t.Fatalf("scorers %v", names(ss))
	}
	var metrics []string
	for _, s := range ss {
		res, err := s.Score(context.Background(), rec())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Value < 0 || r.Value > 1 {
				t.Fatalf("%s = %v", r.Metric, r.Value)
			}
			metrics = append(metrics, r.Metric)
		}
	}
	sort.Strings(metrics)
	want := "[answer_relevancy answer_similarity citation_precision citation_recall context_precision context_recall faithfulness hit@1 hit@10 hit@3 hit@5 mrr ndcg@1 ndcg@10 ndcg@3 ndcg@5 precision@1 precision@10 precision@3 precision@5 recall@1 recall@10 recall@3 recall@5]"
	if fmt.Sprint(metrics) != want {
		t.Fatalf("metrics\n got %v\nwant %s", metrics, want)
	}
}

// judgeServer answers OpenAI chat completions with a 4/5 rating and Anthropic messages with
// a 2/5 rating, recording the auth headers.
func judgeServer(t *testing.T) (*httptest.Server, *sync.Map) {
	seen := &sync.Map{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/chat/completions":
			seen.Store("openai", r.Header.Get("Authorization"))
			io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"reasoning\":\"ok\",\"score\":4}","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
		case "/v1/messages":
			seen.Store("anthropic", r.Header.Get("X-Api-Key"))
			io.WriteString(w, `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"{\"reasoning\":\"meh\",\"score\":2}"}],"stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":3}}`)
		default:
			t.Errorf("unexpected %s", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func TestLLMBackendsAndOverrides(t *testing.T) {
	srv, seen := judgeServer(t)
	t.Setenv("TEST_OPENAI_KEY", "sk-openai-secret")
	keyFile := filepath.Join(t.TempDir(), "anthropic.key")
	if err := os.WriteFile(keyFile, []byte("sk-ant-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, fmt.Sprintf(`
scoring:
  backend: openai
  openai: {base_url: %[1]s/v1/, model: gpt-judge, api_key_env: TEST_OPENAI_KEY}
  anthropic: {base_url: %[1]s, model: claude-judge, api_key_file: %[2]s}
  metrics: [rubric_relevance, rubric_accuracy, answer_similarity, mrr]
  overrides: {rubric_accuracy: anthropic, answer_similarity: builtin}
`, srv.URL, keyFile))
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	ss, err := Build(cfg, reg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(ss)) != "[builtin openai anthropic retrieval]" {
		t.Fatalf("scorers %v", names(ss))
	}
	got := map[string]string{}
	for _, s := range ss {
		res, err := s.Score(context.Background(), rec())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			got[r.Metric] = fmt.Sprintf("%s=%.2f", r.Scorer, r.Value)
		}
	}
	want := map[string]string{"rubric_relevance": "openai=0.75", "rubric_accuracy": "anthropic=0.25", "mrr": "retrieval=1.00"}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: got %q, want %q (all %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["answer_similarity"]; !ok || !strings.HasPrefix(got["answer_similarity"], "builtin=") || len(got) != 4 {
		t.Fatalf("results %v", got)
	}
	if a, _ := seen.Load("openai"); a != "Bearer sk-openai-secret" {
		t.Fatalf("openai auth %v", a)
	}
	if a, _ := seen.Load("anthropic"); a != "sk-ant-secret" {
		t.Fatalf("anthropic key %v", a)
	}
	if strings.Contains(logs.String(), "secret") {
		t.Fatalf("logs leak a key: %s", logs.String())
	}
	if n := testutil.Sum(t, reg, "ragwatch_judge_tokens_total", nil); n != 22 {
		t.Fatalf("judge tokens %v, want 10+2+7+3", n)
	}
}

func TestNLIBackend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Inputs [][]string }
		json.NewDecoder(r.Body).Decode(&body)
		var out []string
		for range body.Inputs {
			out = append(out, `[{"label":"entailment","score":0.95},{"label":"neutral","score":0.04},{"label":"contradiction","score":0.01}]`)
		}
		io.WriteString(w, "["+strings.Join(out, ",")+"]")
	}))
	defer srv.Close()
	ss, err := Build(parse(t, "scoring:\n  nli: {backend: http, url: "+srv.URL+"}\n  retrieval_k: []\n"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(ss)) != "[builtin nli]" {
		t.Fatalf("scorers %v", names(ss))
	}
	res, err := ss[1].Score(context.Background(), rec())
	if err != nil || len(res) != 3 || res[0].Metric != "faithfulness" || res[0].Value != 1 {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestMissingSecret(t *testing.T) {
	cfg := parse(t, "scoring:\n  backend: openai\n  openai: {model: m, api_key_env: RAGWATCH_TEST_UNSET_KEY}\n")
	_, err := Build(cfg, nil, nil)
	if err == nil || err.Error() != "scoring.openai api key: environment variable RAGWATCH_TEST_UNSET_KEY is not set" {
		t.Fatalf("err %v", err)
	}
	cfg = parse(t, "scoring:\n  backend: anthropic\n  anthropic: {model: m}\n")
	if _, err := Build(cfg, nil, nil); err == nil || err.Error() != "scoring.anthropic needs api_key_env or api_key_file" {
		t.Fatalf("err %v", err)
	}
}

// TestMetricsDocExample keeps the YAML example of docs/metrics.md loadable and routed as the
// doc says.
func TestMetricsDocExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\n")
	body, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("no YAML example in docs/metrics.md")
	}
	c, err := config.Parse([]byte(body))
	if err != nil {
		t.Fatalf("docs/metrics.md example does not load: %v", err)
	}
	s := c.Scoring
	got := fmt.Sprintln(s.MetricBackend("rubric_accuracy"), s.MetricBackend("faithfulness"), s.MetricBackend("answer_similarity"), s.MetricBackend("context_recall"))
	if got != "anthropic nli builtin builtin\n" {
		t.Fatalf("routing %s", got)
	}
}

// The judge's connections are kept between bursts of max_concurrency calls: rounds of 4
// parallel calls answered together open 4 connections, not 4 + 2 per later round (the default
// transport keeps 2 idle).
func TestJudgeKeepsItsConnections(t *testing.T) {
	var conns sync.Map
	var opened, requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(50 * time.Millisecond) // the round's calls are in flight together
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"{\"reasoning\":\"ok\",\"score\":5}"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			if _, dup := conns.LoadOrStore(c, true); !dup {
				opened.Add(1)
			}
		}
	}
	srv.Start()
	defer srv.Close()
	ss, err := Build(parse(t, fmt.Sprintf("scoring:\n  backend: openai\n  openai: {base_url: %s/v1/, model: m, max_concurrency: 4}\n  metrics: [rubric_accuracy]\n", srv.URL)),
		prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 4
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := ss[0].Score(context.Background(), rec()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		time.Sleep(20 * time.Millisecond) // the transport puts the connections back
	}
	if requests.Load() != 4*rounds || opened.Load() > 5 {
		t.Fatalf("%d requests opened %d connections, want 4 (at most 5)", requests.Load(), opened.Load())
	}
}
