package service_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

const longPrompt = "Answer from the context.\n\nContext:\n[1] Open Settings, then Security.\n[2] Passwords expire yearly."

// family is one instrumentation convention: the spans an app emits and the record ragwatch
// must assemble from them (TraceID filled per send).
type family struct {
	name    string
	service string
	spans   []sp
	want    record.Record
}

var (
	s   = attribute.String
	i64 = attribute.Int64
	f64 = attribute.Float64
)

func families() []family {
	return []family{
		{
			// LangChain through OpenInference: nested CHAIN spans, a retriever with content and
			// metadata, a reranker whose output wins, an LLM with chat messages and an annotation.
			name: "openinference retriever+reranker+llm", service: "oi-app",
			spans: []sp{
				{name: "RunnableSequence", start: 0, end: 900, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "CHAIN"),
					s("input.value", `{"question": "How do I reset my password?", "chat_history": []}`),
					s("input.mime_type", "application/json"),
					s("output.value", "chain output, less specific"),
					s("session.id", "s-1"), s("user.id", "u-9"),
					s("metadata", `{"route": "faq", "tenant": "acme"}`),
					attribute.StringSlice("tag.tags", []string{"prod"}),
					s("annotations.0.annotation.name", "user_feedback"),
					s("annotations.0.annotation.label", "thumbs-up"),
					f64("annotations.0.annotation.score", 0),
					s("annotations.0.annotation.explanation", "solved it"),
					s("annotations.0.annotation.annotator_kind", "HUMAN"),
				}},
				{name: "RunnableParallel<context,question>", parent: 1, start: 2, end: 45, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "CHAIN"),
				}},
				{name: "VectorStoreRetriever", parent: 2, start: 5, end: 40, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "RETRIEVER"),
					s("input.value", "How do I reset my password?"),
					s("retrieval.documents.0.document.content", "Open Settings, then Security."),
					s("retrieval.documents.0.document.metadata", `{"source": "faq.md", "id": "kb-7"}`),
					s("retrieval.documents.1.document.content", "Passwords expire yearly."),
					s("retrieval.documents.1.document.metadata", `{"source": "policy.md"}`),
					s("retrieval.documents.2.document.content", "Unrelated text."),
				}},
				{name: "CohereRerank", parent: 1, start: 45, end: 65, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "RERANKER"),
					s("reranker.query", "reset password"),
					s("reranker.model_name", "rerank-v3"),
					f64("reranker.top_k", 2.0),
					s("reranker.input_documents.0.document.content", "Unrelated text."),
					s("reranker.output_documents.0.document.id", "kb-7"),
					f64("reranker.output_documents.0.document.score", 0.91),
					s("reranker.output_documents.0.document.content", "Open Settings, then Security."),
					s("reranker.output_documents.0.document.metadata", `{"source": "faq.md"}`),
					s("reranker.output_documents.1.document.id", "kb-9"),
					s("reranker.output_documents.1.document.score", "0.42"),
					s("reranker.output_documents.1.document.content", "Passwords expire yearly."),
				}},
				{name: "ChatPromptTemplate", parent: 1, start: 65, end: 66, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "CHAIN"), s("output.value", longPrompt),
				}},
				{name: "ChatOpenAI", parent: 1, start: 70, end: 890, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "LLM"),
					s("llm.model_name", "gpt-4o-mini"),
					s("llm.provider", "openai"),
					i64("llm.token_count.prompt", 412),
					i64("llm.token_count.completion", 27),
					i64("llm.token_count.total", 439),
					s("llm.input_messages.0.message.role", "system"),
					s("llm.input_messages.0.message.content", longPrompt),
					s("llm.input_messages.1.message.role", "user"),
					s("llm.input_messages.1.message.content", "How do I reset my password?"),
					s("llm.output_messages.0.message.role", "assistant"),
					s("llm.output_messages.0.message.contents.0.message_content.type", "text"),
					s("llm.output_messages.0.message.contents.0.message_content.text", "Open Settings, then Security [1]."),
					s("output.value", `{"choices": []}`),
					s("output.mime_type", "application/json"),
				}},
				{name: "StrOutputParser", parent: 1, start: 891, end: 892, attrs: []attribute.KeyValue{
					s("openinference.span.kind", "CHAIN"), s("output.value", "Open Settings, then Security [1]."),
				}},
			},
			want: record.Record{
				Service: "oi-app", SessionID: "s-1", UserID: "u-9", Time: base,
				Query: "How do I reset my password?",
				Documents: []record.Document{
					{ID: "kb-7", Score: fp(0.91), Content: "Open Settings, then Security.", Metadata: map[string]any{"source": "faq.md"}},
					{ID: "kb-9", Score: fp(0.42), Content: "Passwords expire yearly."},
				},
				Answer:     "Open Settings, then Security [1].",
				Citations:  []record.Citation{{Text: "Open Settings, then Security.", DocumentIDs: []string{"kb-7"}}},
				Model:      "gpt-4o-mini",
				Turn:       1,
				Usage:      record.Usage{InputTokens: 412, OutputTokens: 27},
				Latency:    record.Latency{Retrieval: 55, Generation: 820, Total: 900},
				Feedback:   &record.Feedback{Score: 1, Comment: "solved it"},
				Attributes: map[string]string{"route": "faq"},
			},
		},
		{
			// OTel GenAI v1.37+: a retrieval span with JSON documents, a chat span with JSON
			// messages, under an HTTP server span.
			name: "genai v1.37 attributes", service: "refunds",
			spans: []sp{
				{name: "POST /ask", kind: trace.SpanKindServer, start: 0, end: 1000.5, attrs: []attribute.KeyValue{
					s("http.route", "/ask"),
				}},
				{name: "retrieval kb-main", parent: 1, kind: trace.SpanKindClient, start: 10, end: 45.2, attrs: []attribute.KeyValue{
					s("gen_ai.operation.name", "retrieval"),
					s("gen_ai.data_source.id", "kb-main"),
					s("gen_ai.retrieval.query.text", "what is the refund window?"),
					s("gen_ai.retrieval.documents", `[{"id":"doc_123","score":0.95,"content":"Refunds within 30 days."},{"id":"doc_456","score":0.5}]`),
				}},
				{name: "chat gpt-4o", parent: 1, kind: trace.SpanKindClient, start: 50, end: 990, attrs: []attribute.KeyValue{
					s("gen_ai.operation.name", "chat"),
					s("gen_ai.provider.name", "openai"),
					s("gen_ai.request.model", "gpt-4o"),
					s("gen_ai.response.model", "gpt-4o-2024-08-06"),
					i64("gen_ai.usage.input_tokens", 100),
					i64("gen_ai.usage.output_tokens", 20),
					s("gen_ai.conversation.id", "conv-1"),
					s("gen_ai.system_instructions", `[{"type":"text","content":"Be brief."}]`),
					s("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"what is the refund window?"}]}]`),
					s("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"Refunds are accepted within 30 days [doc_123]."}],"finish_reason":"stop"}]`),
					attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
				}},
			},
			want: record.Record{
				Service: "refunds", SessionID: "conv-1", Time: base,
				Query: "what is the refund window?",
				Documents: []record.Document{
					{ID: "doc_123", Score: fp(0.95), Content: "Refunds within 30 days."},
					{ID: "doc_456", Score: fp(0.5)},
				},
				Answer:     "Refunds are accepted within 30 days [doc_123].",
				Citations:  []record.Citation{{Text: "Refunds are accepted within 30 days.", DocumentIDs: []string{"doc_123"}}},
				Model:      "gpt-4o-2024-08-06",
				Turn:       1,
				Usage:      record.Usage{InputTokens: 100, OutputTokens: 20},
				Latency:    record.Latency{Retrieval: 35.2, Generation: 940, Total: 1000.5},
				Attributes: map[string]string{"data_source": "kb-main"},
			},
		},
		{
			// GenAI v1.36 and before: prompt and completion as span events.
			name: "genai legacy events", service: "legacy",
			spans: []sp{
				{name: "answer", start: 0, end: 300},
				{name: "retrieval", parent: 1, start: 5, end: 25, attrs: []attribute.KeyValue{
					s("gen_ai.operation.name", "retrieval"),
					s("gen_ai.retrieval.query.text", "when do stores open?"),
					s("gen_ai.retrieval.documents", `[{"id":"h1","score":0.8,"content":"Stores open at 9."}]`),
				}},
				{name: "chat gpt-3.5-turbo", parent: 1, start: 30, end: 290, attrs: []attribute.KeyValue{
					s("gen_ai.operation.name", "chat"),
					s("gen_ai.system", "openai"),
					s("gen_ai.request.model", "gpt-3.5-turbo"),
					i64("gen_ai.usage.prompt_tokens", 50),
					i64("gen_ai.usage.completion_tokens", 7),
				}, events: []ev{
					{name: "gen_ai.system.message", at: 30, attrs: []attribute.KeyValue{s("content", "You answer from context.")}},
					{name: "gen_ai.user.message", at: 30, attrs: []attribute.KeyValue{s("content", "when do stores open?")}},
					{name: "gen_ai.choice", at: 290, attrs: []attribute.KeyValue{
						i64("index", 0), s("finish_reason", "stop"),
						s("message", `{"role":"assistant","content":"At 9 am [1]."}`),
					}},
				}},
			},
			want: record.Record{
				Service: "legacy", Time: base, Query: "when do stores open?", Turn: 1, // one user message event: a first turn
				Documents: []record.Document{{ID: "h1", Score: fp(0.8), Content: "Stores open at 9."}},
				Answer:    "At 9 am [1].",
				Citations: []record.Citation{{Text: "At 9 am.", DocumentIDs: []string{"h1"}}},
				Model:     "gpt-3.5-turbo",
				Usage:     record.Usage{InputTokens: 50, OutputTokens: 7},
				Latency:   record.Latency{Retrieval: 20, Generation: 260, Total: 300},
			},
		},
		{
			// OpenLLMetry: a traceloop workflow, a Pinecone query with one db.query.result event
			// per hit (metadata a Python dict repr), and gen_ai.prompt.{i} / completion keys.
			name: "openllmetry vector-db events", service: "py-app",
			spans: []sp{
				{name: "rag_pipeline.workflow", start: 0, end: 700, attrs: []attribute.KeyValue{
					s("traceloop.span.kind", "workflow"),
					s("traceloop.workflow.name", "rag_pipeline"),
					s("traceloop.entity.name", "rag_pipeline"),
					s("traceloop.entity.input", `{"args": ["Which plan includes SSO?"], "kwargs": {}}`),
					s("traceloop.entity.output", `"The Enterprise plan."`),
					s("traceloop.association.properties.session_id", "sess-42"),
					s("traceloop.association.properties.user_id", "user-7"),
				}},
				{name: "pinecone.query", parent: 1, kind: trace.SpanKindClient, start: 10, end: 60, attrs: []attribute.KeyValue{
					s("db.system", "pinecone"),
					i64("db.vector.query.top_k", 2),
					i64("db.vector.query.result_count", 2),
					f64("db.vector.query.top_score", 0.88),
				}, events: []ev{
					{name: "db.query.result", at: 60, attrs: []attribute.KeyValue{
						s("db.query.result.id", "plan-ent"),
						f64("db.query.result.score", 0.88),
						s("db.query.result.metadata", "{'text': 'Enterprise includes SSO.', 'page': 3.0, 'tags': ['a', 'b'], 'ok': True, 'none': None}"),
					}},
					{name: "db.query.result", at: 60, attrs: []attribute.KeyValue{
						s("db.query.result.id", "plan-pro"),
						f64("db.query.result.score", 0.51),
						s("db.query.result.metadata", "{'text': 'Pro has no SSO.'}"),
					}},
				}},
				{name: "openai.chat", parent: 1, kind: trace.SpanKindClient, start: 70, end: 690, attrs: []attribute.KeyValue{
					s("llm.request.type", "chat"),
					s("gen_ai.system", "openai"),
					s("gen_ai.request.model", "gpt-4"),
					s("gen_ai.response.model", "gpt-4-0613"),
					s("gen_ai.prompt.0.role", "system"),
					s("gen_ai.prompt.0.content", "Use the context."),
					s("gen_ai.prompt.1.role", "user"),
					s("gen_ai.prompt.1.content", "Which plan includes SSO?"),
					s("gen_ai.completion.0.role", "assistant"),
					s("gen_ai.completion.0.content", "The Enterprise plan [plan-ent]."),
					i64("gen_ai.usage.prompt_tokens", 80),
					i64("gen_ai.usage.completion_tokens", 9),
					i64("llm.usage.total_tokens", 89),
				}},
			},
			want: record.Record{
				Service: "py-app", SessionID: "sess-42", UserID: "user-7", Time: base,
				Query: "Which plan includes SSO?",
				Documents: []record.Document{
					{ID: "plan-ent", Score: fp(0.88), Content: "Enterprise includes SSO.", Metadata: map[string]any{
						"text": "Enterprise includes SSO.", "page": 3.0, "tags": []any{"a", "b"}, "ok": true, "none": nil}},
					{ID: "plan-pro", Score: fp(0.51), Content: "Pro has no SSO.", Metadata: map[string]any{"text": "Pro has no SSO."}},
				},
				Answer:     "The Enterprise plan [plan-ent].",
				Citations:  []record.Citation{{Text: "The Enterprise plan.", DocumentIDs: []string{"plan-ent"}}},
				Model:      "gpt-4-0613",
				Turn:       1,
				Usage:      record.Usage{InputTokens: 80, OutputTokens: 9},
				Latency:    record.Latency{Retrieval: 50, Generation: 620, Total: 700},
				Attributes: map[string]string{"workflow": "rag_pipeline"},
			},
		},
		{
			// ragwatch's own keys on one span, for hand-instrumented apps.
			name: "rag keys", service: "hand-made",
			spans: []sp{
				{name: "handle", start: 0, end: 120, attrs: []attribute.KeyValue{
					s("rag.query", "capital of France?"),
					s("rag.answer", "Paris [1]."),
					s("rag.documents", `[{"id":"d1","score":0.9,"content":"Paris is the capital of France."},{"id":"d2","content":"Lyon."}]`),
					s("rag.citations", `[{"text":"Paris","document_ids":["d1"]}]`),
					s("rag.reference", "Paris"),
					s("rag.relevance", `{"d1": 2, "d2": 0}`),
					s("rag.feedback", `{"score": -1, "comment": "too short"}`),
					s("rag.route", "geo"),
					s("session.id", "s-9"),
				}},
			},
			want: record.Record{
				Service: "hand-made", SessionID: "s-9", Time: base, Query: "capital of France?",
				Documents: []record.Document{
					{ID: "d1", Score: fp(0.9), Content: "Paris is the capital of France."},
					{ID: "d2", Content: "Lyon."},
				},
				Answer:     "Paris [1].",
				Citations:  []record.Citation{{Text: "Paris", DocumentIDs: []string{"d1"}}},
				Latency:    record.Latency{Total: 120},
				Feedback:   &record.Feedback{Score: -1, Comment: "too short"},
				Reference:  "Paris",
				Relevance:  map[string]int{"d1": 2, "d2": 0},
				Attributes: map[string]string{"route": "geo"},
			},
		},
	}
}

