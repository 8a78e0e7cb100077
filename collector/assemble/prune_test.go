package assemble

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
)

// unpruned reads td keeping every attribute and event: what the readers would see if FromTraces
// held everything.
func unpruned(td ptrace.Traces) []span.Span {
	var out []span.Span
	rs := td.ResourceSpans().At(0)
	service := rs.Resource().Attributes().AsRaw()["service.name"].(string)
	spans := rs.ScopeSpans().At(0).Spans()
	all := func(m pcommon.Map) []span.Attr {
		var as []span.Attr
		for k, v := range m.All() {
			as = append(as, span.Attr{Key: k, Value: valueOf(v)})
		}
		return as
	}
	for i := 0; i < spans.Len(); i++ {
		ps := spans.At(i)
		s := span.Span{TraceID: ps.TraceID(), SpanID: ps.SpanID(), ParentSpanID: ps.ParentSpanID(), Name: ps.Name(),
			Kind: ps.Kind(), Start: ps.StartTimestamp().AsTime(), End: ps.EndTimestamp().AsTime(), Service: service,
			Attrs: all(ps.Attributes())}
		for j := 0; j < ps.Events().Len(); j++ {
			e := ps.Events().At(j)
			s.Events = append(s.Events, span.Event{Name: e.Name(), Time: e.Timestamp().AsTime(), Attrs: all(e.Attributes())})
		}
		out = append(out, s)
	}
	return out
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randomGeneration builds a trace whose generation span carries random input messages in every
// flattened form, message events, and the signs that decide whether its input is read.
func randomGeneration(t *testing.T, r *rand.Rand) ptrace.Traces {
	roles := []any{"system", "user", "User", "assistant", "", "tool", 7}
	texts := []any{"", "what is x?", "ctx " + fmt.Sprint(r.IntN(100)), `[{"type":"text","text":"block"}]`, `[{"type":"image_url"}]`, `["a"]`, 3}
	gen := map[string]any{}
	forms := r.IntN(7) // which flattened forms this trace uses: 0 none, 6 all
	for range r.IntN(12) {
		i := pick(r, "0", "1", "2", "3", "x", "99")
		switch min(r.IntN(6), forms) {
		case 0:
			gen["llm.input_messages."+i+".message.role"] = pick(r, roles...)
		case 1:
			gen["llm.input_messages."+i+".message.content"] = pick(r, texts...)
		case 2:
			gen["llm.input_messages."+i+".message.contents."+pick(r, "0", "1")+".message_content.text"] = pick(r, texts...)
		case 3:
			gen["gen_ai.prompt."+i+".role"] = pick(r, roles...)
		case 4:
			gen["gen_ai.prompt."+i+".content"] = pick(r, texts...)
		case 5:
			gen["llm.input_messages."+i+".message.name"] = "n"
		}
	}
	maybe := func(k string, vs ...any) {
		if r.IntN(3) == 0 {
			gen[k] = pick(r, vs...)
		}
	}
	rarely := func(k string, vs ...any) {
		if r.IntN(10) == 0 {
			gen[k] = pick(r, vs...)
		}
	}
	maybe("openinference.span.kind", "LLM", "llm", "CHAIN", "RETRIEVER", "EMBEDDING")
	gen["openinference.span.kind"] = pick(r, "LLM", "LLM", "llm", "CHAIN", "RETRIEVER", "EMBEDDING")
	maybe("gen_ai.operation.name", "chat", "embeddings", "retrieval", "completion")
	maybe("llm.request.type", "chat", "embedding")
	gen["input.value"] = pick[any](r, "the input", `{"query": "json input"}`, "")
	maybe("input.mime_type", "application/json", "text/plain")
	maybe("traceloop.entity.input", `{"inputs": {"question": "tl q"}}`)
	maybe("gen_ai.prompt", "plain prompt", "")
	maybe("llm.output_messages.0.message.content", "the answer")
	rarely("retrieval.documents.0.document.content", "doc")
	rarely("gen_ai.retrieval.documents", `[{"id":"g"}]`)
	rarely("db.vector.query.top_k", 3)
	maybe("llm.invocation_parameters", `{"temperature": 0}`)
	maybe("gen_ai.system_instructions", "be brief")
	var events []ev
	for range r.IntN(4) {
		attrs := map[string]any{}
		if r.IntN(2) == 0 {
			attrs["content"] = pick(r, texts...)
		}
		if r.IntN(3) == 0 {
			attrs["role"] = pick(r, roles...)
		}
		if r.IntN(4) == 0 {
			attrs["message"] = pick(r, `{"role":"user","content":"in message"}`, `{"content":"no role"}`, "plain")
		}
		if r.IntN(3) == 0 {
			attrs["gen_ai.prompt"] = "event prompt"
		}
		if r.IntN(3) == 0 {
			attrs["gen_ai.input.messages"] = `[{"role":"user","content":"event json"}]`
			attrs["other"] = "x"
		}
		events = append(events, ev{name: pick(r, "gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message",
			"gen_ai.tool.message", "gen_ai.choice", "gen_ai.content.prompt", "db.query.result"), attrs: attrs})
	}
	spans := []sp{{id: 2, parent: 1, name: pick(r, "chat", "chat", "chat", "vector_db_retrieve.x"), start: ms(50), end: ms(800), attrs: gen, events: events}}
	if r.IntN(2) == 0 {
		spans = append(spans, sp{id: 1, name: "chain", end: ms(900), attrs: map[string]any{"openinference.span.kind": "CHAIN", "input.value": "root q"}})
	}
	if r.IntN(2) == 0 {
		spans = append(spans, sp{id: 3, parent: pick[byte](r, 1, 2), name: "retrieve", start: ms(60), end: ms(70), attrs: map[string]any{
			"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "d"}})
	}
	if r.IntN(2) == 0 { // a generation inside: the span above may be the turn
		spans = append(spans, sp{id: 4, parent: 2, name: "inner", start: ms(80), end: ms(90), attrs: map[string]any{
			"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "inner answer"}})
	}
	return build(t, 1, "svc", spans...)
}

// TestPruningKeepsEveryResult assembles random traces twice, from the pruned spans FromTraces
// holds and from every attribute and event, and requires the same records and feedback.
func TestPruningKeepsEveryResult(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 42))
	dropped := 0
	for n := range 3000 {
		td := randomGeneration(t, r)
		held := span.FromTraces(td, nil, nil)
		full := unpruned(td)
		for i := range held {
			dropped += len(full[i].Attrs) - len(held[i].Attrs) + len(full[i].Events) - len(held[i].Events)
		}
		want, _ := json.Marshal(Assemble(full))
		got, _ := json.Marshal(Assemble(held))
		if string(got) != string(want) {
			t.Fatalf("trace %d: pruned spans give\n%s\nall attributes give\n%s\nattributes: %v", n, got, want, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw())
		}
	}
	if dropped < 3000 {
		t.Fatalf("only %d attributes and events dropped: the test does not exercise pruning", dropped)
	}
}

// TestPruningDropsUnreadMessages pins what the bench trace's LLM span keeps.
func TestPruningDropsUnreadMessages(t *testing.T) {
	spans := span.FromTraces(benchTrace(t), nil, nil)
	var keys []string
	for _, a := range spans[3].Attrs {
		keys = append(keys, a.Key)
	}
	want := map[string]bool{"openinference.span.kind": true, "llm.model_name": true, "llm.token_count.prompt": true,
		"llm.token_count.completion": true, "llm.input_messages.1.message.role": true, "llm.input_messages.1.message.content": true,
		"llm.output_messages.0.message.role": true, "llm.output_messages.0.message.content": true, "output.value": true}
	if len(keys) != len(want) {
		t.Fatalf("LLM span keeps %v", keys)
	}
	for _, k := range keys {
		if !want[k] {
			t.Fatalf("LLM span keeps %v", keys)
		}
	}
}

// valueOf is v as the decoders hold it.
func valueOf(v pcommon.Value) span.Value {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return span.Str(v.Str())
	case pcommon.ValueTypeInt:
		return span.Int(v.Int())
	case pcommon.ValueTypeDouble:
		return span.Double(v.Double())
	case pcommon.ValueTypeBool:
		return span.Bool(v.Bool())
	case pcommon.ValueTypeMap, pcommon.ValueTypeSlice:
		return span.Raw(v.AsRaw())
	case pcommon.ValueTypeBytes:
		return span.Str(string(v.Bytes().AsRaw()))
	}
	return span.Value{}
}

// An LLM-kind span that also carries a sign of a retrieval (a document list, a retrieval key,
// a reranker key, a retrieval operation) is not certainly a generation: its input is the
// retrieval's query, and pruning keeps it. Read through both decoders.
func TestPruneKeepsInputOfRetrievingLLMSpans(t *testing.T) {
	lim := span.Limits{MaxSpansPerRequest: 100, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	for _, sign := range []map[string]any{
		{"retrieval.documents.0.document.content": "c"},
		{"retrieval.documents.20.document.content": "c"}, // beyond the shared keys: read by its text
		{"reranker.output_documents.0.document.content": "c"},
		{"reranker.input_documents.0.document.content": "c"},
		{"reranker.query": "rq"},
		{"rag.documents": `[{"id":"d","content":"c"}]`},
		{"db.vector.query.top_k": 3},
		{"gen_ai.operation.name": "retrieval"},
	} {
		attrs := map[string]any{"openinference.span.kind": "LLM", "input.value": "the question?",
			"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "the answer"}
		for k, v := range sign {
			attrs[k] = v
		}
		td := build(t, 1, "s", sp{id: 1, name: "chain", end: ms(100), attrs: map[string]any{"openinference.span.kind": "CHAIN"}},
			sp{id: 2, parent: 1, name: "rag-llm", start: ms(1), end: ms(90), attrs: attrs})
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		wire, _, werr := span.DecodeProto(body, lim, nil, nil, nil)
		if werr != nil {
			t.Fatal(werr)
		}
		for name, spans := range map[string][]span.Span{"pdata": span.FromTraces(td, nil, nil), "wire": wire} {
			var input bool
			for _, a := range spans[1].Attrs {
				input = input || a.Key == "input.value"
			}
			if !input {
				t.Errorf("%v, %s: input.value pruned", sign, name)
			}
		}
	}
}
