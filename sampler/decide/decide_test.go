package decide

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
)

// Trace ids with known randomness: always sampled (R = 2^56-1) unless p = 0.
const (
	idHigh = "000000000000000000ffffffffffffff"
	idLow  = "00000000000000000000000000000001" // R = 1: sampled only at p = 1
	idMid  = "00000000000000000080000000000000" // R = 2^55: sampled from p = 0.5
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func f(v float64) *float64 { return &v }

func newTestDecider(t *testing.T, cfg config.Sampling, b *Budget, c *clock) (*Decider, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return New(cfg, b, cardinality.NewServiceSet(10), c.now, reg), reg
}

func skipped(t *testing.T, d *Decider, reason string) int {
	t.Helper()
	return int(testutil.ToFloat64(d.skipped.WithLabelValues(reason)))
}

func TestRulesFirstMatchWins(t *testing.T) {
	cfg := config.Sampling{Rate: 0.5, Rules: []config.SamplingRule{
		{Name: "private", Match: config.SamplingMatch{Routes: []string{"/admin"}}, Never: true},
		{Name: "negative_feedback", Match: config.SamplingMatch{NegativeFeedback: true}, Probability: f(1)},
		{Name: "empty_retrieval", Match: config.SamplingMatch{EmptyRetrieval: true}, Probability: f(0.75)},
		{Name: "weak_retrieval", Match: config.SamplingMatch{TopScoreBelow: f(0.3)}, Probability: f(0.6)},
		{Name: "cheap_model", Match: config.SamplingMatch{Services: []string{"chat"}, Models: []string{"small"}}, Probability: f(0.01)},
	}}
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	d, _ := newTestDecider(t, cfg, nil, c)
	doc := func(s float64) record.Document { return record.Document{ID: "d", Score: f(s)} }
	tests := []struct {
		name   string
		rec    record.Record
		p      float64
		reason string
		never  bool
	}{
		{"default rate", record.Record{Documents: []record.Document{doc(0.9)}}, 0.5, "rate", false},
		{"never beats feedback", record.Record{Attributes: map[string]string{"route": "/admin"}, Feedback: &record.Feedback{Score: -1}}, 0, "private", true},
		{"http.route fallback", record.Record{Attributes: map[string]string{"http.route": "/admin"}}, 0, "private", true},
		{"negative feedback", record.Record{Feedback: &record.Feedback{Score: -0.5}}, 1, "negative_feedback", false},
		{"positive feedback is not negative", record.Record{Feedback: &record.Feedback{Score: 1}, Documents: []record.Document{doc(0.9)}}, 0.5, "rate", false},
		{"empty retrieval", record.Record{}, 0.75, "empty_retrieval", false},
		{"retrieval not seen is no empty retrieval", record.Record{RetrievalNotSeen: true}, 0.5, "rate", false},
		{"top score below", record.Record{Documents: []record.Document{doc(0.1), doc(0.29)}}, 0.6, "weak_retrieval", false},
		{"top score at threshold", record.Record{Documents: []record.Document{doc(0.1), doc(0.3)}}, 0.5, "rate", false},
		{"no scores do not match top_score_below", record.Record{Documents: []record.Document{{ID: "x"}}}, 0.5, "rate", false},
		{"all conditions", record.Record{Service: "chat", Model: "small", Documents: []record.Document{doc(0.9)}}, 0.01, "cheap_model", false},
		{"one condition missing", record.Record{Service: "chat", Model: "big", Documents: []record.Document{doc(0.9)}}, 0.5, "rate", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, reason, never := d.Match(&tt.rec)
			if p != tt.p || reason != tt.reason || never != tt.never {
				t.Fatalf("Match = (%v, %q, %v), want (%v, %q, %v)", p, reason, never, tt.p, tt.reason, tt.never)
			}
		})
	}
}

