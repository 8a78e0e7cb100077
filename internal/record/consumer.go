package record

import (
	"context"
	"errors"
)

// Consumer is one stage of the pipeline. ConsumeRecord must not keep r after returning unless
// it copies it: stages share the record and must treat it as read-only.
type Consumer interface {
	ConsumeRecord(ctx context.Context, r *Record) error
}

// HandoffConsumer is a Consumer that can also be handed a record: with ConsumeHandoff the
// producer gives r up, neither reading nor keeping it afterwards, so the consumer may complete
// r in place where ConsumeRecord completes a copy. What the consumer passes on it passes on
// shared and read-only, as ever. A producer that made r and has no other use for it (the
// assembler) hands it over when its consumer takes handoffs; the OpenTelemetry Collector's
// receivers hand their data to the first consumer the same way.
type HandoffConsumer interface {
	Consumer
	ConsumeHandoff(ctx context.Context, r *Record) error
}

// ConsumerFunc adapts a function to Consumer.
type ConsumerFunc func(ctx context.Context, r *Record) error

// ConsumeRecord calls f.
func (f ConsumerFunc) ConsumeRecord(ctx context.Context, r *Record) error { return f(ctx, r) }

// Fanout hands each record to every consumer in order and joins their errors; one failing
// consumer does not stop the others.
type Fanout []Consumer

// ConsumeRecord implements Consumer.
func (f Fanout) ConsumeRecord(ctx context.Context, r *Record) error {
	var errs []error
	for _, c := range f {
		if err := c.ConsumeRecord(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Discard is a Consumer that drops every record.
var Discard Consumer = ConsumerFunc(func(context.Context, *Record) error { return nil })

var _ Consumer = Fanout(nil)

// FeedbackConsumer receives feedback on its own: feedback from NATS or the HTTP API, found in
// a trace without a turn, or joined after its record went by. f carries TraceID and, when
// known, SpanID and Service; a zero Time means when it was received. Feedback that arrives
// with its record rides on Record.Feedback instead and goes to the record Consumer.
type FeedbackConsumer interface {
	ConsumeFeedback(ctx context.Context, f Feedback) error
}

// FeedbackConsumerFunc adapts a function to FeedbackConsumer.
type FeedbackConsumerFunc func(ctx context.Context, f Feedback) error

// ConsumeFeedback calls fn.
func (fn FeedbackConsumerFunc) ConsumeFeedback(ctx context.Context, f Feedback) error {
	return fn(ctx, f)
}

// LabelConsumer receives human labels on their own: labels that arrived after their record
// went by, or whose record never arrived. Labels that arrive before their record ride on
// Record.Labels instead and go to the record Consumer.
type LabelConsumer interface {
	ConsumeLabel(ctx context.Context, l Label) error
}

// LabelConsumerFunc adapts a function to LabelConsumer.
type LabelConsumerFunc func(ctx context.Context, l Label) error

// ConsumeLabel calls fn.
func (fn LabelConsumerFunc) ConsumeLabel(ctx context.Context, l Label) error { return fn(ctx, l) }

// PairConsumer receives the two records of a shadow pair (same PairID) once both arrived:
// a is the one whose variant is the comparison's baseline when known, else the first to
// arrive. Like a Consumer it must not keep them without copying.
type PairConsumer interface {
	ConsumePair(ctx context.Context, a, b *Record) error
}

// PairConsumerFunc adapts a function to PairConsumer.
type PairConsumerFunc func(ctx context.Context, a, b *Record) error

// ConsumePair calls fn.
func (fn PairConsumerFunc) ConsumePair(ctx context.Context, a, b *Record) error { return fn(ctx, a, b) }
