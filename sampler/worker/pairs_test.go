package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

// flakyJudge fails its first calls, then prefers b, reporting what it spent.
type flakyJudge struct {
	fails int32
	calls atomic.Int32
}

func (*flakyJudge) Name() string { return "flaky" }
func (j *flakyJudge) JudgePair(_ context.Context, a, b *record.Record) (pairwise.Verdict, error) {
	v := pairwise.Verdict{Model: "judge-1", InputTokens: 100, OutputTokens: 10, CostUSD: 0.01}
	if j.calls.Add(1) <= j.fails {
		return v, errBackend
	}
	if a.Variant != "v1" || b.Variant != "v2" {
		return v, nil // wrong orientation: no winner, and the test fails on the outcome
	}
	v.Winner, v.Outcome = pairwise.WinnerB, pairwise.Win
	return v, nil
}

func offerPair(t *testing.T, pub *queue.Publisher, p float64) {
	t.Helper()
	job := &queue.PairJob{Comparison: "rerank", Probability: p,
		A: record.Record{TraceID: "0000000000000000000000000000000a", Variant: "v1", Answer: "x"},
		B: record.Record{TraceID: "0000000000000000000000000000000b", Variant: "v2", Answer: "y"}}
	if err := pub.OfferPair(job); err != nil {
		t.Fatal(err)
	}
}

// A pair job whose judge fails is retried after the backoff like a record; its outcome is
// counted once, with its weight, and every attempt's spend is charged.
func TestPairJobRetriedThenCounted(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	rt := testRuntime(1)
	reg := prometheus.NewRegistry()
	judge := &flakyJudge{fails: 2}
	opts := testOptions(reg)
	opts.PairJudge = judge
	results := newTally()
	pool := New(js, rt, nil, results, opts)
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer pool.Shutdown(context.Background())
	pub := queue.NewPublisher(js, rt.Queue, 4, reg, quiet)
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	offerPair(t, pub, 0.25)
	if err := pub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "pair counted", func() bool {
		return testutil.Sum(t, reg, "ragwatch_pairwise_total", map[string]string{"comparison": "rerank", "outcome": "win"}) == 1
	})
	attempts := func(outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_scoring_attempts_total", map[string]string{"scorer": PairScorer, "outcome": outcome})
	}
	if attempts("error") != 2 || attempts("ok") != 1 || judge.calls.Load() != 3 {
		t.Fatalf("attempts error %v ok %v, calls %d", attempts("error"), attempts("ok"), judge.calls.Load())
	}
	if got := testutil.Sum(t, reg, "ragwatch_scoring_cost_usd_total", map[string]string{"model": "judge-1"}); got < 0.0299 || got > 0.0301 {
		t.Fatalf("cost %v, want 0.03 (three attempts)", got)
	}
	// Weight 1/0.25 = 4: one win, effective n 1.
	if r := pool.opts.Pairwise.Rates(); len(r) != 1 || r[0].Estimate != 1 || r[0].EffectiveN != 1 {
		t.Fatalf("rates %+v", r)
	}
	// The win is handed on once, as the candidate's pairwise_win_rate score, for SLOs.
	results.mu.Lock()
	got := append([]score.Result(nil), results.all...)
	results.mu.Unlock()
	if len(got) != 1 || got[0].Metric != score.PairwiseWinRate || got[0].Value != 1 || got[0].Weight != 4 ||
		got[0].TraceID != "0000000000000000000000000000000b" || got[0].Variant != "v2" || got[0].Scorer != PairScorer {
		t.Fatalf("results handed on: %+v", got)
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "stream empty", func() bool { return streamMsgs(js, rt.Queue.Stream) == 0 })
	// Acked once judged: not redelivered, judged again or dead-lettered.
	if dl := streamMsgs(js, rt.Queue.DeadLetterStream); dl != 0 || judge.calls.Load() != 3 || attempts("ok") != 1 {
		t.Fatalf("after the ack: %d dead letters, %d calls, %v ok attempts; want 0, 3, 1", dl, judge.calls.Load(), attempts("ok"))
	}
}

// A worker without a pairwise judge dead-letters pair jobs instead of dropping them.
func TestPairJobWithoutJudgeIsDeadLettered(t *testing.T) {
	_, js := testutil.Connect(t, testutil.RunJetStream(t))
	rt := testRuntime(1)
	reg := prometheus.NewRegistry()
	pool := New(js, rt, nil, nil, testOptions(reg))
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer pool.Shutdown(context.Background())
	pub := queue.NewPublisher(js, rt.Queue, 4, reg, quiet)
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	offerPair(t, pub, 1)
	if err := pub.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The counter goes up after the dead-letter publish and the ack.
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "dead-lettered", func() bool {
		return testutil.Sum(t, reg, "ragwatch_scoring_dead_letter_total", nil) == 1
	})
	if got := streamMsgs(js, rt.Queue.DeadLetterStream); got != 1 {
		t.Fatalf("dead-letter stream holds %d", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_pairwise_total", nil); got != 0 {
		t.Fatalf("pairs counted %v", got)
	}
}
