package service_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// langchainJSStep is one span as OpenLLMetry's LangChain.js instrumentation
// (@traceloop/instrumentation-langchain 0.27) writes it: a chain step ("workflow <name>", its
// values JSON in traceloop.entity.input/output) or a model call ("chat <model>").
type langchainJSStep struct {
	name     string
	attrs    map[string]any
	from, to time.Duration
}

func langchainJSSteps(question, answer string) []langchainJSStep {
	context := `[{"pageContent":"Refunds are issued within 14 days of purchase.","metadata":{"id":"doc-refund","source":"faq.md"}},` +
		`{"pageContent":"Standard shipping takes 3 to 5 business days.","metadata":{"id":"doc-shipping","source":"faq.md"}}]`
	q := fmt.Sprintf(`{"question":%q}`, question)
	workflow := func(name, in, out string) map[string]any {
		return map[string]any{"gen_ai.operation.name": "workflow", "gen_ai.provider.name": "langchain",
			"traceloop.span.kind": "workflow", "traceloop.workflow.name": name,
			"traceloop.entity.input": in, "traceloop.entity.output": out}
	}
	return []langchainJSStep{
		{"workflow RunnableSequence", workflow("RunnableSequence", q, fmt.Sprintf("%q", answer)), 0, 900 * time.Millisecond},
		{"workflow RunnableMap", workflow("RunnableMap", q, `{"context":`+context+`,"question":`+fmt.Sprintf("%q", question)+`}`), 5 * time.Millisecond, 200 * time.Millisecond},
		{"chat gpt-4o-mini", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
			"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
			"gen_ai.input.messages":      fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":%q}]}]`, question),
			"gen_ai.output.messages":     fmt.Sprintf(`[{"role":"assistant","parts":[{"type":"text","content":%q}],"finish_reason":"stop"}]`, answer),
			"gen_ai.usage.input_tokens":  96,
			"gen_ai.usage.output_tokens": 14}, 215 * time.Millisecond, 880 * time.Millisecond},
		{"workflow StrOutputParser", workflow("StrOutputParser", fmt.Sprintf(`{"input":%q}`, answer), fmt.Sprintf("%q", answer)), 885 * time.Millisecond, 890 * time.Millisecond},
	}
}

// TestLangChainJSThroughOTLP sends, over OTLP/HTTP JSON, five questions as the LangChain.js
// instrumentation exports them — every step a trace of its own — and one whose steps share a
// trace (the app's span around them): the five chat records say their retrieval was not seen
// and stay out of the retrieval signals (no empty retrieval, no documents observed), the sixth
// carries the documents of the RunnableMap's output.
func TestLangChainJSThroughOTLP(t *testing.T) {
	cfg := testConfig(t)
	e := startEnv(t, cfg)
	url := "http://" + e.app.Addrs().OTLPHTTP + "/v1/traces"
	start := time.Now().Add(-time.Second)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "lc-rag")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("@traceloop/instrumentation-langchain")
	next := byte(1)
	add := func(trace pcommon.TraceID, parent pcommon.SpanID, s langchainJSStep) pcommon.SpanID {
		p := ss.Spans().AppendEmpty()
		p.SetTraceID(trace)
		id := pcommon.SpanID{0xc0, 7: next}
		next++
		p.SetSpanID(id)
		p.SetParentSpanID(parent)
		p.SetName(s.name)
		p.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(s.from)))
		p.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(s.to)))
		if err := p.Attributes().FromRaw(s.attrs); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var chatTraces []string
	for q := range 5 {
		for i, s := range langchainJSSteps(fmt.Sprintf("Question %d about refunds?", q), "Within 14 days [1].") {
			trace := pcommon.TraceID{0x1c, 14: byte(q), 15: byte(i)} // each step its own trace, no parent
			add(trace, pcommon.SpanID{}, s)
			if s.name == "chat gpt-4o-mini" {
				chatTraces = append(chatTraces, trace.String())
			}
		}
	}
	together := pcommon.TraceID{0x2c, 15: 1}
	app := add(together, pcommon.SpanID{}, langchainJSStep{"POST /chat", map[string]any{}, 0, 950 * time.Millisecond})
	for _, s := range langchainJSSteps("How long do refunds take?", "Within 14 days [1].") {
		add(together, app, s)
	}
	body, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d %s", resp.StatusCode, reply)
	}
	testutil.Eventually(t, 15*time.Second, 10*time.Millisecond, "six records", func() bool { return e.sink.len() == 6 })
	for _, id := range chatTraces {
		r := e.sink.get(id)
		if r == nil || !r.RetrievalNotSeen || r.Documents != nil || r.Answer != "Within 14 days [1]." {
			t.Errorf("chat trace %s: %s", id, asJSON(t, r))
		}
	}
	r := e.sink.get(together.String())
	if r == nil || r.RetrievalNotSeen || len(r.Documents) != 2 || r.Documents[0].ID != "doc-refund" ||
		len(r.Citations) != 1 || r.Citations[0].DocumentIDs[0] != "doc-refund" {
		t.Fatalf("steps in one trace: %s", asJSON(t, r))
	}

	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "retrieval signals", func() error {
		got := scrape(t, e.base)
		l := `{service="lc-rag"}`
		if n := got["ragwatch_requests_total"+l]; n != 6 {
			return fmt.Errorf("requests %v, want 6", n)
		}
		if n := got["ragwatch_retrievals_not_seen_total"+l]; n != 5 {
			return fmt.Errorf("retrievals not seen %v, want 5", n)
		}
		if n := got["ragwatch_empty_retrievals_total"+l]; n != 0 {
			return fmt.Errorf("empty retrievals %v, want 0: no retrieval seen is not an empty retrieval", n)
		}
		if n, sum := got["ragwatch_retrieved_documents_count"+l], got["ragwatch_retrieved_documents_sum"+l]; n != 1 || sum != 2 {
			return fmt.Errorf("documents histogram count %v sum %v, want the one record with its 2 documents", n, sum)
		}
		if n := got[`ragwatch_records_total{outcome="not_rag"}`]; n != 15 {
			return fmt.Errorf("not_rag %v, want 15 (the steps of the five questions other than their chat)", n)
		}
		return nil
	})
}

