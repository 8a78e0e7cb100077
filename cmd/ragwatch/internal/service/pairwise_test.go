package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestPairwiseWiring hands App.Pairs (what the shadow-pair join feeds) a pair: the in-process
// workers judge it with pairs.judge and the outcome shows on /metrics and GET /api/v1/pairwise,
// and reaches an SLO on the candidate's pairwise_win_rate as one sample of value 1.
func TestPairwiseWiring(t *testing.T) {
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	cfg.Comparisons = []config.Comparison{{Name: "rerank", Baseline: "v1", Candidate: "v2", Metrics: []string{"faithfulness"},
		Margin: 0.02, Alpha: 0.05, MinSamples: 100, Severity: "ticket"}}
	slos, err := config.Parse([]byte("slos:\n  - {name: v2-wins, metric: pairwise_win_rate, variant: v2, alert_below: 0.45, min_samples: 20}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SLOs = slos.SLOs
	e := startEnv(t, cfg)
	if e.app.Pairs == nil {
		t.Fatal("App.Pairs is nil in run mode")
	}
	docs := []record.Document{{ID: "d1", Content: "The Eiffel Tower is 330 metres tall. It was completed in 1889."}}
	base := &record.Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Service: "shop", Variant: "v1", PairID: "p1",
		Query: "How tall is the Eiffel Tower?", Documents: docs, Answer: "The Eiffel Tower is 330 metres tall. Napoleon painted it gold in 1650."}
	cand := &record.Record{TraceID: "5bf92f3577b34da6a3ce929d0e0e4737", Service: "shop", Variant: "v2", PairID: "p1",
		Query: "How tall is the Eiffel Tower?", Documents: docs, Answer: "The Eiffel Tower is 330 metres tall."}
	if err := e.app.Pairs.ConsumePair(context.Background(), cand, base); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "pair judged", func() bool {
		return scrape(t, e.base)[`ragwatch_pairwise_total{comparison="rerank",outcome="win"}`] == 1
	})
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "the win in the SLO", func() bool {
		m := scrape(t, e.base)
		return m[`ragwatch_slo_samples_total{service="shop",slo="v2-wins"}`] == 1 && m[`ragwatch_slo_weighted_value_total{service="shop",slo="v2-wins"}`] == 1
	})
	resp, err := http.Get(e.base + "/api/v1/pairwise")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Comparisons []struct {
			Comparison string  `json:"comparison"`
			Wins       int     `json:"wins"`
			Rate       float64 `json:"win_rate"`
		} `json:"comparisons"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/pairwise: %d %v", resp.StatusCode, err)
	}
	if len(body.Comparisons) != 1 || body.Comparisons[0].Comparison != "rerank" || body.Comparisons[0].Wins != 1 || body.Comparisons[0].Rate != 1 {
		t.Fatalf("body %+v", body)
	}
}
