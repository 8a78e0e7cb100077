package synth

import (
	"context"
	"crypto/rand"

	"go.opentelemetry.io/otel/trace"
)

type traceIDKey struct{}

func withTraceID(ctx context.Context, id [16]byte) context.Context {
	return context.WithValue(ctx, traceIDKey{}, trace.TraceID(id))
}

// IDGenerator is an sdktrace.IDGenerator that uses the turn's trace id, so the generated
// traffic is reproducible by seed and feedback can name its trace.
type IDGenerator struct{}

// NewIDs implements sdktrace.IDGenerator.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(traceIDKey{}).(trace.TraceID)
	if !ok {
		_, _ = rand.Read(tid[:])
	}
	return tid, newSpanID()
}

// NewSpanID implements sdktrace.IDGenerator.
func (IDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}
