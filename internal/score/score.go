package score

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
)

// Result is one metric's score for one record. It is published as JSON on
// ragwatch.scores.<service> and consumed by the alert engine, metrics and /api/v1/scores.
type Result struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id,omitempty"`
	Service string `json:"service"`
	// ResponseID is the scored record's record.Record.ResponseID: the provider's id of the
	// response that gave the answer ("" when the trace named none).
	ResponseID string `json:"response_id,omitempty"`
	// Variant is the scored record's variant ("" when it has none).
	Variant string `json:"variant,omitempty"`
	Metric  string `json:"metric"`
	// Value is in [0, 1]; higher is better.
	Value float64 `json:"value"`
	// Weight is 1/p, p being the record's inclusion probability (1 when not sampled).
	Weight       float64   `json:"weight"`
	Scorer       string    `json:"scorer"`
	Model        string    `json:"model,omitempty"`
	InputTokens  int64     `json:"input_tokens,omitempty"`
	OutputTokens int64     `json:"output_tokens,omitempty"`
	CostUSD      float64   `json:"cost_usd,omitempty"`
	Explanation  string    `json:"explanation,omitempty"`
	Time         time.Time `json:"time"`
	// Turn is the scored record's position in its conversation (record.Record.Turn); 0 when
	// unknown. SLOs with min_turn and the by-turn metrics read it.
	Turn int `json:"turn,omitempty"`
	// Method says how a judge's value was obtained: MethodLogprobs (the expectation over the
	// scale under the model's token probabilities) or MethodParsed (the integer it wrote).
	// Empty for scorers that are not rating judges.
	Method string `json:"method,omitempty"`
	// JudgeVersion identifies the definition of the judge that produced the result (a hash of
	// its criteria, steps, scale, inputs, examples and scope): results of a changed judge do
	// not mix with the old one's. Empty for scorers that are not judges.
	JudgeVersion string `json:"judge_version,omitempty"`
	// Raw is the builtin scorer's own value when a service's calibration map (fitted on its
	// team's labels, sampler/labelcal) changed Value; nil when no map was applied. Maps are
	// fitted on Raw, never on a calibrated Value, so a refit does not feed on itself.
	Raw *float64 `json:"raw,omitempty"`
	// Calibration is the version of the calibration map applied to Value (0: none).
	Calibration uint64 `json:"calibration,omitempty"`
}

// RawValue is the scorer's own value: Raw when a calibration map was applied, else Value.
func (r *Result) RawValue() float64 {
	if r.Raw != nil {
		return *r.Raw
	}
	return r.Value
}

// Values of Result.Method.
const (
	MethodLogprobs = "logprobs"
	MethodParsed   = "parsed"
)

// Scorer scores a record on one or more metrics. A scorer that cannot judge a metric for a
// record (no reference, no citations) omits it; it never invents a value. Errors are returned
// per metric in the Failure error type when some metrics succeeded.
type Scorer interface {
	Name() string
	Score(ctx context.Context, r *record.Record) ([]Result, error)
}

// Consumer receives score results (alert engine, metrics, NATS publisher, the scores ring).
type Consumer interface {
	ConsumeScores(ctx context.Context, results []Result) error
}

// ConsumerFunc adapts a function to Consumer.
type ConsumerFunc func(ctx context.Context, results []Result) error

// ConsumeScores calls f.
func (f ConsumerFunc) ConsumeScores(ctx context.Context, results []Result) error {
	return f(ctx, results)
}

// Fanout hands results to every consumer and joins their errors.
type Fanout []Consumer

// ConsumeScores implements Consumer.
func (f Fanout) ConsumeScores(ctx context.Context, results []Result) error {
	var errs []error
	for _, c := range f {
		if err := c.ConsumeScores(ctx, results); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Outcomes of a metric that could not be scored; bounded words fit for metric labels.
const (
	OutcomeParseError  = "parse_error"  // the judge's reply was not valid JSON for the schema, even after one repair
	OutcomeRefused     = "refused"      // the model refused to judge
	OutcomeTimeout     = "timeout"      // the call did not finish within the configured timeout
	OutcomeRateLimited = "rate_limited" // the backend kept answering 429
	OutcomeError       = "error"        // any other failure (5xx after retries, network, bad config)
)

// MetricError is one metric a scorer tried and could not score.
type MetricError struct {
	Metric  string
	Outcome string // one of the Outcome constants
	Err     error
}

func (e MetricError) Error() string {
	if e.Err == nil {
		return e.Metric + ": " + e.Outcome
	}
	return e.Metric + ": " + e.Outcome + ": " + e.Err.Error()
}

func (e MetricError) Unwrap() error { return e.Err }

// Failure is the error a Scorer returns next to the results it did produce, listing every
// metric it could not score. Find it with errors.As(err, &failure).
type Failure []MetricError

func (f Failure) Error() string {
	parts := make([]string, len(f))
	for i, e := range f {
		parts[i] = e.Error()
	}
	return "scoring failed for " + strings.Join(parts, "; ")
}

// Outcomes maps each failed metric to its outcome.
func (f Failure) Outcomes() map[string]string {
	out := make(map[string]string, len(f))
	for _, e := range f {
		out[e.Metric] = e.Outcome
	}
	return out
}
