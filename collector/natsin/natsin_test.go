package natsin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/collector/join"
	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/natsconn"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience is generous: under -race on a loaded 2-core machine a JetStream redelivery after
// ack_wait can take several seconds; a pass returns as soon as the condition holds.
const patience = 40 * time.Second

// embedded starts ragwatch's own embedded server (JetStream in a temp dir, a free port) and
// returns the connection and a second client for the "application" side, logged in as the
// publish-only app user.
func embedded(t testing.TB) (*natsconn.Conn, *nats.Conn, config.NATS) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default().NATS
	cfg.StoreDir = filepath.Join(dir, "store")
	cfg.Embedded.Endpoint = "127.0.0.1:-1"
	cfg.Embedded.Users.Ragwatch.PasswordFile = filepath.Join(dir, "ragwatch.password")
	if err := os.WriteFile(cfg.Embedded.Users.Ragwatch.PasswordFile, []byte(ownPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, err := natsconn.Connect(context.Background(), cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := nats.Connect(conn.ClientURL(), conn.AppCredential().Option())
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(); conn.Close() })
	return conn, app, cfg
}

// ownPassword is ragwatch's own password on the test server, for the extra subscriber
// connections a test opens as another ragwatch instance.
const ownPassword = "ragwatch-test-password"

func ownLogin(cfg config.NATS) nats.Option {
	return nats.UserInfo(cfg.Embedded.Users.Ragwatch.Name, ownPassword)
}

func otlpRequest(t *testing.T, traceID string, spans ...string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	ss := rs.ScopeSpans().AppendEmpty()
	var tid pcommon.TraceID
	copy(tid[:], traceID)
	for i, name := range spans {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(name)
		sp.SetTraceID(tid)
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type tracesSink struct {
	mu    sync.Mutex
	names []string
}

func (s *tracesSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			spans := rss.At(i).ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				s.names = append(s.names, svc.Str()+"/"+spans.At(k).Name())
			}
		}
	}
	return nil
}

// TestCoreSubjectsIntoThePipeline publishes records, OTLP and feedback with nats.go into the
// real feedback join and signals, and checks the metrics with exact values.
func TestCoreSubjectsIntoThePipeline(t *testing.T) {
	conn, app, cfg := embedded(t)
	reg := prometheus.NewRegistry()
	im := ingest.NewMetrics(reg)
	sig, err := signals.New(signals.Settings{Signals: config.Signals{MaxServices: 10}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	jn, err := join.New(join.Settings{Retention: time.Hour, Next: sig, NextFeedback: sig, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	traces := &tracesSink{}
	subCfg := cfg
	subCfg.MaxPayload = 4096 // below the server's limit, to see our own check
	sub, err := New(Settings{NC: conn.NC, Config: subCfg, Records: jn, Traces: traces, Feedback: jn, Metrics: im, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sub.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	pub := func(subject, data string) {
		t.Helper()
		if err := app.Publish(subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	r1 := `{"trace_id":"aaaa0000000000000000000000000001","service":"support-bot","query":"q","answer":"a","documents":[{"id":"d1","score":0.5}]}`
	pub("ragwatch.records.support-bot", r1)
	pub("ragwatch.records.support-bot", `[{"trace_id":"aaaa0000000000000000000000000002","service":"support-bot","query":"q"},`+
		`{"trace_id":"aaaa0000000000000000000000000003","service":"search","answer":"a"}]`)
	pub("ragwatch.records.support-bot", r1) // a duplicate
	pub("ragwatch.feedback.web", `{"trace_id":"aaaa0000000000000000000000000001","thumbs":"down","comment":"wrong"}`)
	pub("ragwatch.feedback.web", `[{"trace_id":"aaaa0000000000000000000000000003","score":0.5},{"trace_id":"never","thumbs":"up","service":"search"}]`)
	if err := app.Publish("ragwatch.otlp.traces", otlpRequest(t, "0123456789abcdef", "retrieve", "llm", "chain")); err != nil {
		t.Fatal(err)
	}
	// Bad messages: each is counted with its reason and dropped.
	pub("ragwatch.records.x", `{"trace_id":`)                          // malformed
	pub("ragwatch.records.x", `{"service":"support-bot","query":"q"}`) // invalid: no trace_id
	pub("ragwatch.records.x", `{"trace_id":"t","query":"`+strings.Repeat("x", 5000)+`"}`)
	pub("ragwatch.otlp.traces", "\x0a\xff\xff")                     // truncated protobuf
	pub("ragwatch.feedback.web", `{"trace_id":"t","thumbs":"meh"}`) // invalid
	if err := app.Flush(); err != nil {
		t.Fatal(err)
	}

	msgs := func(kind string) float64 {
		return testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": kind})
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "all 11 messages", func() bool { return msgs("records")+msgs("otlp")+msgs("feedback") == 11 })

	rej := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason})
	}
	req := func(svc string) float64 {
		return testutil.Sum(t, reg, "ragwatch_requests_total", map[string]string{"service": svc})
	}
	fb := func(svc, sentiment string) float64 {
		return testutil.Sum(t, reg, "ragwatch_feedback_total", map[string]string{"service": svc, "sentiment": sentiment})
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"requests support-bot", req("support-bot"), 2},
		{"requests search", req("search"), 1},
		{"feedback support-bot negative", fb("support-bot", "negative"), 1},
		{"feedback search positive", fb("search", "positive"), 1},
		{"join joined", testutil.Sum(t, reg, "ragwatch_join_total", map[string]string{"join": "feedback", "outcome": "joined"}), 2},
		{"feedback pending", testutil.Sum(t, reg, "ragwatch_join_pending", map[string]string{"join": "feedback"}), 1},
		{"spans nats", testutil.Sum(t, reg, "ragwatch_spans_received_total", map[string]string{"receiver": "nats"}), 3},
		{"rejected duplicate", rej("duplicate"), 1},
		{"rejected malformed", rej("malformed"), 2},
		{"rejected invalid", rej("invalid"), 2},
		{"rejected too_large", rej("too_large"), 1},
		{"records accepted", testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "records", "outcome": "accepted"}), 2},
		{"records duplicate", testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "records", "outcome": "duplicate"}), 1},
		{"records rejected", testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "records", "outcome": "rejected"}), 3},
		{"feedback accepted", testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "feedback", "outcome": "accepted"}), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	traces.mu.Lock()
	defer traces.mu.Unlock()
	if want := []string{"support-bot/retrieve", "support-bot/llm", "support-bot/chain"}; !reflect.DeepEqual(traces.names, want) {
		t.Errorf("spans = %q, want %q", traces.names, want)
	}
}

