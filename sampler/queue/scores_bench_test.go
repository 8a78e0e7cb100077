package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// BenchmarkScoresLoopback measures the scores loop-back of one process: a worker's results for
// a record published on ragwatch.scores.<service>, routed through the embedded server, decoded,
// checked and handed to the consumer. One op is one record of six results (the builtin
// scorer's answer metrics), so ns/op is ns per record; cpu-ns/record (on Unix) is the CPU
// time the process, client and embedded server, spent per record: steadier than ns/op on a
// busy host.
func BenchmarkScoresLoopback(b *testing.B) {
	s := testutil.RunJetStream(b)
	nc, _ := testutil.Connect(b, s)
	var seen atomic.Int64
	sub, err := SubscribeScores(nc, "", score.ConsumerFunc(func(_ context.Context, rs []score.Result) error {
		seen.Add(int64(len(rs)))
		return nil
	}), ScoreChecks{MaxWeight: func() float64 { return 100 }}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	pub := NewScorePublisher(nc, "")
	metrics := []string{score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision,
		score.ContextRecall, score.CitationPrecision, score.CitationRecall}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	record := func(i int) []score.Result {
		rs := make([]score.Result, len(metrics))
		for j, m := range metrics {
			rs[j] = score.Result{TraceID: fmt.Sprintf("%032x", i), SpanID: fmt.Sprintf("%016x", i), Service: "checkout",
				Metric: m, Value: float64(j) / 8, Weight: 20, Scorer: "builtin", Time: now}
		}
		return rs
	}
	// Build the inputs first so the loop measures the loop-back only.
	const distinct = 1024
	in := make([][]score.Result, distinct)
	for i := range in {
		in[i] = record(i + 1) // an all-zero trace id is invalid
	}
	// Keep the subscriber within a window of the publisher, as a steady scoring rate does,
	// rather than past its pending limit (where the server would cut it as a slow consumer).
	const window = 2048
	waitFor := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); seen.Load() < n; {
			if time.Now().After(deadline) {
				b.Fatalf("consumer saw %d of %d results", seen.Load(), n)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0, cpuOK := processCPU()
	b.ResetTimer()
	for i := range b.N {
		if err := pub.ConsumeScores(ctx, in[i%distinct]); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 && i >= window {
			waitFor(int64(i-window) * int64(len(metrics)))
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	waitFor(int64(b.N) * int64(len(metrics)))
	b.StopTimer()
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/record")
	}
	if got, want := seen.Load(), int64(b.N)*int64(len(metrics)); got != want {
		b.Fatalf("consumer saw %d results, want %d", got, want)
	}
}
