package labelcal

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ragwatch/ragwatch/internal/agreement"
)

// Defaults of Options.
const (
	DefaultMinLabels = 200
	DefaultFolds     = 5
)

// z95 is the two-sided 95 % normal quantile, for the paired improvement's lower bound.
const z95 = 1.959963984540054

// Pair is one record's builtin score for a metric and a person's label for it, both in [0, 1].
type Pair struct {
	Score, Label float64
}

// Agreement is how closely scores agree with the labels: mean absolute error and Cohen's kappa
// of pass/fail at agreement.Threshold (internal/agreement's statistics, as
// ragwatch_judge_agreement exports them), and the mean squared error the map is fitted to lower.
type Agreement struct {
	MAE   float64 `json:"mae"`
	Kappa float64 `json:"kappa"`
	MSE   float64 `json:"mse"`
}

// Map is one fitted calibration map of a (service, metric): an isotonic (non-decreasing)
// piecewise-linear map from the builtin score to the calibrated one, through the knots (X, Y).
type Map struct {
	Service string    `json:"service"`
	Metric  string    `json:"metric"`
	Version uint64    `json:"version"` // the store's revision; 0 before it is stored
	Method  string    `json:"method"`  // "isotonic"
	X       []float64 `json:"x"`
	Y       []float64 `json:"y"`
	Labels  int       `json:"labels"` // pairs fitted on
	// Before and After are cross-validated: each held-out fold's raw scores, and their values
	// under the map fitted on the other folds, against its labels.
	Before Agreement `json:"before"`
	After  Agreement `json:"after"`
	// Gain is the mean reduction of the squared error on held-out labels and GainLower its 95 %
	// lower bound. Applied is GainLower > 0 with kappa no lower: the map is used only when it is
	// better beyond noise and does not worsen the pass/fail agreement. (With 0/1 labels the
	// absolute error may still rise: a calibrated 0.7 is off by 0.3 from every faithful answer.)
	Gain      float64   `json:"gain"`
	GainLower float64   `json:"gain_lower"`
	Applied   bool      `json:"applied"`
	Reverted  bool      `json:"reverted,omitempty"` // an operator turned this series' map off
	FittedAt  time.Time `json:"fitted_at"`
}

// Apply maps a score: linear between knots, constant beyond the ends.
func (m *Map) Apply(v float64) float64 {
	return interpolate(m.X, m.Y, v)
}

// Options configure Fit.
type Options struct {
	MinLabels int // pairs needed to fit (0: DefaultMinLabels)
	Folds     int // cross-validation folds (0: DefaultFolds)
}

// ErrTooFewLabels is returned by Fit for a series below Options.MinLabels.
var ErrTooFewLabels = errors.New("too few labels to fit a calibration map")

// Fit fits an isotonic map on pairs, in the order given: pair i is in fold i mod Folds, so that
// labels arriving over time spread over the folds. The result's Before and After are
// cross-validated, Applied says whether the map is better on held-out labels, and X, Y are
// fitted on all pairs. Values outside [0, 1] or NaN are an error.
func Fit(pairs []Pair, o Options) (Map, error) {
	if o.MinLabels <= 0 {
		o.MinLabels = DefaultMinLabels
	}
	if o.Folds <= 1 {
		o.Folds = DefaultFolds
	}
	if len(pairs) < max(o.MinLabels, 2*o.Folds) {
		return Map{}, fmt.Errorf("%w: %d, need %d", ErrTooFewLabels, len(pairs), o.MinLabels)
	}
	for i, p := range pairs {
		if !valid(p.Score) || !valid(p.Label) {
			return Map{}, fmt.Errorf("pair %d: score %v, label %v: both must be in [0, 1]", i, p.Score, p.Label)
		}
	}
	oof := make([]float64, len(pairs))
	for k := range o.Folds {
		var train []Pair
		for i, p := range pairs {
			if i%o.Folds != k {
				train = append(train, p)
			}
		}
		x, y := isotonic(train)
		for i, p := range pairs {
			if i%o.Folds == k {
				oof[i] = interpolate(x, y, p.Score)
			}
		}
	}
	before, after := make([]agreement.Pair, len(pairs)), make([]agreement.Pair, len(pairs))
	gains := make([]float64, len(pairs))
	for i, p := range pairs {
		before[i] = agreement.Pair{Human: p.Label, Judge: p.Score}
		after[i] = agreement.Pair{Human: p.Label, Judge: oof[i]}
		gains[i] = sq(p.Label-p.Score) - sq(p.Label-oof[i])
	}
	mean, sd := meanSD(gains)
	m := Map{Method: "isotonic", Labels: len(pairs), Before: agree(before), After: agree(after), Gain: mean}
	m.GainLower = mean - z95*sd/math.Sqrt(float64(len(gains)))
	m.Applied = m.GainLower > 0 && m.After.Kappa >= m.Before.Kappa
	m.X, m.Y = isotonic(pairs)
	return m, nil
}

func valid(v float64) bool { return v >= 0 && v <= 1 } // false for NaN

func agree(p []agreement.Pair) Agreement {
	mse := 0.0
	for _, x := range p {
		mse += sq(x.Human - x.Judge)
	}
	return Agreement{MAE: agreement.MeanAbsError(p).Value, Kappa: agreement.CohenKappa(p).Value, MSE: mse / float64(len(p))}
}

func sq(v float64) float64 { return v * v }

func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(max(len(v)-1, 1)))
}

// isotonic is the least-squares non-decreasing fit of the labels on the scores (pool adjacent
// violators), as knots: one per block, at the block's mean score, with its mean label.
func isotonic(pairs []Pair) (x, y []float64) {
	s := slices.Clone(pairs)
	slices.SortStableFunc(s, func(a, b Pair) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		return 0
	})
	type block struct{ sumX, sumY, n float64 }
	var st []block
	for i := 0; i < len(s); {
		// Equal scores form one block from the start: a map is a function of the score.
		b := block{}
		j := i
		for ; j < len(s) && s[j].Score == s[i].Score; j++ {
			b.sumX += s[j].Score
			b.sumY += s[j].Label
			b.n++
		}
		i = j
		st = append(st, b)
		for len(st) > 1 {
			p, q := st[len(st)-2], st[len(st)-1]
			if p.sumY/p.n <= q.sumY/q.n {
				break
			}
			st = st[:len(st)-2]
			st = append(st, block{p.sumX + q.sumX, p.sumY + q.sumY, p.n + q.n})
		}
	}
	for _, b := range st {
		x = append(x, b.sumX/b.n)
		y = append(y, b.sumY/b.n)
	}
	return x, y
}

// interpolate evaluates the piecewise-linear map through (x, y) (x increasing) at v.
func interpolate(x, y []float64, v float64) float64 {
	if len(x) == 0 {
		return v
	}
	i, _ := slices.BinarySearch(x, v)
	switch {
	case i == 0:
		return y[0]
	case i == len(x):
		return y[len(y)-1]
	case x[i] == v:
		return y[i]
	}
	t := (v - x[i-1]) / (x[i] - x[i-1])
	return y[i-1] + t*(y[i]-y[i-1])
}
