package sampler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

type fixedScorer struct{}

func (fixedScorer) Name() string { return "fixed" }
func (fixedScorer) Score(_ context.Context, r *record.Record) ([]score.Result, error) {
	v := 0.9
	if r.Service == "risky" {
		v = 0.3
	}
	return []score.Result{{Metric: "faithfulness", Value: v}}, nil
}

// The whole in-process path: records in, a rule-weighted consistent sample scored by
// in-process workers, results read back through the scores subjects with their weights.
func TestRuntimeEndToEnd(t *testing.T) {
	nc, js := testutil.Connect(t, testutil.RunJetStream(t))

	cfg := config.Default()
	cfg.Sampling.Rate = 0.25
	always := 1.0
	cfg.Sampling.Rules = []config.SamplingRule{{Name: "risky", Match: config.SamplingMatch{Services: []string{"risky"}}, Probability: &always}}
	cfg.Scoring.Workers = 2
	reg := prometheus.NewRegistry()
	quiet := slog.New(slog.DiscardHandler)

	var mu sync.Mutex
	var results []score.Result
	sub, err := queue.SubscribeScores(nc, "", score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, rs...)
		return nil
	}), queue.ScoreChecks{MaxWeight: func() float64 { return 4 }}, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	set := settingsFor(cfg, js, reg, quiet)
	set.Scorers = []score.Scorer{fixedScorer{}}
	rt := NewRuntime(set)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 400 records: every 5th is "risky" (scored 0.3, always sampled), the rest 0.9 at 25%.
	want := 0
	for i := 0; i < 400; i++ {
		svc := "chat"
		if i%5 == 0 {
			svc = "risky"
		}
		r := &record.Record{TraceID: fmt.Sprintf("%016x%016x", uint64(i)*0x9e3779b97f4a7c15, uint64(i+1)*0xbf58476d1ce4e5b9), Service: svc, Query: "q"}
		p := 0.25
		if svc == "risky" {
			p = 1
		}
		if decide.Sampled(r.TraceID, p) {
			want++
		}
		if err := rt.Stage.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, "every result", func() error {
		mu.Lock()
		n := len(results)
		mu.Unlock()
		if n > want {
			t.Fatalf("%d results, want %d", n, want)
		}
		if n < want {
			return fmt.Errorf("%d results, want %d", n, want)
		}
		return nil
	})
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var naive float64
	for _, r := range results {
		naive += r.Value
	}
	naive /= float64(len(results))
	var weighted decide.WeightedMean
	for _, r := range results {
		weighted.AddResult(r)
	}
	est, _ := weighted.Mean()
	// True mean: 0.2·0.3 + 0.8·0.9 = 0.78. Risky records are over-sampled 4x.
	if est < 0.74 || est > 0.82 {
		t.Fatalf("weighted mean %v, want about 0.78 (naive %v)", est, naive)
	}
	if naive > 0.7 {
		t.Fatalf("naive mean %v should be pulled down by over-sampling", naive)
	}
	t.Logf("%d scored; weighted %.3f naive %.3f (true 0.78)", len(results), est, naive)
}

// With scoring in worker pods, the sidecar's budget is charged from the results they publish,
// so sampling stops when the fleet has spent the day's budget.
func TestRuntimeBudgetFromWorkerPods(t *testing.T) {
	srv := testutil.RunJetStream(t)
	nc, js := testutil.Connect(t, srv)

	cfg := config.Default()
	cfg.Sampling.Rate = 1
	cfg.Sampling.Budget.USDPerDay = 1
	cfg.Scoring.Workers = 0 // worker pods score
	quiet := slog.New(slog.DiscardHandler)
	rt := NewRuntime(settingsFor(cfg, js, prometheus.NewRegistry(), quiet))
	if rt.Pool != nil {
		t.Fatal("a pool with scoring.workers 0")
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(context.Background())
	// The runtime subscribed on nc; a flush round trip makes sure the server has the
	// subscription before the pod publishes (core NATS drops messages nobody listens to).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// A worker pod publishes results that cost 0.6 each.
	podConn, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer podConn.Close()
	pod := queue.NewScorePublisher(podConn, "")
	spent := []score.Result{{TraceID: "t1", Service: "chat", Metric: "faithfulness", Value: 1, Weight: 1, CostUSD: 0.6}}
	if err := pod.ConsumeScores(context.Background(), spent); err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{TraceID: "000000000000000000ffffffffffffff", Service: "chat", Query: "q"}
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the budget to see the pod's spending", func() bool { return rt.Budget.Spent() >= 0.6 })
	if d := rt.Decider.Decide(rec, decide.Ingest); !d.Sample {
		t.Fatalf("0.6 of 1 spent: %+v", d)
	}
	spent[0].TraceID = "t2"
	_ = pod.ConsumeScores(context.Background(), spent)
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the budget to see the second result", func() bool { return rt.Budget.Spent() >= 1.2 })
	if d := rt.Decider.Decide(rec, decide.Ingest); d.Sample || d.Reason != decide.ReasonBudget {
		t.Fatalf("budget spent: %+v", d)
	}
}

// settingsFor is the Settings the service builds from cfg's sections, with one stream replica
// and a service set of 10.
func settingsFor(cfg *config.Config, js jetstream.JetStream, reg prometheus.Registerer, logger *slog.Logger) Settings {
	return Settings{
		Sampling: cfg.Sampling, Scoring: cfg.Scoring, Comparisons: cfg.Comparisons,
		Variants: cfg.Variants, VariantTTL: cfg.Signals.ServiceTTL,
		JS: js, Replicas: 1, Services: cardinality.NewServiceSet(10), Registerer: reg, Logger: logger,
	}
}
