package main

// The -experiments report: candidate evidence and model families for the faithfulness score
// that were measured and not adopted, kept runnable so that the figures quoted in
// docs/scorer-quality.md can be reproduced and the next candidate compared against them. Every
// choice (features, penalty, number of rounds, mixing weight) is made on the RAGTruth
// development half by 5-fold cross-validation by source passage; the held-out half is only
// measured.

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// extraFeatureNames are the candidate answer features the experiments add to
// builtin.AnswerFeatureNames. The first two are plain lower-cased words (every word, function
// words included, which the builtin's content terms leave out); the others summarise the
// distribution of the claim supports beyond the weakest quarter.
var extraFeatureNames = []string{
	"novel_words",      // share of the answer's distinct words found nowhere in the context
	"novel_bigrams",    // share of the answer's word bigrams found nowhere in the context
	"share_below_0.4",  // share of claims with support below 0.4
	"deficit",          // Σ max(0, 0.5 − support) over the claims
	"second_min",       // second-lowest claim support (the lowest for one claim)
	"median_support",   // median claim support
	"weakest_position", // position of the weakest claim in the answer, 0 (first) … 1 (last)
	"length_ratio",     // ln((answer words + 1) / (context words + 1))
}

// plainWords lower-cases s and cuts it into runs of letters and digits.
func plainWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// claimEvidence is the per-claim part of the experiments: the claims' supports (builtin
// ClaimFeatures, column 0) and each claim's share of distinct plain words the context lacks.
type claimEvidence struct {
	support, novelWords []float64
}

func claimsOf(it item) claimEvidence {
	claims, rows := builtin.ClaimFeatures(it.ex.Answer, docs(it.ex))
	ctx := map[string]bool{}
	for _, w := range plainWords(it.ex.Context) {
		ctx[w] = true
	}
	var ce claimEvidence
	for i, r := range rows {
		ce.support = append(ce.support, r[0])
		ce.novelWords = append(ce.novelWords, novelShare(plainWords(claims[i]), ctx))
	}
	return ce
}

// novelShare is the share of the distinct words of ws not in ctx (0 for no words).
func novelShare(ws []string, ctx map[string]bool) float64 {
	seen := map[string]bool{}
	novel := 0
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			if !ctx[w] {
				novel++
			}
		}
	}
	if len(seen) == 0 {
		return 0
	}
	return float64(novel) / float64(len(seen))
}

// extraFeatures computes extraFeatureNames for an answer that can be judged.
func extraFeatures(it item, ce claimEvidence) []float64 {
	a, c := plainWords(it.ex.Answer), plainWords(it.ex.Context)
	ctx, bigrams := map[string]bool{}, map[[2]string]bool{}
	for i, w := range c {
		ctx[w] = true
		if i > 0 {
			bigrams[[2]string{c[i-1], w}] = true
		}
	}
	novelBigrams := 0
	for i := 1; i < len(a); i++ {
		if !bigrams[[2]string{a[i-1], a[i]}] {
			novelBigrams++
		}
	}
	s := slices.Clone(ce.support)
	weakest := 0
	for i, v := range s {
		if v < s[weakest] {
			weakest = i
		}
	}
	slices.Sort(s)
	below, deficit := 0, 0.0
	for _, v := range s {
		if v < 0.4 {
			below++
		}
		deficit += max(0, 0.5-v)
	}
	n := len(s)
	pos := 0.0
	if n > 1 {
		pos = float64(weakest) / float64(n-1)
	}
	return []float64{
		novelShare(a, ctx),
		float64(novelBigrams) / float64(max(1, len(a)-1)),
		float64(below) / float64(n),
		deficit,
		s[min(1, n-1)],
		s[n/2],
		pos,
		math.Log(float64(len(a)+1) / float64(len(c)+1)),
	}
}