// agentTrace is a conversation under one AGENT span holding two retrieve-then-generate turns:
// two records, keyed by trace id and turn span id. The SDK numbers spans 1, 2, ... in the order
// they start, so turn-1 is span 2 and turn-2 span 5.
func agentTrace() ([]sp, []record.Record) {
	spans := []sp{
		{name: "agent", start: 0, end: 3000, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "AGENT"), s("session.id", "conv-5"), s("user.id", "u-1"),
		}},
		{name: "turn-1", parent: 1, start: 0, end: 1000, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "CHAIN"), s("input.value", "first question"),
		}},
		{name: "retrieve", parent: 2, start: 10, end: 30, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "RETRIEVER"),
			s("retrieval.documents.0.document.id", "a1"),
			f64("retrieval.documents.0.document.score", 0.5),
			s("retrieval.documents.0.document.content", "A"),
		}},
		{name: "llm", parent: 2, start: 40, end: 990, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "LLM"), s("llm.model_name", "m"),
			i64("llm.token_count.prompt", 10), i64("llm.token_count.completion", 2),
			s("llm.output_messages.0.message.role", "assistant"),
			s("llm.output_messages.0.message.content", "first answer"),
		}},
		{name: "turn-2", parent: 1, start: 2000, end: 3000, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "CHAIN"), s("input.value", "second question"),
		}},
		{name: "retrieve", parent: 5, start: 2010, end: 2020, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "RETRIEVER"),
			s("retrieval.documents.0.document.id", "b1"),
			s("retrieval.documents.0.document.content", "B"),
		}},
		{name: "llm", parent: 5, start: 2030, end: 2900, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "LLM"), s("llm.model_name", "m"),
			i64("llm.token_count.prompt", 20), i64("llm.token_count.completion", 4),
			s("llm.choices.0.completion.text", "second answer"),
			s("annotations.0.annotation.name", "feedback"),
			f64("annotations.0.annotation.score", -0.5),
		}},
	}
	want := []record.Record{
		{
			SpanID: "0000000000000002", Service: "agent", SessionID: "conv-5", UserID: "u-1", Time: base,
			Query: "first question", Documents: []record.Document{{ID: "a1", Score: fp(0.5), Content: "A"}},
			Answer: "first answer", Model: "m", Usage: record.Usage{InputTokens: 10, OutputTokens: 2},
			Latency: record.Latency{Retrieval: 20, Generation: 950, Total: 1000},
		},
		{
			SpanID: "0000000000000005", Service: "agent", SessionID: "conv-5", UserID: "u-1", Time: at(2000),
			Query: "second question", Documents: []record.Document{{ID: "b1", Content: "B"}},
			Answer: "second answer", Model: "m", Usage: record.Usage{InputTokens: 20, OutputTokens: 4},
			Latency:  record.Latency{Retrieval: 10, Generation: 870, Total: 1000},
			Feedback: &record.Feedback{Score: -0.5},
		},
	}
	return spans, want
}