func TestDecideOutcomesAndMetrics(t *testing.T) {
	cfg := config.Sampling{Rate: 0.5, Rules: []config.SamplingRule{
		{Name: "private", Match: config.SamplingMatch{Services: []string{"hr"}}, Never: true},
		{Name: "negative_feedback", Match: config.SamplingMatch{NegativeFeedback: true}, Probability: f(1)},
	}}
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	d, reg := newTestDecider(t, cfg, nil, c)
	docs := []record.Document{{ID: "a"}}
	cases := []struct {
		rec  record.Record
		want Decision
	}{
		{record.Record{TraceID: idHigh, Service: "chat", Documents: docs}, Decision{Sample: true, Probability: 0.5, Reason: "rate"}},
		{record.Record{TraceID: idMid, Service: "chat", Documents: docs}, Decision{Sample: true, Probability: 0.5, Reason: "rate"}},
		{record.Record{TraceID: idLow, Service: "chat", Documents: docs}, Decision{Probability: 0.5, Reason: "rate"}},
		{record.Record{TraceID: idLow, Service: "chat", Feedback: &record.Feedback{Score: -1}}, Decision{Sample: true, Probability: 1, Reason: "negative_feedback"}},
		{record.Record{TraceID: idHigh, Service: "hr", Feedback: &record.Feedback{Score: -1}}, Decision{Reason: "rule"}},
	}
	for i, tc := range cases {
		if got := d.Decide(&tc.rec, Ingest); got != tc.want {
			t.Errorf("case %d: %+v, want %+v", i, got, tc.want)
		}
	}
	want := `
# HELP ragwatch_sampled_total Records sampled for scoring, by service and reason (rule name or rate).
# TYPE ragwatch_sampled_total counter
ragwatch_sampled_total{reason="negative_feedback",service="chat"} 1
ragwatch_sampled_total{reason="rate",service="chat"} 2
# HELP ragwatch_sampling_skipped_total Records not sampled, by reason: rate, rate_limit, budget, rule (a never rule), no_content.
# TYPE ragwatch_sampling_skipped_total counter
ragwatch_sampling_skipped_total{reason="budget"} 0
ragwatch_sampling_skipped_total{reason="no_content"} 0
ragwatch_sampling_skipped_total{reason="rate"} 1
ragwatch_sampling_skipped_total{reason="rate_limit"} 0
ragwatch_sampling_skipped_total{reason="rule"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestMarkCopies(t *testing.T) {
	r := &record.Record{TraceID: idHigh, Query: "q"}
	d := New(config.Sampling{Rate: 0.25}, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry())
	m := d.Mark(r, Decision{Sample: true, Probability: 0.25, Reason: "rate"})
	if r.Sampling != nil {
		t.Fatal("Mark changed the shared record")
	}
	if m.Sampling == nil || *m.Sampling != (record.Sampling{Probability: 0.25, Reason: "rate"}) || m.Query != "q" {
		t.Fatalf("marked = %+v", m)
	}
	if w := Weight(m.Sampling); w != 4 {
		t.Fatalf("weight = %v, want 4", w)
	}
	for _, s := range []*record.Sampling{nil, {Probability: 0}, {Probability: math.NaN()}, {Probability: 2}} {
		if w := Weight(s); w != 1 {
			t.Errorf("Weight(%+v) = %v, want 1", s, w)
		}
	}
}

func TestRateLimitEdges(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	d, _ := newTestDecider(t, config.Sampling{Rate: 1, MaxPerMinute: 3}, nil, c)
	rec := &record.Record{TraceID: idHigh, Service: "chat"}
	for i := 0; i < 3; i++ {
		if !d.Decide(rec, Ingest).Sample {
			t.Fatalf("sample %d of the initial burst refused", i)
		}
	}
	if got := d.Decide(rec, Ingest); got.Sample || got.Reason != ReasonRateLimit {
		t.Fatalf("4th in the same instant: %+v", got)
	}
	// One token per 20 s: 19.999 s later still nothing, at 20 s exactly one.
	c.t = c.t.Add(20*time.Second - time.Millisecond)
	if d.Decide(rec, Ingest).Sample {
		t.Fatal("token before 20s")
	}
	c.t = c.t.Add(time.Millisecond)
	if !d.Decide(rec, Ingest).Sample {
		t.Fatal("no token at 20s")
	}
	if d.Decide(rec, Ingest).Sample {
		t.Fatal("two tokens at 20s")
	}
	// A skip for rate does not spend a token.
	c.t = c.t.Add(time.Hour)
	d0, _ := newTestDecider(t, config.Sampling{Rate: 0.5, MaxPerMinute: 1}, nil, c)
	if d0.Decide(&record.Record{TraceID: idLow}, Ingest).Sample {
		t.Fatal("idLow sampled at 0.5")
	}
	if !d0.Decide(rec, Ingest).Sample {
		t.Fatal("token spent by a rate skip")
	}
	if got := skipped(t, d, ReasonRateLimit); got != 3 {
		t.Fatalf("rate_limit skips = %d, want 3", got)
	}
}

func TestBudgetEdges(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC)}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	b := NewBudget(config.SamplingBudget{USDPerDay: 1, FeedbackReserveUSD: 0.2, Prices: map[string]config.ModelPrice{
		"judge": {InputPerMTok: 2, OutputPerMTok: 10},
	}}, c.now, reg, logger)
	d := New(config.Sampling{Rate: 1}, b, cardinality.NewServiceSet(10), c.now, reg)
	rec := &record.Record{TraceID: idHigh}

	// 300k input + 20k output tokens = 0.6 + 0.2 = 0.8 USD from the table; the reported cost is ignored.
	if usd := b.Charge("judge", 300_000, 20_000, 99); math.Abs(usd-0.8) > 1e-12 {
		t.Fatalf("charged %v, want 0.8", usd)
	}
	if b.Allow(false) || !b.Allow(true) {
		t.Fatal("at 0.8 of 1 with 0.2 reserve: ingest must stop, feedback must pass")
	}
	if got := d.Decide(rec, Ingest); got.Sample || got.Reason != ReasonBudget {
		t.Fatalf("ingest decision at reserve: %+v", got)
	}
	if got := d.Decide(rec, Feedback); !got.Sample {
		t.Fatalf("feedback decision within reserve: %+v", got)
	}
	// An unknown model spends what the scorer reported.
	if usd := b.Charge("other", 1_000_000, 0, 0.19); usd != 0.19 {
		t.Fatalf("charged %v, want the reported 0.19", usd)
	}
	if !b.Allow(true) {
		t.Fatal("0.99 < 1: feedback still allowed")
	}
	b.Spend(0.01)
	if b.Allow(true) {
		t.Fatal("1.00 spent: feedback must stop")
	}
	if got := testutil.ToFloat64(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, b.Remaining)); got != 0 {
		t.Fatalf("remaining = %v", got)
	}
	if n := strings.Count(logs.String(), "scoring budget spent"); n != 1 {
		t.Fatalf("%d budget log lines, want 1:\n%s", n, logs.String())
	}
	// One nanosecond before midnight UTC: still spent. At midnight: a new day.
	c.t = time.Date(2026, 1, 1, 23, 59, 59, 999999999, time.UTC)
	if b.Allow(true) {
		t.Fatal("budget reset before midnight")
	}
	c.t = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	if !b.Allow(false) || b.Remaining() != 1 || b.Spent() != 0 {
		t.Fatalf("no reset at midnight: remaining %v", b.Remaining())
	}
	want := `
# HELP ragwatch_sampling_budget_remaining_usd Scoring budget left for the current UTC day in US dollars (+Inf without a budget).
# TYPE ragwatch_sampling_budget_remaining_usd gauge
ragwatch_sampling_budget_remaining_usd 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ragwatch_sampling_budget_remaining_usd"); err != nil {
		t.Fatal(err)
	}
	// Spending again on the new day logs again once exhausted.
	b.Spend(5)
	if n := strings.Count(logs.String(), "scoring budget spent"); n != 2 {
		t.Fatalf("%d budget log lines after the second day, want 2", n)
	}
	if got := skipped(t, d, ReasonBudget); got != 1 {
		t.Fatalf("budget skips = %d", got)
	}
	// No budget: always allowed, remaining +Inf; a nil budget too.
	nb := NewBudget(config.SamplingBudget{}, c.now, nil, nil)
	nb.Spend(1e9)
	var nilBudget *Budget
	if !nb.Allow(false) || !math.IsInf(nb.Remaining(), 1) || !nilBudget.Allow(false) {
		t.Fatal("no budget must always allow")
	}
}

