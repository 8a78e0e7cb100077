package assemble

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/internal/record"
)

const longPrompt = "Answer from the context.\n\nContext:\n[1] Open Settings, then Security.\n[2] Passwords expire yearly."

// TestConventions builds one trace per convention family by hand and asserts the assembled
// records field by field.
func TestConventions(t *testing.T) {
	tests := []struct {
		name   string
		td     func(t *testing.T) ptrace.Traces
		want   []*record.Record
		notRAG bool
	}{
		{
			// LangChain through OpenInference: 7 nested spans around one turn, a retriever with
			// content+metadata only, a reranker whose output wins, an LLM with chat messages.
			name: "openinference langchain with reranker",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 1, "support-bot",
					sp{id: 1, name: "RunnableSequence", start: 0, end: ms(900), attrs: map[string]any{
						"openinference.span.kind":                 "CHAIN",
						"input.value":                             `{"question": "How do I reset my password?", "chat_history": []}`,
						"input.mime_type":                         "application/json",
						"output.value":                            "chain output, less specific",
						"session.id":                              "s-1",
						"user.id":                                 "u-9",
						"metadata":                                `{"route": "faq", "tenant": "acme"}`,
						"tag.tags":                                []any{"prod"},
						"annotations.0.annotation.name":           "user_feedback",
						"annotations.0.annotation.label":          "thumbs-up",
						"annotations.0.annotation.score":          0.0,
						"annotations.0.annotation.explanation":    "solved it",
						"annotations.0.annotation.annotator_kind": "HUMAN",
						"annotations.1.annotation.name":           "hallucination",
						"annotations.1.annotation.label":          "hallucinated",
						"annotations.1.annotation.annotator_kind": "LLM",
					}},
					sp{id: 2, parent: 1, name: "RunnableParallel<context,question>", start: ms(2), end: ms(45), attrs: map[string]any{
						"openinference.span.kind": "CHAIN",
					}},
					sp{id: 3, parent: 2, name: "VectorStoreRetriever", start: ms(5), end: ms(40), attrs: map[string]any{
						"openinference.span.kind":                 "RETRIEVER",
						"input.value":                             "How do I reset my password?",
						"retrieval.documents.0.document.content":  "Open Settings, then Security.",
						"retrieval.documents.0.document.metadata": `{"source": "faq.md", "id": "kb-7"}`,
						"retrieval.documents.1.document.content":  "Passwords expire yearly.",
						"retrieval.documents.1.document.metadata": `{"source": "policy.md"}`,
						"retrieval.documents.2.document.content":  "Unrelated text.",
					}},
					sp{id: 4, parent: 1, name: "CohereRerank", start: ms(45), end: ms(65), attrs: map[string]any{
						"openinference.span.kind":                       "reranker",
						"reranker.query":                                "reset password",
						"reranker.model_name":                           "rerank-v3",
						"reranker.top_k":                                2.0,
						"reranker.input_documents.0.document.content":   "Unrelated text.",
						"reranker.output_documents.0.document.id":       "kb-7",
						"reranker.output_documents.0.document.score":    0.91,
						"reranker.output_documents.0.document.content":  "Open Settings, then Security.",
						"reranker.output_documents.0.document.metadata": `{"source": "faq.md"}`,
						"reranker.output_documents.1.document.score":    "0.42",
						"reranker.output_documents.1.document.content":  "Passwords expire yearly.",
					}},
					sp{id: 5, parent: 1, name: "ChatPromptTemplate", start: ms(65), end: ms(66), attrs: map[string]any{
						"openinference.span.kind": "CHAIN", "output.value": longPrompt,
					}},
					sp{id: 6, parent: 1, name: "ChatOpenAI", start: ms(70), end: ms(890), attrs: map[string]any{
						"openinference.span.kind":                                       "LLM",
						"llm.model_name":                                                "gpt-4o-mini",
						"llm.provider":                                                  "openai",
						"llm.token_count.prompt":                                        412,
						"llm.token_count.completion":                                    27,
						"llm.token_count.total":                                         439,
						"llm.input_messages.0.message.role":                             "system",
						"llm.input_messages.0.message.content":                          longPrompt,
						"llm.input_messages.1.message.role":                             "user",
						"llm.input_messages.1.message.content":                          "How do I reset my password?",
						"llm.output_messages.0.message.role":                            "assistant",
						"llm.output_messages.0.message.contents.0.message_content.type": "text",
						"llm.output_messages.0.message.contents.0.message_content.text": "Open Settings, then Security [1].",
						"output.value":                                                  `{"choices": []}`,
						"output.mime_type":                                              "application/json",
					}},
					sp{id: 7, parent: 1, name: "StrOutputParser", start: ms(891), end: ms(892), attrs: map[string]any{
						"openinference.span.kind": "CHAIN", "output.value": "Open Settings, then Security [1].",
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(1), SpanID: sidHex(1), Service: "support-bot", SessionID: "s-1", UserID: "u-9", Time: base,
				Query: "How do I reset my password?",
				Documents: []record.Document{
					{ID: "kb-7", Score: fp(0.91), Content: "Open Settings, then Security.", Metadata: map[string]any{"source": "faq.md"}},
					{ID: contentID("Passwords expire yearly."), Score: fp(0.42), Content: "Passwords expire yearly."},
				},
				Answer:     "Open Settings, then Security [1].",
				Citations:  []record.Citation{{Text: "Open Settings, then Security.", DocumentIDs: []string{"kb-7"}}},
				Model:      "gpt-4o-mini",
				Usage:      record.Usage{InputTokens: 412, OutputTokens: 27},
				Latency:    record.Latency{Retrieval: 55, Generation: 820, Total: 900},
				Feedback:   &record.Feedback{Score: 1, Comment: "solved it"},
				Attributes: map[string]string{"route": "faq"},
			}},
		},
		{
			// OTel GenAI v1.37+: retrieval span with JSON documents, chat span with JSON messages.
			name: "genai v1.37 json messages",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 2, "refunds",
					sp{id: 1, name: "POST /ask", kind: ptrace.SpanKindServer, start: 0, end: ms(1000.5), attrs: map[string]any{
						"http.route": "/ask",
					}},
					sp{id: 2, parent: 1, name: "retrieval kb-main", kind: ptrace.SpanKindClient, start: ms(10), end: ms(45.2), attrs: map[string]any{
						"gen_ai.operation.name":       "retrieval",
						"gen_ai.data_source.id":       "kb-main",
						"gen_ai.retrieval.query.text": "what is the refund window?",
						"gen_ai.retrieval.documents":  `[{"id":"doc_123","score":0.95,"content":"Refunds within 30 days."},{"id":"doc_456","score":0.5}]`,
					}},
					sp{id: 3, parent: 1, name: "chat gpt-4o", kind: ptrace.SpanKindClient, start: ms(50), end: ms(990), attrs: map[string]any{
						"gen_ai.operation.name":          "chat",
						"gen_ai.provider.name":           "openai",
						"gen_ai.request.model":           "gpt-4o",
						"gen_ai.response.model":          "gpt-4o-2024-08-06",
						"gen_ai.response.id":             "chatcmpl-v137",
						"gen_ai.usage.input_tokens":      100,
						"gen_ai.usage.output_tokens":     20,
						"gen_ai.conversation.id":         "conv-1",
						"gen_ai.system_instructions":     `[{"type":"text","content":"Be brief."}]`,
						"gen_ai.input.messages":          `[{"role":"user","parts":[{"type":"text","content":"what is the refund window?"}]}]`,
						"gen_ai.output.messages":         `[{"role":"assistant","parts":[{"type":"text","content":"Refunds are accepted within 30 days [doc_123]."}],"finish_reason":"stop"}]`,
						"gen_ai.response.finish_reasons": []any{"stop"},
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(2), SpanID: sidHex(1), ResponseID: "chatcmpl-v137", Service: "refunds", SessionID: "conv-1", Time: base,
				Query: "what is the refund window?",
				Documents: []record.Document{
					{ID: "doc_123", Score: fp(0.95), Content: "Refunds within 30 days."},
					{ID: "doc_456", Score: fp(0.5)},
				},
				Answer:     "Refunds are accepted within 30 days [doc_123].",
				Citations:  []record.Citation{{Text: "Refunds are accepted within 30 days.", DocumentIDs: []string{"doc_123"}}},
				Model:      "gpt-4o-2024-08-06",
				Usage:      record.Usage{InputTokens: 100, OutputTokens: 20},
				Latency:    record.Latency{Retrieval: 35.2, Generation: 940, Total: 1000.5},
				Attributes: map[string]string{"data_source": "kb-main"},
			}},
		},
		{
			// GenAI v1.37 with structured values: documents as an array attribute, messages as
			// attributes of the gen_ai.client.inference.operation.details event.
			name: "genai structured values and operation details event",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 3, "svc",
					sp{id: 1, name: "invoke_agent helper", start: 0, end: ms(500), attrs: map[string]any{
						"gen_ai.operation.name": "invoke_agent",
					}},
					sp{id: 2, parent: 1, name: "retrieval", start: ms(1), end: ms(11), attrs: map[string]any{
						"gen_ai.operation.name":       "retrieval",
						"gen_ai.retrieval.query.text": "q?",
						"gen_ai.retrieval.documents": []any{
							map[string]any{"id": "a", "score": 0.7, "content": "alpha"},
							map[string]any{"id": "b", "score": 1},
						},
					}},
					sp{id: 3, parent: 1, name: "chat m", start: ms(12), end: ms(412), attrs: map[string]any{
						"gen_ai.operation.name": "chat",
						"gen_ai.request.model":  "m-1",
					}, events: []ev{{name: "gen_ai.client.inference.operation.details", at: ms(412), attrs: map[string]any{
						"gen_ai.input.messages": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "q?"}}}},
						"gen_ai.output.messages": []any{map[string]any{"role": "assistant", "parts": []any{
							map[string]any{"type": "reasoning", "content": "thinking"},
							map[string]any{"type": "text", "content": "Alpha."},
						}}},
					}}}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(3), SpanID: sidHex(1), Service: "svc", Time: base, Query: "q?",
				Documents: []record.Document{{ID: "a", Score: fp(0.7), Content: "alpha"}, {ID: "b", Score: fp(1)}},
				Answer:    "Alpha.", Model: "m-1",
				Latency: record.Latency{Retrieval: 10, Generation: 400, Total: 500},
			}},
		},
		{
			// GenAI v1.36 and before: prompt and completion as span events.
			name: "genai legacy events",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 4, "legacy",
					sp{id: 1, name: "answer", start: 0, end: ms(300), attrs: map[string]any{}},
					sp{id: 2, parent: 1, name: "retrieval", start: ms(5), end: ms(25), attrs: map[string]any{
						"gen_ai.operation.name":       "retrieval",
						"gen_ai.retrieval.query.text": "when do stores open?",
						"gen_ai.retrieval.documents":  `[{"id":"h1","score":0.8,"content":"Stores open at 9."}]`,
					}},
					sp{id: 3, parent: 1, name: "chat gpt-3.5-turbo", start: ms(30), end: ms(290), attrs: map[string]any{
						"gen_ai.operation.name":          "chat",
						"gen_ai.system":                  "openai",
						"gen_ai.request.model":           "gpt-3.5-turbo",
						"gen_ai.usage.prompt_tokens":     50,
						"gen_ai.usage.completion_tokens": 7,
					}, events: []ev{
						{name: "gen_ai.system.message", at: ms(30), attrs: map[string]any{"content": "You answer from context."}},
						{name: "gen_ai.user.message", at: ms(30), attrs: map[string]any{"content": "when do stores open?"}},
						{name: "gen_ai.choice", at: ms(290), attrs: map[string]any{
							"index": 0, "finish_reason": "stop",
							"message": `{"role":"assistant","content":"At 9 am [1]."}`,
						}},
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(4), SpanID: sidHex(1), Service: "legacy", Time: base, Query: "when do stores open?",
				Documents: []record.Document{{ID: "h1", Score: fp(0.8), Content: "Stores open at 9."}},
				Answer:    "At 9 am [1].",
				Citations: []record.Citation{{Text: "At 9 am.", DocumentIDs: []string{"h1"}}},
				Model:     "gpt-3.5-turbo",
				Usage:     record.Usage{InputTokens: 50, OutputTokens: 7},
				Latency:   record.Latency{Retrieval: 20, Generation: 260, Total: 300},
			}},
		},
		{
			// OpenLLMetry: a traceloop workflow, a Pinecone query with one db.query.result event
			// per hit (metadata is a Python dict repr), and the oldest gen_ai.prompt.{i} keys.
			name: "openllmetry pinecone events and gen_ai.prompt.N",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 5, "py-app",
					sp{id: 1, name: "rag_pipeline.workflow", start: 0, end: ms(700), attrs: map[string]any{
						"traceloop.span.kind":                         "workflow",
						"traceloop.workflow.name":                     "rag_pipeline",
						"traceloop.entity.name":                       "rag_pipeline",
						"traceloop.entity.input":                      `{"args": ["Which plan includes SSO?"], "kwargs": {}}`,
						"traceloop.entity.output":                     `"The Enterprise plan."`,
						"traceloop.association.properties.session_id": "sess-42",
						"traceloop.association.properties.user_id":    "user-7",
					}},
					sp{id: 2, parent: 1, name: "pinecone.query", kind: ptrace.SpanKindClient, start: ms(10), end: ms(60), attrs: map[string]any{
						"db.system":                    "pinecone",
						"db.vector.query.top_k":        2,
						"db.vector.query.result_count": 2,
						"db.vector.query.top_score":    0.88,
					}, events: []ev{
						{name: "db.query.result", at: ms(60), attrs: map[string]any{
							"db.query.result.id":       "plan-ent",
							"db.query.result.score":    0.88,
							"db.query.result.metadata": "{'text': 'Enterprise includes SSO.', 'page': 3.0, 'tags': ['a', 'b'], 'ok': True, 'none': None}",
						}},
						{name: "db.query.result", at: ms(60), attrs: map[string]any{
							"db.query.result.id":       "plan-pro",
							"db.query.result.score":    0.51,
							"db.query.result.metadata": "{'text': \"Pro has no SSO's\", 'broken': ",
						}},
					}},
					sp{id: 3, parent: 1, name: "openai.chat", kind: ptrace.SpanKindClient, start: ms(70), end: ms(690), attrs: map[string]any{
						"llm.request.type":               "chat",
						"gen_ai.system":                  "openai",
						"gen_ai.request.model":           "gpt-4",
						"gen_ai.response.model":          "gpt-4-0613",
						"gen_ai.prompt.0.role":           "system",
						"gen_ai.prompt.0.content":        "Use the context.",
						"gen_ai.prompt.1.role":           "user",
						"gen_ai.prompt.1.content":        "Which plan includes SSO?",
						"gen_ai.completion.0.role":       "assistant",
						"gen_ai.completion.0.content":    "The Enterprise plan [plan-ent].",
						"gen_ai.usage.prompt_tokens":     80,
						"gen_ai.usage.completion_tokens": 9,
						"llm.usage.total_tokens":         89,
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(5), SpanID: sidHex(1), Service: "py-app", SessionID: "sess-42", UserID: "user-7", Time: base,
				Query: "Which plan includes SSO?",
				Documents: []record.Document{
					{ID: "plan-ent", Score: fp(0.88), Content: "Enterprise includes SSO.", Metadata: map[string]any{
						"text": "Enterprise includes SSO.", "page": 3.0, "tags": []any{"a", "b"}, "ok": true, "none": nil}},
					{ID: "plan-pro", Score: fp(0.51), Metadata: map[string]any{"raw": "{'text': \"Pro has no SSO's\", 'broken':"}},
				},
				Answer:     "The Enterprise plan [plan-ent].",
				Citations:  []record.Citation{{Text: "The Enterprise plan.", DocumentIDs: []string{"plan-ent"}}},
				Model:      "gpt-4-0613",
				Usage:      record.Usage{InputTokens: 80, OutputTokens: 9},
				Latency:    record.Latency{Retrieval: 50, Generation: 620, Total: 700},
				Attributes: map[string]string{"workflow": "rag_pipeline"},
			}},
		},
		{
			// OpenLLMetry LangChain (2026+): vector_db_retrieve span with the documents in
			// traceloop.entity.output; a nested Milvus span with db.search.result events names
			// the same hits and must not duplicate them.
			name: "openllmetry vector_db_retrieve entity output",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 6, "lc-app",
					sp{id: 1, name: "RetrievalQA.workflow", start: 0, end: ms(400), attrs: map[string]any{
						"traceloop.span.kind":     "workflow",
						"traceloop.entity.input":  `{"inputs": {"query": "how long is the warranty?"}, "tags": [], "metadata": {}, "kwargs": {}}`,
						"traceloop.entity.output": `{"outputs": {"result": "chain says two years"}}`,
					}},
					sp{id: 2, parent: 1, name: "vector_db_retrieve warranty", start: ms(2), end: ms(32), attrs: map[string]any{
						"gen_ai.operation.name":  "vector_db_retrieve",
						"traceloop.entity.input": `{"query": "how long is the warranty?"}`,
						"traceloop.entity.output": `{"documents":[{"page_content":"Warranty: 2 years.","metadata":{"source":"w.md","id":"w-1"}},` +
							`{"page_content":"Returns: 30 days.","metadata":{"source":"r.md"}}],"count":2}`,
					}},
					sp{id: 3, parent: 2, name: "milvus.search", start: ms(5), end: ms(30), attrs: map[string]any{
						"db.system": "milvus",
					}, events: []ev{
						{name: "db.search.result", attrs: map[string]any{"db.search.result.id": "w-1", "db.search.result.distance": 0.12}},
					}},
					sp{id: 4, parent: 1, name: "ChatOpenAI.chat", start: ms(40), end: ms(390), attrs: map[string]any{
						"llm.request.type":            "chat",
						"gen_ai.request.model":        "gpt-4o-mini",
						"gen_ai.prompt.0.role":        "user",
						"gen_ai.prompt.0.content":     "Context: ... Question: how long is the warranty?",
						"gen_ai.completion.0.content": "Two years.",
						"gen_ai.usage.input_tokens":   60,
						"gen_ai.usage.output_tokens":  3,
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(6), SpanID: sidHex(1), Service: "lc-app", Time: base, Query: "how long is the warranty?",
				Documents: []record.Document{
					{ID: "w-1", Content: "Warranty: 2 years.", Metadata: map[string]any{"source": "w.md", "id": "w-1"}},
					{ID: contentID("Returns: 30 days."), Content: "Returns: 30 days.", Metadata: map[string]any{"source": "r.md"}},
				},
				Answer:  "Two years.",
				Model:   "gpt-4o-mini",
				Usage:   record.Usage{InputTokens: 60, OutputTokens: 3},
				Latency: record.Latency{Retrieval: 30, Generation: 350, Total: 400},
			}},
		},
		{
			// ragwatch's own keys on one span.
			name: "rag keys",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 7, "hand-made",
					sp{id: 1, name: "handle", start: 0, end: ms(120), attrs: map[string]any{
						"rag.query":     "capital of France?",
						"rag.answer":    "Paris [1].",
						"rag.documents": `[{"id":"d1","score":0.9,"content":"Paris is the capital of France."},{"id":"d2","content":"Lyon."}]`,
						"rag.citations": `[{"text":"Paris","document_ids":["d1"]}]`,
						"rag.reference": "Paris",
						"rag.relevance": `{"d1": 2, "d2": 0}`,
						"rag.feedback":  `{"score": -1, "comment": "too short"}`,
						"rag.route":     "geo",
						"session.id":    "s-9",
					}},
				)
			},
			want: []*record.Record{{
				TraceID: tidHex(7), SpanID: sidHex(1), Service: "hand-made", SessionID: "s-9", Time: base, Query: "capital of France?",
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
			}},
		},
		{
			// An agent conversation: two turns under one AGENT span give two records, each with
			// its span id; feedback on the second LLM goes to the second record; the planning LLM
			// before the first retrieval belongs to the first turn's usage only if inside it.
			name: "two-turn agent",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 8, "agent",
					sp{id: 1, name: "agent", start: 0, end: ms(3000), attrs: map[string]any{
						"openinference.span.kind": "AGENT", "session.id": "conv-5", "user.id": "u-1",
					}},
					sp{id: 2, parent: 1, name: "turn-1", start: ms(0), end: ms(1000), attrs: map[string]any{
						"openinference.span.kind": "CHAIN", "input.value": "first question",
					}},
					sp{id: 3, parent: 2, name: "retrieve", start: ms(10), end: ms(30), attrs: map[string]any{
						"openinference.span.kind":                "RETRIEVER",
						"retrieval.documents.0.document.id":      "a1",
						"retrieval.documents.0.document.score":   0.5,
						"retrieval.documents.0.document.content": "A",
					}},
					sp{id: 4, parent: 2, name: "llm", start: ms(40), end: ms(990), attrs: map[string]any{
						"openinference.span.kind":               "LLM",
						"llm.model_name":                        "m",
						"llm.token_count.prompt":                10,
						"llm.token_count.completion":            2,
						"llm.output_messages.0.message.role":    "assistant",
						"llm.output_messages.0.message.content": "first answer",
					}},
					sp{id: 5, parent: 1, name: "turn-2", start: ms(2000), end: ms(3000), attrs: map[string]any{
						"openinference.span.kind": "CHAIN", "input.value": "second question",
					}},
					sp{id: 6, parent: 5, name: "retrieve", start: ms(2010), end: ms(2020), attrs: map[string]any{
						"openinference.span.kind":                "RETRIEVER",
						"retrieval.documents.0.document.id":      "b1",
						"retrieval.documents.0.document.content": "B",
					}},
					sp{id: 7, parent: 5, name: "llm", start: ms(2030), end: ms(2900), attrs: map[string]any{
						"openinference.span.kind":        "LLM",
						"llm.model_name":                 "m",
						"llm.token_count.prompt":         20,
						"llm.token_count.completion":     4,
						"llm.choices.0.completion.text":  "second answer",
						"annotations.0.annotation.name":  "feedback",
						"annotations.0.annotation.score": -0.5,
					}},
				)
			},
			want: []*record.Record{
				{
					TraceID: tidHex(8), SpanID: sidHex(2), Service: "agent", SessionID: "conv-5", UserID: "u-1", Time: base,
					Query: "first question", Documents: []record.Document{{ID: "a1", Score: fp(0.5), Content: "A"}},
					Answer: "first answer", Model: "m", Usage: record.Usage{InputTokens: 10, OutputTokens: 2},
					Latency: record.Latency{Retrieval: 20, Generation: 950, Total: 1000},
				},
				{
					TraceID: tidHex(8), SpanID: sidHex(5), Service: "agent", SessionID: "conv-5", UserID: "u-1", Time: base.Add(ms(2000)),
					Query: "second question", Documents: []record.Document{{ID: "b1", Content: "B"}},
					Answer: "second answer", Model: "m", Usage: record.Usage{InputTokens: 20, OutputTokens: 4},
					Latency:  record.Latency{Retrieval: 10, Generation: 870, Total: 1000},
					Feedback: &record.Feedback{Score: -0.5},
				},
			},
		},
		{
			name: "no rag",
			td: func(t *testing.T) ptrace.Traces {
				return build(t, 9, "web",
					sp{id: 1, name: "GET /health", kind: ptrace.SpanKindServer, end: ms(3)},
					sp{id: 2, parent: 1, name: "SELECT", kind: ptrace.SpanKindClient, start: ms(1), end: ms(2), attrs: map[string]any{
						"db.system": "postgresql", "db.statement": "SELECT 1",
					}},
				)
			},
			notRAG: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := assembleTD(tc.td(t))
			if res.RAG == tc.notRAG {
				t.Fatalf("RAG = %v, want %v", res.RAG, !tc.notRAG)
			}
			sameRecords(t, res.Records, tc.want)
			if len(res.Feedback) != 0 {
				t.Errorf("unexpected orphan feedback %s", js(res.Feedback))
			}
		})
	}
}

