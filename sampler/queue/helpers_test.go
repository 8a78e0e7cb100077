package queue

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
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

// publishBuffered offers recs to p before it starts, so that it finds them buffered (full
// batches), then starts and shuts it down: when it returns every record is stored or counted.
func publishBuffered(t *testing.T, p *Publisher, recs []*record.Record) {
	t.Helper()
	for _, r := range recs {
		if err := p.Offer(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// storedMsg is one message of a stream and the queued records it holds: itself, or a batch's.
type storedMsg struct {
	*jetstream.RawStreamMsg
	entries [][]byte
	batch   bool
}

// storedMsgs reads every message of the stream, splitting batches.
func storedMsgs(t *testing.T, js jetstream.JetStream, stream string) []storedMsg {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedMsg
	for seq := uint64(1); seq <= streamMsgs(t, js, stream); seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		sm := storedMsg{RawStreamMsg: m, entries: [][]byte{m.Data}, batch: IsBatch(m.Data)}
		if sm.batch {
			if sm.entries, err = SplitBatch(m.Data); err != nil {
				t.Fatalf("message %d: %v", seq, err)
			}
		}
		out = append(out, sm)
	}
	return out
}
