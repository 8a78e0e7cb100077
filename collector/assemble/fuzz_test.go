package assemble

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/record"
)

// fuzzKeys are the attributes whose values the fuzzer controls; each reader sees random text.
var fuzzKeys = []string{
	"openinference.span.kind", "input.value", "output.value", "input.mime_type", "output.mime_type", "metadata",
	"retrieval.documents.0.document.metadata", "retrieval.documents.1.document.score", "retrieval.documents.7.document.id",
	"reranker.output_documents.0.document.content", "reranker.output_documents.0.document.score",
	"llm.output_messages.0.message.contents.0.message_content.text", "llm.token_count.prompt", "llm.prompts",
	"gen_ai.operation.name", "gen_ai.retrieval.documents", "gen_ai.input.messages", "gen_ai.output.messages",
	"gen_ai.usage.input_tokens", "gen_ai.prompt.3.content", "gen_ai.completion.0.content",
	"traceloop.entity.input", "traceloop.entity.output", "traceloop.association.properties.session_id",
	"rag.query", "rag.answer", "rag.documents", "rag.citations", "rag.relevance", "rag.feedback",
	"annotations.0.annotation.score", "annotations.0.annotation.label", "evaluations.2.evaluation.label",
	"llm.input_messages.0.message.role", "llm.input_messages.1.message.content", "llm.input_messages.1.message.role",
	"gen_ai.prompt.0.role", "gen_ai.prompt", "llm.input_messages.0.message.contents.0.message_content.text",
	"ai.operationId", "ai.toolCall.result", "ai.toolCall.name", "ai.prompt", "ai.prompt.messages", "ai.response.object",
	"ai.usage.inputTokens",
}

func FuzzConsumeTraces(f *testing.F) {
	f.Add("RETRIEVER", `[{"id":"a","score":0.5,"content":"x"}]`, `{"route":"r"}`, "{'k': [1, 2.0, None]}", int64(3), uint8(0))
	f.Add("LLM", `[{"role":"assistant","parts":[{"type":"text","content":"hi [1]"}]}]`, `{"documents":[{"page_content":"p"}]}`, "thumbs-up", int64(-1), uint8(1))
	f.Add("chain", `{"inputs": {"question": "q"}}`, `[1,2`, `{"a":`, int64(1<<62), uint8(2))
	f.Add("reranker", `"str"`, `{"score": "NaN"}`, `[{"text":"t","document_ids":[1,"d"]}]`, int64(0), uint8(3))
	f.Add("ai.toolCall", `[{"id":"a","content":"x","similarity":0.5}]`, "ai.generateText", `{"results":[{"pageContent":"p","id":1}]}`, int64(2), uint8(5))
	f.Add("ai.generateText.doGenerate", `{"prompt":"q"}`, "ai.generateText", `[{"role":"user","content":[{"type":"text","text":"q"}]}]`, int64(4), uint8(6))
	f.Fuzz(func(t *testing.T, kind, a, b, c string, n int64, shape uint8) {
		vals := []any{kind, a, b, c, n, float64(n) / 7}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", c)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for i := 0; i < 4; i++ {
			s := spans.AppendEmpty()
			s.SetTraceID(pcommon.TraceID{1, 15: shape % 3})
			s.SetSpanID(pcommon.SpanID{byte(i + 1)})
			if i > 0 {
				s.SetParentSpanID(pcommon.SpanID{byte((int(shape) + i) % 5)})
			}
			s.SetStartTimestamp(pcommon.Timestamp(uint64(n) + uint64(i)))
			s.SetEndTimestamp(pcommon.Timestamp(uint64(n) * uint64(i+1)))
			for k, key := range fuzzKeys {
				if (k+i+int(shape))%3 != 0 {
					continue
				}
				switch v := vals[(k+i)%len(vals)].(type) {
				case string:
					s.Attributes().PutStr(key, v)
				case int64:
					s.Attributes().PutInt(key, v)
				case float64:
					s.Attributes().PutDouble(key, v)
				}
			}
			if shape&4 != 0 {
				sl := s.Attributes().PutEmptySlice("gen_ai.retrieval.documents")
				m := sl.AppendEmpty().SetEmptyMap()
				m.PutStr("id", a)
				m.PutStr("content", b)
				m.PutDouble("score", float64(n))
			}
			ev := s.Events().AppendEmpty()
			ev.SetName([]string{"db.query.result", "gen_ai.choice", "gen_ai.user.message", "gen_ai.evaluation.result",
				"gen_ai.client.inference.operation.details", "db.search.result"}[(int(shape)+i)%6])
			ev.Attributes().PutStr("db.query.result.metadata", c)
			ev.Attributes().PutStr("message", a)
			ev.Attributes().PutStr("content", b)
			ev.Attributes().PutStr("gen_ai.output.messages", a)
			ev.Attributes().PutStr("gen_ai.evaluation.score.label", kind)
			ev.Attributes().PutStr("db.search.result.entity", b)
		}
		// What FromTraces drops is never read: the pruned spans assemble as all of them do.
		pruned, _ := json.Marshal(Assemble(span.FromTraces(td, nil, nil)))
		full, _ := json.Marshal(Assemble(unpruned(td)))
		if string(pruned) != string(full) {
			t.Fatalf("pruned spans give\n%s\nall attributes give\n%s", pruned, full)
		}
		var got []*record.Record
		a2, err := New(Settings{Config: defaultCfg(), Next: record.ConsumerFunc(func(_ context.Context, r *record.Record) error {
			got = append(got, r)
			return nil
		})})
		if err != nil {
			t.Fatal(err)
		}
		if err := a2.ConsumeTraces(context.Background(), td); err != nil {
			t.Fatal(err)
		}
		checkDangling(t, a2)
		if err := a2.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("record does not encode: %v", err)
			}
			for _, d := range r.Documents {
				if d.ID == "" {
					t.Fatal("document without id")
				}
			}
		}
	})
}
