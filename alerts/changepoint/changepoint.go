package changepoint

import (
	"math"
	"time"

	"github.com/ragwatch/ragwatch/alerts/slo"
)

// Settings configure a detector. The engine converts an SLO of kind `change` into them.
type Settings struct {
	// Up: an increase of the mean is bad (alert_above); false: a drop is (alert_below).
	Up bool
	// MinShift is the smallest change of the mean worth paging for (δ > 0).
	MinShift float64
	// FalseAlarmEvery is the target mean time between false alarms of one series (γ, e.g. 30
	// days): the threshold is ln(K·rate·γ), so it adapts to the series' own rate of samples.
	FalseAlarmEvery time.Duration
	// HalfLife is the longest half-life of the learned reference level (see refHalfLife) and
	// of the sample-rate estimate.
	HalfLife time.Duration
	// MinSamples is the effective number of reference samples needed before any decision.
	MinSamples int64
}

// Ratio is the step between successive sizes of change in the bank of tests: a change of size
// Δ between two tested sizes d and Ratio·d is detected at least 1 − (1 − 1/Ratio)² ≈ 89 % as
// fast as by the test tuned to Δ exactly.
const Ratio = 1.5

// MaxShift bounds the largest tested size of change: larger changes are caught by it within a
// few samples anyway.
const MaxShift = 0.6

// maxTests bounds the bank (a tiny MinShift would otherwise need many tests).
const maxTests = 8

// eps keeps the Bernoulli probabilities away from 0 and 1, where a log-likelihood ratio is
// infinite.
const eps = 1e-3

// minHorizon is the fewest samples γ may stand for in the threshold, so that a series just
// starting (rate unknown) is not judged with a near-zero threshold.
const minHorizon = 100

// peakHalfLife is how slowly the remembered peak sample rate decays: a quiet night does not
// lower the threshold for the morning.
const peakHalfLife = 24 * time.Hour

// Shifts are the sizes of change the bank tests: MinShift, ·Ratio, ... up to MaxShift.
func (s Settings) Shifts() []float64 {
	var out []float64
	for d := s.MinShift; len(out) < maxTests; d *= Ratio {
		out = append(out, d)
		if d*Ratio > MaxShift {
			break
		}
	}
	return out
}

// State is one series' detector. Its fields are persisted (JSON) by the engine; a State whose
// bank does not match the settings is reset by Compatible.
type State struct {
	// Ref is the reference: the samples' sums, each decayed by 2^(−age/HalfLife) (Σa, Σa², Σa·x,
	// Σa·x² with a = decay·w), so its mean is the recent level and its Kish effective size
	// W²/W2 says how well it is known. N counts the samples it ever took.
	Ref slo.Sums `json:"ref"`
	// Count and WW are Σdecay and Σdecay·w² of the reference: the mean weight Ref.W/Count and
	// the design effect Count·WW/Ref.W² of unequal weights.
	Count float64 `json:"count"`
	WW    float64 `json:"ww"`
	// Seen is Σdecay over every sample (the reference freezes, Seen does not): the sample rate.
	Seen float64 `json:"seen"`
	// Peak is the highest sample rate seen (samples/s), decaying over peakHalfLife.
	Peak  float64   `json:"peak"`
	At    time.Time `json:"at"` // the time the decayed sums are at
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	Tests []Test    `json:"tests"`
	Alarm *Alarm    `json:"alarm,omitempty"`

	// bets caches, for the reference level q (rounded to qStep), each test's bet and its log
	// factors at x = 0 and x = 1: 0/1 samples cost no logarithm.
	betQ  float64
	bets  []bet
	betOK bool
}

// bet is one test's stake λ with ln(1+λ(0−q)) and ln(1+λ(1−q)).
type bet struct{ lambda, at0, at1 float64 }

// qStep is the resolution of the reference level in the bet cache: far finer than any
// reference's standard error.
const qStep = 1e-4

// Bet is the stake of a test of a change of the mean from q0 by d (negative for a drop) when
// the samples vary by variance v around q0: λ = d/v in the wealth factor 1 + λ(x − q0), kept
// where the factor stays above 0.05 for every x in [0,1]. For 0/1 values (v = q0(1−q0)) the
// factor is exactly the likelihood ratio of a mean of q0+d against q0; values with less spread
// get a larger stake, as a Gaussian likelihood ratio of known variance would.
func Bet(q0, d, v float64) float64 {
	l := d / v
	if l < 0 {
		return max(l, -0.95/max(1-q0, 1e-9))
	}
	return min(l, 0.95/max(q0, 1e-9))
}

