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

// TestLabelsMeetScoresInTheEngine runs the label loop through the service: labelled records
// are sampled although sampling.rate is 0, scored by in-process workers, and their scores come
// back over NATS to the alert engine, which pairs them with the labels that rode on the records
// and with a label that arrived after its record (the LabelConsumer path).
func TestLabelsMeetScoresInTheEngine(t *testing.T) {
	cfg, err := config.Parse([]byte(`
receivers: {otlp: {grpc: {endpoint: ""}, http: {endpoint: ""}}}
http: {endpoint: "127.0.0.1:0", api_endpoint: ""}
sampling: {rate: 0}
scoring: {workers: 2, metrics: [faithfulness, answer_relevancy]}
drift: {detectors: []}
alerting:
  agreement: {min_samples: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.StoreDir = t.TempDir()
	cfg.NATS.Embedded.Endpoint = "127.0.0.1:-1"
	a := startEnv(t, cfg).app
	ctx := context.Background()
	answers := []string{"Paris is the capital of France [1].", "Lyon is the capital of France [1].", "Paris [1]."}
	for i := range 6 {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Time: time.Now(),
			Query: "What is the capital of France?", Answer: answers[i%3],
			Documents: []record.Document{{ID: "d1", Content: "Paris is the capital and largest city of France."}}}
		if i < 3 { // labelled before they arrive: sampled, whatever the rate
			r.Labels = &record.Label{Values: map[string]float64{"faithfulness": []float64{1, 0, 1}[i]}, Labeler: "ana"}
		}
		if err := a.Records.ConsumeRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pairs := func(metric string) float64 {
		return testutil.Sum(t, a.Registry, "ragwatch_judge_agreement_pairs", map[string]string{"metric": metric, "judge": "builtin"})
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "three labels paired with their scores", func() error {
		if n := pairs("faithfulness"); n != 3 {
			return fmt.Errorf("%v faithfulness pairs", n)
		}
		return nil
	})
	if n := testutil.Sum(t, a.Registry, "ragwatch_sampled_total", map[string]string{"reason": "labelled"}); n != 3 {
		t.Fatalf("sampled as labelled: %v, want 3", n)
	}
	if n := testutil.Sum(t, a.Registry, "ragwatch_sampled_total", nil); n != 3 {
		t.Fatalf("sampled: %v, want only the 3 labelled", n)
	}
	if testutil.Series(t, a.Registry, "ragwatch_judge_agreement", map[string]string{"metric": "faithfulness", "judge": "builtin", "statistic": "mae"}) == nil {
		t.Fatal("no MAE for three pairs")
	}
	// A label after its record went by: the tracker pairs it with the scores it kept.
	if err := a.Labels.ConsumeLabel(ctx, record.Label{TraceID: fmt.Sprintf("%032x", 1), Service: "chat",
		Values: map[string]float64{"answer_relevancy": 1}}); err != nil {
		t.Fatal(err)
	}
	if n := pairs("answer_relevancy"); n != 1 {
		t.Fatalf("late label: %v answer_relevancy pairs, want 1", n)
	}
}
