package builtin

import (
	"math"
	"testing"
)

func TestLogistic(t *testing.T) {
	m := Logistic{Mean: []float64{1, 0}, Scale: []float64{2, 1}, Weights: []float64{4, -1}, Bias: 0.5}
	// z = 0.5 + 4·(3−1)/2 − 1·1 = 3.5
	x := []float64{3, 1}
	if z := m.Logit(x); z != 3.5 {
		t.Fatalf("Logit = %v, want 3.5", z)
	}
	near(t, "Prob", m.Prob(x), 1/(1+math.Exp(-3.5)))
	if p := m.Prob([]float64{1}); !math.IsNaN(p) {
		t.Errorf("Prob of a short row = %v, want NaN", p)
	}
	if p := (Logistic{}).Prob(nil); !math.IsNaN(p) {
		t.Errorf("an empty model's Prob = %v, want NaN", p)
	}
}

func TestCitationModelShape(t *testing.T) {
	m := CitationModel
	if len(ClaimFeatureNames) != claimFeatures || len(m.Weights) != claimFeatures || len(m.Mean) != claimFeatures || len(m.Scale) != claimFeatures {
		t.Fatalf("feature names %d, const %d, model %d/%d/%d: retrain with go run ./scripts/trainbuiltin",
			len(ClaimFeatureNames), claimFeatures, len(m.Weights), len(m.Mean), len(m.Scale))
	}
	for i, s := range m.Scale {
		if !(s > 0) {
			t.Errorf("scale of %s = %v", ClaimFeatureNames[i], s)
		}
	}
	// Support is the evidence the decision rests on: more support, more likely supported.
	if m.Weights[0] <= 0 {
		t.Errorf("support weight %v, want positive", m.Weights[0])
	}
}

func TestClaimEvidence(t *testing.T) {
	ix := newIndex(docs("The bridge opened in 1937. The river floods every spring."))
	defer ix.release()
	var e claimEvidence
	s, why, w := ix.supportWindow(tokenize("The Oakland bridge opened in 1932."), nil, &e)
	want := claimEvidence{support: s, terms: 4, novel: 2, missingNumbers: 1, missingNames: 1}
	want.window, want.global = e.window, e.global
	if e != want || w != 0 || why != "name not in context" {
		t.Fatalf("evidence %+v (window %d, %q), want %+v", e, w, why, want)
	}
	// Two of four terms, both known, are in the window and the context alike.
	if e.window != e.global || !(e.window > 0.3 && e.window < 0.7) {
		t.Errorf("window %v global %v", e.window, e.global)
	}
	if plain, _ := ix.support(tokenize("The Oakland bridge opened in 1932."), nil); plain != s {
		t.Errorf("support %v with evidence, %v without", s, plain)
	}
	s, _, _ = ix.supportWindow(tokenize("The river does not flood every spring."), nil, &e)
	if !e.negation || e.novel != 0 || e.support != s {
		t.Errorf("negated claim: %+v", e)
	}
}

func TestCitationDecision(t *testing.T) {
	j := newJudge(docs("The bridge opened in 1937 and carries six lanes of traffic.", "The river floods every spring."), DefaultThreshold)
	defer j.release()
	for _, tc := range []struct {
		claim string
		want  bool
	}{
		{"The bridge opened in 1937.", true},
		{"The river floods every spring.", true},
		{"The mayor resigned last week.", false},
		{"The bridge opened in 1952.", false},
		// Half the claim's weight is the document's, the rest added detail: support 0.45, below
		// the old threshold of 0.5. RAGTruth's annotators mostly leave such claims unmarked
		// (support 0.5 flagged 8 of every 9 claims wrongly), and the learned decision accepts it.
		{"The bridge opened in 1937 amid protests by angry farmers.", true},
	} {
		d := map[int]bool{0: true}
		if tc.claim == "The river floods every spring." {
			d = map[int]bool{1: true}
		}
		if got := j.citationSupports(tc.claim, d); got != tc.want {
			s, _ := j.support(tc.claim, d)
			t.Errorf("%q: supported %v (support %.3f), want %v", tc.claim, got, s, tc.want)
		}
	}
	s, _ := j.support("The bridge opened in 1937 amid protests by angry farmers.", map[int]bool{0: true})
	if s >= DefaultThreshold {
		t.Errorf("support %.3f: the example no longer shows the change from the threshold", s)
	}
}

func TestAnswerFeatures(t *testing.T) {
	d := docs("The bridge opened in 1937. The river floods every spring.")
	answer := "The bridge opened in 1937. The river floods every spring. The Oakland mayor resigned in 1990."
	x, ok := AnswerFeatures(answer, d)
	if !ok || len(x) != len(AnswerFeatureNames) {
		t.Fatalf("features %v ok %v", x, ok)
	}
	raw, _, _ := Faithfulness(answer, d)
	f := map[string]float64{}
	for i, n := range AnswerFeatureNames {
		f[n] = x[i]
	}
	near(t, "weakest_quarter", f["weakest_quarter"], raw)
	near(t, "claims", f["claims"], math.Log1p(3))
	near(t, "missing_numbers", f["missing_numbers"], math.Log1p(1))
	near(t, "missing_names", f["missing_names"], math.Log1p(1))
	near(t, "supported_share", f["supported_share"], 2.0/3)
	near(t, "unsupported_novel", f["unsupported_novel"], 1.0/3)
	if f["min_support"] != raw {
		t.Errorf("min_support %v, want the weakest claim %v (three claims: the quarter is one)", f["min_support"], raw)
	}
	if AnswerFeatureNames[unsupportedNovel] != "unsupported_novel" {
		t.Errorf("unsupportedNovel indexes %q", AnswerFeatureNames[unsupportedNovel])
	}
	if _, ok := AnswerFeatures("Sure!", d); ok {
		t.Error("features of an answer without a claim")
	}
	if _, ok := AnswerFeatures(answer, nil); ok {
		t.Error("features without documents")
	}
}
