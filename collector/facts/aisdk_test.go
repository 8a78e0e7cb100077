package facts

import (
	"reflect"
	"testing"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// readSpan reads a span of string attributes.
func readSpan(attrs map[string]string) *Facts {
	s := &span.Span{}
	for k, v := range attrs {
		s.Attrs = append(s.Attrs, span.Attr{Key: k, Value: span.Str(v)})
	}
	f := &Facts{}
	Read(f, s)
	return f
}

// TestAISDKToolCall checks which AI SDK tool results make a tool call a retrieval, and the
// documents read from them.
func TestAISDKToolCall(t *testing.T) {
	score := func(x float64) *float64 { return &x }
	tests := []struct {
		name   string
		result string
		ret    bool
		docs   []record.Document
	}{
		{"array of documents", `[{"id":"doc-1","content":"Refunds take 14 days.","similarity":0.91},{"id":"doc-2","content":"Shipping is free.","similarity":0.5}]`,
			true, []record.Document{{ID: "doc-1", Content: "Refunds take 14 days.", Score: score(0.91)}, {ID: "doc-2", Content: "Shipping is free.", Score: score(0.5)}}},
		{"object holding documents", ` {"documents":[{"id":7,"text":"Passwords expire yearly."}],"count":1}`,
			true, []record.Document{{ID: "7", Content: "Passwords expire yearly."}}},
		{"LangChain JS pageContent with score", `{"results":[{"pageContent":"Open Settings.","score":"0.8","metadata":{"source":"faq.md"}}]}`,
			true, []record.Document{{Content: "Open Settings.", Score: score(0.8), Metadata: map[string]any{"source": "faq.md"}}}},
		{"LangChain JS Document: pageContent and metadata", `{"answer":"x","context":[{"pageContent":"Open Settings.","metadata":{"id":"faq-1"}}]}`,
			true, []record.Document{{Content: "Open Settings.", Metadata: map[string]any{"id": "faq-1"}}}},
		{"documents under a later key than a text", `{"output":"x","sourceDocuments":[{"pageContent":"Open Settings.","metadata":{"id":"faq-1"}}]}`,
			true, []record.Document{{Content: "Open Settings.", Metadata: map[string]any{"id": "faq-1"}}}},
		{"text without id or score", `[{"content":"it is sunny"}]`, false, nil},
		{"text with empty metadata", `[{"content":"it is sunny","metadata":{}}]`, false, nil},
		{"one item not document-shaped", `[{"id":"a","content":"x"},{"id":"b"}]`, false, nil},
		{"weather object", `{"temperature":21,"unit":"C"}`, false, nil},
		{"empty array", `[]`, false, nil},
		{"plain string", `the answer is 42`, false, nil},
		{"strings", `["a","b"]`, false, nil},
		{"broken JSON", `[{"id":"a","content":`, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := readSpan(map[string]string{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "search",
				"ai.toolCall.args": `{"question":"How long do refunds take?"}`, "ai.toolCall.result": tc.result})
			if !f.Tool || f.ToolName != "search" || f.Generation {
				t.Fatalf("tool %v %q generation %v", f.Tool, f.ToolName, f.Generation)
			}
			if f.Retrieval != tc.ret {
				t.Fatalf("retrieval = %v, want %v", f.Retrieval, tc.ret)
			}
			docs, ok := OwnDocs(f)
			if ok != tc.ret || !reflect.DeepEqual(docs, tc.docs) {
				t.Fatalf("OwnDocs = %+v, %v; want %+v", docs, ok, tc.docs)
			}
			if tc.ret {
				if q := RetrievalQuery(f); q != "How long do refunds take?" {
					t.Fatalf("query %q", q)
				}
			}
		})
	}
	// A tool named in conventions.retrieval_tools is a retrieval whatever its result.
	f := readSpan(map[string]string{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "kb", "ai.toolCall.result": `["Refunds take 14 days."]`})
	MarkRetrieval(f)
	if docs, ok := OwnDocs(f); !f.Retrieval || !ok || len(docs) != 1 || docs[0].Content != "Refunds take 14 days." {
		t.Fatalf("named tool: retrieval %v, docs %+v %v", f.Retrieval, docs, ok)
	}
	f = readSpan(map[string]string{"ai.operationId": "ai.toolCall", "ai.toolCall.name": "kb", "ai.toolCall.result": `{"temperature":21}`})
	MarkRetrieval(f)
	if docs, ok := OwnDocs(f); !f.Retrieval || !ok || len(docs) != 0 {
		t.Fatalf("named tool without documents: retrieval %v, docs %+v %v (want an empty retrieval)", f.Retrieval, docs, ok)
	}
	f = readSpan(map[string]string{"ai.operationId": "ai.generateText", "ai.toolCall.name": "kb"})
	MarkRetrieval(f)
	if f.Retrieval {
		t.Fatal("MarkRetrieval made a span that is no tool call a retrieval")
	}
}

