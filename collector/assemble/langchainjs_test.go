package assemble

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// The spans OpenLLMetry's LangChain.js instrumentation (@traceloop/instrumentation-langchain
// 0.27) writes for one question to an LCEL chain
//
//	RunnableSequence( RunnableMap{context: retriever, question: passthrough}, prompt, model, parser )
//
// built by hand from its callback handler: a "workflow <name>" span per chain step with
// traceloop.entity.input/output (JSON.stringify of the step's values), a "chat <model>" span
// per model call with gen_ai.input/output.messages. The retriever writes no span; its
// Documents appear only in the RunnableMap's output and the prompt's input.
const (
	lcQuestion = "How long do I have to ask for a refund?"
	lcContext  = `[{"pageContent":"Refunds are issued within 14 days of purchase.","metadata":{"id":"doc-refund","source":"faq.md"}},` +
		`{"pageContent":"Standard shipping takes 3 to 5 business days.","metadata":{"id":"doc-shipping","source":"faq.md"}}]`
	lcAnswer = "You can ask for a refund within 14 days of purchase [1]."
)

// langchainJSSpans returns the five step spans of one question, with ids from id up, parented
// to parent (0: each its own root, as the instrumentation exports them).
func langchainJSSpans(id, parent byte) []sp {
	workflow := func(name, in, out string) map[string]any {
		return map[string]any{"gen_ai.operation.name": "workflow", "gen_ai.provider.name": "langchain",
			"traceloop.span.kind": "workflow", "traceloop.workflow.name": name,
			"traceloop.entity.input": in, "traceloop.entity.output": out}
	}
	q := `{"question":"` + lcQuestion + `"}`
	return []sp{
		{id: id, parent: parent, name: "workflow RunnableSequence", start: 0, end: ms(900),
			attrs: workflow("RunnableSequence", q, `"`+lcAnswer+`"`)},
		{id: id + 1, parent: parent, name: "workflow RunnableMap", start: ms(5), end: ms(200),
			attrs: workflow("RunnableMap", q, `{"context":`+lcContext+`,"question":"`+lcQuestion+`"}`)},
		{id: id + 2, parent: parent, name: "workflow ChatPromptTemplate", start: ms(205), end: ms(210),
			attrs: workflow("ChatPromptTemplate", `{"context":`+lcContext+`,"question":"`+lcQuestion+`"}`,
				`{"lc":1,"type":"constructor","id":["langchain_core","prompt_values","ChatPromptValue"],"kwargs":{"messages":[]}}`)},
		{id: id + 3, parent: parent, name: "chat gpt-4o-mini", kind: ptrace.SpanKindClient, start: ms(215), end: ms(880),
			attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
				"gen_ai.input.messages": `[{"role":"system","parts":[{"type":"text","content":"Answer from the context, cite it as [n]. Context: [1] Refunds are issued within 14 days of purchase. [2] Standard shipping takes 3 to 5 business days."}]},` +
					`{"role":"user","parts":[{"type":"text","content":"` + lcQuestion + `"}]}]`,
				"gen_ai.output.messages":     `[{"role":"assistant","parts":[{"type":"text","content":"` + lcAnswer + `"}],"finish_reason":"stop"}]`,
				"gen_ai.usage.input_tokens":  96,
				"gen_ai.usage.output_tokens": 14}},
		{id: id + 4, parent: parent, name: "workflow StrOutputParser", start: ms(885), end: ms(890),
			attrs: workflow("StrOutputParser", `{"input":"`+lcAnswer+`"}`, `"`+lcAnswer+`"`)},
	}
}