// countingSink counts each trace id it consumes; crash, when set, runs after the n-th record.
type countingSink struct {
	mu     sync.Mutex
	counts map[string]int
	total  int
	crashN int
	crash  func()
	failID string // fail the first delivery of this trace
	failed bool
}

func (s *countingSink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	if r.TraceID == s.failID && !s.failed {
		s.failed = true
		s.mu.Unlock()
		return errors.New("downstream unavailable")
	}
	s.counts[r.TraceID]++
	s.total++
	n, crash := s.total, s.crash
	s.mu.Unlock()
	if crash != nil && n == s.crashN {
		crash()
	}
	return nil
}

func (s *countingSink) snapshot() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.counts), s.total
}

func jsConfig(cfg config.NATS) config.NATS {
	cfg.Consume.Mode = config.NATSModeJetStream
	// Long enough that messages waiting in the client's pull buffer (slow under -race) are not
	// redelivered early; the crashed run's unacked record comes back after it.
	cfg.Consume.AckWait = 5 * time.Second
	cfg.Consume.MaxDeliver = 10
	return cfg
}

// TestJetStreamCrashAndRestartCountsEachRecordOnce publishes records into the stream while the
// consumer side crashes (its connection dies after consuming a record, before the ack) and
// restarts twice; every record is consumed exactly once and the redelivery is detected.
func TestJetStreamCrashAndRestartCountsEachRecordOnce(t *testing.T) {
	conn, app, cfg := embedded(t)
	cfg = jsConfig(cfg)
	ctx := context.Background()
	// The duplicate marks live in KV, here on a connection of their own, so that the crash
	// below (the consumer's connection dies) loses the ack but not the mark: the window the
	// marks exist for.
	kv, err := conn.KeyValue(ctx, cfg.Consume.DedupBucket, cfg.Consume.DedupWindow, cfg.Consume.DedupMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{counts: map[string]int{}}
	reg := prometheus.NewRegistry()
	im := ingest.NewMetrics(reg)

	js, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			data := fmt.Sprintf(`{"trace_id":"trace-%04d","service":"support-bot","query":"q%d"}`, i, i)
			if _, err := js.Publish(ctx, "ragwatch.records.support-bot", []byte(data)); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}

	run := func(name string, crashAt int) (*Subscriber, *nats.Conn) {
		t.Helper()
		nc, err := nats.Connect(conn.ClientURL(), nats.Name(name), ownLogin(cfg))
		if err != nil {
			t.Fatal(err)
		}
		njs, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		sink.mu.Lock()
		sink.crash, sink.crashN = nil, 0
		if crashAt > 0 {
			sink.crashN = crashAt
			sink.crash = func() { nc.Close() } // the process dies: no more acks
		}
		sink.mu.Unlock()
		s, err := New(Settings{NC: nc, JS: njs, Config: cfg, Records: sink, Metrics: im, DedupKV: kv,
			Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s, nc
	}
	stop := func(s *Subscriber, nc *nats.Conn) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
		nc.Close()
	}

	a, anc := run("ragwatch-a", 60) // creates the stream
	publish(0, 100)
	testutil.Eventually(t, patience, 5*time.Millisecond, "the first run to crash", func() bool { return anc.IsClosed() })
	stop(a, anc)
	if uniq, total := sink.snapshot(); uniq != 60 || total != 60 {
		t.Fatalf("after the crash: %d unique, %d total, want 60 60", uniq, total)
	}

	publish(100, 200) // while nobody consumes
	b, bnc := run("ragwatch-b", 0)
	testutil.Eventually(t, patience, 5*time.Millisecond, "200 records", func() bool { u, _ := sink.snapshot(); return u == 200 })
	testutil.Eventually(t, patience, 5*time.Millisecond, "the redelivered record to be recognised", func() bool {
		// >= 1: a second duplicate would fail the exact check at the end with the counts.
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"reason": "duplicate"}) >= 1
	})
	stop(b, bnc) // a clean stop: drains and acks

	publish(200, 300)
	c, cnc := run("ragwatch-c", 0)
	testutil.Eventually(t, patience, 5*time.Millisecond, "300 records", func() bool { u, _ := sink.snapshot(); return u == 300 })
	cons, err := conn.JS.Consumer(ctx, cfg.Consume.Stream, cfg.Consume.Durable+"_records")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "every message acked", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.AckFloor.Stream == 300
	})
	stop(c, cnc)

	uniq, total := sink.snapshot()
	if uniq != 300 || total != 300 {
		t.Fatalf("%d unique records, %d consumed, want 300 300", uniq, total)
	}
	for id, n := range sink.counts {
		if n != 1 {
			t.Fatalf("%s consumed %d times", id, n)
		}
	}
	// At least the record consumed but not acked came back and was recognised. Under load (the
	// race detector, a busy CI machine) a message can also wait in the client's pull buffer past
	// AckWait and be redelivered while its first delivery is still on its way: the same marks
	// catch that one too, which the exactly-once check above already proves, so the count is a
	// lower bound, not an exact figure.
	if got := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": "duplicate"}); got < 1 {
		t.Fatalf("duplicates = %v, want at least the one record consumed but not acked", got)
	}
}