// LogFactor is ln(1 + λ(x − q0)), the log-wealth one sample adds to a test: under any
// distribution on [0,1] whose mean is q0 its exponential has expectation exactly 1 (a
// martingale), and at most 1 when the mean is on the good side of q0, so by Ville's inequality
// a CUSUM of it crosses h before a change with probability e^−h per restart: the false-alarm
// bound needs no model of the values, only their bounds, and the stake adapts to their spread.
func LogFactor(x, q0, lambda float64) float64 { return math.Log1p(lambda * (x - q0)) }

// variance is the reference's weighted variance, between 1e-4 and the 0/1 variance q(1−q)
// that bounds every [0,1] variable of mean q.
// Two pseudo-samples of variance 1/4 keep a young reference from a variance of 0.
func (st *State) variance() float64 {
	m := st.Ref.Mean()
	if math.IsNaN(m) {
		return 0.25
	}
	n := st.neff()
	v := (n*max(st.Ref.WXX/st.Ref.W-m*m, 0) + 2*0.25) / (n + 2)
	return min(max(v, 1e-4), max(m*(1-m), 1e-4))
}

// coefficients fills the bet cache for reference level q0.
func (st *State) coefficients(s Settings, q0 float64) {
	q0 = math.Round(q0/qStep) * qStep
	if st.betOK && q0 == st.betQ && len(st.bets) == len(st.Tests) {
		return
	}
	st.betQ, st.betOK = q0, true
	st.bets = st.bets[:0]
	v := st.variance()
	for _, t := range st.Tests {
		d := t.Shift
		if !s.Up {
			d = -d
		}
		l := Bet(q0, d, v)
		st.bets = append(st.bets, bet{lambda: l, at0: LogFactor(0, q0, l), at1: LogFactor(1, q0, l)})
	}
}

// logFactor is test i's log-wealth for x from the cache.
func (st *State) logFactor(i int, x float64) float64 {
	b := st.bets[i]
	switch x {
	case 0:
		return b.at0
	case 1:
		return b.at1
	}
	return LogFactor(x, st.betQ, b.lambda)
}

// Clone is a deep copy (the benchmark restarts trials from one warmed-up state).
func (st *State) Clone() *State {
	c := *st
	c.Tests = append([]Test(nil), st.Tests...)
	if st.Alarm != nil {
		a := *st.Alarm
		c.Alarm = &a
	}
	c.bets, c.betOK = nil, false
	return &c
}

// Test is one CUSUM of the bank: S is the log-likelihood ratio of "the mean moved by Shift
// since Since" against "it is at the reference", maximised over the change time.
type Test struct {
	Shift float64   `json:"d"`
	S     float64   `json:"s"`
	Since time.Time `json:"since,omitzero"` // first sample of the current excursion above 0
	After slo.Sums  `json:"after"`          // the samples since Since
}

// Alarm is a detected change, held until the level comes back.
type Alarm struct {
	At time.Time `json:"at"`
	// ChangeTime is the maximum-likelihood change time: the first sample of the excursion of
	// the test that crossed.
	ChangeTime time.Time `json:"change_time"`
	Shift      float64   `json:"shift"`
	Statistic  float64   `json:"statistic"`
	Threshold  float64   `json:"threshold"`
	// Before is the reference when the alarm went off (frozen while the alarm holds); After
	// every sample since ChangeTime.
	Before slo.Sums `json:"before"`
	After  slo.Sums `json:"after"`
	// Recovery is the CUSUM of the evidence for "back at the reference" against "still lower
	// by MinShift"; the alarm clears when it crosses the threshold.
	Recovery float64 `json:"recovery"`
}

// New returns an empty state for s.
func New(s Settings) *State {
	st := &State{}
	st.reset(s)
	return st
}

func (st *State) reset(s Settings) {
	shifts := s.Shifts()
	st.Tests = make([]Test, len(shifts))
	for i, d := range shifts {
		st.Tests[i] = Test{Shift: d}
	}
}

// Compatible reports whether a restored state has the bank s needs (the same shifts).
func (st *State) Compatible(s Settings) bool {
	shifts := s.Shifts()
	if st == nil || len(st.Tests) != len(shifts) {
		return false
	}
	for i, d := range shifts {
		if math.Abs(st.Tests[i].Shift-d) > 1e-12 {
			return false
		}
	}
	return true
}

