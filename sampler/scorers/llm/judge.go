package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/redact"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// Pricing is a backend's price in US dollars per million tokens.
type Pricing struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// Cost of the given token counts.
func (p Pricing) Cost(in, out int64) float64 {
	return (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
}

// JudgeOptions configures a Judge. Zero values take the defaults noted.
type JudgeOptions struct {
	Timeout        time.Duration // per attempt; default 60s
	MaxRetries     int           // retries after the first attempt on 429/5xx/network; default 0
	MaxConcurrency int           // calls in flight to this backend; default 4
	MaxTokens      int           // reply budget; default 1024
	Pricing        Pricing
	Metrics        *Metrics // nil records nothing
	Logger         *slog.Logger
	// Sleep waits between retries; tests inject a recorder. Default waits on a timer or ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Backoff is the wait before retry n (1-based) when the backend gave no Retry-After;
	// default 1s·2^(n-1) with jitter, capped at 30s.
	Backoff func(n int) time.Duration
	// Redact filters the record text of every prompt and every embeddings input before it
	// is sent, so personal data does not reach an external judge. nil applies every built-in detector of
	// internal/redact (e-mail, card, IBAN, IP, phone); pass the process's redactor's String
	// to count and configure it, or NoRedaction to send text unchanged.
	Redact func(string) string
}

// NoRedaction sends prompts unchanged (a judge inside the trust boundary, or
// redaction.enabled: false).
func NoRedaction(s string) string { return s }

// DefaultRedaction redacts s with every built-in detector of internal/redact, uncounted: what
// judges (JudgeOptions.Redact) and the NLI scorer use when given no redactor.
func DefaultRedaction(s string) string { return defaultRedactor.String(s) }

// defaultRedactor is what judges use without JudgeOptions.Redact.
var defaultRedactor = func() *redact.Redactor {
	r, err := redact.New(nil, nil, nil)
	if err != nil {
		panic(err) // built-in patterns only: cannot fail
	}
	return r
}()

// MaxRetryAfter caps how long a Retry-After may make the judge wait.
const MaxRetryAfter = 2 * time.Minute

// Judge asks one backend for JSON verdicts. It is safe for concurrent use; all scorers using
// the same backend must share one Judge so the concurrency cap holds.
type Judge struct {
	b    Backend
	opts JudgeOptions
	sem  chan struct{}
}

// NewJudge returns a Judge over b.
func NewJudge(b Backend, o JudgeOptions) *Judge {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 4
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Backoff == nil {
		o.Backoff = defaultBackoff
	}
	if o.Redact == nil {
		o.Redact = DefaultRedaction
	}
	return &Judge{b: b, opts: o, sem: make(chan struct{}, o.MaxConcurrency)}
}

// Backend returns the judge's backend.
func (j *Judge) Backend() Backend { return j.b }

// Pricing returns the judge's prices.
func (j *Judge) Pricing() Pricing { return j.opts.Pricing }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func defaultBackoff(n int) time.Duration {
	d := time.Second << (n - 1)
	if d > 30*time.Second || d <= 0 {
		d = 30 * time.Second
	}
	return d/2 + rand.N(d/2+1)
}

// Usage is the tokens and cost a question spent, summed over its attempts and repair.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

func (u *Usage) add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CostUSD += o.CostUSD
}

// OutcomeError is a failed question with its score outcome (score.Outcome*).
type OutcomeError struct {
	Outcome string
	Err     error
	// Unavailable is set when the backend still failed after its retries with a failure that
	// retrying may fix (429, 408, 409, 5xx, a network error, a timed-out attempt): the next
	// question would most likely fail the same way, so the Scorer asks no more for the record.
	Unavailable bool
}

// Error gives the cause; the outcome travels separately (score.MetricError prints it).
func (e *OutcomeError) Error() string { return e.Err.Error() }
func (e *OutcomeError) Unwrap() error { return e.Err }

