package assemble

import (
	"strconv"
	"strings"
	"unsafe"
)

// Held attributes share one copy of each well-known key instead of keeping the key string
// pdata allocated for every attribute of every span (e.g. 20 "retrieval.documents.{i}.document.*"
// keys of 48 bytes per retriever span, each a heap object for the collector to mark). The
// shared keys are slices of one string, so sizing recognises them by address.

// sharedKeyIndex bounds the {i} of the indexed keys that are shared.
const sharedKeyIndex = 16

// sharedFixedKeys are the keys without index that readers read (keepAttr); fixedKey maps each
// to its shared copy by position.
var sharedFixedKeys = [...]string{
	"openinference.span.kind",
	"input.value",
	"input.mime_type",
	"output.value",
	"output.mime_type",
	"session.id",
	"user.id",
	"enduser.id",
	"metadata",
	"reranker.query",
	"db.vector.query.top_k",
	"db.vector.query.result_count",
	"llm.prompts",
	"llm.model_name",
	"llm.request.model_name",
	"llm.response.model_name",
	"llm.token_count.prompt",
	"llm.usage.prompt_tokens",
	"llm.token_count.completion",
	"llm.usage.completion_tokens",
	"llm.request.type",
	"gen_ai.operation.name",
	"gen_ai.retrieval.query.text",
	"gen_ai.retrieval.documents",
	"gen_ai.data_source.id",
	"gen_ai.request.model",
	"gen_ai.response.model",
	"gen_ai.usage.input_tokens",
	"gen_ai.usage.output_tokens",
	"gen_ai.usage.prompt_tokens",
	"gen_ai.usage.completion_tokens",
	"gen_ai.conversation.id",
	"gen_ai.input.messages",
	"gen_ai.output.messages",
	"gen_ai.prompt",
	"gen_ai.completion",
	"traceloop.span.kind",
	"traceloop.entity.input",
	"traceloop.entity.output",
	"traceloop.workflow.name",
	"traceloop.association.properties.session_id",
	"traceloop.association.properties.session.id",
	"traceloop.association.properties.conversation_id",
	"traceloop.association.properties.user_id",
	"traceloop.association.properties.user.id",
	"traceloop.association.properties.route",
	"rag.query",
	"rag.answer",
	"rag.documents",
	"rag.citations",
	"rag.reference",
	"rag.relevance",
	"rag.feedback",
	"rag.route",
	"rag.session_id",
	"rag.session.id",
	"rag.user_id",
	"rag.user.id",
}

var (
	docFields    = []string{"document.id", "document.score", "document.content", "document.metadata"}
	msgFields    = []string{"message.role", "message.content"}
	legacyFields = []string{"role", "content"}
)

// The shared copies: sharedFixed[i] is sharedFixedKeys[i]; the indexed tables hold
// prefix + {i} + "." + field.
var (
	sharedFixed                                      [len(sharedFixedKeys)]string
	sharedRetrieval, sharedRerankIn, sharedRerankOut [sharedKeyIndex][]string
	sharedInMessages, sharedOutMessages              [sharedKeyIndex][]string
	sharedPrompt, sharedCompletion                   [sharedKeyIndex][]string
	sharedArena                                      string
)

// keySlot is the bytes each shared key's slot takes in sharedArena: every shared key starts a
// slot, so its address names it, and readers that meet a shared key know which it is without
// reading its text again (sharedKey).
const keySlot = 64

// Families of shared keys (keyInfo.fam).
const (
	keyFixed       = iota // one of sharedFixedKeys; field is its position there
	keyRetrieval          // retrieval.documents.{i}.{docFields[field]}
	keyRerankIn           // reranker.input_documents.{i}.{docFields[field]}
	keyRerankOut          // reranker.output_documents.{i}.{docFields[field]}
	keyInMessages         // llm.input_messages.{i}.{msgFields[field]}
	keyOutMessages        // llm.output_messages.{i}.{msgFields[field]}
	keyPrompt             // gen_ai.prompt.{i}.{legacyFields[field]}
	keyCompletion         // gen_ai.completion.{i}.{legacyFields[field]}
)

// Positions in docFields, msgFields and legacyFields (keyInfo.field).
const (
	docID, docScore, docContent, docMetadata = 0, 1, 2, 3
	msgRole, msgContent                      = 0, 1
)

// keyInfo is what a shared key is: its family, the {i} of an indexed key, its field, and its
// length (a string that starts a slot but is shorter or longer is not the shared key).
type keyInfo struct {
	fam, i, field, n uint8
}

var (
	sharedInfo []keyInfo // by slot
	arenaBase  uintptr   // the address of sharedArena's first byte
)

