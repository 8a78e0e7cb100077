// Command trainbuiltin trains the builtin scorer's learned combiners (sampler/scorers/builtin,
// learned.go) on the shared development data and writes them, with the command and the data's
// provenance, to sampler/scorers/builtin/model_fit.go. Run it from the repository root:
//
//	go run ./scripts/trainbuiltin -data ../shared/data
//
// Three logistic models over the evidence the builtin scorer already computes:
//   - faithfulness: answer-level features → the answer is faithful;
//   - citation: claim-level features → the documents support the claim;
//   - pairwise: the difference of two answers' features → the second is the more faithful.
//
// Leakage: the held-out data is fixed before training and never read by it. RAGTruth is cut in
// halves by source passage (quality.Halves, FNV-1a of the passage): every model is trained on
// the development half only, its penalty and decision threshold chosen by 5-fold
// cross-validation inside that half (folds by source passage as well). BEGIN is never trained on
// (-begin-train adds its development half by knowledge passage; off by default). The report
// gives the cross-validated figures on the training half and the figures on the held-out half
// and on BEGIN next to today's rule. docs/scorer-quality.md quotes it.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"go/format"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

// dataFiles are the files the command reads, relative to -data: their digests go into the
// generated file.
var dataFiles = []string{"begin/begin_dev_wow.tsv", "begin/begin_dev_cmu.tsv", "ragtruth/ragtruth_summary.jsonl"}

// lambdas is the grid of L2 penalties cross-validation chooses from.
var lambdas = []float64{0.01, 0.1, 1, 10, 100}

const folds = 5

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trainbuiltin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "../shared/data", "directory holding begin/ and ragtruth/ (read only)")
	out := fs.String("out", "sampler/scorers/builtin/model_fit.go", "where to write the fitted models (\"\": report only)")
	beginTrain := fs.Bool("begin-train", false, "also train the faithfulness model on BEGIN's development half (by knowledge passage)")
	exp := fs.Bool("experiments", false, "also report the candidate faithfulness evidence and models that were measured and not adopted (experiments.go)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := train(stdout, *data, *out, *beginTrain, *exp); err != nil {
		fmt.Fprintf(stderr, "trainbuiltin: %v\n", err)
		return 1
	}
	return 0
}

// item is one labelled answer with its features.
type item struct {
	ex      quality.Example
	x       []float64 // nil: faithfulness cannot be judged (scored 1, as online: no flag)
	raw     float64   // today's raw faithfulness (weakest quarter); 1 when not judged
	source  string    // the passage, for folds and pairs
	isTrain bool
}

func featurize(ex []quality.Example, train func(quality.Example) bool) []item {
	out := make([]item, len(ex))
	for i, e := range ex {
		d := docs(e)
		x, ok := builtin.AnswerFeatures(e.Answer, d)
		it := item{ex: e, source: e.Context, isTrain: train(e), raw: 1}
		if ok {
			it.x, it.raw = x, x[0]
		}
		out[i] = it
	}
	return out
}

func docs(e quality.Example) []record.Document {
	return []record.Document{{ID: "context", Content: e.Context}}
}

// fold assigns a source passage to a cross-validation fold.
func fold(source string) int {
	h := fnv.New32a()
	h.Write([]byte(source))
	return int(h.Sum32()>>1) % folds
}

