package slo

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestWeightedMeanAndInterval(t *testing.T) {
	var s Sums
	// Four samples of 1 at weight 1 and one of 0 at weight 4: weighted mean 4/8 = 0.5.
	for i := 0; i < 4; i++ {
		s.Add(1, 1)
	}
	s.Add(0, 4)
	if s.N != 5 || s.W != 8 || s.W2 != 20 || s.WX != 4 || s.WXX != 4 {
		t.Fatalf("sums = %+v", s)
	}
	if m := s.Mean(); m != 0.5 {
		t.Fatalf("mean = %v", m)
	}
	// n_eff = 64/20 = 3.2; var = 0.5 - 0.25 = 0.25; se = sqrt(0.25/2.2).
	lo, hi := s.Interval()
	se := math.Sqrt(0.25 / 2.2)
	if !near(lo, 0.5-Z95*se) || !near(hi, 0.5+Z95*se) {
		t.Fatalf("interval = [%v, %v], want ±%v", lo, hi, Z95*se)
	}
	var one Sums
	one.Add(0.3, 1)
	if lo, hi := one.Interval(); !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Fatalf("one sample must give an unbounded interval, got [%v, %v]", lo, hi)
	}
}

func TestThresholdFiresOnTheBoundNotThePoint(t *testing.T) {
	th := Threshold{Below: true, Limit: 0.7, MinSamples: 30}
	// 40 samples alternating 0.2 and 1.0: mean 0.6 < 0.7 but sd 0.4 → upper = 0.6+1.96*0.4/sqrt(39) = 0.7255.
	var s Sums
	for i := 0; i < 40; i++ {
		s.Add(0.2+0.8*float64(i%2), 1)
	}
	v := th.Evaluate(s)
	if !near(v.Value, 0.6) || v.Breach || v.Recovered || !v.Enough {
		t.Fatalf("noisy low mean must neither fire nor resolve: %+v", v)
	}
	if !near(v.Upper, 0.6+Z95*0.4/math.Sqrt(39)) {
		t.Fatalf("upper = %v", v.Upper)
	}
	// Same mean, tight: fires.
	var tight Sums
	for i := 0; i < 40; i++ {
		tight.Add(0.55+0.1*float64(i%2), 1)
	}
	if v := th.Evaluate(tight); !v.Breach {
		t.Fatalf("tight low mean must fire: %+v", v)
	}
	// Below min_samples: no verdict even when clearly bad.
	var few Sums
	for i := 0; i < 29; i++ {
		few.Add(0.1, 1)
	}
	if v := th.Evaluate(few); v.Breach || v.Recovered || v.Enough {
		t.Fatalf("29 samples must not decide: %+v", v)
	}
	// Hysteresis: the mean must reach 0.75 to count as recovered.
	th.Hysteresis = 0.05
	var mid Sums
	for i := 0; i < 40; i++ {
		mid.Add(0.72, 1)
	}
	if v := th.Evaluate(mid); v.Breach || v.Recovered {
		t.Fatalf("0.72 is inside the hysteresis band: %+v", v)
	}
	if v := th.Evaluate(Sums{}); !v.Recovered {
		t.Fatalf("an empty window resolves: %+v", v)
	}
	above := Threshold{Below: false, Limit: 2, MinSamples: 1}
	var slow Sums
	for i := 0; i < 10; i++ {
		slow.Add(3, 1)
	}
	if v := above.Evaluate(slow); !v.Breach {
		t.Fatalf("alert_above must fire on a constant 3 > 2: %+v", v)
	}
}

func TestBurnRate(t *testing.T) {
	g := Good{Op: ">=", Value: 0.5}
	if !g.Is(0.5) || g.Is(0.49) || g.Badness(0.9) >= g.Badness(0.1) {
		t.Fatalf("good_when >= 0.5: %+v", g)
	}
	if lt := (Good{Op: "<", Value: 2.5}); !lt.Is(2.4) || lt.Is(2.5) || lt.Badness(3) <= lt.Badness(1) {
		t.Fatalf("good_when < 2.5: %+v", lt)
	}
	var long, short Sums
	for i := 0; i < 100; i++ { // 20% bad over the hour
		long.Add(b2f(i%5 != 0), 1)
	}
	for i := 0; i < 10; i++ { // 30% bad over 5m
		short.Add(b2f(i%10 >= 3), 1)
	}
	p := Pair{Severity: "page", LongWindow: time.Hour, ShortWindow: 5 * time.Minute, Factor: 14.4}
	// objective 0.99: budget 1%; burn 20 (long) and 30 (short) > 14.4.
	v := EvaluatePair(p, long, short, 0.99, 30)
	if !v.Breach || !near(v.LongBurn, 20) || !near(v.ShortBurn, 30) {
		t.Fatalf("pair: %+v", v)
	}
	// A recovered short window stops the alert even though the hour still burns.
	var okShort Sums
	for i := 0; i < 10; i++ {
		okShort.Add(1, 1)
	}
	if v := EvaluatePair(p, long, okShort, 0.99, 30); v.Breach {
		t.Fatalf("short window recovered: %+v", v)
	}
	if v := EvaluatePair(p, long, short, 0.99, 101); v.Breach {
		t.Fatalf("min_samples on the long window: %+v", v)
	}
	if got := BudgetRemaining(long, 0.9); !near(got, 1-0.2/0.1) {
		t.Fatalf("budget remaining = %v, want -1", got)
	}
	for w, want := range map[time.Duration]time.Duration{5 * time.Second: time.Second, 5 * time.Minute: 30 * time.Second,
		15 * time.Minute: time.Minute, time.Hour: time.Minute, 24 * time.Hour: 24 * time.Minute} {
		if got := ThresholdWidth(w); got != want {
			t.Errorf("ThresholdWidth(%s) = %s, want %s", w, got, want)
		}
	}
	workbook := []Pair{ // the SRE workbook's alerts for a 30-day budget
		{Severity: "page", LongWindow: time.Hour, ShortWindow: 5 * time.Minute, Factor: 14.4},
		{Severity: "page", LongWindow: 6 * time.Hour, ShortWindow: 30 * time.Minute, Factor: 6},
		{Severity: "ticket", LongWindow: 72 * time.Hour, ShortWindow: 6 * time.Hour, Factor: 1},
	}
	fw, fs, cw, cs := Resolutions(workbook, 30*24*time.Hour)
	if fw != time.Minute || fs != 6*time.Hour || cw != time.Hour || cs != 30*24*time.Hour {
		t.Fatalf("resolutions = %v %v %v %v", fw, fs, cw, cs)
	}
}

func TestWorst(t *testing.T) {
	var w Worst
	bad := func(x float64) float64 { return -x }
	for i, v := range []float64{0.9, 0.1, 0.5, 0.3, 0.8, 0.2, 0.7} {
		w.Offer(Sample{TraceID: string(rune('a' + i)), Value: v}, bad)
	}
	got := MergeWorst([]Worst{w}, bad)
	var ids string
	for _, s := range got {
		ids += s.TraceID
	}
	if ids != "bfdcg" {
		t.Fatalf("worst = %q, want bfdcg (0.1 0.2 0.3 0.5 0.7)", ids)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
