package assemble

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
)

// The spans of a RAG turn as @opentelemetry/instrumentation-openai and an app's own retrieval
// span give them: the chat span has the model, usage and finish reasons, and no content.
func otelRoot() sp {
	return sp{id: 1, name: "answer", kind: ptrace.SpanKindServer, end: ms(900)}
}

func otelRetrieval() sp {
	return sp{id: 2, parent: 1, name: "retrieve", start: ms(10), end: ms(50), attrs: map[string]any{
		"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "What is the refund window?",
		"gen_ai.retrieval.documents": `[{"id":"doc-1","score":0.9,"content":"Refunds within 30 days."}]`,
	}}
}

func otelChat() sp {
	return sp{id: 3, parent: 1, name: "chat gpt-4o-mini", kind: ptrace.SpanKindClient, start: ms(60), end: ms(850), attrs: map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 9,
	}}
}

// logEv is one log record: a GenAI event of span spanID of trace trace, or (name "") a plain log line.
type logEv struct {
	trace, spanID byte
	name          string
	body          map[string]any
}

func logsBody(t testing.TB, evs ...logEv) []byte {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "rag-app")
	rs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, e := range evs {
		lr := rs.AppendEmpty()
		lr.SetTraceID(tid(e.trace))
		lr.SetSpanID(sid(e.spanID))
		lr.SetTimestamp(pcommon.NewTimestampFromTime(base))
		if e.name == "" {
			lr.Body().SetStr("plain log line")
			continue
		}
		lr.Attributes().PutStr("event.name", e.name) // the JS instrumentation's way
		lr.Attributes().PutStr("gen_ai.system", "openai")
		if err := lr.Body().SetEmptyMap().FromRaw(e.body); err != nil {
			t.Fatal(err)
		}
	}
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func question(trace byte) logEv {
	return logEv{trace: trace, spanID: 3, name: "gen_ai.user.message", body: map[string]any{"content": "What is the refund window?"}}
}

func choice(trace byte) logEv {
	return logEv{trace: trace, spanID: 3, name: "gen_ai.choice", body: map[string]any{
		"index": 0, "finish_reason": "stop", "message": map[string]any{"content": "Refunds are accepted within 30 days [doc-1]."},
	}}
}

