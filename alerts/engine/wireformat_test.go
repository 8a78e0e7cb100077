package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

// wireCfg has one rule of every kind that persists state (threshold and burn-rate SLOs, a
// drift detector) and a comparison.
const wireCfg = `
slos:
  - {name: low-faith, metric: faithfulness, alert_below: 0.6, min_samples: 5, window: 10m, for: 0s}
  - name: faith-budget
    kind: burn_rate
    metric: faithfulness
    good_when: ">= 0.5"
    objective: 0.9
    min_samples: 5
    period: 1d
    burn_rates: [{severity: page, long_window: 1h, short_window: 5m, factor: 2}]
drift:
  window: 10m
  reference_window: 30m
  detectors:
    - {name: latency-shift, signal: latency_seconds, method: psi, threshold: 0.2, min_samples: 5, min_reference_samples: 5}
comparisons:
  - {name: prompt-v2, metrics: [faithfulness], baseline: stable, margin: 0.05, alpha: 0.05, min_samples: 5, severity: page}
`

// wireStateFile holds the ragwatch_alerts values Save wrote, captured from the engine before it
// was split by kind (issue 47): key → value.
const wireStateFile = "testdata/alert-state-v1.json"

// wireTraffic feeds the engine what produced wireStateFile: 40 minutes of records and scores
// whose faithfulness falls, a canary worse than its baseline, a latency shift.
func wireTraffic(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	for i := range 40 {
		faith, lat := 0.9, 0.2
		if i >= 30 {
			faith, lat = 0.3, 2.5
		}
		id := fmt.Sprintf("%032x", i+1)
		if err := h.e.ConsumeRecord(ctx, &record.Record{TraceID: id, SpanID: fmt.Sprintf("%016x", i+1), Service: "search",
			Time: h.clk.Now(), Latency: record.Latency{Total: lat * 1000}}); err != nil {
			t.Fatal(err)
		}
		if err := h.e.ConsumeScores(ctx, []score.Result{
			{TraceID: id, Service: "search", Variant: "stable", Metric: "faithfulness", Value: faith, Weight: 1},
			{TraceID: id + "c", Service: "search", Variant: "canary", Metric: "faithfulness", Value: faith - 0.4, Weight: 1},
		}); err != nil {
			t.Fatal(err)
		}
		h.clk.Add(time.Minute)
		h.e.Evaluate(ctx)
	}
}

// TestAlertStateWireFormat: state written to the ragwatch_alerts bucket by the engine before
// the split loads into today's engine, shows the same alerts and comparisons, and is written
// back byte for byte as it was read: a restart across the upgrade keeps every window.
func TestAlertStateWireFormat(t *testing.T) {
	raw, err := os.ReadFile(wireStateFile)
	if os.IsNotExist(err) && os.Getenv("RAGWATCH_CAPTURE_STATE") != "" {
		capture(t)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]string
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	store := &MemStore{}
	for k, v := range saved {
		if err := store.Save(context.Background(), k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, wireCfg, store)
	h.clk.Add(40 * time.Minute) // the moment the state was saved
	if err := h.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	var firing []string
	for _, a := range h.e.Alerts() {
		if a.Status == alerts.StatusFiring {
			firing = append(firing, a.Name+"/"+a.Rule+"/"+a.Severity)
		}
	}
	slices.Sort(firing)
	want := []string{comparison.NameComparison + "/prompt-v2/page", alerts.NameDrift + "/latency-shift/ticket",
		alerts.NameBurnRate + "/faith-budget/page", alerts.NameThreshold + "/low-faith/page"}
	if !slices.Equal(firing, want) {
		t.Errorf("firing after load: %v\nwant %v", firing, want)
	}
	cmp := h.e.Comparisons()
	if len(cmp) != 1 || cmp[0].Candidate != "canary" || cmp[0].State != "candidate_worse" || cmp[0].CandidateN != 40 {
		t.Errorf("comparisons after load: %+v", cmp)
	}
	for _, r := range h.e.rules {
		if r.instances["search"] == nil {
			t.Errorf("rule %s: no window state for search after load", r.name)
		}
	}
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys, _ := store.List(context.Background(), "")
	if !slices.Equal(keys, slices.Sorted(maps.Keys(saved))) {
		t.Fatalf("keys after save: %v\nwant %v", keys, slices.Sorted(maps.Keys(saved)))
	}
	for _, k := range keys {
		got, _ := store.Load(context.Background(), k)
		if strings.HasPrefix(k, "comparison.") {
			// Comparisons moved to one alert per metric (format version 2): the version 1
			// alert is kept on the metric it names, checked by reloading what was written.
			if !strings.HasPrefix(string(got), `{"version":2,`) {
				t.Errorf("%s written back as %s, want version 2", k, got)
			}
			continue
		}
		if string(got) != saved[k] {
			t.Errorf("%s written back differently:\n got %s\nwant %s", k, got, saved[k])
		}
	}
	h2 := newHarness(t, wireCfg, store)
	h2.clk.Add(40 * time.Minute)
	if err := h2.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	var again []alerts.Alert
	for _, a := range h2.e.Alerts() {
		if a.Name == comparison.NameComparison {
			again = append(again, a)
		}
	}
	if len(again) != 1 || again[0].Fingerprint != "ac868a14b73db6f7" || again[0].Metric != "faithfulness" ||
		!again[0].StartsAt.Equal(time.Date(2026, 3, 1, 12, 6, 0, 0, time.UTC)) {
		t.Errorf("comparison alert after the version 2 round trip: %+v", again)
	}
}

// capture writes wireStateFile from the running code (RAGWATCH_CAPTURE_STATE=1, file absent).
func capture(t *testing.T) {
	store := &MemStore{}
	h := newHarness(t, wireCfg, store)
	wireTraffic(t, h)
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys, _ := store.List(context.Background(), "")
	out := map[string]string{}
	for _, k := range keys {
		v, _ := store.Load(context.Background(), k)
		out[k] = string(v)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wireStateFile, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("captured %d keys", len(keys))
}
