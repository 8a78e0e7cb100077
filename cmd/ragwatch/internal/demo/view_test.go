package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/internal/synth"
)

// TestCanaryTurns: a quarter of the turns (by trace id) run the canary, whose answers add a
// figure cited to a document that does not hold it; the rest are the baseline, unchanged.
func TestCanaryTurns(t *testing.T) {
	g := synth.New(synth.Options{Seed: 1})
	canaries := 0
	const n = 2000
	for range n {
		turn := g.Next(time.Now())
		answer := turn.Answer
		canary(&turn)
		switch turn.Variant {
		case CanaryVariant:
			canaries++
			if !strings.HasPrefix(turn.Answer, answer+" ") || !strings.HasSuffix(turn.Answer, " [1].") {
				t.Fatalf("canary answer %q from %q", turn.Answer, answer)
			}
		case BaselineVariant:
			if turn.Answer != answer {
				t.Fatalf("baseline answer changed: %q", turn.Answer)
			}
		default:
			t.Fatalf("variant %q", turn.Variant)
		}
	}
	if share := float64(canaries) / n; share < 0.2 || share > 0.3 {
		t.Fatalf("canary share %.3f", share)
	}
}

// TestSummaryListsComparisons: the plain summary's comparison and alert lines, which scripts
// and the e2e demo test read.
func TestSummaryListsComparisons(t *testing.T) {
	lo, hi := -0.687, -0.323
	var b bytes.Buffer
	printSummary(&b, Summary{Requests: 900,
		Comparisons: []comparison.Status{
			{Comparison: "prompt-v2-canary", Candidate: CanaryVariant, Baseline: BaselineVariant, Metric: "faithfulness",
				State: "candidate_worse", Delta: -0.505, Lower: &lo, Upper: &hi, CandidateN: 38, BaselineN: 114,
				WorstTraceIDs: []string{"ec99", "5820"}},
			{Comparison: "prompt-v2-canary", Candidate: CanaryVariant, Baseline: BaselineVariant, Metric: "citation_precision",
				State: "collecting", CandidateN: 1, BaselineN: 3, WorstTraceIDs: []string{}},
		},
		Alerts: []AlertEvent{{Rule: "prompt-v2-canary", Kind: comparison.KindComparison, Severity: "ticket", FiredAt: 19 * time.Second,
			Worst: []string{"ec99", "5820"}},
			{Rule: "faithfulness", Kind: "change", Severity: "page", FiredAt: 21 * time.Second, ChangeAt: 20400 * time.Millisecond, HasChange: true,
				Worst: []string{"ab12"}}},
	})
	for _, want := range []string{
		"\ncomparison prompt-v2-canary prompt-v2 vs prompt-v1 metric=faithfulness state=candidate_worse delta=-0.505 [-0.687, -0.323] n=38/114; worst traces: ec99,5820\n",
		"\ncomparison prompt-v2-canary prompt-v2 vs prompt-v1 metric=citation_precision state=collecting delta=0.000 [unbounded] n=1/3; worst traces: \n",
		"\nalert prompt-v2-canary kind=comparison severity=ticket fired at 19s, still firing; worst traces: ec99,5820\n",
		"\nalert faithfulness kind=change severity=page fired at 21s, still firing; change began at 20.4s; worst traces: ab12\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
