package slo

import "math"

// Threshold evaluates a threshold SLO over a window's sums.
type Threshold struct {
	// Below true: alert when the metric is too low (alert_below); false: too high (alert_above).
	Below      bool
	Limit      float64
	Hysteresis float64
	MinSamples int64
	// OnMean decides on the point estimate (the mean past the limit breaches) instead of the
	// whole confidence interval: faster, at the price of alerts on noise in small windows.
	OnMean bool
}

// Verdict is one evaluation.
type Verdict struct {
	Value, Lower, Upper float64
	N                   int64
	Enough              bool // N >= min_samples
	// Breach: the whole confidence interval is on the wrong side of the limit.
	Breach bool
	// Recovered: the point estimate is back past the limit by the hysteresis margin, or the
	// window holds no data at all. Between Breach and Recovered a firing alert holds.
	Recovered bool
}

// Evaluate decides on a window's sums.
func (t Threshold) Evaluate(s Sums) Verdict {
	v := Verdict{Value: s.Mean(), N: s.N, Enough: s.N >= t.MinSamples && s.N > 0}
	v.Lower, v.Upper = s.Interval()
	if s.N == 0 {
		v.Recovered = true
		return v
	}
	if !v.Enough {
		return v
	}
	if t.OnMean {
		if t.Below {
			v.Breach = v.Value < t.Limit
		} else {
			v.Breach = v.Value > t.Limit
		}
	} else if t.Below {
		v.Breach = v.Upper < t.Limit
	} else {
		v.Breach = v.Lower > t.Limit
	}
	if t.Below {
		v.Recovered = v.Value >= t.Limit+t.Hysteresis
	} else {
		v.Recovered = v.Value <= t.Limit-t.Hysteresis
	}
	return v
}

// Badness orders samples for evidence: the lowest values are worst for alert_below.
func (t Threshold) Badness(x float64) float64 {
	if t.Below {
		return -x
	}
	return x
}

// Finite replaces ±Inf and NaN by 0 for metric export.
func Finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
