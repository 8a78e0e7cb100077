package assemble

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sink struct {
	mu       sync.Mutex
	records  []*record.Record
	feedback []record.Feedback
	content  []record.Content
	err      error
}

func (s *sink) ConsumeContent(_ context.Context, c record.Content) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.content = append(s.content, c)
	return nil
}

func (s *sink) contents() []record.Content {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record.Content(nil), s.content...)
}

func (s *sink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r)
	return s.err
}

func (s *sink) ConsumeFeedback(_ context.Context, f record.Feedback) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.feedback = append(s.feedback, f)
	return nil
}

func (s *sink) got() ([]*record.Record, []record.Feedback) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*record.Record(nil), s.records...), append([]record.Feedback(nil), s.feedback...)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = base.Add(d)
	return c.t
}

type harness struct {
	a   *Assembler
	out *sink
	reg *prometheus.Registry
	clk *clock
}

func newHarness(t *testing.T, cfg config.Assembly) *harness {
	t.Helper()
	h := &harness{out: &sink{}, reg: prometheus.NewRegistry(), clk: &clock{t: base}}
	a, err := New(Settings{Config: cfg, Next: h.out, Feedback: h.out, Content: h.out, Registerer: h.reg, Now: h.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	h.a = a
	return h
}

// defaultCfg is the default assembly config (wait 2s, timeout 60s) with small bounds and
// complete_wait 250ms, the tests' timings (the default is 50ms).
func defaultCfg() config.Assembly {
	c := config.Default().Assembly
	c.MaxTraces, c.MaxBytes, c.CompleteWait = 100, 64<<20, 250*time.Millisecond
	return c
}

// consumeAt delivers spans at clock offset d.
func (h *harness) consumeAt(t *testing.T, d time.Duration, td ptrace.Traces) {
	t.Helper()
	h.clk.set(d)
	if err := h.a.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
}

// processAt runs the worker's step at clock offset d.
func (h *harness) processAt(t *testing.T, d time.Duration) {
	t.Helper()
	if err := h.a.process(context.Background(), h.clk.set(d), false); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) count(name, label string) float64 {
	switch name {
	case "records":
		return promtestutil.ToFloat64(h.a.m.records.WithLabelValues(label))
	case "evicted":
		return promtestutil.ToFloat64(h.a.m.evicted.WithLabelValues(label))
	case "late":
		return promtestutil.ToFloat64(h.a.m.late)
	}
	panic(name)
}

// Spans of a small OpenInference turn, by role.
func rootSpan(end time.Duration) sp {
	return sp{id: 1, name: "chain", start: 0, end: end, attrs: map[string]any{"openinference.span.kind": "CHAIN", "input.value": "q"}}
}

func retrieverSpan() sp {
	return sp{id: 2, parent: 1, name: "retriever", start: ms(10), end: ms(50), attrs: map[string]any{
		"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d1", "retrieval.documents.0.document.content": "c",
	}}
}

func llmSpan(start, end time.Duration) sp {
	return sp{id: 3, parent: 1, name: "llm", start: start, end: end, attrs: map[string]any{
		"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "a",
	}}
}

// A complete trace waits complete_wait after its root (TestCompleteWait); with complete_wait
// equal to wait it waits wait, as every trace did before complete_wait existed.
func TestRootPlusWait(t *testing.T) {
	cfg := defaultCfg()
	cfg.CompleteWait = cfg.Wait
	h := newHarness(t, cfg)
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.consumeAt(t, time.Second, build(t, 1, "s", rootSpan(ms(950))))
	h.processAt(t, 3*time.Second-time.Nanosecond)
	if recs, _ := h.out.got(); len(recs) != 0 || h.a.Held() != 1 {
		t.Fatalf("assembled before root+wait: %d records, %d held", len(recs), h.a.Held())
	}
	h.processAt(t, 3*time.Second)
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].Answer != "a" || len(recs[0].Documents) != 1 || recs[0].Query != "q" {
		t.Fatalf("records: %s", js(recs))
	}
	if h.a.Held() != 0 || h.count("records", OutcomeAssembled) != 1 || h.count("records", OutcomePartial) != 0 {
		t.Fatalf("held %d, assembled %v", h.a.Held(), h.count("records", OutcomeAssembled))
	}
	if got := promtestutil.ToFloat64(h.a.m.held); got != 0 {
		t.Fatalf("held gauge %v", got)
	}
}

func TestTimeoutWithoutRoot(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 5*time.Second, build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.processAt(t, 65*time.Second-time.Nanosecond)
	if recs, _ := h.out.got(); len(recs) != 0 {
		t.Fatalf("assembled before the timeout")
	}
	h.processAt(t, 65*time.Second)
	recs, _ := h.out.got()
	want := []*record.Record{{
		TraceID: tidHex(1), SpanID: sidHex(1), Service: "s", Time: base.Add(ms(10)),
		Documents: []record.Document{{ID: "d1", Content: "c"}}, Answer: "a",
		Latency: record.Latency{Retrieval: 40, Generation: 840, Total: 890},
	}}
	sameRecords(t, recs, want)
	if h.count("records", OutcomePartial) != 1 || h.count("records", OutcomeAssembled) != 0 {
		t.Fatalf("outcomes: partial %v assembled %v", h.count("records", OutcomePartial), h.count("records", OutcomeAssembled))
	}
}

// A retriever span ends (and is exported) long before the LLM span: nothing is assembled until
// the root (which ends last) and its wait have passed.
func TestSlowLLMAfterRetriever(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", retrieverSpan()))
	h.processAt(t, 10*time.Second)
	if recs, _ := h.out.got(); len(recs) != 0 {
		t.Fatal("assembled a retrieval alone")
	}
	// The trace is complete with its root: it leaves complete_wait later.
	h.consumeAt(t, 20*time.Second, build(t, 1, "s", llmSpan(ms(60), 20*time.Second), rootSpan(20*time.Second)))
	h.processAt(t, 20250*time.Millisecond-time.Nanosecond)
	if recs, _ := h.out.got(); len(recs) != 0 {
		t.Fatal("assembled before complete_wait")
	}
	h.processAt(t, 20250*time.Millisecond)
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].Answer != "a" || len(recs[0].Documents) != 1 {
		t.Fatalf("records: %s", js(recs))
	}
}