// TestJetStreamBadMessagesTerminatedAndFailuresRetried checks that a bad message is
// terminated (never redelivered) and a downstream failure is retried until it succeeds.
func TestJetStreamBadMessagesTerminatedAndFailuresRetried(t *testing.T) {
	conn, app, cfg := embedded(t)
	cfg = jsConfig(cfg)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	im := ingest.NewMetrics(reg)
	sink := &countingSink{counts: map[string]int{}, failID: "flaky"}
	var got []record.Feedback
	var mu sync.Mutex
	fbSink := record.FeedbackConsumerFunc(func(_ context.Context, f record.Feedback) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, f)
		return nil
	})
	s, err := New(Settings{NC: conn.NC, JS: conn.JS, Config: cfg, Records: sink, Feedback: fbSink, Metrics: im, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(ctx) }()
	js, err := jetstream.New(app)
	if err != nil {
		t.Fatal(err)
	}
	for subj, data := range map[string]string{
		"ragwatch.records.a":  `not json`,
		"ragwatch.records.b":  `{"trace_id":"flaky","query":"q"}`,
		"ragwatch.feedback.a": `{"trace_id":"f1","score":-0.25,"time":"2026-11-29T12:00:00Z"}`,
		"ragwatch.feedback.b": `{"trace_id":"f1"}`,
	} {
		if _, err := js.Publish(ctx, subj, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "the flaky record after its retry", func() bool { u, _ := sink.snapshot(); return u == 1 })
	for _, kind := range []string{"records", "feedback"} {
		cons, err := conn.JS.Consumer(ctx, cfg.Consume.Stream, cfg.Consume.Durable+"_"+kind)
		if err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, patience, 5*time.Millisecond, kind+" consumer settled", func() bool {
			info, err := cons.Info(ctx)
			return err == nil && info.NumAckPending == 0 && info.NumPending == 0
		})
	}
	mv := func(kind, outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": kind, "outcome": outcome})
	}
	if mv("records", "rejected") != 1 || mv("records", "retry") != 1 || mv("records", "accepted") != 1 ||
		mv("feedback", "rejected") != 1 || mv("feedback", "accepted") != 1 {
		t.Fatalf("records rejected=%v retry=%v accepted=%v; feedback rejected=%v accepted=%v",
			mv("records", "rejected"), mv("records", "retry"), mv("records", "accepted"), mv("feedback", "rejected"), mv("feedback", "accepted"))
	}
	rej := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason})
	}
	if rej("malformed") != 1 || rej("invalid") != 1 {
		t.Fatalf("malformed=%v invalid=%v", rej("malformed"), rej("invalid"))
	}
	mu.Lock()
	defer mu.Unlock()
	want := []record.Feedback{{TraceID: "f1", Score: -0.25, Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("feedback = %+v", got)
	}
}

