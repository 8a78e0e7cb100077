package assemble

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/ragwatch/ragwatch/collector/signals"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// benchTrace is a typical 5-span LangChain RAG trace through OpenInference: a chain, a
// retriever returning 5 documents of 1 KB with ids, scores and metadata, a prompt template, an
// LLM whose system prompt holds the 5 KB context, and an output parser.
func benchTrace(tb testing.TB) ptrace.Traces {
	ctxText := ""
	retr := map[string]any{"openinference.span.kind": "RETRIEVER", "input.value": "How do I reset my password?"}
	for i := range 5 {
		content := strings.Repeat(fmt.Sprintf("chunk %d text ", i), 1024/13+1)[:1024]
		p := fmt.Sprintf("retrieval.documents.%d.document.", i)
		retr[p+"id"] = fmt.Sprintf("kb-%d", i)
		retr[p+"score"] = 0.9 - float64(i)/10
		retr[p+"content"] = content
		retr[p+"metadata"] = fmt.Sprintf(`{"source": "faq-%d.md", "page": %d}`, i, i)
		ctxText += content + "\n"
	}
	answer := "Open Settings, then Security, then Reset password [1]. Links expire after one hour [2]."
	return build(tb, 1, "support-bot",
		sp{id: 1, name: "RunnableSequence", start: 0, end: ms(900), attrs: map[string]any{
			"openinference.span.kind": "CHAIN", "input.value": "How do I reset my password?", "output.value": answer,
			"session.id": "s-1", "user.id": "u-9", "metadata": `{"route": "faq"}`,
		}},
		sp{id: 2, parent: 1, name: "VectorStoreRetriever", start: ms(5), end: ms(40), attrs: retr},
		sp{id: 3, parent: 1, name: "ChatPromptTemplate", start: ms(41), end: ms(42), attrs: map[string]any{
			"openinference.span.kind": "CHAIN", "input.value": "How do I reset my password?", "output.value": "prompt",
		}},
		sp{id: 4, parent: 1, name: "ChatOpenAI", start: ms(45), end: ms(880), attrs: map[string]any{
			"openinference.span.kind":               "LLM",
			"llm.model_name":                        "gpt-4o-mini",
			"llm.provider":                          "openai",
			"llm.invocation_parameters":             `{"temperature": 0}`,
			"llm.token_count.prompt":                1800,
			"llm.token_count.completion":            85,
			"llm.token_count.total":                 1885,
			"llm.input_messages.0.message.role":     "system",
			"llm.input_messages.0.message.content":  "Answer from the context.\n" + ctxText,
			"llm.input_messages.1.message.role":     "user",
			"llm.input_messages.1.message.content":  "How do I reset my password?",
			"llm.output_messages.0.message.role":    "assistant",
			"llm.output_messages.0.message.content": answer,
			"input.value":                           `{"messages": "..."}`,
			"output.value":                          answer,
		}},
		sp{id: 5, parent: 1, name: "StrOutputParser", start: ms(881), end: ms(882), attrs: map[string]any{
			"openinference.span.kind": "CHAIN", "input.value": answer, "output.value": answer,
		}},
	)
}

// setTraceID gives every span of td the trace id n, so that each iteration is a new trace.
func setTraceID(td ptrace.Traces, n uint64) {
	var id pcommon.TraceID
	for i := range 8 {
		id[8+i] = byte(n >> (8 * (7 - i)))
	}
	id[0] = 1
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				spans.At(k).SetTraceID(id)
			}
		}
	}
}

func checkBenchRecord(tb testing.TB, r *record.Record) {
	if r == nil || len(r.Documents) != 5 || r.Answer == "" || len(r.Citations) != 2 || r.Usage.InputTokens != 1800 {
		tb.Fatalf("bench trace assembled wrong: %s", js(r))
	}
}

// BenchmarkAssemble5Span measures reading a decoded 5-span RAG trace (5 documents of 1 KB) and
// assembling its record: FromTraces + Assemble.
func BenchmarkAssemble5Span(b *testing.B) {
	td := benchTrace(b)
	checkBenchRecord(b, assembleTD(td).Records[0])
	spans := make([]span.Span, 0, 8)
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		spans = span.FromTraces(td, spans[:0], nil)
		res := Assemble(spans)
		if len(res.Records) != 1 {
			b.Fatal("no record")
		}
	}
}

// BenchmarkIngest5Span is the whole ingest path for one trace after the network: decode the
// OTLP protobuf request, hold the spans in the Assembler, assemble when due, deliver.
func BenchmarkIngest5Span(b *testing.B) {
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	benchAssembler(b, record.Discard, func(n uint64) ptrace.Traces {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		setTraceID(td, n)
		return td
	})
}

