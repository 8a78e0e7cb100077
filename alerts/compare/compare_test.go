package compare

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ragwatch/ragwatch/alerts/slo"
)

// arm draws one metric's scores: a faithfulness-like 0/1 score with mean p, or a continuous
// score in [0, 1] (a clipped normal) around mean p.
type arm func(r *rand.Rand) float64

func bernoulli(p float64) arm {
	return func(r *rand.Rand) float64 {
		if r.Float64() < p {
			return 1
		}
		return 0
	}
}

func clipped(mu, sd float64) arm {
	return func(r *rand.Rand) float64 { return min(max(mu+sd*r.NormFloat64(), 0), 1) }
}

// run simulates one experiment, evaluating after every pair of samples (one per arm), and
// returns the sample at which each event first happened (-1: never): the sequence missed the
// true delta, the state became candidate_worse, the state became not_worse.
func run(r *rand.Rand, base, cand arm, trueDelta float64, n int, o Options, weights bool) (miss, worse, notWorse int) {
	miss, worse, notWorse = -1, -1, -1
	var b, c slo.Sums
	w := func() float64 {
		if weights && r.IntN(4) == 0 {
			return 4 // a quarter of the records sampled at p = 1/4
		}
		return 1
	}
	for i := 1; i <= n; i++ {
		b.Add(base(r), w())
		c.Add(cand(r), w())
		res := Evaluate(b, c, o)
		if miss < 0 && res.BaselineN >= int64(o.MinSamples) && (trueDelta < res.Lower || trueDelta > res.Upper) {
			miss = i
		}
		if worse < 0 && res.State == CandidateWorse {
			worse = i
		}
		if notWorse < 0 && res.State == NotWorse {
			notWorse = i
		}
	}
	return miss, worse, notWorse
}

// TestFalseAlarmsWithContinuousPeeking runs 400 experiments of 2000 samples per arm with no
// true difference, looking after every sample. The sequence may miss the true delta (0) at
// any time in at most alpha of the runs, so candidate_worse (which needs it to lie below
// −margin) fires in even fewer. The slack: with 400 runs the binomial standard error of a
// rate of 0.05 is 0.011; the bound asserted is alpha + 2 standard errors, and the measured
// rates sit well below alpha (the mixture bound is conservative), which a fixed-horizon test
// peeked at 2000 times would not (TestPeekingFixedHorizonWouldFail: 32.5 % of runs).
func TestFalseAlarmsWithContinuousPeeking(t *testing.T) {
	const runs, n = 400, 2000
	o := Options{Margin: 0.05, Alpha: 0.05, MinSamples: 100}
	for _, tc := range []struct {
		name    string
		arm     arm
		weights bool
	}{
		{"bernoulli 0.8", bernoulli(0.8), false},
		{"continuous 0.7±0.2, weighted", clipped(0.7, 0.2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			misses, worse := 0, 0
			for range runs {
				m, w, _ := run(r, tc.arm, tc.arm, 0, n, o, tc.weights)
				if m >= 0 {
					misses++
				}
				if w >= 0 {
					worse++
				}
			}
			missRate, worseRate := float64(misses)/runs, float64(worse)/runs
			t.Logf("%s: sequence missed delta=0 in %.4f of runs, candidate_worse in %.4f (alpha %.2f)", tc.name, missRate, worseRate, o.Alpha)
			limit := o.Alpha + 2*math.Sqrt(o.Alpha*(1-o.Alpha)/runs)
			if missRate > limit {
				t.Errorf("miss rate %.4f > %.4f", missRate, limit)
			}
			if worseRate > limit {
				t.Errorf("false candidate_worse rate %.4f > %.4f", worseRate, limit)
			}
		})
	}
}

// TestPeekingFixedHorizonWouldFail shows why the sequence is needed: the fixed-horizon 95 %
// interval, read after every sample, misses a true delta of 0 far more often than 5 %.
func TestPeekingFixedHorizonWouldFail(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	misses := 0
	const runs, n = 200, 2000
	for range runs {
		var b, c slo.Sums
		for i := 1; i <= n; i++ {
			b.Add(bernoulli(0.8)(r), 1)
			c.Add(bernoulli(0.8)(r), 1)
			if i < 100 {
				continue
			}
			vb, _ := meanVariance(b)
			vc, _ := meanVariance(c)
			if d := c.Mean() - b.Mean(); math.Abs(d) > slo.Z95*math.Sqrt(vb+vc) {
				misses++
				break
			}
		}
	}
	rate := float64(misses) / runs
	t.Logf("a 95%% fixed-horizon interval read after every sample missed delta=0 in %.3f of runs", rate)
	if rate < 0.2 {
		t.Fatalf("a peeked fixed-horizon interval missed in %.3f of runs; expected far above 0.05", rate)
	}
}

