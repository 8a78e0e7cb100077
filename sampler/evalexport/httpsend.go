package evalexport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// poster sends JSON requests to one HTTP API and retries what may succeed later: network
// errors, 429 and 5xx, with exponential backoff (and the server's Retry-After, capped), for up
// to retryFor, checking the context before each attempt. Errors name the status, never the
// URL (it may hold a key) or the body.
type poster struct {
	dest     string
	client   *http.Client
	timeout  time.Duration
	retryFor time.Duration
	header   func(http.Header) // adds the credentials
	retries  prometheus.Counter
	// backoff is the first wait; tests shorten it.
	backoff time.Duration
}

const (
	maxBackoff    = 5 * time.Second
	maxRetryAfter = 30 * time.Second
	maxReplyBytes = 64 << 10
)

func newPoster(dest string, timeout, retryFor time.Duration, header func(http.Header), m *Metrics) *poster {
	return &poster{
		dest: dest, client: &http.Client{}, timeout: timeout, retryFor: retryFor, header: header,
		retries: m.Retries.WithLabelValues(dest), backoff: 500 * time.Millisecond,
	}
}

// errPermanent marks a reply that retrying will not change (4xx but 429).
var errPermanent = errors.New("rejected")

// post sends body to url until it is accepted (2xx), retrying as above.
func (p *poster) post(ctx context.Context, to string, body []byte) error {
	deadline := time.Now().Add(p.retryFor)
	wait := p.backoff
	for {
		after, err := p.once(ctx, to, body)
		if err == nil {
			return nil
		}
		if errors.Is(err, errPermanent) || ctx.Err() != nil {
			return err
		}
		if after > wait {
			wait = min(after, maxRetryAfter)
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (gave up after retrying for %s)", err, p.retryFor)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (stopped while waiting to retry)", err)
		}
		p.retries.Inc()
		wait = min(wait*2, maxBackoff)
	}
}

// once makes one attempt; it returns the server's Retry-After for a retryable reply.
func (p *poster) once(ctx context.Context, to string, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%s: build request: %w", p.dest, errPermanent)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ragwatch")
	p.header(req.Header)
	resp, err := p.client.Do(req)
	if err != nil {
		// The *url.Error would print the URL; keep only what failed.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("%s: request failed: %v", p.dest, redactErr(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReplyBytes))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return retryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("%s: HTTP %d", p.dest, resp.StatusCode)
	}
	return 0, fmt.Errorf("%s: HTTP %d: %w", p.dest, resp.StatusCode, errPermanent)
}

// redactErr keeps a network error's text but not a URL it may quote.
func redactErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, "://"); i >= 0 {
		return "connection error"
	}
	return s
}

func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// joinURL appends path to a base URL that may end in "/".
func joinURL(base, path string) string { return strings.TrimRight(base, "/") + path }

// evaluationID is a stable id of an evaluation: its record, metric, scorer and kind. A
// destination that upserts by id keeps one copy when a batch is sent again; a human label
// has its own id, so it stands next to the judge's score.
func evaluationID(ev *Evaluation) string {
	h := sha256.New()
	for _, s := range []string{ev.TraceID, ev.SpanID, ev.Name, ev.Scorer, ev.Kind} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "ragwatch-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// metadata is what ragwatch adds to an evaluation besides name, value and explanation.
func metadata(ev *Evaluation) map[string]any {
	m := map[string]any{"scorer": ev.Scorer, "evaluator_kind": ev.Kind, "weight": ev.Weight}
	for k, v := range map[string]string{
		"model": ev.Model, "method": ev.Method, "judge_version": ev.JudgeVersion,
		"service": ev.Service, "variant": ev.Variant, "comparison": ev.Comparison, "response_id": ev.ResponseID,
	} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}