// notRAGTrace has no retrieval and no generation: counted as not_rag and dropped.
var notRAGTrace = []sp{
	{name: "GET /health", kind: trace.SpanKindServer, start: 0, end: 3},
	{name: "SELECT", parent: 1, kind: trace.SpanKindClient, start: 1, end: 2, attrs: []attribute.KeyValue{
		s("db.system", "postgresql"), s("db.statement", "SELECT 1"),
	}},
}

// traceID is the id of family f sent over protocol p (0 gRPC, 1 HTTP).
func traceID(f, p int) trace.TraceID {
	return trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, byte(0x10 + p), byte(f + 1)}
}

func asJSON(t *testing.T, r *record.Record) string {
	t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEndToEnd sends every convention family with the real OTel SDK exporters over gRPC and
// over HTTP to a running ragwatch, then checks the assembled records field by field and the
// exact signals on /metrics, on a statsd UDP socket and at an OTLP metrics server.
func TestEndToEnd(t *testing.T) {
	cfg := testConfig(t)
	// Each family's session is sent twice, over gRPC and HTTP at once: the session join would
	// number the turns in arrival order. TestJoinInputs covers it.
	cfg.Conversation.SessionTTL = 0
	// Every record may be scored, so assembly keeps every document's text: at the default rate
	// it drops the texts of traces their ids do not sample (TestTextsKeptForWhatMayBeScored).
	cfg.Sampling.Rate = 1
	e := startEnv(t, cfg)
	addrs := e.app.Addrs()
	fams := families()
	protocols := []struct{ name, endpoint, receiver string }{
		{"grpc", addrs.OTLPGRPC, "otlp_grpc"},
		{"http", addrs.OTLPHTTP, "otlp_http"},
	}
	spansPerProtocol := 0
	for _, f := range fams {
		spansPerProtocol += len(f.spans)
	}
	for p, proto := range protocols {
		for fi, f := range fams {
			newSender(t, proto.name, proto.endpoint, f.service).send(t, traceID(fi, p), f.spans)
		}
	}
	// An agent conversation over gRPC and a trace that is not RAG over HTTP.
	agentSpans, agentWant := agentTrace()
	newSender(t, "grpc", addrs.OTLPGRPC, "agent").send(t, traceID(20, 0), agentSpans)
	newSender(t, "http", addrs.OTLPHTTP, "web").send(t, traceID(21, 1), notRAGTrace)
	spansGRPC := spansPerProtocol + len(agentSpans)
	spansHTTP := spansPerProtocol + len(notRAGTrace)
	nRecords := 2*len(fams) + len(agentWant)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "every record", func() bool { return e.sink.len() == nRecords })

	for p, proto := range protocols {
		for fi, f := range fams {
			t.Run(proto.name+"/"+f.name, func(t *testing.T) {
				want := f.want
				want.TraceID = traceID(fi, p).String()
				want.SpanID = rootSpanID // every family's turn is its root span (the sender's first id)
				got := e.sink.get(want.TraceID)
				if got == nil {
					t.Fatalf("no record for trace %s", want.TraceID)
				}
				if g, w := asJSON(t, got), asJSON(t, &want); g != w {
					t.Errorf("record differs\n got %s\nwant %s", g, w)
				}
			})
		}
	}

	for i := range agentWant {
		want := agentWant[i]
		want.TraceID = traceID(20, 0).String()
		got := e.sink.get(want.Key())
		if got == nil {
			t.Fatalf("no record %s", want.Key())
		}
		if g, w := asJSON(t, got), asJSON(t, &want); g != w {
			t.Errorf("agent turn %d differs\n got %s\nwant %s", i+1, g, w)
		}
	}

	// Prometheus, scraped over HTTP: every signal of every service, computed from the expected
	// records with the documented definitions (each family was sent twice).
	want := map[string]float64{
		`ragwatch_spans_received_total{receiver="otlp_grpc"}`: float64(spansGRPC),
		`ragwatch_spans_received_total{receiver="otlp_http"}`: float64(spansHTTP),
		`ragwatch_records_total{outcome="assembled"}`:         float64(nRecords),
		`ragwatch_records_total{outcome="not_rag"}`:           1,
	}
	for _, f := range fams {
		for k, v := range expectedSignals(&f.want) {
			want[k] += 2 * v
		}
	}
	for i := range agentWant {
		for k, v := range expectedSignals(&agentWant[i]) {
			want[k] += v
		}
	}
	var got map[string]float64
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "metrics", func() bool {
		got = scrape(t, e.base)
		// The not-RAG trace is decided on its own timer, after or before the others.
		return got[`ragwatch_records_total{outcome="assembled"}`] == float64(nRecords) &&
			got[`ragwatch_records_total{outcome="not_rag"}`] == 1
	})
	for k, w := range want {
		if g, ok := got[k]; !ok || !near(g, w) {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	for k, v := range got {
		if strings.HasPrefix(k, "ragwatch_empty_retrievals_total") && v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
		if strings.HasPrefix(k, "ragwatch_ingest_rejected_total") && v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}

	// statsd: the lines RAG teams chart, on a real UDP socket (datadog tags by default).
	for _, f := range fams {
		for _, line := range expectedStatsd(&f.want) {
			testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "statsd line "+line, func() bool { return e.statsd.count(line) >= 2 })
			if n := e.statsd.count(line); n != 2 {
				t.Errorf("statsd %q received %d times, want 2\nall lines:\n%s", line, n, e.statsd.dump())
			}
		}
	}

	// OTLP metrics pushed to a real OTLP gRPC metrics server.
	for _, f := range fams {
		key := fmt.Sprintf("ragwatch.requests{service=%s}", f.service)
		testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "OTLP "+key, func() bool { return e.metrics.sum(key) == 2 })
		dur := e.metrics.histogram(fmt.Sprintf("ragwatch.request.duration{service=%s,stage=total}", f.service))
		if dur[0] != 2 || !near(dur[1], 2*f.want.Latency.Total/1000) {
			t.Errorf("OTLP duration total of %s = count %v sum %v", f.service, dur[0], dur[1])
		}
		docs := e.metrics.histogram(fmt.Sprintf("ragwatch.retrieved_documents{service=%s}", f.service))
		if docs[0] != 2 || docs[1] != float64(2*len(f.want.Documents)) {
			t.Errorf("OTLP documents of %s = %v", f.service, docs)
		}
	}
}

