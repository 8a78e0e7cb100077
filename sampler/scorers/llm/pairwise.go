package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
)

// PairMetric is the `metric` label of pairwise questions in the judge's metrics.
const PairMetric = "pairwise"

// pairCriteria is what the judge weighs, in order of importance.
const pairCriteria = `1. accuracy: every statement is correct according to its DOCUMENTs;
2. groundedness: the answer says nothing its DOCUMENTs do not support (invented details count against it, however plausible);
3. completeness: it answers every part of the QUESTION.
Do not prefer an answer for being longer, more confident or better formatted, nor for its position.`

// PairJudge compares two answers with an LLM judge and guards against position bias by asking
// twice, the answers in both orders: when the two replies disagree the pair is a tie counted
// as inconsistent. One pair costs two judge questions (plus a repair when a reply is invalid).
type PairJudge struct {
	j       *Judge
	maxDocs int
	maxText int
}

var _ pairwise.Judge = (*PairJudge)(nil)

// NewPairJudge returns a pairwise judge asking j. maxDocs and maxText bound each answer's
// documents and each text in the prompt (0: 20 and 8000 bytes, as the Scorer).
func NewPairJudge(j *Judge, maxDocs, maxText int) *PairJudge {
	if maxDocs <= 0 {
		maxDocs = 20
	}
	if maxText <= 0 {
		maxText = 8000
	}
	return &PairJudge{j: j, maxDocs: maxDocs, maxText: maxText}
}

// Name implements pairwise.Judge: the backend's name.
func (p *PairJudge) Name() string { return p.j.b.Name() }

type pairReply struct {
	Reasoning  string `json:"reasoning"`
	Winner     string `json:"winner"`
	Confidence int    `json:"confidence"`
}

func pairSchema() Schema {
	return object(map[string]any{"reasoning": str(), "winner": enum("1", "2", "tie"), "confidence": integer(1, 5)})
}

// JudgePair implements pairwise.Judge: a is the baseline, b the candidate. The first question
// shows a as answer 1, the second shows b as answer 1. Usage adds up both questions.
func (p *PairJudge) JudgePair(ctx context.Context, a, b *record.Record) (pairwise.Verdict, error) {
	v := pairwise.Verdict{Judge: p.j.b.Name(), Model: p.j.b.Model()}
	if a == nil || b == nil {
		return v, errors.New("pairwise judge: nil record")
	}
	var replies [2]pairReply
	for i, order := range [2][2]*record.Record{{a, b}, {b, a}} {
		u, err := p.j.Ask(ctx, Question{Metric: PairMetric,
			System: "You are a strict evaluator comparing two answers from retrieval-augmented assistants to the same question. " + dataRules,
			User:   p.prompt(order[0], order[1]),
			Schema: pairSchema()}, &replies[i])
		v.InputTokens += u.InputTokens
		v.OutputTokens += u.OutputTokens
		v.CostUSD += u.CostUSD
		if err != nil {
			return v, err
		}
	}
	first := positionWinner(replies[0].Winner, false)
	second := positionWinner(replies[1].Winner, true)
	v.Winner, v.Outcome = pairwise.Combine(first, second)
	if v.Outcome != pairwise.Inconsistent {
		v.Confidence = float64(replies[0].Confidence+replies[1].Confidence) / 10
	}
	v.Reasoning = fmt.Sprintf("a shown first: %s (%s); b shown first: %s (%s)",
		describe(first), replies[0].Reasoning, describe(second), replies[1].Reasoning)
	return v, nil
}

// positionWinner maps "1", "2" or "tie" to a or b; swapped is set when b was answer 1.
func positionWinner(w string, swapped bool) string {
	out := pairwise.WinnerTie
	switch w {
	case "1":
		out = pairwise.WinnerA
	case "2":
		out = pairwise.WinnerB
	}
	if swapped {
		out = pairwise.Swap(out)
	}
	return out
}

func describe(w string) string {
	if w == pairwise.WinnerTie {
		return "tie"
	}
	return w + " better"
}

// prompt shows the question, then each answer after its own documents (the two variants may
// have retrieved different ones; shared documents are shown once).
func (p *PairJudge) prompt(first, second *record.Record) string {
	var b strings.Builder
	q := first.Query
	if strings.TrimSpace(q) == "" {
		q = second.Query
	}
	b.WriteString(block("QUESTION", "", p.cut(q)))
	if sameDocs(first.Documents, second.Documents) {
		b.WriteString(p.docBlocks("", first.Documents))
	} else {
		b.WriteString(p.docBlocks("for=1 ", first.Documents))
		b.WriteString(p.docBlocks("for=2 ", second.Documents))
	}
	b.WriteString(block("ANSWER 1", "", p.cut(first.Answer)))
	b.WriteString(block("ANSWER 2", "", p.cut(second.Answer)))
	b.WriteString("Decide which ANSWER is better for the QUESTION, judging each answer against the DOCUMENTs it was given " +
		"(blocks marked for=1 or for=2, or shared when unmarked). Criteria, in order:\n" + pairCriteria +
		"\nIf they are equally good or equally bad, say tie.\n" +
		`Reply as {"reasoning": "two or three sentences", "winner": "1" | "2" | "tie", "confidence": 1-5}.`)
	return b.String()
}

func (p *PairJudge) docBlocks(attr string, docs []record.Document) string {
	if len(docs) > p.maxDocs {
		docs = docs[:p.maxDocs]
	}
	var b strings.Builder
	for i, d := range docs {
		b.WriteString(block("DOCUMENT", attr+docAttrs(i, d.ID), p.cut(d.Content)))
	}
	return b.String()
}

// cut is Scorer.cut: a long text is redacted before it is cut so no detector misses a number
// cut in two.
func (p *PairJudge) cut(text string) string {
	if len(text) <= p.maxText {
		return text
	}
	if text = p.j.opts.Redact(text); len(text) <= p.maxText {
		return text
	}
	i := p.maxText
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i] + " [truncated]"
}

func sameDocs(x, y []record.Document) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].ID != y[i].ID || x[i].Content != y[i].Content {
			return false
		}
	}
	return true
}