// decay brings the decayed sums to now.
func (st *State) decay(s Settings, now time.Time) {
	if st.At.IsZero() {
		st.At = now
		return
	}
	dt := now.Sub(st.At)
	if dt <= 0 {
		return
	}
	f := math.Exp2(-dt.Seconds() / st.refHalfLife(s).Seconds())
	st.Ref.W *= f
	st.Ref.W2 *= f * f
	st.Ref.WX *= f
	st.Ref.WXX *= f
	st.Count *= f
	st.WW *= f
	st.Seen *= math.Exp2(-dt.Seconds() / s.HalfLife.Seconds())
	st.Peak *= math.Exp2(-dt.Seconds() / peakHalfLife.Seconds())
	st.At = now
}

// refHalfLife is the reference's half-life: HalfLife, or the time refSamples(s) samples take
// at the recent rate when that is shorter. A busy series needs no hour of history to know its
// level, and a short memory follows a daily cycle closely (the lag error of an exponential
// mean on a cycle of amplitude A is about A·2π·τ/24h, τ = half-life/ln 2).
func (st *State) refHalfLife(s Settings) time.Duration {
	r := st.rate(s)
	if r <= 0 {
		return s.HalfLife
	}
	return min(s.HalfLife, time.Duration(refSamples(s)/r*float64(time.Second)))
}

// refSamples is how many samples make a reference half-life at most: 40/δ², at least 1000.
// It must be long against the time a change of δ takes to detect (a few hundred samples), or
// the reference follows the change and it is missed; shorter memories (1000 samples for
// δ = 0.1) followed a daily cycle better but missed up to 17 of 200 drops of δ in the
// benchmark.
func refSamples(s Settings) float64 { return max(1000, 40/(s.MinShift*s.MinShift)) }

// rate is the recent sample rate (samples/s): Seen over the decayed length of the history.
func (st *State) rate(s Settings) float64 {
	h := s.HalfLife.Seconds()
	elapsed := max(st.Last.Sub(st.First).Seconds(), 1)
	span := h / math.Ln2 * (1 - math.Exp2(-elapsed/h))
	return st.Seen / span
}

// Ready reports whether the reference holds MinSamples effective samples.
func (st *State) Ready(s Settings) bool {
	return st.Ref.W2 > 0 && st.Ref.W*st.Ref.W/st.Ref.W2 >= float64(s.MinSamples)
}

// Threshold is the CUSUM threshold h = ln(K·n)·deff: n = peak rate·γ is the number of samples
// in the target time between false alarms (Lorden: a CUSUM's mean run length under no change
// is at least e^h samples; K tests share it), and deff = Count·Σw²/(Σw)² ≥ 1 widens it for
// unequal weights, whose weighted increments vary deff times more.
func (st *State) Threshold(s Settings) float64 {
	n := max(st.Peak*s.FalseAlarmEvery.Seconds(), minHorizon)
	deff := 1.0
	if st.Ref.W > 0 {
		deff = max(1, st.Count*st.WW/(st.Ref.W*st.Ref.W))
	}
	return math.Log(float64(len(st.Tests))*n) * deff
}

// Level is the reference's mean (the alarm's level before when an alarm holds).
func (st *State) Level() float64 {
	if st.Alarm != nil {
		return st.Alarm.Before.Mean()
	}
	return st.Ref.Mean()
}

// LLR is the log-likelihood ratio of a 0/1 value x under a mean of q1 against q0:
// x·ln(q1/q0) + (1−x)·ln((1−q1)/(1−q0)). For 0/1 values the bets of the bank are close to it.
func LLR(x, q0, q1 float64) float64 {
	a, b := llrCoef(q0, q1)
	return x*a + (1-x)*b
}

// llrCoef are LLR's coefficients: ln(q1/q0) and ln((1−q1)/(1−q0)), kept off 0 and 1.
func llrCoef(q0, q1 float64) (a, b float64) {
	q0 = min(max(q0, eps), 1-eps)
	q1 = min(max(q1, eps), 1-eps)
	return math.Log(q1 / q0), math.Log((1 - q1) / (1 - q0))
}

// BernoulliKL is the Kullback–Leibler information of a 0/1 sample with mean q1 against q0
// (nats): the expected LLR per sample after a change from q0 to q1.
func BernoulliKL(q1, q0 float64) float64 { return LLR(q1, q0, q1) }

// moved is the mean after a change of d in the bad direction.
func (s Settings) moved(q0, d float64) float64 {
	if s.Up {
		return q0 + d
	}
	return q0 - d
}