// BenchmarkAssembleAndRecord adds the online signals (collector/signals with a Prometheus
// registry) after assembly: decode, hold, assemble, record every signal.
func BenchmarkAssembleAndRecord(b *testing.B) {
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signals.New(signals.Settings{Signals: config.Signals{MaxServices: 50}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	benchAssembler(b, sig, func(n uint64) ptrace.Traces {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		setTraceID(td, n)
		return td
	})
}

// newBenchAssembler returns an Assembler for a benchmark: cfg, records to next, the
// documents' texts kept as keep says (nil: all), its clock reading *now.
func newBenchAssembler(b *testing.B, cfg config.Assembly, next record.Consumer, keep func(pcommon.TraceID) bool, now *time.Time) *Assembler {
	a, err := New(Settings{
		Config: cfg, Next: next, KeepContent: keep,
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return *now },
	})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// benchConfig is the default wait with a complete_wait of 0: the bench trace is complete
// (a true root, a retrieval, a generation, no dangling parent), so it is due as soon as it is
// held, on the path the defaults take, and each iteration's process call assembles it.
func benchConfig(timeout time.Duration, maxTraces int, maxBytes int64) config.Assembly {
	return config.Assembly{Wait: 2 * time.Second, CompleteWait: 0, Timeout: timeout, MaxTraces: maxTraces, MaxBytes: maxBytes}
}

func benchAssembler(b *testing.B, next record.Consumer, trace func(n uint64) ptrace.Traces) {
	var got int
	var last *record.Record
	count := record.ConsumerFunc(func(ctx context.Context, r *record.Record) error {
		got++
		last = r
		return next.ConsumeRecord(ctx, r)
	})
	now := base
	a := newBenchAssembler(b, benchConfig(time.Minute, 50000, 256<<20), count, nil, &now)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	stop := benchcpu.Report(b)
	var n uint64
	for b.Loop() {
		n++
		if err := a.ConsumeTraces(ctx, trace(n)); err != nil {
			b.Fatal(err)
		}
		if err := a.process(ctx, now, false); err != nil {
			b.Fatal(err)
		}
	}
	stop()
	b.StopTimer()
	if got != int(n) {
		b.Fatalf("%d records for %d traces", got, n)
	}
	checkBenchRecord(b, last)
}

// BenchmarkDecode5Span is the reference for BenchmarkIngest5Span: the pdata protobuf decode of
// the same request alone, which is not assembly's cost.
func BenchmarkDecode5Span(b *testing.B) {
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	for b.Loop() {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil || td.SpanCount() != 5 {
			b.Fatal("decode failed")
		}
	}
}

// BenchmarkIngestWith40kHeld is BenchmarkIngest5Span while 40,000 other traces wait for their
// root (a small one-span trace each): the cost of filing and finding due traces among many.
func BenchmarkIngestWith40kHeld(b *testing.B) {
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	now := base
	a := newBenchAssembler(b, benchConfig(time.Hour, 100000, 1<<30), record.Discard, nil, &now)
	filler := make([]span.Span, 1)
	for i := range 40000 {
		now = now.Add(time.Millisecond)
		filler[0] = span.Span{TraceID: pcommon.TraceID{2, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)},
			SpanID: pcommon.SpanID{1}, ParentSpanID: pcommon.SpanID{9}, Name: "retrieve",
			Attrs: []span.Attr{{Key: "openinference.span.kind", Value: span.Str("RETRIEVER")}}}
		a.Add(filler)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.Report(b)()
	var n uint64
	for b.Loop() {
		n++
		now = now.Add(time.Microsecond)
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			b.Fatal(err)
		}
		setTraceID(td, n)
		if err := a.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		if err := a.process(ctx, now, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if a.Held() != 40000 {
		b.Fatalf("held %d", a.Held())
	}
}

// BenchmarkHold5Span is BenchmarkIngest5Span without the protobuf decode: the assembler's own
// work per trace (read the decoded spans, hold, assemble when due, deliver, recycle).
func BenchmarkHold5Span(b *testing.B) {
	td := benchTrace(b)
	benchAssembler(b, record.Discard, func(n uint64) ptrace.Traces {
		setTraceID(td, n)
		return td
	})
}

// BenchmarkConsume50x5 is the ingest side alone, as the OTLP receiver calls it: one request of
// 50 five-span traces read (FromTraces) and held (Add). Each iteration then takes the traces
// out as the worker does, without assembling them (recycling their attributes), so that only
// ConsumeTraces' own cost is measured; cpu-ns/trace is per trace.
func BenchmarkConsume50x5(b *testing.B) {
	one := benchTrace(b)
	td := ptrace.NewTraces()
	for range 50 {
		one.ResourceSpans().At(0).CopyTo(td.ResourceSpans().AppendEmpty())
	}
	now := base
	a := newBenchAssembler(b, benchConfig(time.Minute, 50000, 256<<20), record.Discard, nil, &now)
	ctx := context.Background()
	var n uint64
	b.ReportAllocs()
	b.ResetTimer()
	start := benchcpu.Now()
	for b.Loop() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			n++
			var id pcommon.TraceID
			id[0], id[8], id[9], id[10], id[11] = 3, byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
			spans := rss.At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				spans.At(k).SetTraceID(id)
			}
		}
		if err := a.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
		a.mu.Lock()
		if len(a.traces) != 50 || a.oldest == nil || len(a.oldest.spans) != 5 {
			b.Fatalf("held %d traces", len(a.traces))
		}
		for a.oldest != nil {
			tr := a.oldest
			a.remove(tr)
			a.done.add(tr.id)
			span.ReleaseSpans(tr.spans)
		}
		a.mu.Unlock()
	}
	b.ReportMetric(float64(benchcpu.Now()-start)/float64(b.N)/50, "cpu-ns/trace")
}

