package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
	"github.com/ragwatch/ragwatch/sampler/recentscores"
)

// quotingScorer explains its verdict by quoting the answer, as LLM judges' reasoning does.
type quotingScorer struct{}

func (quotingScorer) Name() string { return "quoting" }
func (quotingScorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	return []score.Result{{TraceID: r.TraceID, Service: r.Service, Metric: "faithfulness", Value: 0.5,
		Explanation: "The answer says \"" + r.Answer + "\", which the documents do not support."}}, nil
}

// TestScoreMessagesAreRedacted scores a record whose answer carries personal data with a scorer
// that quotes it, publishes the results on NATS as the workers do, and checks the message on
// the wire holds redaction markers instead, counted per detector.
func TestScoreMessagesAreRedacted(t *testing.T) {
	nc, _ := testutil.Connect(t, testutil.RunServer(t))
	var mu sync.Mutex
	var msgs []string
	if _, err := nc.Subscribe("ragwatch.scores.>", func(m *nats.Msg) {
		mu.Lock()
		msgs = append(msgs, string(m.Data))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	reg := prometheus.NewRegistry()
	red, err := buildRedactor(config.Default(), reg)
	if err != nil || red == nil {
		t.Fatalf("redactor: %v %v", red, err)
	}
	scorers := redactScorers([]score.Scorer{quotingScorer{}}, red)
	answer := "Refund sent to jane.doe@example.com for card 5500 0000 0000 0004 from 198.51.100.23."
	res, err := scorers[0].Score(context.Background(), &record.Record{TraceID: "eeee0000000000000000000000000001", Service: "svc", Answer: answer})
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.NewScorePublisher(nc, "").ConsumeScores(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the score message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(msgs) == 1
	})
	got := msgs[0]
	for _, p := range []string{"jane.doe@example.com", "5500 0000 0000 0004", "198.51.100.23"} {
		if strings.Contains(got, p) {
			t.Errorf("score message carries %q: %s", p, got)
		}
	}
	want := `The answer says \"Refund sent to [REDACTED:email] for card [REDACTED:card] from [REDACTED:ip].\", which the documents do not support.`
	if !strings.Contains(got, want) {
		t.Fatalf("score message %s lacks %s", got, want)
	}
	wantMetrics := `
# HELP ragwatch_redactions_total Pieces of personal data replaced before text left the process, by detector.
# TYPE ragwatch_redactions_total counter
ragwatch_redactions_total{detector="card"} 1
ragwatch_redactions_total{detector="email"} 1
ragwatch_redactions_total{detector="ip"} 1
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(wantMetrics), "ragwatch_redactions_total"); err != nil {
		t.Fatal(err)
	}

	// Disabled: no redactor, scorers unchanged.
	off := config.Default()
	off.Redaction.Enabled = false
	if r, err := buildRedactor(off, prometheus.NewRegistry()); r != nil || err != nil {
		t.Fatalf("disabled redaction built %v, %v", r, err)
	}
}

// TestScoresAPIIsRedacted feeds the /api/v1/scores ring (content enabled) through the
// redacting wrapper with a record and an unredacted result from a worker pod, and checks the
// API answer holds markers, not the personal data; the record itself is left unchanged.
func TestScoresAPIIsRedacted(t *testing.T) {
	red, err := buildRedactor(config.Default(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rg := recentscores.New(10, true)
	in := redactRecent(rg, red)
	rec := &record.Record{TraceID: "ffff0000000000000000000000000001", Service: "svc",
		Query: "Is GB82 WEST 1234 5698 7654 32 my account?", Answer: "Yes, write to ops@bank.example."}
	if err := in.ConsumeRecord(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if rec.Query != "Is GB82 WEST 1234 5698 7654 32 my account?" {
		t.Fatalf("the shared record was changed: %q", rec.Query)
	}
	res := []score.Result{{TraceID: rec.TraceID, Service: "svc", Metric: "faithfulness", Value: 0.2, Scorer: "pod",
		Explanation: "claims ops@bank.example is the contact"}}
	if err := in.ConsumeScores(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	if res[0].Explanation != "claims ops@bank.example is the contact" {
		t.Fatal("the shared result was changed")
	}
	w := httptest.NewRecorder()
	rg.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/scores", nil))
	body := w.Body.String()
	for _, want := range []string{`"query":"Is [REDACTED:iban] my account?"`, `"answer":"Yes, write to [REDACTED:email]."`,
		`"explanation":"claims [REDACTED:email] is the contact"`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /api/v1/scores = %s, lacks %s", body, want)
		}
	}
}

// issue46Formats are the formats issue 46 saw reach an external judge, the NLI endpoint, the
// export and the score previews verbatim, with the part of each that must not go out.
var issue46Formats = []struct{ text, secret string }{
	{"call +14155550132", "4155550132"},
	{"or (415)5550132", "5550132"},
	{"card 4111.1111.1111.1111", "4111.1111.1111.1111"},
	{"card 5555\u00a05555\u00a05555\u00a04444", "5555\u00a05555"},
	{"card 4012\u20098888\u20098888\u20091881", "8888\u20098888"},
	{"card 4242  4242  4242  4242", "4242  4242"},
	{"card 6011\\n1111\\n1111\\n1117", "1111\\n1111"}, // a JSON-escaped newline in the request body
	{"card 2223/0031/2200/3222", "0031/2200"},
	{"card \uff14\uff11\uff11\uff11 \uff11\uff11\uff11\uff11 \uff11\uff11\uff11\uff11 \uff11\uff11\uff11\uff11", "\uff11\uff11\uff11\uff11 \uff11\uff11\uff11\uff11"},
	{"iban gb82 west 1234 5698 7654 32", "gb82 west"},
	{"iban DE89-3704-0044-0532-0130-00", "0044-0532"},
	{"mail josé.garcía@ejemplo.es", "josé.garcí"},
	{"mail jane(at)example.com", "jane(at)example"},
	{"key AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},
	{"aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	{"cvv 123 ok", "cvv 123"},
}

// TestIssue46FormatsNeverLeaveTheProcess runs a record holding every format of issue 46
// through the whole service: the prompt an OpenAI-protocol judge (an httptest server)
// receives, the export (GET /api/v1/export) and the score previews (GET /api/v1/scores with
// include_content) must hold none of them.
func TestIssue46FormatsNeverLeaveTheProcess(t *testing.T) {
	var parts []string
	for _, f := range issue46Formats {
		parts = append(parts, f.text)
	}
	pii := strings.Join(parts, "; ")
	judge := NewFakeJudge(t, func(string) string {
		// The judge quotes the answer in its reasoning, as judges do: the explanation goes
		// to NATS, the scores API and the export.
		var decoded string
		_ = json.Unmarshal([]byte(`"`+pii+`"`), &decoded)
		verdict, _ := json.Marshal(map[string]any{"reasoning": "it says " + decoded, "score": 4})
		return string(verdict)
	})
	t.Setenv("I46_JUDGE_KEY", "sk-test")
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
export: {enabled: true}
scoring:
  backend: openai
  metrics: [rubric_relevance]
  openai: {base_url: "` + judge.URL + `/v1/", model: judge-1, api_key_env: I46_JUDGE_KEY}
  recent: {include_content: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })

	// Apps often use the e-mail address as the user id, and a phone number as the session.
	body := `{"trace_id":"abab0000000000000000000000000046","service":"bank","user_id":"maria.rossi@azienda.it",` +
		`"session_id":"+393331234567","query":"Why was I charged twice? ` + pii +
		`","answer":"Refunded. ` + pii + `"}`
	base := "http://" + a.Addrs().HTTP
	resp, err := http.Post(base+"/api/v1/records", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var scores, export string
	testutil.Eventually(t, 15*time.Second, 20*time.Millisecond, "the judge call, the score and the export", func() bool {
		scores, export = get("/api/v1/scores"), get("/api/v1/export")
		return len(judge.Sent()) > 0 && strings.Contains(scores, "explanation") && strings.Contains(export, "abab0000000000000000000000000046")
	})
	sent := strings.Join(judge.Sent(), "\n")
	for _, id := range []string{"maria.rossi@azienda.it", "3331234567"} {
		if strings.Contains(export, id) {
			t.Errorf("GET /api/v1/export carries the user or session id %q:\n%s", id, export)
		}
	}
	for where, out := range map[string]string{"judge prompt": sent, "GET /api/v1/scores": scores, "GET /api/v1/export": export} {
		// JSON escapes non-ASCII as itself and the newline as \n: compare what was written.
		for _, f := range issue46Formats {
			if strings.Contains(out, f.secret) {
				t.Errorf("%s carries %q:\n%s", where, f.secret, out)
			}
		}
		if !strings.Contains(out, "[REDACTED:") {
			t.Errorf("%s holds no marker:\n%s", where, out)
		}
	}
	for _, m := range []string{"[REDACTED:phone]", "[REDACTED:card]", "[REDACTED:iban]", "[REDACTED:email]", "[REDACTED:secret]", "charged twice"} {
		if !strings.Contains(sent, m) {
			t.Errorf("the judge's prompt lacks %q:\n%s", m, sent)
		}
	}
}
