package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
)

const agreementCfg = `
drift: {detectors: []}
alerting:
  agreement: {window: 1d, min_samples: 5, max_pairs: 100, max_records: 100}
`

func (h *harness) judged(t *testing.T, trace, span, metric, scorer string, v float64) {
	t.Helper()
	if err := h.e.ConsumeScores(context.Background(), []score.Result{{TraceID: trace, SpanID: span, Service: "search",
		Metric: metric, Value: v, Weight: 1, Scorer: scorer}}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) gauge(statistic string) float64 {
	return promtestutil.ToFloat64(h.e.agree.value.WithLabelValues("faithfulness", "openai", statistic))
}

// The worked example of internal/agreement (MAE 0.14, Spearman 0.820783, kappa 0.545455), its
// labels reaching the engine every way they can: after the record's scores (LabelConsumer),
// riding on the record before its scores, and naming only the trace.
func TestAgreementPairsLabelsWithScores(t *testing.T) {
	h := newHarness(t, agreementCfg, nil)
	ctx := context.Background()
	human := []float64{0.9, 0.2, 0.6, 0.6, 1.0}
	judge := []float64{0.8, 0.4, 0.6, 0.3, 0.9}
	for i := range 3 { // scored first, labelled after the record went by
		h.judged(t, fmt.Sprint("t", i), "s", "faithfulness", "openai", judge[i])
		h.clk.Add(time.Second)
		if err := h.e.ConsumeLabel(ctx, record.Label{TraceID: fmt.Sprint("t", i), SpanID: "s", Service: "search",
			Values: map[string]float64{"faithfulness": human[i], "tone": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// Labelled before scoring: the label rides on the record, the score comes back later.
	if err := h.e.ConsumeRecord(ctx, &record.Record{TraceID: "t3", SpanID: "s", Service: "search",
		Labels: &record.Label{Values: map[string]float64{"faithfulness": human[3]}}}); err != nil {
		t.Fatal(err)
	}
	if got := promtestutil.ToFloat64(h.e.agree.pairs.WithLabelValues("faithfulness", "openai")); got != 3 {
		t.Fatalf("pairs before the score = %v, want 3", got)
	}
	h.judged(t, "t3", "s", "faithfulness", "openai", judge[3])
	// Below min_samples nothing is exported.
	if n := promtestutil.CollectAndCount(h.e.agree.value); n != 0 {
		t.Fatalf("%d agreement series before min_samples", n)
	}
	// A label naming only the trace joins the record scored under a span.
	h.judged(t, "t4", "s", "faithfulness", "openai", judge[4])
	if err := h.e.ConsumeLabel(ctx, record.Label{TraceID: "t4", Values: map[string]float64{"faithfulness": human[4]}}); err != nil {
		t.Fatal(err)
	}
	// A second score of the same record and metric does not pair twice.
	h.judged(t, "t4", "s", "faithfulness", "openai", 0.1)
	for st, want := range map[string]float64{agreement.MAE: 0.14, agreement.Spearman: 0.820783, agreement.Kappa: 0.545455} {
		if got := h.gauge(st); math.Abs(got-want) > 1e-4 {
			t.Errorf("%s = %v, want %v", st, got, want)
		}
	}
	lower := promtestutil.ToFloat64(h.e.agree.bound.WithLabelValues("faithfulness", "openai", "spearman", "lower"))
	if math.Abs(lower-(-0.261450)) > 1e-4 {
		t.Errorf("spearman lower bound = %v", lower)
	}
	if got := promtestutil.ToFloat64(h.e.agree.pairs.WithLabelValues("faithfulness", "openai")); got != 5 {
		t.Errorf("pairs = %v, want 5", got)
	}
	// The window forgets pairs older than a day.
	h.clk.Add(25 * time.Hour)
	h.e.Evaluate(ctx)
	if got := promtestutil.ToFloat64(h.e.agree.pairs.WithLabelValues("faithfulness", "openai")); got != 0 {
		t.Errorf("pairs after the window = %v, want 0", got)
	}
}

func TestAgreementBounded(t *testing.T) {
	h := newHarness(t, `
alerting:
  agreement: {min_samples: 1, max_pairs: 10, max_records: 2, max_series: 1}
`, nil)
	ctx := context.Background()
	// A label waits for scores only while its record is among the last max_records.
	_ = h.e.ConsumeLabel(ctx, record.Label{TraceID: "old", Values: map[string]float64{"faithfulness": 1}})
	h.judged(t, "a", "", "faithfulness", "builtin", 1)
	h.judged(t, "b", "", "faithfulness", "builtin", 1)
	h.judged(t, "old", "", "faithfulness", "builtin", 1)
	if got := promtestutil.ToFloat64(h.e.agree.unpaired.WithLabelValues("evicted")); got != 1 {
		t.Errorf("evicted = %v, want 1", got)
	}
	if n := len(h.e.agree.byKey); n != 2 {
		t.Errorf("%d records kept, want 2", n)
	}
	// Only max_series (metric, judge) series; the judge label is bounded.
	_ = h.e.ConsumeLabel(ctx, record.Label{TraceID: "b", Values: map[string]float64{"faithfulness": 1}})
	h.judged(t, "c", "", "faithfulness", "forged-judge", 1)
	_ = h.e.ConsumeLabel(ctx, record.Label{TraceID: "c", Values: map[string]float64{"faithfulness": 1}})
	if got := promtestutil.ToFloat64(h.e.agree.unpaired.WithLabelValues("series_limit")); got != 1 {
		t.Errorf("series_limit = %v, want 1", got)
	}
	if judgeLabel("forged-judge") != "other" || judgeLabel("anthropic") != "anthropic" {
		t.Error("judge label not bounded")
	}
}

// A judge that drifts away from people fires the SLO on its Spearman agreement, like any SLO.
func TestAgreementSLOFiresOnDriftingJudge(t *testing.T) {
	h := newHarness(t, `
slos:
  - name: judge-agrees
    metric: agreement_spearman_faithfulness
    objective: 0.7
    alert_below: 0.5
    window: 30m
    min_samples: 10
    for: 2m
drift: {detectors: []}
alerting:
  agreement: {window: 1d, min_samples: 10, max_pairs: 20}
`, nil)
	ctx := context.Background()
	n := 0
	feed := func(count int, judge func(human float64) float64) {
		for range count {
			hv := float64((n*37)%100) / 100 // a spread of human values
			id := fmt.Sprint("r", n)
			h.judged(t, id, "", "faithfulness", "openai", judge(hv))
			if err := h.e.ConsumeLabel(ctx, record.Label{TraceID: id, Values: map[string]float64{"faithfulness": hv}}); err != nil {
				t.Fatal(err)
			}
			n++
			h.clk.Add(time.Minute)
			h.e.Evaluate(ctx)
		}
	}
	feed(40, func(x float64) float64 { return x*0.8 + 0.1 }) // a faithful judge: ρ = 1
	if got := h.gauge(agreement.Spearman); got != 1 {
		t.Fatalf("spearman of a faithful judge = %v", got)
	}
	if p := h.phase("judge-agrees", AgreementService, "page"); p != phaseInactive {
		t.Fatalf("faithful judge: phase %s", p)
	}
	feed(40, func(x float64) float64 { return 1 - x }) // the judge now ranks backwards
	if got := h.gauge(agreement.Spearman); got > -0.9 {
		t.Fatalf("spearman of a reversed judge = %v", got)
	}
	if p := h.phase("judge-agrees", AgreementService, "page"); p != phaseFiring {
		t.Fatalf("drifting judge: phase %s, want firing", p)
	}
	var fired bool
	for _, a := range h.rec.sent {
		fired = fired || (a.Name != "" && a.Labels["service"] == AgreementService)
	}
	if !fired {
		t.Errorf("no alert for service %q sent: %+v", AgreementService, h.rec.sent)
	}
}

func TestAgreementReload(t *testing.T) {
	h := newHarness(t, agreementCfg, nil)
	ctx := context.Background()
	for i := range 5 {
		id := fmt.Sprint("t", i)
		h.judged(t, id, "", "faithfulness", "openai", float64(i)/5)
		_ = h.e.ConsumeLabel(ctx, record.Label{TraceID: id, Values: map[string]float64{"faithfulness": float64(i) / 5}})
	}
	if err := h.e.Update(parse(t, "alerting:\n  agreement: {window: 1d, min_samples: 2, max_pairs: 3, max_records: 7}\n")); err != nil {
		t.Fatal(err)
	}
	if h.e.agree.cfg.MaxPairs != 3 || h.e.agree.cfg.MaxRecords != 100 {
		t.Fatalf("config after reload %+v", h.e.agree.cfg)
	}
	h.judged(t, "t9", "", "faithfulness", "openai", 1)
	_ = h.e.ConsumeLabel(ctx, record.Label{TraceID: "t9", Values: map[string]float64{"faithfulness": 1}})
	if got := promtestutil.ToFloat64(h.e.agree.pairs.WithLabelValues("faithfulness", "openai")); got != 3 {
		t.Fatalf("pairs after max_pairs 3 = %v", got)
	}
}

// BenchmarkAgreementMemory: what the engine keeps per scored record for labels that may come
// later, with the default max_records filled by records of eight metrics each, every string
// a fresh copy as decoded results bring them.
func BenchmarkAgreementMemory(b *testing.B) {
	cfg := config.Default().Alerting.Agreement
	metrics := []string{"faithfulness", "answer_relevancy", "context_precision", "context_recall",
		"citation_precision", "citation_recall", "context_relevance", "refusal_correct"}
	for b.Loop() {
		a, err := newAgreement(cfg, prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		e := &Engine{agree: a}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range cfg.MaxRecords {
			results := make([]score.Result, len(metrics))
			for k, m := range metrics {
				results[k] = score.Result{TraceID: fmt.Sprintf("%032x", i), SpanID: fmt.Sprintf("%016x", i),
					Service: strings.Clone("support-bot"), Metric: strings.Clone(m), Scorer: strings.Clone("builtin"), Value: 0.5}
			}
			e.noteScores(results, time.Time{})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(cfg.MaxRecords), "bytes/record")
		runtime.KeepAlive(e)
	}
}

// The scores a record waits with share one metric and scorer pair per judge, and take the
// room of the record's results, not append's next power of two.
func TestAgreementKeepsScoresCompact(t *testing.T) {
	a, err := newAgreement(config.Default().Alerting.Agreement, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{agree: a}
	var results []score.Result
	for _, m := range []string{"faithfulness", "answer_relevancy", "context_precision", "citation_precision", "citation_recall", "refusal_correct"} {
		results = append(results, score.Result{TraceID: strings.Repeat("a", 32), SpanID: strings.Repeat("b", 16),
			Service: "search", Metric: strings.Clone(m), Scorer: strings.Clone("builtin"), Value: 0.5})
	}
	// A second record in the same call gets its own scores.
	results = append(results, score.Result{TraceID: strings.Repeat("c", 32), Service: "search", Metric: "faithfulness", Scorer: "builtin", Value: 0.25})
	e.noteScores(results, time.Time{})
	p := a.byKey[strings.Repeat("a", 32)+"/"+strings.Repeat("b", 16)]
	if p == nil || len(p.scores) != 6 || cap(p.scores) != 6 {
		t.Fatalf("first record's scores: %+v", p)
	}
	q := a.byKey[strings.Repeat("c", 32)]
	if q == nil || len(q.scores) != 1 || q.scores[0].value != 0.25 {
		t.Fatalf("second record's scores: %+v", q)
	}
	if p.scores[0].metricScorer != q.scores[0].metricScorer {
		t.Error("faithfulness by builtin is two pairs")
	}
	if got := a.byTrace[strings.Repeat("a", 32)]; got != p.key {
		t.Errorf("byTrace = %q, want %q", got, p.key)
	}
	// Past maxInterned pairs a new one is its own, and still names its score right.
	for i := len(a.judges); i < maxInterned; i++ {
		a.sharedPair(fmt.Sprint("m", i), "builtin")
	}
	j1, j2 := a.sharedPair("late", "openai"), a.sharedPair("late", "openai")
	if j1 == j2 || *j1 != (metricScorer{"late", "openai"}) || *j2 != *j1 || len(a.judges) != maxInterned {
		t.Fatalf("past the bound: %p %+v, %p %+v, %d held", j1, *j1, j2, *j2, len(a.judges))
	}
}
