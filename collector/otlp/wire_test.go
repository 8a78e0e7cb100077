package otlp

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ragwatch/ragwatch/collector/assemble"
	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/record"
	"github.com/ragwatch/ragwatch/internal/synth"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/scripts/benchcpu"
)

// The protobuf decoder of the assembler (span.DecodeProto) stands in for pdata's decoding,
// the limits' check and span.FromTraces together: from the same bytes it must give the
// same spans, or refuse with the same reason and message.

// wireFuzzLimits are small, so that fuzzed inputs reach every limit.
var wireFuzzLimits = span.Limits{MaxSpansPerRequest: 40, MaxAttributesPerSpan: 24, MaxEventsPerSpan: 6, MaxAttributeValueBytes: 300}.WithDefaults()

type wireAnswer struct {
	spans  []span.Span
	n      int
	reason string // "" when accepted
	msg    string // a rejection's message (not compared for malformed: pdata's words vary)
}

func viaPdata(body []byte, lim span.Limits) wireAnswer {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		return wireAnswer{reason: ingest.ReasonMalformed}
	}
	n, rej := lim.Check(req.Traces())
	if rej != nil {
		return wireAnswer{reason: rej.Reason, msg: rej.Msg}
	}
	return wireAnswer{spans: span.FromTraces(req.Traces(), nil, nil), n: n}
}

func viaWire(body []byte, lim span.Limits) wireAnswer {
	spans, n, werr := span.DecodeProto(body, lim, nil, nil, nil)
	if werr != nil {
		if len(spans) != 0 {
			return wireAnswer{reason: "spans returned with an error"}
		}
		return wireAnswer{reason: werr.Reason, msg: werr.Msg}
	}
	return wireAnswer{spans: spans, n: n}
}

func sameAnswer(t *testing.T, body []byte, lim span.Limits) {
	t.Helper()
	want, got := viaPdata(body, lim), viaWire(body, lim)
	if want.reason != got.reason {
		t.Fatalf("pdata: %q %s; wire decoder: %q %s", want.reason, want.msg, got.reason, got.msg)
	}
	if want.reason != ingest.ReasonMalformed && want.msg != got.msg {
		t.Fatalf("message: pdata path %q, wire decoder %q", want.msg, got.msg)
	}
	if want.n != got.n {
		t.Fatalf("span count: pdata %d, wire decoder %d", want.n, got.n)
	}
	// %#v compares every field, NaN included, and maps in key order.
	if w, g := fmt.Sprintf("%#v", want.spans), fmt.Sprintf("%#v", got.spans); w != g {
		t.Fatalf("spans differ:\npdata: %.3000s\nwire:  %.3000s", w, g)
	}
}