// experiments runs the report on the RAGTruth answers (items of both halves).
func experiments(w io.Writer, items []item) {
	names := append(slices.Clone(builtin.AnswerFeatureNames), extraFeatureNames...)
	var dev, held []item
	var devX, heldX [][]float64
	var devC, heldC []claimEvidence
	for _, it := range items {
		if it.x == nil {
			continue // no claim: scored 1 by every candidate alike
		}
		ce := claimsOf(it)
		if len(ce.support) == 0 {
			continue
		}
		x := append(slices.Clone(it.x), extraFeatures(it, ce)...)
		if it.isTrain {
			dev, devX, devC = append(dev, it), append(devX, x), append(devC, ce)
		} else {
			held, heldX, heldC = append(held, it), append(heldX, x), append(heldC, ce)
		}
	}
	faithful := func(its []item) []bool {
		y := make([]bool, len(its))
		for i, it := range its {
			y[i] = !it.ex.Hallucinated
		}
		return y
	}
	devY, heldY := faithful(dev), faithful(held)
	src := make([]string, len(dev))
	for i, it := range dev {
		src[i] = it.source
	}
	col := func(x [][]float64, j int) []float64 {
		out := make([]float64, len(x))
		for i, r := range x {
			out[i] = r[j]
		}
		return out
	}
	fmt.Fprintf(w, "\nexperiments: candidate faithfulness evidence on RAGTruth (%d dev answers, %d held-out answers with claims)\n", len(dev), len(held))
	fmt.Fprintf(w, "single features, ROC AUC in their natural direction (higher = faithful; < 0.5: the feature marks hallucination)\n")
	for j, n := range names {
		fmt.Fprintf(w, "  %-18s dev %.3f held-out %.3f\n", n, quality.ROCAUC(col(devX, j), devY), quality.ROCAUC(col(heldX, j), heldY))
	}
	report := func(name string, oof []float64, heldP []float64) {
		thr := bestF1Threshold(devY, oof)
		shifted := make([]float64, len(heldP))
		for i, p := range heldP {
			shifted[i] = shiftProb(min(max(p, 1e-12), 1-1e-12), thr)
		}
		ex := make([]quality.Example, len(held))
		for i, it := range held {
			ex[i] = it.ex
		}
		r := quality.Compare(ex, shifted, 0.5)
		fmt.Fprintf(w, "%-44s dev out-of-fold %.3f  held-out %.3f  F1@0.5 %.3f (decision: dev out-of-fold F1-best %.4f)\n",
			name, quality.ROCAUC(oof, devY), r.AUC, r.F1, thr)
	}
	fmt.Fprintf(w, "\nreference: weakest quarter alone                dev %.3f  held-out %.3f\n",
		quality.ROCAUC(col(devX, 0), devY), quality.ROCAUC(col(heldX, 0), heldY))

	// Logistic regression with forward selection over all candidate features.
	fmt.Fprintf(w, "\nlogistic regression, forward selection over %d features:\n", len(names))
	m, _, oof := selectAndFit(w, devX, devY, src, fitOptions{}, names)
	heldP := make([]float64, len(heldX))
	for i, x := range heldX {
		heldP[i] = m.Prob(x)
	}
	report("logistic (selected features)", oof, heldP)

	// Boosted stumps.
	fmt.Fprintf(w, "\nboosted stumps (depth 1, learning rate %.2f, %d quantile cuts per feature, L2 %g, leaves of >= %d answers):\n", stumpRate, stumpCuts, stumpL2, stumpLeaf)
	bestR, bestAUC := 0, -1.0
	var bestOOF []float64
	for _, rounds := range []int{25, 50, 100, 200, 400} {
		oof := make([]float64, len(devX))
		for k := range folds {
			var tx [][]float64
			var ty []bool
			for i := range devX {
				if fold(src[i]) != k {
					tx, ty = append(tx, devX[i]), append(ty, devY[i])
				}
			}
			s := fitStumps(tx, ty, rounds)
			for i := range devX {
				if fold(src[i]) == k {
					oof[i] = s.prob(devX[i])
				}
			}
		}
		auc := quality.ROCAUC(oof, devY)
		fmt.Fprintf(w, "  rounds %-4d out-of-fold ROC-AUC %.4f\n", rounds, auc)
		if auc > bestAUC+1e-9 {
			bestR, bestAUC, bestOOF = rounds, auc, oof
		}
	}
	s := fitStumps(devX, devY, bestR)
	for i, x := range heldX {
		heldP[i] = s.prob(x)
	}
	report(fmt.Sprintf("stumps (%d rounds, %d parameters)", bestR, 3*len(s.stumps)+1), bestOOF, heldP)

	// Claim support lowered by the claim's share of novel plain words, then the weakest quarter.
	fmt.Fprintf(w, "\nweakest quarter of (support − a · share of the claim's plain words the context lacks):\n")
	for _, a := range []float64{0, 0.1, 0.2, 0.3, 0.5} {
		score := func(cs []claimEvidence) []float64 {
			out := make([]float64, len(cs))
			for i, ce := range cs {
				v := make([]float64, len(ce.support))
				for k := range v {
					v[k] = ce.support[k] - a*ce.novelWords[k]
				}
				out[i] = weakestQuarterOf(v)
			}
			return out
		}
		fmt.Fprintf(w, "  a %-4g dev %.4f held-out %.4f\n", a, quality.ROCAUC(score(devC), devY), quality.ROCAUC(score(heldC), heldY))
	}
}

