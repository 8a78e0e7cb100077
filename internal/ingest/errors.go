package ingest

import (
	"errors"
	"fmt"
)

// ErrOverloaded is returned (wrapped) by a consumer that cannot take more input right now: a
// full buffer or the memory limit. Receivers answer it with OTLP's retryable errors (gRPC
// RESOURCE_EXHAUSTED with RetryInfo, HTTP 429 with Retry-After) so that the sender backs off
// and retries instead of losing data.
var ErrOverloaded = errors.New("overloaded, retry later")

// PartialError is returned by a consumer that took a request but dropped some of its spans
// (for example spans of evicted traces). Receivers answer with OTLP partial success.
type PartialError struct {
	Rejected int64  // spans dropped
	Reason   string // why, for the client; no user content
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%d spans rejected: %s", e.Rejected, e.Reason)
}
