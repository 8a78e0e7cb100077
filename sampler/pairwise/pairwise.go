package pairwise

import (
	"context"
	"math"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Winners: which answer a verdict prefers. a is the baseline, b the candidate.
const (
	WinnerA   = "a"
	WinnerB   = "b"
	WinnerTie = "tie"
)

// Outcomes of a pair from the candidate's (b's) side: the `outcome` label of
// ragwatch_pairwise_total.
const (
	Win          = "win"          // b is better
	Loss         = "loss"         // a is better
	Tie          = "tie"          // the judge found them equal
	Inconsistent = "inconsistent" // the two position orders disagreed: counted as a tie
)

// Outcomes lists every outcome, in label order.
var Outcomes = []string{Win, Loss, Tie, Inconsistent}

// NoComparison is the `comparison` label of pairs no configured comparison names.
const NoComparison = "none"

// Verdict is a judge's decision on one pair.
type Verdict struct {
	Winner     string  // WinnerA, WinnerB or WinnerTie
	Outcome    string  // Win, Loss, Tie or Inconsistent
	Confidence float64 // 0..1
	Reasoning  string
	Judge      string // the judge's name: builtin, openai, anthropic
	Model      string // the judge model, "" for builtin
	// Usage summed over every call the verdict took (both positions, repairs, retries).
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// Judge decides which of two answers to the same request is better. a is the baseline, b the
// candidate. Implementations are safe for concurrent use and redact what they send out.
type Judge interface {
	Name() string
	JudgePair(ctx context.Context, a, b *record.Record) (Verdict, error)
}

// OutcomeOf maps a winner to the outcome from b's side.
func OutcomeOf(winner string) string {
	switch winner {
	case WinnerB:
		return Win
	case WinnerA:
		return Loss
	default:
		return Tie
	}
}

// Swap maps a winner given with the answers shown in swapped positions back to a and b.
func Swap(winner string) string {
	switch winner {
	case WinnerA:
		return WinnerB
	case WinnerB:
		return WinnerA
	default:
		return winner
	}
}

// Combine is the position-swap rule. first is the winner with a shown first, second the
// winner with b shown first, already mapped back to a and b (Swap). When both agree that is
// the verdict; when they disagree the pair is a tie counted as Inconsistent, the guard against
// a judge that prefers a position (or the longer answer whatever its place).
func Combine(first, second string) (winner, outcome string) {
	if first == second {
		return first, OutcomeOf(first)
	}
	return WinnerTie, Inconsistent
}

// Credit is what an outcome counts for b in the win rate: 1 for a win, 0 for a loss, a half
// for a tie or an inconsistent pair.
func Credit(outcome string) float64 {
	switch outcome {
	case Win:
		return 1
	case Loss:
		return 0
	default:
		return 0.5
	}
}

// Orient orders a pair by the first comparison that names their variants: it returns the
// baseline first, the candidate second and the comparison's name. A comparison matches when
// its service is "" or the records', one record has its Baseline variant and the other its
// Candidate ("" = any other variant). Without a match the order is kept and the name is
// NoComparison.
func Orient(comps []config.Comparison, a, b *record.Record) (base, cand *record.Record, comparison string) {
	matches := func(c config.Comparison, x, y *record.Record) bool {
		if c.Service != "" && (x.Service != c.Service || y.Service != c.Service) {
			return false
		}
		if x.Variant != c.Baseline || y.Variant == "" {
			return false
		}
		if c.Candidate == "" {
			return y.Variant != c.Baseline
		}
		return y.Variant == c.Candidate
	}
	for _, c := range comps {
		if matches(c, a, b) {
			return a, b, c.Name
		}
		if matches(c, b, a) {
			return b, a, c.Name
		}
	}
	return a, b, NoComparison
}

// z95 is the two-sided 95 % normal quantile.
const z95 = 1.959963984540054

// Wilson returns the Wilson score interval of a proportion p observed over n (possibly
// fractional, an effective sample size) trials at normal quantile z. With n 0 it is [0, 1].
func Wilson(p, n, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	z2 := z * z
	den := 1 + z2/n
	centre := (p + z2/(2*n)) / den
	half := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / den
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// Rate is the win rate of b over a in one comparison.
type Rate struct {
	Comparison   string  `json:"comparison"`
	Pairs        int     `json:"pairs"` // judged pairs, unweighted
	Wins         int     `json:"wins"`
	Losses       int     `json:"losses"`
	Ties         int     `json:"ties"`
	Inconsistent int     `json:"inconsistent"`
	Estimate     float64 `json:"win_rate"`  // weighted share of b's credit (ties count half)
	Lower        float64 `json:"ci95_low"`  // Wilson 95 % interval over the effective sample size
	Upper        float64 `json:"ci95_high"` //
	EffectiveN   float64 `json:"effective_n"`
}

// Tally adds up outcomes with weights. Each pair weighs 1/p when it was judged with
// probability p; the interval uses Kish's effective sample size (Σw)²/Σw², so unequal weights
// widen it. The zero value is ready; it is not safe for concurrent use.
type Tally struct {
	counts            [4]int
	sumW, sumW2, sumC float64
}

// Add counts one outcome with weight w (w <= 0 counts as 1).
func (t *Tally) Add(outcome string, w float64) {
	if w <= 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		w = 1
	}
	for i, o := range Outcomes {
		if o == outcome {
			t.counts[i]++
		}
	}
	t.sumW += w
	t.sumW2 += w * w
	t.sumC += w * Credit(outcome)
}

// Rate returns the tally's win rate and its 95 % Wilson interval. Without pairs the estimate
// is 0.5 and the interval [0, 1].
func (t *Tally) Rate(comparison string) Rate {
	r := Rate{Comparison: comparison, Wins: t.counts[0], Losses: t.counts[1], Ties: t.counts[2], Inconsistent: t.counts[3]}
	r.Pairs = r.Wins + r.Losses + r.Ties + r.Inconsistent
	if t.sumW <= 0 {
		r.Estimate, r.Lower, r.Upper = 0.5, 0, 1
		return r
	}
	r.Estimate = t.sumC / t.sumW
	r.EffectiveN = t.sumW * t.sumW / t.sumW2
	r.Lower, r.Upper = Wilson(r.Estimate, r.EffectiveN, z95)
	return r
}