// TestDetectsATrueDrop: a candidate worse by 2 × margin reaches candidate_worse within N
// samples per arm in at least 95 % of runs, and never becomes not_worse first.
func TestDetectsATrueDrop(t *testing.T) {
	const runs = 400
	o := Options{Margin: 0.05, Alpha: 0.05, MinSamples: 100}
	for _, tc := range []struct {
		name       string
		base, cand arm
		within     int
	}{
		// Scores of 0/1: sd ≈ 0.43 per sample, the hardest case.
		{"bernoulli 0.8 → 0.7", bernoulli(0.8), bernoulli(0.7), 4000},
		{"continuous 0.7 → 0.6", clipped(0.7, 0.2), clipped(0.6, 0.2), 800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			detected, wrong := 0, 0
			var sum int
			for range runs {
				_, w, nw := run(r, tc.base, tc.cand, -2*o.Margin, tc.within, o, false)
				if w >= 0 && w <= tc.within {
					detected++
					sum += w
				}
				if nw >= 0 {
					wrong++
				}
			}
			rate := float64(detected) / runs
			t.Logf("%s: candidate_worse within %d samples per arm in %.4f of runs (mean %d samples), not_worse in %d",
				tc.name, tc.within, rate, sum/max(detected, 1), wrong)
			if rate < 0.95 {
				t.Errorf("detected in %.4f of runs, want ≥ 0.95", rate)
			}
			if wrong > 0 {
				t.Errorf("not_worse in %d runs of a candidate worse by 2 × margin", wrong)
			}
		})
	}
}

// TestNotWorse: an equal candidate becomes not_worse once the sequence is narrower than the
// margin.
func TestNotWorse(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	_, w, nw := run(r, bernoulli(0.8), bernoulli(0.8), 0, 4000, Options{Margin: 0.05, Alpha: 0.05, MinSamples: 100}, false)
	if w >= 0 || nw < 0 {
		t.Fatalf("candidate_worse at %d, not_worse at %d", w, nw)
	}
}

func TestEvaluateStates(t *testing.T) {
	o := Options{Margin: 0.02, Alpha: 0.05, MinSamples: 3}
	sums := func(xs ...float64) slo.Sums {
		var s slo.Sums
		for _, x := range xs {
			s.Add(x, 1)
		}
		return s
	}
	if got := Evaluate(sums(1), sums(1, 0), o); got.State != Collecting || !math.IsInf(got.Upper, 1) {
		t.Fatalf("one sample: %+v", got)
	}
	if got := Evaluate(sums(1, 0), sums(1, 0, 1), o); got.State != Collecting {
		t.Fatalf("below min_samples: %+v", got)
	}
	got := Evaluate(sums(0.9, 0.8, 0.85, 0.9), sums(0.5, 0.4, 0.45, 0.4), o)
	if got.BaselineN != 4 || got.CandidateN != 4 || math.Abs(got.Delta-(-0.425)) > 1e-9 || got.Lower > got.Delta || got.Upper < got.Delta {
		t.Fatalf("%+v", got)
	}
	// Weights: the candidate's weighted mean counts its weight-3 sample three times.
	var c slo.Sums
	c.Add(1, 3)
	c.Add(0, 1)
	c.Add(0, 1)
	c.Add(1, 1)
	if got := Evaluate(sums(1, 0, 1, 0), c, o); math.Abs(got.CandMean-4.0/6) > 1e-12 || math.Abs(got.Delta-(4.0/6-0.5)) > 1e-12 {
		t.Fatalf("weighted: %+v", got)
	}
}

func TestLowerIsBetter(t *testing.T) {
	o := Options{Margin: 0.1, Alpha: 0.05, MinSamples: 3, LowerIsBetter: true}
	var b, c slo.Sums
	for i := range 200 {
		b.Add(1+0.01*float64(i%5), 1) // latency ≈ 1.02 s
		c.Add(1.5+0.01*float64(i%5), 1)
	}
	if got := Evaluate(b, c, o); got.State != CandidateWorse || got.Lower <= 0.1 {
		t.Fatalf("slower candidate: %+v", got)
	}
	if got := Evaluate(b, b, o); got.State != NotWorse {
		t.Fatalf("same latency: %+v", got)
	}
	if got := Evaluate(c, b, o); got.State != NotWorse {
		t.Fatalf("faster candidate: %+v", got)
	}
}
