package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
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

// ScoreChecks bound what a result read from the scores subjects may claim. Results arrive from
// outside the process (worker pods, or anyone allowed to publish there), so they are validated
// like any input before they can move an SLO.
type ScoreChecks struct {
	// MaxWeight returns the largest weight the sampler can give, 1 / its smallest inclusion
	// probability (decide.Decider.MaxWeight); nil or below 1 allows weight 1 only. Weight 0
	// (unset) means 1, as in the alert engine.
	MaxWeight func() float64
	// Ingest counts each rejected result in ragwatch_ingest_rejected_total{receiver="nats"};
	// nil counts it only in ragwatch_scores_invalid_total.
	Ingest *ingest.Metrics
}

func (c ScoreChecks) maxWeight() float64 {
	if c.MaxWeight == nil {
		return 1
	}
	return max(c.MaxWeight(), 1)
}

// SubscribeScores decodes the results published under prefix (every service) and hands each
// to consumer. The alert engine uses it whether scoring ran in this process or in worker pods,
// so there is one code path. Invalid messages (see checkResult) are counted
// (ragwatch_scores_invalid_total, and ragwatch_ingest_rejected_total by reason when
// checks.Ingest is set) and logged without their content, never passed on. Unsubscribe (or
// Drain) the returned subscription to stop.
func SubscribeScores(nc *nats.Conn, prefix string, consumer score.Consumer, checks ScoreChecks, reg prometheus.Registerer, logger *slog.Logger) (*nats.Subscription, error) {
	if prefix == "" {
		prefix = DefaultScoresPrefix
	}
	if logger == nil {
		logger = slog.Default()
	}
	m := NewMetrics(reg)
	sub, err := nc.Subscribe(prefix+".>", func(msg *nats.Msg) {
		var r score.Result
		if reason, err := decodeResult(msg.Data, &r, checks.maxWeight()); err != nil {
			m.InvalidScores.Inc()
			if checks.Ingest != nil {
				checks.Ingest.Rejected(ingest.ReceiverNATS, reason)
			}
			logger.Warn("invalid score result", "subject", msg.Subject, "reason", reason, "err", err)
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

// decodeResult decodes a result and checks it could come from a scorer of this deployment;
// otherwise it returns the ingest reason and the problem, without content of the result.
func decodeResult(data []byte, r *score.Result, maxWeight float64) (reason string, _ error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(r); err != nil {
		return ingest.ReasonMalformed, err
	}
	switch {
	case !wellFormedID(r.TraceID):
		return ingest.ReasonInvalid, fmt.Errorf("trace_id must be 1 to %d printable bytes, not an all-zero OTLP id", record.MaxIDLength)
	case r.SpanID != "" && !wellFormedID(r.SpanID):
		return ingest.ReasonInvalid, fmt.Errorf("span_id must be 1 to %d printable bytes, not an all-zero OTLP id", record.MaxIDLength)
	case len(r.Service) > record.MaxIDLength:
		return ingest.ReasonInvalid, fmt.Errorf("service is longer than %d bytes", record.MaxIDLength)
	case !score.KnownMetric(r.Metric):
		return ingest.ReasonUnknownMetric, errors.New("metric is not one a scorer produces")
	case !(r.Value >= 0 && r.Value <= 1):
		return ingest.ReasonValueRange, fmt.Errorf("value %v is outside [0, 1]", r.Value)
	case r.Weight != 0 && !(r.Weight >= 1 && r.Weight <= maxWeight*(1+1e-9)):
		return ingest.ReasonWeightRange, fmt.Errorf("weight %v is outside [1, %v] (1 / the smallest sampling probability)", r.Weight, maxWeight)
	}
	return "", nil
}

// wellFormedID accepts what a record's trace or span id may be (docs/record.md): 1 to
// record.MaxIDLength bytes of printable UTF-8, except an all-zero hex id, which OTLP defines as
// invalid.
func wellFormedID(id string) bool {
	if id == "" || len(id) > record.MaxIDLength || !utf8.ValidString(id) {
		return false
	}
	zero := true
	for _, c := range id {
		if !unicode.IsPrint(c) {
			return false
		}
		zero = zero && c == '0'
	}
	return !(zero && (len(id) == 32 || len(id) == 16))
}
