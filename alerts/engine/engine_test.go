package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/drift"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// recorder is a Sink keeping every alert it was handed.
type recorder struct {
	mu   sync.Mutex
	sent []alerts.Alert
}

func (r *recorder) Send(_ context.Context, a []alerts.Alert) {
	r.mu.Lock()
	r.sent = append(r.sent, a...)
	r.mu.Unlock()
}

func parse(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type harness struct {
	e   *Engine
	clk *testutil.Clock
	reg *prometheus.Registry
	rec *recorder
}

func newHarness(t *testing.T, y string, store Store) *harness {
	t.Helper()
	h := &harness{clk: testutil.NewClock(t0), reg: prometheus.NewRegistry(), rec: &recorder{}}
	e, err := New(Options{Sections: SectionsOf(parse(t, y)), Registerer: h.reg, Now: h.clk.Now, Store: store, Sink: h.rec})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	return h
}

func (h *harness) score(t *testing.T, metric, id string, v, w float64) {
	t.Helper()
	if err := h.e.ConsumeScores(context.Background(), []score.Result{{TraceID: id, Service: "search", Metric: metric, Value: v, Weight: w}}); err != nil {
		t.Fatal(err)
	}
}

// phase is the engine's alert phase for a rule/service/severity.
func (h *harness) phase(rule, service, sev string) string {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	for _, r := range h.e.rules {
		if r.name != rule {
			continue
		}
		if in := r.instances[service]; in != nil {
			if m := in.Machines[sev]; m != nil {
				return m.Phase
			}
		}
	}
	return "none"
}

const thresholdCfg = `
slos:
  - name: cp
    metric: citation_precision
    objective: 0.85
    alert_below: 0.7
    window: 10m
    min_samples: 30
    for: 2m
    keep_firing_for: 2m
    labels: {team: search}
    runbook_url: https://runbooks.example/cp
drift: {detectors: []}
alerting:
  trace_url_template: "https://grafana.example/explore?trace={trace_id}"
  dashboard_url: https://grafana.example/d/ragwatch
`

// feed adds n scores of value v spread over d, evaluating every 15s.
func (h *harness) feed(t *testing.T, metric string, d time.Duration, perMinute int, value func(i int) float64, idPrefix string) {
	t.Helper()
	step := time.Minute / time.Duration(perMinute)
	nextEval := h.clk.Now().Add(15 * time.Second)
	for i := 0; time.Duration(i)*step < d; i++ {
		h.score(t, metric, fmt.Sprintf("%s-%d", idPrefix, i), value(i), 1)
		h.clk.Add(step)
		if !h.clk.Now().Before(nextEval) {
			h.e.Evaluate(context.Background())
			nextEval = nextEval.Add(15 * time.Second)
		}
	}
}

func TestThresholdFireHoldResolveAndFlap(t *testing.T) {
	h := newHarness(t, thresholdCfg, nil)
	ctx := context.Background()
	const m = "citation_precision"
	// 29 clearly bad samples: below min_samples, nothing happens.
	for i := 0; i < 29; i++ {
		h.score(t, m, fmt.Sprintf("a%d", i), 0.1, 1)
	}
	h.e.Evaluate(ctx)
	if p := h.phase("cp", "search", "page"); p != phaseInactive {
		t.Fatalf("29 samples: phase %s", p)
	}
	// The 30th makes it pending; not firing before `for`.
	h.score(t, m, "a29", 0.1, 1)
	h.e.Evaluate(ctx)
	if p := h.phase("cp", "search", "page"); p != phasePending {
		t.Fatalf("30 samples: phase %s, want pending", p)
	}
	// Flap: good traffic pushes the mean up before `for` elapses → back to inactive, no alert.
	h.clk.Add(time.Minute)
	for i := 0; i < 200; i++ {
		h.score(t, m, fmt.Sprintf("g%d", i), 0.95, 1)
	}
	h.e.Evaluate(ctx)
	h.clk.Add(90 * time.Second)
	h.e.Evaluate(ctx)
	if p := h.phase("cp", "search", "page"); p != phaseInactive {
		t.Fatalf("after flap: phase %s, want inactive", p)
	}
	if len(h.rec.sent) != 0 {
		t.Fatalf("flap must not notify: %+v", h.rec.sent)
	}
	// Let the window empty, then sustained bad traffic.
	h.clk.Add(11 * time.Minute)
	h.e.Evaluate(ctx)
	for i := 0; i < 60; i++ {
		h.score(t, m, fmt.Sprintf("b%d", i), 0.4+float64(i%5)*0.01, 1)
	}
	h.e.Evaluate(ctx)
	h.clk.Add(time.Minute)
	h.e.Evaluate(ctx)
	if len(h.rec.sent) != 0 {
		t.Fatal("fired before `for`")
	}
	h.clk.Add(time.Minute)
	out := h.e.Evaluate(ctx)
	if len(out) != 1 || out[0].Status != alerts.StatusFiring {
		t.Fatalf("want one firing alert after for, got %+v", out)
	}
	a := out[0]
	wantLabels := map[string]string{"alertname": "RagwatchSLOViolated", "slo": "cp", "service": "search", "severity": "page", "team": "search"}
	if fmt.Sprint(a.Labels) != fmt.Sprint(wantLabels) {
		t.Fatalf("labels = %v", a.Labels)
	}
	if a.N != 60 || a.Threshold != 0.7 || a.Comparator != "<" || a.Window != model.Duration(10*time.Minute) ||
		!a.StartsAt.Equal(h.clk.Now()) || a.Interval == nil || a.Interval.Upper >= 0.7 {
		t.Fatalf("alert facts: %+v", a)
	}
	if len(a.Evidence) != 5 {
		t.Fatalf("evidence: %+v", a.Evidence)
	}
	for _, ev := range a.Evidence {
		if ev.Value != 0.4 || !strings.HasPrefix(ev.TraceID, "b") || ev.URL != "https://grafana.example/explore?trace="+ev.TraceID {
			t.Fatalf("evidence item %+v: want the 0.4 samples with links", ev)
		}
	}
	if got := promtestutil.ToFloat64(h.e.m.firing.WithLabelValues("cp", "page")); got != 1 {
		t.Fatalf("alerts_firing = %v", got)
	}
	// Hold: mean recovers into the band [0.7 upper bound, ...) → neither breach nor recovered:
	// add enough 0.72s that the interval covers 0.7 but the mean stays below 0.7.
	for i := 0; i < 100; i++ {
		h.score(t, m, fmt.Sprintf("m%d", i), 0.78, 1)
	}
	out = h.e.Evaluate(ctx)
	if len(out) != 1 || out[0].Status != alerts.StatusFiring {
		t.Fatalf("must hold firing: %+v", out)
	}
	// Recovery: good traffic; resolves only after keep_firing_for (2m).
	for i := 0; i < 400; i++ {
		h.score(t, m, fmt.Sprintf("r%d", i), 0.95, 1)
	}
	h.e.Evaluate(ctx)
	h.clk.Add(time.Minute)
	if out := h.e.Evaluate(ctx); len(out) != 1 || out[0].Status != alerts.StatusFiring {
		t.Fatalf("resolved before keep_firing_for: %+v", out)
	}
	h.clk.Add(time.Minute)
	out = h.e.Evaluate(ctx)
	if len(out) != 1 || out[0].Status != alerts.StatusResolved || !out[0].EndsAt.Equal(h.clk.Now()) {
		t.Fatalf("want resolved: %+v", out)
	}
	if got := promtestutil.ToFloat64(h.e.m.firing.WithLabelValues("cp", "page")); got != 0 {
		t.Fatalf("alerts_firing after resolve = %v", got)
	}
	// Counters carry the raw sums for fleet rules: 29+1+200+60+100+400 samples.
	if got := promtestutil.ToFloat64(h.e.m.samples.WithLabelValues("cp", "search")); got != 790 {
		t.Fatalf("samples_total = %v", got)
	}
	// The API lists the resolved alert for resolved_retention.
	if l := h.e.Alerts(); len(l) != 1 || l[0].Status != alerts.StatusResolved {
		t.Fatalf("Alerts() = %+v", l)
	}
	h.clk.Add(25 * time.Hour)
	if l := h.e.Alerts(); len(l) != 0 {
		t.Fatalf("resolved alert kept past retention: %+v", l)
	}
}

func TestThresholdHonoursTheConfidenceBound(t *testing.T) {
	h := newHarness(t, thresholdCfg, nil)
	// Mean 0.6 < 0.7 but widely spread (0.2 / 1.0): the upper bound is above 0.7 → no alert.
	for i := 0; i < 40; i++ {
		h.score(t, "citation_precision", fmt.Sprint(i), 0.2+0.8*float64(i%2), 1)
	}
	for i := 0; i < 20; i++ {
		h.e.Evaluate(context.Background())
		h.clk.Add(15 * time.Second)
	}
	if p := h.phase("cp", "search", "page"); p != phaseInactive {
		t.Fatalf("point estimate below the limit must not fire on its own: %s", p)
	}
	// Weights: 40 good samples at weight 1 and 40 bad ones at weight 10 make the weighted mean low.
	h2 := newHarness(t, thresholdCfg, nil)
	for i := 0; i < 40; i++ {
		h2.score(t, "citation_precision", fmt.Sprint("g", i), 0.9, 1)
		h2.score(t, "citation_precision", fmt.Sprint("b", i), 0.5, 10)
	}
	h2.e.Evaluate(context.Background())
	if p := h2.phase("cp", "search", "page"); p != phasePending {
		t.Fatalf("weighted mean 0.536 must breach: %s", p)
	}
	if got := promtestutil.ToFloat64(h2.e.m.value.WithLabelValues("cp", "search")); got < 0.5363 || got > 0.5364 {
		t.Fatalf("slo_value = %v, want (40*0.9+400*0.5)/440 = 0.53636", got)
	}
}

func TestCitationPrecisionDropScenario(t *testing.T) {
	h := newHarness(t, `
slos:
  - name: citation-precision
    metric: citation_precision
    objective: 0.85
    alert_below: 0.70
    window: 15m
    min_samples: 30
    for: 2m
    severity: page
drift: {detectors: []}
alerting:
  trace_url_template: "http://tempo/trace/{trace_id}"
`, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	healthy := func(int) float64 { return 0.9 + (rng.Float64()-0.5)*0.1 }
	dropped := func(int) float64 { return 0.5 + (rng.Float64()-0.5)*0.1 }
	h.feed(t, "citation_precision", 10*time.Minute, 12, healthy, "ok")
	if len(h.rec.sent) != 0 {
		t.Fatalf("healthy traffic alerted: %+v", h.rec.sent[0])
	}
	drop := h.clk.Now()
	var fired *alerts.Alert
	for i := 0; i < 17*4 && fired == nil; i++ {
		h.feed(t, "citation_precision", 15*time.Second, 12, dropped, fmt.Sprintf("bad%d", i))
		for _, a := range h.rec.sent {
			if a.Status == alerts.StatusFiring {
				fired = &a
				break
			}
		}
	}
	if fired == nil {
		t.Fatal("no alert within window + for of the drop")
	}
	if d := fired.StartsAt.Sub(drop); d <= 2*time.Minute || d > 17*time.Minute {
		t.Fatalf("fired %s after the drop, want within (2m, 17m]", d)
	}
	t.Logf("fired %s after the drop; value %.3f interval %s n=%d", fired.StartsAt.Sub(drop), fired.Value, fired.IntervalText(), fired.N)
	if len(fired.Evidence) != 5 {
		t.Fatalf("evidence = %+v", fired.Evidence)
	}
	for i, ev := range fired.Evidence {
		if !strings.HasPrefix(ev.TraceID, "bad") || ev.Value > 0.46 || ev.URL != "http://tempo/trace/"+ev.TraceID {
			t.Fatalf("evidence %d = %+v: want post-drop traces with the lowest values", i, ev)
		}
		if i > 0 && ev.Value < fired.Evidence[i-1].Value {
			t.Fatalf("evidence not worst first: %+v", fired.Evidence)
		}
	}
	// Recovery.
	recover := h.clk.Now()
	h.rec.mu.Lock()
	h.rec.sent = nil
	h.rec.mu.Unlock()
	var resolved *alerts.Alert
	for i := 0; i < 20*4 && resolved == nil; i++ {
		h.feed(t, "citation_precision", 15*time.Second, 12, healthy, fmt.Sprintf("rec%d", i))
		for _, a := range h.rec.sent {
			if a.Status == alerts.StatusResolved {
				resolved = &a
			}
		}
	}
	if resolved == nil {
		t.Fatal("alert did not resolve after recovery")
	}
	if d := resolved.EndsAt.Sub(recover); d > 17*time.Minute {
		t.Fatalf("resolved %s after recovery", d)
	}
	t.Logf("resolved %s after recovery", resolved.EndsAt.Sub(recover))
	if !resolved.StartsAt.Equal(fired.StartsAt) {
		t.Fatalf("resolved alert lost its start: %v vs %v", resolved.StartsAt, fired.StartsAt)
	}
}

const burnCfg = `
slos:
  - name: faithful
    kind: burn_rate
    metric: faithfulness
    good_when: ">= 0.5"
    objective: 0.9
    min_samples: 20
    for: 0s
    keep_firing_for: 2m
    burn_rates:
      - {severity: page, long_window: 1h, short_window: 5m, factor: 5}
      - {severity: ticket, long_window: 6h, short_window: 30m, factor: 2}
drift: {detectors: []}
`

func TestBurnRateFireHoldResolve(t *testing.T) {
	h := newHarness(t, burnCfg, nil)
	ctx := context.Background()
	// One hour of 5% bad (burn 0.5): nothing.
	h.feed(t, "faithfulness", time.Hour, 10, func(i int) float64 {
		if i%20 == 0 {
			return 0.1
		}
		return 0.9
	}, "ok")
	if len(h.rec.sent) != 0 {
		t.Fatalf("healthy burn alerted: %+v", h.rec.sent[0])
	}
	if got := promtestutil.ToFloat64(h.e.m.budget.WithLabelValues("faithful", "search")); got < 0.49 || got > 0.51 {
		t.Fatalf("budget remaining = %v, want 0.5 (5%% bad of a 10%% budget)", got)
	}
	// 80% bad: the 5m window burns 8x at once; the hour needs > 50% bad to pass 5x.
	var page *alerts.Alert
	start := h.clk.Now()
	for i := 0; i < 60 && page == nil; i++ {
		h.feed(t, "faithfulness", time.Minute, 10, func(i int) float64 {
			if i%5 == 0 {
				return 0.9
			}
			return 0.2
		}, fmt.Sprintf("bad%d", i))
		for _, a := range h.rec.sent {
			if a.Severity == "page" && a.Firing() {
				page = &a
			}
		}
	}
	if page == nil {
		t.Fatal("page did not fire")
	}
	if d := page.StartsAt.Sub(start); d < 30*time.Minute || d > 45*time.Minute {
		t.Fatalf("page fired %s into the incident; want when the hour's bad ratio passes 50%% (~35m)", d)
	}
	if page.Name != alerts.NameBurnRate || page.Threshold != 5 || page.Window != model.Duration(time.Hour) ||
		page.Value <= 5 || page.BudgetRemaining == nil || *page.BudgetRemaining >= 0 || len(page.Evidence) != 5 {
		t.Fatalf("page facts: %+v", page)
	}
	for _, ev := range page.Evidence {
		if ev.Value != 0.2 {
			t.Fatalf("burn evidence must be bad samples: %+v", ev)
		}
	}
	// Recovery: the short window clears in 5 minutes; resolve after keep_firing_for.
	h.rec.sent = nil
	h.feed(t, "faithfulness", time.Minute, 10, func(int) float64 { return 0.9 }, "good")
	if p := h.phase("faithful", "search", "page"); p != phaseFiring {
		t.Fatalf("page must hold through keep_firing_for: %s", p)
	}
	h.feed(t, "faithfulness", 4*time.Minute, 10, func(int) float64 { return 0.9 }, "good2")
	if p := h.phase("faithful", "search", "page"); p != phaseInactive {
		t.Fatalf("page should have resolved: %s", p)
	}
	var resolved bool
	for _, a := range h.rec.sent {
		resolved = resolved || (a.Severity == "page" && a.Status == alerts.StatusResolved)
	}
	if !resolved {
		t.Fatal("no resolved notification")
	}
	_ = ctx
}

const driftCfg = `
drift:
  window: 10m
  reference_window: 30m
  detectors:
    - name: docs
      signal: retrieved_documents
      method: psi
      min_samples: 50
      min_reference_samples: 100
      for: 2m
      keep_firing_for: 2m
`

func docsRecord(id string, n int) *record.Record {
	r := &record.Record{TraceID: id, Service: "search", Query: "q"}
	for i := 0; i < n; i++ {
		r.Documents = append(r.Documents, record.Document{ID: fmt.Sprint(i)})
	}
	return r
}

func (h *harness) records(t *testing.T, d time.Duration, perMinute int, docs func(i int) int, prefix string) {
	t.Helper()
	step := time.Minute / time.Duration(perMinute)
	next := h.clk.Now().Add(15 * time.Second)
	for i := 0; time.Duration(i)*step < d; i++ {
		if err := h.e.ConsumeRecord(context.Background(), docsRecord(fmt.Sprintf("%s-%d", prefix, i), docs(i))); err != nil {
			t.Fatal(err)
		}
		h.clk.Add(step)
		if !h.clk.Now().Before(next) {
			h.e.Evaluate(context.Background())
			next = next.Add(15 * time.Second)
		}
	}
}

func TestDriftFireHoldResolve(t *testing.T) {
	h := newHarness(t, driftCfg, nil)
	normal := func(i int) int { return 4 + i%3 } // 4, 5, 6 documents
	h.records(t, 40*time.Minute, 20, normal, "n")
	if p := h.phase("docs", "search", "ticket"); p != phaseInactive {
		t.Fatalf("stable traffic: %s", p)
	}
	if got := promtestutil.ToFloat64(h.e.m.drift.WithLabelValues("docs", "search")); got > 0.05 {
		t.Fatalf("stable PSI = %v", got)
	}
	// The index breaks: most requests retrieve 0 or 1 document.
	broken := func(i int) int { return i % 2 }
	var fired *alerts.Alert
	for i := 0; i < 40 && fired == nil; i++ {
		h.records(t, 30*time.Second, 20, broken, fmt.Sprintf("x%d", i))
		for _, a := range h.rec.sent {
			if a.Firing() {
				fired = &a
			}
		}
	}
	if fired == nil {
		t.Fatal("drift did not fire")
	}
	if fired.Name != alerts.NameDrift || fired.Labels["detector"] != "docs" || fired.Value <= 0.2 || len(fired.Evidence) == 0 {
		t.Fatalf("drift alert: %+v", fired)
	}
	for _, ev := range fired.Evidence {
		if !strings.HasPrefix(ev.TraceID, "x") || (ev.Value != 0 && ev.Value != 1) {
			t.Fatalf("drift evidence must come from the over-represented bin: %+v", ev)
		}
	}
	// The broken state becomes the new normal in the trailing reference only after 40 minutes;
	// restoring the old distribution resolves it sooner.
	h.rec.sent = nil
	h.records(t, 15*time.Minute, 20, normal, "back")
	resolved := false
	for _, a := range h.rec.sent {
		resolved = resolved || a.Status == alerts.StatusResolved
	}
	if !resolved {
		t.Fatalf("drift did not resolve; phase %s", h.phase("docs", "search", "ticket"))
	}
	// A lasting shift becomes the new normal after a reference window: break it again for good.
	h.rec.sent = nil
	phase2 := h.clk.Now()
	h.records(t, 90*time.Minute, 20, broken, "y")
	var fires, resolves int
	ends := map[time.Time]bool{}
	for _, a := range h.rec.sent {
		if a.Status == alerts.StatusResolved {
			if a.EndsAt.After(phase2) { // the earlier resolve is still offered for a while
				ends[a.EndsAt] = true
			}
		} else {
			fires++
		}
	}
	resolves = len(ends)
	if p := h.phase("docs", "search", "ticket"); p != phaseInactive || resolves != 1 || fires == 0 {
		t.Fatalf("a lasting shift must fire then be accepted: phase %s, %d firing notifications, %d resolves", p, fires, resolves)
	}
}

func TestDriftAgainstPinnedBaseline(t *testing.T) {
	c := parse(t, driftCfg)
	b := drift.NewBuilder(driftDetectors(c.Drift.Detectors), "test", t0)
	for i := 0; i < 300; i++ {
		b.Add("retrieved_documents", "search", float64(4+i%3), 1)
	}
	clk := testutil.NewClock(t0)
	e, err := New(Options{Sections: SectionsOf(c), Now: clk.Now, Baseline: b.Baseline()})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{e: e, clk: clk, rec: &recorder{}}
	// No trailing reference is needed: broken traffic from the first minute is compared with
	// the baseline and fires after min_samples and `for`.
	h.records(t, 6*time.Minute, 20, func(i int) int { return i % 2 }, "x")
	if p := h.phase("docs", "search", "ticket"); p != phaseFiring {
		t.Fatalf("pinned baseline: phase %s, want firing", p)
	}
}

func TestRestartKeepsState(t *testing.T) {
	store := &MemStore{}
	h := newHarness(t, thresholdCfg, store)
	for i := 0; i < 60; i++ {
		h.score(t, "citation_precision", fmt.Sprint("b", i), 0.4, 1)
	}
	h.e.Evaluate(context.Background())
	h.clk.Add(2 * time.Minute)
	if out := h.e.Evaluate(context.Background()); len(out) != 1 || !out[0].Firing() {
		t.Fatalf("want firing before restart: %+v", out)
	}
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A new engine (new process) on the same store continues: still firing, same start, same
	// window sums, no re-fire.
	h2 := newHarness(t, thresholdCfg, store)
	h2.clk.Set(h.clk.Now().Add(30 * time.Second))
	if err := h2.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := h2.e.Evaluate(context.Background())
	if len(out) != 1 || !out[0].Firing() || !out[0].StartsAt.Equal(h.clk.Now()) || out[0].N != 60 || len(out[0].Evidence) != 5 {
		t.Fatalf("after restart: %+v", out)
	}
	// A changed window configuration drops the incompatible state instead of misreading it.
	h3 := newHarness(t, strings.Replace(thresholdCfg, "window: 10m", "window: 20m", 1), store)
	if err := h3.e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out := h3.e.Evaluate(context.Background()); len(out) != 0 {
		t.Fatalf("incompatible state restored: %+v", out)
	}
}

func TestRejectsNonFiniteInput(t *testing.T) {
	h := newHarness(t, thresholdCfg, nil)
	err := h.e.ConsumeScores(context.Background(), []score.Result{
		{TraceID: "a", Service: "s", Metric: "citation_precision", Value: 0.5, Weight: -1},
		{TraceID: "b", Service: "s", Metric: "citation_precision", Value: 0.5, Weight: 2},
	})
	if err == nil || err.Error() != "alert engine: citation_precision weight must be a finite non-negative number" {
		t.Fatalf("err = %v", err)
	}
	if got := promtestutil.ToFloat64(h.e.m.rejected.WithLabelValues("invalid_weight")); got != 1 {
		t.Fatalf("rejected = %v", got)
	}
	if got := promtestutil.ToFloat64(h.e.m.weight.WithLabelValues("cp", "s")); got != 2 {
		t.Fatalf("the valid result must still count: weight_total = %v", got)
	}
	// Metrics no rule watches are ignored, valid or not.
	if err := h.e.ConsumeScores(context.Background(), []score.Result{{Metric: "other", Value: 2}}); err != nil {
		t.Fatal(err)
	}
}

func TestFeedbackSignal(t *testing.T) {
	h := newHarness(t, `
slos:
  - {name: neg, metric: negative_feedback_rate, alert_above: 0.2, min_samples: 10, window: 5m}
drift: {detectors: []}
`, nil)
	for i := 0; i < 20; i++ {
		s := 1.0
		if i%2 == 0 {
			s = -1
		}
		if err := h.e.ConsumeFeedback(context.Background(), record.Feedback{TraceID: fmt.Sprint(i), Service: "search", Score: s}); err != nil {
			t.Fatal(err)
		}
	}
	out := h.e.Evaluate(context.Background())
	if len(out) != 1 || out[0].Value != 0.5 || out[0].Comparator != ">" {
		t.Fatalf("negative feedback 50%% must fire (for 0): %+v", out)
	}
}

func TestAPIHandler(t *testing.T) {
	h := newHarness(t, thresholdCfg, nil)
	for i := 0; i < 60; i++ {
		h.score(t, "citation_precision", fmt.Sprint("b", i), 0.4, 1)
	}
	h.e.Evaluate(context.Background())
	h.clk.Add(2 * time.Minute)
	h.e.Evaluate(context.Background())
	srv := httptest.NewServer(h.e.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/alerts?status=firing")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Alerts []map[string]any `json:"alerts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(body.Alerts) != 1 {
		t.Fatalf("status %d body %+v", resp.StatusCode, body)
	}
	a := body.Alerts[0]
	for k, want := range map[string]any{"alertname": "RagwatchSLOViolated", "rule": "cp", "status": "firing",
		"window": "10m", "n": 60.0, "threshold": 0.7, "comparator": "<", "runbook_url": "https://runbooks.example/cp",
		"dashboard_url": "https://grafana.example/d/ragwatch"} {
		if a[k] != want {
			t.Errorf("%s = %v, want %v", k, a[k], want)
		}
	}
	if ev := a["evidence"].([]any); len(ev) != 5 {
		t.Errorf("evidence = %v", ev)
	}
	for _, q := range []string{"?status=bogus"} {
		r, _ := http.Get(srv.URL + "/api/v1/alerts" + q)
		r.Body.Close()
		if r.StatusCode != 400 {
			t.Errorf("%s: %d", q, r.StatusCode)
		}
	}
	r, _ := http.Post(srv.URL+"/api/v1/alerts", "application/json", nil)
	r.Body.Close()
	if r.StatusCode != 405 {
		t.Errorf("POST: %d", r.StatusCode)
	}
}

func TestLifecycle(t *testing.T) {
	c := parse(t, thresholdCfg)
	c.Alerting.EvaluationInterval = 10 * time.Millisecond
	c.Alerting.SaveInterval = 10 * time.Millisecond
	store := &MemStore{}
	e, err := New(Options{Sections: SectionsOf(c), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown without start: %v", err)
	}
	for round := 0; round < 2; round++ {
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err == nil {
			t.Fatal("double start must fail")
		}
		_ = e.ConsumeScores(context.Background(), []score.Result{{TraceID: "t", Service: "s", Metric: "citation_precision", Value: 0.5}})
		testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the loop to save", func() bool {
			return promtestutil.ToFloat64(e.m.saves.WithLabelValues("ok")) >= float64(2*round+1)
		})
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Load(context.Background(), "slo.cp.cw"); err != nil { // base64url("s")
		t.Fatalf("state not saved on shutdown: %v", err)
	}
}

func TestBaselineFromState(t *testing.T) {
	store := &MemStore{}
	h := newHarness(t, driftCfg, store)
	h.records(t, 12*time.Minute, 20, func(i int) int { return 2 + i%2 }, "n")
	if err := h.e.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := BaselineFromState(context.Background(), SectionsOf(parse(t, driftCfg)), store, "test", h.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	hist := b.Detectors["docs"].Services["search"]
	// The window is the last 12 buckets of 50s (window/12) up to now: count the records there.
	width := int64(50 * time.Second)
	hi := h.clk.Now().UnixNano() / width
	var want int64
	for i := 0; i < 240; i++ {
		if idx := t0.Add(time.Duration(i)*3*time.Second).UnixNano() / width; idx > hi-12 && idx <= hi {
			want++
		}
	}
	if hist.N != want || hist.Counts[2]+hist.Counts[3] != float64(want) {
		t.Fatalf("pinned window: %+v, want %d samples", hist, want)
	}
	if all := b.Detectors["docs"].Services["*"]; all.N != hist.N {
		t.Fatalf("all-services histogram: %+v", all)
	}
	if _, err := BaselineFromState(context.Background(), SectionsOf(parse(t, driftCfg)), &MemStore{}, "test", h.clk.Now()); err == nil {
		t.Fatal("an empty store must be an error")
	}
}
