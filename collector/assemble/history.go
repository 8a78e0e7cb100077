package assemble

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ragwatch/ragwatch/internal/record"
)

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
