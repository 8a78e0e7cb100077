package service

import (
	"context"
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
	"github.com/ragwatch/ragwatch/sampler/ring"
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
	rg := ring.New(10, true)
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