// BenchmarkDecodeProtoElided is the protobuf decoder on benchTrace (5 documents of 1 KB with
// ids) keeping every text, and keeping none (a trace nothing will score, elide.go).
func BenchmarkDecodeProtoElided(b *testing.B) {
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTrace(b))
	if err != nil {
		b.Fatal(err)
	}
	lim := span.Limits{MaxSpansPerRequest: 100, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	for _, c := range []struct {
		name string
		keep func(pcommon.TraceID) bool
	}{{"kept", nil}, {"elided", func(pcommon.TraceID) bool { return false }}} {
		b.Run(c.name, func(b *testing.B) {
			var dst []span.Span
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			defer benchcpu.Report(b)()
			for b.Loop() {
				var werr *span.Error
				if dst, _, werr = span.DecodeProto(body, lim, dst[:0], nil, c.keep); werr != nil || len(dst) != 5 {
					b.Fatal(werr)
				}
				span.ReleaseSpans(dst)
				clear(dst)
			}
		})
	}
}

// BenchmarkWire20 is the assembler's whole share of the production ingest path for one OTLP
// request of 20 traces, each with a fresh trace id: ConsumeProto (the protobuf decoder, hold)
// and process (assemble, deliver to a consumer that drops the record). "synth" is what
// `ragwatch loadgen --spans 5 --documents 5 --doc-bytes 1024` sends (scripts/anchor.sh's
// traffic), "bench" is benchTrace; "elided" is sampling.rate: 0, where no trace keeps its
// documents' texts, "kept" keeps them. cpu-ns/trace is per trace.
func BenchmarkWire20(b *testing.B) {
	for _, traffic := range []string{"synth", "bench"} {
		td := ptrace.NewTraces()
		if traffic == "bench" {
			one := benchTrace(b)
			for n := range 20 {
				setTraceID(one, uint64(n+1))
				one.ResourceSpans().At(0).CopyTo(td.ResourceSpans().AppendEmpty())
			}
		} else {
			gen := synth.New(synth.Options{Spans: 5, Documents: 5, DocBytes: 1024})
			for range 20 {
				turn := gen.Next(base)
				synth.AppendTraces(td, &turn)
			}
		}
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			b.Fatal(err)
		}
		// Where each trace id is in the body, and which of the request's traces it is.
		type idAt struct{ off, trace int }
		var ids []pcommon.TraceID
		var at []idAt
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					if id := sss.At(j).Spans().At(k).TraceID(); !slices.Contains(ids, id) {
						ids = append(ids, id)
					}
				}
			}
		}
		for t, id := range ids {
			for off := 0; ; {
				i := bytes.Index(body[off:], id[:])
				if i < 0 {
					break
				}
				at = append(at, idAt{off + i, t})
				off += i + len(id)
			}
		}
		if len(ids) != 20 || len(at) < 100 {
			b.Fatalf("%s: %d trace ids at %d places, want 20 at 100 or more", traffic, len(ids), len(at))
		}
		lim := span.Limits{MaxSpansPerRequest: 1000, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
		for _, c := range []struct {
			name string
			keep func(pcommon.TraceID) bool
		}{{"elided", func(pcommon.TraceID) bool { return false }}, {"kept", nil}} {
			b.Run(traffic+"/"+c.name, func(b *testing.B) {
				var got int
				var last *record.Record
				count := record.ConsumerFunc(func(_ context.Context, r *record.Record) error {
					got++
					last = r
					return nil
				})
				now := base
				a := newBenchAssembler(b, benchConfig(time.Minute, 50000, 256<<20), count, c.keep, &now)
				ctx := context.Background()
				var n uint64
				b.ReportAllocs()
				b.ResetTimer()
				start := benchcpu.Now()
				for b.Loop() {
					n++
					for _, p := range at {
						id := n*20 + uint64(p.trace)
						body[p.off], body[p.off+8], body[p.off+9], body[p.off+10], body[p.off+11] = 4, byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
					}
					if _, err := a.ConsumeProto(ctx, body, lim); err != nil {
						b.Fatal(err)
					}
					if err := a.process(ctx, now, true); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(benchcpu.Now()-start)/float64(b.N)/20, "cpu-ns/trace")
				b.StopTimer()
				if got != int(n)*20 {
					b.Fatalf("%d records for %d traces", got, n*20)
				}
				if traffic == "bench" {
					checkBenchRecord(b, last)
				} else if len(last.Documents) != 5 || last.Answer == "" {
					b.Fatalf("synth trace assembled wrong: %s", js(last))
				}
			})
		}
	}
}