// weakestQuarterOf is the mean of the lowest ⌈n/4⌉ of v (the builtin's aggregation).
func weakestQuarterOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	k := (len(s) + 3) / 4
	sum := 0.0
	for _, x := range s[:k] {
		sum += x
	}
	return sum / float64(k)
}

// Boosted stumps: gradient boosting of depth-1 trees on the logistic loss, Newton leaf values
// with an L2 penalty, candidate cuts at quantiles of each feature. Deterministic: ties between
// equally good splits go to the lower feature index and cut.
const (
	stumpRate = 0.05
	stumpCuts = 16
	stumpL2   = 1.0
	stumpLeaf = 10
)

type stump struct {
	feature     int
	cut         float64
	left, right float64 // added to the log-odds when x[feature] < cut / otherwise
}

type stumps struct {
	base   float64
	stumps []stump
}

func (s stumps) prob(x []float64) float64 {
	z := s.base
	for _, t := range s.stumps {
		if x[t.feature] < t.cut {
			z += t.left
		} else {
			z += t.right
		}
	}
	return 1 / (1 + math.Exp(-z))
}

func fitStumps(x [][]float64, y []bool, rounds int) stumps {
	n, d := len(x), len(x[0])
	pos := 0
	for _, v := range y {
		if v {
			pos++
		}
	}
	p0 := min(max(float64(pos)/float64(n), 1e-6), 1-1e-6)
	s := stumps{base: math.Log(p0 / (1 - p0))}
	// Sorted order and candidate cuts per feature.
	orders := make([][]int, d)
	cuts := make([][]float64, d)
	for j := range d {
		o := make([]int, n)
		for i := range o {
			o[i] = i
		}
		slices.SortStableFunc(o, func(a, b int) int {
			switch {
			case x[a][j] < x[b][j]:
				return -1
			case x[a][j] > x[b][j]:
				return 1
			}
			return 0
		})
		orders[j] = o
		var c []float64
		for q := 1; q < stumpCuts; q++ {
			v := x[o[q*n/stumpCuts]][j]
			if len(c) == 0 || v > c[len(c)-1] {
				c = append(c, v)
			}
		}
		cuts[j] = c
	}
	f := make([]float64, n)
	for i := range f {
		f[i] = s.base
	}
	g, h := make([]float64, n), make([]float64, n)
	for range rounds {
		var G, H float64
		for i := range n {
			p := 1 / (1 + math.Exp(-f[i]))
			t := 0.0
			if y[i] {
				t = 1
			}
			g[i], h[i] = p-t, p*(1-p)
			G, H = G+g[i], H+h[i]
		}
		bestGain, best := 0.0, stump{feature: -1}
		for j := range d {
			o := orders[j]
			var gl, hl float64
			k := 0
			for _, c := range cuts[j] {
				for k < n && x[o[k]][j] < c {
					gl, hl = gl+g[o[k]], hl+h[o[k]]
					k++
				}
				if k < stumpLeaf || n-k < stumpLeaf {
					continue
				}
				gr, hr := G-gl, H-hl
				gain := gl*gl/(hl+stumpL2) + gr*gr/(hr+stumpL2) - G*G/(H+stumpL2)
				if gain > bestGain+1e-12 {
					bestGain = gain
					best = stump{feature: j, cut: c, left: -stumpRate * gl / (hl + stumpL2), right: -stumpRate * gr / (hr + stumpL2)}
				}
			}
		}
		if best.feature < 0 {
			break
		}
		s.stumps = append(s.stumps, best)
		for i := range n {
			if x[i][best.feature] < best.cut {
				f[i] += best.left
			} else {
				f[i] += best.right
			}
		}
	}
	return s
}
