package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/alerts"
	"github.com/ragwatch/ragwatch/alerts/diagnose"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// diagCfg alerts on each metric a pattern names, so every pattern's stream fires something.
const diagCfg = `
slos:
  - {name: faith, metric: faithfulness, alert_below: 0.7, window: 10m, min_samples: 20}
  - {name: cp, metric: citation_precision, alert_below: 0.7, window: 10m, min_samples: 20}
  - {name: ctxp, metric: context_precision, alert_below: 0.7, window: 10m, min_samples: 20}
  - {name: p5, metric: precision@5, alert_below: 0.7, window: 10m, min_samples: 20}
drift: {detectors: []}
alerting:
  diagnosis: {low: 0.6, high: 0.8, min_samples: 20, drop: 0.1, window: 10m}
`

// stream sends, every 10s for d, one request's scores (weight 10: sampled at 10 %) and, when
// top is set, its record with that top retrieval score; it evaluates every 15s.
func (h *harness) stream(t *testing.T, d time.Duration, prefix string, scores func(i int) map[string]float64, top func(i int) float64) {
	t.Helper()
	ctx := context.Background()
	next := h.clk.Now().Add(15 * time.Second)
	for i := 0; time.Duration(i)*10*time.Second < d; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if top != nil {
			r := &record.Record{TraceID: id, Service: "search", Query: "q", Answer: "a",
				Documents: []record.Document{{ID: "d1", Score: ptr(top(i))}, {ID: "d2", Score: ptr(top(i) / 2)}}}
			if err := h.e.ConsumeRecord(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		var batch []score.Result
		for m, v := range scores(i) {
			batch = append(batch, score.Result{TraceID: id, Service: "search", Metric: m, Value: v, Weight: 10})
		}
		if err := h.e.ConsumeScores(ctx, batch); err != nil {
			t.Fatal(err)
		}
		h.clk.Add(10 * time.Second)
		if !h.clk.Now().Before(next) {
			h.e.Evaluate(ctx)
			next = next.Add(15 * time.Second)
		}
	}
}

func ptr(f float64) *float64 { return &f }

func firingDiagnosis(t *testing.T, h *harness, rule string) *alerts.Diagnosis {
	t.Helper()
	for _, a := range h.e.Alerts() {
		if a.Rule == rule && a.Firing() {
			if a.Diagnosis == nil {
				t.Fatalf("alert %s has no diagnosis", rule)
			}
			ann := a.Annotations()
			if ann["diagnosis_pattern"] != a.Diagnosis.Pattern || !strings.HasPrefix(ann["diagnosis"], a.Diagnosis.Pattern+": "+a.Diagnosis.Explanation) {
				t.Errorf("annotations = %q / %q", ann["diagnosis_pattern"], ann["diagnosis"])
			}
			return a.Diagnosis
		}
	}
	t.Fatalf("%s is not firing; alerts: %+v", rule, h.e.Alerts())
	return nil
}

func figure(d *alerts.Diagnosis, name string) (float64, bool) {
	for _, f := range d.Numbers {
		if f.Name == name {
			return f.Value, true
		}
	}
	return 0, false
}

func TestAlertsCarryTheirDiagnosis(t *testing.T) {
	alt := func(i int, a, b float64) float64 {
		if i%2 == 0 {
			return a
		}
		return b
	}
	cases := []struct {
		name, rule, pattern string
		scores              func(i int) map[string]float64
		top                 func(i int) float64
		figure              string
		value               float64
	}{
		{"hallucination", "faith", diagnose.Hallucination, func(i int) map[string]float64 {
			return map[string]float64{score.Faithfulness: alt(i, 0.3, 0.5), score.AnswerRelevancy: 0.9}
		}, nil, score.AnswerRelevancy, 0.9},
		{"context ignored", "faith", diagnose.ContextIgnored, func(i int) map[string]float64 {
			return map[string]float64{score.Faithfulness: alt(i, 0.3, 0.5), score.ContextRecall: 0.95, score.AnswerRelevancy: 0.5}
		}, nil, score.ContextRecall, 0.95},
		{"ranking noise", "p5", diagnose.RankingNoise, func(i int) map[string]float64 {
			return map[string]float64{"precision@5": 0.2, "ndcg@5": alt(i, 0.9, 0.94)}
		}, nil, "precision@5", 0.2},
		{"noisy context", "ctxp", diagnose.NoisyContext, func(i int) map[string]float64 {
			return map[string]float64{score.ContextPrecision: alt(i, 0.2, 0.4), "hit@3": 1}
		}, nil, "hit@3", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, diagCfg, nil)
			h.stream(t, 12*time.Minute, "r", c.scores, c.top)
			d := firingDiagnosis(t, h, c.rule)
			if d.Pattern != c.pattern || d.Explanation != diagnose.Explanations[c.pattern] {
				t.Fatalf("diagnosis = %+v, want %s", d, c.pattern)
			}
			if v, ok := figure(d, c.figure); !ok || v < c.value-1e-9 || v > c.value+1e-9 {
				t.Errorf("%s = %v (%v), want %v; numbers %+v", c.figure, v, ok, c.value, d.Numbers)
			}
			if g := diagGauge(t, h.reg, "search", c.pattern); g != 1 {
				t.Errorf("ragwatch_diagnosis{pattern=%q} = %v, want 1", c.pattern, g)
			}
		})
	}
}

