package service_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestNATSIntakeAndFeedbackJoin drives the running app through its embedded NATS server and
// POST /api/v1/feedback: feedback before its record (HTTP) and after it (NATS) are joined, each
// counted once, and OTLP over NATS reaches the assembler.
func TestNATSIntakeAndFeedbackJoin(t *testing.T) {
	e := startEnv(t, testConfig(t))
	nc, err := nats.Connect(e.app.NATS.ClientURL(), e.app.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	resp, err := http.Post(e.base+"/api/v1/feedback", "application/json",
		strings.NewReader(`{"trace_id":"aaaa0000000000000000000000000001","thumbs":"down","comment":"wrong"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/v1/feedback = %d", resp.StatusCode)
	}

	pub := func(subject, data string) {
		t.Helper()
		if err := nc.Publish(subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	pub("ragwatch.records.support-bot", `[
 {"trace_id":"aaaa0000000000000000000000000001","service":"support-bot","query":"q1","answer":"a1","documents":[{"id":"d1","score":0.8}]},
 {"trace_id":"aaaa0000000000000000000000000002","service":"support-bot","query":"q2","answer":"a2"}]`)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "two records", func() bool { return e.sink.len() == 2 })
	r1 := e.sink.get("aaaa0000000000000000000000000001")
	if r1.Feedback == nil || r1.Feedback.Score != -1 || r1.Feedback.Comment != "wrong" {
		t.Fatalf("early feedback not attached: %+v", r1.Feedback)
	}
	if r2 := e.sink.get("aaaa0000000000000000000000000002"); r2.Feedback != nil {
		t.Fatalf("no feedback yet for the second record: %+v", r2.Feedback)
	}
	pub("ragwatch.feedback.web", `{"trace_id":"aaaa0000000000000000000000000002","score":1}`)

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	for i := range 2 {
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("step")
		sp.SetTraceID(pcommon.TraceID{1, 2, 3})
		sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	pub("ragwatch.otlp.traces", string(body))

	want := map[string]float64{
		`ragwatch_feedback_total{sentiment="negative",service="support-bot"}`: 1,
		`ragwatch_feedback_total{sentiment="positive",service="support-bot"}`: 1,
		`ragwatch_join_total{join="feedback",outcome="joined"}`:               2,
		`ragwatch_join_total{join="feedback",outcome="orphaned"}`:             0,
		`ragwatch_requests_total{service="support-bot"}`:                      2,
		`ragwatch_spans_received_total{receiver="nats"}`:                      2,
		`ragwatch_nats_messages_total{kind="records",outcome="accepted"}`:     1,
		`ragwatch_nats_messages_total{kind="feedback",outcome="accepted"}`:    1,
		`ragwatch_nats_messages_total{kind="otlp",outcome="accepted"}`:        1,
		`ragwatch_nats_connected`:                                             1,
	}
	var got map[string]float64
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the NATS metrics", func() bool {
		got = scrape(t, e.base)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	resp, err = http.Get(e.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz = %d", resp.StatusCode)
	}
}
