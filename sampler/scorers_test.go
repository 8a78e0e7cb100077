package sampler

import (
	"context"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/collector/record"
	"github.com/ragwatch/ragwatch/config"
)

func TestScorersFromConfig(t *testing.T) {
	cfg := config.Default()
	ss, err := Scorers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].Name() != "builtin" || ss[1].Name() != "retrieval" {
		t.Fatalf("scorers %v", ss)
	}
	// Only the named retrieval metrics are kept.
	cfg.Scoring.Metrics = []string{"mrr", "ndcg@k"}
	ss, err = Scorers(cfg)
	if err != nil || len(ss) != 1 {
		t.Fatalf("scorers %v, %v", ss, err)
	}
	rec := &record.Record{TraceID: "t", Documents: []record.Document{{ID: "a"}, {ID: "b"}}, Relevance: map[string]int{"b": 1}}
	res, err := ss[0].Score(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range res {
		names = append(names, r.Metric)
	}
	if got := strings.Join(names, ","); got != "mrr,ndcg@1,ndcg@10,ndcg@3,ndcg@5" {
		t.Fatalf("metrics %s", got)
	}
	// An LLM backend is not silently skipped.
	cfg = config.Default()
	cfg.Scoring.Backend = config.BackendOpenAI
	if _, err := Scorers(cfg); err == nil || !strings.Contains(err.Error(), "openai backend") {
		t.Fatalf("err %v", err)
	}
}
