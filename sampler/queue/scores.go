package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/score"
)

// DefaultScoresPrefix is the default scoring.queue.scores_subject_prefix.
const DefaultScoresPrefix = "ragwatch.scores"

// SubjectToken turns a service name into one subject token: characters other than letters,
// digits, '-' and '_' become '_', "" becomes "unknown", and names are cut at 128 bytes.
func SubjectToken(service string) string {
	if service == "" {
		return "unknown"
	}
	if len(service) > 128 {
		service = service[:128]
	}
	b := []byte(service)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ScoresSubject returns <prefix>.<service token>.
func ScoresSubject(prefix, service string) string {
	return prefix + "." + SubjectToken(service)
}

// ScorePublisher is a score.Consumer that publishes every result as one JSON message on
// <prefix>.<service>. Core NATS, not JetStream: results are a live feed; the durable part is
// the record queue.
type ScorePublisher struct {
	nc     *nats.Conn
	prefix string
}

var _ score.Consumer = (*ScorePublisher)(nil)

// NewScorePublisher returns a publisher of results under prefix (e.g. "ragwatch.scores").
func NewScorePublisher(nc *nats.Conn, prefix string) *ScorePublisher {
	if prefix == "" {
		prefix = DefaultScoresPrefix
	}
	return &ScorePublisher{nc: nc, prefix: prefix}
}

// ConsumeScores implements score.Consumer.
func (p *ScorePublisher) ConsumeScores(_ context.Context, results []score.Result) error {
	for i := range results {
		data, err := json.Marshal(results[i])
		if err != nil {
			return fmt.Errorf("encode score result: %w", err)
		}
		if err := p.nc.Publish(ScoresSubject(p.prefix, results[i].Service), data); err != nil {
			return fmt.Errorf("publish score result: %w", err)
		}
	}
	return nil
}

// SubscribeScores decodes the results published under prefix (every service) and hands each
// to consumer. The alert engine uses it whether scoring ran in this process or in worker pods,
// so there is one code path. Invalid messages are counted (ragwatch_scores_invalid_total) and
// logged, never passed on. Unsubscribe (or Drain) the returned subscription to stop.
func SubscribeScores(nc *nats.Conn, prefix string, consumer score.Consumer, reg prometheus.Registerer, logger *slog.Logger) (*nats.Subscription, error) {
	if prefix == "" {
		prefix = DefaultScoresPrefix
	}
	if logger == nil {
		logger = slog.Default()
	}
	m := NewMetrics(reg)
	sub, err := nc.Subscribe(prefix+".>", func(msg *nats.Msg) {
		var r score.Result
		if err := decodeResult(msg.Data, &r); err != nil {
			m.InvalidScores.Inc()
			logger.Warn("invalid score result", "subject", msg.Subject, "err", err)
			return
		}
		if err := consumer.ConsumeScores(context.Background(), []score.Result{r}); err != nil {
			logger.Warn("score consumer failed", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s.>: %w", prefix, err)
	}
	// Results arrive in bursts (one per metric); allow a deep backlog before the slow-consumer cut.
	if err := sub.SetPendingLimits(100000, 64<<20); err != nil {
		return nil, errors.Join(err, sub.Unsubscribe())
	}
	return sub, nil
}

func decodeResult(data []byte, r *score.Result) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(r); err != nil {
		return err
	}
	switch {
	case r.TraceID == "":
		return fmt.Errorf("trace_id is required")
	case r.Metric == "":
		return fmt.Errorf("metric is required")
	case !(r.Value >= 0 && r.Value <= 1):
		return fmt.Errorf("value %v is outside [0, 1]", r.Value)
	case r.Weight < 0:
		return fmt.Errorf("weight %v is negative", r.Weight)
	}
	return nil
}