func init() {
	type family struct {
		fam    uint8
		prefix string
		fields []string
		table  *[sharedKeyIndex][]string
	}
	families := []family{
		{keyRetrieval, "retrieval.documents.", docFields, &sharedRetrieval},
		{keyRerankIn, "reranker.input_documents.", docFields, &sharedRerankIn},
		{keyRerankOut, "reranker.output_documents.", docFields, &sharedRerankOut},
		{keyInMessages, "llm.input_messages.", msgFields, &sharedInMessages},
		{keyOutMessages, "llm.output_messages.", msgFields, &sharedOutMessages},
		{keyPrompt, "gen_ai.prompt.", legacyFields, &sharedPrompt},
		{keyCompletion, "gen_ai.completion.", legacyFields, &sharedCompletion},
	}
	var b strings.Builder
	add := func(k string, in keyInfo) {
		if len(k) > keySlot {
			panic("assemble: shared key longer than its slot: " + k)
		}
		in.n = uint8(len(k))
		b.WriteString(k)
		b.WriteString(strings.Repeat("\x00", keySlot-len(k)))
		sharedInfo = append(sharedInfo, in)
	}
	for i, k := range sharedFixedKeys {
		add(k, keyInfo{fam: keyFixed, field: uint8(i)})
	}
	for _, f := range families {
		for i := range sharedKeyIndex {
			for j, field := range f.fields {
				add(f.prefix+strconv.Itoa(i)+"."+field, keyInfo{fam: f.fam, i: uint8(i), field: uint8(j)})
			}
		}
	}
	sharedArena = b.String()
	arenaBase = uintptr(unsafe.Pointer(unsafe.StringData(sharedArena)))
	slot := func(n int) string {
		return sharedArena[n*keySlot : n*keySlot+int(sharedInfo[n].n)]
	}
	for i := range sharedFixedKeys {
		sharedFixed[i] = slot(i)
	}
	n := len(sharedFixedKeys)
	for _, f := range families {
		for i := range sharedKeyIndex {
			f.table[i] = make([]string, len(f.fields))
			for j := range f.fields {
				f.table[i][j] = slot(n)
				n++
			}
		}
	}
}

// sharedKey says which shared key k is, by its address; false when k is not a copy keptKey
// returned (a key that is not well-known, or the same text elsewhere).
func sharedKey(k string) (keyInfo, bool) {
	off := uintptr(unsafe.Pointer(unsafe.StringData(k))) - arenaBase
	if off%keySlot != 0 || off/keySlot >= uintptr(len(sharedInfo)) {
		return keyInfo{}, false
	}
	in := sharedInfo[off/keySlot]
	if int(in.n) != len(k) || len(k) == 0 {
		return keyInfo{}, false
	}
	return in, true
}

// keptKey reports whether the span attribute k is kept (keepAttr), and returns its shared copy
// (k itself when it is not well-known). The keys of a RAG span are mostly well-known, each found
// by one switch before keepAttr is asked.
func keptKey(k string) (string, bool) {
	if len(k) > 0 {
		// Every key of these families is kept (keepAttr); the canonical ones are shared.
		switch k[0] {
		case 'r':
			switch {
			case strings.HasPrefix(k, "retrieval.documents."):
				return indexedKey(k, len("retrieval.documents."), docFields, &sharedRetrieval), true
			case strings.HasPrefix(k, "reranker.input_documents."):
				return indexedKey(k, len("reranker.input_documents."), docFields, &sharedRerankIn), true
			case strings.HasPrefix(k, "reranker.output_documents."):
				return indexedKey(k, len("reranker.output_documents."), docFields, &sharedRerankOut), true
			}
		case 'l':
			switch {
			case strings.HasPrefix(k, "llm.input_messages."):
				return indexedKey(k, len("llm.input_messages."), msgFields, &sharedInMessages), true
			case strings.HasPrefix(k, "llm.output_messages."):
				return indexedKey(k, len("llm.output_messages."), msgFields, &sharedOutMessages), true
			}
		case 'g':
			switch {
			case strings.HasPrefix(k, "gen_ai.prompt."):
				return indexedKey(k, len("gen_ai.prompt."), legacyFields, &sharedPrompt), true
			case strings.HasPrefix(k, "gen_ai.completion."):
				return indexedKey(k, len("gen_ai.completion."), legacyFields, &sharedCompletion), true
			}
		}
	}
	if s, ok := fixedKey(k); ok {
		return s, true // every fixed key is kept
	}
	return k, keepAttr(k)
}

func indexedKey(k string, prefix int, fields []string, table *[sharedKeyIndex][]string) string {
	i, field, ok := splitIndex(k[prefix:], sharedKeyIndex)
	digits := 1
	if i >= 10 {
		digits = 2 // sharedKeyIndex <= 100
	}
	if !ok || len(k)-prefix != digits+1+len(field) {
		return k // "01", "1" without field: not the canonical spelling
	}
	for j, f := range fields {
		if field == f {
			return table[i][j]
		}
	}
	return k
}

