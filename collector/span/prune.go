package span

import (
	"strings"

	"github.com/ragwatch/ragwatch/collector/conventions"
)

// What a held span keeps. A trace waits up to assembly.wait (or timeout) in memory, so the
// decoders keep only the attributes and events of the conventions (collector/conventions:
// Kept, KeptEvent) that the readers of collector/assemble read, and drops the input messages they will not: a RAG app's LLM span carries its whole
// context (several KB) in a system message, and assembly reads only the user and assistant
// messages (the question and the conversation's history, collector/facts HistoryOf).
// Every reader's result is the same with or without what is dropped here.

// eventAttrFilter returns which attributes of an event to keep: of the events that carry span
// keys, those keys (conventions.EventKeys); of every other event, all.
func eventAttrFilter(name string) int {
	if e, ok := conventions.EventOf(name); ok && e.Kind == conventions.EventSpanKeys {
		return filterGenAIEvents
	}
	return filterNone
}

// keepMessageEvent reports whether a span event is worth holding. An input message event
// (gen_ai.{system,user,assistant,tool}.message) is read as the last user message or as the
// conversation's history (facts.HistoryOf): one whose role is neither user, assistant nor
// empty (system, tool), or that has no text, is never read.
func keepMessageEvent(e *Event, attrs []Attr) bool {
	ev, ok := conventions.EventOf(e.Name)
	if !ok || ev.Kind != conventions.EventMessage {
		return true
	}
	m := MessageFromEvent(&Event{Name: e.Name, Attrs: attrs}, ev.Role)
	return (HistoryRole(m.Role) != "" || m.Role == "") && m.Text() != ""
}

// pruneSpanAttrs drops the span attributes that no reader will read given the others: the
// input messages other than those lastUserText and historyOf can return, and the input of a span that is
// certainly a generation and not a retrieval (only retrievals' and non-generation turns' input
// is read; OpenInference puts an LLM call's whole request there). msgs is scratch.
func pruneSpanAttrs(as []Attr, s *Span, msgs *[]Message) []Attr {
	var oiIn, legacyIn, plainPrompt, llm bool
	for i := range as {
		k := as[i].Key
		if len(k) < len("gen_ai.prompt") || (k[0] != 'l' && k[0] != 'g' && k[0] != 'o') {
			continue // none of the cases below
		}
		switch {
		case k == "openinference.span.kind":
			llm = isLLMKind(&as[i].Value) // as onlyGeneration reads it
		case len(k) > 19 && k[:19] == "llm.input_messages.":
			oiIn = true
		case strings.HasPrefix(k, "gen_ai.prompt"):
			if len(k) == len("gen_ai.prompt") {
				plainPrompt = true
			} else if k[len("gen_ai.prompt")] == '.' {
				legacyIn = true
			}
		}
	}
	// gen_ai.prompt appends to the same list as gen_ai.prompt.{i}.*: pruned only alone.
	legacyIn = legacyIn && !plainPrompt
	// onlyGeneration is true only if the last span kind read is LLM: most spans are spared it.
	onlyGen := llm && onlyGeneration(as, s)
	if !oiIn && !legacyIn && !onlyGen {
		return as
	}
	var oiBuf, legacyBuf [64]bool
	var keepOI, keepLegacy []bool
	if oiIn {
		keepOI = readMessages(as, conventions.FamInMessages, msgs, oiBuf[:0])
	}
	if legacyIn {
		keepLegacy = readMessages(as, conventions.FamPrompt, msgs, legacyBuf[:0])
	}
	out := 0
	for i := range as {
		k := as[i].Key
		drop := false
		if in, ok := conventions.Shared(k); ok && !in.Fixed {
			// A list's element, known by its key's address.
			drop = (oiIn && in.Fam == conventions.FamInMessages && !indexKept(int(in.I), keepOI)) ||
				(legacyIn && in.Fam == conventions.FamPrompt && !indexKept(int(in.I), keepLegacy))
		} else {
			switch {
			case oiIn && strings.HasPrefix(k, "llm.input_messages."):
				drop = !messageKept(k[len("llm.input_messages."):], keepOI)
			case legacyIn && strings.HasPrefix(k, "gen_ai.prompt."):
				drop = !messageKept(k[len("gen_ai.prompt."):], keepLegacy)
			case onlyGen:
				drop = k == "input.value" || k == "input.mime_type" || k == "traceloop.entity.input"
			}
		}
		if drop {
			continue
		}
		if out != i {
			as[out] = as[i]
		}
		out++
	}
	clear(as[out:])
	return as[:out]
}