func TestRetrievalShiftDiagnosis(t *testing.T) {
	h := newHarness(t, diagCfg, nil)
	healthy := func(int) map[string]float64 { return map[string]float64{score.CitationPrecision: 0.9} }
	h.stream(t, 10*time.Minute, "ok", healthy, func(int) float64 { return 0.8 })
	if len(h.rec.sent) != 0 {
		t.Fatalf("healthy traffic alerted: %+v", h.rec.sent)
	}
	dropped := func(int) map[string]float64 { return map[string]float64{score.CitationPrecision: 0.4} }
	// Half the window after the change: the older half is still healthy, the newer one dropped.
	h.stream(t, 5*time.Minute+30*time.Second, "bad", dropped, func(int) float64 { return 0.5 })
	d := firingDiagnosis(t, h, "cp")
	if d.Pattern != diagnose.RetrievalShift {
		t.Fatalf("diagnosis = %+v, want retrieval_shift", d)
	}
	if v, _ := figure(d, "retrieval_score_top_now"); v != 0.5 {
		t.Errorf("retrieval_score_top_now = %v, want 0.5 (%+v)", v, d.Numbers)
	}
	// The alert fires while the older half still holds healthy values.
	before, _ := figure(d, "citation_precision_before")
	now, _ := figure(d, "citation_precision_now")
	if now != 0.4 || !(before-now > 0.1) || before > 0.9 {
		t.Errorf("citation_precision before %v now %v, want now 0.4 and a fall over 0.1 (%+v)", before, now, d.Numbers)
	}
}

func TestAlertWithoutPatternSaysSo(t *testing.T) {
	h := newHarness(t, diagCfg, nil)
	// Faithfulness is low, but relevancy is low too: no pattern, and the alert says so.
	h.stream(t, 12*time.Minute, "r", func(i int) map[string]float64 {
		return map[string]float64{score.Faithfulness: 0.4, score.AnswerRelevancy: 0.5}
	}, nil)
	d := firingDiagnosis(t, h, "faith")
	if d.Pattern != diagnose.None || d.Explanation != diagnose.Explanations[diagnose.None] || len(d.Numbers) != 0 {
		t.Fatalf("diagnosis = %+v, want none", d)
	}
	for _, p := range diagnose.Patterns {
		if g := diagGauge(t, h.reg, "search", p); g != 0 {
			t.Errorf("ragwatch_diagnosis{pattern=%q} = %v, want 0", p, g)
		}
	}
	// The API shows it too.
	for _, a := range h.e.Alerts() {
		if a.Diagnosis == nil {
			t.Errorf("alert %s without diagnosis in the API list", a.Rule)
		}
	}
}

