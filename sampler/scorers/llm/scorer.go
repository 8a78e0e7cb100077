package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// MetricNames lists every metric a judge can score, in scoring order.
var MetricNames = []string{score.Faithfulness, score.AnswerRelevancy, score.ContextPrecision, score.ContextRecall, score.CitationPrecision,
	score.CitationRecall, score.AnswerSimilarity, score.RubricRelevance, score.RubricCompleteness, score.RubricAccuracy, score.RubricCitationQuality}

// ScorerOptions configures a Scorer.
type ScorerOptions struct {
	Metrics  []string // enabled metrics; empty enables all of MetricNames
	Embedder Embedder // optional: answer_relevancy and answer_similarity by embedding cosine
	// MaxDocuments and MaxTextBytes bound what goes into one prompt (defaults 20 and 8000).
	MaxDocuments int
	MaxTextBytes int
	Now          func() time.Time
	// OnlyJudges scores Judges alone, none of MetricNames (Metrics is ignored).
	OnlyJudges bool
	// Judges are G-Eval judges scored after Metrics (the `judges` config section); SetJudges
	// replaces them while running.
	Judges []JudgeDef
}

// Scorer scores records with an LLM judge.
type Scorer struct {
	j       *Judge
	metrics []string
	embed   Embedder
	maxDocs int
	maxText int
	now     func() time.Time
	// judges is replaced whole by SetJudges; a record is scored with the set it started with.
	judges     atomic.Pointer[judgeSet]
	stepsCache stepsCache
}

var _ score.Scorer = (*Scorer)(nil)

// NewScorer returns a Scorer asking j. Unknown metric names are an error.
func NewScorer(j *Judge, o ScorerOptions) (*Scorer, error) {
	ms := o.Metrics
	if len(ms) == 0 && !o.OnlyJudges {
		ms = MetricNames
	}
	if o.OnlyJudges {
		ms = nil
	}
	for _, m := range ms {
		if !slices.Contains(MetricNames, m) {
			return nil, fmt.Errorf("llm judge cannot score metric %q", m)
		}
	}
	s := &Scorer{j: j, metrics: ms, embed: o.Embedder, maxDocs: o.MaxDocuments, maxText: o.MaxTextBytes, now: o.Now}
	if s.maxDocs <= 0 {
		s.maxDocs = 20
	}
	if s.maxText <= 0 {
		s.maxText = 8000
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.SetJudges(o.Judges); err != nil {
		return nil, err
	}
	return s, nil
}

// SetJudges replaces the scorer's configured judges (a config reload). Records being scored
// finish with the judges they started with. Generated evaluation steps stay cached per judge
// version, so a judge whose definition did not change does not ask for them again.
func (s *Scorer) SetJudges(defs []JudgeDef) error {
	set := &judgeSet{}
	seen := map[string]bool{}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return err
		}
		if seen[d.Metric] || slices.Contains(MetricNames, d.Metric) {
			return fmt.Errorf("judge metric %q is defined twice", d.Metric)
		}
		seen[d.Metric] = true
		set.defs = append(set.defs, d)
		set.versions = append(set.versions, d.Version())
	}
	s.judges.Store(set)
	return nil
}

// JudgeVersions returns the configured judges' metric names and definition versions.
func (s *Scorer) JudgeVersions() map[string]string {
	set := s.judges.Load()
	out := make(map[string]string, len(set.defs))
	for i, d := range set.defs {
		out[d.Metric] = set.versions[i]
	}
	return out
}

// Name implements score.Scorer: the backend's name.
func (s *Scorer) Name() string { return s.j.b.Name() }

// verdict is one metric's outcome before it becomes a Result.
type verdict struct {
	value       float64
	explanation string
	skip        bool   // the record lacks what the metric needs: no result, no error
	method      string // score.Method* for a rating
	version     string // the judge's definition version, for a G-Eval judge
}