// TestLangChainJSRecorded replays what @traceloop/instrumentation-langchain 0.27.0 really
// exported for five questions (testdata/langchainjs, README.md there): 30 spans, each a trace
// of its own. Each chat trace gives a record with its question and answer whose retrieval was
// not seen; the other 25 are not RAG; nothing counts as an empty retrieval.
func TestLangChainJSRecorded(t *testing.T) {
	cfg := testConfig(t)
	e := startEnv(t, cfg)
	body, err := os.ReadFile(filepath.Join("testdata", "langchainjs", "langchainjs-rag.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+e.app.Addrs().OTLPHTTP+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d %s", resp.StatusCode, reply)
	}
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "five records, no empty retrieval", func() error {
		got := scrape(t, e.base)
		l := `{service="lcjs-rag"}`
		if n := got[`ragwatch_records_total{outcome="not_rag"}`]; n != 25 || e.sink.len() != 5 {
			return fmt.Errorf("records %d, not_rag %v; want 5 and 25", e.sink.len(), n)
		}
		if n, ns := got["ragwatch_requests_total"+l], got["ragwatch_retrievals_not_seen_total"+l]; n != 5 || ns != 5 {
			return fmt.Errorf("requests %v, retrievals not seen %v; want 5, 5", n, ns)
		}
		if n, d := got["ragwatch_empty_retrievals_total"+l], got["ragwatch_retrieved_documents_count"+l]; n != 0 || d != 0 {
			return fmt.Errorf("empty retrievals %v, documents observed %v; want 0, 0", n, d)
		}
		return nil
	})
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	for _, r := range e.sink.recs {
		if !r.RetrievalNotSeen || r.Documents != nil || r.Query == "" || !strings.HasSuffix(r.Answer, "[1].") {
			t.Errorf("record %s", asJSON(t, r))
		}
	}
}

// TestLangChainJSRecordedTogether replays the same chain run inside an active span of the
// app's with an AsyncLocalStorageContextManager (testdata/langchainjs, `node rag.mjs
// together`): the steps become the app span's children, one trace per question, and the
// documents of the RunnableMap's output are each record's, its [1] citing the first.
func TestLangChainJSRecordedTogether(t *testing.T) {
	cfg := testConfig(t)
	e := startEnv(t, cfg)
	body, err := os.ReadFile(filepath.Join("testdata", "langchainjs", "langchainjs-together.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+e.app.Addrs().OTLPHTTP+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST = %d %s", resp.StatusCode, reply)
	}
	testutil.CheckFor(t, 15*time.Second, 20*time.Millisecond, "five records with their documents", func() error {
		got := scrape(t, e.base)
		l := `{service="lcjs-rag"}`
		if e.sink.len() != 5 || got["ragwatch_requests_total"+l] != 5 {
			return fmt.Errorf("records %d, requests %v; want 5", e.sink.len(), got["ragwatch_requests_total"+l])
		}
		if n, d, s := got["ragwatch_retrievals_not_seen_total"+l], got["ragwatch_retrieved_documents_count"+l], got["ragwatch_retrieved_documents_sum"+l]; n != 0 || d != 5 || s != 10 {
			return fmt.Errorf("not seen %v, documents observed %v (sum %v); want 0, 5 (10)", n, d, s)
		}
		return nil
	})
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	for _, r := range e.sink.recs {
		if r.RetrievalNotSeen || len(r.Documents) != 2 || r.Documents[0].Content == "" || r.Query == "" ||
			len(r.Citations) != 1 || r.Citations[0].DocumentIDs[0] != r.Documents[0].ID {
			t.Errorf("record %s", asJSON(t, r))
		}
	}
}
