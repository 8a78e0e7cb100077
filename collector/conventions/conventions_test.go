package conventions

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// nearMisses returns strings close to k: cut short, one byte longer, one byte changed at each
// end and in the middle, and in another case.
func nearMisses(k string) []string {
	out := []string{k[:len(k)-1], k[1:], k + "x", k + ".", strings.ToUpper(k), "x" + k}
	for _, i := range []int{0, len(k) / 2, len(k) - 1} {
		b := []byte(k)
		b[i] ^= 1
		out = append(out, string(b))
	}
	return out
}

// familyKeys are keys of every family: canonical, beyond the shared indices, of other fields.
func familyKeys() []string {
	var keys []string
	for _, f := range Families {
		keys = append(keys, f.Prefix+"x", f.Prefix+"0", f.Prefix+"3.other")
		for i := range SharedIndex + 2 {
			for _, field := range f.Fields {
				keys = append(keys, f.Prefix+strconv.Itoa(i)+"."+field)
			}
		}
	}
	return keys
}

// TestTableDerived checks that every row of the tables is recognised by every lookup derived
// from them, and that the lookups recognise nothing else.
func TestTableDerived(t *testing.T) {
	names := map[string]bool{}
	for i := range Keys {
		k := &Keys[i]
		if names[k.Name] {
			t.Errorf("%q: two rows", k.Name)
		}
		names[k.Name] = true
		if got, ok := Lookup(strings.Clone(k.Name)); !ok || got != k {
			t.Errorf("Lookup(%q) = %v, %v", k.Name, got, ok)
		}
		shared, kept := KeptKey(strings.Clone(k.Name))
		in, isShared := Shared(shared)
		if !kept || shared != k.Name || !isShared || !in.Fixed || in.Key != k || !IsShared(shared) || !Kept(k.Name) {
			t.Errorf("%q: KeptKey = %q, %v; Shared = %+v, %v", k.Name, shared, kept, in, isShared)
		}
		if fixed, ok := FixedKey(k.Name); !ok || fixed != shared {
			t.Errorf("FixedKey(%q) = %q, %v", k.Name, fixed, ok)
		}
		if k.Field == None || k.Field >= numFields {
			t.Errorf("%q: no field", k.Name)
		}
		if _, _, ok := FamilyOf(k.Name); ok && !strings.HasPrefix(k.Name, "rag.") && k.Name != "reranker.query" {
			t.Errorf("%q is a row and a family's key", k.Name) // rag.* rows are named within their kept family
		}
	}
	for i := range Keys {
		for _, miss := range nearMisses(Keys[i].Name) {
			if key, ok := Lookup(miss); ok != names[miss] || (ok && key.Name != miss) {
				t.Errorf("Lookup(%q) = %v, %v", miss, key, ok)
			}
			if _, ok := FixedKey(miss); ok != names[miss] {
				t.Errorf("FixedKey(%q) = %v", miss, ok)
			}
		}
	}
	for _, k := range familyKeys() {
		f, rest, ok := FamilyOf(k)
		if !ok || Families[f].Prefix+rest != k || !Kept(k) {
			t.Errorf("FamilyOf(%q) = %d %q %v", k, f, rest, ok)
		}
		if _, ok := Lookup(k); ok {
			t.Errorf("Lookup(%q) found a family's key", k)
		}
	}
	for _, f := range Families {
		if _, _, ok := FamilyOf(f.Prefix); ok || Kept(f.Prefix) {
			t.Errorf("a bare prefix %q is a key of its family", f.Prefix)
		}
	}
	// Each kind value is read as its field's Normalize spells it, and names its kind.
	for _, kv := range KindValues {
		if Normalize(kv.Field, kv.Value) != kv.Value || KindOf(kv.Field, kv.Value) != kv.Kind {
			t.Errorf("%+v: Normalize %q, KindOf %v", kv, Normalize(kv.Field, kv.Value), KindOf(kv.Field, kv.Value))
		}
	}
	for _, e := range Events {
		if got, ok := EventOf(e.Name); !ok || *got != e {
			t.Errorf("EventOf(%q) = %v, %v", e.Name, got, ok)
		}
		if !KeptEvent(e.Name) {
			t.Errorf("event %q not kept", e.Name)
		}
	}
	for _, k := range EventKeys {
		if key, ok := Lookup(k); !ok || !EventKey(k) {
			t.Errorf("event key %q: Lookup %v, %v", k, key, ok)
		}
	}
	if KeptEvent("db.other") || EventKey("gen_ai.system") || KindOf(OIKind, "CHAIN") != KindNone {
		t.Error("a lookup recognises what the tables do not hold")
	}
}

