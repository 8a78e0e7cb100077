package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/comparison"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const comparisonCfg = `
comparisons:
  - name: prompt-v2
    metrics: [faithfulness]
    baseline: stable
    margin: 0.05
    alpha: 0.05
    min_samples: 50
    severity: page
    labels: {team: rag}
`

// TestComparisonFiresWithWorstTraces: a canary whose faithfulness is 0.25 lower than the
// baseline's goes from collecting to candidate_worse and fires one alert naming the
// candidate's worst traces; an equal variant becomes not_worse and never fires.
func TestComparisonFiresWithWorstTraces(t *testing.T) {
	h := newHarness(t, comparisonCfg, nil)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 1))
	next := 0
	feed := func(n int) {
		for range n {
			i := next
			next++
			res := []score.Result{
				{TraceID: fmt.Sprintf("s%d", i), Service: "search", Variant: "stable", Metric: "faithfulness", Value: 0.7 + 0.3*r.Float64(), Weight: 1},
				{TraceID: fmt.Sprintf("c%d", i), Service: "search", Variant: "canary", Metric: "faithfulness", Value: 0.45 + 0.3*r.Float64(), Weight: 1},
				{TraceID: fmt.Sprintf("e%d", i), Service: "search", Variant: "same", Metric: "faithfulness", Value: 0.7 + 0.3*r.Float64(), Weight: 1},
			}
			if i == 7 {
				res[1].Value = 0.01 // the canary's worst trace
			}
			if err := h.e.ConsumeScores(ctx, res); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The baseline's samples count only from the first candidate sample on: the first round
	// creates the experiments.
	feed(1)
	feed(20)
	if got := h.e.Evaluate(ctx); len(got) != 0 {
		t.Fatalf("collecting: %d alerts", len(got))
	}
	st := h.e.Comparisons()
	if len(st) != 2 || st[0].Candidate != "canary" || st[0].State != "collecting" || st[1].Candidate != "same" {
		t.Fatalf("%+v", st)
	}
	feed(400)
	got := h.e.Evaluate(ctx)
	if len(got) != 1 {
		t.Fatalf("%d alerts: %+v", len(got), got)
	}
	a := got[0]
	if a.Name != comparison.NameComparison || a.Kind != comparison.KindComparison || a.Status != alerts.StatusFiring || a.Severity != "page" ||
		a.Labels["candidate"] != "canary" || a.Labels["baseline"] != "stable" || a.Labels["team"] != "rag" ||
		a.Labels["comparison"] != "prompt-v2" || a.Metric != "faithfulness" {
		t.Fatalf("alert %+v", a)
	}
	if a.Value > -0.2 || a.Value < -0.3 || a.Interval == nil || a.Interval.Upper >= -0.05 || a.Threshold != -0.05 {
		t.Fatalf("delta %v interval %+v", a.Value, a.Interval)
	}
	if len(a.Evidence) != 5 || a.Evidence[0].TraceID != "c7" {
		t.Fatalf("evidence %+v", a.Evidence)
	}
	if g := testutil.Sum(t, h.reg, comparison.MetricComparisonState, map[string]string{"candidate": "canary", "state": "candidate_worse"}); g != 1 {
		t.Fatalf("state gauge %v", g)
	}
	if g := testutil.Sum(t, h.reg, comparison.MetricComparisonState, map[string]string{"candidate": "same", "state": "not_worse"}); g != 1 {
		t.Fatalf("state gauge of the equal variant %v", g)
	}
	if g := testutil.Sum(t, h.reg, comparison.MetricComparisonDelta, map[string]string{"candidate": "canary", "bound": "upper"}); g >= -0.05 {
		t.Fatalf("upper bound gauge %v", g)
	}
	if list := h.e.Alerts(); len(list) != 1 || list[0].Fingerprint != a.Fingerprint {
		t.Fatalf("Alerts() %+v", list)
	}
	// The same sink the SLO alerts go to (the notify dispatcher) got it.
	h.rec.mu.Lock()
	sent := append([]alerts.Alert(nil), h.rec.sent...)
	h.rec.mu.Unlock()
	if len(sent) != 1 || sent[0].Fingerprint != a.Fingerprint || sent[0].Annotations()["summary"] == "" {
		t.Fatalf("sink got %+v", sent)
	}

	srv := httptest.NewServer(h.e.ComparisonsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body ComparisonsResponse
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	c := body.Comparisons[0]
	if len(body.Comparisons) != 2 || c.State != "candidate_worse" || c.CandidateN != 421 || c.BaselineN != 420 ||
		c.Lower == nil || c.Upper == nil || *c.Upper >= -0.05 || len(c.WorstTraceIDs) != 5 || c.WorstTraceIDs[0] != "c7" {
		t.Fatalf("%+v", body)
	}
}

// TestSLOVariantFilter: an SLO with `variant` counts only that variant's scores and records;
// the same SLO without it counts them all.
func TestSLOVariantFilter(t *testing.T) {
	h := newHarness(t, `