// The local root and the retriever arrive but the generation runs in another process and comes
// later: the trace is held past root+wait until the generation arrives, then complete_wait (its
// parent is held: the trace is complete).
func TestGenerationFromAnotherProcess(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", rootSpan(ms(900)), retrieverSpan()))
	h.processAt(t, 2*time.Second)
	if recs, _ := h.out.got(); len(recs) != 0 || h.a.Held() != 1 {
		t.Fatalf("assembled a turn before its generation could arrive")
	}
	remote := llmSpan(ms(60), ms(890))
	remote.kind = ptrace.SpanKindServer
	remote.remote = true
	h.consumeAt(t, 10*time.Second, build(t, 1, "llm-gateway", remote))
	h.processAt(t, 10250*time.Millisecond-time.Nanosecond)
	if recs, _ := h.out.got(); len(recs) != 0 {
		t.Fatal("assembled before the generation's complete_wait")
	}
	h.processAt(t, 10250*time.Millisecond)
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].Answer != "a" || recs[0].Service != "s" {
		t.Fatalf("records: %s", js(recs))
	}
	if h.count("records", OutcomeAssembled) != 1 {
		t.Fatal("not counted as assembled")
	}

	// With no generation at all, the trace is assembled at its timeout.
	h.consumeAt(t, 100*time.Second, build(t, 2, "s", rootSpan(ms(900)), retrieverSpan()))
	h.processAt(t, 160*time.Second-time.Nanosecond)
	if recs, _ := h.out.got(); len(recs) != 1 {
		t.Fatal("retrieval-only trace assembled before its timeout")
	}
	h.processAt(t, 160*time.Second)
	if recs, _ := h.out.got(); len(recs) != 2 || recs[1].Answer != "" || len(recs[1].Documents) != 1 {
		t.Fatalf("retrieval-only record: %s", js(recs))
	}
}

