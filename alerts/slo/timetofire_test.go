package slo

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// timeToFire is how long after a true drop of the metric's mean from before to after a
// threshold SLO (alert below limit over window, min_samples) first breaches, on the expected
// path: requests arrive at rate per second, a share p of them is scored with weight 1/p, and
// each scored value has variance variance(mean). It steps one second at a time and returns -1
// when the SLO never breaches (the window is then entirely after the drop and nothing changes).
func timeToFire(rate, p, before, after, limit float64, window time.Duration, minSamples int64, onMean bool,
	variance func(mean float64) float64) time.Duration {
	th := Threshold{Below: true, Limit: limit, MinSamples: minSamples, OnMean: onMean}
	w := 1 / p
	scored := rate * p // per second
	win := window.Seconds()
	for t := 0.0; t <= win; t++ {
		n1, n2 := scored*(win-t), scored*t // scored values before and after the drop in the window
		n := n1 + n2
		s := Sums{N: int64(math.Floor(n)), W: w * n, W2: w * w * n,
			WX:  w * (n1*before + n2*after),
			WXX: w * (n1*(variance(before)+before*before) + n2*(variance(after)+after*after))}
		if th.Evaluate(s).Breach {
			return time.Duration(t) * time.Second
		}
	}
	return -1
}

// bernoulli: each request's value is 0 or 1 (the widest spread a mean allows).
func bernoulli(m float64) float64 { return m * (1 - m) }

// spread02: values spread around the mean with a standard deviation of 0.2.
func spread02(float64) float64 { return 0.04 }

// TestTimeToFireWorkedExample is the worked example of docs/alerts.md: the citation-precision
// SLO as a threshold SLO (alert below 0.70 over 15m, min_samples 30; the default before change
// detection, alerts/changepoint), 10 % sampling, a true drop
// from 0.90 to 0.60. The times are to the first breach; the alert fires `for` (2m) later, at the
// next evaluation (every 15s).
func TestTimeToFireWorkedExample(t *testing.T) {
	type row struct {
		rate                float64
		variance            func(float64) float64
		confidence, meanDec time.Duration
	}
	rows := []row{
		{1, spread02, 12*time.Minute + 24*time.Second, 10*time.Minute + time.Second},
		{10, spread02, 10*time.Minute + 48*time.Second, 10*time.Minute + time.Second},
		{100, spread02, 10*time.Minute + 16*time.Second, 10*time.Minute + time.Second},
		// At 1 req/s, 90 scored values of 0 or 1 never give an interval below 0.70 around a
		// mean of 0.60 (upper bound 0.702): only decision: mean fires.
		{1, bernoulli, -1, 10*time.Minute + time.Second},
		{10, bernoulli, 11*time.Minute + 33*time.Second, 10*time.Minute + time.Second},
		{100, bernoulli, 10*time.Minute + 29*time.Second, 10*time.Minute + time.Second},
	}
	for _, r := range rows {
		name := fmt.Sprintf("%g req/s, sd %.2f", r.rate, math.Sqrt(r.variance(0.6)))
		got := timeToFire(r.rate, 0.1, 0.9, 0.6, 0.7, 15*time.Minute, 30, false, r.variance)
		gotMean := timeToFire(r.rate, 0.1, 0.9, 0.6, 0.7, 15*time.Minute, 30, true, r.variance)
		t.Logf("%-22s confidence %-6v mean %v", name, got, gotMean)
		if got != r.confidence || gotMean != r.meanDec {
			t.Errorf("%s: confidence %v, mean %v; want %v, %v", name, got, gotMean, r.confidence, r.meanDec)
		}
	}
}

func TestDecisionMean(t *testing.T) {
	// Ten values with mean 0.65 and a wide interval: the confidence rule holds, the mean rule
	// breaches; both resolve on the mean.
	var s Sums
	for i := 0; i < 10; i++ {
		s.Add(0.65+0.3*float64(i%2*2-1), 1)
	}
	conf := Threshold{Below: true, Limit: 0.7, MinSamples: 5}.Evaluate(s)
	mean := Threshold{Below: true, Limit: 0.7, MinSamples: 5, OnMean: true}.Evaluate(s)
	if conf.Breach || !mean.Breach || conf.Upper < 0.7 {
		t.Fatalf("confidence %+v, mean %+v", conf, mean)
	}
	above := Threshold{Limit: 0.6, MinSamples: 5, OnMean: true}.Evaluate(s)
	if !above.Breach || above.Recovered {
		t.Fatalf("alert_above on the mean: %+v", above)
	}
}
