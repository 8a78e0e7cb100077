package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"slices"

	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// calibrationFolds is the number of cross-validation folds, by source passage.
const calibrationFolds = 5

// rawFaithfulness is the builtin's uncalibrated faithfulness of every example: 1 when it holds
// no verifiable claim (online the metric is omitted, which flags nothing).
func rawFaithfulness(ex []quality.Example) []float64 {
	out := make([]float64, len(ex))
	for i, e := range ex {
		v, _, ok := builtin.Faithfulness(e.Answer, docs(e))
		if !ok {
			v = 1
		}
		out[i] = v
	}
	return out
}

// fitCalibration fits the logistic map on labelled raw scores in two steps: Center is the raw
// threshold that maximises F1 for flagging hallucinated answers (raw < Center), so that the
// calibrated 0.5 is that decision; Slope then maximises the likelihood of the labels
// (faithful = 1) under 1/(1+exp(-Slope·(raw − Center))). The log-likelihood is concave in
// Slope, so a golden-section search finds it.
func fitCalibration(ex []quality.Example, raw []float64) builtin.Calibration {
	center, _ := bestF1Threshold(ex, raw)
	ll := func(a float64) float64 {
		var s float64
		for i, e := range ex {
			p := builtin.Calibration{Center: center, Slope: a}.Apply(raw[i])
			p = min(max(p, 1e-12), 1-1e-12)
			if e.Hallucinated {
				s += math.Log(1 - p)
			} else {
				s += math.Log(p)
			}
		}
		return s
	}
	lo, hi := 0.01, 200.0
	g := (math.Sqrt(5) - 1) / 2
	for range 100 {
		a, b := hi-g*(hi-lo), lo+g*(hi-lo)
		if ll(a) < ll(b) {
			lo = a
		} else {
			hi = b
		}
	}
	return builtin.Calibration{Center: round4(center), Slope: round4((lo + hi) / 2)}
}

// bestF1Threshold is the raw threshold t that maximises the F1 of flagging hallucinated answers
// (raw < t), midway between two observed values, and that F1.
func bestF1Threshold(ex []quality.Example, raw []float64) (t, f1 float64) {
	cands := slices.Clone(raw)
	slices.Sort(cands)
	cands = slices.Compact(cands)
	best, thr := -1.0, 0.5
	for i := 0; i+1 < len(cands); i++ {
		t := (cands[i] + cands[i+1]) / 2
		if f := quality.Compare(ex, raw, t).F1; f > best {
			best, thr = f, t
		}
	}
	return thr, best
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// fold assigns an example to a cross-validation fold by its source passage, so that all answers
// to one passage are in the same fold.
func fold(e quality.Example) int {
	h := fnv.New32a()
	h.Write([]byte(e.Context))
	return int(h.Sum32()>>1) % calibrationFolds
}

// calibrate fits the faithfulness calibration on the development half of the RAGTruth summary
// split (quality.IsDev) with cross-validation inside it, reports the out-of-fold figures, the
// held-out half and BEGIN (neither used for fitting), and writes the map fitted on the whole
// development half to out as Go source. The held-out half is never read by the fit, so its
// figures at 0.5 are figures on data the map was not tuned on.
func calibrate(w io.Writer, splits []quality.Split, out string) error {
	var rt, held []quality.Example
	for _, sp := range splits {
		if sp.Name == "ragtruth-summary" {
			for _, e := range sp.Examples {
				if quality.IsDev(e) {
					rt = append(rt, e)
				} else {
					held = append(held, e)
				}
			}
		}
	}
	if len(rt) == 0 {
		return fmt.Errorf("no ragtruth-summary split to fit on")
	}
	raw := rawFaithfulness(rt)
	oof := make([]float64, len(rt))
	fmt.Fprintf(w, "faithfulness calibration: logistic map, center = F1-best raw threshold, slope by maximum likelihood\n")
	fmt.Fprintf(w, "fitted on ragtruth-summary/dev (quality.Halves); %d-fold cross-validation inside it, folds by source passage\n\n", calibrationFolds)
	fmt.Fprintf(w, "%-6s %7s %8s %5s %7s %6s %6s %6s\n", "fold", "center", "slope", "n", "ROC-AUC", "P", "R", "F1@0.5")
	for k := range calibrationFolds {
		var trainEx, testEx []quality.Example
		var trainRaw []float64
		var testIdx []int
		for i, e := range rt {
			if fold(e) == k {
				testEx, testIdx = append(testEx, e), append(testIdx, i)
			} else {
				trainEx, trainRaw = append(trainEx, e), append(trainRaw, raw[i])
			}
		}
		c := fitCalibration(trainEx, trainRaw)
		cal := make([]float64, len(testIdx))
		for j, i := range testIdx {
			oof[i] = c.Apply(raw[i])
			cal[j] = oof[i]
		}
		r := quality.Compare(testEx, cal, 0.5)
		fmt.Fprintf(w, "%-6d %7.4f %8.4f %5d %7.3f %6.3f %6.3f %6.3f\n", k, c.Center, c.Slope, r.N, r.AUC, r.Precision, r.Recall, r.F1)
	}
	r := quality.Compare(rt, oof, 0.5)
	fmt.Fprintf(w, "%-6s %7s %8s %5d %7.3f %6.3f %6.3f %6.3f   (out-of-fold, pooled)\n\n", "all", "", "", r.N, r.AUC, r.Precision, r.Recall, r.F1)

	c := fitCalibration(rt, raw)
	fmt.Fprintf(w, "fitted on all of ragtruth-summary/dev: center %.4f, slope %.4f\n", c.Center, c.Slope)
	report := func(name string, ex []quality.Example) {
		cal := rawFaithfulness(ex)
		for i := range cal {
			cal[i] = c.Apply(cal[i])
		}
		r := quality.Compare(ex, cal, 0.5)
		fmt.Fprintf(w, "%-26s (not used for fitting) n %d ROC-AUC %.3f P %.3f R %.3f F1@0.5 %.3f\n", name, r.N, r.AUC, r.Precision, r.Recall, r.F1)
	}
	report("ragtruth-summary/held-out", held)
	// The ceiling of any calibration: a monotone map's decision at 0.5 is a threshold on the raw
	// score, and no threshold does better on the held-out half than the one chosen on it.
	hraw := rawFaithfulness(held)
	ht, hf := bestF1Threshold(held, hraw)
	fmt.Fprintf(w, "%-26s ceiling: the best F1 of any raw threshold, chosen on this half itself: %.3f at raw %.4f\n", "ragtruth-summary/held-out", hf, ht)
	for _, sp := range splits {
		if sp.Name != "ragtruth-summary" {
			report(sp.Name, sp.Examples)
		}
	}
	src := fmt.Sprintf(`// Code generated by `+"`go run ./scripts/scorer-quality -data ../shared/data -fit-calibration`"+`; DO NOT EDIT.

package builtin

// FaithfulnessCalibration is fitted on the development half of the RAGTruth summary split
// (%d answers, quality.Halves; %d-fold cross-validated inside it; the held-out half is only
// measured, see docs/scorer-quality.md): raw faithfulness %.4f maps to 0.5.
var FaithfulnessCalibration = Calibration{Center: %v, Slope: %v}
`, len(rt), calibrationFolds, c.Center, c.Center, c.Slope)
	if out == "" {
		return nil
	}
	if err := os.WriteFile(out, []byte(src), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}
