package slo

import (
	"math"
	"sort"
	"time"
)

// Z95 is the two-sided 95% normal quantile.
const Z95 = 1.959963984540054

// MaxEvidence is how many worst samples a bucket and an alert keep.
const MaxEvidence = 5

// Sample is one observed value with the request it came from, kept as evidence.
type Sample struct {
	TraceID string    `json:"t"`
	SpanID  string    `json:"s,omitempty"`
	Value   float64   `json:"v"`
	Time    time.Time `json:"at"`
}

// Sums accumulates a weighted sample: N observations, Σw, Σw², Σw·x, Σw·x². The same sums are
// exported as Prometheus counters so fleet-wide rules compute the same statistics.
type Sums struct {
	N   int64   `json:"n"`
	W   float64 `json:"w"`
	W2  float64 `json:"w2"`
	WX  float64 `json:"wx"`
	WXX float64 `json:"wxx"`
}

// Add adds x with weight w.
func (s *Sums) Add(x, w float64) {
	s.N++
	s.W += w
	s.W2 += w * w
	s.WX += w * x
	s.WXX += w * x * x
}

// Merge adds o.
func (s *Sums) Merge(o Sums) {
	s.N += o.N
	s.W += o.W
	s.W2 += o.W2
	s.WX += o.WX
	s.WXX += o.WXX
}

// Mean is the weighted mean Σw·x/Σw (NaN when empty).
func (s Sums) Mean() float64 {
	if s.W <= 0 {
		return math.NaN()
	}
	return s.WX / s.W
}

// Interval is the 95% confidence interval of the weighted mean. The standard error uses
// Kish's effective sample size n_eff = (Σw)²/Σw², so heavily weighted (rarely sampled)
// records widen the interval as they should:
//
//	var = Σw·x²/Σw − mean²,  se = sqrt(var / (n_eff − 1)),  mean ± 1.96·se
//
// With fewer than two effective samples the interval is unbounded.
func (s Sums) Interval() (lower, upper float64) {
	m := s.Mean()
	if math.IsNaN(m) {
		return math.Inf(-1), math.Inf(1)
	}
	neff := s.W * s.W / s.W2
	if !(neff > 1) {
		return math.Inf(-1), math.Inf(1)
	}
	v := s.WXX/s.W - m*m
	if v < 0 {
		v = 0 // rounding
	}
	se := math.Sqrt(v / (neff - 1))
	return m - Z95*se, m + Z95*se
}

// Worst keeps the MaxEvidence worst samples: larger badness is worse.
type Worst []Sample

// Offer keeps s if it is among the worst. badness orders samples.
func (w *Worst) Offer(s Sample, badness func(float64) float64) {
	if len(*w) < MaxEvidence {
		*w = append(*w, s)
		return
	}
	least := 0
	for i := range *w {
		if badness((*w)[i].Value) < badness((*w)[least].Value) {
			least = i
		}
	}
	if badness(s.Value) > badness((*w)[least].Value) {
		(*w)[least] = s
	}
}

// MergeWorst returns the MaxEvidence worst of several lists, worst first; ties go to the most
// recent sample.
func MergeWorst(lists []Worst, badness func(float64) float64) []Sample {
	var all []Sample
	for _, l := range lists {
		all = append(all, l...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		bi, bj := badness(all[i].Value), badness(all[j].Value)
		if bi != bj {
			return bi > bj
		}
		return all[i].Time.After(all[j].Time)
	})
	if len(all) > MaxEvidence {
		all = all[:MaxEvidence]
	}
	return all
}