// readMessages marks, in the flattened list of family fam (keyInMessages or keyPrompt), the
// messages a reader reads (a user or assistant message with text: historyOf reads those, the
// others are dropped): the one lastText(msgs, "user") returns, and every user or assistant
// message with text (historyOf reads those as the conversation's history). The list is built
// with the reader's own setters, exactly as collector/facts Read builds it; keep is appended to and
// returned.
func readMessages(as []Attr, fam conventions.Fam, scratch *[]Message, keep []bool) []bool {
	prefix, set, setAt := "llm.input_messages.", SetOIMessage, SetMessage
	if fam == conventions.FamPrompt {
		prefix, set, setAt = "gen_ai.prompt.", SetRoleContent, SetLegacyMessage
	}
	msgs := (*scratch)[:0]
	defer func() {
		clear(msgs)
		*scratch = msgs[:0]
	}()
	for i := range as {
		if in, ok := conventions.Shared(as[i].Key); ok && !in.Fixed {
			if in.Fam == fam { // known by its address
				msgs = setAt(msgs, int(in.I), int(in.Field), as[i].Value)
			}
		} else if rest, ok := strings.CutPrefix(as[i].Key, prefix); ok {
			msgs = set(msgs, rest, as[i].Value)
		}
	}
	for k := range msgs {
		keep = append(keep, HistoryRole(msgs[k].Role) != "" && msgs[k].Text() != "")
	}
	if LastUser(msgs) < 0 { // lastText falls back to the last message without a role
		for k := len(msgs) - 1; k >= 0; k-- {
			if msgs[k].Role == "" && msgs[k].Text() != "" {
				keep[k] = true
				break
			}
		}
	}
	return keep
}

// messageKept reports whether the key suffix "{i}...." belongs to a message marked in keep.
func messageKept(rest string, keep []bool) bool {
	i, _, valid := conventions.SplitIndex(rest, MaxIndexed)
	return valid && indexKept(i, keep)
}

// indexKept reports whether message i is marked in keep.
func indexKept(i int, keep []bool) bool {
	return i < len(keep) && keep[i]
}

// onlyGeneration reports whether collector/facts Read will certainly classify the span as a
// generation and not a retrieval: its OpenInference kind is LLM, and none of the signs of a
// retrieval or an embedding the conventions' table declares is present (a key or event whose
// presence says retrieval, a key of a document list or of the reranker, a retrieval query, an
// operation or request type naming a retrieval or an embedding).
func onlyGeneration(as []Attr, s *Span) bool {
	if strings.HasPrefix(s.Name, "vector_db_retrieve") {
		return false
	}
	for i := range s.Events {
		if e, ok := conventions.EventOf(s.Events[i].Name); ok && e.Sign&conventions.SignRetrieval != 0 {
			return false
		}
	}
	llm := false
	for i := range as {
		k := as[i].Key
		var key *conventions.Key
		if in, ok := conventions.Shared(k); ok { // most keys: known by their address
			if !in.Fixed {
				if retrievalFam(in.Fam) {
					return false
				}
				continue
			}
			key = in.Key
		} else if key, ok = conventions.Lookup(k); !ok {
			if f, _, fam := conventions.FamilyOf(k); fam && retrievalFam(f) {
				return false
			}
			continue
		}
		if key.Sign&conventions.SignRetrieval != 0 || key.Field == conventions.RetrievalQuery {
			return false
		}
		switch key.Field {
		case conventions.OIKind:
			llm = isLLMKind(&as[i].Value)
		case conventions.Operation, conventions.LLMRequestType:
			switch conventions.KindOf(key.Field, conventions.Normalize(key.Field, as[i].Value.Text())) {
			case conventions.KindRetrieval, conventions.KindEmbedding:
				return false
			}
		}
	}
	return llm
}

// isLLMKind reports whether v, a value of openinference.span.kind, names a generation (LLM).
func isLLMKind(v *Value) bool {
	return v.Type == TypeStr && conventions.KindOf(conventions.OIKind, conventions.Normalize(conventions.OIKind, v.Str())) == conventions.KindGeneration
}

// retrievalFam reports whether keys of family f are signs of a retrieval (the document lists).
func retrievalFam(f conventions.Fam) bool {
	return f <= conventions.FamRerankOut || conventions.Families[f].Sign&conventions.SignRetrieval != 0
}