func TestEvictionAtMaxTraces(t *testing.T) {
	cfg := defaultCfg()
	cfg.MaxTraces = 2
	h := newHarness(t, cfg)
	for i := byte(1); i <= 3; i++ {
		h.consumeAt(t, time.Duration(i)*time.Second, build(t, i, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	}
	if h.a.Held() != 2 || h.count("evicted", EvictMaxTraces) != 1 {
		t.Fatalf("held %d, evicted %v", h.a.Held(), h.count("evicted", EvictMaxTraces))
	}
	h.processAt(t, 3*time.Second) // nothing due yet: only the evicted trace is assembled
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].TraceID != tidHex(1) || h.count("records", OutcomePartial) != 1 {
		t.Fatalf("evicted trace: %s", js(recs))
	}
	// A span of the evicted trace arriving now is late, not a new trace.
	h.consumeAt(t, 4*time.Second, build(t, 1, "s", rootSpan(ms(950))))
	if h.a.Held() != 2 || h.count("late", "") != 1 {
		t.Fatalf("held %d, late %v", h.a.Held(), h.count("late", ""))
	}
}

func TestEvictionAtMaxBytes(t *testing.T) {
	cfg := defaultCfg()
	one := build(t, 1, "s", retrieverSpan(), llmSpan(ms(60), ms(900)))
	var size int64
	for _, s := range span.FromTraces(one, nil, nil) {
		size += spanSize(&s)
	}
	size += traceOverhead(make([]span.Span, 2)) // the trace itself, its 2 spans filed at once
	cfg.MaxBytes = 2*size + size/2
	h := newHarness(t, cfg)
	for i := byte(1); i <= 3; i++ {
		h.consumeAt(t, time.Duration(i)*time.Second, build(t, i, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	}
	if h.a.Held() != 2 || h.count("evicted", EvictMaxBytes) != 1 {
		t.Fatalf("held %d, evicted %v", h.a.Held(), h.count("evicted", EvictMaxBytes))
	}
	if got := promtestutil.ToFloat64(h.a.m.heldBytes); got != float64(2*size) {
		t.Fatalf("held bytes %v, want %v", got, 2*size)
	}
}

func TestShutdownFlushesWithoutStart(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.consumeAt(t, 0, build(t, 2, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.consumeAt(t, 0, build(t, 3, "s", sp{id: 1, name: "GET /", kind: ptrace.SpanKindServer, end: ms(1)}))
	if err := h.a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, _ := h.out.got()
	if len(recs) != 2 || h.a.Held() != 0 {
		t.Fatalf("records %d, held %d", len(recs), h.a.Held())
	}
	if h.count("records", OutcomeAssembled) != 1 || h.count("records", OutcomePartial) != 1 || h.count("records", OutcomeNotRAG) != 1 {
		t.Fatalf("outcomes %v %v %v", h.count("records", OutcomeAssembled), h.count("records", OutcomePartial), h.count("records", OutcomeNotRAG))
	}
	if err := h.a.Shutdown(context.Background()); err != nil {
		t.Fatal("second shutdown:", err)
	}
	if recs, _ := h.out.got(); len(recs) != 2 {
		t.Fatal("second shutdown delivered again")
	}
}

func TestLateFeedbackIsForwarded(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.processAt(t, 2*time.Second)
	h.consumeAt(t, 30*time.Second, build(t, 1, "s", sp{id: 9, parent: 1, name: "feedback", start: 30 * time.Second, end: 30 * time.Second, attrs: map[string]any{
		"rag.feedback": "thumbs_down",
	}}))
	h.processAt(t, 30*time.Second)
	_, fbs := h.out.got()
	want := []record.Feedback{{TraceID: tidHex(1), Service: "s", Score: -1, Time: base.Add(30 * time.Second)}}
	if len(fbs) != 1 || fbs[0].TraceID != want[0].TraceID || fbs[0].Service != "s" || !fbs[0].Time.Equal(want[0].Time) || fbs[0].Score != -1 {
		t.Fatalf("feedback: %s", js(fbs))
	}
	if h.count("late", "") != 1 || h.count("records", OutcomeFeedback) != 1 {
		t.Fatalf("late %v feedback %v", h.count("late", ""), h.count("records", OutcomeFeedback))
	}
}

func TestConsumerErrorsAreCounted(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.out.err = errors.New("downstream full")
	h.consumeAt(t, 0, build(t, 1, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))))
	if err := h.a.Shutdown(context.Background()); err == nil {
		t.Fatal("Shutdown hid the consumer error")
	}
	if got := promtestutil.ToFloat64(h.a.m.deliveryErrors.WithLabelValues("records")); got != 1 {
		t.Fatalf("delivery errors %v", got)
	}
}

// The background worker assembles on its own; Start→Shutdown→Start works and leaks nothing.
func TestWorkerLifecycle(t *testing.T) {
	cfg := defaultCfg()
	cfg.Wait, cfg.CompleteWait = 0, 0
	out := &sink{}
	a, err := New(Settings{Config: cfg, Next: out, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal("second Start:", err)
		}
		if err := a.ConsumeTraces(ctx, build(t, byte(round), "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900)))); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, fmt.Sprintf("round %d: the worker to assemble", round), func() bool {
			recs, _ := out.got()
			return len(recs) == round
		})
		if err := a.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	if _, err := New(Settings{Config: defaultCfg()}); err == nil || err.Error() != "assemble: Next consumer is required" {
		t.Fatalf("err = %v", err)
	}
	bad := defaultCfg()
	bad.MaxTraces = 0
	if _, err := New(Settings{Config: bad, Next: record.Discard}); err == nil {
		t.Fatal("accepted max_traces 0")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(Settings{Config: defaultCfg(), Next: record.Discard, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Settings{Config: defaultCfg(), Next: record.Discard, Registerer: reg}); err == nil {
		t.Fatal("registered the metrics twice without error")
	}
}

// A shared collector: an LLM gateway's SERVER span (remote parent: the app's LLM span) is
// exported before the calling application's batch. It is a local root, but a generation with no
// retrieval under remote-parent roots only is held until the application's spans come.
func TestGatewaySpanBeforeApplication(t *testing.T) {
	h := newHarness(t, defaultCfg())
	gw := sp{id: 8, parent: 3, name: "chat gpt-4o", kind: ptrace.SpanKindServer, remote: true, start: ms(70), end: ms(880), attrs: map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 5,
		"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"from the gateway"}]}]`,
	}}
	h.consumeAt(t, 0, build(t, 1, "llm-gateway", gw))
	h.processAt(t, 2*time.Second)
	if recs, _ := h.out.got(); len(recs) != 0 || h.a.Held() != 1 {
		t.Fatalf("assembled the gateway span alone: %s", js(recs))
	}
	h.consumeAt(t, 5*time.Second, build(t, 1, "app", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900))))
	h.processAt(t, 7*time.Second)
	recs, _ := h.out.got()
	want := []*record.Record{{
		TraceID: tidHex(1), SpanID: sidHex(1), Service: "app", Time: base, Query: "q",
		Documents: []record.Document{{ID: "d1", Content: "c"}}, Answer: "from the gateway", Model: "gpt-4o",
		Usage:   record.Usage{InputTokens: 30, OutputTokens: 5},
		Latency: record.Latency{Retrieval: 40, Generation: 840, Total: 950},
	}}
	sameRecords(t, recs, want)
	if h.count("late", "") != 0 || h.count("records", OutcomeAssembled) != 1 {
		t.Fatalf("late %v assembled %v", h.count("late", ""), h.count("records", OutcomeAssembled))
	}
}

// A trace reaching 10000 spans is assembled at once; its further spans are late. A deep chain
// of spans (hostile or not) stays fast: ancestry uses DFS numbering in large trees.
func TestHugeDeepTrace(t *testing.T) {
	h := newHarness(t, defaultCfg())
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "deep")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := 1; i <= maxSpansPerTrace+1; i++ {
		s := spans.AppendEmpty()
		s.SetTraceID(tid(1))
		s.SetSpanID(pcommon.SpanID{0xb0, byte(i >> 16), byte(i >> 8), byte(i)})
		if i > 1 {
			s.SetParentSpanID(pcommon.SpanID{0xb0, byte((i - 1) >> 16), byte((i - 1) >> 8), byte(i - 1)})
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(i) * time.Microsecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Second)))
		switch i {
		case 5000:
			s.Attributes().PutStr("openinference.span.kind", "RETRIEVER")
			s.Attributes().PutStr("retrieval.documents.0.document.id", "deep-doc")
		case 9999:
			s.Attributes().PutStr("openinference.span.kind", "LLM")
			s.Attributes().PutStr("llm.output_messages.0.message.content", "deep answer")
		}
	}
	h.consumeAt(t, 0, td)
	if h.a.Held() != 0 || h.count("evicted", EvictMaxSpans) != 1 || h.count("late", "") != 1 {
		t.Fatalf("held %d, evicted %v, late %v", h.a.Held(), h.count("evicted", EvictMaxSpans), h.count("late", ""))
	}
	h.processAt(t, 0)
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].Answer != "deep answer" || len(recs[0].Documents) != 1 || recs[0].SpanID != "b000138800000000" {
		t.Fatalf("records: %s", js(recs))
	}
}

