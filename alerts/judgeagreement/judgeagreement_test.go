package judgeagreement

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/agreement"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/score"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// agreementCfg: window 1d, min_samples 5, max_pairs 100, max_records 100.
var agreementCfg = Settings{Window: 24 * time.Hour, MinSamples: 5, MaxPairs: 100, MaxRecords: 100, MaxSeries: 64}

// defaults is the alerting.agreement section of the default config, as the service converts
// it.
func defaults() Settings {
	c := config.Default().Alerting
	return Settings{Window: time.Duration(c.Agreement.Window), MinSamples: c.Agreement.MinSamples, MaxPairs: c.Agreement.MaxPairs,
		MaxRecords: c.Agreement.MaxRecords, MaxSeries: c.Agreement.MaxSeries, PruneEvery: c.EvaluationInterval}
}

type harness struct {
	a   *Tracker
	clk *testutil.Clock
}

func newHarness(t *testing.T, s Settings) *harness {
	t.Helper()
	h := &harness{clk: testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	a, err := New(Options{Settings: s, Registerer: prometheus.NewRegistry(), Now: h.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	return h
}

func (h *harness) judged(t *testing.T, trace, span, metric, scorer string, v float64) {
	t.Helper()
	if err := h.a.ConsumeScores(context.Background(), []score.Result{{TraceID: trace, SpanID: span, Service: "search",
		Metric: metric, Value: v, Weight: 1, Scorer: scorer}}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) gauge(statistic string) float64 {
	return promtestutil.ToFloat64(h.a.value.WithLabelValues("faithfulness", "openai", statistic))
}

// The worked example of internal/agreement (MAE 0.14, Spearman 0.820783, kappa 0.545455), its
// labels reaching the engine every way they can: after the record's scores (LabelConsumer),
// riding on the record before its scores, and naming only the trace.
func TestAgreementPairsLabelsWithScores(t *testing.T) {
	h := newHarness(t, agreementCfg)
	ctx := context.Background()
	human := []float64{0.9, 0.2, 0.6, 0.6, 1.0}
	judge := []float64{0.8, 0.4, 0.6, 0.3, 0.9}
	for i := range 3 { // scored first, labelled after the record went by
		h.judged(t, fmt.Sprint("t", i), "s", "faithfulness", "openai", judge[i])
		h.clk.Add(time.Second)
		if err := h.a.ConsumeLabel(ctx, record.Label{TraceID: fmt.Sprint("t", i), SpanID: "s", Service: "search",
			Values: map[string]float64{"faithfulness": human[i], "tone": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// Labelled before scoring: the label rides on the record, the score comes back later.
	if err := h.a.ConsumeRecord(ctx, &record.Record{TraceID: "t3", SpanID: "s", Service: "search",
		Labels: &record.Label{Values: map[string]float64{"faithfulness": human[3]}}}); err != nil {
		t.Fatal(err)
	}
	if got := promtestutil.ToFloat64(h.a.pairs.WithLabelValues("faithfulness", "openai")); got != 3 {
		t.Fatalf("pairs before the score = %v, want 3", got)
	}
	h.judged(t, "t3", "s", "faithfulness", "openai", judge[3])
	// Below min_samples nothing is exported.
	if n := promtestutil.CollectAndCount(h.a.value); n != 0 {
		t.Fatalf("%d agreement series before min_samples", n)
	}
	// A label naming only the trace joins the record scored under a span.
	h.judged(t, "t4", "s", "faithfulness", "openai", judge[4])
	if err := h.a.ConsumeLabel(ctx, record.Label{TraceID: "t4", Values: map[string]float64{"faithfulness": human[4]}}); err != nil {
		t.Fatal(err)
	}
	// A second score of the same record and metric does not pair twice.
	h.judged(t, "t4", "s", "faithfulness", "openai", 0.1)
	for st, want := range map[string]float64{agreement.MAE: 0.14, agreement.Spearman: 0.820783, agreement.Kappa: 0.545455} {
		if got := h.gauge(st); math.Abs(got-want) > 1e-4 {
			t.Errorf("%s = %v, want %v", st, got, want)
		}
	}
	lower := promtestutil.ToFloat64(h.a.bound.WithLabelValues("faithfulness", "openai", "spearman", "lower"))
	if math.Abs(lower-(-0.261450)) > 1e-4 {
		t.Errorf("spearman lower bound = %v", lower)
	}
	if got := promtestutil.ToFloat64(h.a.pairs.WithLabelValues("faithfulness", "openai")); got != 5 {
		t.Errorf("pairs = %v, want 5", got)
	}
	// The window forgets pairs older than a day.
	h.clk.Add(25 * time.Hour)
	h.a.Prune(h.clk.Now())
	if got := promtestutil.ToFloat64(h.a.pairs.WithLabelValues("faithfulness", "openai")); got != 0 {
		t.Errorf("pairs after the window = %v, want 0", got)
	}
}

func TestAgreementBounded(t *testing.T) {
	h := newHarness(t, Settings{Window: 7 * 24 * time.Hour, MinSamples: 1, MaxPairs: 10, MaxRecords: 2, MaxSeries: 1})
	ctx := context.Background()
	// A label waits for scores only while its record is among the last max_records.
	_ = h.a.ConsumeLabel(ctx, record.Label{TraceID: "old", Values: map[string]float64{"faithfulness": 1}})
	h.judged(t, "a", "", "faithfulness", "builtin", 1)
	h.judged(t, "b", "", "faithfulness", "builtin", 1)
	h.judged(t, "old", "", "faithfulness", "builtin", 1)
	if got := promtestutil.ToFloat64(h.a.unpaired.WithLabelValues("evicted")); got != 1 {
		t.Errorf("evicted = %v, want 1", got)
	}
	if n := h.a.indexed(byKey); n != 2 {
		t.Errorf("%d records kept, want 2", n)
	}
	// Only max_series (metric, judge) series; the judge label is bounded.
	_ = h.a.ConsumeLabel(ctx, record.Label{TraceID: "b", Values: map[string]float64{"faithfulness": 1}})
	h.judged(t, "c", "", "faithfulness", "forged-judge", 1)
	_ = h.a.ConsumeLabel(ctx, record.Label{TraceID: "c", Values: map[string]float64{"faithfulness": 1}})
	if got := promtestutil.ToFloat64(h.a.unpaired.WithLabelValues("series_limit")); got != 1 {
		t.Errorf("series_limit = %v, want 1", got)
	}
	if judgeLabel("forged-judge") != "other" || judgeLabel("anthropic") != "anthropic" {
		t.Error("judge label not bounded")
	}
}

func TestAgreementReload(t *testing.T) {
	h := newHarness(t, agreementCfg)
	ctx := context.Background()
	for i := range 5 {
		id := fmt.Sprint("t", i)
		h.judged(t, id, "", "faithfulness", "openai", float64(i)/5)
		_ = h.a.ConsumeLabel(ctx, record.Label{TraceID: id, Values: map[string]float64{"faithfulness": float64(i) / 5}})
	}
	h.a.Update(Settings{Window: 24 * time.Hour, MinSamples: 2, MaxPairs: 3, MaxRecords: 7, MaxSeries: 64})
	if h.a.cfg.MaxPairs != 3 || h.a.cfg.MaxRecords != 100 {
		t.Fatalf("config after reload %+v", h.a.cfg)
	}
	h.judged(t, "t9", "", "faithfulness", "openai", 1)
	_ = h.a.ConsumeLabel(ctx, record.Label{TraceID: "t9", Values: map[string]float64{"faithfulness": 1}})
	if got := promtestutil.ToFloat64(h.a.pairs.WithLabelValues("faithfulness", "openai")); got != 3 {
		t.Fatalf("pairs after max_pairs 3 = %v", got)
	}
}

// The indexes a test looks into: the records' own, and byTrace.
const (
	byKey = iota
	byTrace
)

// find returns the slot k names in index ix.
func (a *Tracker) find(ix int, k recordKey) (int32, uint64) {
	if ix == byTrace {
		return a.findTrace(k)
	}
	return a.lookup(k), 0
}

// indexed counts the entries of index ix.
func (a *Tracker) indexed(ix int) int {
	if ix == byTrace {
		return a.byTrace.Len()
	}
	return a.recs.Indexed()
}

// The index stays exact through any order of inserts and evictions: every held record is
// found in its slot, every trace's latest record with a span id too, nothing else is indexed,
// and a forgotten record is found nowhere. A small max_records makes the probes collide and
// wrap around the cells.
func TestAgreementIndexMatchesAMap(t *testing.T) {
	cfg := defaults()
	cfg.MaxRecords = 37
	a, err := New(Options{Settings: cfg})
	if err != nil {
		t.Fatal(err)
	}
	type rec struct{ trace, span string }
	slots := map[int32]rec{}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		r := rec{trace: fmt.Sprint("t", rng.IntN(60))}
		if rng.IntN(4) != 0 {
			r.span = fmt.Sprint("s", rng.IntN(3))
		}
		if n%3 == 0 { // hex ids too
			r.trace = fmt.Sprintf("%032x", rng.IntN(60))
		}
		i := a.entry(r.trace, r.span)
		if r.span == "" {
			if old, ok := slots[i]; ok && old.trace == r.trace {
				continue // joined the trace's latest record, or its own span-less one
			}
		}
		slots[i] = r
		latest := map[string]int32{}
		for k := a.recs.Oldest(0); k >= 0; k = a.recs.Newer(k) { // the newest record of each trace with a span id, from the ring's order
			j := int32(k)
			if h, ok := slots[j]; ok && h.span != "" {
				latest[h.trace] = j
			}
		}
		for j, h := range slots {
			if got, _ := a.find(byKey, a.key(h.trace, h.span)); got != j {
				t.Fatalf("step %d: %+v in slot %d, found in %d", n, h, j, got)
			}
		}
		for tr, j := range latest {
			if got, _ := a.find(byTrace, a.key(tr, "").traceOf()); got != j {
				t.Fatalf("step %d: trace %s's latest record in slot %d, found %d", n, tr, j, got)
			}
		}
		if a.indexed(byKey) != len(slots) || a.indexed(byTrace) != len(latest) {
			t.Fatalf("step %d: %d and %d cells in use, want %d and %d", n, a.indexed(byKey), a.indexed(byTrace), len(slots), len(latest))
		}
	}
}

// BenchmarkAgreementMemory: what the engine keeps per scored record for labels that may come
// later, with the default max_records filled by records of eight metrics each, every string
// a fresh copy as decoded results bring them: on the Go heap (bytes/record) and in the slots
// outside it (offheap_bytes/record).
func BenchmarkAgreementMemory(b *testing.B) {
	cfg := defaults()
	metrics := []string{"faithfulness", "answer_relevancy", "context_precision", "context_recall",
		"citation_precision", "citation_recall", "context_relevance", "refusal_correct"}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		a, err := New(Options{Settings: cfg})
		if err != nil {
			b.Fatal(err)
		}
		for i := range cfg.MaxRecords {
			results := make([]score.Result, len(metrics))
			for k, m := range metrics {
				results[k] = score.Result{TraceID: fmt.Sprintf("%032x", i), SpanID: fmt.Sprintf("%016x", i),
					Service: strings.Clone("support-bot"), Metric: strings.Clone(m), Scorer: strings.Clone("builtin"), Value: 0.5}
			}
			a.noteScores(results, time.Time{}, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(cfg.MaxRecords), "bytes/record")
		b.ReportMetric(float64(a.offHeapBytes())/float64(cfg.MaxRecords), "offheap_bytes/record")
		runtime.KeepAlive(a)
	}
}

// A record's scores stay in its slot, naming their metric and scorer through one shared pair;
// a label naming only the trace finds the trace's latest record; scores past a slot's room,
// or of a pair past maxInterned, are kept beside it and still paired right.
func TestAgreementKeepsScoresCompact(t *testing.T) {
	a, err := New(Options{Settings: defaults()})
	if err != nil {
		t.Fatal(err)
	}
	trace, span := strings.Repeat("a", 32), strings.Repeat("b", 16)
	metrics := []string{"faithfulness", "answer_relevancy", "context_precision", "citation_precision", "citation_recall", "refusal_correct"}
	var results []score.Result
	for k, m := range metrics {
		results = append(results, score.Result{TraceID: trace, SpanID: span,
			Service: "search", Metric: strings.Clone(m), Scorer: strings.Clone("builtin"), Value: float64(k) / 10})
	}
	// A second record in the same call gets its own slot; its ids are not hex.
	results = append(results, score.Result{TraceID: "c-1", SpanID: "s", Service: "search", Metric: "faithfulness", Scorer: "builtin", Value: 0.25})
	a.noteScores(results, time.Time{}, nil)
	i, _ := a.find(byKey, a.key(trace, span))
	ok := i >= 0
	if !ok || a.recs.Val(int(i)).count() != 6 || len(a.judges) != 6 || len(a.more) != 0 {
		t.Fatalf("first record: slot %d (%v), %+v, %d pairs, %d beside", i, ok, *a.recs.Val(int(i)), len(a.judges), len(a.more))
	}
	for k, m := range metrics {
		if v, scorer, ok := a.scoreOf(i, m); !ok || v != float64(k)/10 || scorer != "builtin" {
			t.Errorf("%s: %v %q %v", m, v, scorer, ok)
		}
	}
	j, _ := a.find(byKey, a.key("c-1", "s"))
	if j < 0 || j == i || a.recs.Val(int(j)).count() != 1 || a.recs.Val(int(j)).ids[0] != a.recs.Val(int(i)).ids[0] || a.recs.Key(int(j)).form != keyUsed|keySpan|keyTraceHashed|keySpanHashed {
		t.Fatalf("second record: slot %d %+v", j, *a.recs.Val(int(max(j, 0))))
	}
	if got, _ := a.find(byTrace, a.key(trace, "").traceOf()); got != i {
		t.Errorf("byTrace = %d, want %d", got, i)
	}
	if got := a.entry(trace, ""); got != i {
		t.Errorf("a label naming only the trace: slot %d, want %d", got, i)
	}
	// A later score of a metric replaces the earlier one.
	a.noteScores([]score.Result{{TraceID: trace, SpanID: span, Metric: "faithfulness", Scorer: "openai", Value: 0.9}}, time.Time{}, nil)
	if v, scorer, _ := a.scoreOf(i, "faithfulness"); v != 0.9 || scorer != "openai" || a.recs.Val(int(i)).count() != 6 {
		t.Errorf("replaced: %v %q, %d held", v, scorer, a.recs.Val(int(i)).count())
	}
	// Past a slot's room, beside it.
	for k := range 4 {
		a.noteScores([]score.Result{{TraceID: trace, SpanID: span, Metric: fmt.Sprint("extra", k), Scorer: "builtin", Value: 0.5}}, time.Time{}, nil)
	}
	if a.recs.Val(int(i)).count() != heldScores || len(a.more[i]) != 2 {
		t.Fatalf("past the slot's room: %d in the slot, %d beside", a.recs.Val(int(i)).count(), len(a.more[i]))
	}
	if v, _, ok := a.scoreOf(i, "extra3"); !ok || v != 0.5 {
		t.Errorf("extra3 beside the slot: %v %v", v, ok)
	}
	// Past maxInterned pairs a new one is kept with its own names, and a label pairs with it.
	for k := len(a.judges); k < maxInterned; k++ {
		a.judgeID("search", fmt.Sprint("m", k), "builtin")
	}
	a.noteScores([]score.Result{{TraceID: "d", Metric: "late", Scorer: "anthropic", Value: 0.75}}, time.Time{}, nil)
	d, _ := a.find(byKey, a.key("d", ""))
	if a.recs.Val(int(d)).count() != 0 || len(a.more[d]) != 1 || a.more[d][0] != (heldScore{metricScorer{"", "late", "anthropic"}, 0.75, 0.75}) || len(a.judges) != maxInterned {
		t.Fatalf("past the bound: slot %+v, beside %+v, %d pairs", *a.recs.Val(int(d)), a.more[d], len(a.judges))
	}
	a.noteLabel("d", "", map[string]float64{"late": 1}, time.Time{}, nil)
	if l := a.labels[d]; l == nil || !l.paired["late"] || a.series[seriesKey{"late", "anthropic"}].Len() != 1 {
		t.Fatalf("label past the bound: %+v", l)
	}
	// A slot's score replaced by one of a pair past the bound moves beside the slot.
	a.noteScores([]score.Result{{TraceID: trace, SpanID: span, Metric: "answer_relevancy", Scorer: "late-judge", Value: 0.3}}, time.Time{}, nil)
	if v, scorer, _ := a.scoreOf(i, "answer_relevancy"); v != 0.3 || scorer != "late-judge" || a.recs.Val(int(i)).count() != heldScores-1 || len(a.more[i]) != 3 {
		t.Errorf("moved beside the slot: %v %q, %d in the slot, %d beside", v, scorer, a.recs.Val(int(i)).count(), len(a.more[i]))
	}
	if v, _, _ := a.scoreOf(i, "context_precision"); v != 0.2 { // the slot's other scores stay as they were
		t.Errorf("context_precision after the move: %v", v)
	}
	// Eviction forgets a slot whole: its key, its trace's entry, what was kept beside it.
	for k := range a.cfg.MaxRecords {
		a.entry(fmt.Sprint("n", k), "")
	}
	if a.indexed(byKey) != a.cfg.MaxRecords || a.indexed(byTrace) != 0 || len(a.more) != 0 || len(a.labels) != 0 {
		t.Errorf("after max_records newer records: %d keys, %d traces, %d beside, %d labelled", a.indexed(byKey), a.indexed(byTrace), len(a.more), len(a.labels))
	}
}

// scoreOf is score without the raw value and the service.
func (a *Tracker) scoreOf(i int32, metric string) (float64, string, bool) {
	v, _, ms, ok := a.score(i, metric)
	return v, ms.scorer, ok
}

// OnPair receives every pair with the record's service and the scorer's raw value, whichever
// came first, while the exported agreement is of the published (calibrated) values.
func TestAgreementOnPairHandsRawValues(t *testing.T) {
	type got struct {
		service, metric, judge string
		human, raw             float64
	}
	var pairs []got
	s := defaults()
	s.MinSamples = 1
	a, err := New(Options{Settings: s, Registerer: prometheus.NewRegistry(), OnPair: func(service, metric, judge string, human, raw float64) {
		pairs = append(pairs, got{service, metric, judge, human, raw})
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	raw := 0.2
	// Scores first (one calibrated: published 0.6, raw 0.2), the label later naming only the trace.
	if err := a.ConsumeScores(ctx, []score.Result{
		{TraceID: "t1", SpanID: "s1", Service: "support-bot", Metric: "faithfulness", Scorer: "builtin", Value: 0.6, Raw: &raw, Calibration: 3},
		{TraceID: "t1", SpanID: "s1", Service: "support-bot", Metric: "answer_relevancy", Scorer: "openai", Value: 0.7},
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.ConsumeLabel(ctx, record.Label{TraceID: "t1", Values: map[string]float64{"faithfulness": 1, "answer_relevancy": 0}}); err != nil {
		t.Fatal(err)
	}
	// A label first, riding on its record; the uncalibrated score later.
	if err := a.ConsumeRecord(ctx, &record.Record{TraceID: "t2", Service: "search", Labels: &record.Label{Values: map[string]float64{"faithfulness": 0}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.ConsumeScores(ctx, []score.Result{{TraceID: "t2", Service: "search", Metric: "faithfulness", Scorer: "builtin", Value: 0.4}}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(pairs, func(x, y got) int { return strings.Compare(x.service+x.metric, y.service+y.metric) })
	want := []got{{"search", "faithfulness", "builtin", 0, 0.4}, {"support-bot", "answer_relevancy", "openai", 0, 0.7}, {"support-bot", "faithfulness", "builtin", 1, 0.2}}
	if !slices.Equal(pairs, want) {
		t.Fatalf("pairs %+v, want %+v", pairs, want)
	}
	// The builtin's agreement is of the published values: |1-0.6| and |0-0.4|.
	if mae := promtestutil.ToFloat64(a.value.WithLabelValues("faithfulness", "builtin", "mae")); math.Abs(mae-0.4) > 1e-12 {
		t.Errorf("builtin faithfulness MAE %v, want 0.4 (published values)", mae)
	}
	// A calibrated score takes two places of the slot; a later uncalibrated one frees them.
	i, _ := a.find(byKey, a.key("t1", "s1"))
	if n := a.recs.Val(int(i)).count(); n != 3 {
		t.Errorf("slot holds %d entries, want 3 (two scores, one raw value)", n)
	}
	a.noteScores([]score.Result{{TraceID: "t1", SpanID: "s1", Service: "support-bot", Metric: "faithfulness", Scorer: "builtin", Value: 0.3}}, time.Time{}, nil)
	if v, r, ms, ok := a.score(i, "faithfulness"); !ok || v != 0.3 || r != 0.3 || ms.service != "support-bot" || a.recs.Val(int(i)).count() != 2 {
		t.Errorf("replaced: %v raw %v %+v, %d held", v, r, ms, a.recs.Val(int(i)).count())
	}
}