// Over-sampling a subgroup 4x must not bias the weighted estimate; it does bias the naive one.
func TestWeightedMeanRecoversTrueMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	const n = 100000
	cfg := config.Sampling{Rate: 0.05, Rules: []config.SamplingRule{
		{Name: "weak_retrieval", Match: config.SamplingMatch{TopScoreBelow: f(0.3)}, Probability: f(0.2)},
	}}
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d, _ := newTestDecider(t, cfg, nil, c)
	var trueSum float64
	var weighted WeightedMean
	var naiveSum float64
	var naiveN int
	for i := 0; i < n; i++ {
		weak := rng.Float64() < 0.2
		top, value := 0.8, 0.9+0.1*rng.Float64() // strong retrieval: faithfulness about 0.95
		if weak {
			top, value = 0.1, 0.3+0.2*rng.Float64() // weak retrieval: about 0.4
		}
		trueSum += value
		rec := &record.Record{TraceID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()),
			Documents: []record.Document{{ID: "d", Score: f(top)}}}
		dec := d.Decide(rec, Ingest)
		if !dec.Sample {
			continue
		}
		w := Weight(d.Mark(rec, dec).Sampling)
		weighted.Add(value, w)
		naiveSum += value
		naiveN++
	}
	trueMean := trueSum / n
	est, ok := weighted.Mean()
	naive := naiveSum / float64(naiveN)
	if !ok || math.Abs(est-trueMean) > 0.005 {
		t.Fatalf("weighted %v vs true %v", est, trueMean)
	}
	if math.Abs(naive-trueMean) < 0.05 {
		t.Fatalf("naive mean %v is unexpectedly close to the true %v: the test has no power", naive, trueMean)
	}
	// Σw estimates the population size.
	if tot := weighted.Total(); math.Abs(tot-n)/n > 0.02 {
		t.Fatalf("Σw = %v, want about %d", tot, n)
	}
	if eff := weighted.EffectiveN(); !(eff > 0 && eff < float64(weighted.Count())) {
		t.Fatalf("effective n %v of %d", eff, weighted.Count())
	}
	t.Logf("true %.4f weighted %.4f naive %.4f over %d samples (effective %.0f)", trueMean, est, naive, weighted.Count(), weighted.EffectiveN())
}

