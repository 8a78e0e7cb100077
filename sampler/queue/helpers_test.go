package queue

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/score"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testQueueConfig() config.ScoringQueue {
	q := config.Default().Scoring.Queue
	q.AckWait = 2 * time.Second
	q.Backoff = []time.Duration{10 * time.Millisecond}
	return q
}

// scoreSink is a score.Consumer keeping every call SubscribeScores makes, for tests to read.
type scoreSink struct {
	mu    sync.Mutex
	calls [][]score.Result
}

func (s *scoreSink) ConsumeScores(_ context.Context, rs []score.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, slices.Clone(rs))
	return nil
}

// received returns the calls so far, each with its results in order.
func (s *scoreSink) received() [][]score.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// results returns every result received so far, in order.
func (s *scoreSink) results() []score.Result {
	return slices.Concat(s.received()...)
}

// subscribeSink subscribes a new sink to the scores subjects with checks, counting in reg;
// the subscription ends with the test.
func subscribeSink(t testing.TB, nc *nats.Conn, checks ScoreChecks, reg prometheus.Registerer) *scoreSink {
	t.Helper()
	sink := &scoreSink{}
	sub, err := SubscribeScores(nc, "", sink, checks, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sink
}