func train(w io.Writer, dir, out string, beginTrain, exp bool) error {
	splits, err := quality.LoadAll(dir)
	if err != nil {
		return err
	}
	prov, err := provenance(dir)
	if err != nil {
		return err
	}
	var rt []quality.Example
	var begin []quality.Split
	for _, sp := range splits {
		if sp.Name == "ragtruth-summary" {
			rt = sp.Examples
		} else {
			begin = append(begin, sp)
		}
	}
	if len(rt) == 0 {
		return fmt.Errorf("no ragtruth-summary split in %s", dir)
	}
	rtItems := featurize(rt, quality.IsDev)
	var trainItems []item
	for _, it := range rtItems {
		if it.isTrain {
			trainItems = append(trainItems, it)
		}
	}
	beginItems := map[string][]item{}
	for _, sp := range begin {
		beginItems[sp.Name] = featurize(sp.Examples, func(e quality.Example) bool { return beginTrain && quality.IsDev(e) })
		for _, it := range beginItems[sp.Name] {
			if it.isTrain {
				trainItems = append(trainItems, it)
			}
		}
	}
	fmt.Fprintf(w, "data %s\n", dir)
	for _, p := range prov {
		fmt.Fprintf(w, "  %s\n", p)
	}

	// Faithfulness.
	var fx [][]float64
	var fy []bool
	var fsrc []string
	for _, it := range trainItems {
		if it.x != nil {
			fx, fy, fsrc = append(fx, it.x), append(fy, !it.ex.Hallucinated), append(fsrc, it.source)
		}
	}
	fmt.Fprintf(w, "\nfaithfulness model: logistic regression on %d features, trained on %d answers (RAGTruth dev half", len(builtin.AnswerFeatureNames), len(fx))
	if beginTrain {
		fmt.Fprintf(w, " + BEGIN dev halves")
	}
	fmt.Fprintf(w, ")\n")
	faith, lam, oof := selectAndFit(w, fx, fy, fsrc, fitOptions{}, builtin.AnswerFeatureNames)
	thr := bestF1Threshold(fy, oof)
	faith = shiftBias(faith, thr)
	fmt.Fprintf(w, "chosen lambda %g; decision: out-of-fold F1-best probability %.4f becomes 0.5\n", lam, thr)
	oofShifted := make([]float64, len(oof))
	for i, p := range oof {
		oofShifted[i] = shiftProb(p, thr)
	}
	ex := make([]quality.Example, len(fy))
	for i, y := range fy {
		ex[i] = quality.Example{Hallucinated: !y}
	}
	r := quality.Compare(ex, oofShifted, 0.5)
	fmt.Fprintf(w, "cross-validated (out of fold, %d folds by source passage): n %d ROC-AUC %.3f P %.3f R %.3f F1@0.5 %.3f\n\n", folds, r.N, r.AUC, r.Precision, r.Recall, r.F1)

	fmt.Fprintf(w, "%-26s %-24s %5s %5s %7s %6s %6s %6s\n", "split", "scorer", "n", "hall.", "ROC-AUC", "P", "R", "F1@0.5")
	evalSet := func(name string, items []item) {
		var ex []quality.Example
		var todayCal, learned []float64
		for _, it := range items {
			ex = append(ex, it.ex)
			todayCal = append(todayCal, builtin.CalibrateFaithfulness(it.raw))
			v := 1.0
			if it.x != nil {
				v = faith.Prob(it.x)
			}
			learned = append(learned, v)
		}
		for _, row := range []struct {
			name   string
			scores []float64
		}{{"today (calibrated)", todayCal}, {"learned", learned}} {
			r := quality.Compare(ex, row.scores, 0.5)
			fmt.Fprintf(w, "%-26s %-24s %5d %5d %7.3f %6.3f %6.3f %6.3f\n", name, row.name, r.N, r.Hallucinated, r.AUC, r.Precision, r.Recall, r.F1)
		}
	}
	var rtTrain, rtHeld []item
	for _, it := range rtItems {
		if it.isTrain {
			rtTrain = append(rtTrain, it)
		} else {
			rtHeld = append(rtHeld, it)
		}
	}
	evalSet("ragtruth/dev (trained)", rtTrain)
	evalSet("ragtruth/held-out", rtHeld)
	for _, sp := range begin {
		items := beginItems[sp.Name]
		if beginTrain {
			var held []item
			for _, it := range items {
				if !it.isTrain {
					held = append(held, it)
				}
			}
			evalSet(sp.Name+"/held-out", held)
		}
		evalSet(sp.Name, items)
	}

	// Citation decision.
	citation, citeThr := trainCitation(w, rt)

	// Pairwise.
	trainPairs(w, rtItems, faith)

	if exp {
		experiments(w, rtItems)
	}

	if out == "" {
		return nil
	}
	src := generate(prov, citation, citeThr)
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s\n", out)
	return nil
}

// minGain is the out-of-fold ROC AUC a feature must add to be selected.
const minGain = 0.002

// selectAndFit selects features by greedy forward selection on out-of-fold ROC AUC (at
// penalty 1): starting from none, it adds the feature that raises the cross-validated AUC most,
// while that gain is at least minGain. Then it chooses the penalty and fits (crossFit) on the
// selected features; the others keep weight 0 in the returned model. Every choice is made on
// the training rows by cross-validation.
func selectAndFit(w io.Writer, x [][]float64, y []bool, src []string, o fitOptions, names []string) (builtin.Logistic, float64, []float64) {
	var chosen []int
	bestAUC := 0.5
	for {
		add, addAUC := -1, bestAUC
		for j := range names {
			if slices.Contains(chosen, j) {
				continue
			}
			fo := o
			fo.lambda = 1
			oof := outOfFold(only(x, append(slices.Clone(chosen), j)), y, src, fo)
			if auc := quality.ROCAUC(oof, y); auc > addAUC+1e-12 {
				add, addAUC = j, auc
			}
		}
		if add < 0 || addAUC-bestAUC < minGain {
			break
		}
		chosen, bestAUC = append(chosen, add), addAUC
		fmt.Fprintf(w, "  selected %-18s out-of-fold ROC-AUC %.4f\n", names[add], addAUC)
	}
	if len(chosen) == 0 {
		chosen = []int{0}
	}
	m, lam, oof := crossFit(w, only(x, chosen), y, src, o)
	full := builtin.Logistic{Bias: m.Bias, Mean: make([]float64, len(names)), Scale: make([]float64, len(names)), Weights: make([]float64, len(names))}
	for j := range names {
		full.Scale[j] = 1
	}
	for k, j := range chosen {
		full.Mean[j], full.Scale[j], full.Weights[j] = m.Mean[k], m.Scale[k], m.Weights[k]
	}
	return full, lam, oof
}