// Observe adds a value x ∈ [0,1] with weight w (1/p) seen at now, and reports whether it set
// off an alarm. Values outside [0,1] must be refused by the caller.
func (st *State) Observe(s Settings, now time.Time, x, w float64) bool {
	if !(w > 0) {
		return false
	}
	if len(st.Tests) == 0 {
		st.reset(s)
	}
	st.decay(s, now)
	if st.First.IsZero() {
		st.First = now
	}
	st.Last = now
	st.Seen++
	st.Peak = max(st.Peak, st.rate(s))
	if a := st.Alarm; a != nil {
		a.After.Add(x, w)
		// Evidence against "still changed by MinShift": a bet on the way back.
		q1 := s.moved(a.Before.Mean(), s.MinShift)
		d := s.MinShift
		if s.Up {
			d = -d
		}
		a.Recovery = max(0, a.Recovery+st.relWeight(w)*LogFactor(x, q1, Bet(q1, d, st.variance())))
		if a.Recovery >= a.Threshold {
			st.Alarm = nil
			for i := range st.Tests {
				st.Tests[i] = Test{Shift: st.Tests[i].Shift}
			}
		}
		return false
	}
	if !st.Ready(s) {
		st.learn(x, w)
		return false
	}
	// Learn x only if every test was near 0 before it: samples of a change under way would drag
	// the reference towards the new level and slow its detection. Deciding before x is seen
	// keeps the choice independent of x, so skipping samples biases nothing when nothing changed.
	learn := st.MaxStatistic() < freezeAt
	st.coefficients(s, st.reference(s))
	c := st.relWeight(w)
	h := st.Threshold(s)
	best := -1
	for i := range st.Tests {
		t := &st.Tests[i]
		l := c * st.logFactor(i, x)
		if t.S == 0 && l > 0 {
			t.Since, t.After = now, slo.Sums{}
		}
		t.S = max(0, t.S+l)
		if t.S == 0 {
			t.Since, t.After = time.Time{}, slo.Sums{}
			continue
		}
		t.After.Add(x, w)
		if t.S >= h && (best < 0 || t.S > st.Tests[best].S) {
			best = i
		}
	}
	if best >= 0 {
		t := st.Tests[best]
		st.Alarm = &Alarm{At: now, ChangeTime: t.Since, Shift: t.Shift, Statistic: t.S, Threshold: h, Before: st.Ref, After: t.After}
		return true
	}
	if learn {
		st.learn(x, w)
	}
	return false
}

// freezeAt is the test statistic (nats) from which the reference stops learning: a change of
// min_shift gets there within tens of samples, long before the reference's memory of
// thousands of samples could follow it.
const freezeAt = 3.0

// reference is the level the bank tests against: the reference's 95 % confidence bound on the
// good side (the lower bound when a drop is bad). A reference learned from few samples is
// uncertain; testing against its bound trades a little speed for not mistaking that
// uncertainty for a change (too few samples make the detector less sensitive, never noisier).
// The standard error takes the larger of the values' variance and the 0/1 variance of the
// Laplace-smoothed mean (Σx+1)/(n+2), the most a [0,1] variable can vary: a few samples all
// at 1 do not make a reference of 1 ± 0.
func (st *State) reference(s Settings) float64 {
	m, n := st.Ref.Mean(), st.neff()
	if math.IsNaN(m) || n <= 1 {
		if s.Up {
			return 1
		}
		return 0
	}
	mt := (m*n + 1) / (n + 2)
	se := math.Sqrt(max(st.variance(), mt*(1-mt)) / (n - 1))
	if s.Up {
		return min(m+slo.Z95*se, 1)
	}
	return max(m-slo.Z95*se, 0)
}

// neff is the reference's Kish effective sample size (Σa)²/Σa².
func (st *State) neff() float64 {
	if st.Ref.W2 <= 0 {
		return 0
	}
	return st.Ref.W * st.Ref.W / st.Ref.W2
}

// learn adds a sample to the reference.
func (st *State) learn(x, w float64) {
	st.Ref.Add(x, w)
	st.Count++
	st.WW += w * w
}

// relWeight is w over the reference's mean weight: 1 when every sample has the same weight.
func (st *State) relWeight(w float64) float64 {
	if st.Count <= 0 || st.Ref.W <= 0 {
		return 1
	}
	return w / (st.Ref.W / st.Count)
}

// MaxStatistic is the largest CUSUM of the bank.
func (st *State) MaxStatistic() float64 {
	m := 0.0
	for _, t := range st.Tests {
		m = max(m, t.S)
	}
	return m
}

// Idle clears an alarm when no sample came for a half-life: with no data the level cannot be
// said to be still changed, and the threshold SLOs resolve on an empty window the same way.
// It reports whether it cleared one.
func (st *State) Idle(s Settings, now time.Time) bool {
	if st.Alarm == nil || now.Sub(st.Last) < s.HalfLife {
		return false
	}
	st.Alarm = nil
	for i := range st.Tests {
		st.Tests[i] = Test{Shift: st.Tests[i].Shift}
	}
	return true
}