// Score implements score.Scorer. Metrics the record cannot support (no reference, no
// documents, no citations) are left out; failed metrics come back in a score.Failure. Once a
// question fails with the backend unavailable (its retries spent on 429, 5xx, network errors
// or timeouts), the record's remaining metrics are not asked: they fail with the same outcome.
func (s *Scorer) Score(ctx context.Context, r *record.Record) ([]score.Result, error) {
	var out []score.Result
	var failed score.Failure
	st := &recordState{}
	set := s.judges.Load()
	n := len(s.metrics) + len(set.defs)
	for i := 0; i < n; i++ {
		var m string
		var v verdict
		var err error
		u := &call{st: st}
		if i < len(s.metrics) {
			m = s.metrics[i]
			v, err = s.scoreMetric(ctx, m, r, u, st)
		} else {
			d, version := set.defs[i-len(s.metrics)], set.versions[i-len(s.metrics)]
			m = d.Metric
			v, err = s.geval(ctx, d, version, r, u)
			v.version = version
		}
		if err != nil {
			failed = append(failed, score.MetricError{Metric: m, Outcome: Outcome(err), Err: err})
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if v.skip {
			continue
		}
		if math.IsNaN(v.value) || v.value < 0 || v.value > 1 {
			failed = append(failed, score.MetricError{Metric: m, Outcome: score.OutcomeError,
				Err: fmt.Errorf("computed value %v outside [0, 1]", v.value)})
			continue
		}
		out = append(out, score.Result{
			TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Metric: m, Value: v.value,
			Weight: weight(r), Scorer: s.j.b.Name(), Model: s.j.b.Model(),
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD,
			Explanation: v.explanation, Time: s.now(), Method: v.method, JudgeVersion: v.version,
		})
	}
	if v, ok := st.conv.refusalCorrect(); ok {
		out = append(out, score.Result{
			TraceID: r.TraceID, SpanID: r.SpanID, Service: r.Service, Metric: score.RefusalCorrect, Value: v.value,
			Weight: weight(r), Scorer: s.j.b.Name(), Model: s.j.b.Model(), Explanation: v.explanation, Time: s.now(),
		})
	}
	if len(failed) > 0 {
		return out, failed
	}
	return out, nil
}

func weight(r *record.Record) float64 {
	if r.Sampling != nil && r.Sampling.Probability > 0 {
		return 1 / r.Sampling.Probability
	}
	return 1
}

// recordState holds judge answers shared by several metrics of one record: citation precision
// and recall ask the same question once (its tokens are charged to the first of them).
type recordState struct {
	citeDone bool
	supports []bool
	citeErr  error
	conv     convState // conversation.go: the standalone question and the refusal check
	// down is set once a question failed with the backend unavailable (OutcomeError.Unavailable):
	// the record's later questions are not sent and fail with it. A failed attempt's results are
	// thrown away (the worker scores the whole record again after its backoff), so asking the
	// other metrics of a failing judge only costs calls, and with a slow judge holds the worker
	// for every metric's retries instead of one's.
	down *OutcomeError
}

// call is what one metric's questions share: the usage they add up and the record's state.
type call struct {
	Usage
	st *recordState
}

// notAsked is the error for a question not sent because the backend was unavailable for an
// earlier one of the record, nil while it is not.
func (u *call) notAsked() error {
	d := u.st.down
	if d == nil {
		return nil
	}
	return &OutcomeError{Outcome: d.Outcome, Unavailable: true,
		Err: fmt.Errorf("not asked, the judge was unavailable for an earlier metric: %w", d.Err)}
}

func (s *Scorer) scoreMetric(ctx context.Context, m string, r *record.Record, u *call, st *recordState) (verdict, error) {
	if score.ClaimMetric(m) && st.conv.isRefusal(r) {
		return verdict{skip: true}, nil // a refusal makes no claim: refusal_correct judges it
	}
	switch m {
	case score.Faithfulness, score.CitationPrecision, score.CitationRecall:
	default: // metrics of the question: a later turn's is judged as rewritten to stand alone
		var err error
		if r, err = s.standalone(ctx, m, r, u); err != nil {
			return verdict{}, err
		}
	}
	switch m {
	case score.Faithfulness:
		return s.faithfulness(ctx, r, u)
	case score.AnswerRelevancy:
		return s.answerRelevancy(ctx, r, u)
	case score.ContextPrecision:
		return s.contextPrecision(ctx, r, u)
	case score.ContextRecall:
		return s.contextRecall(ctx, r, u)
	case score.CitationPrecision, score.CitationRecall:
		return s.citation(ctx, m, r, u, st)
	case score.AnswerSimilarity:
		return s.answerSimilarity(ctx, r, u)
	default:
		d, ok := BuiltinJudges[m]
		if !ok {
			return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("unknown metric %q", m)}
		}
		version := d.Version()
		v, err := s.geval(ctx, d, version, r, u)
		v.version = version
		return v, err
	}
}

// ask is Judge.Ask adding usage into u; once the backend was unavailable for the record it
// asks nothing and returns that failure.
func (s *Scorer) ask(ctx context.Context, u *call, q Question, out any) error {
	if err := u.notAsked(); err != nil {
		return err
	}
	used, err := s.j.Ask(ctx, q, out)
	u.add(used)
	s.markDown(u, err)
	return err
}

// markDown records a failure that makes the backend unavailable for the rest of the record.
func (s *Scorer) markDown(u *call, err error) {
	var oe *OutcomeError
	if errors.As(err, &oe) && oe.Unavailable {
		u.st.down = oe
	}
}

// cut keeps text within the prompt size. A text that is too long is redacted before it is
// cut: the judge redacts the whole prompt, but a number cut in two goes out in part, too short
// for its detector (twelve digits of a card). Redacting twice is harmless: markers match no
// detector.
func (s *Scorer) cut(text string) string {
	if len(text) <= s.maxText {
		return text
	}
	if text = s.j.opts.Redact(text); len(text) <= s.maxText {
		return text
	}
	i := s.maxText
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i] + " [truncated]"
}

func (s *Scorer) docs(r *record.Record) []record.Document {
	d := r.Documents
	if len(d) > s.maxDocs {
		d = d[:s.maxDocs]
	}
	return d
}

func (s *Scorer) docBlocks(docs []record.Document) string {
	var b strings.Builder
	for i, d := range docs {
		b.WriteString(block("DOCUMENT", docAttrs(i, d.ID), s.cut(d.Content)))
	}
	return b.String()
}

func verdictsSchema(n int, verdict map[string]any) Schema {
	return object(map[string]any{"verdicts": arrayOf(map[string]any(object(map[string]any{
		"index":   integer(0, n-1),
		"verdict": verdict,
		"reason":  str(),
	})), n, n)})
}

// indexed is one verdict of a list answered per item.
type indexed struct {
	Index   int    `json:"index"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Useful  bool   `json:"useful"`
}

// checkIndexes requires every index 0..n-1 exactly once.
func checkIndexes(vs []indexed, n int) error {
	seen := make([]bool, n)
	for _, v := range vs {
		if v.Index < 0 || v.Index >= n {
			return fmt.Errorf("index %d out of range", v.Index)
		}
		if seen[v.Index] {
			return fmt.Errorf("index %d given twice", v.Index)
		}
		seen[v.Index] = true
	}
	if len(vs) != n {
		return fmt.Errorf("%d verdicts for %d items", len(vs), n)
	}
	return nil
}