// TestAISDKKinds checks the span kinds the AI SDK's ai.operationId names, and what its calls'
// keys read as.
func TestAISDKKinds(t *testing.T) {
	for _, tc := range []struct {
		op                    string
		gen, call, tool, embd bool
	}{
		{op: "ai.generateText", gen: true, call: true},
		{op: "ai.streamText", gen: true, call: true},
		{op: "ai.generateObject", gen: true, call: true},
		{op: "ai.streamObject", gen: true, call: true},
		{op: "ai.generateText.doGenerate", gen: true},
		{op: "ai.streamText.doStream", gen: true},
		{op: "ai.generateObject.doGenerate", gen: true},
		{op: "ai.streamObject.doStream", gen: true},
		{op: "ai.embed", embd: true},
		{op: "ai.embed.doEmbed", embd: true},
		{op: "ai.embedMany", embd: true},
		{op: "ai.embedMany.doEmbed", embd: true},
		{op: "ai.toolCall", tool: true},
		{op: "ai.generatetext"}, // the SDK's spelling only
		{op: "ai.generateText.other"},
	} {
		// An embedding that reports an output text is still no generation.
		f := readSpan(map[string]string{"ai.operationId": tc.op, "ai.response.text": "x"})
		if f.Generation != tc.gen || f.Call != tc.call || f.Tool != tc.tool || f.embedding != tc.embd {
			t.Errorf("%s: generation %v call %v tool %v embedding %v", tc.op, f.Generation, f.Call, f.Tool, f.embedding)
		}
	}

	f := readSpan(map[string]string{
		"ai.operationId":                   "ai.generateText.doGenerate",
		"ai.prompt.messages":               `[{"role":"system","content":"Use the tools."},{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":[{"type":"text","text":"Hello!"}]},{"role":"user","content":[{"type":"text","text":"How long do refunds take?"}]},{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"kb","input":{}}]},{"role":"tool","content":[{"type":"tool-result","toolCallId":"c1","toolName":"kb","output":{"type":"json","value":[]}}]}]`,
		"ai.response.text":                 "14 days [doc-1].",
		"ai.model.id":                      "gpt-4o-mini",
		"ai.response.model":                "gpt-4o-mini-2024-07-18",
		"ai.usage.promptTokens":            "120",
		"ai.usage.completionTokens":        "18",
		"ai.telemetry.functionId":          "support-chat",
		"ai.telemetry.metadata.userId":     "u-1",
		"ai.telemetry.metadata.session_id": "s-1",
	})
	hist, turn := HistoryOf(f)
	if got := AnswerOf(f); got != "14 days [doc-1]." {
		t.Errorf("answer %q", got)
	}
	if got := LastUserText(f); got != "How long do refunds take?" {
		t.Errorf("last user %q", got)
	}
	wantHist := []record.Message{{Role: record.RoleUser, Content: "Hi"}, {Role: record.RoleAssistant, Content: "Hello!"}}
	if !reflect.DeepEqual(hist, wantHist) || turn != 2 {
		t.Errorf("history %+v turn %d", hist, turn)
	}
	if ModelOf(f) != "gpt-4o-mini-2024-07-18" || f.InTokens != 120 || f.OutTokens != 18 || !f.HasIn || !f.HasOut {
		t.Errorf("model %q usage %d %d", ModelOf(f), f.InTokens, f.OutTokens)
	}
	if f.MetadataRoute != "support-chat" || f.User != "u-1" || f.Session != "s-1" {
		t.Errorf("route %q user %q session %q", f.MetadataRoute, f.User, f.Session)
	}

	// A call's prompt is its input: the prompt, else the last message's text, never the system's.
	for prompt, want := range map[string]string{
		`{"system":"Use the documents: [1] …","prompt":"How long do refunds take?"}`:                                                                                                            "How long do refunds take?",
		`{"system":"Use the documents.","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":[{"type":"text","text":"And refunds?"}]}]}`: "And refunds?",
	} {
		f := readSpan(map[string]string{"ai.operationId": "ai.generateText", "ai.prompt": prompt})
		if got := InputText(f); got != want {
			t.Errorf("InputText(%s) = %q, want %q", prompt, got, want)
		}
	}

	// ai.telemetry.metadata.route names the route over the function id, in either order; the
	// GenAI keys win over the SDK's own.
	s := &span.Span{Attrs: []span.Attr{
		{Key: "ai.telemetry.metadata.route", Value: span.Str("billing")},
		{Key: "ai.telemetry.functionId", Value: span.Str("support-chat")},
		{Key: "ai.usage.inputTokens", Value: span.Int(5)},
		{Key: "gen_ai.usage.input_tokens", Value: span.Int(7)},
		{Key: "ai.usage.outputTokens", Value: span.Int(9)},
		{Key: "ai.operationId", Value: span.Str("ai.generateObject.doGenerate")},
		{Key: "ai.response.object", Value: span.Str(`{"answer":"Two years [doc-warranty].","sources":["doc-warranty"]}`)},
	}}
	f = &Facts{}
	Read(f, s)
	if f.MetadataRoute != "billing" || f.InTokens != 7 || f.OutTokens != 9 {
		t.Errorf("route %q tokens %d %d", f.MetadataRoute, f.InTokens, f.OutTokens)
	}
	if got := AnswerOf(f); got != "Two years [doc-warranty]." {
		t.Errorf("object answer %q", got)
	}
}

