package service_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// The third turn of a conversation, as the app's LLM call carries it: the system prompt, two
// earlier exchanges and the current question.
var (
	convSystem  = "Answer from the context. Context: Pro costs $20. Enterprise costs $50 and includes SSO."
	convHistory = []record.Message{
		{Role: record.RoleUser, Content: "How much is the Pro plan?"},
		{Role: record.RoleAssistant, Content: "Pro costs $20 a month."},
		{Role: record.RoleUser, Content: "And Enterprise?"},
		{Role: record.RoleAssistant, Content: "Enterprise costs $50 a month."},
	}
	convQuestion = "Does it include SSO?"
	convAnswer   = "Yes, Enterprise includes SSO."
)

// conversationSpans is one RAG turn: a chain, its retriever and the LLM call given msgs.
func conversationSpans(msgAttrs ...attribute.KeyValue) []sp {
	return []sp{
		{name: "chain", start: 0, end: 500, attrs: []attribute.KeyValue{s("openinference.span.kind", "CHAIN"), s("session.id", "conv-9")}},
		{name: "retriever", parent: 1, start: 5, end: 40, attrs: []attribute.KeyValue{
			s("openinference.span.kind", "RETRIEVER"),
			s("input.value", convQuestion),
			s("retrieval.documents.0.document.id", "ent"),
			s("retrieval.documents.0.document.content", "Enterprise costs $50 and includes SSO."),
		}},
		{name: "llm", parent: 1, start: 50, end: 490, attrs: msgAttrs},
	}
}

func TestConversationHistoryFromOpenInference(t *testing.T) {
	attrs := []attribute.KeyValue{s("openinference.span.kind", "LLM"), s("llm.model_name", "gpt-4o")}
	msgs := append([]record.Message{{Role: "system", Content: convSystem}}, convHistory...)
	msgs = append(msgs, record.Message{Role: record.RoleUser, Content: convQuestion})
	for i, m := range msgs {
		attrs = append(attrs, s(fmt.Sprintf("llm.input_messages.%d.message.role", i), m.Role),
			s(fmt.Sprintf("llm.input_messages.%d.message.content", i), m.Content))
	}
	attrs = append(attrs, s("llm.output_messages.0.message.role", "assistant"), s("llm.output_messages.0.message.content", convAnswer))
	checkConversation(t, conversationSpans(attrs...))
}

func TestConversationHistoryFromGenAI(t *testing.T) {
	msgs := `[{"role":"system","parts":[{"type":"text","content":"` + convSystem + `"}]}`
	for _, m := range convHistory {
		msgs += `,{"role":"` + m.Role + `","parts":[{"type":"text","content":"` + m.Content + `"}]}`
	}
	msgs += `,{"role":"user","parts":[{"type":"text","content":"` + convQuestion + `"}]}]`
	checkConversation(t, conversationSpans(
		s("gen_ai.operation.name", "chat"), s("gen_ai.request.model", "gpt-4o"),
		s("gen_ai.input.messages", msgs),
		s("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"text","content":"`+convAnswer+`"}]}]`),
	))
}

// checkConversation sends the turn through the OTel SDK to the real receivers (gRPC and HTTP)
// and checks the record's turn and exact history; with conversation.max_history_turns 3 the
// oldest message is dropped and counted.
func checkConversation(t *testing.T, spans []sp) {
	for _, bounded := range []bool{false, true} {
		t.Run(fmt.Sprintf("bounded=%v", bounded), func(t *testing.T) {
			cfg := testConfig(t)
			want, dropped := convHistory, 0.0
			if bounded {
				cfg.Conversation.MaxHistoryTurns = 3
				want, dropped = convHistory[1:], 1
			}
			e := startEnv(t, cfg)
			tids := []trace.TraceID{{0xc0, 1}, {0xc0, 2}}
			newSender(t, "grpc", e.app.Addrs().OTLPGRPC, "chat").send(t, tids[0], spans)
			newSender(t, "http", e.app.Addrs().OTLPHTTP, "chat").send(t, tids[1], spans)
			testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "both records", func() bool { return e.sink.len() == 2 })
			for _, tid := range tids {
				r := e.sink.get(tid.String())
				if r == nil {
					t.Fatalf("no record for %s", tid)
				}
				if r.Turn != 3 || r.Query != convQuestion || r.Answer != convAnswer || r.SessionID != "conv-9" {
					t.Errorf("turn %d query %q answer %q session %q; want 3, %q, %q, conv-9", r.Turn, r.Query, r.Answer, r.SessionID, convQuestion, convAnswer)
				}
				if g, w := fmt.Sprint(r.History), fmt.Sprint(want); g != w {
					t.Errorf("history\n got %s\nwant %s", g, w)
				}
			}
			got := scrape(t, e.base)
			if g := got["ragwatch_conversation_history_dropped_total"]; g != 2*dropped {
				t.Errorf("ragwatch_conversation_history_dropped_total = %v, want %v", g, 2*dropped)
			}
		})
	}
}