func TestWeightedMeanMergeSub(t *testing.T) {
	var a, b WeightedMean
	a.Add(1, 1)
	a.Add(0, 3)
	b.Add(0.5, 2)
	b.Add(math.NaN(), 1) // ignored
	b.Add(1, 0)          // ignored
	m := a
	m.Merge(b)
	if got, _ := m.Mean(); got != (1+0+1)/6.0 || m.Count() != 3 {
		t.Fatalf("merged mean %v count %d", got, m.Count())
	}
	m.Sub(b)
	if got, _ := m.Mean(); got != 0.25 {
		t.Fatalf("after sub %v", got)
	}
	m.Sub(a)
	if _, ok := m.Mean(); ok {
		t.Fatal("empty estimator has a mean")
	}
	if eff := a.EffectiveN(); eff != 16.0/10 {
		t.Fatalf("effective n %v", eff)
	}
}

// The scores of a record kept upstream with probability q and sampled here with p weigh
// 1/(q·p): the two samplings compose, and MaxWeight (the bound on score weights read back from
// NATS) rises to the weight given, so those scores are not refused as out of range.
func TestMarkComposesUpstreamProbability(t *testing.T) {
	d := New(config.Sampling{Rate: 0.25}, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry())
	if got := d.MaxWeight(); got != 4 {
		t.Fatalf("MaxWeight before any upstream record = %v, want 4", got)
	}
	for _, tc := range []struct {
		upstream, p, want float64
	}{
		{0, 0.25, 4},     // nothing declared upstream
		{1, 0.25, 4},     // th:0
		{0.5, 0.25, 8},   // th:8
		{0.25, 1, 4},     // th:c, every record scored here
		{0.125, 0.5, 16}, // p:3
		{2, 0.5, 2},      // not a probability: ignored
	} {
		r := &record.Record{TraceID: idHigh, UpstreamProbability: tc.upstream}
		m := d.Mark(r, Decision{Sample: true, Probability: tc.p, Reason: "rate"})
		if w := Weight(m.Sampling); w != tc.want {
			t.Errorf("upstream %v, p %v: weight %v, want %v", tc.upstream, tc.p, w, tc.want)
		}
	}
	if got := d.MaxWeight(); got != 16 {
		t.Fatalf("MaxWeight after marking = %v, want 16, the largest weight given", got)
	}
}
