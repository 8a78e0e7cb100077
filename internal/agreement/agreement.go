package agreement

import (
	"math"
	"sort"
	"time"
)

// Statistics, as the `statistic` label of ragwatch_judge_agreement and the middle word of an
// SLO metric name (agreement_<statistic>_<metric>).
const (
	MAE      = "mae"      // mean absolute error: lower is better
	Spearman = "spearman" // rank correlation in [-1, 1]: higher is better
	Kappa    = "kappa"    // Cohen's kappa at Threshold in [-1, 1]: higher is better
)

// Statistics lists every statistic in a fixed order.
var Statistics = []string{MAE, Spearman, Kappa}

// Threshold splits values into pass (>= Threshold) and fail for kappa.
const Threshold = 0.5

// z95 is the two-sided 95% normal quantile.
const z95 = 1.959963984540054

// Pair is one record's value for one metric from a person and from a judge.
type Pair struct {
	Human, Judge float64
	Time         time.Time
}

// Estimate is a statistic with its 95% confidence interval. OK is false when the statistic is
// undefined for the pairs (too few, or no variance): Value, Lower and Upper are then 0.
type Estimate struct {
	Value, Lower, Upper float64
	N                   int
	OK                  bool
}

// MeanAbsError is the mean of |human - judge| with a normal-approximation interval: mean ±
// 1.96·s/√n (s the sample standard deviation of the absolute errors), the lower end clipped at
// 0. It needs two pairs.
func MeanAbsError(pairs []Pair) Estimate {
	n := len(pairs)
	if n < 2 {
		return Estimate{N: n}
	}
	sum := 0.0
	for _, p := range pairs {
		sum += math.Abs(p.Human - p.Judge)
	}
	mean := sum / float64(n)
	ss := 0.0
	for _, p := range pairs {
		d := math.Abs(p.Human-p.Judge) - mean
		ss += d * d
	}
	half := z95 * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	return Estimate{Value: mean, Lower: math.Max(0, mean-half), Upper: mean + half, N: n, OK: true}
}

// SpearmanRho is Spearman's rank correlation: Pearson's correlation of the ranks, tied values
// sharing their average rank. The interval is Fisher's z with the variance 1.06/(n-3) of
// Fieller, Hartley and Pearson (1957) for rank correlations: tanh(atanh(ρ) ± 1.96·√(1.06/(n-3))).
// It needs four pairs and some variance on both sides.
func SpearmanRho(pairs []Pair) Estimate {
	n := len(pairs)
	if n < 4 {
		return Estimate{N: n}
	}
	h := make([]float64, n)
	j := make([]float64, n)
	for i, p := range pairs {
		h[i], j[i] = p.Human, p.Judge
	}
	rho, ok := pearson(Ranks(h), Ranks(j))
	if !ok {
		return Estimate{N: n}
	}
	// atanh(±1) is infinite: keep the interval finite at perfect (dis)agreement.
	z := math.Atanh(math.Max(-0.999999, math.Min(0.999999, rho)))
	half := z95 * math.Sqrt(1.06/float64(n-3))
	return Estimate{Value: rho, Lower: math.Tanh(z - half), Upper: math.Tanh(z + half), N: n, OK: true}
}

// CohenKappa is Cohen's kappa of the pass/fail verdicts (value >= Threshold) of person and
// judge: (po - pe) / (1 - pe), po the observed agreement and pe the agreement expected by
// chance from each side's pass rate. The interval is ± 1.96·SE with Cohen's (1960) standard
// error √(po(1-po) / (n(1-pe)²)), clipped to [-1, 1]. It is undefined when pe is 1 (both
// sides give one verdict only) or with fewer than two pairs.
func CohenKappa(pairs []Pair) Estimate {
	n := len(pairs)
	if n < 2 {
		return Estimate{N: n}
	}
	var agree, hPass, jPass float64
	for _, p := range pairs {
		hp, jp := p.Human >= Threshold, p.Judge >= Threshold
		if hp == jp {
			agree++
		}
		if hp {
			hPass++
		}
		if jp {
			jPass++
		}
	}
	fn := float64(n)
	po := agree / fn
	ph, pj := hPass/fn, jPass/fn
	pe := ph*pj + (1-ph)*(1-pj)
	if pe >= 1 {
		return Estimate{N: n}
	}
	k := (po - pe) / (1 - pe)
	se := math.Sqrt(po * (1 - po) / (fn * (1 - pe) * (1 - pe)))
	return Estimate{Value: k, Lower: math.Max(-1, k-z95*se), Upper: math.Min(1, k+z95*se), N: n, OK: true}
}

// Compute returns the named statistic (MAE, Spearman or Kappa) of pairs.
func Compute(statistic string, pairs []Pair) Estimate {
	switch statistic {
	case MAE:
		return MeanAbsError(pairs)
	case Spearman:
		return SpearmanRho(pairs)
	case Kappa:
		return CohenKappa(pairs)
	}
	return Estimate{N: len(pairs)}
}

// Ranks returns the 1-based rank of each value, ties getting the mean of the ranks they span.
func Ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		r := float64(i+j)/2 + 1 // mean of ranks i+1 .. j+1
		for k := i; k <= j; k++ {
			out[idx[k]] = r
		}
		i = j + 1
	}
	return out
}

func pearson(x, y []float64) (float64, bool) {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

// Window holds the most recent pairs of one metric and judge: those younger than Age (0: no
// age limit), at most Max of them (the oldest dropped first). It is not safe for concurrent
// use.
type Window struct {
	Age   time.Duration
	Max   int
	pairs []Pair // in arrival order
}

// Add appends a pair and drops those the window no longer holds at p.Time.
func (w *Window) Add(p Pair) {
	w.pairs = append(w.pairs, p)
	w.Prune(p.Time)
}

// Prune drops the pairs older than Age at now and the oldest beyond Max.
func (w *Window) Prune(now time.Time) {
	drop := 0
	if w.Age > 0 {
		for drop < len(w.pairs) && now.Sub(w.pairs[drop].Time) > w.Age {
			drop++
		}
	}
	if w.Max > 0 && len(w.pairs)-drop > w.Max {
		drop = len(w.pairs) - w.Max
	}
	if drop > 0 {
		w.pairs = append(w.pairs[:0], w.pairs[drop:]...)
	}
}

// Pairs returns the pairs in the window; the slice is the window's own and valid until the
// next Add or Prune.
func (w *Window) Pairs() []Pair { return w.pairs }

// Len is the number of pairs in the window.
func (w *Window) Len() int { return len(w.pairs) }
