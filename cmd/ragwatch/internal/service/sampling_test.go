package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestSamplingAndScoringWired checks that records reach the sampler, in-process workers score
// them from the JetStream queue, and the results come back to the alert engine through
// ragwatch.scores.<service>, as they would from worker pods.
func TestSamplingAndScoringWired(t *testing.T) {
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 1}
scoring: {workers: 2, metrics: [mrr]}
slos:
  - {name: ranking, metric: mrr, alert_below: 0.9, min_samples: 5, window: 5m}
drift: {detectors: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a := startEnv(t, cfg).app
	ctx := context.Background()
	// The relevant document is ranked second: MRR 0.5 for every record.
	for i := 0; i < 8; i++ {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "q", Time: time.Now(),
			Documents: []record.Document{{ID: "a"}, {ID: "b"}}, Relevance: map[string]int{"b": 1}}
		if err := a.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (sampled, scored float64) {
		return testutil.Sum(t, a.Registry, "ragwatch_sampled_total", nil),
			testutil.Sum(t, a.Registry, "ragwatch_eval_score", map[string]string{"metric": "mrr"})
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "eight mrr scores and the ranking alert", func() error {
		sampled, scored := counts()
		out := a.Alerts.Evaluate(ctx)
		if scored == 8 && len(out) == 1 && out[0].Rule == "ranking" && out[0].Value == 0.5 {
			return nil
		}
		return fmt.Errorf("sampled %v, mrr scores %v (want 8 each); alerts %+v", sampled, scored, out)
	})
	sampled, scored := counts()
	if sampled != 8 || scored != 8 {
		t.Fatalf("sampled %v, mrr scores %v; want 8 each", sampled, scored)
	}
}
