package llm

import (
	"context"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/text"
)

// Conversations. A later turn's question leans on the turns before it ("and the other one?"):
// judged alone it asks nothing, and the documents retrieved for it look irrelevant. So:
//   - prompts that read the question as the user meant it (answer relevancy, the claims of
//     faithfulness, the refusal check) carry the conversation's history in a HISTORY block,
//     bounded to the newest messages within the scorer's text bound and redacted with the rest
//     of the prompt;
//   - on a later turn (Turn > 1, or a record with history) one extra question asks the judge
//     for a standalone rewrite of the question, once per record, and answer relevancy and
//     the context metrics judge that rewrite instead of the raw question.
// docs/conversations.md gives the prompt, its cost, and why it is one extra call rather than
// folded into each metric's own question.

// convState is what the metrics of one record share about its conversation.
type convState struct {
	rewriteDone bool
	rewrite     string
	rewriteErr  error

	refusal     int8 // 0 not checked, 1 not a refusal, 2 a refusal
	answerDone  bool
	answerable  bool
	answerWhy   string
	answerError error
}

var rewriteSchema = object(map[string]any{"question": str()})

// laterTurn reports whether r's question may lean on earlier turns.
func laterTurn(r *record.Record) bool { return len(r.History) > 0 && r.Turn != 1 }

// historyBlock formats the newest messages of r's history that fit in the scorer's text bound
// as one HISTORY block ("" without history). A message longer than the bound is cut (and
// redacted before it is cut, like every cut text).
func (s *Scorer) historyBlock(r *record.Record) string {
	if len(r.History) == 0 {
		return ""
	}
	var lines []string
	size := 0
	for i := len(r.History) - 1; i >= 0; i-- {
		m := r.History[i]
		role := "USER"
		if m.Role == record.RoleAssistant {
			role = "ASSISTANT"
		}
		line := role + ": " + strings.ReplaceAll(s.cut(m.Content), "\n", " ")
		if size+len(line) > s.maxText && len(lines) > 0 {
			break
		}
		size += len(line) + 1
		lines = append(lines, line)
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return block("HISTORY", "", strings.Join(lines, "\n"))
}

// standalone returns r with its question rewritten to stand alone when it is a later turn
// (asked once per record: the metrics share the answer), else r itself. metric names the
// metric that asks first, for the judge's metrics labels and its token charge.
func (s *Scorer) standalone(ctx context.Context, metric string, r *record.Record, u *call) (*record.Record, error) {
	if !laterTurn(r) || strings.TrimSpace(r.Query) == "" {
		return r, nil
	}
	c := &u.st.conv
	if !c.rewriteDone {
		c.rewriteDone = true
		var resp struct {
			Question string `json:"question"`
		}
		c.rewriteErr = s.ask(ctx, u, Question{Metric: metric,
			System: "You rewrite the last question of a conversation so that it can be understood without the conversation. " + dataRules,
			User: s.historyBlock(r) + block("QUESTION", "", s.cut(r.Query)) +
				"Rewrite the QUESTION as one standalone question with the same meaning: replace pronouns and references " +
				"to earlier turns (it, they, the other one, that plan) with what they refer to in the HISTORY. " +
				"Do not answer it. If it already stands alone, repeat it unchanged. " +
				`Reply as {"question": "..."}.`,
			Schema: rewriteSchema}, &resp)
		c.rewrite = strings.TrimSpace(resp.Question)
	}
	if c.rewriteErr != nil {
		return nil, c.rewriteErr
	}
	if c.rewrite == "" || c.rewrite == r.Query {
		return r, nil
	}
	cp := *r
	cp.Query = c.rewrite
	return &cp, nil
}

// isRefusal reports (once per record) whether r's answer declines to answer.
func (c *convState) isRefusal(r *record.Record) bool {
	if c.refusal == 0 {
		c.refusal = 1
		if text.IsRefusal(r.Answer) {
			c.refusal = 2
		}
	}
	return c.refusal == 2
}

var answerableSchema = object(map[string]any{"reasoning": str(), "answerable": boolean()})

// answerable asks (once per record) whether the documents hold what the question needs; with
// no document content the answer is no without asking.
func (s *Scorer) answerable(ctx context.Context, metric string, r *record.Record, u *call) (bool, string, error) {
	c := &u.st.conv
	if c.answerDone {
		return c.answerable, c.answerWhy, c.answerError
	}
	c.answerDone = true
	docs := s.docs(r)
	has := false
	for _, d := range docs {
		has = has || strings.TrimSpace(d.Content) != ""
	}
	if !has {
		c.answerWhy = "nothing retrieved"
		return false, c.answerWhy, nil
	}
	var resp struct {
		Reasoning  string `json:"reasoning"`
		Answerable bool   `json:"answerable"`
	}
	c.answerError = s.ask(ctx, u, Question{Metric: metric,
		System: "You decide whether retrieved documents hold the information needed to answer a question. " + dataRules,
		User: s.historyBlock(r) + block("QUESTION", "", s.cut(r.Query)) + s.docBlocks(docs) +
			"Using only the DOCUMENTs, decide whether they contain the information needed to answer the QUESTION " +
			"(as meant in the HISTORY, when there is one). Partial information that answers the main point counts. " +
			`Reply as {"reasoning": "one sentence", "answerable": true}.`,
		Schema: answerableSchema}, &resp)
	c.answerable = resp.Answerable
	c.answerWhy = "the judge finds the documents do not answer the question"
	if resp.Answerable {
		c.answerWhy = "the judge finds the documents answer the question"
	}
	return c.answerable, c.answerWhy, c.answerError
}

// refusalRelevancy is answer relevancy for a refusal: 1 when the documents do not answer the
// question (declining is the right answer), 0 when they do.
func (s *Scorer) refusalRelevancy(ctx context.Context, r *record.Record, u *call) (verdict, error) {
	ok, why, err := s.answerable(ctx, score.AnswerRelevancy, r, u)
	if err != nil {
		return verdict{}, err
	}
	if ok {
		return verdict{value: 0, explanation: "refusal although " + why}, nil
	}
	return verdict{value: 1, explanation: "correct refusal: " + why}, nil
}

// refusalCorrect is the refusal_correct result of a record whose answer relevancy found a
// refusal; ok is false when there is none to give.
func (c *convState) refusalCorrect() (verdict, bool) {
	if c.refusal != 2 || !c.answerDone || c.answerError != nil {
		return verdict{}, false
	}
	if c.answerable {
		return verdict{value: 0, explanation: "unwarranted refusal: " + c.answerWhy}, true
	}
	return verdict{value: 1, explanation: "correct refusal: " + c.answerWhy}, true
}