// BenchmarkWire20Logs is BenchmarkWire20's synth traffic with the GenAI events an
// OpenAI-instrumented app logs for it (`ragwatch loadgen --logs`, scripts/anchor.sh LOGS=1):
// for each request of 20 traces, the request of their 60 log records first (ConsumeLogs: a
// system message, a user message and a choice per trace, on its LLM span), then the traces
// (ConsumeProto), then process (join the events, assemble, deliver). cpu-ns/trace is per trace
// with its events.
func BenchmarkWire20Logs(b *testing.B) {
	td, ld := ptrace.NewTraces(), plog.NewLogs()
	gen := synth.New(synth.Options{Spans: 5, Documents: 5, DocBytes: 1024})
	var ids []pcommon.TraceID
	for range 20 {
		turn := gen.Next(base)
		synth.AppendTraces(td, &turn)
		synth.AppendLogs(ld, &turn)
		ids = append(ids, turn.TraceID)
	}
	traces, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	logs, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		b.Fatal(err)
	}
	// Where each trace id is in each body, and which of the request's traces it is.
	type idAt struct {
		body       []byte
		off, trace int
	}
	var at []idAt
	for _, body := range [][]byte{traces, logs} {
		for t, id := range ids {
			for off := 0; ; {
				i := bytes.Index(body[off:], id[:])
				if i < 0 {
					break
				}
				at = append(at, idAt{body, off + i, t})
				off += i + len(id)
			}
		}
	}
	if len(at) != 20*5+20*3 {
		b.Fatalf("%d trace ids, want %d", len(at), 20*5+20*3)
	}
	lim := span.Limits{MaxSpansPerRequest: 1000, MaxAttributesPerSpan: 128, MaxEventsPerSpan: 128, MaxAttributeValueBytes: 1 << 16}
	var got int
	var last *record.Record
	count := record.ConsumerFunc(func(_ context.Context, r *record.Record) error {
		got++
		last = r
		return nil
	})
	now := base
	a := newBenchAssembler(b, benchConfig(time.Minute, 50000, 256<<20), count, func(pcommon.TraceID) bool { return false }, &now)
	ctx := context.Background()
	var n uint64
	b.ReportAllocs()
	b.ResetTimer()
	start := benchcpu.Now()
	for b.Loop() {
		n++
		for _, p := range at {
			id := n*20 + uint64(p.trace)
			p.body[p.off], p.body[p.off+8], p.body[p.off+9], p.body[p.off+10], p.body[p.off+11] = 4, byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
		}
		if _, err := a.ConsumeLogs(ctx, logs, lim); err != nil {
			b.Fatal(err)
		}
		if _, err := a.ConsumeProto(ctx, traces, lim); err != nil {
			b.Fatal(err)
		}
		if err := a.process(ctx, now, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchcpu.Now()-start)/float64(b.N)/20, "cpu-ns/trace")
	b.StopTimer()
	if got != int(n)*20 {
		b.Fatalf("%d records for %d traces", got, n*20)
	}
	if joined := promtestutil.ToFloat64(a.m.events[evJoined]); joined != float64(n)*40 {
		b.Fatalf("%v events joined, want %d", joined, n*40)
	}
	if last.Answer == "" || last.Query == "" || len(last.Documents) != 5 {
		b.Fatalf("synth trace with events assembled wrong: %s", js(last))
	}
}
