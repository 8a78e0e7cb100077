package builtin

import (
	"context"
	"strings"
	"testing"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
)

func TestPairJudgeRule(t *testing.T) {
	docs := []record.Document{
		{ID: "d1", Content: "The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."},
		{ID: "d2", Content: "The tower is made of wrought iron and receives about seven million visitors a year."},
	}
	const query = "How tall is the Eiffel Tower and when was it completed?"
	faithful := "The Eiffel Tower is 330 metres tall and was completed in 1889."
	invented := "The Eiffel Tower is 330 metres tall. It was designed by Leonardo da Vinci on the Moon using bamboo."
	rec := func(answer string, cites ...record.Citation) *record.Record {
		return &record.Record{TraceID: "t", Query: query, Answer: answer, Documents: docs, Citations: cites}
	}
	goodCite := record.Citation{DocumentIDs: []string{"d1"}, Text: "The Eiffel Tower is 330 metres tall."}
	badCite := record.Citation{DocumentIDs: []string{"d2"}, Text: "The Eiffel Tower is 330 metres tall."}
	tests := []struct {
		name      string
		a, b      *record.Record
		winner    string
		outcome   string
		criterion string
	}{
		{"faithful candidate wins", rec(invented), rec(faithful), pairwise.WinnerB, pairwise.Win, "faithfulness"},
		{"faithful baseline wins", rec(faithful), rec(invented), pairwise.WinnerA, pairwise.Loss, "faithfulness"},
		{"same answer ties", rec(faithful), rec(faithful), pairwise.WinnerTie, pairwise.Tie, "no criterion"},
		{"citation precision breaks a faithfulness tie", rec(faithful, badCite), rec(faithful, goodCite), pairwise.WinnerB, pairwise.Win, "citation_precision"},
		// The weakest claims are the same (a wrong year), but b's second claim is the documents'
		// while a's adds a word they lack.
		{"grounded claims break a faithfulness tie", rec("The Eiffel Tower was completed in 1901. The tower is painted gold."),
			rec("The Eiffel Tower was completed in 1901. The tower is made of iron."), pairwise.WinnerB, pairwise.Win, "grounded_claims"},
		{"relevancy decides when nothing else differs", rec("The tower is made of wrought iron and receives about seven million visitors a year."),
			rec("The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World's Fair in Paris."), pairwise.WinnerB, pairwise.Win, "answer_relevancy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := PairJudge{}.JudgePair(context.Background(), tt.a, tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if v.Winner != tt.winner || v.Outcome != tt.outcome || !strings.HasPrefix(v.Reasoning, tt.criterion) || v.Judge != Name {
				t.Fatalf("got %+v, want winner %s outcome %s by %s", v, tt.winner, tt.outcome, tt.criterion)
			}
			if tt.winner != pairwise.WinnerTie && (v.Confidence <= DefaultPairMargin || v.Confidence > 1) {
				t.Fatalf("confidence %v", v.Confidence)
			}
			// Symmetric: exchanging the answers exchanges the winner.
			w, err := PairJudge{}.JudgePair(context.Background(), tt.b, tt.a)
			if err != nil {
				t.Fatal(err)
			}
			if w.Winner != pairwise.Swap(tt.winner) {
				t.Fatalf("swapped: winner %s, want %s", w.Winner, pairwise.Swap(tt.winner))
			}
		})
	}
	// A difference inside the margin does not decide.
	v, _ := PairJudge{Margin: 0.99}.JudgePair(context.Background(), rec(invented), rec(faithful))
	if v.Winner != pairwise.WinnerTie {
		t.Fatalf("margin 0.99: %+v", v)
	}
}
