package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/pairwise"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// PairScore is how often a pairwise judge prefers the faithful answer of a pair.
type PairScore struct {
	Pairs, Right, Wrong, Ties int
	Share                     float64 // (right + ties/2) / pairs
	Lo, Hi                    float64 // 95 % Wilson interval
}

// Pairs builds, for each source passage, every pair of its answers where exactly one is
// labelled hallucinated, shows the hallucinated one as a and the faithful one as b (and, for
// half of the pairs, the other way round, so a judge preferring one position gains nothing),
// and counts how often judge prefers the faithful one; ties count half.
func Pairs(examples []quality.Example, judge pairwise.Judge) (PairScore, error) {
	bySource := map[string][]quality.Example{}
	var order []string
	for _, e := range examples {
		if _, ok := bySource[e.Context]; !ok {
			order = append(order, e.Context)
		}
		bySource[e.Context] = append(bySource[e.Context], e)
	}
	var s PairScore
	n := 0
	for _, src := range order {
		ex := bySource[src]
		for i := range ex {
			for j := i + 1; j < len(ex); j++ {
				if ex[i].Hallucinated == ex[j].Hallucinated {
					continue
				}
				faithful, halluc := ex[i], ex[j]
				if faithful.Hallucinated {
					faithful, halluc = halluc, faithful
				}
				a, b := rec(halluc), rec(faithful)
				faithfulSide := pairwise.WinnerB
				if n%2 == 1 {
					a, b, faithfulSide = b, a, pairwise.WinnerA
				}
				n++
				v, err := judge.JudgePair(context.Background(), a, b)
				if err != nil {
					return s, err
				}
				s.Pairs++
				switch v.Winner {
				case faithfulSide:
					s.Right++
				case pairwise.WinnerTie:
					s.Ties++
				default:
					s.Wrong++
				}
			}
		}
	}
	if s.Pairs > 0 {
		s.Share = (float64(s.Right) + float64(s.Ties)/2) / float64(s.Pairs)
		s.Lo, s.Hi = pairwise.Wilson(s.Share, float64(s.Pairs), 1.959963984540054)
	}
	return s, nil
}

func rec(e quality.Example) *record.Record {
	return &record.Record{TraceID: "x", Answer: e.Answer, Documents: docs(e)}
}

// pairReport prints the builtin pairwise judge's agreement with the RAGTruth labels on the
// development half, the held-out half and the whole split.
func pairReport(w io.Writer, sp quality.Split, margin float64) error {
	dev, held := quality.Halves(sp.Examples)
	fmt.Fprintf(w, "builtin pairwise judge (margin %.2f): pairs of answers to one source where exactly one is hallucinated;\n", margin)
	fmt.Fprintf(w, "share = (faithful preferred + ties/2) / pairs, 95%% Wilson interval\n")
	fmt.Fprintf(w, "%-24s %6s %6s %6s %6s %7s %17s\n", "split", "pairs", "right", "wrong", "ties", "share", "95% CI")
	for _, st := range []set{{sp.Name + "/dev", dev}, {sp.Name + "/held-out", held}, {sp.Name, sp.Examples}} {
		s, err := Pairs(st.examples, builtin.PairJudge{Margin: margin})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-24s %6d %6d %6d %6d %7.3f  [%.3f, %.3f]\n", st.name, s.Pairs, s.Right, s.Wrong, s.Ties, s.Share, s.Lo, s.Hi)
	}
	return nil
}
