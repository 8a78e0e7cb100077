package service_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

// logSender is an OTel SDK logger provider exporting each record as it is emitted.
func logSender(t *testing.T, protocol, endpoint, service string) *sdklog.LoggerProvider {
	t.Helper()
	ctx := context.Background()
	var exp sdklog.Exporter
	var err error
	switch protocol {
	case "grpc":
		exp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(endpoint), otlploggrpc.WithInsecure(),
			otlploggrpc.WithCompressor("gzip"), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
	case "http":
		exp, err = otlploghttp.New(ctx, otlploghttp.WithEndpoint(endpoint), otlploghttp.WithInsecure(),
			otlploghttp.WithCompression(otlploghttp.GzipCompression), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	}
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
		sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)),
	)
	t.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
	return lp
}

// TestGenAIEventsFromLogs is the official OpenTelemetry GenAI instrumentations' shape, sent by
// the OpenTelemetry Go SDK's span and log exporters to ragwatch's real listeners: the chat
// span carries the model and usage but no content; the question and the answer are log
// records (GenAI events gen_ai.user.message and gen_ai.choice, content in the body) of that
// span. Each of the 5 records gets its question (the retrieval span names none: it comes from
// the user message event), its documents and its answer, and is judged. The last trace's
// choice arrives after all its spans, as a log batch sent later would: the trace waits for it.
func TestGenAIEventsFromLogs(t *testing.T) {
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Sampling.Rate = 1
			e := startEnv(t, cfg)
			endpoint := e.app.Addrs().OTLPGRPC
			if protocol == "http" {
				endpoint = e.app.Addrs().OTLPHTTP
			}
			snd := newSender(t, protocol, endpoint, "rag-app")
			logger := logSender(t, protocol, endpoint, "rag-app").Logger("@opentelemetry/instrumentation-openai")
			tracer := snd.tp.Tracer("rag-app")
			emit := func(ctx context.Context, name string, byAttribute bool, body attribute.Value) {
				var r otellog.Record
				r.SetTimestamp(time.Now())
				if byAttribute { // before OTLP's event_name: the event.name attribute
					r.AddAttributes(attribute.String("event.name", name))
				} else {
					r.SetEventName(name)
				}
				r.AddAttributes(attribute.String("gen_ai.system", "openai"))
				r.SetBody(body)
				logger.Emit(ctx, r)
			}
			questions := []string{"What is the refund window?", "Do you ship abroad?", "Is there a warranty?", "Can I change my order?", "How do I reset my password?"}
			for i, q := range questions {
				tid := trace.TraceID{0x9e, byte(i + 1), 15: 1}
				snd.ids.reset(tid)
				ctx, root := tracer.Start(context.Background(), "POST /ask", trace.WithSpanKind(trace.SpanKindServer))
				_, ret := tracer.Start(ctx, "retrieve", trace.WithAttributes(
					s("gen_ai.operation.name", "retrieval"),
					s("gen_ai.retrieval.documents", fmt.Sprintf(`[{"id":"doc-%d","score":0.9,"content":"Policy %d: the answer to %s is yes."}]`, i, i, q)),
				))
				ret.End()
				chatCtx, chat := tracer.Start(ctx, "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
					s("gen_ai.operation.name", "chat"), s("gen_ai.system", "openai"), s("gen_ai.request.model", "gpt-4o-mini"),
					s("gen_ai.response.model", "gpt-4o-mini-2024-07-18"), i64("gen_ai.usage.input_tokens", 120), i64("gen_ai.usage.output_tokens", 9),
				))
				emit(chatCtx, "gen_ai.system.message", i%2 == 1, attribute.MapValue(attribute.String("content", "Answer from the context.")))
				emit(chatCtx, "gen_ai.user.message", i%2 == 1, attribute.MapValue(attribute.String("content", q)))
				choice := attribute.MapValue(attribute.Int("index", 0), attribute.String("finish_reason", "stop"),
					attribute.Map("message", attribute.String("content", fmt.Sprintf("Yes [doc-%d].", i))))
				late := i == len(questions)-1
				if !late {
					emit(chatCtx, "gen_ai.choice", i%2 == 1, choice)
				}
				chat.End()
				root.End()
				if late {
					time.Sleep(5 * time.Millisecond) // the spans are in
					emit(chatCtx, "gen_ai.choice", false, choice)
				}
			}
			testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "five records", func() bool { return e.sink.len() == 5 })
			for i, q := range questions {
				tid := trace.TraceID{0x9e, byte(i + 1), 15: 1}
				r := e.sink.get(tid.String())
				if r == nil || r.Query != q || r.Answer != fmt.Sprintf("Yes [doc-%d].", i) || len(r.Documents) != 1 ||
					r.Documents[0].ID != fmt.Sprintf("doc-%d", i) || r.Model != "gpt-4o-mini-2024-07-18" || r.Usage.InputTokens != 120 {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "all five judged", func() error {
				got := scrape(t, e.base)
				judged := got[`ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"}`]
				joined, late := got[`ragwatch_log_records_total{outcome="joined"}`], got[`ragwatch_log_records_total{outcome="late"}`]
				unread := got[`ragwatch_log_records_total{outcome="unread"}`]
				received := got[fmt.Sprintf(`ragwatch_log_records_received_total{receiver="otlp_%s"}`, protocol)]
				if judged != 5 || joined != 10 || late != 0 || unread != 5 || received != 15 {
					return fmt.Errorf("judged %v, events joined %v, late %v, unread %v, log records received %v", judged, joined, late, unread, received)
				}
				return nil
			})
		})
	}
}

