// Command scorer-quality measures how well the builtin faithfulness scorer agrees with human
// labels on the shared development data (BEGIN dev: wow and cmu; RAGTruth summary), next to a
// word-overlap baseline: ROC AUC, and precision / recall / F1 for "hallucinated" (faithfulness
// below the threshold). Run it from the repository root:
//
//	go run ./scripts/scorer-quality -data ../shared/data
//
// docs/scorer-quality.md quotes its output.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin"
	"github.com/ragwatch/ragwatch/sampler/scorers/builtin/quality"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scorer-quality", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "../shared/data", "directory holding begin/ and ragtruth/")
	threshold := fs.Float64("threshold", builtin.DefaultThreshold, "faithfulness below which an answer counts as hallucinated")
	resamples := fs.Int("resamples", 1000, "bootstrap resamples for the confidence intervals")
	fit := fs.Bool("fit-calibration", false, "fit the faithfulness calibration on RAGTruth with cross-validation and write it to -calibration-out")
	fitOut := fs.String("calibration-out", "sampler/scorers/builtin/calibration_fit.go", "where -fit-calibration writes the fitted map (\"\": report only)")
	pairs := fs.Bool("pairwise", false, "measure the builtin pairwise judge on RAGTruth pairs instead")
	margin := fs.Float64("margin", builtin.DefaultPairMargin, "with -pairwise: the builtin pairwise rule's margin")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	splits, err := quality.LoadAll(*data)
	if err != nil {
		fmt.Fprintf(stderr, "scorer-quality: %v\n", err)
		return 1
	}
	if *fit {
		if err := calibrate(stdout, splits, *fitOut); err != nil {
			fmt.Fprintf(stderr, "scorer-quality: %v\n", err)
			return 1
		}
		return 0
	}
	if *pairs {
		for _, sp := range splits {
			if hasSpans(sp) {
				if err := pairReport(stdout, sp, *margin); err != nil {
					fmt.Fprintf(stderr, "scorer-quality: %v\n", err)
					return 1
				}
			}
		}
		return 0
	}
	fmt.Fprintf(stdout, "threshold %.2f: an answer is predicted hallucinated when its score is below it\n", *threshold)
	fmt.Fprintf(stdout, "95%% intervals: %d bootstrap resamples, seed 1; Δ is the paired AUC difference builtin − word overlap\n\n", *resamples)
	fmt.Fprintf(stdout, "RAGTruth is also reported in halves by source passage (quality.Halves): dev, on which the method was developed, and held-out\n\n")
	fmt.Fprintf(stdout, "%-32s %-22s %5s %5s %7s %15s %6s %6s %6s %10s\n", "split", "scorer", "n", "hall.", "ROC-AUC", "95% CI", "P", "R", "F1", "µs/answer")
	var spanned []set
	for _, sp := range splits {
		sets := []set{{sp.Name, sp.Examples}}
		if hasSpans(sp) {
			dev, held := quality.Halves(sp.Examples)
			sets = []set{{sp.Name + "/dev", dev}, {sp.Name + "/held-out", held}, {sp.Name, sp.Examples}}
			spanned = append(spanned, sets...)
		}
		for _, st := range sets {
			answers(stdout, st, *threshold, *resamples)
		}
	}

	// Claim level: RAGTruth labels spans, so each claim the builtin scorer splits off can be
	// labelled (hallucinated when it overlaps a labelled span) and scored on its own.
	for i, st := range spanned {
		var claims []quality.Example
		var support, overlap, cite []float64
		missing := 0
		for _, e := range st.examples {
			texts, sup := builtin.ClaimSupports(e.Answer, docs(e))
			_, rows := builtin.ClaimFeatures(e.Answer, docs(e))
			labelled, miss := quality.LabelClaims(e, texts)
			missing += miss
			for i, c := range labelled {
				claims = append(claims, quality.Example{Answer: c.Text, Hallucinated: c.Hallucinated})
				support = append(support, sup[i])
				overlap = append(overlap, builtin.WordOverlap(c.Text, docs(e)))
				cite = append(cite, builtin.CitationModel.Prob(rows[i]))
			}
		}
		if i == 0 {
			fmt.Fprintf(stdout, "\nclaim level: a claim is hallucinated when it overlaps a labelled span\n")
		}
		if missing > 0 {
			fmt.Fprintf(stdout, "%-32s (%d claims not located in their answer: labelled by the answer)\n", st.name+"/claims", missing)
		}
		report(stdout, st.name+"/claims", claims, [2]row{{name: "builtin claim support", scores: support}, {name: "word overlap", scores: overlap}}, *threshold, *resamples)
		acc, macro := quality.DecisionAgreement(claims, support, builtin.DefaultThreshold)
		fmt.Fprintf(stdout, "%-32s %-22s accuracy %.3f macro-F1 %.3f   (support >= %.2f, the citation decision before the learned model)\n",
			st.name+"/claims", "support threshold", acc, macro, builtin.DefaultThreshold)
		acc, macro = quality.DecisionAgreement(claims, cite, 0.5)
		fmt.Fprintf(stdout, "%-32s %-22s accuracy %.3f macro-F1 %.3f   (citation decision \"the cited document supports the claim\": CitationModel >= 0.5)\n",
			st.name+"/claims", "builtin citation", acc, macro)
	}
	return 0
}