// TestKeysAreTheSwitchsKeys checks that the table holds exactly the keys of the switch it
// replaced (fixedKeySwitch, the shared fixed keys before the table), and the rows added since
// (addedSinceTable).
func TestKeysAreTheSwitchsKeys(t *testing.T) {
	n, added := 0, 0
	for _, k := range Keys {
		if addedSinceTable(k.Name) {
			added++
			continue
		}
		if _, ok := fixedKeySwitch(k.Name); !ok {
			t.Errorf("%q is not in the switch", k.Name)
		}
	}
	for k := range switchKeys() {
		n++
		if _, ok := Lookup(k); !ok {
			t.Errorf("the switch's %q is not in the table", k)
		}
	}
	if n != len(Keys)-added {
		t.Errorf("the switch has %d keys, the table %d before the rows added since", n, len(Keys)-added)
	}
}

// addedSinceTable reports whether k is a row the table gained after it replaced the switches:
// the Vercel AI SDK's (ai.*), and gen_ai.response.id (where evaluations are placed).
func addedSinceTable(k string) bool {
	key, ok := Lookup(k)
	return ok && (strings.HasPrefix(key.Name, "ai.") || key.Name == "gen_ai.response.id")
}

// switchKeys yields the keys fixedKeySwitch knows, by their position.
func switchKeys() func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, k := range Keys {
			if _, ok := fixedKeySwitch(k.Name); ok && !yield(k.Name) {
				return
			}
		}
	}
}

// TestKeptAsBefore checks that Kept keeps what keepAttr kept before the table
// (keepAttrBefore) on every key the tables name and their near misses, with one change: a
// bare family prefix ("rag.", "retrieval.documents.") or "rag", which no reader reads, is no
// longer held.
func TestKeptAsBefore(t *testing.T) {
	keys := []string{"", "r", "rag", "rag.", "metadata", "metadata.x", "enduser.role", "db.system", "llm.model",
		"llm.provider", "llm.token_count.total", "reranker.model_name", "reranker.top_k", "gen_ai.system",
		"x.input.value", "annotations.", "annotations.helpful", "evaluations.x", "traceloop.other", "input.valu",
		"llm.input_messages.2.message.contents.0.message_content.text", "tag.x"}
	for _, k := range Keys {
		keys = append(keys, k.Name)
		keys = append(keys, nearMisses(k.Name)...)
	}
	keys = append(keys, familyKeys()...)
	bare := map[string]bool{"rag": true}
	for _, f := range Families {
		bare[f.Prefix] = true
		keys = append(keys, f.Prefix)
	}
	for _, k := range keys {
		want := (keepAttrBefore(k) || addedSinceTable(k)) && !bare[k]
		if got := Kept(k); got != want {
			t.Errorf("Kept(%q) = %v, before %v", k, got, want)
		}
		if s, kept := KeptKey(k); kept != want || s != k {
			t.Errorf("KeptKey(%q) = %q, %v", k, s, kept)
		}
	}
}

