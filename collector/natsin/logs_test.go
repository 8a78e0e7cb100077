package natsin

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

type recordSink struct {
	mu   sync.Mutex
	recs []*record.Record
}

func (s *recordSink) ConsumeRecord(_ context.Context, r *record.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
	return nil
}

// TestOTLPLogsSubject: an app publishes its spans on the traces subject and its GenAI events
// on nats.subjects.otlp_logs (as the publish-only app user); the assembler joins them into a
// record with its answer. Bad log messages are counted with their reason and dropped.
func TestOTLPLogsSubject(t *testing.T) {
	conn, app, cfg := embedded(t)
	reg := prometheus.NewRegistry()
	out := &recordSink{}
	asmCfg := config.Default().Assembly
	asmCfg.MaxTraces, asmCfg.MaxBytes = 100, 64<<20
	asm, err := assemble.New(assemble.Settings{Config: asmCfg, Next: out, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := New(Settings{NC: conn.NC, Config: cfg, Traces: asm, Logs: asm, Metrics: ingest.NewMetrics(reg), Registerer: reg,
		OTLPLimits: span.Limits{MaxSpansPerRequest: 3}})
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
	tid := pcommon.TraceID{0xab, 15: 1}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	root := spans.AppendEmpty()
	root.SetTraceID(tid)
	root.SetSpanID(pcommon.SpanID{1})
	root.SetName("POST /ask")
	ret := spans.AppendEmpty()
	ret.SetTraceID(tid)
	ret.SetSpanID(pcommon.SpanID{2})
	ret.SetParentSpanID(pcommon.SpanID{1})
	ret.Attributes().PutStr("gen_ai.operation.name", "retrieval")
	ret.Attributes().PutStr("gen_ai.retrieval.documents", `[{"id":"d1","content":"Refunds within 30 days."}]`)
	chat := spans.AppendEmpty()
	chat.SetTraceID(tid)
	chat.SetSpanID(pcommon.SpanID{3})
	chat.SetParentSpanID(pcommon.SpanID{1})
	chat.Attributes().PutStr("gen_ai.operation.name", "chat")
	traces, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	logs := func(n int) []byte {
		ld := plog.NewLogs()
		recs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for i := range n {
			lr := recs.AppendEmpty()
			lr.SetTraceID(tid)
			lr.SetSpanID(pcommon.SpanID{3})
			if i == 0 {
				lr.SetEventName("gen_ai.user.message")
				lr.Body().SetEmptyMap().PutStr("content", "What is the refund window?")
			} else {
				lr.SetEventName("gen_ai.choice")
				lr.Body().SetEmptyMap().PutEmptyMap("message").PutStr("content", "30 days [d1].")
			}
		}
		b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for subject, data := range map[string][]byte{"ragwatch.otlp.logs": logs(2), "ragwatch.otlp.traces": traces} {
		if err := app.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Publish("ragwatch.otlp.logs", []byte("\x0a\xff\xff")); err != nil { // truncated
		t.Fatal(err)
	}
	if err := app.Publish("ragwatch.otlp.logs", logs(4)); err != nil { // over max_spans_per_request
		t.Fatal(err)
	}
	if err := app.Flush(); err != nil {
		t.Fatal(err)
	}
	count := func(name string, labels map[string]string) float64 { return testutil.Sum(t, reg, name, labels) }
	testutil.Eventually(t, patience, 5*time.Millisecond, "four messages", func() bool {
		return count("ragwatch_nats_messages_total", map[string]string{"kind": KindOTLPLogs})+count("ragwatch_nats_messages_total", map[string]string{"kind": KindOTLP}) == 4
	})
	for name, c := range map[string]struct {
		got, want float64
	}{
		"accepted logs":      {count("ragwatch_nats_messages_total", map[string]string{"kind": KindOTLPLogs, "outcome": OutcomeAccepted}), 1},
		"rejected logs":      {count("ragwatch_nats_messages_total", map[string]string{"kind": KindOTLPLogs, "outcome": OutcomeRejected}), 2},
		"log records":        {count("ragwatch_log_records_received_total", map[string]string{"receiver": "nats"}), 2},
		"rejected malformed": {count("ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": ingest.ReasonMalformed}), 1},
		"rejected limits":    {count("ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": ingest.ReasonLimits}), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if err := asm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.recs) != 1 || out.recs[0].Query != "What is the refund window?" || out.recs[0].Answer != "30 days [d1]." || len(out.recs[0].Documents) != 1 {
		t.Fatalf("records %+v", out.recs)
	}
}