// Outcome returns the score outcome of an error from Ask (score.OutcomeError when unknown).
func Outcome(err error) string {
	var oe *OutcomeError
	if errors.As(err, &oe) {
		return oe.Outcome
	}
	return score.OutcomeError
}

// Question is one structured request to the judge.
type Question struct {
	Metric string // for metrics labels
	System string
	User   string
	Schema Schema
	// Check validates the decoded reply beyond the schema (counts, indexes); nil accepts.
	Check func() error
	// TopLogprobs asks the backend for token log-probabilities (Request.TopLogprobs); AskLogprobs
	// returns those of the accepted reply.
	TopLogprobs int
}

// Ask sends q and decodes the validated JSON reply into out. A reply that is not JSON, breaks
// the schema or fails Check gets one repair request; a second failure is parse_error. The
// returned Usage counts every call made, also on error.
func (j *Judge) Ask(ctx context.Context, q Question, out any) (Usage, error) {
	u, _, err := j.AskLogprobs(ctx, q, out)
	return u, err
}

// AskLogprobs is Ask that also returns the token log-probabilities of the accepted reply, when
// q.TopLogprobs asked for them and the backend returned them (nil otherwise).
func (j *Judge) AskLogprobs(ctx context.Context, q Question, out any) (Usage, []TokenLogprob, error) {
	req := Request{System: q.System, Messages: []Message{{Role: "user", Content: j.opts.Redact(q.User)}},
		SchemaName: "verdict", Schema: q.Schema, MaxTokens: j.opts.MaxTokens, TopLogprobs: q.TopLogprobs}
	var total Usage
	for attempt := 0; attempt < 2; attempt++ {
		resp, u, err := j.call(ctx, req)
		total.add(u)
		if err != nil {
			j.opts.Metrics.outcome(j.b.Name(), q.Metric, Outcome(err))
			return total, nil, err
		}
		if resp.Refusal != "" {
			j.opts.Metrics.outcome(j.b.Name(), q.Metric, score.OutcomeRefused)
			return total, nil, &OutcomeError{Outcome: score.OutcomeRefused, Err: errors.New("the model refused to judge")}
		}
		perr := decode(resp.Text, q.Schema, out)
		if perr == nil && q.Check != nil {
			perr = q.Check()
		}
		if perr == nil {
			j.opts.Metrics.outcome(j.b.Name(), q.Metric, "ok")
			return total, resp.Logprobs, nil
		}
		j.opts.Logger.Debug("judge reply rejected", "backend", j.b.Name(), "metric", q.Metric, "attempt", attempt+1, "problem", perr.Error())
		if attempt == 1 {
			j.opts.Metrics.outcome(j.b.Name(), q.Metric, score.OutcomeParseError)
			return total, nil, &OutcomeError{Outcome: score.OutcomeParseError, Err: fmt.Errorf("invalid verdict after one repair: %w", perr)}
		}
		req.Messages = append(req.Messages,
			Message{Role: "assistant", Content: truncate.String(resp.Text, 4000)},
			Message{Role: "user", Content: "Your reply was rejected: " + perr.Error() +
				". Reply again with only one JSON object that matches the required schema, with no other text."})
	}
	panic("unreachable")
}

// decode parses the reply, tolerating a Markdown code fence around the JSON, and validates it.
func decode(text string, s Schema, out any) error {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "```") {
		text = strings.TrimPrefix(text, "```json")
		text = strings.TrimPrefix(text, "```")
		text = strings.TrimSuffix(strings.TrimSpace(text), "```")
	}
	var generic any
	if err := json.Unmarshal([]byte(text), &generic); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	if err := s.Validate(generic); err != nil {
		return fmt.Errorf("does not match the schema: %v", err)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		return fmt.Errorf("does not match the schema: %v", err)
	}
	return nil
}