// Context ids: rag.* beats OpenInference beats GenAI / enduser beats traceloop, whatever the
// attribute order; the turn span beats its ancestors, which beat the turn's inner spans.
func TestContextPrecedence(t *testing.T) {
	turn := map[string]any{
		"rag.query": "q", "rag.answer": "a", "rag.documents": `[{"id":"d"}]`,
		"traceloop.association.properties.session_id": "tl-s", "traceloop.association.properties.user_id": "tl-u",
		"gen_ai.conversation.id": "conv", "enduser.id": "end-u",
	}
	res := assembleTD(build(t, 1, "s",
		sp{id: 1, name: "root", end: ms(10), attrs: map[string]any{"session.id": "root-s", "user.id": "root-u"}},
		sp{id: 2, parent: 1, name: "turn", start: ms(1), end: ms(9), attrs: turn},
		sp{id: 3, parent: 2, name: "inner", start: ms(2), end: ms(3), attrs: map[string]any{"rag.session_id": "inner-s"}},
	))
	if len(res.Records) != 1 || res.Records[0].SessionID != "conv" || res.Records[0].UserID != "end-u" {
		t.Fatalf("%s", js(res.Records))
	}
	turn["session.id"], turn["rag.user_id"] = "oi-s", "rag-u"
	res = assembleTD(build(t, 1, "s", sp{id: 2, name: "turn", end: ms(9), attrs: turn}))
	if len(res.Records) != 1 || res.Records[0].SessionID != "oi-s" || res.Records[0].UserID != "rag-u" {
		t.Fatalf("%s", js(res.Records))
	}
}