// TestSharedKeys checks that KeptKey shares every key readers read (fixed and indexed below
// SharedIndex) and nothing else, and that Shared names each shared key by its address: what it
// says spells the key's text, and no other string is taken for one (a heap copy, a shorter or
// shifted slice of a shared key, the empty string).
func TestSharedKeys(t *testing.T) {
	var keys []string
	for _, k := range familyKeys() {
		f, rest, _ := FamilyOf(k)
		i, field, ok := SplitIndex(rest, 100)
		shared, _ := KeptKey(k)
		want := f < numListFams && ok && i < SharedIndex && field != "other" && len(rest) == len(strconv.Itoa(i))+1+len(field)
		if IsShared(shared) != want {
			t.Errorf("%q: shared %v, want %v", k, IsShared(shared), want)
		}
		if want {
			keys = append(keys, k)
		}
	}
	for _, k := range Keys {
		keys = append(keys, k.Name)
	}
	if len(keys) != len(infos) {
		t.Fatalf("%d shared keys, %d slots", len(keys), len(infos))
	}
	for _, k := range keys {
		s, _ := KeptKey(k)
		in, ok := Shared(s)
		if !ok {
			t.Errorf("%q: not known by its address", k)
			continue
		}
		spelled := ""
		if in.Fixed {
			spelled = in.Key.Name
		} else {
			spelled = Families[in.Fam].Prefix + strconv.Itoa(int(in.I)) + "." + Families[in.Fam].Fields[in.Field]
		}
		if spelled != k {
			t.Errorf("%q: Shared says %q (%+v)", k, spelled, in)
		}
		for _, other := range []string{strings.Clone(s), s[:len(s)-1], s[1:]} {
			if in, ok := Shared(other); ok {
				t.Errorf("%q taken for a shared key: %+v", other, in)
			}
		}
	}
	if _, ok := Shared(""); ok || IsShared("") {
		t.Error(`"" taken for a shared key`)
	}
	if _, ok := Shared(arena[keySlot*len(infos)-1:]); ok {
		t.Error("the arena's last byte taken for a shared key")
	}
	// The setters take a field by its position in these lists, from either path.
	for _, c := range []struct {
		fields []string
		at     int
		want   string
	}{{DocFields, DocID, "document.id"}, {DocFields, DocScore, "document.score"}, {DocFields, DocContent, "document.content"},
		{DocFields, DocMetadata, "document.metadata"}, {MsgFields, MsgRole, "message.role"}, {MsgFields, MsgContent, "message.content"},
		{LegacyFields, MsgRole, "role"}, {LegacyFields, MsgContent, "content"}} {
		if c.fields[c.at] != c.want {
			t.Errorf("field %d of %q is %q, want %q", c.at, c.fields, c.fields[c.at], c.want)
		}
	}
}

// Normalize changes nothing but the speed: for the kind values in every mix of cases and
// anything else (non-ASCII letters whose case maps change the bytes), it gives what
// strings.ToUpper (OIKind) and ToLower (the other kinds) give.
func TestNormalize(t *testing.T) {
	words := []string{"", "ẞig", "ﬃ", "İ", "k\u212a", "Llm\u0130"}
	for _, kv := range KindValues {
		words = append(words, kv.Value)
	}
	words = append(words, "CHAIN", "TOOL", "AGENT", "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN",
		"execute_tool", "create_agent", "invoke_agent", "workflow", "task", "agent", "tool", "rerank")
	n := 0
	for _, w := range words {
		var letters []int // where w has an ASCII letter
		for i := 0; i < len(w); i++ {
			if unicode.IsLetter(rune(w[i])) && w[i] < 0x80 {
				letters = append(letters, i)
			}
		}
		b := []byte(w)
		for mask := 0; mask < 1<<min(len(letters), 12); mask++ {
			for j, i := range letters {
				b[i] = w[i]
				if mask&(1<<j) != 0 {
					b[i] = byte(unicode.ToUpper(rune(w[i])))
				}
			}
			in := string(b)
			n++
			if got, want := Normalize(OIKind, in), strings.ToUpper(in); got != want {
				t.Fatalf("Normalize(OIKind, %q) = %q, want %q", in, got, want)
			}
			for _, f := range []Field{Operation, LLMRequestType, TraceloopKind} {
				if got, want := Normalize(f, in), strings.ToLower(in); got != want {
					t.Fatalf("Normalize(%d, %q) = %q, want %q", f, in, got, want)
				}
			}
		}
	}
	if n < 1<<14 {
		t.Fatalf("%d spellings tried", n)
	}
}

