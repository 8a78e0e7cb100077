package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(runKillChild(dir)) // the process TestProcessKilled kills with SIGKILL
	}
	if url := os.Getenv(workerChildEnv); url != "" {
		os.Exit(runWorkerChild(url, os.Getenv(workerChildOut))) // one of TestTwoWorkerProcesses' workers
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.DiscardHandler)

// testRuntime keeps waits short: a killed worker's records come back after one second.
func testRuntime(workers int) config.ScoringRuntime {
	rt := config.Default().Scoring.ScoringRuntime
	rt.Workers = workers
	rt.ScoreTimeout = 900 * time.Millisecond
	rt.Queue.AckWait = time.Second
	rt.Queue.MaxDeliver = 3
	rt.Queue.Backoff = []time.Duration{20 * time.Millisecond}
	rt.Queue.BatchRecords = 1 // a record a message; batch_test.go runs batches
	return rt
}

func testOptions(reg prometheus.Registerer) Options {
	return Options{Registerer: reg, Logger: quiet, FetchWait: 200 * time.Millisecond, DepthInterval: 20 * time.Millisecond}
}

// enqueue publishes n records through the real publisher and waits until the stream holds them.
func enqueue(t *testing.T, js jetstream.JetStream, cfg config.ScoringQueue, n int, p float64) []string {
	t.Helper()
	keys := publish(t, js, cfg, 0, n, p)
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "records in the stream", func() bool { return streamMsgs(js, cfg.Stream) == uint64(n) })
	return keys
}

// publish sets the stream and consumer up (queue.Setup) and publishes records from+1 to from+n
// (trace ids in hex) through the real publisher, without waiting for the stream to hold them.
func publish(t *testing.T, js jetstream.JetStream, cfg config.ScoringQueue, from, n int, p float64) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := queue.Setup(ctx, js, cfg, 1); err != nil {
		t.Fatal(err)
	}
	pub := queue.NewPublisher(js, cfg, n, prometheus.NewRegistry(), quiet)
	if err := pub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		r := &record.Record{TraceID: fmt.Sprintf("%032x", from+i+1), Service: "chat", Query: "q", Answer: "a",
			Turn:     i % 7, // 0 (unknown) to 6: every turn bucket
			Sampling: &record.Sampling{Probability: p, Reason: "rate"}}
		keys[i] = r.Key()
		if err := pub.Offer(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return keys
}

// deadLetterMsg returns message seq of the dead-letter stream.
func deadLetterMsg(t *testing.T, js jetstream.JetStream, cfg config.ScoringQueue, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	st, err := js.Stream(context.Background(), cfg.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func streamMsgs(js jetstream.JetStream, name string) uint64 {
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// funcScorer is a test scorer: score decides per record.
type funcScorer struct {
	name  string
	score func(ctx context.Context, r *record.Record) ([]score.Result, error)
}

func (s funcScorer) Name() string { return s.name }
func (s funcScorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	return s.score(ctx, r)
}

// okScorer scores every record 0.5 on "faithfulness".
var okScorer = funcScorer{name: "test", score: func(context.Context, *record.Record) ([]score.Result, error) {
	return []score.Result{{Metric: "faithfulness", Value: 0.5}}, nil
}}

var errBackend = errors.New("backend down")

// tally counts results by record key.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
	all    []score.Result
}

func newTally() *tally { return &tally{counts: map[string]int{}} }

func (t *tally) ConsumeScores(_ context.Context, rs []score.Result) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		key := r.TraceID
		if r.SpanID != "" {
			key += "/" + r.SpanID
		}
		t.counts[key]++
		t.all = append(t.all, r)
	}
	return nil
}

func (t *tally) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.counts)
}

func (t *tally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.counts))
	for k, v := range t.counts {
		out[k] = v
	}
	return out
}
