package main

import (
	"math"
	"testing"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// A label that depends on feature 0 alone: boosting picks feature 0 for every stump, cuts it
// where the label flips and ranks perfectly; the same data gives the same model.
func TestFitStumpsFindsTheSplit(t *testing.T) {
	var x [][]float64
	var y []bool
	for i := range 200 {
		a := float64(i) / 200              // informative
		b := math.Mod(float64(i)*0.618, 1) // noise
		x = append(x, []float64{a, b})
		y = append(y, a >= 0.25) // 0.25 is a quantile cut (the 4th of 16)
	}
	s := fitStumps(x, y, 50)
	if len(s.stumps) != 50 {
		t.Fatalf("%d stumps, want 50", len(s.stumps))
	}
	for k, st := range s.stumps {
		if st.feature != 0 {
			t.Fatalf("stump %d splits feature %d, want 0", k, st.feature)
		}
	}
	if lo, hi := s.prob([]float64{0.1, 0.5}), s.prob([]float64{0.9, 0.5}); !(lo < 0.2 && hi > 0.8) {
		t.Errorf("prob below / above the split = %.3f / %.3f, want < 0.2 / > 0.8", lo, hi)
	}
	p := make([]float64, len(x))
	for i := range x {
		p[i] = s.prob(x[i])
	}
	if auc := quality.ROCAUC(p, y); auc != 1 {
		t.Errorf("in-sample ROC AUC %.3f, want 1", auc)
	}
	again := fitStumps(x, y, 50)
	for k := range s.stumps {
		if again.stumps[k] != s.stumps[k] {
			t.Fatalf("refit differs at stump %d: %+v vs %+v", k, again.stumps[k], s.stumps[k])
		}
	}
}

func TestExtraFeatures(t *testing.T) {
	it := item{ex: quality.Example{Answer: "The cat sat.", Context: "the cat ran away"}}
	ce := claimEvidence{support: []float64{0.9, 0.1, 0.5}, novelWords: []float64{0, 1, 0}}
	got := extraFeatures(it, ce)
	want := map[string]float64{
		"novel_words":      1.0 / 3, // sat
		"novel_bigrams":    1.0 / 2, // "cat sat"; "the cat" is in the context
		"share_below_0.4":  1.0 / 3,
		"deficit":          0.4,
		"second_min":       0.5,
		"median_support":   0.5,
		"weakest_position": 0.5, // the second of three claims
		"length_ratio":     math.Log(4.0 / 5),
	}
	if len(got) != len(extraFeatureNames) {
		t.Fatalf("%d features, want %d", len(got), len(extraFeatureNames))
	}
	for i, n := range extraFeatureNames {
		if math.Abs(got[i]-want[n]) > 1e-12 {
			t.Errorf("%s = %v, want %v", n, got[i], want[n])
		}
	}
	if v := weakestQuarterOf([]float64{0.9, 0.1, 0.5, 0.7, 0.2}); math.Abs(v-0.15) > 1e-12 {
		t.Errorf("weakest quarter of five = %v, want 0.15 (the mean of the two lowest)", v)
	}
}