// expectedSignals gives the Prometheus samples one record adds, by the metric definitions in
// the README.
func expectedSignals(r *record.Record) map[string]float64 {
	svc := fmt.Sprintf(`{service=%q}`, r.Service)
	out := map[string]float64{
		"ragwatch_requests_total" + svc:            1,
		"ragwatch_retrieved_documents_count" + svc: 1,
		"ragwatch_retrieved_documents_sum" + svc:   float64(len(r.Documents)),
	}
	if top, sum, n := r.ScoreStats(); n > 0 {
		out["ragwatch_retrieval_score_count"+svc] = 1
		out["ragwatch_retrieval_score_sum"+svc] = sum / float64(n)
		out["ragwatch_retrieval_top_score_count"+svc] = 1
		out["ragwatch_retrieval_top_score_sum"+svc] = top
	}
	tokens := float64(r.Usage.OutputTokens)
	if tokens == 0 {
		tokens = float64(len(strings.Fields(r.Answer)))
	}
	out["ragwatch_answer_tokens_count"+svc] = 1
	out["ragwatch_answer_tokens_sum"+svc] = tokens
	out["ragwatch_citations_per_answer_count"+svc] = 1
	out["ragwatch_citations_per_answer_sum"+svc] = float64(len(r.Citations))
	for stage, ms := range map[string]float64{"retrieval": r.Latency.Retrieval, "generation": r.Latency.Generation, "total": r.Latency.Total} {
		if ms == 0 {
			continue
		}
		l := fmt.Sprintf(`{service=%q,stage=%q}`, r.Service, stage)
		out["ragwatch_request_duration_seconds_count"+l] = 1
		out["ragwatch_request_duration_seconds_sum"+l] = ms / 1000
	}
	if r.Feedback != nil {
		out[fmt.Sprintf(`ragwatch_feedback_total{sentiment=%q,service=%q}`, r.Feedback.Sentiment(), r.Service)] = 1
	}
	return out
}

