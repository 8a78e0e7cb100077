package assemble

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// historyOf reads a conversation from the answering generation's input messages, in the
// order lastUserText reads them (OpenInference llm.input_messages, GenAI
// gen_ai.input.messages, legacy gen_ai.prompt.{i}.*): the messages before the last user
// message are the history (user and assistant messages only: system, tool and other roles
// are dropped), and the number of user messages up to and including the last is the turn.
// A generation given no user message gives no turn (0).
func historyOf(f *facts) (history []record.Message, turn int) {
	msgs := f.oiIn
	if lastUser(msgs) < 0 && f.genaiIn.Type != TypeEmpty {
		if v := f.genaiIn; v.Type == TypeStr && strings.Count(v.Str(), `"user"`) == 1 && !strings.Contains(v.Str(), `"assistant"`) {
			// A first turn: one user message and no answer before it. Its JSON (with the
			// system prompt, often the whole context) need not be parsed for that.
			return nil, 1
		}
		msgs = messagesFromAny(f.genaiIn.structured())
	}
	if lastUser(msgs) < 0 {
		msgs = f.legacyIn
	}
	last := lastUser(msgs)
	if last < 0 {
		return nil, 0
	}
	for _, m := range msgs[:last] {
		role := historyRole(m.role)
		if role == "" {
			continue
		}
		s := m.text()
		if s == "" {
			continue
		}
		if role == record.RoleUser {
			turn++
		}
		if len(history) == record.MaxHistory {
			history = history[1:] // a hostile trace: the newest are the ones kept anyway
		}
		history = append(history, record.Message{Role: role, Content: truncate.String(s, record.MaxTextBytes)})
	}
	return history, turn + 1
}

// lastUser is the index of the last user message that has text, or -1.
func lastUser(msgs []message) int {
	for k := len(msgs) - 1; k >= 0; k-- {
		if historyRole(msgs[k].role) == record.RoleUser && msgs[k].text() != "" {
			return k
		}
	}
	return -1
}

// historyRole maps a message role to a history role: "" for roles the history leaves out.
func historyRole(role string) string {
	switch {
	case strings.EqualFold(role, record.RoleUser):
		return record.RoleUser
	case strings.EqualFold(role, record.RoleAssistant):
		return record.RoleAssistant
	}
	return ""
}

// historyMessage reports whether a flattened input message is one historyOf may read: a user or
// assistant message (the pruner keeps those and drops the rest).
func historyMessage(m *message) bool {
	return historyRole(m.role) != "" && m.text() != ""
}

// trimHistory bounds r's history to conversation.max_history_turns and max_history_bytes,
// counting the messages it drops.
func (a *Assembler) trimHistory(r *record.Record) {
	if len(r.History) == 0 {
		return
	}
	kept, dropped := record.TrimHistory(r.History, a.conv.MaxHistoryTurns, a.conv.MaxHistoryBytes)
	if dropped == 0 {
		return
	}
	if len(kept) == 0 {
		kept = nil
	}
	r.History = kept
	a.m.historyDropped.Add(float64(dropped))
}

// HistoryDroppedName is the counter of history messages dropped to fit the conversation bounds.
const HistoryDroppedName = "ragwatch_conversation_history_dropped_total"

func newHistoryDropped() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: HistoryDroppedName,
		Help: "Conversation history messages dropped, oldest first, to fit conversation.max_history_turns and conversation.max_history_bytes.",
	})
}
