package assemble

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestHistoryFromInputMessages reads turn and history from each convention's input messages,
// through FromTraces' pruning: system and tool messages are left out, the current question is
// not history, and a message without a role counts neither as history nor as a turn.
func TestHistoryFromInputMessages(t *testing.T) {
	u := func(s string) record.Message { return record.Message{Role: record.RoleUser, Content: s} }
	a := func(s string) record.Message { return record.Message{Role: record.RoleAssistant, Content: s} }
	conv := []struct{ role, content string }{
		{"system", "Use the context: long context here."},
		{"user", "first?"}, {"assistant", "one"},
		{"tool", "tool output"},
		{"User", "second?"}, {"assistant", "two"},
		{"user", "third?"},
	}
	wantHist := []record.Message{u("first?"), a("one"), u("second?"), a("two")}
	oi, legacy := map[string]any{"openinference.span.kind": "LLM"}, map[string]any{"gen_ai.operation.name": "chat"}
	genai := `[`
	for i, m := range conv {
		oi[fmt.Sprintf("llm.input_messages.%d.message.role", i)] = m.role
		oi[fmt.Sprintf("llm.input_messages.%d.message.content", i)] = m.content
		legacy[fmt.Sprintf("gen_ai.prompt.%d.role", i)] = m.role
		legacy[fmt.Sprintf("gen_ai.prompt.%d.content", i)] = m.content
		if i > 0 {
			genai += ","
		}
		genai += `{"role":"` + m.role + `","parts":[{"type":"text","content":"` + m.content + `"}]}`
	}
	genai += `]`
	oi["llm.output_messages.0.message.content"] = "three"
	legacy["gen_ai.completion.0.content"] = "three"
	// The GenAI message events (span events, or log records the official instrumentations
	// emit): one per message, the role in the event's name.
	var events []ev
	for _, m := range conv {
		events = append(events, ev{name: "gen_ai." + strings.ToLower(m.role) + ".message", attrs: map[string]any{"content": m.content}})
	}
	events = append(events, ev{name: "gen_ai.choice", attrs: map[string]any{"index": 0, "message": `{"role":"assistant","content":"three"}`}})
	cases := []struct {
		name     string
		attrs    map[string]any
		turn     int
		history  []record.Message
		question string
		events   []ev
	}{
		{"openinference", oi, 3, wantHist, "third?", nil},
		{"genai", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": genai,
			"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"three"}]}]`}, 3, wantHist, "third?", nil},
		{"legacy", legacy, 3, wantHist, "third?", nil},
		{"message events", map[string]any{"gen_ai.operation.name": "chat"}, 3, wantHist, "third?", events},
		{"first turn", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": `[{"role":"system","parts":[{"type":"text","content":"s"}]},{"role":"user","parts":[{"type":"text","content":"q"}]}]`,
			"gen_ai.output.messages": `[{"role":"assistant","parts":[{"type":"text","content":"three"}]}]`}, 1, nil, "q", nil},
		{"no user message", map[string]any{"openinference.span.kind": "LLM", "llm.input_messages.0.message.content": "bare prompt",
			"llm.output_messages.0.message.content": "three"}, 0, nil, "bare prompt", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := assembleTD(build(t, 1, "chat",
				sp{id: 1, name: "turn", end: ms(100), attrs: map[string]any{"openinference.span.kind": "CHAIN"}},
				sp{id: 2, parent: 1, name: "retrieve", start: ms(1), end: ms(10), attrs: map[string]any{
					"openinference.span.kind": "RETRIEVER", "input.value": "q", "retrieval.documents.0.document.id": "d1"}},
				sp{id: 3, parent: 1, name: "llm", start: ms(20), end: ms(90), attrs: tc.attrs, events: tc.events},
			))
			if len(res.Records) != 1 {
				t.Fatalf("%d records, want 1", len(res.Records))
			}
			r := res.Records[0]
			if r.Turn != tc.turn || js(r.History) != js(tc.history) || r.Answer != "three" {
				t.Errorf("turn %d history %s answer %q; want %d %s three", r.Turn, js(r.History), r.Answer, tc.turn, js(tc.history))
			}
		})
	}
}

func TestAssemblerTrimsHistory(t *testing.T) {
	h := []record.Message{{Role: record.RoleUser, Content: "aaaa"}, {Role: record.RoleAssistant, Content: "bbbb"}, {Role: record.RoleUser, Content: "cc"}}
	for _, tc := range []struct {
		turns, bytes, keep int
	}{{0, 0, 3}, {2, 0, 2}, {0, 6, 2}, {10, 2, 1}, {0, 1, 0}} {
		reg := prometheus.NewRegistry()
		m, err := newMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		a := &Assembler{m: m}
		a.conv.MaxHistoryTurns, a.conv.MaxHistoryBytes = tc.turns, tc.bytes
		r := &record.Record{History: append([]record.Message(nil), h...)}
		a.trimHistory(r)
		if js(r.History) != js(h[3-tc.keep:]) && !(tc.keep == 0 && r.History == nil) {
			t.Errorf("turns %d bytes %d: kept %s, want the last %d", tc.turns, tc.bytes, js(r.History), tc.keep)
		}
		if got := testutil.Sum(t, reg, HistoryDroppedName, nil); got != float64(3-tc.keep) {
			t.Errorf("turns %d bytes %d: dropped counter %v, want %d", tc.turns, tc.bytes, got, 3-tc.keep)
		}
	}
}