// wireSeeds are requests with everything the decoder reads: RAG traces of the load generator,
// events of the GenAI conventions, links, structured and non-string values, tracestate.
func wireSeeds(t testing.TB) [][]byte {
	var out [][]byte
	// Small seeds: the fuzzer minimises every input that finds new code, at a cost that grows
	// with its size.
	gen := synth.New(synth.Options{Spans: 5, Documents: 2, DocBytes: 40, Service: "support-bot"})
	td := ptrace.NewTraces()
	turn := gen.Next(time.Unix(1_700_000_000, 0))
	synth.AppendTraces(td, &turn)
	out = append(out, protoBody(t, td), protoBody(t, traces(3)))

	td = ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutInt("service.name", 7)
	rs.Resource().Attributes().PutStr("host.name", "h")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("scope")
	ss.Scope().Attributes().PutStr("x", "y")
	sp := ss.Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetParentSpanID(pcommon.SpanID{8, 7, 6, 5, 4, 3, 2, 1})
	sp.SetFlags(0x300)
	sp.SetKind(ptrace.SpanKindClient)
	sp.TraceState().FromRaw("ot=th:8")
	sp.SetName("chat gpt-4o")
	sp.SetStartTimestamp(1_700_000_000_000_000_000)
	sp.SetEndTimestamp(1_700_000_001_000_000_000)
	a := sp.Attributes()
	a.PutStr("gen_ai.operation.name", "chat")
	a.PutStr("rag.query", "what is the refund window?")
	a.PutDouble("rag.relevance", 0.5)
	a.PutBool("rag.cached", true)
	a.PutEmptyBytes("rag.blob").FromRaw([]byte("bytes"))
	a.PutEmpty("rag.nothing")
	a.PutStr("http.url", "https://example.com")
	m := a.PutEmptyMap("rag.documents")
	m.PutStr("id", "d1")
	m.PutEmptySlice("scores").FromRaw([]any{1.5, int64(2), "x", true, nil, []byte{1}})
	a.PutStr("llm.input_messages.0.message.role", "system")
	a.PutStr("llm.input_messages.0.message.content", "be nice")
	a.PutStr("llm.input_messages.1.message.role", "user")
	a.PutStr("llm.input_messages.1.message.content", "hello")
	a.PutStr("llm.output_messages.0.message.content", "hi")
	ev := sp.Events().AppendEmpty()
	ev.SetName("gen_ai.user.message")
	ev.SetTimestamp(1_700_000_000_500_000_000)
	ev.Attributes().PutStr("content", "question")
	ev = sp.Events().AppendEmpty()
	ev.SetName("gen_ai.content.completion")
	ev.Attributes().PutStr("gen_ai.completion", "answer")
	ev.Attributes().PutStr("other", "dropped")
	ev = sp.Events().AppendEmpty()
	ev.SetName("exception")
	ev = sp.Events().AppendEmpty()
	ev.SetName("gen_ai.system.message")
	ev.Attributes().PutStr("content", "ignored")
	ln := sp.Links().AppendEmpty()
	ln.SetTraceID(pcommon.TraceID{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	ln.SetSpanID(pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	ln.Attributes().PutStr("k", "v")
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("boom")
	out = append(out, protoBody(t, td))

	// Variants from every source variantKeys.read looks at: a span attribute (a duplicate key
	// whose first occurrence is empty), feature-flag events (current and legacy name, an event
	// of another name), the resource, and non-string values.
	vt := ptrace.NewTraces()
	vrs := vt.ResourceSpans().AppendEmpty()
	vrs.Resource().Attributes().PutStr("service.name", "shop")
	vrs.Resource().Attributes().PutInt("service.version", 42)
	vsp := vrs.ScopeSpans().AppendEmpty().Spans()
	for i, set := range []func(ptrace.Span){
		func(sp ptrace.Span) { // resource only
		},
		func(sp ptrace.Span) { // a feature-flag event beats the resource's service.version
			ev := sp.Events().AppendEmpty()
			ev.SetName("exception")
			ev.Attributes().PutStr("feature_flag.result.variant", "not-a-flag-event")
			ev = sp.Events().AppendEmpty()
			ev.SetName("feature_flag.evaluation")
			ev.Attributes().PutStr("feature_flag.result.variant", "  ")
			ev = sp.Events().AppendEmpty()
			ev.SetName("feature_flag")
			ev.Attributes().PutBool("feature_flag.result.variant", true)
		},
		func(sp ptrace.Span) { // rag.variant's first occurrence is empty: the event decides
			sp.Attributes().PutStr("rag.variant", "")
			ev := sp.Events().AppendEmpty()
			ev.SetName("feature_flag.evaluation")
			ev.Attributes().PutDouble("feature_flag.result.variant", 0.5)
		},
		func(sp ptrace.Span) { // rag.variant beats everything
			sp.Attributes().PutStr("feature_flag.result.variant", "flag")
			sp.Attributes().PutStr("rag.variant", " canary ")
		},
	} {
		sp := vsp.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{7, byte(i + 1)})
		sp.SetSpanID(pcommon.SpanID{7, byte(i + 1)})
		set(sp)
	}
	out = append(out, protoBody(t, vt))

	// Over the limits: too many attributes, a long value, a zero id.
	big := ptrace.NewTraces()
	bs := big.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	s1 := bs.AppendEmpty()
	s1.SetTraceID(pcommon.TraceID{1})
	s1.SetSpanID(pcommon.SpanID{1})
	s1.Attributes().PutStr("rag.answer", strings.Repeat("a", 400))
	s2 := bs.AppendEmpty()
	s2.SetTraceID(pcommon.TraceID{1})
	for i := range 30 {
		s2.Attributes().PutInt(fmt.Sprintf("k%d", i), int64(i))
	}
	out = append(out, protoBody(t, big))

	// A structured service name, and spans in the deprecated scope spans only.
	odd := ptrace.NewTraces()
	ors := odd.ResourceSpans().AppendEmpty()
	sn := ors.Resource().Attributes().PutEmptyMap("service.name")
	sn.PutStr("z", "1")
	sn.PutStr("a", "2")
	os := ors.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	os.SetTraceID(pcommon.TraceID{2})
	os.SetSpanID(pcommon.SpanID{2})
	out = append(out, protoBody(t, odd))

	// Spans in ResourceSpans' deprecated field 1000, alone and beside scope_spans (field 2).
	msg := func(num protowire.Number, parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), body)
	}
	span := func(id byte) []byte {
		return msg(2, msg(1, bytes.Repeat([]byte{id}, 16)), msg(2, bytes.Repeat([]byte{id}, 8)), msg(5, []byte("old")))
	}
	out = append(out,
		msg(1, msg(1000, span(3))),
		msg(1, msg(1000, span(4)), msg(2, span(5)), msg(1000, span(6))))
	return out
}

