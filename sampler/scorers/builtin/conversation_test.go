package builtin

import (
	"context"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

func TestResolveQuestion(t *testing.T) {
	u := func(s string) record.Message { return record.Message{Role: record.RoleUser, Content: s} }
	a := func(s string) record.Message { return record.Message{Role: record.RoleAssistant, Content: s} }
	hist := []record.Message{u("How much does the Pro plan cost per month?"), a("Pro costs $20 a month.")}
	tests := []struct {
		name, query string
		history     []record.Message
		want        string
		resolved    bool
	}{
		{"anaphor", "what about the other one?", hist, "How much does the Pro plan cost per month? \nwhat about the other one?", true},
		{"short", "Enterprise?", hist, "How much does the Pro plan cost per month? \nEnterprise?", true},
		{"follow-up opener", "And for annual billing with discounts included?", hist, "How much does the Pro plan cost per month? \nAnd for annual billing with discounts included?", true},
		{"stands alone", "How much does the Enterprise plan cost per month?", hist, "How much does the Enterprise plan cost per month?", false},
		{"no history", "what about the other one?", nil, "what about the other one?", false},
		// "that" and "this" as pronouns: after a restating verb, or last.
		{"say that shorter", "can you say that shorter?", hist, "How much does the Pro plan cost per month? \ncan you say that shorter?", true},
		{"what does that mean", "What does that mean for my team's invoices?", hist, "How much does the Pro plan cost per month? \nWhat does that mean for my team's invoices?", true},
		{"why is that", "Why is that?", hist, "How much does the Pro plan cost per month? \nWhy is that?", true},
		{"ends on this", "How do I cancel this?", hist, "How much does the Pro plan cost per month? \nHow do I cancel this?", true},
		// As determiners and relatives they stand alone (MTRAG's turn 1 and the like).
		{"this week", "where do the arizona cardinals play this week", hist, "where do the arizona cardinals play this week", false},
		{"relative that", "Which coach was it that won the 2019 championship game?", nil, "Which coach was it that won the 2019 championship game?", false},
		{"that as determiner", "Does that plan include phone support on weekends?", hist, "Does that plan include phone support on weekends?", false},
		// The previous question leans on the one before: both are taken.
		{"chained", "and that?", []record.Message{u("Which plans include SSO support?"), a("Enterprise."), u("How much is it?"), a("$50.")},
			"Which plans include SSO support? \nHow much is it? \nand that?", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, resolved := ResolveQuestion(tt.query, tt.history)
			if got != tt.want || resolved != tt.resolved {
				t.Errorf("ResolveQuestion = %q, %v; want %q, %v", got, resolved, tt.want, tt.resolved)
			}
		})
	}
}