// fixedKey returns the shared copy of k when it is one of sharedFixedKeys.
func fixedKey(k string) (string, bool) {
	switch k {
	case "openinference.span.kind":
		return sharedFixed[0], true
	case "input.value":
		return sharedFixed[1], true
	case "input.mime_type":
		return sharedFixed[2], true
	case "output.value":
		return sharedFixed[3], true
	case "output.mime_type":
		return sharedFixed[4], true
	case "session.id":
		return sharedFixed[5], true
	case "user.id":
		return sharedFixed[6], true
	case "enduser.id":
		return sharedFixed[7], true
	case "metadata":
		return sharedFixed[8], true
	case "reranker.query":
		return sharedFixed[9], true
	case "db.vector.query.top_k":
		return sharedFixed[10], true
	case "db.vector.query.result_count":
		return sharedFixed[11], true
	case "llm.prompts":
		return sharedFixed[12], true
	case "llm.model_name":
		return sharedFixed[13], true
	case "llm.request.model_name":
		return sharedFixed[14], true
	case "llm.response.model_name":
		return sharedFixed[15], true
	case "llm.token_count.prompt":
		return sharedFixed[16], true
	case "llm.usage.prompt_tokens":
		return sharedFixed[17], true
	case "llm.token_count.completion":
		return sharedFixed[18], true
	case "llm.usage.completion_tokens":
		return sharedFixed[19], true
	case "llm.request.type":
		return sharedFixed[20], true
	case "gen_ai.operation.name":
		return sharedFixed[21], true
	case "gen_ai.retrieval.query.text":
		return sharedFixed[22], true
	case "gen_ai.retrieval.documents":
		return sharedFixed[23], true
	case "gen_ai.data_source.id":
		return sharedFixed[24], true
	case "gen_ai.request.model":
		return sharedFixed[25], true
	case "gen_ai.response.model":
		return sharedFixed[26], true
	case "gen_ai.usage.input_tokens":
		return sharedFixed[27], true
	case "gen_ai.usage.output_tokens":
		return sharedFixed[28], true
	case "gen_ai.usage.prompt_tokens":
		return sharedFixed[29], true
	case "gen_ai.usage.completion_tokens":
		return sharedFixed[30], true
	case "gen_ai.conversation.id":
		return sharedFixed[31], true
	case "gen_ai.input.messages":
		return sharedFixed[32], true
	case "gen_ai.output.messages":
		return sharedFixed[33], true
	case "gen_ai.prompt":
		return sharedFixed[34], true
	case "gen_ai.completion":
		return sharedFixed[35], true
	case "traceloop.span.kind":
		return sharedFixed[36], true
	case "traceloop.entity.input":
		return sharedFixed[37], true
	case "traceloop.entity.output":
		return sharedFixed[38], true
	case "traceloop.workflow.name":
		return sharedFixed[39], true
	case "traceloop.association.properties.session_id":
		return sharedFixed[40], true
	case "traceloop.association.properties.session.id":
		return sharedFixed[41], true
	case "traceloop.association.properties.conversation_id":
		return sharedFixed[42], true
	case "traceloop.association.properties.user_id":
		return sharedFixed[43], true
	case "traceloop.association.properties.user.id":
		return sharedFixed[44], true
	case "traceloop.association.properties.route":
		return sharedFixed[45], true
	case "rag.query":
		return sharedFixed[46], true
	case "rag.answer":
		return sharedFixed[47], true
	case "rag.documents":
		return sharedFixed[48], true
	case "rag.citations":
		return sharedFixed[49], true
	case "rag.reference":
		return sharedFixed[50], true
	case "rag.relevance":
		return sharedFixed[51], true
	case "rag.feedback":
		return sharedFixed[52], true
	case "rag.route":
		return sharedFixed[53], true
	case "rag.session_id":
		return sharedFixed[54], true
	case "rag.session.id":
		return sharedFixed[55], true
	case "rag.user_id":
		return sharedFixed[56], true
	case "rag.user.id":
		return sharedFixed[57], true
	}
	return k, false
}

// keyBytes is the heap a held attribute's key keeps: nothing for a shared key.
func keyBytes(k string) int64 {
	if len(k) > 0 {
		p := uintptr(unsafe.Pointer(unsafe.StringData(k)))
		lo := uintptr(unsafe.Pointer(unsafe.StringData(sharedArena)))
		if p >= lo && p < lo+uintptr(len(sharedArena)) {
			return 0
		}
	}
	return strBytes(k)
}

// upperKind is strings.ToUpper(s) for an OpenInference span kind, without ToUpper's scan when
// s is spelled as the conventions spell it, which is how instrumentations send it: readFacts
// and quickKind read the kind of every span.
func upperKind(s string) string {
	switch s {
	case "LLM", "CHAIN", "RETRIEVER", "RERANKER", "EMBEDDING", "TOOL", "AGENT", "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN":
		return s
	}
	return strings.ToUpper(s)
}

// lowerName is strings.ToLower(s) for the GenAI and Traceloop names readFacts and quickKind
// compare (gen_ai.operation.name, llm.request.type, traceloop.span.kind), without the scan
// when s is already one of their lower-case values.
func lowerName(s string) string {
	switch s {
	case "chat", "text_completion", "generate_content", "completion", "embeddings", "embedding",
		"retrieval", "vector_db_retrieve", "execute_tool", "create_agent", "invoke_agent",
		"workflow", "task", "agent", "tool", "rerank", "unknown":
		return s
	}
	return strings.ToLower(s)
}
