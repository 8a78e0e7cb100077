package compare

import (
	"math"

	"github.com/ragwatch/ragwatch/alerts/slo"
)

// State is what a comparison concludes now.
type State string

// The states of a comparison, for a metric where higher is better.
const (
	// Collecting: an arm has fewer than MinSamples samples.
	Collecting State = "collecting"
	// CandidateWorse: the whole confidence sequence of delta lies below −margin (above +margin
	// when lower is better).
	CandidateWorse State = "candidate_worse"
	// NotWorse: the whole confidence sequence lies above −margin (below +margin when lower is
	// better): a promote signal.
	NotWorse State = "not_worse"
	// Inconclusive: the sequence still straddles −margin.
	Inconclusive State = "inconclusive"
)

// States lists every state, in the order they are exported.
var States = []State{Collecting, CandidateWorse, NotWorse, Inconclusive}

// Options configure a test.
type Options struct {
	Margin     float64 // non-inferiority margin, ≥ 0
	Alpha      float64 // the probability, over the whole run, that the sequence ever misses delta
	MinSamples int     // samples each arm needs before any decision
	// LowerIsBetter flips the direction: the candidate is worse when delta > +Margin (latency,
	// error rates).
	LowerIsBetter bool
	// Tau is the standard deviation of the normal mixture over delta (the effect size the test
	// is tuned to detect fastest); 0 uses max(Margin, 0.01).
	Tau float64
}

func (o Options) tau() float64 {
	if o.Tau > 0 {
		return o.Tau
	}
	return max(o.Margin, 0.01)
}

// Result is one evaluation.
type Result struct {
	State                  State
	BaselineMean, CandMean float64
	Delta                  float64 // candidate − baseline
	Lower, Upper           float64 // the confidence sequence at this time
	BaselineN, CandidateN  int64
}

// Evaluate tests the candidate's weighted samples against the baseline's.
//
// Each arm's weighted mean m = Σw·x/Σw has the variance estimate v = s²/(n_eff − 1), with
// s² = Σw·x²/Σw − m² and Kish's n_eff = (Σw)²/Σw² (as SLO intervals do). The difference
// d = m_c − m_b has V = v_c + v_b. Against each hypothesis delta = δ, the normal-mixture
// likelihood ratio of the mixture sequential probability ratio test (mSPRT; Johari et al.,
// "Always valid inference", 2017; Robbins 1970), with mixing distribution N(δ, τ²), is
//
//	Λ(δ) = sqrt(V / (V + τ²)) · exp( τ²·(d − δ)² / (2·V·(V + τ²)) )
//
// Λ is a nonnegative martingale under delta = δ (in the normal approximation), so by Ville's
// inequality P(Λ ever ≥ 1/α) ≤ α whatever the stopping time. The δ it does not reject form
// the confidence sequence d ± r with
//
//	r = sqrt( 2·V·(V + τ²)/τ² · ln( sqrt((V + τ²)/V) / α ) )
//
// which covers delta at every time at once with probability ≥ 1 − α: it may be read after
// every sample. The state compares the sequence with −Margin (+Margin when lower is better).
func Evaluate(baseline, candidate slo.Sums, o Options) Result {
	r := Result{
		BaselineN: baseline.N, CandidateN: candidate.N,
		BaselineMean: baseline.Mean(), CandMean: candidate.Mean(),
		Lower: math.Inf(-1), Upper: math.Inf(1),
	}
	r.Delta = r.CandMean - r.BaselineMean
	vb, okb := meanVariance(baseline)
	vc, okc := meanVariance(candidate)
	if !okb || !okc {
		r.State = Collecting
		if math.IsNaN(r.Delta) {
			r.Delta = 0
		}
		return r
	}
	rad := Radius(vb+vc, o.tau(), o.Alpha)
	r.Lower, r.Upper = r.Delta-rad, r.Delta+rad
	switch {
	case baseline.N < int64(o.MinSamples) || candidate.N < int64(o.MinSamples):
		r.State = Collecting
	case !o.LowerIsBetter && r.Upper < -o.Margin, o.LowerIsBetter && r.Lower > o.Margin:
		r.State = CandidateWorse
	case !o.LowerIsBetter && r.Lower > -o.Margin, o.LowerIsBetter && r.Upper < o.Margin:
		r.State = NotWorse
	default:
		r.State = Inconclusive
	}
	return r
}

// Radius is the half-width of the normal-mixture confidence sequence (Evaluate) for an
// estimate of variance v, mixture scale tau and level alpha.
func Radius(v, tau, alpha float64) float64 {
	if !(v > 0) {
		// No spread at all (every value equal): the smallest variance a score's rounding gives,
		// so that two constant arms still get a finite, shrinking sequence.
		v = 1e-12
	}
	t2 := tau * tau
	return math.Sqrt(2 * v * (v + t2) / t2 * math.Log(math.Sqrt((v+t2)/v)/alpha))
}

// meanVariance is the variance estimate of an arm's weighted mean; false with fewer than two
// effective samples.
func meanVariance(s slo.Sums) (float64, bool) {
	if s.N < 2 || !(s.W > 0) || !(s.W2 > 0) {
		return 0, false
	}
	neff := s.W * s.W / s.W2
	if !(neff > 1) {
		return 0, false
	}
	m := s.WX / s.W
	v := s.WXX/s.W - m*m
	if v < 0 {
		v = 0
	}
	return v / (neff - 1), true
}
