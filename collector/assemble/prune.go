package assemble

import (
	"strings"
)

// What a held span keeps. A trace waits up to assembly.wait (or timeout) in memory, so FromTraces
// keeps only the attributes the readers (facts.go, readers.go, quickKind, hasFeedback) will ever
// read, and drops the input messages they will not: a RAG app's LLM span carries its whole
// context (several KB) in a system message, and assembly reads only the user and assistant
// messages (the question and the conversation's history, history.go).
// Every reader's result is the same with or without what is dropped here.

// keepAttr reports whether a span attribute is one a reader reads: the keys of readFacts (and
// of quickKind and hasFeedback, which read a subset), and every rag.* key.
func keepAttr(k string) bool {
	head, rest := k, ""
	if i := strings.IndexByte(k, '.'); i >= 0 {
		head, rest = k[:i], k[i+1:]
	}
	switch head {
	case "llm":
		switch rest {
		case "prompts", "model_name", "request.model_name", "response.model_name", "token_count.prompt",
			"usage.prompt_tokens", "token_count.completion", "usage.completion_tokens", "request.type":
			return true
		}
		return strings.HasPrefix(rest, "input_messages.") || strings.HasPrefix(rest, "output_messages.") ||
			strings.HasPrefix(rest, "prompts.") || strings.HasPrefix(rest, "choices.")
	case "gen_ai":
		switch rest {
		case "operation.name", "retrieval.query.text", "retrieval.documents", "data_source.id",
			"request.model", "response.model", "usage.input_tokens", "usage.output_tokens",
			"usage.prompt_tokens", "usage.completion_tokens", "conversation.id", "input.messages",
			"output.messages", "prompt", "completion":
			return true
		}
		return strings.HasPrefix(rest, "prompt.") || strings.HasPrefix(rest, "completion.")
	case "retrieval":
		return strings.HasPrefix(rest, "documents.")
	case "reranker":
		return rest == "query" || strings.HasPrefix(rest, "input_documents.") || strings.HasPrefix(rest, "output_documents.")
	case "annotations", "evaluations":
		return rest != ""
	case "traceloop":
		switch rest {
		case "span.kind", "entity.input", "entity.output", "workflow.name",
			"association.properties.session_id", "association.properties.session.id",
			"association.properties.conversation_id", "association.properties.user_id",
			"association.properties.user.id", "association.properties.route":
			return true
		}
		return false
	case "rag":
		// ragwatch's own namespace is held whole: an application that sets rag.* means it for
		// ragwatch (and the service's TestMemoryFloodStaysBounded floods the assembler with it).
		return true
	case "db":
		return rest == "vector.query.top_k" || rest == "vector.query.result_count"
	case "openinference":
		return rest == "span.kind"
	case "input", "output":
		return rest == "value" || rest == "mime_type"
	case "session", "user":
		return rest == "id"
	case "enduser":
		return rest == "id"
	case "metadata":
		return k == "metadata"
	}
	return false
}

func keepEvent(name string) bool {
	return strings.HasPrefix(name, "gen_ai.") || name == "db.query.result" || name == "db.search.result"
}

// eventAttrFilter returns which attributes of an event to keep: of the events that carry span
// keys (readGenAIEventAttr), those four keys; of every other event, all.
func eventAttrFilter(name string) int {
	switch name {
	case "gen_ai.content.prompt", "gen_ai.content.completion", "gen_ai.client.inference.operation.details":
		return filterGenAIEvents
	}
	return filterNone
}

func keepGenAIEventAttr(k string) bool {
	switch k {
	case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion":
		return true
	}
	return false
}

// keepMessageEvent reports whether a span event is worth holding. An input message event
// (gen_ai.{system,user,assistant,tool}.message) is read only as a candidate for the last user
// message: one whose role is neither user nor empty, or that has no text, is never read.
func keepMessageEvent(e *Event, attrs []Attr) bool {
	var role string
	switch e.Name {
	case "gen_ai.system.message":
		role = "system"
	case "gen_ai.user.message":
		role = "user"
	case "gen_ai.assistant.message":
		role = "assistant"
	case "gen_ai.tool.message":
		role = "tool"
	default:
		return true
	}
	m := messageFromEvent(&Event{Name: e.Name, Attrs: attrs}, role)
	return (strings.EqualFold(m.role, "user") || m.role == "") && m.text() != ""
}

