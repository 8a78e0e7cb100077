package synthrec

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/join"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// Records returns n records of synth's default traffic (seed seed) as the sampler offers them
// to the scoring queue: each turn's trace assembled (collector/assemble), joined to its
// session with the default conversation bounds (collector/join: turn and history) and marked
// as sampled by sampling.rate at 0.1. The turns start one millisecond apart from a fixed UTC
// time, so the records are the same on every call.
func Records(seed uint64, n int) ([]*record.Record, error) {
	var out []*record.Record
	conv := config.Default().Conversation
	j, err := join.New(join.Settings{
		Next: record.ConsumerFunc(func(_ context.Context, r *record.Record) error {
			out = append(out, r)
			return nil
		}),
		NextFeedback:    record.FeedbackConsumerFunc(func(context.Context, record.Feedback) error { return nil }),
		SessionTTL:      conv.SessionTTL,
		MaxSessions:     conv.MaxSessions,
		MaxHistoryTurns: conv.MaxHistoryTurns,
		MaxHistoryBytes: conv.MaxHistoryBytes,
	})
	if err != nil {
		return nil, err
	}
	gen := synth.New(synth.Options{Seed: seed})
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	var spans []span.Span
	for i := range n {
		turn := gen.Next(start.Add(time.Duration(i) * time.Millisecond))
		td := ptrace.NewTraces()
		synth.AppendTraces(td, &turn)
		spans = span.FromTraces(td, spans[:0], nil)
		res := assemble.Assemble(spans)
		if len(res.Records) != 1 {
			return nil, fmt.Errorf("turn %d assembled into %d records", i, len(res.Records))
		}
		if err := j.ConsumeRecord(ctx, res.Records[0]); err != nil {
			return nil, err
		}
	}
	for _, r := range out {
		r.Sampling = &record.Sampling{Probability: 0.1, Reason: "rate"}
	}
	return out, nil
}
