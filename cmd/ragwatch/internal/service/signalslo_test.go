package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestSignalSLOSeesWhatTheHistogramShows is issue 47's report as a new user would try it: an
// SLO on answer_tokens, 30 records posted with a 40-word answer and no token usage. The
// histogram ragwatch_answer_tokens shows 30 answers of 40 (the answer's words, the usage
// reporting none); the SLO must see the same 30 values and fire, with the same mean.
func TestSignalSLOSeesWhatTheHistogramShows(t *testing.T) {
	cfg, err := config.Parse([]byte(`
slos:
  - {name: long-answers, metric: answer_tokens, alert_above: 10, window: 1m, min_samples: 10, for: 0s, decision: mean}
drift: {detectors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	base := testConfig(t)
	cfg.NATS, cfg.Receivers, cfg.HTTP, cfg.Assembly = base.NATS, base.Receivers, base.HTTP, base.Assembly
	e := startEnv(t, cfg)

	answer := strings.TrimSpace(strings.Repeat("word ", 40))
	var recs []string
	for i := 0; i < 30; i++ {
		recs = append(recs, fmt.Sprintf(`{"trace_id":"%032x","service":"tokens-app","query":"q","answer":%q}`, i+1, answer))
	}
	resp, err := http.Post(e.base+"/api/v1/records", "application/json", strings.NewReader("["+strings.Join(recs, ",")+"]"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(body) != "{\"accepted\":30}\n" {
		t.Fatalf("POST = %d %s", resp.StatusCode, body)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "30 records", func() bool { return e.sink.len() == 30 })

	m := scrape(t, e.base)
	count, sum := m[`ragwatch_answer_tokens_count{service="tokens-app"}`], m[`ragwatch_answer_tokens_sum{service="tokens-app"}`]
	if count != 30 || sum != 30*40 {
		t.Fatalf("ragwatch_answer_tokens count %v sum %v, want 30 answers of 40", count, sum)
	}

	e.app.Alerts.Evaluate(context.Background()) // the evaluation tick, without waiting for it
	resp, err = http.Get(e.base + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Alerts []struct {
			Rule   string  `json:"rule"`
			Status string  `json:"status"`
			Metric string  `json:"metric"`
			Value  float64 `json:"value"`
			N      int64   `json:"n"`
		} `json:"alerts"`
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 1 {
		t.Fatalf("GET /api/v1/alerts = %+v, want the long-answers SLO firing", got)
	}
	a := got.Alerts[0]
	if a.Rule != "long-answers" || a.Status != "firing" || a.Metric != "answer_tokens" || a.N != int64(count) || !near(a.Value, sum/count) {
		t.Fatalf("alert %+v, want long-answers firing on %v values of mean %v (what ragwatch_answer_tokens shows)", a, count, sum/count)
	}
}