// TestStepDocs checks which spans' inputs and outputs give documents to a trace without a
// retrieval span: a step's (a chain's), never a generation's.
func TestStepDocs(t *testing.T) {
	const out = `{"context":[{"pageContent":"Refunds take 14 days.","metadata":{"id":"doc-refund"}}],"question":"q"}`
	want := []record.Document{{Content: "Refunds take 14 days.", Metadata: map[string]any{"id": "doc-refund"}}}
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		docs  []record.Document
	}{
		{"workflow output", map[string]string{"traceloop.span.kind": "workflow", "traceloop.entity.output": out}, want},
		{"workflow input", map[string]string{"traceloop.span.kind": "workflow", "traceloop.entity.input": out, "traceloop.entity.output": `"a prompt"`}, want},
		{"OpenInference chain output", map[string]string{"openinference.span.kind": "CHAIN", "output.value": out}, want},
		{"a generation's output is no step's", map[string]string{"gen_ai.operation.name": "chat", "traceloop.entity.output": out}, nil},
		{"no document shape", map[string]string{"traceloop.span.kind": "workflow", "traceloop.entity.output": `{"context":"Refunds take 14 days."}`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readSpan(tc.attrs)
			if got := StepDocs(f); !reflect.DeepEqual(got, tc.docs) {
				t.Fatalf("StepDocs = %+v, want %+v", got, tc.docs)
			}
			if marked := MarkStepRetrieval(f); marked != (tc.docs != nil) || f.Retrieval != marked || f.Step != marked {
				t.Fatalf("MarkStepRetrieval = %v; retrieval %v step %v", marked, f.Retrieval, f.Step)
			}
			if docs, ok := OwnDocs(f); tc.docs != nil && (!ok || !reflect.DeepEqual(docs, tc.docs)) {
				t.Fatalf("OwnDocs after marking = %+v, %v", docs, ok)
			}
		})
	}
}
