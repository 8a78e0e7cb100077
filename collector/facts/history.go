package facts

import (
	"strings"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/truncate"
)

// HistoryOf reads a conversation from the answering generation's input messages, in the
// order LastUserText reads them (OpenInference llm.input_messages, GenAI
// gen_ai.input.messages, legacy gen_ai.prompt.{i}.*): the messages before the last user
// message are the history (user and assistant messages only: system, tool and other roles
// are dropped), and the number of user messages up to and including the last is the turn.
// A generation given no user message gives no turn (0).
func HistoryOf(f *Facts) (history []record.Message, turn int) {
	msgs := f.oiIn
	if span.LastUser(msgs) < 0 && f.genaiIn.Type != span.TypeEmpty {
		if v := f.genaiIn; v.Type == span.TypeStr && strings.Count(v.Str(), `"user"`) == 1 && !strings.Contains(v.Str(), `"assistant"`) {
			// A first turn: one user message and no answer before it. Its JSON (with the
			// system prompt, often the whole context) need not be parsed for that.
			return nil, 1
		}
		msgs = messagesFromAny(f.genaiIn.Structured())
	}
	if span.LastUser(msgs) < 0 {
		msgs = f.legacyIn
	}
	if span.LastUser(msgs) < 0 {
		msgs = f.eventIn // gen_ai.*.message events: on the span, or log records joined to it
	}
	last := span.LastUser(msgs)
	if last < 0 {
		return nil, 0
	}
	for _, m := range msgs[:last] {
		role := span.HistoryRole(m.Role)
		if role == "" {
			continue
		}
		s := m.Text()
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