// BenchmarkFixedKey compares the perfect hash over the table with the switch it replaced, on
// the keys of a RAG span (every fixed key, and as many keys that are none of them).
func BenchmarkFixedKey(b *testing.B) {
	var keys []string
	for _, k := range Keys {
		keys = append(keys, strings.Clone(k.Name), "app."+k.Name[:len(k.Name)/2])
	}
	b.Run("table", func(b *testing.B) {
		n := 0
		for b.Loop() {
			for _, k := range keys {
				if _, ok := Lookup(k); ok {
					n++
				}
			}
		}
		if n == 0 {
			b.Fatal("no key found")
		}
	})
	b.Run("switch", func(b *testing.B) {
		n := 0
		for b.Loop() {
			for _, k := range keys {
				if _, ok := fixedKeySwitch(k); ok {
					n++
				}
			}
		}
		if n == 0 {
			b.Fatal("no key found")
		}
	})
}

// fixedKeySwitch is the switch of the shared fixed keys before the table (by position), kept
// as the reference of TestKeysAreTheSwitchsKeys and BenchmarkFixedKey.
func fixedKeySwitch(k string) (int, bool) {
	switch k {
	case "openinference.span.kind":
		return 0, true
	case "input.value":
		return 1, true
	case "input.mime_type":
		return 2, true
	case "output.value":
		return 3, true
	case "output.mime_type":
		return 4, true
	case "session.id":
		return 5, true
	case "user.id":
		return 6, true
	case "enduser.id":
		return 7, true
	case "metadata":
		return 8, true
	case "reranker.query":
		return 9, true
	case "db.vector.query.top_k":
		return 10, true
	case "db.vector.query.result_count":
		return 11, true
	case "llm.prompts":
		return 12, true
	case "llm.model_name":
		return 13, true
	case "llm.request.model_name":
		return 14, true
	case "llm.response.model_name":
		return 15, true
	case "llm.token_count.prompt":
		return 16, true
	case "llm.usage.prompt_tokens":
		return 17, true
	case "llm.token_count.completion":
		return 18, true
	case "llm.usage.completion_tokens":
		return 19, true
	case "llm.request.type":
		return 20, true
	case "gen_ai.operation.name":
		return 21, true
	case "gen_ai.retrieval.query.text":
		return 22, true
	case "gen_ai.retrieval.documents":
		return 23, true
	case "gen_ai.data_source.id":
		return 24, true
	case "gen_ai.request.model":
		return 25, true
	case "gen_ai.response.model":
		return 26, true
	case "gen_ai.usage.input_tokens":
		return 27, true
	case "gen_ai.usage.output_tokens":
		return 28, true
	case "gen_ai.usage.prompt_tokens":
		return 29, true
	case "gen_ai.usage.completion_tokens":
		return 30, true
	case "gen_ai.conversation.id":
		return 31, true
	case "gen_ai.input.messages":
		return 32, true
	case "gen_ai.output.messages":
		return 33, true
	case "gen_ai.prompt":
		return 34, true
	case "gen_ai.completion":
		return 35, true
	case "traceloop.span.kind":
		return 36, true
	case "traceloop.entity.input":
		return 37, true
	case "traceloop.entity.output":
		return 38, true
	case "traceloop.workflow.name":
		return 39, true
	case "traceloop.association.properties.session_id":
		return 40, true
	case "traceloop.association.properties.session.id":
		return 41, true
	case "traceloop.association.properties.conversation_id":
		return 42, true
	case "traceloop.association.properties.user_id":
		return 43, true
	case "traceloop.association.properties.user.id":
		return 44, true
	case "traceloop.association.properties.route":
		return 45, true
	case "rag.query":
		return 46, true
	case "rag.answer":
		return 47, true
	case "rag.documents":
		return 48, true
	case "rag.citations":
		return 49, true
	case "rag.reference":
		return 50, true
	case "rag.relevance":
		return 51, true
	case "rag.feedback":
		return 52, true
	case "rag.route":
		return 53, true
	case "rag.session_id":
		return 54, true
	case "rag.session.id":
		return 55, true
	case "rag.user_id":
		return 56, true
	case "rag.user.id":
		return 57, true
	}
	return -1, false
}

// keepAttrBefore is keepAttr before the table, kept as the reference of TestKeptAsBefore.
func keepAttrBefore(k string) bool {
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
