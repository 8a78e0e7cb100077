package llm

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// ---- faithfulness (RAGAS): split the answer into claims, verify each against the context ----

var claimsSchema = object(map[string]any{"claims": arrayOf(str(), 0, 30)})

// claims splits answer into claims; history is the conversation's HISTORY block ("" for none),
// so that pronouns resolve to what earlier turns named.
func (s *Scorer) claims(ctx context.Context, u *call, metric, history, question, answer string) ([]string, error) {
	var split struct {
		Claims []string `json:"claims"`
	}
	err := s.ask(ctx, u, Question{Metric: metric,
		System: "You split an answer into its atomic factual claims. " + dataRules,
		User: history + block("QUESTION", "", s.cut(question)) + block("ANSWER", "", s.cut(answer)) +
			"List every factual claim the ANSWER makes, each as one short standalone sentence with pronouns resolved. " +
			"Leave out greetings, hedges, questions and statements about the answer itself. At most 30 claims. " +
			`Reply as {"claims": ["...", ...]}; an answer without factual claims gives {"claims": []}.`,
		Schema: claimsSchema}, &split)
	var out []string
	for _, c := range split.Claims {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out, err
}

func (s *Scorer) faithfulness(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Answer) == "" || len(r.Documents) == 0 {
		return verdict{skip: true}, nil
	}
	claims, err := s.claims(ctx, u, score.Faithfulness, s.historyBlock(r), r.Query, r.Answer)
	if err != nil {
		return verdict{}, err
	}
	if len(claims) == 0 {
		return verdict{skip: true}, nil
	}
	var claimBlocks strings.Builder
	for i, c := range claims {
		claimBlocks.WriteString(block("CLAIM", fmt.Sprintf("index=%d", i), c))
	}
	var resp struct {
		Verdicts []indexed `json:"verdicts"`
	}
	err = s.ask(ctx, u, Question{Metric: score.Faithfulness,
		System: "You check whether claims are supported by retrieved documents, like a careful fact checker. " + dataRules,
		User: s.docBlocks(s.docs(r)) + claimBlocks.String() +
			"For each CLAIM decide, using only the DOCUMENTs and no outside knowledge: " +
			`"supported" when the documents state or directly imply it, "contradicted" when they say otherwise, ` +
			`"unsupported" when they do not say. Give one verdict per claim index (0 to ` + fmt.Sprint(len(claims)-1) + `) ` +
			`as {"verdicts": [{"index": 0, "verdict": "supported", "reason": "short"}, ...]}.`,
		Schema: verdictsSchema(len(claims), enum("supported", "unsupported", "contradicted")),
		Check:  func() error { return checkIndexes(resp.Verdicts, len(claims)) },
	}, &resp)
	if err != nil {
		return verdict{}, err
	}
	supported, contradicted := 0, 0
	for _, v := range resp.Verdicts {
		switch v.Verdict {
		case "supported":
			supported++
		case "contradicted":
			contradicted++
		}
	}
	return verdict{value: float64(supported) / float64(len(claims)),
		explanation: fmt.Sprintf("%d of %d claims supported, %d contradicted", supported, len(claims), contradicted)}, nil
}

// ---- answer relevancy ----

var questionsSchema = object(map[string]any{"questions": arrayOf(str(), 1, 5), "noncommittal": boolean()})

func (s *Scorer) answerRelevancy(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	if strings.TrimSpace(r.Query) == "" || strings.TrimSpace(r.Answer) == "" {
		return verdict{skip: true}, nil
	}
	if u.st.conv.isRefusal(r) {
		return s.refusalRelevancy(ctx, r, u)
	}
	if s.embed == nil {
		return s.geval(ctx, relevancyJudge, relevancyJudge.Version(), r, u)
	}
	// RAGAS: generate the questions the answer answers, compare them with the real one.
	var gen struct {
		Questions    []string `json:"questions"`
		Noncommittal bool     `json:"noncommittal"`
	}
	err := s.ask(ctx, u, Question{Metric: score.AnswerRelevancy,
		System: "You infer which question an answer was written for. " + dataRules,
		User: block("ANSWER", "", s.cut(r.Answer)) +
			"Write 3 different questions that the ANSWER answers. Set noncommittal to true when the answer is evasive, " +
			`vague or says it does not know. Reply as {"questions": ["...", "...", "..."], "noncommittal": false}.`,
		Schema: questionsSchema}, &gen)
	if err != nil {
		return verdict{}, err
	}
	if gen.Noncommittal {
		return verdict{value: 0, explanation: "noncommittal answer"}, nil
	}
	vecs, tok, err := s.embedTexts(ctx, append([]string{r.Query}, gen.Questions...))
	u.InputTokens += tok
	if err != nil {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %w", err)}
	}
	if len(vecs) != len(gen.Questions)+1 {
		return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: fmt.Errorf("embeddings: %d vectors for %d texts", len(vecs), len(gen.Questions)+1)}
	}
	sum := 0.0
	for _, v := range vecs[1:] {
		c, err := cosine(vecs[0], v)
		if err != nil {
			return verdict{}, &OutcomeError{Outcome: score.OutcomeError, Err: err}
		}
		sum += c
	}
	mean := math.Max(0, sum/float64(len(gen.Questions)))
	return verdict{value: math.Min(1, mean),
		explanation: fmt.Sprintf("mean cosine of %d generated questions to the query", len(gen.Questions))}, nil
}

