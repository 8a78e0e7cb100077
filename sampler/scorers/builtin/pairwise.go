package builtin

import (
	"context"
	"fmt"
	"math"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
)

// DefaultPairMargin is the difference below which the builtin pairwise rule calls a metric
// even.
const DefaultPairMargin = 0.05

// PairJudge is the builtin pairwise judge: it scores both answers with the builtin metrics and
// decides by the first of faithfulness, citation precision and answer relevancy that both
// answers have and that differs by more than Margin; the answer with the higher value wins,
// with confidence the difference. When none does, the pair is a tie. The rule is symmetric in
// a and b, so it needs no position swap: it never reports Inconsistent.
type PairJudge struct {
	// Margin is the difference a metric needs to decide (0: DefaultPairMargin).
	Margin    float64
	Threshold float64 // claim support threshold (0: DefaultThreshold)
}

var _ pairwise.Judge = PairJudge{}

// PairCriteria are the metrics the builtin pairwise rule compares, in order.
var PairCriteria = []string{score.Faithfulness, score.CitationPrecision, score.AnswerRelevancy}

// Name implements pairwise.Judge.
func (PairJudge) Name() string { return Name }

// JudgePair implements pairwise.Judge.
func (p PairJudge) JudgePair(ctx context.Context, a, b *record.Record) (pairwise.Verdict, error) {
	if err := ctx.Err(); err != nil {
		return pairwise.Verdict{}, err
	}
	if a == nil || b == nil {
		return pairwise.Verdict{}, fmt.Errorf("builtin pairwise judge: nil record")
	}
	margin := p.Margin
	if margin <= 0 {
		margin = DefaultPairMargin
	}
	threshold := p.Threshold
	if threshold <= 0 || threshold > 1 {
		threshold = DefaultThreshold
	}
	ja, jb := newJudge(a.Documents, threshold), newJudge(b.Documents, threshold)
	values := func(j *judge, r *record.Record) map[string]float64 {
		out := map[string]float64{}
		if v, _, ok := j.faithfulness(r.Answer); ok {
			out[score.Faithfulness] = v
		}
		if v, _, ok := j.citationPrecision(r.Citations); ok {
			out[score.CitationPrecision] = v
		}
		if v, _, ok := j.answerRelevancy(r.Query, r.Answer); ok {
			out[score.AnswerRelevancy] = v
		}
		return out
	}
	va, vb := values(ja, a), values(jb, b)
	ja.release()
	jb.release()
	v := pairwise.Verdict{Winner: pairwise.WinnerTie, Outcome: pairwise.Tie, Judge: Name}
	for _, m := range PairCriteria {
		x, okA := va[m]
		y, okB := vb[m]
		if !okA || !okB {
			continue
		}
		d := y - x
		if math.Abs(d) <= margin {
			continue
		}
		v.Winner = pairwise.WinnerB
		if d < 0 {
			v.Winner = pairwise.WinnerA
		}
		v.Outcome = pairwise.OutcomeOf(v.Winner)
		v.Confidence = math.Min(1, math.Abs(d))
		v.Reasoning = fmt.Sprintf("%s %.3f (a) vs %.3f (b): %s is higher by more than %.2f", m, x, y, v.Winner, margin)
		return v, nil
	}
	v.Reasoning = fmt.Sprintf("no criterion (%s) both answers have differs by more than %.2f", criteriaList(), margin)
	return v, nil
}

func criteriaList() string {
	s := ""
	for i, m := range PairCriteria {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	return s
}