// A later turn's answer relevancy is judged against the resolved question, and a refusal gets
// refusal_correct next to its answer relevancy.
func TestScoreConversationAndRefusals(t *testing.T) {
	plans := docs("The Pro plan costs $20 per month.", "The Enterprise plan costs $50 per month and includes SSO.")
	hist := []record.Message{{Role: record.RoleUser, Content: "How much does the Pro plan cost?"}, {Role: record.RoleAssistant, Content: "$20 per month."}}
	sc := New(Options{Metrics: []string{score.AnswerRelevancy}})
	tests := []struct {
		name string
		r    record.Record
		want map[string]float64
	}{
		// Alone, "what about the other one?" names nothing the answer takes up ("one" is a
		// number term): 0. Resolved, it asks how much the Pro plan costs per month: the answer
		// covers cost and month (with plan through its passage) and gives a price; an answer off
		// the point covers less and gives no number (×0.5).
		{"later turn without the history", record.Record{Query: "what about the other one?", Answer: "Enterprise costs $50 per month.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0}},
		{"later turn", record.Record{Query: "what about the other one?", History: hist, Answer: "Enterprise costs $50 per month.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0.338587615198}},
		{"later turn answered off the point", record.Record{Query: "what about the other one?", History: hist, Answer: "Enterprise includes SSO.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0.169293807599}},
		// docs/conversations.md's example: a clarification answered from the history, with no
		// retrieval. Unresolved, "can you say that shorter" asks for nothing but a form: not
		// scored (it scored 0 before "that" resolved it). Resolved,
		// it is judged as the question it refers to, answered the same way (its form words
		// "you", "say" and "shorter" are not looked for): 1 of pro, plan, cost, as below.
		{"clarification without the history", record.Record{Query: "can you say that shorter?", Answer: "Pro is $20 a month."},
			map[string]float64{}},
		{"clarification", record.Record{Query: "can you say that shorter?", History: hist, Answer: "Pro is $20 a month."},
			map[string]float64{score.AnswerRelevancy: 1.0 / 3}},
		{"the question it refers to", record.Record{Query: "How much does the Pro plan cost?", Answer: "Pro is $20 a month."},
			map[string]float64{score.AnswerRelevancy: 1.0 / 3}},
		{"correct refusal", record.Record{Query: "Does the Pro plan include phone support?", Answer: "The documents do not say.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 1, score.RefusalCorrect: 1}},
		{"unwarranted refusal", record.Record{Query: "How much does the Enterprise plan cost per month?", Answer: "I couldn't find that.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0, score.RefusalCorrect: 0}},
		{"refusal resolved against the history", record.Record{Query: "and Enterprise?", History: hist, Answer: "I don't know.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0, score.RefusalCorrect: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sc.Score(context.Background(), &tt.r)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, x := range res {
				got[x.Metric] = x.Value
			}
			if len(got) != len(tt.want) {
				t.Fatalf("scores %v, want %v", got, tt.want)
			}
			for m, w := range tt.want {
				near(t, m, got[m], w)
			}
		})
	}
}

// A refusal makes no claim: every metric that judges claims and citations is left unscored
// (score.ClaimMetric), and refusal_correct says whether declining was right. Before, a correct
// refusal scored faithfulness ≈ 0.09 and citation_recall 0, dragging those SLOs down on the
// behaviour a team wants. A turn that retrieved nothing gets no citation metric either.
func TestRefusalsAndEmptyRetrievalsGetNoClaimMetrics(t *testing.T) {
	plans := docs("The Pro plan costs $20 per month.", "The Enterprise plan costs $50 per month and includes SSO.")
	sc := New(Options{})
	tests := []struct {
		name string
		r    record.Record
		want map[string]float64 // the metrics scored, with their value (-1: any value)
	}{
		{"correct refusal", record.Record{Query: "Does the Pro plan include phone support?", Answer: "I couldn't find that in the documents.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 1, score.RefusalCorrect: 1, score.ContextPrecision: -1}},
		{"unwarranted refusal", record.Record{Query: "How much does the Enterprise plan cost per month?", Answer: "I don't know.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: 0, score.RefusalCorrect: 0, score.ContextPrecision: -1}},
		{"answer with nothing retrieved", record.Record{Query: "How much does the Enterprise plan cost per month?", Answer: "Enterprise costs $50 per month."},
			map[string]float64{score.AnswerRelevancy: -1}},
		{"answer that cites nothing", record.Record{Query: "How much does the Enterprise plan cost per month?", Answer: "Enterprise costs $50 per month.", Documents: plans},
			map[string]float64{score.AnswerRelevancy: -1, score.Faithfulness: -1, score.CitationRecall: 0, score.ContextPrecision: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sc.Score(context.Background(), &tt.r)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, x := range res {
				got[x.Metric] = x.Value
			}
			if len(got) != len(tt.want) {
				t.Fatalf("scored %v, want the metrics %v", got, tt.want)
			}
			for m, w := range tt.want {
				v, ok := got[m]
				if !ok {
					t.Fatalf("%s not scored: %v", m, got)
				}
				if w >= 0 {
					near(t, m, v, w)
				}
			}
		})
	}
}
