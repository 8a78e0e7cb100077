package assemble

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// aiSDKTrace is a trace as the Vercel AI SDK (ai 5.x) writes it for the RAG guide's app: the
// generateText call around two model calls (the first asks for the tool, the second answers)
// and the tool call between them, which embeds the question. result is the tool's result.
func aiSDKTrace(t *testing.T, trace byte, result string, meta map[string]any) ptrace.Traces {
	common := func(op string, extra map[string]any) map[string]any {
		m := map[string]any{"ai.operationId": op, "operation.name": op + " support-chat",
			"ai.telemetry.functionId": "support-chat", "ai.model.provider": "openai.chat", "ai.model.id": "gpt-4o-mini"}
		for k, v := range meta {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	const system = `{"role":"system","content":"Only respond to questions using information from tool calls."}`
	const user = `{"role":"user","content":[{"type":"text","text":"How long do I have to ask for a refund?"}]}`
	return build(t, trace, "support-rag",
		sp{id: 1, name: "ai.generateText", start: 0, end: ms(1000), attrs: common("ai.generateText", map[string]any{
			"ai.prompt":                 `{"system":"Only respond to questions using information from tool calls.","prompt":"How long do I have to ask for a refund?"}`,
			"ai.response.text":          "Refunds are issued within 14 days. [doc-refund]",
			"ai.response.finishReason":  "stop",
			"ai.usage.promptTokens":     180, // the last step's, again: not counted twice
			"ai.usage.completionTokens": 25,
		})},
		sp{id: 2, parent: 1, name: "ai.generateText.doGenerate", start: ms(10), end: ms(200), attrs: common("ai.generateText.doGenerate", map[string]any{
			"ai.prompt.messages":         "[" + system + "," + user + "]",
			"gen_ai.system":              "openai.chat",
			"gen_ai.request.model":       "gpt-4o-mini",
			"ai.response.finishReason":   "tool-calls",
			"ai.response.toolCalls":      `[{"toolCallId":"call_1","toolName":"getInformation","input":"{\"question\":\"refund deadline\"}"}]`,
			"ai.response.model":          "gpt-4o-mini-2024-07-18",
			"gen_ai.response.model":      "gpt-4o-mini-2024-07-18",
			"ai.response.id":             "chatcmpl-step1",
			"gen_ai.response.id":         "chatcmpl-step1",
			"ai.usage.promptTokens":      120,
			"ai.usage.completionTokens":  18,
			"gen_ai.usage.input_tokens":  120,
			"gen_ai.usage.output_tokens": 18,
		})},
		sp{id: 3, parent: 1, name: "ai.toolCall", start: ms(210), end: ms(400), attrs: common("ai.toolCall", map[string]any{
			"ai.toolCall.name":   "getInformation",
			"ai.toolCall.id":     "call_1",
			"ai.toolCall.args":   `{"question":"refund deadline"}`,
			"ai.toolCall.result": result,
		})},
		sp{id: 4, parent: 3, name: "ai.embed", start: ms(220), end: ms(300), attrs: map[string]any{
			"ai.operationId": "ai.embed", "ai.model.id": "text-embedding-3-small", "ai.value": `"refund deadline"`, "ai.usage.tokens": 8,
		}},
		sp{id: 5, parent: 4, name: "ai.embed.doEmbed", start: ms(225), end: ms(295), attrs: map[string]any{
			"ai.operationId": "ai.embed.doEmbed", "ai.model.id": "text-embedding-3-small", "ai.usage.tokens": 8,
		}},
		sp{id: 6, parent: 1, name: "ai.generateText.doGenerate", start: ms(410), end: ms(990), attrs: common("ai.generateText.doGenerate", map[string]any{
			"ai.prompt.messages":         "[" + system + "," + user + `,{"role":"assistant","content":[{"type":"tool-call","toolCallId":"call_1","toolName":"getInformation","input":{"question":"refund deadline"}}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"call_1","toolName":"getInformation","output":{"type":"json","value":[]}}]}]`,
			"gen_ai.request.model":       "gpt-4o-mini",
			"ai.response.finishReason":   "stop",
			"ai.response.text":           "Refunds are issued within 14 days. [doc-refund]",
			"ai.response.model":          "gpt-4o-mini-2024-07-18",
			"gen_ai.response.model":      "gpt-4o-mini-2024-07-18",
			"ai.response.id":             "chatcmpl-step2", // the answer's call: read when gen_ai's is not there
			"ai.usage.promptTokens":      180,
			"ai.usage.completionTokens":  25,
			"gen_ai.usage.input_tokens":  180,
			"gen_ai.usage.output_tokens": 25,
		})},
	)
}

const refundDocs = `[{"id":"doc-refund","content":"Refunds are issued within 14 days of purchase.","similarity":0.9},` +
	`{"id":"doc-shipping","content":"Shipping takes 3 to 5 business days.","similarity":0.5}]`

// TestAISDK assembles AI SDK traces built by hand as the SDK writes them.
func TestAISDK(t *testing.T) {
	rag := func(trace byte, docs []record.Document, attrs map[string]string, session string, latency record.Latency) *record.Record {
		var cites []record.Citation
		if len(docs) > 0 && docs[0].ID == "doc-refund" { // [doc-refund] in the answer
			cites = []record.Citation{{Text: "Refunds are issued within 14 days.", DocumentIDs: []string{"doc-refund"}}}
		}
		return &record.Record{
			Citations: cites,
			TraceID:   tidHex(trace), SpanID: sidHex(1), ResponseID: "chatcmpl-step2", Service: "support-rag", Time: base, SessionID: session,
			Query:     "How long do I have to ask for a refund?",
			Documents: docs,
			Answer:    "Refunds are issued within 14 days. [doc-refund]",
			Model:     "gpt-4o-mini-2024-07-18",
			// Both model calls, once each: not the generateText call's own (the last step's).
			Usage:      record.Usage{InputTokens: 300, OutputTokens: 43},
			Latency:    latency,
			Attributes: attrs,
		}
	}
	withTool := record.Latency{Retrieval: 190, Generation: 770, Total: 1000}
	refund := []record.Document{
		{ID: "doc-refund", Content: "Refunds are issued within 14 days of purchase.", Score: fp(0.9)},
		{ID: "doc-shipping", Content: "Shipping takes 3 to 5 business days.", Score: fp(0.5)},
	}
	route := map[string]string{"route": "support-chat"}

	t.Run("retrieval tool", func(t *testing.T) {
		res := assembleTD(aiSDKTrace(t, 1, refundDocs, nil))
		sameRecords(t, res.Records, []*record.Record{rag(1, refund, route, "", withTool)})
	})
	t.Run("metadata route and session", func(t *testing.T) {
		res := assembleTD(aiSDKTrace(t, 2, refundDocs, map[string]any{
			"ai.telemetry.metadata.route": "billing", "ai.telemetry.metadata.sessionId": "s-42", "ai.telemetry.metadata.tenant": "acme"}))
		sameRecords(t, res.Records, []*record.Record{rag(2, refund, map[string]string{"route": "billing"}, "s-42", withTool)})
	})
	t.Run("tool that is no retrieval", func(t *testing.T) {
		// A weather tool: a chat with a tool, no retrieval; still one record, its question the
		// call's prompt, both model calls its generations.
		res := assembleTD(aiSDKTrace(t, 3, `{"temperature":21,"unit":"C"}`, nil))
		want := rag(3, nil, route, "", record.Latency{Generation: 770, Total: 1000})
		want.RetrievalNotSeen = true // no retrieval in the trace: not an empty one
		sameRecords(t, res.Records, []*record.Record{want})
	})
	t.Run("tool named in retrieval_tools", func(t *testing.T) {
		spans := span.FromTraces(aiSDKTrace(t, 4, `["Refunds are issued within 14 days of purchase."]`, nil), nil, nil)
		res := AssembleWith(spans, &Options{RetrievalTools: []string{"lookup", "getInformation"}})
		doc := "Refunds are issued within 14 days of purchase."
		sameRecords(t, res.Records, []*record.Record{rag(4, []record.Document{{ID: contentID(doc), Content: doc}}, route, "", withTool)})
		// Without the configuration the same trace holds no retrieval.
		res = Assemble(span.FromTraces(aiSDKTrace(t, 4, `["Refunds are issued within 14 days of purchase."]`, nil), nil, nil))
		if len(res.Records) != 1 || res.Records[0].Documents != nil || res.Records[0].Latency.Retrieval != 0 {
			t.Fatalf("unconfigured: %s", js(res.Records))
		}
	})
	t.Run("embeddings only", func(t *testing.T) {
		res := assembleTD(build(t, 5, "support-rag",
			sp{id: 1, name: "ai.embedMany", end: ms(50), attrs: map[string]any{"ai.operationId": "ai.embedMany", "ai.response.text": "not an answer"}},
			sp{id: 2, parent: 1, name: "ai.embedMany.doEmbed", start: ms(1), end: ms(49), attrs: map[string]any{"ai.operationId": "ai.embedMany.doEmbed", "gen_ai.usage.input_tokens": 9}},
		))
		if res.RAG || len(res.Records) != 0 {
			t.Fatalf("embeddings are no generation: RAG %v, %s", res.RAG, js(res.Records))
		}
	})
	t.Run("generateObject", func(t *testing.T) {
		res := assembleTD(build(t, 6, "support-rag",
			sp{id: 1, name: "ai.generateObject", end: ms(300), attrs: map[string]any{
				"ai.operationId": "ai.generateObject", "ai.telemetry.functionId": "support-object",
				"ai.prompt":          `{"system":"Answer from these documents only: [doc-warranty] Two years.","prompt":"What does the warranty cover?"}`,
				"ai.response.object": `{"answer":"Two years. [doc-warranty]","sources":["doc-warranty"]}`,
			}},
			sp{id: 2, parent: 1, name: "ai.generateObject.doGenerate", start: ms(5), end: ms(290), attrs: map[string]any{
				"ai.operationId":     "ai.generateObject.doGenerate",
				"ai.prompt.messages": `[{"role":"system","content":"Answer from these documents only."},{"role":"user","content":[{"type":"text","text":"What does the warranty cover?"}]}]`,
				"ai.response.object": `{"answer":"Two years. [doc-warranty]","sources":["doc-warranty"]}`,
				"ai.model.id":        "gpt-4o-mini", "ai.usage.promptTokens": 160, "ai.usage.completionTokens": 30,
			}},
		))
		sameRecords(t, res.Records, []*record.Record{{
			TraceID: tidHex(6), SpanID: sidHex(2), Service: "support-rag", Time: base.Add(ms(5)), RetrievalNotSeen: true,
			Query: "What does the warranty cover?", Answer: "Two years. [doc-warranty]", Model: "gpt-4o-mini",
			Usage: record.Usage{InputTokens: 160, OutputTokens: 30}, Latency: record.Latency{Generation: 285, Total: 285},
			Attributes: map[string]string{"route": "support-object"},
		}})
	})
	t.Run("call without model calls", func(t *testing.T) {
		// A generateText span whose steps were not exported is the generation itself (read as
		// a generation: its answer and usage; its prompt is read only from a call around
		// model calls).
		res := assembleTD(build(t, 7, "support-rag",
			sp{id: 1, name: "ai.generateText", end: ms(400), attrs: map[string]any{
				"ai.operationId": "ai.generateText", "ai.prompt": `{"prompt":"Hi?"}`, "ai.response.text": "Hello.",
				"ai.usage.inputTokens": 3, "ai.usage.outputTokens": 2,
			}},
		))
		sameRecords(t, res.Records, []*record.Record{{
			TraceID: tidHex(7), SpanID: sidHex(1), Service: "support-rag", Time: base, Answer: "Hello.", RetrievalNotSeen: true,
			Usage: record.Usage{InputTokens: 3, OutputTokens: 2}, Latency: record.Latency{Generation: 400, Total: 400},
		}})
	})
}
