package agreement

import (
	"math"
	"testing"
	"time"
)

// pairs5 is the worked example every statistic below is computed from by hand.
//
//	record   human  judge  |h-j|  human rank  judge rank  human>=.5  judge>=.5
//	1        0.9    0.8    0.1    4           4           1          1
//	2        0.2    0.4    0.2    1           2           0          0
//	3        0.6    0.6    0.0    2.5 (tie)   3           1          1
//	4        0.6    0.3    0.3    2.5 (tie)   1           1          0
//	5        1.0    0.9    0.1    5           5           1          1
var pairs5 = []Pair{{Human: 0.9, Judge: 0.8}, {Human: 0.2, Judge: 0.4}, {Human: 0.6, Judge: 0.6}, {Human: 0.6, Judge: 0.3}, {Human: 1.0, Judge: 0.9}}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-4 {
		t.Errorf("%s = %.6f, want %.6f", name, got, want)
	}
}

func TestMeanAbsError(t *testing.T) {
	// MAE = (0.1+0.2+0+0.3+0.1)/5 = 0.14. Deviations from 0.14: -.04 .06 -.14 .16 -.04, squares
	// sum to 0.052; s = √(0.052/4) = 0.114018; half-width 1.96·s/√5 = 0.099939.
	e := MeanAbsError(pairs5)
	if !e.OK || e.N != 5 {
		t.Fatalf("estimate %+v", e)
	}
	near(t, "mae", e.Value, 0.14)
	near(t, "lower", e.Lower, 0.040061)
	near(t, "upper", e.Upper, 0.239939)
	if e := MeanAbsError(pairs5[:1]); e.OK {
		t.Errorf("one pair gave %+v", e)
	}
	// Lower bound clipped at 0: errors 0 and 0.2 (mean 0.1, half-width 1.96·0.1414/√2 = 0.196).
	e = MeanAbsError([]Pair{{Human: 1, Judge: 1}, {Human: 0.2, Judge: 0}})
	near(t, "clipped lower", e.Lower, 0)
	near(t, "upper", e.Upper, 0.1+0.195996)
}

func TestSpearmanWithTies(t *testing.T) {
	// Human ranks 4 1 2.5 2.5 5, judge ranks 4 2 3 1 5, both means 3. Deviations: human
	// 1 -2 -.5 -.5 2, judge 1 -1 0 -2 2. Σdh·dj = 1+2+0+1+4 = 8, Σdh² = 9.5, Σdj² = 10:
	// ρ = 8/√95 = 0.820783. Fisher z = atanh(ρ) = 1.159201, half-width 1.96·√(1.06/2) =
	// 1.426873: interval tanh(-0.267672) = -0.261450 .. tanh(2.586074) = 0.988720.
	e := SpearmanRho(pairs5)
	if !e.OK {
		t.Fatalf("estimate %+v", e)
	}
	near(t, "rho", e.Value, 0.820783)
	near(t, "lower", e.Lower, -0.261450)
	near(t, "upper", e.Upper, 0.988720)
	got := Ranks([]float64{0.9, 0.2, 0.6, 0.6, 1.0})
	for i, want := range []float64{4, 1, 2.5, 2.5, 5} {
		if got[i] != want {
			t.Errorf("rank[%d] = %v, want %v", i, got[i], want)
		}
	}
	// A reversed judge: ρ = -1 exactly.
	rev := []Pair{{Human: 0.1, Judge: 0.9}, {Human: 0.2, Judge: 0.8}, {Human: 0.3, Judge: 0.7}, {Human: 0.4, Judge: 0.6}}
	near(t, "reversed", SpearmanRho(rev).Value, -1)
	// A judge that gives one value for everything has no ranks to correlate.
	flat := []Pair{{Human: 0.1, Judge: 0.5}, {Human: 0.2, Judge: 0.5}, {Human: 0.3, Judge: 0.5}, {Human: 0.4, Judge: 0.5}}
	if e := SpearmanRho(flat); e.OK {
		t.Errorf("constant judge gave %+v", e)
	}
	if e := SpearmanRho(pairs5[:3]); e.OK {
		t.Errorf("three pairs gave %+v", e)
	}
}

func TestCohenKappa(t *testing.T) {
	// Verdicts at 0.5: human 1 0 1 1 1, judge 1 0 1 0 1. po = 4/5 = 0.8; pass rates 0.8 and
	// 0.6: pe = 0.8·0.6 + 0.2·0.4 = 0.56. κ = (0.8-0.56)/(1-0.56) = 0.545455. SE =
	// √(0.8·0.2/(5·0.44²)) = 0.406558: interval 0.545455 ± 0.796840, upper clipped to 1.
	e := CohenKappa(pairs5)
	if !e.OK {
		t.Fatalf("estimate %+v", e)
	}
	near(t, "kappa", e.Value, 0.545455)
	near(t, "lower", e.Lower, -0.251399)
	near(t, "upper", e.Upper, 1)
	// Perfect disagreement on a balanced set: po = 0, pe = 0.5, κ = -1.
	opp := []Pair{{Human: 1, Judge: 0}, {Human: 0, Judge: 1}}
	near(t, "opposite", CohenKappa(opp).Value, -1)
	// Both sides always pass: pe = 1, undefined.
	if e := CohenKappa([]Pair{{Human: 1, Judge: 0.9}, {Human: 0.8, Judge: 0.7}}); e.OK {
		t.Errorf("one verdict gave %+v", e)
	}
}

func TestCompute(t *testing.T) {
	for _, s := range Statistics {
		if e := Compute(s, pairs5); !e.OK || e.N != 5 {
			t.Errorf("%s: %+v", s, e)
		}
	}
	if e := Compute("nope", pairs5); e.OK {
		t.Errorf("unknown statistic gave %+v", e)
	}
}

func TestWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := Window{Age: time.Hour, Max: 3}
	for i := range 4 {
		w.Add(Pair{Human: float64(i), Time: t0.Add(time.Duration(i) * time.Minute)})
	}
	if w.Len() != 3 || w.Pairs()[0].Human != 1 {
		t.Fatalf("max 3 kept %v", w.Pairs())
	}
	w.Prune(t0.Add(time.Hour + 2*time.Minute + time.Second)) // pairs at 1m and 2m are over an hour old
	if w.Len() != 1 || w.Pairs()[0].Human != 3 {
		t.Fatalf("age pruning kept %v", w.Pairs())
	}
}
