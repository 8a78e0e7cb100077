package sampler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/collector/record"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/labels"
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
}

func (o *offers) Offer(r *record.Record) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.recs = append(o.recs, r)
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func one() *float64 { v := 1.0; return &v }

func newStage(t *testing.T, cfg config.Sampling, c *clock) (*Stage, *offers, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := decide.New(cfg, nil, labels.NewServiceSet(10), c.now, reg)
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
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: idLow, Feedback: &record.Feedback{Score: 1}})
	if len(o.recs) != 0 {
		t.Fatal("positive feedback sampled")
	}
	// Negative feedback carries only ids; the content comes from the cache.
	c.t = c.t.Add(9 * time.Minute)
	fb := &record.Record{TraceID: idLow, Service: "chat", Feedback: &record.Feedback{Score: -1, Comment: "wrong"}}
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
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: idHigh, Feedback: &record.Feedback{Score: -1}})
	if len(o.recs) != 2 {
		t.Fatalf("%d offers, want 2", len(o.recs))
	}
	// Unknown record without content: counted as no_content. With content: sampled.
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: "00000000000000000000000000000002", Feedback: &record.Feedback{Score: -1}})
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: "00000000000000000000000000000003", Query: "q", Feedback: &record.Feedback{Score: -1}})
	if len(o.recs) != 3 || o.recs[2].TraceID != "00000000000000000000000000000003" {
		t.Fatalf("%d offers", len(o.recs))
	}
	want := `
# HELP ragwatch_sampled_total Records sampled for scoring, by service and reason (rule name or rate).
# TYPE ragwatch_sampled_total counter
ragwatch_sampled_total{reason="negative_feedback",service="chat"} 1
ragwatch_sampled_total{reason="negative_feedback",service="unknown"} 1
ragwatch_sampled_total{reason="rate",service="unknown"} 1
# HELP ragwatch_sampling_skipped_total Records not sampled, by reason: rate, rate_limit, budget, rule (a never rule), no_content.
# TYPE ragwatch_sampling_skipped_total counter
ragwatch_sampling_skipped_total{reason="budget"} 0
ragwatch_sampling_skipped_total{reason="no_content"} 1
ragwatch_sampling_skipped_total{reason="rate"} 1
ragwatch_sampling_skipped_total{reason="rate_limit"} 0
ragwatch_sampling_skipped_total{reason="rule"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
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
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: ids[0], Feedback: &record.Feedback{Score: -1}})
	if len(o.recs) != 0 {
		t.Fatal("evicted record sampled")
	}
	// Past the TTL the others are gone too.
	c.t = c.t.Add(10 * time.Minute)
	_ = s.ConsumeFeedback(ctx, &record.Record{TraceID: ids[2], Feedback: &record.Feedback{Score: -1}})
	if len(o.recs) != 0 || s.recent.len() != 0 {
		t.Fatalf("expired record sampled or kept (%d)", s.recent.len())
	}
	// Bytes: a record larger than the cache keeps only its decision.
	cfg.Recent = config.RecentRecords{MaxRecords: 100, MaxBytes: 1000, TTL: time.Minute}
	s2, o2, _ := newStage(t, cfg, c)
	_ = s2.ConsumeRecord(ctx, &record.Record{TraceID: ids[0], Query: strings.Repeat("x", 2000)})
	_ = s2.ConsumeFeedback(ctx, &record.Record{TraceID: ids[0], Feedback: &record.Feedback{Score: -1}})
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
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
	d := decide.New(cfg, nil, labels.NewServiceSet(10), nil, reg)
	s := NewStage(d, pub, cfg.Recent, nil)

	srv.Shutdown()
	srv.WaitForShutdown()
	deadline := time.Now().Add(5 * time.Second)
	for nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("still connected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	const n = 10000
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%032x", i)
	}
	// Baseline: the same stage into an Offerer that accepts everything.
	base := NewStage(decide.New(cfg, nil, labels.NewServiceSet(10), nil, prometheus.NewRegistry()), &offers{}, cfg.Recent, nil)
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
	if got := testutil.ToFloat64(m.Dropped.WithLabelValues(queue.DropNATSUnavailable)); got != n {
		t.Fatalf("nats_unavailable drops = %v, want %d", got, n)
	}
	t.Logf("NATS down: %d records in %v (%.0f/s), slowest call %v; baseline %v (%.0f/s)", n, total, n/total.Seconds(), slowest, baseline, n/baseline.Seconds())
}
