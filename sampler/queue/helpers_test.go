package queue

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testQueueConfig() config.ScoringQueue {
	q := config.Default().Scoring.Queue
	q.AckWait = 2 * time.Second
	q.Backoff = []time.Duration{10 * time.Millisecond}
	return q
}
