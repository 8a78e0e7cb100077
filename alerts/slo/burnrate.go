package slo

import "time"

// Good classifies a sample of a burn-rate SLO: a sample x is good when `x Op Value`.
type Good struct {
	Op    string // >=, >, <=, <
	Value float64
}

// Is reports whether x is good.
func (g Good) Is(x float64) bool {
	switch g.Op {
	case ">=":
		return x >= g.Value
	case ">":
		return x > g.Value
	case "<=":
		return x <= g.Value
	}
	return x < g.Value
}

// Badness orders samples for evidence: the further on the bad side, the worse.
func (g Good) Badness(x float64) float64 {
	if g.Op == ">=" || g.Op == ">" {
		return -x
	}
	return x
}

// ErrorRatio is the weighted share of bad samples in sums whose values are 1 (good) or 0.
// An empty window has no errors.
func ErrorRatio(s Sums) float64 {
	if s.W <= 0 {
		return 0
	}
	r := 1 - s.WX/s.W
	if r < 0 {
		return 0
	}
	return r
}

// BurnRate is how fast the error budget burns: 1 spends exactly the budget over the period.
func BurnRate(errorRatio, objective float64) float64 { return errorRatio / (1 - objective) }

// BudgetRemaining is the share of the period's error budget left (negative when overspent):
// 1 − bad/((1−objective)·total), 1 for an empty period.
func BudgetRemaining(period Sums, objective float64) float64 {
	if period.W <= 0 {
		return 1
	}
	return 1 - ErrorRatio(period)/(1-objective)
}

// Pair is one alert of the multi-window multi-burn-rate scheme: it fires when the error budget
// burns faster than Factor over both LongWindow and ShortWindow.
type Pair struct {
	Severity    string
	LongWindow  time.Duration
	ShortWindow time.Duration
	Factor      float64
}

// PairVerdict is the evaluation of one long/short window pair.
type PairVerdict struct {
	Pair            Pair
	LongBurn        float64
	ShortBurn       float64
	LongN, ShortN   int64
	Breach          bool
	LongErrorRatio  float64
	ShortErrorRatio float64
}

// EvaluatePair fires when both windows burn faster than the factor; the long window needs
// min_samples and the short window at least one sample.
func EvaluatePair(p Pair, long, short Sums, objective float64, minSamples int64) PairVerdict {
	v := PairVerdict{Pair: p, LongN: long.N, ShortN: short.N,
		LongErrorRatio: ErrorRatio(long), ShortErrorRatio: ErrorRatio(short)}
	v.LongBurn = BurnRate(v.LongErrorRatio, objective)
	v.ShortBurn = BurnRate(v.ShortErrorRatio, objective)
	v.Breach = long.N >= minSamples && short.N > 0 && v.LongBurn > p.Factor && v.ShortBurn > p.Factor
	return v
}

// FineLimit is the longest window kept at fine resolution; longer windows and the budget
// period use hourly buckets.
const FineLimit = 6 * time.Hour

// Resolutions picks bucket widths and spans for a burn-rate SLO: fine buckets (≤ 1m) for
// windows up to FineLimit, hourly buckets for longer windows and the period.
func Resolutions(pairs []Pair, period time.Duration) (fineWidth, fineSpan, coarseWidth, coarseSpan time.Duration) {
	fineWidth = time.Minute
	fineSpan = 5 * time.Minute
	for _, p := range pairs {
		for _, w := range []time.Duration{p.ShortWindow, p.LongWindow} {
			if w <= FineLimit {
				fineSpan = max(fineSpan, w)
				fineWidth = min(fineWidth, max(time.Second, (w/5).Truncate(time.Second)))
			}
		}
	}
	coarseWidth = time.Hour
	coarseSpan = period
	for _, p := range pairs {
		coarseSpan = max(coarseSpan, p.LongWindow)
	}
	return
}

// ThresholdWidth is the bucket width of a threshold SLO's window: a tenth of it, at most a
// minute, at least a second; windows over an hour use 60 buckets so memory stays bounded.
func ThresholdWidth(window time.Duration) time.Duration {
	if window > time.Hour {
		return (window / 60).Truncate(time.Second)
	}
	return max(time.Second, min(time.Minute, (window/10).Truncate(time.Second)))
}