// The diagnosis keeps per service label what the SLO windows keep: an evicted service's state
// and ragwatch_diagnosis series go, the shared "other" label stays.
func TestDiagnosisFollowsTheServiceSet(t *testing.T) {
	clk := testutil.NewClock(t0)
	reg := prometheus.NewRegistry()
	set := cardinality.NewServiceSetTTL(1, time.Minute, clk.Now)
	e, err := New(Options{Sections: SectionsOf(parse(t, diagCfg)), Registerer: reg, Now: clk.Now, Services: set})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	feed := func(service string, n int) {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%d", service, i)
			if err := e.ConsumeScores(ctx, []score.Result{
				{TraceID: id, Service: service, Metric: score.Faithfulness, Value: 0.3, Weight: 1},
				{TraceID: id, Service: service, Metric: score.AnswerRelevancy, Value: 0.9, Weight: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gauge := func(service string) float64 {
		return diagGauge(t, reg, service, diagnose.Hallucination)
	}
	feed("a", 20)
	feed("b", 20) // over the cap of 1: "other"
	e.Evaluate(ctx)
	if gauge("a") != 1 || gauge(cardinality.Other) != 1 {
		t.Fatalf("gauges a %v, other %v; want 1, 1", gauge("a"), gauge(cardinality.Other))
	}
	clk.Add(2 * time.Minute)
	feed("c", 1) // a has aged out: c takes its slot
	e.Evaluate(ctx)
	kept, other := diagServices(t, reg)["a"], diagServices(t, reg)[cardinality.Other]
	if kept || !other {
		t.Fatalf("after eviction: a kept %v, other kept %v", kept, other)
	}
	if n, err := promtestutil.GatherAndCount(reg, alerts.MetricDiagnosis); err != nil || n != 2*len(diagnose.Patterns) {
		t.Fatalf("%d ragwatch_diagnosis series, want other's and c's (%d)", n, 2*len(diagnose.Patterns))
	}
}

// TestVariantDiagnosis: an alert about one variant carries that variant's diagnosis. The
// canary hallucinates (low faithfulness, high relevancy) while the stable variant is fine, so
// the service's pairs, both variants together, show no pattern.
func TestVariantDiagnosis(t *testing.T) {
	h := newHarness(t, `
slos:
  - {name: faith-canary, metric: faithfulness, variant: canary, alert_below: 0.7, window: 10m, min_samples: 20}
drift: {detectors: []}
alerting:
  diagnosis: {low: 0.6, high: 0.8, min_samples: 20, drop: 0.1, window: 10m}
`, nil)
	ctx := context.Background()
	for i := 0; i < 72; i++ {
		for _, v := range []struct {
			variant     string
			faith, rele float64
		}{{"stable", 0.9, 0.5}, {"canary", 0.3, 0.9}} {
			id := fmt.Sprintf("%s-%d", v.variant, i)
			if err := h.e.ConsumeScores(ctx, []score.Result{
				{TraceID: id, Service: "search", Variant: v.variant, Metric: score.Faithfulness, Value: v.faith, Weight: 10},
				{TraceID: id, Service: "search", Variant: v.variant, Metric: score.AnswerRelevancy, Value: v.rele, Weight: 10},
			}); err != nil {
				t.Fatal(err)
			}
		}
		h.clk.Add(10 * time.Second)
		if i%3 == 2 {
			h.e.Evaluate(ctx)
		}
	}
	if d := firingDiagnosis(t, h, "faith-canary"); d.Pattern != diagnose.Hallucination {
		t.Fatalf("the canary's alert: diagnosis %+v, want %s", d, diagnose.Hallucination)
	}
	if d := h.e.diag.For("search", "", score.Faithfulness); d.Pattern != diagnose.None {
		t.Fatalf("the service, both variants: diagnosis %+v, want none", d)
	}
	if g := diagGauge(t, h.reg, "search", diagnose.Hallucination); g != 0 {
		t.Errorf("ragwatch_diagnosis{service=search,pattern=hallucination} = %v, want 0 (the gauge is per service)", g)
	}
}

// diagGauge is ragwatch_diagnosis{service, pattern} in reg.
func diagGauge(t *testing.T, reg prometheus.Gatherer, service, pattern string) float64 {
	t.Helper()
	return testutil.Sum(t, reg, alerts.MetricDiagnosis, map[string]string{"service": service, "pattern": pattern})
}

// diagServices is the service label values of the ragwatch_diagnosis series in reg.
func diagServices(t *testing.T, reg prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != alerts.MetricDiagnosis {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "service" {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}
