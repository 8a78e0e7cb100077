package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestBetaKL checks the Beta information against a closed form: KL(U(0,1) ‖ Beta(2,1)) =
// 1 − ln 2, and a 0/1 stream's against the Bernoulli formula.
func TestBetaKL(t *testing.T) {
	a2, b2, a1, b1 := 1.0, 1.0, 2.0, 1.0
	got := lbeta(a1, b1) - lbeta(a2, b2) + (a2-a1)*digamma(a2) + (b2-b1)*digamma(b2) + (a1-a2+b1-b2)*digamma(a2+b2)
	if math.Abs(got-(1-math.Ln2)) > 1e-9 {
		t.Fatalf("KL = %v, want %v", got, 1-math.Ln2)
	}
	want := 0.6*math.Log(0.6/0.9) + 0.4*math.Log(0.4/0.1)
	if d := Binary.KL(0.6, 0.9); math.Abs(d-want) > 1e-12 {
		t.Fatalf("Bernoulli KL = %v, want %v", d, want)
	}
	// Scores with sd 0.2 carry more information per sample than 0/1 values of the same means.
	if Scores.KL(0.6, 0.9) <= Binary.KL(0.6, 0.9) {
		t.Fatalf("scores KL %v <= 0/1 KL %v", Scores.KL(0.6, 0.9), Binary.KL(0.6, 0.9))
	}
}

// TestSmallBenchmark runs a small fixed-seed benchmark: 0/1 values at 1 scored sample/s
// falling from 0.90 to 0.60. The windowed rule needs about ten minutes; the detector at most
// half of that, within 1.3× the floor, and neither gives a false alarm in a stationary day.
func TestSmallBenchmark(t *testing.T) {
	o := Default()
	o.Rates, o.Shifts, o.Kinds = []float64{1}, [][2]float64{{0.9, 0.6}}, []Kind{Binary}
	o.Warmups, o.Trials, o.MaxSamples = 3, 10, 86400
	res := Run(o)
	d := res.Delays[0]
	wm, dm := Mean(d.Windowed), Mean(d.Changes)
	t.Logf("windowed %v (missed %d), detector %v (missed %d), floor %v", wm, d.WindowedMissed, dm, d.ChangeMissed, d.Floor)
	if d.ChangeMissed > 0 || d.WindowedMissed > 0 || wm < 9*time.Minute || dm > wm/2 || float64(dm) > 1.3*float64(d.Floor) {
		t.Fatalf("delays: %+v", d)
	}
	for _, f := range res.FalseAlarms {
		if f.Changes > 0 || f.Windowed > 0 || math.Abs(f.Days-1) > 1e-9 {
			t.Fatalf("false alarms: %+v", f)
		}
	}
	var b strings.Builder
	res.Markdown(&b, o)
	if !strings.Contains(b.String(), "| 0/1 outcomes | 0.90→0.60 | 1 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