slos:
  - {name: cp-canary, metric: citation_precision, alert_below: 0.7, min_samples: 10, window: 15m, variant: canary, severity: page}
  - {name: cp, metric: citation_precision, alert_below: 0.7, min_samples: 10, window: 15m, severity: page}
`, nil)
	ctx := context.Background()
	for i := range 40 {
		for _, v := range []struct {
			variant string
			value   float64
		}{{"stable", 0.95}, {"stable", 0.95}, {"stable", 0.95}, {"canary", 0.3}} {
			if err := h.e.ConsumeScores(ctx, []score.Result{{TraceID: fmt.Sprintf("%s%d", v.variant, i), Service: "search",
				Variant: v.variant, Metric: "citation_precision", Value: v.value, Weight: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := testutil.Sum(t, h.reg, "ragwatch_slo_samples_total", map[string]string{"slo": "cp-canary"}); n != 40 {
		t.Fatalf("canary SLO samples %v, want 40", n)
	}
	if n := testutil.Sum(t, h.reg, "ragwatch_slo_samples_total", map[string]string{"slo": "cp"}); n != 160 {
		t.Fatalf("all-variant SLO samples %v, want 160", n)
	}
	got := h.e.Evaluate(ctx)
	if len(got) != 1 || got[0].Rule != "cp-canary" || got[0].Labels["variant"] != "canary" || got[0].Evidence[0].TraceID[:6] != "canary" {
		t.Fatalf("alerts %+v", got)
	}
}

// TestComparisonReload: an unchanged comparison keeps its experiments over a reload, a changed
// one starts again, a removed one goes with its gauges.
func TestComparisonReload(t *testing.T) {
	h := newHarness(t, comparisonCfg, nil)
	ctx := context.Background()
	for i := range 5 {
		for _, v := range []string{"canary", "stable"} {
			if err := h.e.ConsumeScores(ctx, []score.Result{{TraceID: fmt.Sprint(v, i), Service: "search", Variant: v,
				Metric: "faithfulness", Value: 0.5, Weight: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.e.Evaluate(ctx)
	n := func() int64 {
		st := h.e.Comparisons()
		if len(st) == 0 {
			return -1
		}
		return st[0].CandidateN
	}
	h.e.Update(SectionsOf(parse(t, comparisonCfg)))
	if n() != 5 {
		t.Fatalf("unchanged: n=%d", n())
	}
	h.e.Update(SectionsOf(parse(t, strings.Replace(comparisonCfg, "team: rag", "team: search", 1))))
	if n() != 5 {
		t.Fatalf("labels changed: n=%d", n())
	}
	h.e.Update(SectionsOf(parse(t, strings.Replace(comparisonCfg, "margin: 0.05", "margin: 0.1", 1))))
	if n() != -1 {
		t.Fatalf("changed: n=%d", n())
	}
	h.e.Update(SectionsOf(parse(t, "slos: []\n")))
	if g := testutil.Sum(t, h.reg, comparison.MetricComparisonState, nil); g != 0 {
		t.Fatalf("removed comparison's gauges remain: %v", g)
	}
}

// TestComparisonOnRecordsLowerIsBetter: a comparison on a record signal where lower is better
// (latency) fires when the candidate is slower by more than the margin, with its slowest
// traces as evidence.
func TestComparisonOnRecordsLowerIsBetter(t *testing.T) {
	h := newHarness(t, `
comparisons:
  - {name: latency, metrics: [latency_seconds], baseline: v1, candidate: v2, margin: 0.1, lower_is_better: true, min_samples: 20}