// set is a named list of labelled answers.
type set struct {
	name     string
	examples []quality.Example
}

// answers scores every answer of st with faithfulness and with word overlap and reports both.
func answers(w io.Writer, st set, threshold float64, resamples int) {
	var rows [2]row
	rows[0].name, rows[1].name = "builtin faithfulness", "word overlap"
	start := time.Now()
	unjudged := 0
	for _, e := range st.examples {
		v, _, ok := builtin.Faithfulness(e.Answer, docs(e))
		if !ok {
			// Online the metric is omitted: no flag, as for a faithful answer.
			v = 1
			unjudged++
		}
		rows[0].scores = append(rows[0].scores, v)
	}
	rows[0].micros = float64(time.Since(start).Microseconds()) / float64(max(len(st.examples), 1))
	start = time.Now()
	for _, e := range st.examples {
		rows[1].scores = append(rows[1].scores, builtin.WordOverlap(e.Answer, docs(e)))
	}
	rows[1].micros = float64(time.Since(start).Microseconds()) / float64(max(len(st.examples), 1))
	report(w, st.name, st.examples, rows, threshold, resamples)
	cal := make([]float64, len(rows[0].scores))
	for i, v := range rows[0].scores {
		cal[i] = builtin.CalibrateFaithfulness(v)
	}
	rep := quality.Compare(st.examples, cal, 0.5)
	fmt.Fprintf(w, "%-32s %-22s %5d %5d %7.3f %17s %6.3f %6.3f %6.3f   (reported value, at 0.5)\n",
		st.name, "builtin calibrated", rep.N, rep.Hallucinated, rep.AUC, "", rep.Precision, rep.Recall, rep.F1)
	if unjudged > 0 {
		fmt.Fprintf(w, "%-32s (%d answers hold no verifiable claim, e.g. \"yes\": builtin omits faithfulness, scored 1 here)\n", st.name, unjudged)
	}
}

type row struct {
	name   string
	scores []float64
	micros float64 // per answer; 0: not timed
}

// report prints one line per scorer and the paired difference of the two.
func report(w io.Writer, split string, ex []quality.Example, rows [2]row, threshold float64, resamples int) {
	ia, ib, diff := quality.BootstrapAUC(ex, rows[0].scores, rows[1].scores, resamples, 1)
	for i, r := range rows {
		rep := quality.Compare(ex, r.scores, threshold)
		ci := []quality.Interval{ia, ib}[i]
		timing := ""
		if r.micros > 0 {
			timing = fmt.Sprintf("%10.0f", r.micros)
		}
		fmt.Fprintf(w, "%-32s %-22s %5d %5d %7.3f  [%.3f, %.3f] %6.3f %6.3f %6.3f %s\n",
			split, r.name, rep.N, rep.Hallucinated, rep.AUC, ci.Lo, ci.Hi, rep.Precision, rep.Recall, rep.F1, timing)
	}
	a := quality.Compare(ex, rows[0].scores, threshold).AUC - quality.Compare(ex, rows[1].scores, threshold).AUC
	fmt.Fprintf(w, "%-32s %-22s %+.3f [%+.3f, %+.3f]\n", split, "Δ AUC", a, diff.Lo, diff.Hi)
}

// hasSpans reports whether the split labels hallucinated spans.
func hasSpans(sp quality.Split) bool {
	for _, e := range sp.Examples {
		if len(e.Spans) > 0 {
			return true
		}
	}
	return false
}

func docs(e quality.Example) []record.Document {
	return []record.Document{{ID: "context", Content: e.Context}}
}
