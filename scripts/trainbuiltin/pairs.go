package main

import (
	"fmt"
	"io"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
)

// pair is two answers to one source, exactly one of them hallucinated.
type pair struct {
	faithful, hallucinated item
}

// pairsOf builds every pair of answers to one source where exactly one is hallucinated and
// both can be judged, in the order of the items.
func pairsOf(items []item) []pair {
	bySource := map[string][]item{}
	var order []string
	for _, it := range items {
		if _, ok := bySource[it.source]; !ok {
			order = append(order, it.source)
		}
		bySource[it.source] = append(bySource[it.source], it)
	}
	var out []pair
	for _, s := range order {
		its := bySource[s]
		for i := range its {
			for j := i + 1; j < len(its); j++ {
				a, b := its[i], its[j]
				if a.ex.Hallucinated == b.ex.Hallucinated || a.x == nil || b.x == nil {
					continue
				}
				if a.ex.Hallucinated {
					a, b = b, a
				}
				out = append(out, pair{faithful: a, hallucinated: b})
			}
		}
	}
	return out
}

// diff is x(b) − x(a).
func diff(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = b[i] - a[i]
	}
	return d
}

// trainPairs fits the pairwise model on the pairs of the RAGTruth development half (each pair
// in both orders, so the model learns no position) and reports, on both halves, the share of
// pairs where it prefers the faithful answer, next to the weakest quarter alone (margin 0.05,
// ties half; the builtin judge's first criterion) and to comparing the learned faithfulness.
// The builtin judge itself is measured by scorer-quality -pairwise.
func trainPairs(w io.Writer, items []item, faith builtin.Logistic) builtin.Logistic {
	var dev, held []item
	for _, it := range items {
		if it.isTrain {
			dev = append(dev, it)
		} else {
			held = append(held, it)
		}
	}
	devPairs := pairsOf(dev)
	var x [][]float64
	var y []bool
	var src []string
	for _, p := range devPairs {
		x = append(x, diff(p.hallucinated.x, p.faithful.x), diff(p.faithful.x, p.hallucinated.x))
		y = append(y, true, false)
		src = append(src, p.faithful.source, p.faithful.source)
	}
	fmt.Fprintf(w, "\npairwise model: logistic regression without intercept on the %d feature differences, trained on %d pairs of the RAGTruth dev half (both orders)\n",
		len(builtin.AnswerFeatureNames), len(devPairs))
	m, lam, _ := selectAndFit(w, x, y, src, fitOptions{noBias: true}, builtin.AnswerFeatureNames)
	fmt.Fprintf(w, "chosen lambda %g\n", lam)
	fmt.Fprintf(w, "%-26s %-34s %6s %7s\n", "split", "rule", "pairs", "share")
	for _, s := range []struct {
		name  string
		pairs []pair
	}{{"ragtruth/dev (trained)", devPairs}, {"ragtruth/held-out", pairsOf(held)}} {
		var today, viaFaith, learned float64
		for _, p := range s.pairs {
			today += prefer(p.faithful.raw-p.hallucinated.raw, builtin.DefaultPairMargin)
			viaFaith += prefer(faith.Prob(p.faithful.x)-faith.Prob(p.hallucinated.x), builtin.DefaultPairMargin)
			learned += prefer(m.Logit(diff(p.hallucinated.x, p.faithful.x)), 0)
		}
		n := float64(len(s.pairs))
		fmt.Fprintf(w, "%-26s %-34s %6d %7.3f\n", s.name, "weakest quarter alone, margin 0.05", len(s.pairs), today/n)
		fmt.Fprintf(w, "%-26s %-34s %6d %7.3f\n", s.name, "learned faithfulness, margin 0.05", len(s.pairs), viaFaith/n)
		fmt.Fprintf(w, "%-26s %-34s %6d %7.3f\n", s.name, "pairwise model", len(s.pairs), learned/n)
	}
	return m
}

// prefer is 1 when d (faithful − hallucinated) exceeds the margin, ½ within it, else 0.
func prefer(d, margin float64) float64 {
	switch {
	case d > margin:
		return 1
	case d < -margin:
		return 0
	}
	return 0.5
}
