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
// decides by the first of faithfulness, citation precision, answer relevancy and grounded claims
// (PairGroundedClaims) that both answers have and that differs by more than Margin; the answer with the higher value wins,
// with confidence the difference. When none does, the pair is a tie. The rule is symmetric in
// a and b, so it needs no position swap: it never reports Inconsistent.
type PairJudge struct {
	// Margin is the difference a metric needs to decide (0: DefaultPairMargin).
	Margin    float64
	Threshold float64 // claim support threshold (0: DefaultThreshold)
}

var _ pairwise.Judge = PairJudge{}

// PairGroundedClaims is the pairwise rule's last criterion, not a metric: the share of the
// answer's claims that are supported or add no word the documents lack (1 − the answer feature
// unsupported_novel). It breaks the ties of faithfulness: of two answers whose weakest claims are
// about as well supported, the one with fewer unsupported claims adding new content wins
// (docs/scorer-quality.md#pairwise-judge says how it was chosen).
const PairGroundedClaims = "grounded_claims"

// PairCriteria are what the builtin pairwise rule compares, in order.
var PairCriteria = []string{score.Faithfulness, score.CitationPrecision, score.AnswerRelevancy, PairGroundedClaims}

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
		if x, ok := j.evidence(r.Answer); ok {
			out[score.Faithfulness] = x[0] // the raw weakest quarter, as Faithfulness
			out[PairGroundedClaims] = 1 - x[unsupportedNovel]
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