// TestRecordedOpenAINodeApp replays what a RAG app on the OpenAI Node SDK, instrumented by
// @opentelemetry/instrumentation-openai 0.20.0 with message content captured, really sent
// (testdata/genai-openai-node: its OTLP/HTTP JSON traces and logs, in their order) into
// ragwatch's OTLP/HTTP receiver: 5 records with their questions, documents and answers, judged.
func TestRecordedOpenAINodeApp(t *testing.T) {
	cfg := testConfig(t)
	cfg.Sampling.Rate = 1
	e := startEnv(t, cfg)
	files, err := filepath.Glob("testdata/genai-openai-node/0*.json")
	if err != nil || len(files) != 2 {
		t.Fatalf("fixtures %v %v", files, err)
	}
	for _, f := range files { // in arrival order: the log batch came first
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1/traces"
		if strings.HasSuffix(f, "-logs.json") {
			path = "/v1/logs"
		}
		resp, err := http.Post("http://"+e.app.Addrs().OTLPHTTP+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s (%s) = %d", path, f, resp.StatusCode)
		}
	}
	want := map[string][2]string{ // question → the document retrieved first, the answer
		"What is the refund window?":  {"doc-refunds", "Refunds are accepted within 30 days of delivery [doc-refunds]."},
		"Do you ship abroad?":         {"doc-shipping", "Yes: to the EU, the UK and Switzerland, in 5 to 8 days [doc-shipping]."},
		"Is there a warranty?":        {"doc-warranty", "Yes, a two-year warranty covers manufacturing defects [doc-warranty]."},
		"Can I change my order?":      {"doc-orders", "Yes, until it is packed, usually within two hours [doc-orders]."},
		"How do I reset my password?": {"doc-password", `Use "Forgot password" on the sign-in page [doc-password].`},
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "five records", func() bool { return e.sink.len() == 5 })
	e.sink.mu.Lock()
	for key, r := range e.sink.recs {
		w, ok := want[r.Query]
		if !ok || r.Service != "support-rag" || len(r.Documents) != 2 || r.Documents[0].ID != w[0] || r.Documents[0].Content == "" ||
			r.Answer != w[1] || len(r.Citations) != 1 || r.Model != "gpt-4o-mini-2024-07-18" || r.Usage.InputTokens != 96 || r.Usage.OutputTokens != 18 {
			t.Errorf("record %s: %+v", key, r)
		}
		delete(want, r.Query)
	}
	e.sink.mu.Unlock()
	if len(want) != 0 {
		t.Fatalf("questions without a record: %v", want)
	}
	testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "all five judged", func() error {
		got := scrape(t, e.base)
		judged := got[`ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"}`]
		joined, unread := got[`ragwatch_log_records_total{outcome="joined"}`], got[`ragwatch_log_records_total{outcome="unread"}`]
		if judged != 5 || joined != 10 || unread != 5 {
			return fmt.Errorf("judged %v, events joined %v, unread (system messages) %v", judged, joined, unread)
		}
		return nil
	})
}

