package builtin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
)

// Name is the scorer name in results.
const Name = "builtin"

// Options configure the builtin scorer. The zero value scores every metric at the default
// threshold.
type Options struct {
	// Threshold is the support a claim needs to count as supported (0: DefaultThreshold). The
	// citation metrics decide by the learned CitationModel instead (docs/scorer-quality.md).
	Threshold float64
	// Metrics limits the metrics scored (nil: all of MetricNames). Unknown names are rejected
	// by Validate and ignored by New.
	Metrics []string
	// Now stamps results (nil: time.Now).
	Now func() time.Time
}

// Validate reports options New would not honour.
func (o Options) Validate() error {
	if o.Threshold < 0 || o.Threshold > 1 {
		return fmt.Errorf("builtin scorer: threshold must be between 0 and 1, got %v", o.Threshold)
	}
	var unknown []string
	for _, m := range o.Metrics {
		if !slices.Contains(MetricNames, m) {
			unknown = append(unknown, m)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("builtin scorer: unknown metric(s) %s; it scores %s",
			strings.Join(unknown, ", "), strings.Join(MetricNames, ", "))
	}
	return nil
}

// Scorer is the builtin scorer. It is safe for concurrent use: it keeps no state per record.
// What it derives from a document's content alone is kept for the next records that retrieve
// the same document, in a cache shared by the process and bounded in bytes (doccache.go); the
// values do not depend on it.
type Scorer struct {
	threshold float64
	metrics   map[string]bool
	now       func() time.Time
}

var _ score.Scorer = (*Scorer)(nil)

// New returns a builtin scorer.
func New(opts Options) *Scorer {
	s := &Scorer{threshold: opts.Threshold, now: opts.Now, metrics: map[string]bool{}}
	if s.threshold <= 0 || s.threshold > 1 {
		s.threshold = DefaultThreshold
	}
	if s.now == nil {
		s.now = time.Now
	}
	want := opts.Metrics
	if want == nil {
		want = MetricNames
	}
	for _, m := range want {
		if slices.Contains(MetricNames, m) {
			s.metrics[m] = true
		}
	}
	s.metrics[score.RefusalCorrect] = s.metrics[score.AnswerRelevancy] // scored with it, for refusals
	return s
}

// Name implements score.Scorer.
func (s *Scorer) Name() string { return Name }

// Score implements score.Scorer: one result per metric that can be judged for r, in the order
// of MetricNames. Metrics that cannot be judged (no reference, no citations, no documents) are
// omitted.
func (s *Scorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("builtin scorer: nil record")
	}
	j := newJudge(r.Documents, s.threshold)
	defer j.release()
	weight := 1.0
	if r.Sampling != nil && r.Sampling.Probability > 0 && r.Sampling.Probability <= 1 {
		weight = 1 / r.Sampling.Probability
	}
	now := s.now()
	out := make([]score.Result, 0, len(s.metrics)) // one array: a Result is large
	refusal := text.IsRefusal(r.Answer)
	add := func(metric string, f func() (float64, string, bool)) {
		if !s.metrics[metric] || (refusal && score.ClaimMetric(metric)) {
			return
		}
		v, why, ok := f()
		if !ok {
			return
		}
		out = append(out, score.Result{
			TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service,
			Metric: metric, Value: clamp01(v), Weight: weight, Scorer: Name,
			Explanation: why, Time: now,
		})
	}
	add(score.Faithfulness, func() (float64, string, bool) {
		// Calibrated so that below 0.5 is the decision "not faithful" (calibrate.go).
		v, why, ok := j.faithfulness(r.Answer)
		if !ok {
			return 0, "", false
		}
		return CalibrateFaithfulness(v), fmt.Sprintf("%s; raw support %.2f", why, v), true
	})
	q, _ := ResolveQuestion(r.Query, r.History) // a later turn's question, with what it refers to
	add(score.AnswerRelevancy, func() (float64, string, bool) { return j.answerRelevancy(q, r.Answer) })
	add(score.RefusalCorrect, func() (float64, string, bool) { return j.refusalCorrect(q, r.Answer) })
	add(score.ContextPrecision, func() (float64, string, bool) {
		return j.contextPrecision(r.Relevance, r.Answer, r.Reference)
	})
	add(score.ContextRecall, func() (float64, string, bool) { return j.contextRecall(r.Reference) })
	add(score.CitationPrecision, func() (float64, string, bool) { return j.citationPrecision(r.Citations) })
	add(score.CitationRecall, func() (float64, string, bool) { return j.citationRecall(r.Answer, r.Citations) })
	add(score.AnswerSimilarity, func() (float64, string, bool) { return AnswerSimilarity(r.Answer, r.Reference) })
	return out, nil
}
