package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// ---- rubrics (G-Eval style: criteria, steps, a 1..5 scale, normalised (s-1)/4) ----

const (
	rubricRelevancy = `5: answers exactly the question asked, nothing missing or off-topic.
4: answers the question with minor digressions or a small gap.
3: partly answers it; important parts missing or buried in unrelated text.
2: mostly off-topic; touches the question only in passing.
1: does not address the question, or refuses without reason.`
	rubricSimilarity = `5: same meaning as the reference; every key fact agrees.
4: same main point; a minor fact missing or added.
3: partly the same; some key facts missing or different.
2: mostly different; shares only a little with the reference.
1: unrelated to or contradicting the reference.`
)

var rubrics = map[string]struct{ criterion, scale, blocks string }{
	score.RubricRelevance: {"relevance: how well the ANSWER addresses the QUESTION", rubricRelevancy, "qa"},
	score.RubricCompleteness: {"completeness: whether the ANSWER covers every part of the QUESTION (and the key points of the REFERENCE when one is given)",
		`5: every part of the question answered with the necessary detail.
4: all main parts answered; a minor detail missing.
3: some parts answered, at least one important part missing.
2: only a small part of the question answered.
1: none of the question answered.`, "qar"},
	score.RubricAccuracy: {"accuracy: whether every statement in the ANSWER is correct according to the DOCUMENTs (and the REFERENCE when one is given)",
		`5: every statement correct and supported.
4: correct overall; one minor unsupported or imprecise detail.
3: a mix of correct statements and unsupported or wrong ones.
2: mostly unsupported or wrong.
1: wrong on the main point or contradicts the documents.`, "qadr"},
	score.RubricCitationQuality: {"citation quality: whether the ANSWER cites documents (markers like [1] or [doc-id]) for its factual statements and whether each cited document supports the statement it is attached to",
		`5: every factual statement cited, and every citation supports its statement.
4: nearly all statements cited correctly; one missing or weak citation.
3: some statements cited; several missing or unsupportive citations.
2: few citations, mostly missing or pointing to the wrong documents.
1: no citations, or citations that do not support the statements.`, "qad"},
}

func ratingSchema() Schema {
	return object(map[string]any{"reasoning": str(), "score": integer(1, 5)})
}

type rating struct {
	Reasoning string `json:"reasoning"`
	Score     int    `json:"score"`
}

func (s *Scorer) rubric(ctx context.Context, m string, r *record.Record, u *call) (verdict, error) {
	rb, ok := rubrics[m]
	if !ok {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("unknown metric %q", m)}
	}
	if strings.TrimSpace(r.Answer) == "" || strings.TrimSpace(r.Query) == "" {
		return verdict{skip: true}, nil
	}
	if strings.Contains(rb.blocks, "d") && len(r.Documents) == 0 {
		return verdict{skip: true}, nil
	}
	var b strings.Builder
	b.WriteString(block("QUESTION", "", s.cut(r.Query)))
	if strings.Contains(rb.blocks, "d") {
		b.WriteString(s.docBlocks(s.docs(r)))
	}
	if strings.Contains(rb.blocks, "r") && strings.TrimSpace(r.Reference) != "" {
		b.WriteString(block("REFERENCE", "", s.cut(r.Reference)))
	}
	b.WriteString(block("ANSWER", "", s.cut(r.Answer)))
	return s.rate(ctx, u, m, rb.criterion, rb.scale, b.String())
}

// rate asks for a 1..5 score with reasoning first (G-Eval's evaluation steps) and normalises it.
func (s *Scorer) rate(ctx context.Context, u *call, metric, criterion, scale, blocks string) (verdict, error) {
	var resp rating
	err := s.ask(ctx, u, Question{Metric: metric,
		System: "You are a strict evaluator of answers from a retrieval-augmented assistant. " + dataRules,
		User: blocks + "Evaluate " + criterion + ".\nSteps: read the QUESTION and the other blocks; list what a good answer needs; " +
			"compare the ANSWER with it; then pick the score whose description fits best.\nScale (integer 1 to 5):\n" + scale +
			"\n" + `Reply as {"reasoning": "two or three sentences", "score": 1-5}.`,
		Schema: ratingSchema()}, &resp)
	if err != nil {
		return verdict{}, err
	}
	return verdict{value: float64(resp.Score-1) / 4, explanation: fmt.Sprintf("judge score %d of 5", resp.Score)}, nil
}