// expectedStatsd gives the statsd lines one record sends.
func expectedStatsd(r *record.Record) []string {
	tag := "|#service:" + r.Service
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	lines := []string{
		"rag.requests:1|c" + tag,
		fmt.Sprintf("rag.retrieved_count:%d|g%s", len(r.Documents), tag),
		fmt.Sprintf("rag.citations:%d|g%s", len(r.Citations), tag),
		"rag.latency.total:" + num(r.Latency.Total) + "|ms" + tag,
	}
	if _, sum, n := r.ScoreStats(); n > 0 {
		lines = append(lines, "rag.avg_relevance:"+num(sum/float64(n))+"|g"+tag)
	}
	// answer_length is the answer's words (the seed's meaning); tokens go out on their own.
	lines = append(lines, fmt.Sprintf("rag.answer_length:%d|g%s", len(strings.Fields(r.Answer)), tag))
	if r.Usage.OutputTokens > 0 {
		lines = append(lines, fmt.Sprintf("rag.answer_tokens:%d|g%s", r.Usage.OutputTokens, tag))
	}
	if r.Feedback != nil {
		if r.Feedback.Score >= 0 {
			lines = append(lines, "rag.user_feedback:"+num(r.Feedback.Score)+"|g"+tag)
		} else {
			lines = append(lines, "rag.user_feedback:0|g"+tag, "rag.user_feedback:"+num(r.Feedback.Score)+"|g"+tag)
		}
	}
	return lines
}