// TestLateAnswerFromLogsIsJudged: the app's log exporter sends the gen_ai.choice event well
// after the spans, once ragwatch has assembled the record without its answer (after
// assembly.wait). The answer joins the record that went by (assembler → join → sampler, as
// late feedback does), and the record is judged once, with that answer: its claim metrics,
// which are not scored for an empty answer, are scored.
func TestLateAnswerFromLogsIsJudged(t *testing.T) {
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Sampling.Rate = 1
			cfg.Scoring.Metrics = []string{"faithfulness", "citation_precision"}
			e := startEnv(t, cfg)
			endpoint := e.app.Addrs().OTLPGRPC
			if protocol == "http" {
				endpoint = e.app.Addrs().OTLPHTTP
			}
			snd := newSender(t, protocol, endpoint, "rag-app")
			logger := logSender(t, protocol, endpoint, "rag-app").Logger("@opentelemetry/instrumentation-openai")
			tracer := snd.tp.Tracer("rag-app")
			emit := func(ctx context.Context, name string, body attribute.Value) {
				var r otellog.Record
				r.SetTimestamp(time.Now())
				r.SetEventName(name)
				r.AddAttributes(attribute.String("gen_ai.system", "openai"))
				r.SetBody(body)
				logger.Emit(ctx, r)
			}
			tid := trace.TraceID{0x9e, 0x42, 15: 7}
			snd.ids.reset(tid)
			ctx, root := tracer.Start(context.Background(), "POST /ask", trace.WithSpanKind(trace.SpanKindServer))
			_, ret := tracer.Start(ctx, "retrieve", trace.WithAttributes(
				s("gen_ai.operation.name", "retrieval"),
				s("gen_ai.retrieval.documents", `[{"id":"doc-refunds","score":0.9,"content":"Refunds are accepted within 30 days of delivery."}]`),
			))
			ret.End()
			chatCtx, chat := tracer.Start(ctx, "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
				s("gen_ai.operation.name", "chat"), s("gen_ai.system", "openai"), s("gen_ai.request.model", "gpt-4o-mini"),
			))
			emit(chatCtx, "gen_ai.user.message", attribute.MapValue(attribute.String("content", "What is the refund window?")))
			chat.End()
			root.End()
			// The record goes by without its answer: assembly.wait has passed.
			testutil.Eventually(t, 10*time.Second, 5*time.Millisecond, "the record", func() bool { return e.sink.get(tid.String()) != nil })
			if r := e.sink.get(tid.String()); r.Answer != "" || r.Query != "What is the refund window?" || len(r.Documents) != 1 {
				t.Fatalf("record %+v", r)
			}
			time.Sleep(3 * cfg.Assembly.Wait) // well after it
			answer := "Refunds are accepted within 30 days of delivery [doc-refunds]."
			emit(chatCtx, "gen_ai.choice", attribute.MapValue(attribute.Int("index", 0), attribute.String("finish_reason", "stop"),
				attribute.Map("message", attribute.String("content", answer))))
			testutil.CheckFor(t, 10*time.Second, 20*time.Millisecond, "judged with its late answer", func() error {
				got := scrape(t, e.base)
				judged := got[`ragwatch_scoring_attempts_total{outcome="ok",scorer="builtin"}`]
				faithfulness := series(got, "ragwatch_eval_score_count", `metric="faithfulness"`)
				citations := series(got, "ragwatch_eval_score_sum", `metric="citation_precision"`)
				late := got[`ragwatch_log_records_total{outcome="late"}`]
				joined := got[`ragwatch_join_total{join="content",outcome="joined"}`]
				scored := got[`ragwatch_late_content_total{outcome="scored"}`]
				answered := got[`ragwatch_awaited_answer_records_total{outcome="answered"}`]
				if judged != 1 || faithfulness != 1 || citations != 1 || late != 1 || joined != 1 || scored != 1 || answered != 1 {
					return fmt.Errorf("judged %v, faithfulness scores %v, citation precision %v, late events %v, joined %v, scored %v, answered %v",
						judged, faithfulness, citations, late, joined, scored, answered)
				}
				return nil
			})
		})
	}
}
