package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ragwatch/ragwatch/config"
)

// Setup creates or updates the scoring stream (work-queue retention, file storage, bounded by
// max_bytes, refusing new records when full), the dead-letter stream (bounded by
// dead_letter_max_bytes, dropping the oldest when full) and the durable pull consumer, and
// returns the consumer. Sidecars and worker pods both call it; it is idempotent.
//
// The consumer's max_deliver is one more than scoring.queue.max_deliver: workers move a record
// to the dead-letter subject themselves after its last failed attempt, and the extra delivery
// catches records whose attempts never ended (a worker killed mid-score), which the next worker
// dead-letters without scoring.
func Setup(ctx context.Context, js jetstream.JetStream, cfg config.ScoringQueue, replicas int) (jetstream.Consumer, error) {
	if replicas <= 0 {
		replicas = 1
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "ragwatch: sampled records waiting to be scored",
		Subjects:    []string{cfg.Subject},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    cfg.MaxBytes,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DedupWindow,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create scoring stream %s: %w", cfg.Stream, err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.DeadLetterStream,
		Description: "ragwatch: records that failed scoring max_deliver times",
		Subjects:    []string{cfg.DeadLetterSubject},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.DeadLetterMaxAge,
		MaxBytes:    cfg.DeadLetterMaxBytes,
		Duplicates:  min(cfg.DedupWindow, cfg.DeadLetterMaxAge),
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create dead-letter stream %s: %w", cfg.DeadLetterStream, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "ragwatch scoring workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver + 1,
		MaxAckPending: 10000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("create scoring consumer %s: %w", cfg.Consumer, err)
	}
	return cons, nil
}

// PollDepth sets ragwatch_scoring_queue_depth from the stream's message count every interval
// until ctx ends. The publisher and the worker pool each run one; in one process both set the
// same value.
func PollDepth(ctx context.Context, js jetstream.JetStream, stream string, every time.Duration, m *Metrics) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, every)
		if s, err := js.Stream(pctx, stream); err == nil {
			if info, err := s.Info(pctx); err == nil {
				m.Depth.Set(float64(info.State.Msgs))
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
