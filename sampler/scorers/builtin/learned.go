package builtin

import (
	"math"

	"github.com/ragwatch/ragwatch/internal/record"
)

// Learned models over the evidence the support computation already gathers (claimEvidence),
// trained by `go run ./scripts/trainbuiltin` on the shared data and committed as Go source
// (model_fit.go) with the command and the data's provenance. The command also trains and
// reports a faithfulness combiner and a pairwise model over AnswerFeatures; they did not beat
// the hand-set rules on held-out data and BEGIN, so the scorer does not use them
// (docs/scorer-quality.md has the figures).

// Logistic is a logistic regression over standardised features:
// p = 1 / (1 + exp(−(Bias + Σ Weights[i] · (x[i] − Mean[i]) / Scale[i]))). It is deterministic
// and allocation-free; a model with no weights is not usable (Prob returns NaN).
type Logistic struct {
	Mean, Scale, Weights []float64
	Bias                 float64
}

// Logit is the model's log-odds for x (len(x) must be len(Weights)).
func (m Logistic) Logit(x []float64) float64 {
	z := m.Bias
	for i, w := range m.Weights {
		z += w * (x[i] - m.Mean[i]) / m.Scale[i]
	}
	return z
}

// Prob is the model's probability for x.
func (m Logistic) Prob(x []float64) float64 {
	if len(m.Weights) == 0 || len(x) != len(m.Weights) {
		return math.NaN()
	}
	return 1 / (1 + math.Exp(-m.Logit(x)))
}

// AnswerFeatureNames names the answer-level features of AnswerFeatures, in order.
var AnswerFeatureNames = []string{
	"weakest_quarter",   // mean support of the weakest quarter of the claims (raw faithfulness)
	"min_support",       // support of the weakest claim
	"mean_support",      // mean claim support
	"supported_share",   // share of claims with support ≥ threshold
	"min_window",        // lowest share of a claim's weight found in its best passage window
	"mean_global",       // mean share of a claim's weight found anywhere in the context
	"novel_share",       // share of the answer's claim terms found nowhere in the context
	"max_novel_share",   // the highest such share of one claim
	"missing_numbers",   // ln(1 + numbers found nowhere in the context)
	"stray_numbers",     // ln(1 + numbers in the context but not in their claim's best window)
	"missing_names",     // ln(1 + capitalised words found nowhere in the context)
	"contradictions",    // ln(1 + negation mismatches and antonyms against the best window)
	"claims",            // ln(1 + number of claims)
	"answer_terms",      // ln(1 + content terms over all claims)
	"context_windows",   // ln(1 + passage windows in the context)
	"compression",       // ln((answer terms + 1) / (context vocabulary + 1))
	"unsupported_novel", // share of claims below the threshold that hold a term the context lacks
}

// unsupportedNovel is the index of "unsupported_novel" in AnswerFeatureNames.
const unsupportedNovel = 16

// ClaimFeatureNames names the claim-level features of ClaimFeatures, in order: the inputs of
// CitationModel.
var ClaimFeatureNames = []string{
	"support",         // the claim's support
	"window",          // share of its weight in its best window
	"global",          // share of its weight anywhere in the documents
	"terms",           // ln(1 + distinct content terms)
	"novel_share",     // share of its terms found nowhere in the documents
	"missing_numbers", // numbers found nowhere in the documents
	"stray_numbers",   // numbers in the documents but not in the best window
	"missing_names",   // capitalised words found nowhere in the documents
	"contradiction",   // negation mismatch or antonym against the best window (0/1)
}

// claimRow writes the claim-level features of e into x (len(ClaimFeatureNames)). The size of
// the documents is deliberately not a feature: trained on one source passage per answer, it
// would not transfer to the one or two documents a citation names.
func claimRow(x []float64, e claimEvidence) {
	novel := 0.0
	if e.terms > 0 {
		novel = float64(e.novel) / float64(e.terms)
	}
	contra := 0.0
	if e.negation || e.antonyms > 0 {
		contra = 1
	}
	x[0], x[1], x[2] = e.support, e.window, e.global
	x[3], x[4] = math.Log1p(float64(e.terms)), novel
	x[5], x[6], x[7] = float64(e.missingNumbers), float64(e.strayNumbers), float64(e.missingNames)
	x[8] = contra
}