func TestShutdownWithoutStartAndRestart(t *testing.T) {
	conn, app, cfg := embedded(t)
	reg := prometheus.NewRegistry()
	im := ingest.NewMetrics(reg)
	sink := &countingSink{counts: map[string]int{}}
	for i := range 2 {
		s, err := New(Settings{NC: conn.NC, Config: cfg, Records: sink, Metrics: im, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		s, err = New(Settings{NC: conn.NC, Config: cfg, Records: sink, Metrics: im, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := app.Publish("ragwatch.records.x", fmt.Appendf(nil, `{"trace_id":"r%d","query":"q"}`, i)); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, patience, 5*time.Millisecond, "the record", func() bool { u, _ := sink.snapshot(); return u == i+1 })
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCoreSubscriptionSurvivesServerRestart stops the external NATS server under a running
// subscriber and starts it again on the same port: ragwatch_nats_connected goes 0 then 1 and
// records flow again without a new subscription.
func TestCoreSubscriptionSurvivesServerRestart(t *testing.T) {
	srv := testutil.RunServer(t)
	port := srv.Addr().(*net.TCPAddr).Port // the restarted server listens here again
	cfg := config.Default().NATS
	cfg.URL = config.SecretURL(srv.ClientURL())
	cfg.ReconnectWait = 10 * time.Millisecond
	cfg.ReconnectMaxWait = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	conn, err := natsconn.Connect(context.Background(), cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sink := &countingSink{counts: map[string]int{}}
	sub, err := New(Settings{NC: conn.NC, Config: cfg, Records: sink, Metrics: ingest.NewMetrics(reg), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Shutdown(context.Background()) }()
	publish := func(id string) {
		t.Helper()
		app, err := nats.Connect(cfg.URL.Reveal())
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		if err := app.Publish("ragwatch.records.x", []byte(`{"trace_id":"`+id+`","query":"q"}`)); err != nil {
			t.Fatal(err)
		}
		if err := app.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	connected := func() float64 { return testutil.Sum(t, reg, "ragwatch_nats_connected", nil) }
	publish("before")
	testutil.Eventually(t, patience, 5*time.Millisecond, "the first record", func() bool { u, _ := sink.snapshot(); return u == 1 })

	srv.Shutdown()
	srv.WaitForShutdown()
	testutil.Eventually(t, patience, 5*time.Millisecond, "ragwatch_nats_connected 0", func() bool { return connected() == 0 })
	testutil.RunServer(t, testutil.Port(port)) // shut down by t.Cleanup
	testutil.Eventually(t, patience, 5*time.Millisecond, "ragwatch_nats_connected 1", func() bool { return connected() == 1 })
	// The client resubscribes right after reconnecting; flush so the server has it.
	if err := conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	publish("after")
	testutil.Eventually(t, patience, 5*time.Millisecond, "the record after the restart", func() bool { u, _ := sink.snapshot(); return u == 2 })
	if got := testutil.Sum(t, reg, "ragwatch_nats_reconnects_total", nil); got != 1 {
		t.Fatalf("reconnects = %v, want 1", got)
	}
}

// OTLP over NATS passes the same span, attribute and size limits as OTLP over gRPC and HTTP,
// with the same reasons: an attribute bomb published on the subject used to reach the assembler.
func TestOTLPLimitsLikeGRPC(t *testing.T) {
	conn, app, cfg := embedded(t)
	reg := prometheus.NewRegistry()
	traces := &tracesSink{}
	sub, err := New(Settings{NC: conn.NC, Config: cfg, Traces: traces, Metrics: ingest.NewMetrics(reg), Registerer: reg,
		OTLPLimits: span.Limits{MaxSpansPerRequest: 2, MaxAttributesPerSpan: 4, MaxAttributeValueBytes: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sub.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	withAttrs := func(n, size int) []byte {
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("bomb")
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{1})
		for i := range n {
			sp.Attributes().PutStr(fmt.Sprintf("a%d", i), strings.Repeat("x", size))
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, m := range [][]byte{
		otlpRequest(t, "0123456789abcdef", "a", "b", "c"), // limits: 3 spans > 2
		withAttrs(5, 1),                                  // limits: 5 attributes > 4
		withAttrs(1, 65),                                 // limits: a 65-byte value > 64
		otlpRequest(t, "", "zero-trace-id"),              // invalid
		otlpRequest(t, "0123456789abcdef", "ok1", "ok2"), // accepted
	} {
		if err := app.Publish("ragwatch.otlp.traces", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Flush(); err != nil {
		t.Fatal(err)
	}
	rej := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason})
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "5 OTLP messages", func() bool {
		return testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "otlp"}) == 5
	})
	if got := rej("limits"); got != 3 {
		t.Errorf("rejected limits = %v, want 3", got)
	}
	if got := rej("invalid"); got != 1 {
		t.Errorf("rejected invalid = %v, want 1", got)
	}
	if got := testutil.Sum(t, reg, "ragwatch_spans_received_total", map[string]string{"receiver": "nats"}); got != 2 {
		t.Errorf("spans received = %v, want 2", got)
	}
	traces.mu.Lock()
	defer traces.mu.Unlock()
	if want := []string{"support-bot/ok1", "support-bot/ok2"}; !slices.Equal(traces.names, want) {
		t.Fatalf("assembler got %q, want %q", traces.names, want)
	}
}

// TestLabelsSubject publishes labels with nats.go into the real join: a label for a record
// seen before goes on alone naming it, one for an unseen record waits, bad messages are
// counted with their reason.
func TestLabelsSubject(t *testing.T) {
	conn, app, cfg := embedded(t)
	reg := prometheus.NewRegistry()
	im := ingest.NewMetrics(reg)
	var mu sync.Mutex
	var late []record.Label
	jn, err := join.New(join.Settings{Retention: time.Hour, Next: record.Discard,
		NextFeedback: record.FeedbackConsumerFunc(func(context.Context, record.Feedback) error { return nil }),
		NextLabel: record.LabelConsumerFunc(func(_ context.Context, l record.Label) error {
			mu.Lock()
			defer mu.Unlock()
			late = append(late, l)
			return nil
		}),
		Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := New(Settings{NC: conn.NC, Config: cfg, Records: jn, Labels: jn, Metrics: im, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Shutdown(context.Background()) }()
	if err := jn.ConsumeRecord(context.Background(), &record.Record{TraceID: "t-seen", Service: "support-bot", Query: "q"}); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{
		`{"trace_id":"t-seen","values":{"faithfulness":0.25},"labeler":"ann"}`,
		`[{"trace_id":"t-later","reference":"gold"}]`,
		`{"trace_id":`, // malformed
		`{"trace_id":"t","values":{"faithfulness":1.5}}`, // invalid
	} {
		if err := app.Publish("ragwatch.labels.review", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, patience, 5*time.Millisecond, "all 4 messages", func() bool {
		return testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "labels"}) == 4
	})
	mv := func(outcome string) float64 {
		return testutil.Sum(t, reg, "ragwatch_nats_messages_total", map[string]string{"kind": "labels", "outcome": outcome})
	}
	rej := func(reason string) float64 {
		return testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": reason})
	}
	if mv("accepted") != 2 || mv("rejected") != 2 || rej("malformed") != 1 || rej("invalid") != 1 {
		t.Fatalf("accepted=%v rejected=%v malformed=%v invalid=%v", mv("accepted"), mv("rejected"), rej("malformed"), rej("invalid"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(late) != 1 || late[0].TraceID != "t-seen" || late[0].Service != "support-bot" || late[0].Values["faithfulness"] != 0.25 || late[0].Labeler != "ann" {
		t.Fatalf("late labels = %+v", late)
	}
	if jn.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", jn.Pending())
	}
}
