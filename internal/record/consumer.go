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