// answerRow writes the answer-level features of the claims' evidence into x
// (len(AnswerFeatureNames)); supports is scratch of len(ev), sorted on return. ev is not empty.
func answerRow(x []float64, ev []claimEvidence, supports []float64, threshold float64, windows, vocab int) {
	n := float64(len(ev))
	minSup, minWin := math.Inf(1), math.Inf(1)
	var sum, global, maxNovel float64
	supported, novelUnsupported := 0, 0
	terms, novel, missNum, strayNum, missName, contra := 0, 0, 0, 0, 0, 0
	for i, e := range ev {
		supports[i] = e.support
		sum += e.support
		global += e.global
		minSup, minWin = math.Min(minSup, e.support), math.Min(minWin, e.window)
		if e.support >= threshold {
			supported++
		} else if e.novel > 0 {
			novelUnsupported++
		}
		if e.terms > 0 {
			maxNovel = math.Max(maxNovel, float64(e.novel)/float64(e.terms))
		}
		terms += e.terms
		novel += e.novel
		missNum += e.missingNumbers
		strayNum += e.strayNumbers
		missName += e.missingNames
		contra += e.antonyms
		if e.negation {
			contra++
		}
	}
	novelShare := 0.0
	if terms > 0 {
		novelShare = float64(novel) / float64(terms)
	}
	x[0] = weakestQuarter(supports)
	x[1], x[2], x[3] = minSup, sum/n, float64(supported)/n
	x[4], x[5] = minWin, global/n
	x[6], x[7] = novelShare, maxNovel
	x[8], x[9] = math.Log1p(float64(missNum)), math.Log1p(float64(strayNum))
	x[10], x[11] = math.Log1p(float64(missName)), math.Log1p(float64(contra))
	x[12], x[13] = math.Log1p(n), math.Log1p(float64(terms))
	x[14] = math.Log1p(float64(windows))
	x[15] = math.Log(float64(terms+1) / float64(vocab+1))
	x[unsupportedNovel] = float64(novelUnsupported) / n
}

// evidence judges every claim of answer against the whole context and returns the answer-level
// features; ok is false when faithfulness cannot be judged.
func (j *judge) evidence(answer string) (x []float64, ok bool) {
	if !hasDocContent(j.docs) {
		return nil, false
	}
	claims := j.claims(answer)
	if len(claims) == 0 {
		return nil, false
	}
	ix := j.index()
	ev := make([]claimEvidence, len(claims))
	for i, c := range claims {
		ix.supportWindow(j.tokens(c), nil, &ev[i])
	}
	x = make([]float64, len(AnswerFeatureNames))
	answerRow(x, ev, make([]float64, len(ev)), j.threshold, len(ix.windows), len(ix.vocab))
	return x, true
}

// citationSupports is the citation decision "the documents docs support claim": CitationModel's
// probability over the claim's evidence against them reaches 0.5.
func (j *judge) citationSupports(claim string, docs map[int]bool) bool {
	var e claimEvidence
	j.index().supportWindow(j.tokens(claim), docs, &e)
	var x [claimFeatures]float64
	claimRow(x[:], e)
	return CitationModel.Prob(x[:]) >= 0.5
}

// claimFeatures is len(ClaimFeatureNames).
const claimFeatures = 9

// AnswerFeatures returns the answer-level evidence features (AnswerFeatureNames) of answer
// against docs, and whether faithfulness can be judged; the training command reads them.
func AnswerFeatures(answer string, docs []record.Document) ([]float64, bool) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	return j.evidence(answer)
}

// ClaimFeatures splits answer into claims and returns each claim's features
// (ClaimFeatureNames) against docs (nil: all of them), for training the citation model.
func ClaimFeatures(answer string, docs []record.Document) (claims []string, rows [][]float64) {
	j := newJudge(docs, DefaultThreshold)
	defer j.release()
	claims = j.claims(answer)
	ix := j.index()
	rows = make([][]float64, len(claims))
	for i, c := range claims {
		var e claimEvidence
		ix.supportWindow(j.tokens(c), nil, &e)
		rows[i] = make([]float64, len(ClaimFeatureNames))
		claimRow(rows[i], e)
	}
	return claims, rows
}