func TestDecodeProtoMatchesPdata(t *testing.T) {
	for i, body := range wireSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			sameAnswer(t, body, wireFuzzLimits)
			sameAnswer(t, body, span.Limits{}.WithDefaults())
			// Every truncation, and every byte flipped, answers the same too.
			for n := 0; n < len(body); n += 1 + len(body)/300 {
				sameAnswer(t, body[:n], wireFuzzLimits)
				c := append([]byte(nil), body...)
				c[n] ^= 0xff
				sameAnswer(t, c, wireFuzzLimits)
			}
		})
	}
	// Hand-made wire edge cases: deprecated scope spans, groups, merged resources, deep nesting.
	cases := map[string][]byte{
		"empty":            {},
		"empty resource":   {0x0a, 0x02, 0x0a, 0x00},
		"deprecated field": {0x0a, 0x05, 0xc2, 0x3e, 0x02, 0x12, 0x00},
		"group":            {0x0b, 0x0c},
		"wrong wire type":  {0x08, 0x01},
		"unknown varint":   {0x10, 0x01},
		"end group":        {0x0c},
	}
	deep := []byte{}
	for range 120 {
		deep = append([]byte{0x2a, byte(len(deep))}, deep...) // AnyValue{array_value: ...}; lengths < 128 here only
		if len(deep) > 120 {
			break
		}
	}
	cases["deep"] = deep
	for name, body := range cases {
		t.Run(name, func(t *testing.T) { sameAnswer(t, body, wireFuzzLimits) })
	}
}

// TestDecodeProtoMatchesPdataMutated is a bounded, reproducible stand-in for the fuzzer in
// plain go test: seeds with random bytes changed, inserted, removed or repeated.
func TestDecodeProtoMatchesPdataMutated(t *testing.T) {
	seeds := wireSeeds(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		b := slices.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(4) {
			if len(b) == 0 {
				break
			}
			at := rng.IntN(len(b))
			switch rng.IntN(4) {
			case 0:
				b[at] = byte(rng.Uint32())
			case 1:
				b = slices.Insert(b, at, byte(rng.Uint32()))
			case 2:
				b = slices.Delete(b, at, at+1)
			case 3:
				end := min(len(b), at+1+rng.IntN(64))
				b = slices.Insert(b, at, b[at:end]...)
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { sameAnswer(t, b, wireFuzzLimits) })
	}
}

func FuzzDecodeProtoMatchesPdata(f *testing.F) {
	for _, b := range wireSeeds(f) {
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x05, 0xc2, 0x3e, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) { sameAnswer(t, body, wireFuzzLimits) })
}