// TestLangChainJSStepsApart: the instrumentation starts every span without a parent, so each
// step is a trace of its own. The chat trace gives a record whose retrieval was not seen (not
// an empty retrieval); the traces of the other steps hold no retrieval and no generation.
func TestLangChainJSStepsApart(t *testing.T) {
	for i, s := range langchainJSSpans(1, 0) {
		res := assembleTD(build(t, byte(10+i), "support-rag", s))
		if s.name != "chat gpt-4o-mini" {
			if res.RAG || len(res.Records) != 0 {
				t.Errorf("%s alone: RAG %v, records %s; want not_rag", s.name, res.RAG, js(res.Records))
			}
			continue
		}
		sameRecords(t, res.Records, []*record.Record{{
			TraceID: tidHex(byte(10 + i)), SpanID: sidHex(4), Service: "support-rag", Time: base.Add(ms(215)),
			Query: lcQuestion, Answer: lcAnswer, Model: "gpt-4o-mini-2024-07-18",
			Usage: record.Usage{InputTokens: 96, OutputTokens: 14}, Latency: record.Latency{Generation: 665, Total: 665},
			RetrievalNotSeen: true, // no retrieval span, no documents anywhere in the trace
		}})
		if res.Records[0].EmptyRetrieval() {
			t.Errorf("the chat record counts as an empty retrieval")
		}
	}
}

// TestLangChainJSStepsTogether: when the steps share a trace (the app's own span around the
// chain, context propagated), the documents of the RunnableMap's output are the record's, and
// [1] cites the first of them. The step's duration is not retrieval latency.
func TestLangChainJSStepsTogether(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spans  []sp
		query  string
		turnAt float64
		total  float64
	}{
		// The app's span around the steps, each step its child (context propagated to the
		// callbacks): the turn is the app's span.
		{"under the app's span", append([]sp{{id: 1, name: "POST /chat", kind: ptrace.SpanKindServer, end: ms(950),
			attrs: map[string]any{"traceloop.entity.input": `{"question":"` + lcQuestion + `"}`}}}, langchainJSSpans(2, 1)...),
			lcQuestion, 0, 950},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := assembleTD(build(t, 1, "support-rag", tc.spans...))
			docs := []record.Document{
				{ID: "doc-refund", Content: "Refunds are issued within 14 days of purchase.", Metadata: map[string]any{"id": "doc-refund", "source": "faq.md"}},
				{ID: "doc-shipping", Content: "Standard shipping takes 3 to 5 business days.", Metadata: map[string]any{"id": "doc-shipping", "source": "faq.md"}},
			}
			sameRecords(t, res.Records, []*record.Record{{
				TraceID: tidHex(1), SpanID: sidHex(1), Service: "support-rag", Time: base.Add(ms(tc.turnAt)),
				Query: tc.query, Documents: docs, Answer: lcAnswer, Model: "gpt-4o-mini-2024-07-18",
				Citations:  []record.Citation{{Text: "You can ask for a refund within 14 days of purchase.", DocumentIDs: []string{"doc-refund"}}},
				Usage:      record.Usage{InputTokens: 96, OutputTokens: 14},
				Latency:    record.Latency{Generation: 665, Total: tc.total},
				Attributes: map[string]string{"workflow": "RunnableSequence"},
			}})
		})
	}
}

// A step's output that holds no Document-shaped array (strings, prompt values, an empty
// context) gives no documents: the record says its retrieval was not seen.
func TestStepOutputWithoutDocuments(t *testing.T) {
	for _, out := range []string{
		`{"context":"Refunds are issued within 14 days.","question":"q"}`,
		`{"context":[],"question":"q"}`,
		`{"context":["Refunds are issued within 14 days."]}`,
		`{"context":[{"pageContent":"Refunds are issued within 14 days.","metadata":{}}]}`,
		`{"messages":[{"content":"hi","metadata":{"a":1}}]}`,
	} {
		res := Assemble(span.FromTraces(build(t, 1, "s",
			sp{id: 1, name: "workflow RunnableMap", end: ms(10), attrs: map[string]any{"traceloop.span.kind": "workflow", "traceloop.entity.output": out}},
			sp{id: 2, name: "chat", start: ms(20), end: ms(30), attrs: map[string]any{"gen_ai.operation.name": "chat",
				"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"14 days."}]}]`}},
		), nil, nil))
		if len(res.Records) != 1 || res.Records[0].Documents != nil || !res.Records[0].RetrievalNotSeen {
			t.Errorf("output %s: %s", out, js(res.Records))
		}
	}
}