// ConsumeTraces copies what it keeps: the caller may reuse and change td at once.
func TestConsumeTracesCopies(t *testing.T) {
	h := newHarness(t, defaultCfg())
	td := build(t, 1, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900)))
	h.consumeAt(t, 0, td)
	ss := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < ss.Len(); i++ {
		attrs := ss.At(i).Attributes()
		attrs.PutStr("input.value", "overwritten")
		attrs.PutStr("retrieval.documents.0.document.id", "overwritten")
		attrs.PutStr("llm.output_messages.0.message.content", "overwritten")
	}
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "overwritten")
	if err := h.a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, _ := h.out.got()
	if len(recs) != 1 || recs[0].Query != "q" || recs[0].Documents[0].ID != "d1" || recs[0].Answer != "a" || recs[0].Service != "s" {
		t.Fatalf("records: %s", js(recs))
	}
}

// Many receivers feed the assembler at once while its worker runs (run with -race).
func TestConcurrentConsume(t *testing.T) {
	cfg := defaultCfg()
	cfg.Wait, cfg.CompleteWait = 0, 0
	out := &sink{}
	a, err := New(Settings{Config: cfg, Next: out, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id := byte(g*50 + i + 1)
				// Children first, root in a second request, as exporters send them.
				_ = a.ConsumeTraces(ctx, build(t, id, "s", retrieverSpan(), llmSpan(ms(60), ms(900))))
				_ = a.ConsumeTraces(ctx, build(t, id, "s", rootSpan(ms(950))))
				_ = a.Held()
			}
		}()
	}
	wg.Wait()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := out.got()
	late := promtestutil.ToFloat64(a.m.late)
	// A trace assembled between its two requests (wait is 0) sees its root as late; every
	// trace gives exactly one record either way.
	if len(recs) != 200 || a.Held() != 0 {
		t.Fatalf("%d records (late spans %v), %d held", len(recs), late, a.Held())
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.TraceID] {
			t.Fatalf("trace %s assembled twice", r.TraceID)
		}
		seen[r.TraceID] = true
	}
}

// handoffSink is a sink that takes records handed over.
type handoffSink struct {
	sink
	handed int
}

func (s *handoffSink) ConsumeHandoff(ctx context.Context, r *record.Record) error {
	s.mu.Lock()
	s.handed++
	s.mu.Unlock()
	return s.ConsumeRecord(ctx, r)
}

// TestRecordsAreHandedOver: a consumer that takes handoffs (the join) gets each record through
// ConsumeHandoff, the assembler's own to give up; a plain consumer through ConsumeRecord.
func TestRecordsAreHandedOver(t *testing.T) {
	out := &handoffSink{}
	a, err := New(Settings{Config: defaultCfg(), Next: out, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for id := byte(1); id <= 3; id++ {
		if err := a.ConsumeTraces(ctx, build(t, id, "s", rootSpan(ms(950)), retrieverSpan(), llmSpan(ms(60), ms(900)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, _ := out.got(); len(recs) != 3 || out.handed != 3 {
		t.Fatalf("%d records, %d of them handed over; want 3 and 3", len(recs), out.handed)
	}
}