// An assembler behind the receivers takes protobuf exports through its own decoder: the records
// are the same, and bad input is answered and counted as on the pdata path.
func TestReceiverHandsProtobufToProtoConsumer(t *testing.T) {
	var got []*record.Record
	asm, err := assemble.New(assemble.Settings{
		Config: config.Default().Assembly,
		Next:   record.ConsumerFunc(func(_ context.Context, r *record.Record) error { got = append(got, r); return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	var _ ProtoConsumer = asm
	reg := prometheus.NewRegistry()
	r, err := New(Settings{Next: asm, Metrics: ingest.NewMetrics(reg), Limits: wireFuzzLimits})
	if err != nil {
		t.Fatal(err)
	}
	h := r.HTTPHandler()
	gen := synth.New(synth.Options{Spans: 5, Documents: 3, DocBytes: 200, Service: "support-bot"})
	td := ptrace.NewTraces()
	turn := gen.Next(time.Now())
	synth.AppendTraces(td, &turn)
	fuzzBody(t, h, ctProtobuf, protoBody(t, td))
	fuzzBody(t, h, ctProtobuf, []byte{0x0a, 0x03, 0x12, 0x01}) // truncated: 400
	for _, b := range wireSeeds(t) {
		if bytes.Contains(b, []byte(strings.Repeat("a", 400))) {
			fuzzBody(t, h, ctProtobuf, b) // over the limits: 400
		}
	}
	if err := asm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].TraceID != pcommon.TraceID(turn.TraceID).String() {
		t.Fatalf("records %d, want the one of trace %x", len(got), turn.TraceID)
	}
	if n := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"reason": "malformed"}); n != 1 {
		t.Fatalf("rejected as malformed %v, want 1", n)
	}
	if n := testutil.Sum(t, reg, "ragwatch_ingest_rejected_total", map[string]string{"reason": "limits"}); n != 1 {
		t.Fatalf("rejected over the limits %v, want 1", n)
	}
	if n := testutil.Sum(t, reg, "ragwatch_spans_received_total", nil); n != 5 {
		t.Fatalf("spans received %v, want 5", n)
	}
}

// BenchmarkDecodeExport is one export of the anchor's traffic (20 five-span traces, 5 x 1 KB
// documents) taken to the Spans the assembler holds: through pdata, the limits and FromTraces,
// and through the assembler's own decoder.
func BenchmarkDecodeExport(b *testing.B) {
	gen := synth.New(synth.Options{Spans: 5, Documents: 5, DocBytes: 1024, Service: "support-bot"})
	td := ptrace.NewTraces()
	for range 20 {
		turn := gen.Next(time.Unix(1_700_000_000, 0))
		synth.AppendTraces(td, &turn)
	}
	body := protoBody(b, td)
	lim := span.Limits{}.WithDefaults()
	var dst []span.Span
	b.Run("pdata", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		defer benchcpu.Report(b)()
		for b.Loop() {
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(body); err != nil {
				b.Fatal(err)
			}
			if _, rej := lim.Check(req.Traces()); rej != nil {
				b.Fatal(rej)
			}
			dst = span.FromTraces(req.Traces(), dst[:0], nil)
		}
	})
	// What a bare Collector's receiver pays to decode the same bytes, for comparison.
	b.Run("pdata-unmarshal-only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		defer benchcpu.Report(b)()
		for b.Loop() {
			if err := ptraceotlp.NewExportRequest().UnmarshalProto(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		defer benchcpu.Report(b)()
		for b.Loop() {
			var werr *span.Error
			if dst, _, werr = span.DecodeProto(body, lim, dst[:0], nil, nil); werr != nil {
				b.Fatal(werr)
			}
		}
	})
}

// TestWireVariants: the decoder reads each span's variant as the pdata path does, from the
// span, its feature-flag events and its resource.
func TestWireVariants(t *testing.T) {
	seeds := wireSeeds(t)
	var body []byte
	for _, b := range seeds {
		if bytes.Contains(b, []byte("not-a-flag-event")) {
			body = b
		}
	}
	got := viaWire(body, wireFuzzLimits)
	var variants []string
	for _, s := range got.spans {
		variants = append(variants, fmt.Sprintf("%s/%d", s.Variant, s.VariantRank))
	}
	if want := "[42/3 true/2 0.5/2 canary/1]"; fmt.Sprint(variants) != want {
		t.Fatalf("variants %v, want %s", variants, want)
	}
	sameAnswer(t, body, wireFuzzLimits)
}