// only keeps the columns cols of x (a feature outside them is constant 0).
func only(x [][]float64, cols []int) [][]float64 {
	out := make([][]float64, len(x))
	for i, r := range x {
		out[i] = make([]float64, len(cols))
		for k, j := range cols {
			out[i][k] = r[j]
		}
	}
	return out
}

// crossFit chooses the penalty by out-of-fold ROC AUC (folds by source), reports each, and
// returns the model fitted on all rows at the chosen penalty with its out-of-fold predictions.
func crossFit(w io.Writer, x [][]float64, y []bool, src []string, o fitOptions) (builtin.Logistic, float64, []float64) {
	best, bestAUC := lambdas[0], -1.0
	var bestOOF []float64
	for _, lam := range lambdas {
		o.lambda = lam
		oof := outOfFold(x, y, src, o)
		auc := quality.ROCAUC(oof, y)
		fmt.Fprintf(w, "  lambda %-6g out-of-fold ROC-AUC %.4f\n", lam, auc)
		if auc > bestAUC+1e-9 {
			best, bestAUC, bestOOF = lam, auc, oof
		}
	}
	o.lambda = best
	return fitLogistic(x, y, o), best, bestOOF
}

// outOfFold predicts each row by the model fitted on the other folds.
func outOfFold(x [][]float64, y []bool, src []string, o fitOptions) []float64 {
	oof := make([]float64, len(x))
	for k := range folds {
		var tx [][]float64
		var ty []bool
		var tw []float64
		for i := range x {
			if fold(src[i]) != k {
				tx, ty = append(tx, x[i]), append(ty, y[i])
				if o.weights != nil {
					tw = append(tw, o.weights[i])
				}
			}
		}
		fo := o
		fo.weights = tw
		m := fitLogistic(tx, ty, fo)
		for i := range x {
			if fold(src[i]) == k {
				oof[i] = m.Prob(x[i])
			}
		}
	}
	return oof
}

// bestF1Threshold is the probability below which flagging "not faithful" (y false) maximises
// F1 on the given predictions.
func bestF1Threshold(y []bool, p []float64) float64 {
	ex := make([]quality.Example, len(y))
	for i := range y {
		ex[i] = quality.Example{Hallucinated: !y[i]}
	}
	c := slices.Clone(p)
	slices.Sort(c)
	c = slices.Compact(c)
	best, thr := -1.0, 0.5
	for i := 0; i+1 < len(c); i++ {
		t := (c[i] + c[i+1]) / 2
		if f := quality.Compare(ex, p, t).F1; f > best {
			best, thr = f, t
		}
	}
	return thr
}

// shiftProb is p after shiftBias(·, thr): thr maps to 0.5.
func shiftProb(p, thr float64) float64 {
	z := math.Log(p/(1-p)) - math.Log(thr/(1-thr))
	return 1 / (1 + math.Exp(-z))
}

// provenance lists each data file with its size and SHA-256.
func provenance(dir string) ([]string, error) {
	var out []string
	for _, f := range dataFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, fmt.Sprintf("%s %d bytes sha256 %s", f, len(b), hex.EncodeToString(sum[:])))
	}
	return out, nil
}

// generate renders the fitted models as Go source.
func generate(prov []string, citation builtin.Logistic, citeThr float64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by `go run ./scripts/trainbuiltin -data ../shared/data`; DO NOT EDIT.\n\n")
	b.WriteString("package builtin\n\n")
	b.WriteString("// Trained on the shared development data (read only, not in the repository):\n")
	for _, p := range prov {
		fmt.Fprintf(&b, "//   %s\n", p)
	}
	b.WriteString("// Training rows: the claims of the RAGTruth development half (quality.Halves); the held-out\n")
	b.WriteString("// half is only measured (docs/scorer-quality.md).\n\n")
	model := func(name, doc string, m builtin.Logistic, names []string) {
		fmt.Fprintf(&b, "// %s\nvar %s = Logistic{\n", doc, name)
		fmt.Fprintf(&b, "\tBias: %s,\n", num(m.Bias))
		for _, f := range []struct {
			field string
			v     []float64
		}{{"Weights", m.Weights}, {"Mean", m.Mean}, {"Scale", m.Scale}} {
			fmt.Fprintf(&b, "\t%s: []float64{\n", f.field)
			for i, v := range f.v {
				fmt.Fprintf(&b, "\t\t%s, // %s\n", num(v), names[i])
			}
			b.WriteString("\t},\n")
		}
		b.WriteString("}\n\n")
	}
	model("CitationModel", fmt.Sprintf("CitationModel: claim features (ClaimFeatureNames) → probability the documents support the claim; 0.5 is the out-of-fold macro-F1-best decision (%.4f before the shift). A feature with weight 0 was not selected.", citeThr), citation, builtin.ClaimFeatureNames)
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		panic(fmt.Sprintf("generated model source does not parse: %v", err)) // a bug in generate
	}
	return src
}

// num formats a weight with enough digits to be read back to the same model within 1e-9.
func num(v float64) string {
	s := fmt.Sprintf("%.10g", v)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