`, nil)
	ctx := context.Background()
	for i := range 100 {
		for _, v := range []struct {
			variant string
			ms      float64
		}{{"v1", 1000}, {"v2", 1500}} {
			ms := v.ms + float64(i%7)*10
			if v.variant == "v2" && i == 42 {
				ms = 9000
			}
			r := &record.Record{TraceID: fmt.Sprintf("%s-%d", v.variant, i), Service: "search", Variant: v.variant,
				Query: "q", Answer: "a", Latency: record.Latency{Total: ms}}
			if err := h.e.ConsumeRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := h.e.Evaluate(ctx)
	if len(got) != 1 || got[0].Comparator != ">" || got[0].Threshold != 0.1 || got[0].Value < 0.4 ||
		got[0].Evidence[0].TraceID != "v2-42" {
		t.Fatalf("%+v", got)
	}
}

// TestComparisonWindow: with a window, each window is a new experiment (unless its alert is
// firing): the sequence's guarantee holds within one.
func TestComparisonWindow(t *testing.T) {
	h := newHarness(t, strings.Replace(comparisonCfg, "severity: page", "severity: page\n    window: 1m", 1), nil)
	ctx := context.Background()
	feed := func(n int) {
		for i := range n {
			for _, v := range []string{"canary", "stable"} {
				if err := h.e.ConsumeScores(ctx, []score.Result{{TraceID: fmt.Sprint(v, i), Service: "search", Variant: v,
					Metric: "faithfulness", Value: 0.8 + 0.01*float64(i%3), Weight: 1}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	feed(30)
	h.e.Evaluate(ctx)
	if st := h.e.Comparisons(); st[0].CandidateN != 30 || !st[0].Since.Equal(t0) {
		t.Fatalf("%+v", st[0])
	}
	h.clk.Add(time.Minute)
	h.e.Evaluate(ctx)
	feed(5)
	if st := h.e.Comparisons(); st[0].CandidateN != 5 || st[0].BaselineN != 5 || !st[0].Since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the window: %+v", st[0])
	}
}

// TestComparisonRestartKeepsState: a new engine on the same store continues the experiment:
// same sums, same firing alert (no re-fire), same evidence; a changed definition drops it.
func TestComparisonRestartKeepsState(t *testing.T) {
	store := &MemStore{}
	h := newHarness(t, comparisonCfg, store)
	ctx := context.Background()
	for i := range 200 {
		if err := h.e.ConsumeScores(ctx, []score.Result{
			{TraceID: fmt.Sprint("c", i), Service: "search", Variant: "canary", Metric: "faithfulness", Value: 0.4 + 0.001*float64(i%50), Weight: 1},
			{TraceID: fmt.Sprint("s", i), Service: "search", Variant: "stable", Metric: "faithfulness", Value: 0.9 - 0.001*float64(i%50), Weight: 1},
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := h.e.Evaluate(ctx)
	if len(before) != 1 || !before[0].Firing() {
		t.Fatalf("before restart: %+v", before)
	}
	if err := h.e.Save(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, comparisonCfg, store)
	h2.clk.Set(h.clk.Now().Add(30 * time.Second))
	if err := h2.e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st := h2.e.Comparisons()
	if len(st) != 1 || st[0].CandidateN != 200 || st[0].BaselineN != 200 || st[0].State != "candidate_worse" || st[0].WorstTraceIDs[0] != "c0" {
		t.Fatalf("after restart: %+v", st)
	}
	after := h2.e.Evaluate(ctx)
	if len(after) != 1 || !after[0].StartsAt.Equal(before[0].StartsAt) || after[0].Fingerprint != before[0].Fingerprint {
		t.Fatalf("after restart: %+v", after)
	}
	h3 := newHarness(t, strings.Replace(comparisonCfg, "margin: 0.05", "margin: 0.1", 1), store)
	if err := h3.e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if st := h3.e.Comparisons(); len(st) != 0 {
		t.Fatalf("another definition restored: %+v", st)
	}
}

// TestComparisonAlertsEveryWorseMetric: a candidate worse on faithfulness and on citation
// precision, and equal on answer relevancy, fires one alert per worse metric — each with its
// own delta and interval — and none for the equal metric (one alert naming only the first
// worse metric fired before).
func TestComparisonAlertsEveryWorseMetric(t *testing.T) {
	cfg := strings.Replace(comparisonCfg, "metrics: [faithfulness]", "metrics: [faithfulness, citation_precision, answer_relevancy]", 1)
	h := newHarness(t, cfg, nil)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(2, 2))
	for i := range 400 {
		var res []score.Result
		for _, arm := range []struct {
			variant string
			faith   float64
			cite    float64
		}{{"stable", 0.7, 0.8}, {"canary", 0.45, 0.5}} {
			id := fmt.Sprintf("%s%d", arm.variant, i)
			res = append(res,
				score.Result{TraceID: id, Service: "search", Variant: arm.variant, Metric: "faithfulness", Value: arm.faith + 0.3*r.Float64(), Weight: 1},
				score.Result{TraceID: id, Service: "search", Variant: arm.variant, Metric: "citation_precision", Value: arm.cite + 0.2*r.Float64(), Weight: 1},
				score.Result{TraceID: id, Service: "search", Variant: arm.variant, Metric: "answer_relevancy", Value: 0.7 + 0.3*r.Float64(), Weight: 1})
		}
		if err := h.e.ConsumeScores(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	got := h.e.Evaluate(ctx)
	byMetric := map[string]alerts.Alert{}
	for _, a := range got {
		byMetric[a.Metric] = a
	}
	if len(got) != 2 || len(byMetric) != 2 {
		t.Fatalf("%d alerts, want one for faithfulness and one for citation_precision: %+v", len(got), got)
	}
	for m, want := range map[string]float64{"faithfulness": -0.25, "citation_precision": -0.3} {
		a, ok := byMetric[m]
		if !ok {
			t.Fatalf("no alert for %s", m)
		}
		if a.Labels["metric"] != m || a.Value > want+0.05 || a.Value < want-0.05 || a.Interval == nil || a.Interval.Upper >= -0.05 {
			t.Errorf("%s alert: labels %v delta %v interval %+v, want delta ≈ %v", m, a.Labels, a.Value, a.Interval, want)
		}
		if !strings.Contains(a.Summary, m+" of canary is worse") {
			t.Errorf("%s alert summary %q", m, a.Summary)
		}
	}
	if byMetric["faithfulness"].Fingerprint == byMetric["citation_precision"].Fingerprint {
		t.Error("the two alerts share a fingerprint")
	}
	if list := h.e.Alerts(); len(list) != 2 {
		t.Errorf("Alerts() lists %d, want 2", len(list))
	}
}
