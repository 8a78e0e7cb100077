package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/internal/score"
)

const changeCfg = `slos:
  - name: faith
    kind: change
    metric: faithfulness
    min_shift: 0.1
    false_alarms: 1/30d
`

// scoreStream feeds n 0/1 faithfulness scores with mean m, ten a second, evaluating every 15 s
// as the engine's loop does, and returns the first firing alert.
func (h *harness) scoreStream(t *testing.T, r *rand.Rand, n int, m float64) *alerts.Alert {
	t.Helper()
	var fired *alerts.Alert
	for i := 0; i < n; i++ {
		h.clk.Add(100 * time.Millisecond)
		v := 0.0
		if r.Float64() < m {
			v = 1
		}
		h.score(t, "faithfulness", fmt.Sprintf("%032x", r.Uint64()), v, 1)
		if i%150 == 149 {
			for _, a := range h.e.Evaluate(context.Background()) {
				if a.Firing() && fired == nil {
					fired = &a
				}
			}
		}
	}
	return fired
}

// TestChangeSLOFiresWithChangeTime: a change SLO stays quiet for 20 minutes at 0.95, fires
// within 30 s of a drop to 0.55 with the change time and both levels, keeps them through a
// restart and in GET /api/v1/alerts, and resolves once the level is back.
func TestChangeSLOFiresWithChangeTime(t *testing.T) {
	store := &MemStore{}
	h := newHarness(t, changeCfg, store)
	r := rand.New(rand.NewPCG(11, 12))
	if a := h.scoreStream(t, r, 12000, 0.95); a != nil {
		t.Fatalf("fired on a stationary stream: %+v", a)
	}
	change := h.clk.Now()
	a := h.scoreStream(t, r, 600, 0.55)
	if a == nil {
		t.Fatal("no alert within 60 s of the drop")
	}
	if a.StartsAt.Sub(change) > 30*time.Second || a.Kind != alerts.KindChange || a.Name != alerts.NameThreshold {
		t.Fatalf("fired %v after the change: %+v", a.StartsAt.Sub(change), a)
	}
	if a.ChangeTime == nil || math.Abs(a.ChangeTime.Sub(change).Seconds()) > 5 {
		t.Fatalf("change time %v, true %v", a.ChangeTime, change)
	}
	if math.Abs(a.LevelBefore.Value-0.95) > 0.02 || a.LevelBefore.Interval == nil || math.Abs(a.LevelAfter.Value-0.55) > 0.15 {
		t.Fatalf("levels before %+v after %+v", a.LevelBefore, a.LevelAfter)
	}
	if !strings.Contains(a.Summary, "dropped from 0.9") || a.Annotations()["change_time"] != a.ChangeTime.UTC().Format(time.RFC3339) {
		t.Fatalf("summary %q, annotations %v", a.Summary, a.Annotations())
	}
	if got := promtestutil.ToFloat64(h.e.m.changeDetected.WithLabelValues("faith", "search")); got != 1 {
		t.Fatalf("%s = %v", alerts.MetricChangeDetected, got)
	}
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A restart on the same store: the detector's alarm and levels come back.
	h2 := newHarness(t, changeCfg, store)
	h2.clk.Set(h.clk.Now().Add(10 * time.Second))
	if err := h2.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := h2.e.Evaluate(context.Background())
	if len(out) != 1 || !out[0].Firing() || !out[0].ChangeTime.Equal(*a.ChangeTime) || !out[0].StartsAt.Equal(a.StartsAt) {
		t.Fatalf("after restart: %+v", out)
	}
	rec := httptest.NewRecorder()
	h2.e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/alerts", nil))
	var body struct {
		Alerts []struct {
			ChangeTime  string `json:"change_time"`
			LevelBefore struct {
				Value    float64 `json:"value"`
				Interval struct{ Lower, Upper float64 }
			} `json:"level_before"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Alerts) != 1 ||
		body.Alerts[0].ChangeTime != a.ChangeTime.Format(time.RFC3339Nano) || body.Alerts[0].LevelBefore.Interval.Lower == 0 {
		t.Fatalf("GET /api/v1/alerts: %v %s", err, rec.Body)
	}

	// The level comes back: the alert resolves (keep_firing_for 1m after the detector clears).
	h2.scoreStream(t, r, 3000, 0.95)
	if ph := h2.phase("faith", "search", "page"); ph != phaseInactive {
		t.Fatalf("phase after recovery: %s", ph)
	}
}

// TestChangeSLORefusesValuesOutsideUnitInterval: the detector's likelihood ratios need values
// in [0,1]; others are refused with an error and counted, never silently clipped.
func TestChangeSLORefusesValuesOutsideUnitInterval(t *testing.T) {
	h := newHarness(t, changeCfg, nil)
	err := h.e.ConsumeScores(context.Background(), []score.Result{{TraceID: "a", Service: "search", Metric: "faithfulness", Value: 1.5}})
	if err == nil || !strings.Contains(err.Error(), "outside [0,1]") {
		t.Fatalf("err = %v", err)
	}
	if got := promtestutil.ToFloat64(h.e.m.rejected.WithLabelValues("out_of_range")); got != 1 {
		t.Fatalf("rejected = %v", got)
	}
}
