package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// claimSet is the claims of some answers, labelled by RAGTruth's spans.
type claimSet struct {
	x   [][]float64
	y   []bool // the documents support the claim (it overlaps no hallucinated span)
	src []string
	ex  []quality.Example // for quality.DecisionAgreement: Hallucinated = !y
}

func (c *claimSet) add(e quality.Example) {
	claims, rows := builtin.ClaimFeatures(e.Answer, docs(e))
	labelled, _ := quality.LabelClaims(e, claims)
	for i, l := range labelled {
		c.x = append(c.x, rows[i])
		c.y = append(c.y, !l.Hallucinated)
		c.src = append(c.src, e.Context)
		c.ex = append(c.ex, quality.Example{Answer: l.Text, Hallucinated: l.Hallucinated})
	}
}

// trainCitation fits the citation decision (the documents support the claim) on the claims of
// the RAGTruth development half, the decision threshold at the out-of-fold macro-F1 optimum,
// and reports it next to today's decision (support ≥ 0.5) on both halves.
func trainCitation(w io.Writer, rt []quality.Example) (builtin.Logistic, float64) {
	var dev, held claimSet
	for _, e := range rt {
		if quality.IsDev(e) {
			dev.add(e)
		} else {
			held.add(e)
		}
	}
	fmt.Fprintf(w, "\ncitation model: logistic regression on %d claim features, trained on %d claims of the RAGTruth dev half (a claim is unsupported when it overlaps a labelled span)\n",
		len(builtin.ClaimFeatureNames), len(dev.x))
	m, lam, oof := selectAndFit(w, dev.x, dev.y, dev.src, fitOptions{}, builtin.ClaimFeatureNames)
	thr := bestMacroF1Threshold(dev.ex, oof)
	m = shiftBias(m, thr)
	_, cvMacro := quality.DecisionAgreement(dev.ex, oof, thr)
	fmt.Fprintf(w, "chosen lambda %g; decision: out-of-fold macro-F1-best probability %.4f becomes 0.5; cross-validated macro-F1 %.3f\n", lam, thr, cvMacro)
	fmt.Fprintf(w, "%-26s %-24s %6s %9s %9s\n", "split", "decision", "claims", "accuracy", "macro-F1")
	for _, s := range []struct {
		name string
		c    claimSet
	}{{"ragtruth/dev (trained)", dev}, {"ragtruth/held-out", held}} {
		today := make([]float64, len(s.c.x))
		learned := make([]float64, len(s.c.x))
		for i, x := range s.c.x {
			today[i] = x[0]
			learned[i] = m.Prob(x)
		}
		a, f := quality.DecisionAgreement(s.c.ex, today, builtin.DefaultThreshold)
		fmt.Fprintf(w, "%-26s %-24s %6d %9.3f %9.3f\n", s.name, "today (support >= 0.5)", len(s.c.x), a, f)
		a, f = quality.DecisionAgreement(s.c.ex, learned, 0.5)
		fmt.Fprintf(w, "%-26s %-24s %6d %9.3f %9.3f\n", s.name, "learned (p >= 0.5)", len(s.c.x), a, f)
		if s.name == "ragtruth/held-out" {
			// The ceiling of moving the decision: the threshold chosen on the held-out claims
			// themselves (read only to report it, never to choose).
			_, fs := quality.DecisionAgreement(s.c.ex, today, bestMacroF1Threshold(s.c.ex, today))
			_, fl := quality.DecisionAgreement(s.c.ex, learned, bestMacroF1Threshold(s.c.ex, learned))
			fmt.Fprintf(w, "%-26s ceiling: the best macro-F1 of any threshold chosen on these claims: support %.3f, learned %.3f\n", s.name, fs, fl)
		}
	}
	return m, thr
}

// bestMacroF1Threshold is the probability at which the decision "supported" (p ≥ t) has the
// best macro-F1 on the given predictions.
func bestMacroF1Threshold(ex []quality.Example, p []float64) float64 {
	c := slices.Clone(p)
	slices.Sort(c)
	c = slices.Compact(c)
	best, thr := -1.0, 0.5
	// Candidate thresholds on a quantile grid: the claims are thousands, the curve is smooth.
	step := max(1, len(c)/400)
	for i := 0; i+1 < len(c); i += step {
		t := (c[i] + c[i+1]) / 2
		if _, f := quality.DecisionAgreement(ex, p, t); f > best {
			best, thr = f, t
		}
	}
	return thr
}
