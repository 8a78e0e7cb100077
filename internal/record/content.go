package record

import (
	"context"

	"github.com/ragwatch/ragwatch/internal/truncate"
)

// Content is what a record's trace said about the turn after the record was assembled: the
// GenAI events that came as OTLP log records once their trace had gone (a gen_ai.choice or an
// operation-details event's output messages: the answer; user messages: the question and the
// conversation before it), read by the same convention readers as span events. It names its
// record as feedback joined after its record does: TraceID, and SpanID, Service and Variant of
// the record once the join has met it (the assembler sets SpanID to the event's span).
type Content struct {
	TraceID string
	SpanID  string
	Service string
	Variant string

	Query   string
	Answer  string
	History []Message
}

// Empty reports whether c carries nothing a record could take.
func (c *Content) Empty() bool { return c.Query == "" && c.Answer == "" && len(c.History) == 0 }

// MergeContent fills what r lacks from c, never overwriting what r has (what its spans gave
// came first and stays): the answer (and the citations parsed from it, Normalize) only when r
// has none, the question only when r has none, the history only when r has none. It reports
// whether r changed. r must be the caller's own copy.
func MergeContent(r *Record, c *Content) bool {
	changed := false
	if r.Answer == "" && c.Answer != "" {
		r.Answer = truncate.String(c.Answer, MaxTextBytes)
		if len(r.Citations) == 0 {
			r.Citations = parseCitations(r.Answer, r.Documents, !r.Elided)
		}
		changed = true
	}
	if r.Query == "" && c.Query != "" {
		r.Query = truncate.String(c.Query, MaxTextBytes)
		changed = true
	}
	if len(r.History) == 0 && len(c.History) > 0 {
		r.History = c.History
		changed = true
	}
	return changed
}

// ContentConsumer receives Content that arrived after its record went by.
type ContentConsumer interface {
	ConsumeContent(ctx context.Context, c Content) error
}

// ContentConsumerFunc adapts a function to ContentConsumer.
type ContentConsumerFunc func(ctx context.Context, c Content) error

// ConsumeContent calls fn.
func (fn ContentConsumerFunc) ConsumeContent(ctx context.Context, c Content) error { return fn(ctx, c) }
