package decide

import (
	"math"

	"github.com/ragwatch/ragwatch/internal/score"
)

// WeightedMean estimates a population mean from sampled values, each weighted by 1/p (its
// Horvitz–Thompson weight). Mean is the Hájek ratio estimator Σ wᵢyᵢ / Σ wᵢ: over-sampling a
// subgroup (p = 1 for negative feedback, 0.5 for weak retrieval, 0.05 for the rest) does not pull
// the estimate towards that subgroup. The zero value is ready to use; it is not safe for
// concurrent use.
type WeightedMean struct {
	n           int
	sumW, sumWY float64
	sumW2       float64
}

// Add adds one value with its weight; weights <= 0, NaN or infinite values are ignored.
func (m *WeightedMean) Add(value, weight float64) {
	if !(weight > 0) || math.IsInf(weight, 0) || math.IsNaN(value) || math.IsInf(value, 0) {
		return
	}
	m.n++
	m.sumW += weight
	m.sumWY += weight * value
	m.sumW2 += weight * weight
}

// AddResult adds a score result with its Weight (1/p; 0 or unset counts as 1).
func (m *WeightedMean) AddResult(r score.Result) {
	w := r.Weight
	if w == 0 {
		w = 1
	}
	m.Add(r.Value, w)
}

// Mean returns the Hájek estimate Σ wᵢyᵢ / Σ wᵢ, and false when nothing was added.
func (m *WeightedMean) Mean() (float64, bool) {
	if m.sumW == 0 {
		return 0, false
	}
	return m.sumWY / m.sumW, true
}

// Count returns how many values were added.
func (m *WeightedMean) Count() int { return m.n }

// Total returns Σ wᵢ, the Horvitz–Thompson estimate of how many records the sample stands for.
func (m *WeightedMean) Total() float64 { return m.sumW }

// EffectiveN returns Kish's effective sample size (Σ wᵢ)² / Σ wᵢ²: how many equally weighted
// samples carry the same information. Use it, not Count, for minimum-sample checks.
func (m *WeightedMean) EffectiveN() float64 {
	if m.sumW2 == 0 {
		return 0
	}
	return m.sumW * m.sumW / m.sumW2
}

// Merge adds another estimator's values (e.g. two time buckets).
func (m *WeightedMean) Merge(o WeightedMean) {
	m.n += o.n
	m.sumW += o.sumW
	m.sumWY += o.sumWY
	m.sumW2 += o.sumW2
}

// Sub removes another estimator's values (sliding windows built from buckets).
func (m *WeightedMean) Sub(o WeightedMean) {
	m.n -= o.n
	m.sumW -= o.sumW
	m.sumWY -= o.sumWY
	m.sumW2 -= o.sumW2
	if m.n <= 0 {
		*m = WeightedMean{}
	}
}
