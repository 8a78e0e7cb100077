package labelcal

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/internal/score"
)

// feedLoop runs n records through the score path: the builtin's raw score q³ of a record whose
// label is 1 with probability q, calibrated by the learner, then paired with its label. rawFed
// says whether the learner gets the raw value (as the agreement tracker hands it) or the
// published one. It returns every map fitted.
func feedLoop(t *testing.T, l *Learner, n int, rawFed bool) []Map {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 0))
	var fits []Map
	for range n {
		q := r.Float64()
		label := 0.0
		if r.Float64() < q {
			label = 1
		}
		res := []score.Result{{Service: "support-bot", Metric: "faithfulness", Scorer: "builtin", Value: q * q * q}}
		l.Calibrate(res)
		fed := res[0].Value
		if rawFed {
			fed = res[0].RawValue()
		}
		m, err := l.Observe(ctx, "support-bot", "faithfulness", Pair{Score: fed, Label: label})
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			fits = append(fits, *m)
		}
	}
	return fits
}

// Refitting on the raw values converges: every later map says what the first did (a raw 0.125,
// q = 0.5, maps near 0.5). Fitted on the published values instead, the second map learns the
// first one's output is already right and maps the raw score back near itself: the loop
// oscillates instead of converging, which is why the tracker hands the raw value.
func TestRefitOnRawValuesConverges(t *testing.T) {
	l, err := NewLearner(LearnerOptions{MinLabels: 200, RefitEvery: 200, MaxPairs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	fits := feedLoop(t, l, 2000, true)
	if len(fits) != 10 {
		t.Fatalf("%d fits, want 10", len(fits))
	}
	for _, m := range fits {
		if !m.Applied {
			t.Fatalf("version %d not applied: %+v", m.Version, m)
		}
		if v := m.Apply(0.125); math.Abs(v-0.5) > 0.15 {
			t.Errorf("version %d maps 0.125 to %v, want ≈ 0.5", m.Version, v)
		}
	}
	last, prev := fits[len(fits)-1], fits[len(fits)-2]
	for _, x := range []float64{0.01, 0.1, 0.3, 0.6, 0.9} {
		if d := math.Abs(last.Apply(x) - prev.Apply(x)); d > 0.1 {
			t.Errorf("the last two maps differ by %v at %v", d, x)
		}
	}

	wrong, err := NewLearner(LearnerOptions{MinLabels: 200, RefitEvery: 200, MaxPairs: 200})
	if err != nil {
		t.Fatal(err)
	}
	bad := feedLoop(t, wrong, 400, false)
	if len(bad) != 2 {
		t.Fatalf("%d fits fed published values", len(bad))
	}
	if v := bad[1].Apply(0.125); bad[1].Applied && math.Abs(v-0.5) < 0.15 {
		t.Errorf("fed its own output, the second map still maps 0.125 to %v: the test cannot tell the two apart", v)
	}
}

func TestCalibrateMarksResults(t *testing.T) {
	l, err := NewLearner(LearnerOptions{MinLabels: 200})
	if err != nil {
		t.Fatal(err)
	}
	var none *Learner
	none.Calibrate([]score.Result{{Scorer: "builtin"}}) // a nil learner (calibration off) is a no-op
	feedLoop(t, l, 200, true)
	m := l.Maps()[0]
	res := []score.Result{
		{Service: "support-bot", Metric: "faithfulness", Scorer: "builtin", Value: 0.125},
		{Service: "support-bot", Metric: "faithfulness", Scorer: "openai", Value: 0.125},
		{Service: "other", Metric: "faithfulness", Scorer: "builtin", Value: 0.125},
	}
	l.Calibrate(res)
	if res[0].Raw == nil || *res[0].Raw != 0.125 || res[0].Value != m.Apply(0.125) || res[0].Calibration != m.Version {
		t.Errorf("builtin result %+v", res[0])
	}
	for _, x := range res[1:] {
		if x.Raw != nil || x.Value != 0.125 || x.Calibration != 0 {
			t.Errorf("calibrated a result of another judge or service: %+v", x)
		}
	}
	again := res[0].Value
	l.Calibrate(res[:1]) // a result calibrated already keeps its value
	if res[0].Value != again {
		t.Errorf("calibrated twice: %v → %v", again, res[0].Value)
	}
}

// Offered pairs are fitted by Start's goroutine; a second process watching the store adopts
// each version it writes (a fit, a revert) without a restart.
func TestStartFitsOfferedPairsAndWatchSpreadsVersions(t *testing.T) {
	store := kvStore(t)
	ctx := context.Background()
	fitter, err := NewLearner(LearnerOptions{MinLabels: 200, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := NewLearner(LearnerOptions{MinLabels: 200, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Learner{fitter, pod} {
		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Shutdown(ctx) })
	}
	if err := fitter.Start(ctx); err == nil {
		t.Error("a second Start succeeded")
	}
	fitter.Offer("support-bot", "faithfulness", "openai", 1, 0.1) // another judge: ignored
	for _, p := range biased(200, 5) {
		fitter.Offer("support-bot", "faithfulness", "builtin", p.Label, p.Score)
	}
	applied := func(l *Learner, want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, ok := l.Apply("support-bot", "faithfulness", 0.125)
			if ok == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("map applied %v, want %v", ok, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	applied(fitter, true)
	applied(pod, true)
	if f, p := fitter.Maps(), pod.Maps(); len(f) != 1 || len(p) != 1 || f[0].Version != p[0].Version || f[0].Labels != 200 {
		t.Fatalf("fitter %+v, pod %+v", f, p)
	}
	if _, err := fitter.Revert(ctx, "support-bot", "faithfulness"); err != nil {
		t.Fatal(err)
	}
	applied(pod, false)
	if err := pod.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pod.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}

	// A full queue drops and counts instead of blocking the score path.
	slow, err := NewLearner(LearnerOptions{Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	slow.Offer("s", "faithfulness", "builtin", 1, 0.5)
	slow.Offer("s", "faithfulness", "builtin", 1, 0.5)
	if got := testutil.ToFloat64(slow.dropped.WithLabelValues("queue_full")); got != 1 {
		t.Errorf("queue_full counted %v, want 1", got)
	}
}
