package assemble

import (
	"reflect"
	"slices"
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

// TestSharedKeyInfo checks that sharedKey names every shared key by its address: the family,
// index and field it gives spell the key's text, and no other string is taken for one (a heap
// copy, a shorter or shifted slice of a shared key, the empty string).
func TestSharedKeyInfo(t *testing.T) {
	fields := map[uint8][]string{keyRetrieval: docFields, keyRerankIn: docFields, keyRerankOut: docFields,
		keyInMessages: msgFields, keyOutMessages: msgFields, keyPrompt: legacyFields, keyCompletion: legacyFields}
	prefixes := map[uint8]string{keyRetrieval: "retrieval.documents.", keyRerankIn: "reranker.input_documents.",
		keyRerankOut: "reranker.output_documents.", keyInMessages: "llm.input_messages.",
		keyOutMessages: "llm.output_messages.", keyPrompt: "gen_ai.prompt.", keyCompletion: "gen_ai.completion."}
	var keys []string
	keys = append(keys, sharedFixedKeys[:]...)
	for fam, prefix := range prefixes {
		for i := range sharedKeyIndex {
			for _, f := range fields[fam] {
				keys = append(keys, prefix+strconv.Itoa(i)+"."+f)
			}
		}
	}
	if len(keys) != len(sharedInfo) {
		t.Fatalf("%d shared keys, %d slots", len(keys), len(sharedInfo))
	}
	// The setters take a field by its position in these lists, from either path.
	for _, c := range []struct {
		fields []string
		at     int
		want   string
	}{{docFields, docID, "document.id"}, {docFields, docScore, "document.score"}, {docFields, docContent, "document.content"},
		{docFields, docMetadata, "document.metadata"}, {msgFields, msgRole, "message.role"}, {msgFields, msgContent, "message.content"},
		{legacyFields, msgRole, "role"}, {legacyFields, msgContent, "content"}} {
		if c.fields[c.at] != c.want {
			t.Errorf("field %d of %q is %q, want %q", c.at, c.fields, c.fields[c.at], c.want)
		}
	}
	for _, k := range keys {
		s, _ := keptKey(k)
		in, ok := sharedKey(s)
		if !ok {
			t.Errorf("%q: not known by its address", k)
			continue
		}
		var spelled string
		if in.fam == keyFixed {
			spelled = sharedFixedKeys[in.field]
		} else {
			spelled = prefixes[in.fam] + strconv.Itoa(int(in.i)) + "." + fields[in.fam][in.field]
		}
		if spelled != k {
			t.Errorf("%q: sharedKey says %q (%+v)", k, spelled, in)
		}
		for _, other := range []string{strings.Clone(s), s[:len(s)-1], s[1:]} {
			if in, ok := sharedKey(other); ok {
				t.Errorf("%q taken for a shared key: %+v", other, in)
			}
		}
	}
	if _, ok := sharedKey(""); ok {
		t.Error(`"" taken for a shared key`)
	}
	if _, ok := sharedKey(sharedArena[keySlot*len(sharedInfo)-1:]); ok {
		t.Error("the arena's last byte taken for a shared key")
	}
}

// sharedKeySpans are spans of every indexed family of shared keys: every field and index, with
// holes, fields repeated, values of every type, next to fixed keys; then every family in one
// span, and a list spelled both shared and unshared.
func sharedKeySpans() []Span {
	prefixes := []string{"retrieval.documents.", "reranker.input_documents.", "reranker.output_documents.",
		"llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion."}
	fieldsOf := [][]string{docFields, docFields, docFields, msgFields, msgFields, legacyFields, legacyFields}
	values := []Value{Str("text"), Str("user"), Str(""), Str(`[{"type": "text", "text": "block"}]`), Str(" 0.75 "),
		Str("assistant"), Double(0.5), Int(3), Bool(true), Raw(map[string]any{"route": "faq"}), {}}
	var spans []Span
	for p, prefix := range prefixes {
		for _, idx := range [][]int{{0}, {2}, {0, 1, 2, 3, 4}, {15, 3}, {sharedKeyIndex - 1}} {
			for vi := range values {
				var as []Attr
				for _, i := range idx {
					for fi, field := range fieldsOf[p] {
						as = append(as, Attr{Key: prefix + strconv.Itoa(i) + "." + field, Value: values[(vi+fi+i)%len(values)]})
					}
				}
				kind := []string{"RETRIEVER", "LLM"}[vi%2]
				as = append(as, Attr{Key: as[0].Key, Value: values[(vi+1)%len(values)]}, // read twice: the last wins
					Attr{Key: "openinference.span.kind", Value: Str(kind)}, Attr{Key: "input.value", Value: Str("q")})
				spans = append(spans, Span{Name: "s", Attrs: as})
			}
		}
	}
	var all []Attr
	for _, s := range spans {
		all = append(all, s.Attrs...)
	}
	return append(spans, Span{Name: "all", Attrs: all}, Span{Name: "mixed", Attrs: []Attr{
		{Key: "retrieval.documents.0.document.id", Value: Str("a")},
		{Key: "retrieval.documents.01.document.content", Value: Str("unshared spelling")},
		{Key: "retrieval.documents.20.document.id", Value: Str("beyond the shared indices")},
		{Key: "retrieval.documents.1.document.score", Value: Double(0.25)},
		{Key: "llm.input_messages.0.message.role", Value: Str("user")},
		{Key: "llm.input_messages.00.message.content", Value: Str("unshared spelling")},
		{Key: "llm.input_messages.1.message.contents.0.message_content.text", Value: Str("part")},
		{Key: "llm.input_messages.2.message.role", Value: Str("system")},
		{Key: "llm.input_messages.2.message.content", Value: Str("context")},
	}})
}

// bothSpellings returns s with every key its shared copy (keptKey), and with every key a heap
// copy, which readers read by its text.
func bothSpellings(t *testing.T, s Span) (shared, text Span) {
	shared, text = s, s
	shared.Attrs, text.Attrs = slices.Clone(s.Attrs), slices.Clone(s.Attrs)
	n := 0
	for i := range s.Attrs {
		shared.Attrs[i].Key, _ = keptKey(s.Attrs[i].Key)
		text.Attrs[i].Key = strings.Clone(s.Attrs[i].Key)
		if _, ok := sharedKey(shared.Attrs[i].Key); ok {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("span %s: no shared key", s.Name)
	}
	return shared, text
}

// TestReadFactsSharedKeys checks that readFacts reads an attribute under a shared key (by its
// address, readIndexed) exactly as under the same key's text.
func TestReadFactsSharedKeys(t *testing.T) {
	for n, s := range sharedKeySpans() {
		shared, text := bothSpellings(t, s)
		var byAddr, byText facts
		readFacts(&byAddr, &shared)
		readFacts(&byText, &text)
		if !reflect.DeepEqual(byAddr, byText) {
			t.Errorf("span %d (%s, %d attributes): read by address\n%+v\nby text\n%+v", n, s.Name, len(s.Attrs), byAddr, byText)
		}
	}
}

// TestPruneSharedKeys checks that pruneSpanAttrs keeps the same attributes of a span whether
// its keys are shared (known by their address) or not (read by their text).
func TestPruneSharedKeys(t *testing.T) {
	pruned := 0
	for n, s := range sharedKeySpans() {
		shared, text := bothSpellings(t, s)
		var msgs []message
		a := pruneSpanAttrs(shared.Attrs, &shared, &msgs)
		b := pruneSpanAttrs(text.Attrs, &text, &msgs)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("span %d (%s): kept by address\n%+v\nby text\n%+v", n, s.Name, a, b)
		}
		if len(a) < len(s.Attrs) {
			pruned++
		}
	}
	if pruned < 10 {
		t.Errorf("%d spans pruned: the spans do not exercise pruning", pruned)
	}
}
