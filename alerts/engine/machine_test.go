package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMachineTransitions(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		sec               int
		breach, recovered bool
		want              Transition
		phase             string
	}
	for name, steps := range map[string][]step{
		"fire after for, hold, resolve after keep": {
			{0, true, false, NoChange, phasePending},
			{60, true, false, NoChange, phasePending},
			{120, true, false, Fired, phaseFiring},
			{135, false, false, NoChange, phaseFiring}, // neither: hold
			{150, false, true, NoChange, phaseFiring},  // recovering
			{165, true, false, NoChange, phaseFiring},  // breach again resets recovery
			{180, false, true, NoChange, phaseFiring},
			{299, false, true, NoChange, phaseFiring},
			{300, false, true, Resolved, phaseInactive},
		},
		"flap is suppressed": {
			{0, true, false, NoChange, phasePending},
			{60, false, false, NoChange, phaseInactive},
			{75, true, false, NoChange, phasePending},
			{180, true, false, NoChange, phasePending}, // `for` counts from the new pending
			{195, true, false, Fired, phaseFiring},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := &Machine{}
			for _, s := range steps {
				if got := m.Step(at(s.sec), s.breach, s.recovered, 2*time.Minute, 2*time.Minute); got != s.want || m.Phase != s.phase {
					t.Fatalf("at %ds: transition %v phase %s, want %v %s", s.sec, got, m.Phase, s.want, s.phase)
				}
			}
		})
	}
	m := &Machine{}
	if m.Step(t0, true, false, 0, 0) != Fired || m.Step(t0, false, true, 0, 0) != Resolved {
		t.Fatal("for 0 and keep_firing_for 0 fire and resolve at once")
	}
}

func TestFlapSuppressionBurnRateAndDrift(t *testing.T) {
	// Burn rate with for: 3m: two minutes of failures breach both windows, then good traffic
	// clears the short window before `for` → no alert.
	h := newHarness(t, strings.Replace(burnCfg, "for: 0s", "for: 3m", 1), nil)
	h.feed(t, "faithfulness", 2*time.Minute+10*time.Second, 10, func(int) float64 { return 0.1 }, "bad")
	if p := h.phase("faithful", "search", "page"); p != phasePending {
		t.Fatalf("burst: %s, want pending", p)
	}
	h.feed(t, "faithfulness", 2*time.Minute, 120, func(int) float64 { return 0.9 }, "good")
	if p := h.phase("faithful", "search", "page"); p != phaseInactive || len(h.rec.sent) != 0 {
		t.Fatalf("after the burst: %s, %d notifications", p, len(h.rec.sent))
	}

	// Drift against a baseline: a handful of odd requests breach, then ordinary traffic
	// dilutes them below the threshold before `for`.
	c := parse(t, driftCfg)
	b := drift.NewBuilder(driftDetectors(c.Drift.Detectors), "test", t0)
	for i := 0; i < 300; i++ {
		b.Add("retrieved_documents", "search", float64(4+i%3), 1)
	}
	clk := testutil.NewClock(t0)
	rec := &recorder{}
	e, err := New(Options{Sections: SectionsOf(c), Now: clk.Now, Baseline: b.Baseline(), Sink: rec})
	if err != nil {
		t.Fatal(err)
	}
	hd := &harness{e: e, clk: clk, rec: rec}
	hd.records(t, 30*time.Second, 120, func(int) int { return 0 }, "odd")
	if p := hd.phase("docs", "search", "ticket"); p != phasePending {
		t.Fatalf("odd burst: %s, want pending", p)
	}
	hd.records(t, time.Minute, 3000, func(i int) int { return 4 + i%3 }, "normal")
	if p := hd.phase("docs", "search", "ticket"); p != phaseInactive || len(rec.sent) != 0 {
		t.Fatalf("diluted: %s, %d notifications", p, len(rec.sent))
	}
}