// Large trees use DFS numbering for ancestry; padding a two-turn trace with 100 unrelated spans
// must not change its records.
func TestLargeTreeSameRecords(t *testing.T) {
	turns := []sp{
		{id: 1, name: "agent", end: ms(3000), attrs: map[string]any{"openinference.span.kind": "AGENT"}},
		{id: 2, parent: 1, name: "t1", end: ms(1000), attrs: map[string]any{"input.value": "one"}},
		{id: 3, parent: 2, name: "r", start: ms(1), end: ms(5), attrs: map[string]any{"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "a"}},
		{id: 4, parent: 2, name: "g", start: ms(6), end: ms(9), attrs: map[string]any{"openinference.span.kind": "LLM", "llm.choices.0.completion.text": "A"}},
		{id: 5, parent: 1, name: "t2", start: ms(2000), end: ms(3000), attrs: map[string]any{"input.value": "two"}},
		{id: 6, parent: 5, name: "r", start: ms(2001), end: ms(2005), attrs: map[string]any{"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "b"}},
		{id: 7, parent: 5, name: "g", start: ms(2006), end: ms(2009), attrs: map[string]any{"openinference.span.kind": "LLM", "llm.choices.0.completion.text": "B"}},
	}
	small := assembleTD(build(t, 1, "s", turns...))
	padded := append([]sp(nil), turns...)
	for i := byte(10); i < 110; i++ {
		parent := []byte{1, 2, 5, 3, 7}[i%5]
		padded = append(padded, sp{id: i, parent: parent, name: "pad", start: ms(float64(i)), end: ms(float64(i) + 1)})
	}
	big := assembleTD(build(t, 1, "s", padded...))
	if len(small.Records) != 2 {
		t.Fatalf("small: %s", js(small.Records))
	}
	sameRecords(t, big.Records, small.Records)
}

// A long conversation: 200 turns under one root give 200 records in order, each keyed by its
// turn span.
func TestManyTurns(t *testing.T) {
	spans := []sp{{id: 1, name: "conversation", end: time.Hour, attrs: map[string]any{"openinference.span.kind": "AGENT"}}}
	var want []string
	for k := 0; k < 200; k++ {
		want = append(want, fmt.Sprintf("answer %d", k))
	}
	td := build(t, 1, "s", spans...)
	ss := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	id := func(n int) pcommon.SpanID { return pcommon.SpanID{0xc0, byte(n >> 8), byte(n)} }
	for k := 0; k < 200; k++ {
		at := base.Add(time.Duration(k) * time.Second)
		add := func(n, parent int, start, end time.Duration, kv ...string) {
			s := ss.AppendEmpty()
			s.SetTraceID(tid(1))
			s.SetSpanID(id(n))
			if parent == 0 {
				s.SetParentSpanID(sid(1))
			} else {
				s.SetParentSpanID(id(parent))
			}
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(at.Add(start)))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(end)))
			for i := 0; i+1 < len(kv); i += 2 {
				s.Attributes().PutStr(kv[i], kv[i+1])
			}
		}
		add(3*k+10, 0, 0, ms(900))
		add(3*k+11, 3*k+10, ms(1), ms(5), "openinference.span.kind", "RETRIEVER", "retrieval.documents.0.document.id", fmt.Sprint("d", k))
		add(3*k+12, 3*k+10, ms(6), ms(800), "openinference.span.kind", "LLM", "llm.choices.0.completion.text", want[k])
	}
	res := assembleTD(td)
	if len(res.Records) != 200 {
		t.Fatalf("%d records", len(res.Records))
	}
	for k, r := range res.Records {
		if r.Answer != want[k] || r.SpanID != id(3*k+10).String() || r.Documents[0].ID != fmt.Sprint("d", k) {
			t.Fatalf("record %d: %s", k, js(r))
		}
	}
}
