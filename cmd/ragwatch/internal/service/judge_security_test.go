package service_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestJudgeNeverSeesPersonalData runs a record full of personal data through the whole
// pipeline to an LLM judge (an OpenAI-protocol httptest server): the prompts the judge receives
// hold redaction markers for the built-in detectors and for a custom pattern from the config,
// counted per detector, and none of the data.
func TestJudgeNeverSeesPersonalData(t *testing.T) {
	judge := service.NewFakeJudge(t, func(string) string { return `{"reasoning":"fine","score":4}` })
	t.Setenv("S1_JUDGE_KEY", "sk-test")
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
scoring:
  backend: openai
  metrics: [rubric_relevance]
  openai: {base_url: "` + judge.URL + `/v1/", model: judge-1, api_key_env: S1_JUDGE_KEY}
redaction:
  patterns: [{name: ticket, regex: 'TCK-[0-9]{8}'}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a := startEnv(t, cfg).app

	const pii = "I'm jane.doe@example.com (ticket TCK-20261129), card 4111-1111-1111-1111, IBAN DE89370400440532013000."
	body := `{"trace_id":"abab0000000000000000000000000001","service":"bank","query":"Why was I charged twice? ` + pii +
		`","answer":"The second charge on 4111-1111-1111-1111 is refunded to DE89370400440532013000."}`
	resp, err := http.Post("http://"+a.Addrs().HTTP+"/api/v1/records", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the judge call", func() bool {
		return len(judge.Sent()) > 0
	})
	sent := strings.Join(judge.Sent(), "\n")
	for _, p := range []string{"jane.doe@example.com", "TCK-20261129", "4111-1111-1111-1111", "DE89370400440532013000"} {
		if strings.Contains(sent, p) {
			t.Errorf("the judge received %q", p)
		}
	}
	for _, m := range []string{"[REDACTED:email]", "[REDACTED:ticket]", "[REDACTED:card]", "[REDACTED:iban]", "charged twice"} {
		if !strings.Contains(sent, m) {
			t.Errorf("the judge's prompt lacks %q:\n%s", m, sent)
		}
	}
	for d, want := range map[string]float64{"email": 1, "ticket": 1, "card": 2, "iban": 2} {
		if got := testutil.Sum(t, a.Registry, "ragwatch_redactions_total", map[string]string{"detector": d}); got != want {
			t.Errorf("redactions{detector=%q} = %v, want %v", d, got, want)
		}
	}
}
