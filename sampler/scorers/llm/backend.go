package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Message is one turn of a chat request.
type Message struct {
	Role    string // "user" or "assistant"
	Content string
}

// Request is one chat completion: temperature 0 and structured JSON output are implied.
type Request struct {
	System     string
	Messages   []Message
	SchemaName string
	Schema     Schema
	MaxTokens  int
	// TopLogprobs asks for the log-probabilities of the reply's tokens and of this many
	// alternatives at each position (OpenAI-compatible `logprobs`, `top_logprobs`); 0 asks for
	// none. Backends that cannot return them ignore it.
	TopLogprobs int
}

// Response is a backend's reply.
type Response struct {
	Text         string
	Refusal      string // non-empty when the model declined to answer
	InputTokens  int64
	OutputTokens int64
	// Logprobs are the reply's tokens with their log-probabilities, in order, when the request
	// asked for them and the backend returned them; nil otherwise.
	Logprobs []TokenLogprob
}

// TokenLogprob is one token of a reply, its log-probability and the most likely alternatives
// at its position (the token itself among them).
type TokenLogprob struct {
	Token   string
	Logprob float64
	Top     []TopLogprob
}

// TopLogprob is one alternative token at a position of a reply.
type TopLogprob struct {
	Token   string
	Logprob float64
}

// Backend sends one chat request to a model. Implementations turn HTTP error statuses into
// *APIError so the judge can decide whether to retry; they do no retrying themselves.
type Backend interface {
	Name() string  // "openai", "anthropic"; a bounded metric label
	Model() string // the model name reported in results
	Complete(ctx context.Context, req Request) (Response, error)
}

// Embedder turns texts into vectors (optional, OpenAI-compatible backends). The Scorer
// redacts the texts with the judge's JudgeOptions.Redact before calling Embed, as it does
// prompts.
type Embedder interface {
	Embed(ctx context.Context, texts []string) (vectors [][]float64, inputTokens int64, err error)
}

// APIError is an HTTP error status from a backend. Message must hold no secret and no prompt.
type APIError struct {
	Status     int
	RetryAfter time.Duration // from Retry-After / retry-after-ms; 0 when absent
	Message    string
	// Body is the reply's body, cut to 4 KiB, for the backend's own checks (which request
	// field the server rejected). Error does not print it.
	Body string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// Retryable reports whether a failed call may succeed when repeated: 408, 409, 429, 5xx and
// network errors (connection refused or reset, a dropped connection) are; other statuses, a
// cancelled context and replies that could not be understood are not.
func Retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout ||
			ae.Status == http.StatusConflict || ae.Status >= 500
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}

// ParseRetryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or an HTTP date).
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// ShortMessage trims a vendor error message for logs and errors.
func ShortMessage(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
