// Command scorer-quality measures how well the builtin faithfulness scorer agrees with human
// labels on the shared development data (BEGIN dev: wow and cmu; RAGTruth summary), next to a
// word-overlap baseline: ROC AUC, and precision / recall / F1 for "hallucinated" (faithfulness
// below the threshold). Run it from the repository root:
//
//	go run ./internal/cmd/scorer-quality -data ../shared/data
//
// docs/scorer-quality.md quotes its output.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ragwatch/ragwatch/collector/record"
	"github.com/ragwatch/ragwatch/sampler/score/builtin"
	"github.com/ragwatch/ragwatch/sampler/score/builtin/quality"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scorer-quality", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "../shared/data", "directory holding begin/ and ragtruth/")
	threshold := fs.Float64("threshold", builtin.DefaultThreshold, "faithfulness below which an answer counts as hallucinated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	splits, err := quality.LoadAll(*data)
	if err != nil {
		fmt.Fprintf(stderr, "scorer-quality: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "threshold %.2f: an answer is predicted hallucinated when its score is below it\n\n", *threshold)
	fmt.Fprintf(stdout, "%-17s %-22s %5s %5s %7s %6s %6s %6s %10s\n", "split", "scorer", "n", "hall.", "ROC-AUC", "P", "R", "F1", "µs/answer")
	for _, sp := range splits {
		for _, sc := range []struct {
			name string
			f    func(quality.Example) float64
		}{
			{"builtin faithfulness", func(e quality.Example) float64 {
				v, _, ok := builtin.Faithfulness(e.Answer, docs(e))
				if !ok {
					return 1 // nothing to verify: nothing unsupported
				}
				return v
			}},
			{"word overlap", func(e quality.Example) float64 { return builtin.WordOverlap(e.Answer, docs(e)) }},
		} {
			start := time.Now()
			r := quality.Evaluate(sp.Examples, *threshold, sc.f)
			per := float64(time.Since(start).Microseconds()) / float64(max(len(sp.Examples), 1))
			fmt.Fprintf(stdout, "%-17s %-22s %5d %5d %7.3f %6.3f %6.3f %6.3f %10.0f\n",
				sp.Name, sc.name, r.N, r.Hallucinated, r.AUC, r.Precision, r.Recall, r.F1, per)
		}
	}

	// Claim level: RAGTruth labels spans, so each claim the builtin scorer splits off can be
	// labelled (hallucinated when it overlaps a labelled span) and scored on its own.
	for _, sp := range splits {
		if !hasSpans(sp) {
			continue
		}
		var claims []quality.Example
		var support, overlap []float64
		missing := 0
		for _, e := range sp.Examples {
			texts, sup := builtin.ClaimSupports(e.Answer, docs(e))
			labelled, miss := quality.LabelClaims(e, texts)
			missing += miss
			for i, c := range labelled {
				claims = append(claims, quality.Example{Answer: c.Text, Hallucinated: c.Hallucinated})
				support = append(support, sup[i])
				overlap = append(overlap, builtin.WordOverlap(c.Text, docs(e)))
			}
		}
		fmt.Fprintf(stdout, "\nclaim level: a claim is hallucinated when it overlaps a labelled span (%d claims not located)\n", missing)
		fmt.Fprintf(stdout, "%-23s %-22s %5s %5s %7s %6s %6s %6s\n", "split", "scorer", "n", "hall.", "ROC-AUC", "P", "R", "F1")
		for _, row := range []struct {
			name   string
			scores []float64
		}{{"builtin claim support", support}, {"word overlap", overlap}} {
			r := quality.Compare(claims, row.scores, *threshold)
			fmt.Fprintf(stdout, "%-23s %-22s %5d %5d %7.3f %6.3f %6.3f %6.3f\n",
				sp.Name+"/claims", row.name, r.N, r.Hallucinated, r.AUC, r.Precision, r.Recall, r.F1)
		}
	}
	return 0
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