// ---- context precision and recall (RAGAS) ----

func (s *Scorer) contextPrecision(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	ground, groundName := r.Reference, "REFERENCE"
	if strings.TrimSpace(ground) == "" {
		ground, groundName = r.Answer, "ANSWER"
	}
	docs := s.docs(r)
	if strings.TrimSpace(r.Query) == "" || strings.TrimSpace(ground) == "" || len(docs) == 0 {
		return verdict{skip: true}, nil
	}
	var resp struct {
		Verdicts []indexed `json:"verdicts"`
	}
	schema := object(map[string]any{"verdicts": arrayOf(map[string]any(object(map[string]any{
		"index": integer(0, len(docs)-1), "useful": boolean(), "reason": str()})), len(docs), len(docs))})
	err := s.ask(ctx, u, Question{Metric: score.ContextPrecision,
		System: "You judge which retrieved documents were useful for answering a question. " + dataRules,
		User: block("QUESTION", "", s.cut(r.Query)) + block(groundName, "", s.cut(ground)) + s.docBlocks(docs) +
			"For each DOCUMENT decide whether it was useful in arriving at the " + groundName + " for the QUESTION. " +
			`Reply as {"verdicts": [{"index": 0, "useful": true, "reason": "short"}, ...]} with one verdict per document index (0 to ` +
			fmt.Sprint(len(docs)-1) + `).`,
		Schema: schema,
		Check:  func() error { return checkIndexes(resp.Verdicts, len(docs)) },
	}, &resp)
	if err != nil {
		return verdict{}, err
	}
	useful := make([]bool, len(docs))
	for _, v := range resp.Verdicts {
		useful[v.Index] = v.Useful
	}
	value, n := AveragePrecision(useful)
	return verdict{value: value, explanation: fmt.Sprintf("%d of %d documents useful", n, len(docs))}, nil
}

// AveragePrecision is RAGAS context precision: the mean of precision@k over the ranks k that
// hold a useful document (0 when none is useful). It also returns the useful count.
func AveragePrecision(useful []bool) (float64, int) {
	hits, sum := 0, 0.0
	for k, ok := range useful {
		if ok {
			hits++
			sum += float64(hits) / float64(k+1)
		}
	}
	if hits == 0 {
		return 0, 0
	}
	return sum / float64(hits), hits
}

func (s *Scorer) contextRecall(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	docs := s.docs(r)
	if strings.TrimSpace(r.Reference) == "" || len(docs) == 0 {
		return verdict{skip: true}, nil
	}
	var resp struct {
		Statements []struct {
			Statement  string `json:"statement"`
			Attributed bool   `json:"attributed"`
		} `json:"statements"`
	}
	schema := object(map[string]any{"statements": arrayOf(map[string]any(object(map[string]any{
		"statement": str(), "attributed": boolean()})), 1, 30)})
	err := s.ask(ctx, u, Question{Metric: score.ContextRecall,
		System: "You check whether a reference answer can be found in retrieved documents. " + dataRules,
		User: block("QUESTION", "", s.cut(r.Query)) + block("REFERENCE", "", s.cut(r.Reference)) + s.docBlocks(docs) +
			"Split the REFERENCE into its factual statements (at most 30) and, for each, decide whether the DOCUMENTs " +
			`support it. Reply as {"statements": [{"statement": "...", "attributed": true}, ...]}.`,
		Schema: schema}, &resp)
	if err != nil {
		return verdict{}, err
	}
	n := 0
	for _, st := range resp.Statements {
		if st.Attributed {
			n++
		}
	}
	return verdict{value: float64(n) / float64(len(resp.Statements)),
		explanation: fmt.Sprintf("%d of %d reference statements found in the context", n, len(resp.Statements))}, nil
}