func (h *harness) logsAt(t *testing.T, d time.Duration, evs ...logEv) {
	t.Helper()
	h.clk.set(d)
	if _, err := h.a.ConsumeLogs(context.Background(), logsBody(t, evs...), span.Limits{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) logCount(outcome string) float64 {
	return promtestutil.ToFloat64(h.a.m.logRecords.WithLabelValues(outcome))
}

func TestLogEventsJoinTheirSpan(t *testing.T) {
	turn := []sp{otelRetrieval(), otelChat(), otelRoot()}
	for _, tc := range []struct {
		name    string
		steps   func(h *harness)
		release time.Duration
		late    bool
	}{
		{name: "events before the spans (a log batch is sent first)", release: ms(350), steps: func(h *harness) {
			h.logsAt(t, 0, question(1), logEv{trace: 1, spanID: 3, name: "gen_ai.system.message", body: map[string]any{"content": "ctx"}}, choice(1), logEv{trace: 1, spanID: 3})
			h.consumeAt(t, ms(100), build(t, 1, "rag-app", turn...))
		}},
		{name: "events after the spans: the trace waits for its answer", release: ms(750), steps: func(h *harness) {
			h.logsAt(t, 0, logEv{trace: 9, spanID: 3}) // logs have been seen
			h.logsAt(t, 0, question(9))                // (its trace never comes: orphaned)
			h.consumeAt(t, 0, build(t, 1, "rag-app", turn...))
			h.processAt(t, ms(300)) // complete_wait passed: still held, no answer yet
			h.logsAt(t, ms(500), question(1), choice(1))
		}},
		{name: "events after the record: late", release: 2 * time.Second, late: true, steps: func(h *harness) {
			h.logsAt(t, 0, question(9)) // logs have been seen (its trace never comes)
			h.consumeAt(t, 0, build(t, 1, "rag-app", turn...))
			h.processAt(t, ms(250)) // complete_wait: no output yet, it waits assembly.wait
			h.processAt(t, 2*time.Second)
			h.logsAt(t, ms(2050), question(1), choice(1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultCfg())
			tc.steps(h)
			h.processAt(t, tc.release-time.Nanosecond)
			if !tc.late {
				if recs, _ := h.out.got(); len(recs) != 0 {
					t.Fatalf("released before %v", tc.release)
				}
			}
			h.processAt(t, tc.release)
			recs, _ := h.out.got()
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			r := recs[0]
			if r.Query != "What is the refund window?" || len(r.Documents) != 1 || r.Documents[0].ID != "doc-1" || r.Model != "gpt-4o-mini-2024-07-18" {
				t.Fatalf("record %+v", r)
			}
			if tc.late {
				// The record went by without its answer, marked as awaiting it; the late
				// events' question and answer follow it as content naming the trace and span.
				if r.Answer != "" || !r.AwaitsAnswer || h.logCount("late") != 2 || h.logCount("late_dropped") != 0 || h.logCount("joined") != 0 {
					t.Fatalf("answer %q, awaits %v, late %v, late_dropped %v, joined %v", r.Answer, r.AwaitsAnswer, h.logCount("late"), h.logCount("late_dropped"), h.logCount("joined"))
				}
				// The content will name the chat span: the record says it is its answer's.
				if r.AnswerSpanID != sid(3).String() {
					t.Fatalf("answer span %q, want the chat span %s", r.AnswerSpanID, sid(3))
				}
				want := []record.Content{{TraceID: tid(1).String(), SpanID: sid(3).String(), Service: "rag-app",
					Query: "What is the refund window?", Answer: "Refunds are accepted within 30 days [doc-1]."}}
				if got := h.out.contents(); !reflect.DeepEqual(got, want) {
					t.Fatalf("content %+v, want %+v", got, want)
				}
				return
			}
			if r.AwaitsAnswer || len(h.out.contents()) != 0 {
				t.Fatalf("awaits %v, content %+v", r.AwaitsAnswer, h.out.contents())
			}
			if r.Answer != "Refunds are accepted within 30 days [doc-1]." || len(r.Citations) != 1 || len(r.Citations[0].DocumentIDs) != 1 || r.Citations[0].DocumentIDs[0] != "doc-1" {
				t.Fatalf("answer %q citations %v", r.Answer, r.Citations)
			}
			if h.logCount("joined") != 2 || h.logCount("late") != 0 {
				t.Fatalf("joined %v late %v", h.logCount("joined"), h.logCount("late"))
			}
		})
	}
}

// A log record that is not a GenAI event, and a system message no reader reads, are counted
// and dropped; an event whose span never came is orphaned.
func TestLogRecordsCounted(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.logsAt(t, 0, logEv{trace: 1, spanID: 3}, logEv{trace: 1, spanID: 3, name: "gen_ai.system.message", body: map[string]any{"content": "ctx"}},
		logEv{trace: 1, spanID: 7, name: "gen_ai.choice", body: map[string]any{"message": map[string]any{"content": "a"}}})
	h.consumeAt(t, 0, build(t, 1, "rag-app", otelRetrieval(), otelChat(), otelRoot()))
	if err := h.a.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	for o, want := range map[string]float64{"ignored": 1, "unread": 1, "orphaned": 1, "joined": 0, "late": 0, "no_span": 0} {
		if got := h.logCount(o); got != want {
			t.Errorf("%s = %v, want %v", o, got, want)
		}
	}
}

// A request the decoder refuses takes nothing and answers the *span.Error.
func TestConsumeLogsRefused(t *testing.T) {
	h := newHarness(t, defaultCfg())
	n, err := h.a.ConsumeLogs(context.Background(), []byte{0x0a, 0x05}, span.Limits{}.WithDefaults())
	var rej *span.Error
	if n != 0 || !errors.As(err, &rej) || rej.Reason != ingest.ReasonMalformed || h.a.Held() != 0 {
		t.Fatalf("%d, %v, held %d", n, err, h.a.Held())
	}
}

// A trace of which only events arrived (its spans went elsewhere) is no trace: its events are
// orphaned, and nothing is counted not_rag.
func TestEventsWithoutTheirTrace(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.logsAt(t, 0, question(2), choice(2))
	if h.a.Held() != 1 {
		t.Fatalf("held %d", h.a.Held())
	}
	h.processAt(t, time.Minute) // its timeout
	if recs, _ := h.out.got(); len(recs) != 0 || h.a.Held() != 0 || h.logCount("orphaned") != 2 || h.count("records", OutcomeNotRAG) != 0 {
		t.Fatalf("%d records, held %d, orphaned %v, not_rag %v", len(recs), h.a.Held(), h.logCount("orphaned"), h.count("records", OutcomeNotRAG))
	}
}

// Late events of a span that says more than once (a conversation's messages, in two requests)
// are read together; without a content consumer, or when they say nothing a record takes,
// they are counted late_dropped.
func TestLateEventsContent(t *testing.T) {
	turn := []sp{otelRetrieval(), otelChat(), otelRoot()}
	h := newHarness(t, defaultCfg())
	h.consumeAt(t, 0, build(t, 1, "rag-app", turn...))
	h.consumeAt(t, 0, build(t, 2, "rag-app", turn...))
	h.processAt(t, ms(2500))
	if recs, _ := h.out.got(); len(recs) != 2 || recs[0].AwaitsAnswer || recs[1].AwaitsAnswer {
		t.Fatalf("records %+v (no log event seen yet: nothing awaited)", recs)
	}
	user := func(text string) logEv {
		return logEv{trace: 1, spanID: 3, name: "gen_ai.user.message", body: map[string]any{"content": text}}
	}
	h.logsAt(t, ms(2600), user("Hello"), logEv{trace: 1, spanID: 3, name: "gen_ai.assistant.message", body: map[string]any{"content": "Hi, how can I help?"}})
	h.logsAt(t, ms(2700), user("What is the refund window?"), choice(1),
		logEv{trace: 2, spanID: 3, name: "gen_ai.choice", body: map[string]any{"index": 0, "finish_reason": "stop"}})
	h.processAt(t, ms(2800))
	got := h.out.contents()
	// The last user message is the question; the messages before it are the history
	// (facts.HistoryOf reads message events, as at assembly in time).
	wantHist := []record.Message{{Role: record.RoleUser, Content: "Hello"}, {Role: record.RoleAssistant, Content: "Hi, how can I help?"}}
	if len(got) != 1 || got[0].Query != "What is the refund window?" || got[0].Answer != "Refunds are accepted within 30 days [doc-1]." || !reflect.DeepEqual(got[0].History, wantHist) {
		t.Fatalf("content %+v", got)
	}
	// The choice without content is dropped.
	if late, dropped := h.logCount("late"), h.logCount("late_dropped"); late != 4 || dropped != 1 {
		t.Fatalf("late %v, late_dropped %v", late, dropped)
	}

	noConsumer, err := New(Settings{Config: defaultCfg(), Next: h.out, Registerer: prometheus.NewRegistry(), Now: h.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	h.a = noConsumer
	h.consumeAt(t, 0, build(t, 1, "rag-app", turn...))
	h.processAt(t, ms(2500))
	h.logsAt(t, ms(2600), choice(1))
	h.processAt(t, ms(2700))
	if late, dropped := h.logCount("late"), h.logCount("late_dropped"); late != 0 || dropped != 1 || len(h.out.contents()) != 1 {
		t.Fatalf("without a content consumer: late %v, late_dropped %v", late, dropped)
	}
}

// Events that take the traces held over fastTickBytes wake the worker as spans do: the spans
// that follow find the assembler heavy already and do not, so without it the worker slept out
// its slow tick (a quarter of a second of traffic at full speed) whenever the events crossed.
func TestEventsCrossingFastTickBytesKick(t *testing.T) {
	h := newHarness(t, defaultCfg())
	h.a.fastTickBytes = 1 << 30
	h.logsAt(t, 0, question(1), choice(1))
	if n := len(h.a.kick); n != 0 {
		t.Fatalf("light: %d kicks pending, want 0", n)
	}
	h.a.fastTickBytes = h.a.bytes // at the threshold, not over it
	h.logsAt(t, ms(1), question(2), choice(2))
	if n := len(h.a.kick); n != 1 {
		t.Fatalf("the events crossed the threshold: %d kicks pending, want 1", n)
	}
	<-h.a.kick
	h.logsAt(t, ms(2), question(3), choice(3))
	if n := len(h.a.kick); n != 0 {
		t.Fatalf("already heavy: %d kicks pending, want 0", n)
	}
}
