package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/memlimit"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

func TestWorkerCommandScoresFromExternalNATS(t *testing.T) {
	srv := testutil.RunJetStream(t)
	nc, js := testutil.Connect(t, srv)

	// The sidecar's side: records queued on the cluster.
	qcfg := config.Default().Scoring.Queue
	if _, err := queue.Setup(context.Background(), js, qcfg, 1); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(js, qcfg, 10, prometheus.NewRegistry(), nil)
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		_ = pub.Offer(&record.Record{TraceID: fmt.Sprintf("%032x", i+1), Service: "chat", Query: "What is the capital of France?",
			Answer:    "Paris is the capital of France.",
			Documents: []record.Document{{ID: "a", Content: "Paris is the capital of France."}, {ID: "b"}}, Relevance: map[string]int{"b": 1},
			Sampling: &record.Sampling{Probability: 0.5, Reason: "rate"}})
	}
	if err := pub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]float64{}
	sub, err := queue.SubscribeScores(nc, "", score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			switch r.Metric {
			case "faithfulness":
				got[r.TraceID] = r.Weight
			case "mrr": // the sidecar's sampling stage computes retrieval metrics, never the pods
				got["retrieval from a pod"] = 1
			}
		}
		return nil
	}), queue.ScoreChecks{MaxWeight: func() float64 { return 2 }}, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	httpAddr := testutil.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "ragwatch.yaml")
	yaml := fmt.Sprintf("http: {endpoint: %q, api_endpoint: \"\"}\nnats: {url: %q}\nscoring: {workers: 2, retrieval_k: [1, 2]}\n", httpAddr, srv.ClientURL())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testutil.Buffer
	code := make(chan int, 1)
	go func() {
		code <- dispatch(ctx, []string{"worker", "-c", path, "--log-format", "json"}, io.Discard, &logs)
	}()

	testutil.CheckFor(t, 15*time.Second, 10*time.Millisecond, "five records scored", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 5 {
			return nil
		}
		return fmt.Errorf("scored %d of 5; logs:\n%s", len(got), logs.String())
	})
	for id, w := range got {
		if w != 2 { // sampled at 0.5
			t.Fatalf("%s: weight = %v, want 2", id, w)
		}
	}
	for _, p := range []string{"/readyz", "/metrics"} {
		resp, err := http.Get("http://" + httpAddr + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", p, resp.Status)
		}
		if p == "/metrics" && !strings.Contains(string(body), `ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"} 5`) {
			t.Fatalf("metrics lack the attempts:\n%s", body)
		}
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d; logs:\n%s", c, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("worker did not stop")
	}
	if !strings.Contains(logs.String(), `"msg":"ragwatch worker ready"`) {
		t.Fatalf("logs:\n%s", logs.String())
	}
	if _, err := memlimit.ReleaseExecutablePages(); err == nil &&
		!strings.Contains(logs.String(), `"msg":"released the executable's startup pages"`) {
		t.Errorf("no line on the startup pages released:\n%s", logs.String())
	}
}

func TestWorkerCommandNeedsNATSURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ragwatch.yaml")
	if err := os.WriteFile(path, []byte("scoring: {workers: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if c := dispatch(context.Background(), []string{"worker", "-c", path}, io.Discard, &stderr); c != 2 {
		t.Fatalf("exit %d", c)
	}
	if want := "ragwatch worker: `nats.url` is required"; !strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("stderr %q", stderr.String())
	}
}
