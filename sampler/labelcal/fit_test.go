package labelcal

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestIsotonicPoolsViolators(t *testing.T) {
	x, y := isotonic([]Pair{{0.4, 1}, {0.2, 1}, {0.1, 0}, {0.3, 0}})
	wantX, wantY := []float64{0.1, 0.25, 0.4}, []float64{0, 0.5, 1}
	if len(x) != 3 {
		t.Fatalf("knots %v %v", x, y)
	}
	for i := range wantX {
		if math.Abs(x[i]-wantX[i]) > 1e-12 || math.Abs(y[i]-wantY[i]) > 1e-12 {
			t.Fatalf("knots %v %v, want %v %v", x, y, wantX, wantY)
		}
	}
	// Equal scores are one knot whatever their labels' order.
	x, y = isotonic([]Pair{{0.5, 1}, {0.5, 0}, {0.5, 1}})
	if len(x) != 1 || x[0] != 0.5 || math.Abs(y[0]-2.0/3) > 1e-12 {
		t.Fatalf("ties: %v %v", x, y)
	}
}

func TestInterpolate(t *testing.T) {
	x, y := []float64{0.2, 0.6}, []float64{0.1, 0.9}
	for _, tc := range []struct{ v, want float64 }{{0, 0.1}, {0.2, 0.1}, {0.4, 0.5}, {0.6, 0.9}, {1, 0.9}} {
		if got := interpolate(x, y, tc.v); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("interpolate(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if got := interpolate(nil, nil, 0.3); got != 0.3 {
		t.Errorf("empty map changes the score: %v", got)
	}
}

// biased returns n pairs whose labels are Bernoulli(q) and whose score is q³: a judge that ranks
// well but reads low, as the builtin faithfulness does on a team's abstractive answers.
func biased(n int, seed uint64) []Pair {
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]Pair, n)
	for i := range out {
		q := r.Float64()
		label := 0.0
		if r.Float64() < q {
			label = 1
		}
		out[i] = Pair{Score: q * q * q, Label: label}
	}
	return out
}

func TestFitAppliesAMapThatHelps(t *testing.T) {
	m, err := Fit(biased(400, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Applied || m.GainLower <= 0 || m.After.MSE >= m.Before.MSE {
		t.Fatalf("not applied: %+v", m)
	}
	if m.After.Kappa <= m.Before.Kappa {
		t.Errorf("kappa %v → %v: the map moves the pass/fail decision to where the labels put it", m.Before.Kappa, m.After.Kappa)
	}
	if m.Labels != 400 || m.Method != "isotonic" || len(m.X) == 0 || len(m.X) != len(m.Y) {
		t.Fatalf("map %+v", m)
	}
	for i := 1; i < len(m.Y); i++ {
		if m.Y[i] < m.Y[i-1] || m.X[i] <= m.X[i-1] {
			t.Fatalf("not monotone at %d: %v %v", i, m.X, m.Y)
		}
	}
	// A score of 0.125 (q = 0.5) is right half the time: the map says about that.
	if v := m.Apply(0.125); math.Abs(v-0.5) > 0.15 {
		t.Errorf("Apply(0.125) = %v, want about 0.5", v)
	}
}

func TestFitKeepsAJudgeThatAgrees(t *testing.T) {
	// Scores equal the labels: no map can do better on held-out labels, so none is applied.
	r := rand.New(rand.NewPCG(2, 0))
	pairs := make([]Pair, 300)
	for i := range pairs {
		v := math.Round(r.Float64()*4) / 4
		pairs[i] = Pair{Score: v, Label: v}
	}
	m, err := Fit(pairs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Applied || m.Before.MAE != 0 {
		t.Fatalf("applied a map to a judge that agrees exactly: %+v", m)
	}
}

func TestFitRefuses(t *testing.T) {
	if _, err := Fit(biased(199, 3), Options{}); !errors.Is(err, ErrTooFewLabels) {
		t.Errorf("199 labels: err %v, want ErrTooFewLabels", err)
	}
	p := biased(200, 3)
	p[7].Label = math.NaN()
	if _, err := Fit(p, Options{}); err == nil || err.Error() != "pair 7: score "+fmtF(p[7].Score)+", label NaN: both must be in [0, 1]" {
		t.Errorf("NaN label: err %v", err)
	}
}

func fmtF(v float64) string { return fmt.Sprint(v) }
