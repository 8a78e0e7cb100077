package sampler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/cardinality"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/sampler/decide"
	"github.com/ragwatch/ragwatch/sampler/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	idHigh = "000000000000000000ffffffffffffff" // sampled at any p > 0
	idLow  = "00000000000000000000000000000001" // sampled only at p = 1
)

type offers struct {
	mu   sync.Mutex
	recs []*record.Record
	err  error // what Offer returns (the record is kept either way)
}

func (o *offers) Offer(r *record.Record) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs = append(o.recs, r)
	return o.err
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func one() *float64 { v := 1.0; return &v }

func newStage(t *testing.T, cfg config.Sampling, c *clock) (*Stage, *offers, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := decide.New(cfg, nil, cardinality.NewServiceSet(10), c.now, reg)
	o := &offers{}
	return NewStage(d, o, cfg.Recent, c.now), o, reg
}

func feedbackConfig() config.Sampling {
	cfg := config.Default().Sampling
	cfg.Rules = []config.SamplingRule{{Name: "negative_feedback", Match: config.SamplingMatch{NegativeFeedback: true}, Probability: one()}}
	return cfg
}

func TestStageOffersMarkedCopies(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, _ := newStage(t, config.Default().Sampling, c) // rate 0.1
	in := []*record.Record{
		{TraceID: idHigh, Service: "chat", Query: "q1"},
		{TraceID: idLow, Service: "chat", Query: "q2"},
	}
	for _, r := range in {
		if err := s.ConsumeRecord(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if len(o.recs) != 1 || o.recs[0].TraceID != idHigh || *o.recs[0].Sampling != (record.Sampling{Probability: 0.1, Reason: "rate"}) {
		t.Fatalf("offered %+v", o.recs)
	}
	if in[0].Sampling != nil {
		t.Fatal("the shared record was changed")
	}
}

// The same record again (a client re-posting it) is not offered twice while the recent cache
// remembers it was queued: batches share one Nats-Msg-Id, so the server cannot tell. Another
// turn of the same trace (another key) is offered, and after the cache's ttl the record is
// offered again.
func TestStageOffersARecordOnce(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config.Default().Sampling
	s, o, _ := newStage(t, cfg, c)
	post := func(span string) {
		t.Helper()
		if err := s.ConsumeRecord(context.Background(), &record.Record{TraceID: idHigh, SpanID: span, Service: "chat", Query: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	post("")
	post("")
	if len(o.recs) != 1 {
		t.Fatalf("%d offers of one record posted twice, want 1", len(o.recs))
	}
	post("00000000000000aa") // another turn: another key
	if len(o.recs) != 2 {
		t.Fatalf("%d offers, want 2: another turn is another record", len(o.recs))
	}
	c.t = c.t.Add(cfg.Recent.TTL + time.Second)
	post("")
	if len(o.recs) != 3 {
		t.Fatalf("%d offers, want 3: past sampling.recent.ttl the record is offered again", len(o.recs))
	}
	// A record the publisher dropped at once (its buffer full) is not remembered as queued: a
	// copy posted again is offered again.
	o.err = errors.New("scoring queue full")
	post("00000000000000bb")
	o.err = nil
	post("00000000000000bb")
	if len(o.recs) != 5 {
		t.Fatalf("%d offers, want 5: a record dropped at once is offered again when posted again", len(o.recs))
	}
}

func TestLateNegativeFeedbackSamplesTheRememberedRecord(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, reg := newStage(t, feedbackConfig(), c)
	ctx := context.Background()
	rec := &record.Record{TraceID: idLow, Service: "chat", Query: "why?", Answer: "because", Documents: []record.Document{{ID: "d1", Content: "text"}}}
	_ = s.ConsumeRecord(ctx, rec)
	if len(o.recs) != 0 {
		t.Fatal("idLow sampled at rate 0.1")
	}
	// Positive feedback changes nothing.
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: idLow, Score: 1})
	if len(o.recs) != 0 {
		t.Fatal("positive feedback sampled")
	}
	// Negative feedback carries only ids; the content comes from the cache.
	c.t = c.t.Add(9 * time.Minute)
	fb := record.Feedback{TraceID: idLow, Service: "chat", Score: -1, Comment: "wrong"}
	_ = s.ConsumeFeedback(ctx, fb)
	if len(o.recs) != 1 {
		t.Fatalf("negative feedback offered %d records", len(o.recs))
	}
	got := o.recs[0]
	if got.Query != "why?" || got.Answer != "because" || len(got.Documents) != 1 || got.Feedback == nil || got.Feedback.Score != -1 ||
		*got.Sampling != (record.Sampling{Probability: 1, Reason: "negative_feedback"}) {
		t.Fatalf("offered %+v", got)
	}
	// Again: already queued.
	_ = s.ConsumeFeedback(ctx, fb)
	if len(o.recs) != 1 {
		t.Fatal("sampled twice")
	}
	// A record sampled at ingestion is not offered again on feedback.
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: idHigh, Query: "q"})
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: idHigh, Score: -1})
	if len(o.recs) != 2 {
		t.Fatalf("%d offers, want 2", len(o.recs))
	}
	// Unknown record: feedback carries no content, so it is counted as no_content.
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: "00000000000000000000000000000002", Score: -1})
	if len(o.recs) != 2 {
		t.Fatalf("%d offers, want 2", len(o.recs))
	}
	want := `
# HELP ragwatch_sampled_total Records sampled for scoring, by service and reason (rule name or rate).
# TYPE ragwatch_sampled_total counter
ragwatch_sampled_total{reason="negative_feedback",service="chat"} 1
ragwatch_sampled_total{reason="rate",service="unknown"} 1
# HELP ragwatch_sampling_skipped_total Records not sampled, by reason: rate, rate_limit, budget, rule (a never rule), no_content.
# TYPE ragwatch_sampling_skipped_total counter
ragwatch_sampling_skipped_total{reason="budget"} 0
ragwatch_sampling_skipped_total{reason="no_content"} 1
ragwatch_sampling_skipped_total{reason="rate"} 1
ragwatch_sampling_skipped_total{reason="rate_limit"} 0
ragwatch_sampling_skipped_total{reason="rule"} 0
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestRecentCacheBounds(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := feedbackConfig()
	cfg.Recent = config.RecentRecords{MaxRecords: 2, MaxBytes: 1 << 20, TTL: 10 * time.Minute}
	s, o, _ := newStage(t, cfg, c)
	ctx := context.Background()
	ids := []string{"00000000000000000000000000000011", "00000000000000000000000000000012", "00000000000000000000000000000013"}
	for _, id := range ids {
		_ = s.ConsumeRecord(ctx, &record.Record{TraceID: id, Query: "q"})
	}
	if n := s.recent.len(); n != 2 {
		t.Fatalf("cache holds %d, want 2", n)
	}
	// The oldest was evicted: its feedback finds no content.
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: ids[0], Score: -1})
	if len(o.recs) != 0 {
		t.Fatal("evicted record sampled")
	}
	// Past the TTL the others are gone too.
	c.t = c.t.Add(10 * time.Minute)
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: ids[2], Score: -1})
	if len(o.recs) != 0 || s.recent.len() != 0 {
		t.Fatalf("expired record sampled or kept (%d)", s.recent.len())
	}
	// Bytes: a record larger than the cache keeps only its decision.
	cfg.Recent = config.RecentRecords{MaxRecords: 100, MaxBytes: 1000, TTL: time.Minute}
	s2, o2, _ := newStage(t, cfg, c)
	_ = s2.ConsumeRecord(ctx, &record.Record{TraceID: ids[0], Query: strings.Repeat("x", 2000)})
	_ = s2.ConsumeFeedback(ctx, record.Feedback{TraceID: ids[0], Score: -1})
	if len(o2.recs) != 0 || s2.recent.len() != 1 {
		t.Fatalf("oversized record: %d offers, %d cached", len(o2.recs), s2.recent.len())
	}
	for i := 0; i < 50; i++ {
		_ = s2.ConsumeRecord(ctx, &record.Record{TraceID: fmt.Sprintf("%032x", 100+i), Query: "q"})
	}
	if s2.recent.bytes > 1000 {
		t.Fatalf("cache holds %d bytes over its 1000", s2.recent.bytes)
	}
}

// With NATS down, ConsumeRecord keeps returning at once and every sample is counted as dropped.
func TestIngestionWithNATSStopped(t *testing.T) {
	srv := testutil.RunJetStream(t)
	nc, js := testutil.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	qcfg := config.Default().Scoring.Queue
	if _, err := queue.Setup(context.Background(), js, qcfg, 1); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pub := queue.NewPublisher(js, qcfg, 1024, reg, nil)
	if err := pub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer pub.Shutdown(context.Background())
	cfg := config.Default().Sampling
	cfg.Rate = 1
	d := decide.New(cfg, nil, cardinality.NewServiceSet(10), nil, reg)
	s := NewStage(d, pub, cfg.Recent, nil)

	srv.Shutdown()
	srv.WaitForShutdown()
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the connection to drop", func() bool { return !nc.IsConnected() })
	const n = 10000
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032x", i)
	}
	// Baseline: the same stage into an Offerer that accepts everything.
	base := NewStage(decide.New(cfg, nil, cardinality.NewServiceSet(10), nil, prometheus.NewRegistry()), &offers{}, cfg.Recent, nil)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		_ = base.ConsumeRecord(context.Background(), &record.Record{TraceID: ids[n+i], Service: "chat", Query: "q"})
	}
	baseline := time.Since(t0)
	var slowest time.Duration
	start := time.Now()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := s.ConsumeRecord(context.Background(), &record.Record{TraceID: ids[i], Service: "chat", Query: "q"}); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
	}
	total := time.Since(start)
	// Throughput holds: no slower than three times the baseline (scheduling noise under -race), and no call waits on NATS.
	if total > 3*baseline+200*time.Millisecond || slowest > 250*time.Millisecond {
		t.Fatalf("%d records took %v (baseline %v, slowest %v) with NATS down", n, total, baseline, slowest)
	}
	m := queue.NewMetrics(reg)
	if got := promtestutil.ToFloat64(m.Dropped.WithLabelValues(queue.DropNATSUnavailable)); got != n {
		t.Fatalf("nats_unavailable drops = %v, want %d", got, n)
	}
	t.Logf("NATS down: %d records in %v (%.0f/s), slowest call %v; baseline %v (%.0f/s)", n, total, n/total.Seconds(), slowest, baseline, n/baseline.Seconds())
}

// contentRecord is a record like the loadgen's, with an id from a fixed sequence.
func contentRecord(i int) *record.Record {
	return &record.Record{TraceID: fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15), Service: "chat",
		Query: fmt.Sprintf("question %d?", i), Answer: "an answer [1].",
		Documents:  []record.Document{{ID: "d1", Content: strings.Repeat("x", 1024)}, {ID: "d2", Content: "more"}},
		Attributes: map[string]string{"route": "/chat"}}
}

func skippedCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return testutil.Series(t, reg, "ragwatch_sampling_skipped_total", map[string]string{"reason": reason}).GetCounter().GetValue()
}

// Without a rule that matches on negative_feedback, feedback cannot change a decision: the cache
// keeps no content, only the decisions feedback needs (sampled records, and with rules every
// record's), and late negative feedback samples nothing and counts nothing.
func TestNoFeedbackRuleKeepsNoContent(t *testing.T) {
	private := []config.SamplingRule{{Name: "private", Match: config.SamplingMatch{Routes: []string{"/admin"}}, Never: true}}
	// empty_retrieval matches the feedback-only record (it has no documents): a settled entry
	// keeps it from being counted as no_content.
	empty := []config.SamplingRule{{Name: "empty_retrieval", Match: config.SamplingMatch{EmptyRetrieval: true}, Probability: one()}}
	const n = 1000
	for _, tt := range []struct {
		name  string
		rate  float64
		rules []config.SamplingRule
	}{
		{"defaults", 0.1, nil},
		{"rate 0", 0, nil},
		{"rate 1", 1, nil},
		{"never rule", 0.1, private},
		{"empty_retrieval rule", 0.1, empty},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			cfg := config.Default().Sampling
			cfg.Rate, cfg.Rules = tt.rate, tt.rules
			s, o, reg := newStage(t, cfg, c)
			ctx := context.Background()
			sampled := 0
			for i := 0; i < n; i++ {
				r := contentRecord(i)
				if i%10 == 0 {
					r.Attributes = map[string]string{"route": "/admin"} // never sampled with the never rule
				}
				if tt.rules == nil && decide.Sampled(r.TraceID, tt.rate) {
					sampled++
				}
				_ = s.ConsumeRecord(ctx, r)
			}
			if tt.rules == nil && len(o.recs) != sampled {
				t.Fatalf("%d offers, want %d", len(o.recs), sampled)
			}
			wantLen := n // with rules every decision is kept
			if tt.rules == nil {
				wantLen = len(o.recs) // without, only the sampled ones
			}
			bytes, content := s.recent.stats()
			if got := s.recent.len(); got != wantLen || content != 0 || bytes != int64(entryBytes*wantLen) {
				t.Fatalf("cache: %d entries, %d with content, %d bytes; want %d, 0, %d", got, content, bytes, wantLen, entryBytes*wantLen)
			}
			offered := len(o.recs)
			rateSkips := skippedCount(t, reg, decide.ReasonRate)
			c.t = c.t.Add(time.Minute)
			for i := 0; i < n; i++ {
				_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: contentRecord(i).TraceID, Service: "chat", Score: -1})
			}
			if len(o.recs) != offered {
				t.Fatalf("feedback offered %d more records", len(o.recs)-offered)
			}
			if nc, rs := skippedCount(t, reg, decide.ReasonNoContent), skippedCount(t, reg, decide.ReasonRate); nc != 0 || rs != rateSkips {
				t.Fatalf("feedback counted no_content %v, rate skips %v (were %v)", nc, rs, rateSkips)
			}
		})
	}
}

// With a negative_feedback rule every record not sampled keeps its content, and late feedback
// sends it to scoring with p = 1; the entry then holds only the decision.
func TestFeedbackRuleKeepsContentForLateFeedback(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, o, _ := newStage(t, feedbackConfig(), c) // rate 0.1
	ctx := context.Background()
	const n = 200
	var want int64
	unsampled := map[string]*record.Record{}
	for i := 0; i < n; i++ {
		r := contentRecord(i)
		_ = s.ConsumeRecord(ctx, r)
		if decide.Sampled(r.TraceID, 0.1) {
			want += entryBytes
		} else {
			want += entryBytes + recordSize(r)
			unsampled[r.TraceID] = r
		}
	}
	sampled := len(o.recs)
	if sampled+len(unsampled) != n || sampled == 0 {
		t.Fatalf("%d sampled, %d not", sampled, len(unsampled))
	}
	bytes, content := s.recent.stats()
	if s.recent.len() != n || content != len(unsampled) || bytes != want {
		t.Fatalf("cache: %d entries, %d with content, %d bytes; want %d, %d, %d", s.recent.len(), content, bytes, n, len(unsampled), want)
	}
	c.t = c.t.Add(5 * time.Minute)
	for i := 0; i < n; i++ {
		_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: contentRecord(i).TraceID, Service: "chat", Score: -1, Comment: "wrong"})
	}
	if len(o.recs) != n {
		t.Fatalf("%d offers, want %d", len(o.recs), n)
	}
	for _, got := range o.recs[sampled:] {
		in := unsampled[got.TraceID]
		if in == nil || got.Query != in.Query || got.Answer != in.Answer || len(got.Documents) != 2 || got.Documents[0].Content != in.Documents[0].Content ||
			got.Attributes["route"] != "/chat" || got.Feedback == nil || *got.Feedback != (record.Feedback{Score: -1, Comment: "wrong"}) ||
			*got.Sampling != (record.Sampling{Probability: 1, Reason: "negative_feedback"}) {
			t.Fatalf("offered %+v", got)
		}
		delete(unsampled, got.TraceID)
	}
	if len(unsampled) != 0 {
		t.Fatalf("%d records not offered", len(unsampled))
	}
	bytes, content = s.recent.stats()
	if s.recent.len() != n || content != 0 || bytes != entryBytes*n {
		t.Fatalf("after feedback: %d entries, %d with content, %d bytes", s.recent.len(), content, bytes)
	}
}

// A record skipped by max_per_minute keeps its content without any rule: feedback retries it.
func TestCapSkippedRecordKeepsContent(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := config.Default().Sampling
	cfg.Rate, cfg.MaxPerMinute = 1, 1
	s, o, reg := newStage(t, cfg, c)
	ctx := context.Background()
	a, b := contentRecord(1), contentRecord(2)
	_ = s.ConsumeRecord(ctx, a) // the minute's token
	_ = s.ConsumeRecord(ctx, b) // rate_limit
	if len(o.recs) != 1 || skippedCount(t, reg, decide.ReasonRateLimit) != 1 {
		t.Fatalf("%d offers", len(o.recs))
	}
	if _, content := s.recent.stats(); content != 1 || s.recent.len() != 2 {
		t.Fatalf("%d entries, %d with content", s.recent.len(), content)
	}
	c.t = c.t.Add(time.Minute) // a token again
	_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: b.TraceID, Score: 1})
	if len(o.recs) != 2 || o.recs[1].Query != b.Query || *o.recs[1].Sampling != (record.Sampling{Probability: 1, Reason: "rate"}) {
		t.Fatalf("offers %+v", o.recs)
	}
}

// The rules are read per record: after a reload adds a negative_feedback rule, new records keep
// their content; a record seen before has none, and its feedback is counted as no_content.
func TestReloadAddingFeedbackRule(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	d := decide.New(config.Default().Sampling, nil, cardinality.NewServiceSet(10), c.now, reg)
	o := &offers{}
	s := NewStage(d, o, config.Default().Sampling.Recent, c.now)
	ctx := context.Background()
	before := &record.Record{TraceID: idLow, Query: "q1"}
	after := &record.Record{TraceID: "00000000000000000000000000000002", Query: "q2"}
	_ = s.ConsumeRecord(ctx, before)
	if s.recent.len() != 0 {
		t.Fatal("kept a record no rule could change")
	}
	d.Update(feedbackConfig())
	_ = s.ConsumeRecord(ctx, after)
	if _, content := s.recent.stats(); content != 1 {
		t.Fatalf("%d records with content, want 1", content)
	}
	for _, r := range []*record.Record{before, after} {
		_ = s.ConsumeFeedback(ctx, record.Feedback{TraceID: r.TraceID, Score: -1})
	}
	if len(o.recs) != 1 || o.recs[0].Query != "q2" || skippedCount(t, reg, decide.ReasonNoContent) != 1 {
		t.Fatalf("offers %+v, no_content %v", o.recs, skippedCount(t, reg, decide.ReasonNoContent))
	}
	// And back: without the rule new records keep nothing.
	d.Update(config.Default().Sampling)
	n := s.recent.len()
	_ = s.ConsumeRecord(ctx, &record.Record{TraceID: "00000000000000000000000000000003", Query: "q3"})
	if s.recent.len() != n || len(o.recs) != 1 {
		t.Fatalf("%d entries, want %d", s.recent.len(), n)
	}
}
