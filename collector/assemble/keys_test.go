package assemble

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestSharedKeys checks that keptKey never changes a key's text, shares every key readers
// read (fixed and indexed below sharedKeyIndex), and shares nothing else.
func TestSharedKeys(t *testing.T) {
	shared := func(k string) bool {
		s, _ := keptKey(k)
		if s != k {
			t.Fatalf("keptKey(%q) = %q", k, s)
		}
		return keyBytes(s) == 0
	}
	for _, k := range sharedFixedKeys {
		if !keepAttr(k) || !shared(k) {
			t.Errorf("%q: kept %v, shared %v", k, keepAttr(k), shared(k))
		}
	}
	for i := range sharedKeyIndex + 2 {
		n := strconv.Itoa(i)
		for _, k := range []string{"retrieval.documents." + n + ".document.content", "reranker.output_documents." + n + ".document.id",
			"reranker.input_documents." + n + ".document.score", "llm.input_messages." + n + ".message.role",
			"llm.output_messages." + n + ".message.content", "gen_ai.prompt." + n + ".content", "gen_ai.completion." + n + ".role"} {
			if got, want := shared(k), i < sharedKeyIndex; got != want {
				t.Errorf("%q: shared %v, want %v", k, got, want)
			}
		}
	}
	for _, k := range []string{"r", "retrieval.documents.", "retrieval.documents.1", "retrieval.documents.01.document.id",
		"retrieval.documents.1.document.ids", "llm.input_messages.2.message.contents.0.message_content.text",
		"gen_ai.prompt.1", "llm.model", "tag.x", "input.valu", "rag.other"} {
		if shared(k) {
			t.Errorf("%q is shared", k)
		}
	}
	if shared(string([]byte("input.value"))) != true {
		t.Error("a heap copy of a known key is not shared")
	}
}

// TestKeptKey checks that keptKey keeps exactly what keepAttr keeps, and gives every kept key
// back with its own text (TestSharedKeys checks which of them are shared copies).
func TestKeptKey(t *testing.T) {
	keys := append([]string{"", "r", "l", "g", "retrieval.documents.", "retrieval.documents.1",
		"retrieval.documents.01.document.id", "retrieval.documents.1.document.ids",
		"llm.input_messages.2.message.contents.0.message_content.text", "gen_ai.prompt.1", "gen_ai.prompt",
		"gen_ai.completion", "llm.model", "llm.provider", "llm.invocation_parameters", "llm.token_count.total",
		"llm.prompts.0", "llm.choices.0.text", "tag.x", "input.valu", "rag.other", "rag.", "annotations.",
		"annotations.helpful", "evaluations.x", "traceloop.other", "db.system", "metadata.x", "enduser.role",
		"reranker.model_name", "reranker.query", "reranker.top_k", "gen_ai.system", "x.input.value"},
		sharedFixedKeys[:]...)
	for i := range sharedKeyIndex + 2 {
		n := strconv.Itoa(i)
		keys = append(keys, "retrieval.documents."+n+".document.content", "reranker.output_documents."+n+".document.id",
			"reranker.input_documents."+n+".document.score", "reranker.input_documents."+n+".document.other",
			"llm.input_messages."+n+".message.role", "llm.output_messages."+n+".message.content",
			"gen_ai.prompt."+n+".content", "gen_ai.completion."+n+".role", "gen_ai.completion."+n+".x")
	}
	for _, k := range keys {
		got, kept := keptKey(k)
		if kept != keepAttr(k) {
			t.Errorf("keptKey(%q) kept %v, keepAttr %v", k, kept, keepAttr(k))
		}
		if got != k {
			t.Errorf("keptKey(%q) = %q", k, got)
		}
	}
}

// upperKind and lowerName change nothing but the speed: for their listed values in every mix of
// cases (so a value listed in the wrong case is found) and anything else, they give what
// strings.ToUpper and ToLower give.
func TestUpperKindLowerName(t *testing.T) {
	words := []string{"", "ẞig", "ﬃ", "İ", "k\u212a", "Llm\u0130",
		"llm", "chain", "retriever", "reranker", "embedding", "tool", "agent", "guardrail", "evaluator", "prompt", "unknown",
		"chat", "text_completion", "generate_content", "completion", "embeddings",
		"retrieval", "vector_db_retrieve", "execute_tool", "create_agent", "invoke_agent",
		"workflow", "task", "rerank"}
	n := 0
	for _, w := range words {
		var letters []int // where w has an ASCII letter
		for i := 0; i < len(w); i++ {
			if unicode.IsLetter(rune(w[i])) && w[i] < 0x80 {
				letters = append(letters, i)
			}
		}
		b := []byte(w)
		for mask := 0; mask < 1<<len(letters); mask++ {
			for j, i := range letters {
				b[i] = w[i]
				if mask&(1<<j) != 0 {
					b[i] = byte(unicode.ToUpper(rune(w[i])))
				}
			}
			in := string(b)
			n++
			if got, want := upperKind(in), strings.ToUpper(in); got != want {
				t.Fatalf("upperKind(%q) = %q, want %q", in, got, want)
			}
			if got, want := lowerName(in), strings.ToLower(in); got != want {
				t.Fatalf("lowerName(%q) = %q, want %q", in, got, want)
			}
		}
	}
	if n < 1<<16 {
		t.Fatalf("%d spellings tried", n)
	}
}