// call sends one request under the concurrency cap, retrying 429/5xx/network failures and
// timeouts of an attempt, waiting Retry-After when the backend gave one.
func (j *Judge) call(ctx context.Context, req Request) (Response, Usage, error) {
	select {
	case j.sem <- struct{}{}:
	case <-ctx.Done():
		return Response{}, Usage{}, &OutcomeError{Outcome: score.OutcomeError, Err: ctx.Err()}
	}
	defer func() { <-j.sem }()
	var lastErr error
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return Response{}, Usage{}, &OutcomeError{Outcome: score.OutcomeError, Err: err}
		}
		actx, cancel := context.WithTimeout(ctx, j.opts.Timeout)
		start := time.Now()
		resp, err := j.b.Complete(actx, req)
		timedOut := err != nil && actx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		j.opts.Metrics.latency(j.b.Name(), time.Since(start))
		if err == nil {
			u := Usage{InputTokens: resp.InputTokens, OutputTokens: resp.OutputTokens,
				CostUSD: j.opts.Pricing.Cost(resp.InputTokens, resp.OutputTokens)}
			j.opts.Metrics.usage(j.b.Name(), u)
			return resp, u, nil
		}
		outcome := score.OutcomeError
		var ae *APIError
		switch {
		case timedOut:
			outcome = score.OutcomeTimeout
			err = fmt.Errorf("%s call timed out after %s", j.b.Name(), j.opts.Timeout)
		case errors.As(err, &ae) && ae.Status == 429:
			outcome = score.OutcomeRateLimited
		}
		retryable := timedOut || Retryable(err)
		lastErr = &OutcomeError{Outcome: outcome, Err: fmt.Errorf("%s: %w", j.b.Name(), err),
			Unavailable: retryable && ctx.Err() == nil}
		if ctx.Err() != nil || !retryable || n >= j.opts.MaxRetries {
			return Response{}, Usage{}, lastErr
		}
		wait := j.opts.Backoff(n + 1)
		if ae != nil && ae.RetryAfter > 0 {
			wait = min(ae.RetryAfter, MaxRetryAfter)
		}
		j.opts.Metrics.retry(j.b.Name())
		j.opts.Logger.Debug("retrying judge call", "backend", j.b.Name(), "attempt", n+1, "wait", wait, "error", err.Error())
		if err := j.opts.Sleep(ctx, wait); err != nil {
			return Response{}, Usage{}, lastErr
		}
	}
}

// Metrics are the judge's Prometheus metrics, shared by every Judge of a process.
type Metrics struct {
	requests *prometheus.CounterVec
	retries  *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the judge metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_judge_questions_total",
			Help: "Judge questions by backend, metric and outcome (ok, parse_error, refused, timeout, rate_limited, error)."},
			[]string{"backend", "metric", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_judge_retries_total",
			Help: "Judge calls repeated after a 429, 5xx, network error or timeout."}, []string{"backend"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_judge_tokens_total",
			Help: "Tokens spent by judge calls, by direction (input, output)."}, []string{"backend", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ragwatch_judge_cost_usd_total",
			Help: "Cost of judge calls in US dollars at the configured prices."}, []string{"backend"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ragwatch_judge_call_duration_seconds",
			Help: "Duration of one judge call attempt.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}, []string{"backend"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.retries, m.tokens, m.cost, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register judge metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) outcome(backend, metric, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(backend, metric, outcome).Inc()
	}
}

func (m *Metrics) retry(backend string) {
	if m != nil {
		m.retries.WithLabelValues(backend).Inc()
	}
}

func (m *Metrics) usage(backend string, u Usage) {
	if m != nil {
		m.tokens.WithLabelValues(backend, "input").Add(float64(u.InputTokens))
		m.tokens.WithLabelValues(backend, "output").Add(float64(u.OutputTokens))
		m.cost.WithLabelValues(backend).Add(u.CostUSD)
	}
}

func (m *Metrics) latency(backend string, d time.Duration) {
	if m != nil {
		m.duration.WithLabelValues(backend).Observe(d.Seconds())
	}
}