// pruneSpanAttrs drops the span attributes that no reader will read given the others: the
// input messages other than those lastUserText and historyOf can return, and the input of a span that is
// certainly a generation and not a retrieval (only retrievals' and non-generation turns' input
// is read; OpenInference puts an LLM call's whole request there). msgs is scratch.
func pruneSpanAttrs(as []Attr, s *Span, msgs *[]message) []Attr {
	var oiIn, legacyIn, plainPrompt, llm bool
	for i := range as {
		k := as[i].Key
		if len(k) < len("gen_ai.prompt") || (k[0] != 'l' && k[0] != 'g' && k[0] != 'o') {
			continue // none of the cases below
		}
		switch {
		case k == "openinference.span.kind":
			v := &as[i].Value
			llm = v.Type == TypeStr && len(v.Str()) == 3 && strings.ToUpper(v.Str()) == "LLM" // as onlyGeneration reads it
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
		keepOI = readMessages(as, keyInMessages, msgs, oiBuf[:0])
	}
	if legacyIn {
		keepLegacy = readMessages(as, keyPrompt, msgs, legacyBuf[:0])
	}
	out := 0
	for i := range as {
		k := as[i].Key
		drop := false
		if in, ok := sharedKey(k); ok && in.fam != keyFixed {
			// A list's element, known by its key's address.
			drop = (oiIn && in.fam == keyInMessages && !indexKept(int(in.i), keepOI)) ||
				(legacyIn && in.fam == keyPrompt && !indexKept(int(in.i), keepLegacy))
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
// messages a reader reads: the one lastText(msgs, "user") returns, and every user or assistant
// message with text (historyOf reads those as the conversation's history). The list is built
// with the reader's own setters, exactly as readFacts builds it; keep is appended to and
// returned.
func readMessages(as []Attr, fam uint8, scratch *[]message, keep []bool) []bool {
	prefix, set, setAt := "llm.input_messages.", setOIMessage, setMessage
	if fam == keyPrompt {
		prefix, set, setAt = "gen_ai.prompt.", setRoleContent, setLegacyMessage
	}
	msgs := (*scratch)[:0]
	defer func() {
		clear(msgs)
		*scratch = msgs[:0]
	}()
	for i := range as {
		if in, ok := sharedKey(as[i].Key); ok && in.fam != keyFixed {
			if in.fam == fam { // known by its address
				msgs = setAt(msgs, int(in.i), int(in.field), as[i].Value)
			}
		} else if rest, ok := strings.CutPrefix(as[i].Key, prefix); ok {
			msgs = set(msgs, rest, as[i].Value)
		}
	}
	for k := range msgs {
		keep = append(keep, historyMessage(&msgs[k]))
	}
	if lastUser(msgs) < 0 { // lastText falls back to the last message without a role
		for k := len(msgs) - 1; k >= 0; k-- {
			if msgs[k].role == "" && msgs[k].text() != "" {
				keep[k] = true
				break
			}
		}
	}
	return keep
}

// messageKept reports whether the key suffix "{i}...." belongs to a message marked in keep.
func messageKept(rest string, keep []bool) bool {
	i, _, valid := splitIndex(rest, maxIndexed)
	return valid && indexKept(i, keep)
}

// indexKept reports whether message i is marked in keep.
func indexKept(i int, keep []bool) bool {
	return i < len(keep) && keep[i]
}

// onlyGeneration reports whether readFacts will certainly classify the span as a generation
// and not a retrieval: its OpenInference kind is LLM, and none of the signs of a retrieval or an
// embedding is present.
func onlyGeneration(as []Attr, s *Span) bool {
	if strings.HasPrefix(s.Name, "vector_db_retrieve") {
		return false
	}
	for i := range s.Events {
		if n := s.Events[i].Name; n == "db.query.result" || n == "db.search.result" {
			return false
		}
	}
	llm := false
	for i := range as {
		k := as[i].Key
		if len(k) < len("reranker.") {
			continue // shorter than every key below
		}
		switch k[0] {
		case 'o', 'g', 'l', 'r', 'd':
		default:
			continue // no key below starts otherwise
		}
		switch k {
		case "openinference.span.kind":
			v := &as[i].Value
			llm = v.Type == TypeStr && len(v.Str()) == 3 && strings.ToUpper(v.Str()) == "LLM" // Text() of any other type is never "LLM"
		case "gen_ai.operation.name":
			switch strings.ToLower(as[i].Value.Text()) {
			case "retrieval", "vector_db_retrieve", "embeddings", "embedding":
				return false
			}
		case "llm.request.type":
			switch strings.ToLower(as[i].Value.Text()) {
			case "embedding", "embeddings":
				return false
			}
		case "gen_ai.retrieval.documents", "rag.documents", "db.vector.query.top_k", "db.vector.query.result_count":
			return false
		default:
			if strings.HasPrefix(k, "retrieval.") || strings.HasPrefix(k, "reranker.") {
				return false
			}
		}
	}
	return llm
}
