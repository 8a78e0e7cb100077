package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink records what the receiver hands over; err, when set, is returned instead.
type sink struct {
	mu    sync.Mutex
	spans []ptrace.Span
	err   error
}

func (s *sink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				sp := ptrace.NewSpan()
				sss.At(j).Spans().At(k).CopyTo(sp)
				s.spans = append(s.spans, sp)
			}
		}
	}
	return nil
}

func (s *sink) setErr(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }
func (s *sink) count() int       { s.mu.Lock(); defer s.mu.Unlock(); return len(s.spans) }

type harness struct {
	t    testing.TB
	r    *Receiver
	sink *sink
	reg  *prometheus.Registry
	url  string
	conn *grpc.ClientConn
}

func start(t *testing.T, limits span.Limits) *harness {
	t.Helper()
	return startWith(t, Settings{GRPCEndpoint: "127.0.0.1:0", HTTPEndpoint: "127.0.0.1:0", Limits: limits})
}

// startWith starts a receiver with set, counting into a fresh registry and handing spans to a
// sink unless set.Next is given, and dials its gRPC endpoint; both close at cleanup.
func startWith(t *testing.T, set Settings) *harness {
	t.Helper()
	reg := prometheus.NewRegistry()
	s := &sink{}
	if set.Next == nil {
		set.Next = s
	}
	set.Metrics = ingest.NewMetrics(reg)
	r, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(r.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		if err := r.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	h := &harness{t: t, r: r, sink: s, reg: reg, conn: conn}
	if set.HTTPEndpoint != "" {
		h.url = "http://" + r.HTTPAddr().String() + TracesPath
	}
	return h
}

func (h *harness) rejected(receiver, reason string) float64 {
	return testutil.Sum(h.t, h.reg, "ragwatch_ingest_rejected_total", map[string]string{"receiver": receiver, "reason": reason})
}

func (h *harness) received(receiver string) float64 {
	return testutil.Sum(h.t, h.reg, "ragwatch_spans_received_total", map[string]string{"receiver": receiver})
}

// traces builds a valid request with n spans of one trace.
func traces(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "support-bot")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := 0; i < n; i++ {
		sp := spans.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36})
		sp.SetSpanID(pcommon.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, byte(i + 1)})
		sp.SetName(fmt.Sprintf("span-%d", i))
		sp.Attributes().PutStr("openinference.span.kind", "LLM")
	}
	return td
}

func protoBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, url, contentType, encoding string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeStatus reads a google.rpc.Status body in the given encoding.
func decodeStatus(t *testing.T, contentType string, body []byte) *spb.Status {
	t.Helper()
	st := &spb.Status{}
	var err error
	if contentType == ctProtobuf {
		err = proto.Unmarshal(body, st)
	} else {
		err = protojson.Unmarshal(body, st)
	}
	if err != nil {
		t.Fatalf("error body %q is not a google.rpc.Status in %s: %v", body, contentType, err)
	}
	return st
}

func TestHTTPAccepts(t *testing.T) {
	h := start(t, span.Limits{})
	cases := []struct {
		name, contentType, encoding string
		body                        []byte
	}{
		{"protobuf", ctProtobuf, "", protoBody(t, traces(2))},
		{"json", ctJSON, "", jsonBody(t, traces(2))},
		{"protobuf gzip", ctProtobuf, "gzip", gzipped(t, protoBody(t, traces(2)))},
		{"json gzip with charset", ctJSON + "; charset=utf-8", "gzip", gzipped(t, jsonBody(t, traces(2)))},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, h.url, c.contentType, c.encoding, c.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			want := ctProtobuf
			if strings.HasPrefix(c.contentType, ctJSON) {
				want = ctJSON
			}
			if got := resp.Header.Get("Content-Type"); got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			er := ptraceotlp.NewExportResponse()
			if want == ctJSON {
				if err := er.UnmarshalJSON(body); err != nil {
					t.Fatal(err)
				}
			} else if err := er.UnmarshalProto(body); err != nil {
				t.Fatal(err)
			}
			if er.PartialSuccess().RejectedSpans() != 0 {
				t.Errorf("rejected spans = %d", er.PartialSuccess().RejectedSpans())
			}
			if got := h.sink.count(); got != 2*(i+1) {
				t.Errorf("sink holds %d spans, want %d", got, 2*(i+1))
			}
		})
	}
	if got := h.received(ingest.ReceiverOTLPHTTP); got != 8 {
		t.Errorf("spans received = %v, want 8", got)
	}
	h.sink.mu.Lock()
	sp := h.sink.spans[0]
	h.sink.mu.Unlock()
	if sp.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sp.SpanID().String() != "00f067aa0ba90201" || sp.Name() != "span-0" {
		t.Errorf("span = %s %s %s", sp.TraceID(), sp.SpanID(), sp.Name())
	}
}

func TestHTTPRejects(t *testing.T) {
	h := start(t, span.Limits{MaxRequestBytes: 64 << 10, MaxSpansPerRequest: 5, MaxAttributesPerSpan: 10, MaxAttributeValueBytes: 1000, MaxEventsPerSpan: 3})

	valid := protoBody(t, traces(1))
	validJSON := string(jsonBody(t, traces(1)))
	base64IDs := strings.Replace(validJSON, `"4bf92f3577b34da6a3ce929d0e0e4736"`,
		`"`+base64.StdEncoding.EncodeToString([]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36})+`"`, 1)
	notHex := strings.Replace(validJSON, `"4bf92f3577b34da6a3ce929d0e0e4736"`, `"zzf92f3577b34da6a3ce929d0e0e4736"`, 1)
	noTraceID := traces(1)
	noTraceID.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(pcommon.TraceID{})
	noSpanID := traces(1)
	noSpanID.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetSpanID(pcommon.SpanID{})
	bomb := traces(1)
	bomb.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("input.value", strings.Repeat("x", 1001))
	nestedBomb := traces(1)
	sl := nestedBomb.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutEmptySlice("tag.tags")
	for i := 0; i < 200; i++ {
		sl.AppendEmpty().SetStr("abcdefgh")
	}
	manyAttrs := traces(1)
	for i := 0; i < 11; i++ {
		manyAttrs.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutInt(fmt.Sprintf("k%d", i), 1)
	}
	manyEvents := traces(1)
	for i := 0; i < 4; i++ {
		manyEvents.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Events().AppendEmpty().SetName("db.query.result")
	}
	eventBomb := traces(1)
	eventBomb.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Events().AppendEmpty().Attributes().PutStr("db.query.result.document", strings.Repeat("y", 2000))
	var zeros bytes.Buffer
	zeros.Write(make([]byte, 1<<20)) // 1 MiB of zeros compresses to ~1 KB: a gzip bomb for a 64 KiB limit

	cases := []struct {
		name        string
		method      string
		contentType string
		encoding    string
		body        []byte
		status      int
		code        codes.Code
		msg         string // substring of the Status message
		reason      string // ingest_rejected_total reason that must go up by one ("" = none)
	}{
		{"GET", http.MethodGet, ctProtobuf, "", nil, 405, codes.Unimplemented, "method GET not allowed, use POST", ""},
		{"wrong content type", http.MethodPost, "text/plain", "", valid, 415, codes.InvalidArgument, `unsupported Content-Type "text/plain"`, ingest.ReasonContentType},
		{"no content type", http.MethodPost, "", "", valid, 415, codes.InvalidArgument, `unsupported Content-Type ""`, ingest.ReasonContentType},
		{"unknown encoding", http.MethodPost, ctProtobuf, "br", valid, 415, codes.InvalidArgument, `unsupported Content-Encoding "br"`, ingest.ReasonContentType},
		{"truncated protobuf", http.MethodPost, ctProtobuf, "", valid[:len(valid)-7], 400, codes.InvalidArgument, "invalid OTLP protobuf", ingest.ReasonMalformed},
		{"invalid JSON", http.MethodPost, ctJSON, "", []byte(`{"resourceSpans":[{`), 400, codes.InvalidArgument, "invalid OTLP/JSON", ingest.ReasonMalformed},
		{"base64 trace id", http.MethodPost, ctJSON, "", []byte(base64IDs), 400, codes.InvalidArgument, "traceId and spanId must be hex strings", ingest.ReasonMalformed},
		{"non-hex trace id", http.MethodPost, ctJSON, "", []byte(notHex), 400, codes.InvalidArgument, "base64 ids are not accepted", ingest.ReasonMalformed},
		{"zero trace id", http.MethodPost, ctProtobuf, "", protoBody(t, noTraceID), 400, codes.InvalidArgument, "resource_spans[0].scope_spans[0].spans[0]: trace_id must be 16 bytes, not all zero", ingest.ReasonInvalid},
		{"missing span id json", http.MethodPost, ctJSON, "", jsonBody(t, noSpanID), 400, codes.InvalidArgument, "spans[0]: span_id must be 8 bytes, not all zero", ingest.ReasonInvalid},
		{"not gzip", http.MethodPost, ctProtobuf, "gzip", valid, 400, codes.InvalidArgument, "invalid gzip body", ingest.ReasonMalformed},
		{"oversized body", http.MethodPost, ctProtobuf, "", make([]byte, 65<<10), 413, codes.InvalidArgument, "over the limit of 65536", ingest.ReasonTooLarge},
		{"gzip bomb", http.MethodPost, ctProtobuf, "gzip", gzipped(t, zeros.Bytes()), 413, codes.InvalidArgument, "over the limit of 65536 bytes", ingest.ReasonTooLarge},
		{"attribute bomb", http.MethodPost, ctProtobuf, "", protoBody(t, bomb), 400, codes.InvalidArgument, `spans[0]: attribute "input.value" is over 1000 bytes`, ingest.ReasonLimits},
		{"nested attribute bomb", http.MethodPost, ctJSON, "", jsonBody(t, nestedBomb), 400, codes.InvalidArgument, `attribute "tag.tags" is over 1000 bytes`, ingest.ReasonLimits},
		{"too many attributes", http.MethodPost, ctProtobuf, "", protoBody(t, manyAttrs), 400, codes.InvalidArgument, "spans[0]: 12 attributes, more than the limit of 10", ingest.ReasonLimits},
		{"too many events", http.MethodPost, ctProtobuf, "", protoBody(t, manyEvents), 400, codes.InvalidArgument, "spans[0]: 4 events, more than the limit of 3", ingest.ReasonLimits},
		{"event attribute bomb", http.MethodPost, ctProtobuf, "", protoBody(t, eventBomb), 400, codes.InvalidArgument, `spans[0].events[0]: attribute "db.query.result.document" is over 1000 bytes`, ingest.ReasonLimits},
		{"too many spans", http.MethodPost, ctProtobuf, "", protoBody(t, traces(6)), 400, codes.InvalidArgument, "request holds 6 spans, more than the limit of 5", ingest.ReasonLimits},
		{"deep JSON", http.MethodPost, ctJSON, "", []byte(strings.Repeat("[", 100) + strings.Repeat("]", 100)), 400, codes.InvalidArgument, "JSON nests deeper than the limit of 64", ingest.ReasonLimits},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := map[string]float64{}
			for _, r := range allReasons {
				before[r] = h.rejected(ingest.ReceiverOTLPHTTP, r)
			}
			req, err := http.NewRequest(c.method, h.url, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			if c.encoding != "" {
				req.Header.Set("Content-Encoding", c.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, c.status, body)
			}
			ct := resp.Header.Get("Content-Type")
			wantCT := ctJSON
			if c.contentType == ctProtobuf && c.status != 405 {
				wantCT = ctProtobuf
			}
			if ct != wantCT {
				t.Errorf("Content-Type = %q, want %q", ct, wantCT)
			}
			st := decodeStatus(t, ct, body)
			if codes.Code(st.Code) != c.code || !strings.Contains(st.Message, c.msg) {
				t.Errorf("status = %v %q, want %v containing %q", codes.Code(st.Code), st.Message, c.code, c.msg)
			}
			for _, r := range allReasons {
				want := before[r]
				if r == c.reason {
					want++
				}
				if got := h.rejected(ingest.ReceiverOTLPHTTP, r); got != want {
					t.Errorf("rejected{reason=%q} = %v, want %v", r, got, want)
				}
			}
		})
	}
	if h.sink.count() != 0 {
		t.Errorf("sink got %d spans from rejected requests", h.sink.count())
	}
	// The receiver keeps serving after all that.
	if resp, body := post(t, h.url, ctProtobuf, "", valid); resp.StatusCode != 200 {
		t.Fatalf("after bad input: status %d %q", resp.StatusCode, body)
	}
	if resp, _ := post(t, "http://"+h.r.HTTPAddr().String()+"/v1/metrics", ctProtobuf, "", valid); resp.StatusCode != 404 {
		t.Errorf("other path: status %d, want 404", resp.StatusCode)
	}
}

var allReasons = []string{ingest.ReasonMalformed, ingest.ReasonInvalid, ingest.ReasonContentType, ingest.ReasonTooLarge, ingest.ReasonLimits, ingest.ReasonOverloaded}

func TestHTTPConsumerErrors(t *testing.T) {
	h := start(t, span.Limits{})
	body := protoBody(t, traces(3))

	h.sink.setErr(fmt.Errorf("assembler: %w", ingest.ErrOverloaded))
	resp, out := post(t, h.url, ctProtobuf, "", body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("overloaded: status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if st := decodeStatus(t, ctProtobuf, out); codes.Code(st.Code) != codes.ResourceExhausted || st.Message != "ragwatch cannot take spans right now: assembler: overloaded, retry later" {
		t.Errorf("status = %v %q", codes.Code(st.Code), st.Message)
	}

	h.sink.setErr(errors.New("shutting down"))
	resp, out = post(t, h.url, ctJSON, "", jsonBody(t, traces(3)))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("failing consumer: status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if st := decodeStatus(t, ctJSON, out); codes.Code(st.Code) != codes.Unavailable {
		t.Errorf("code = %v", codes.Code(st.Code))
	}
	if got := h.rejected(ingest.ReceiverOTLPHTTP, ingest.ReasonOverloaded); got != 2 {
		t.Errorf("rejected overloaded = %v, want 2", got)
	}

	h.sink.setErr(&ingest.PartialError{Rejected: 1, Reason: "trace evicted"})
	resp, out = post(t, h.url, ctJSON, "", jsonBody(t, traces(3)))
	if resp.StatusCode != 200 {
		t.Fatalf("partial: status %d", resp.StatusCode)
	}
	er := ptraceotlp.NewExportResponse()
	if err := er.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	if er.PartialSuccess().RejectedSpans() != 1 || er.PartialSuccess().ErrorMessage() != "trace evicted" {
		t.Errorf("partial success = %d %q", er.PartialSuccess().RejectedSpans(), er.PartialSuccess().ErrorMessage())
	}
	if got := h.received(ingest.ReceiverOTLPHTTP); got != 2 {
		t.Errorf("spans received = %v, want 2", got)
	}
}

func TestGRPC(t *testing.T) {
	h := start(t, span.Limits{MaxRequestBytes: 64 << 10, MaxAttributeValueBytes: 1000})
	client := ptraceotlp.NewGRPCClient(h.conn)
	ctx := context.Background()

	resp, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(3)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.PartialSuccess().RejectedSpans() != 0 || h.sink.count() != 3 {
		t.Fatalf("rejected %d, sink %d", resp.PartialSuccess().RejectedSpans(), h.sink.count())
	}
	// gzip, as exporters configured with compression send it.
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1)), grpc.UseCompressor(grpcgzip.Name)); err != nil {
		t.Fatal(err)
	}
	if got := h.received(ingest.ReceiverOTLPGRPC); got != 4 {
		t.Errorf("spans received = %v, want 4", got)
	}

	bad := traces(1)
	bad.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(pcommon.TraceID{})
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(bad))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "resource_spans[0].scope_spans[0].spans[0]: trace_id must be 16 bytes, not all zero (hex-encoded in OTLP/JSON)" {
		t.Errorf("zero trace id: %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonInvalid); got != 1 {
		t.Errorf("rejected invalid = %v", got)
	}

	bomb := traces(1)
	bomb.ResourceSpans().At(0).Resource().Attributes().PutStr("k", strings.Repeat("z", 5000))
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(bomb))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != `resource_spans[0].resource: attribute "k" is over 1000 bytes, the limit for one value` {
		t.Errorf("attribute bomb: %v", err)
	}

	big := traces(1)
	big.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetName(strings.Repeat("n", 70<<10))
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(big))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Errorf("oversized: %v", err)
	}
	// gRPC answers the client before the handler returns from reading: poll.
	testutil.Eventually(t, 5*time.Second, 5*time.Millisecond, "the too-large request counted", func() bool { return h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonTooLarge) == 1 })

	// Truncated protobuf, sent raw.
	raw := protoBody(t, traces(2))
	var out []byte
	err = h.conn.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", raw[:len(raw)-5], &out, grpc.ForceCodecV2(rawCodec{}) /* the receiver's own pass-through codec */)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "invalid OTLP protobuf: ") {
		t.Errorf("truncated protobuf: %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonMalformed); got != 1 {
		t.Errorf("rejected malformed = %v", got)
	}

	h.sink.setErr(ingest.ErrOverloaded)
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1)))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("overloaded: %v", err)
	}
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() != time.Second {
		t.Errorf("RetryInfo = %v", st.Details())
	}
	h.sink.setErr(errors.New("stopping"))
	_, err = client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1)))
	if st := status.Convert(err); st.Code() != codes.Unavailable {
		t.Errorf("failing consumer: %v", err)
	}
	h.sink.setErr(nil)
	if _, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1))); err != nil {
		t.Fatalf("still serving: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(Settings{GRPCEndpoint: "127.0.0.1:0", HTTPEndpoint: "127.0.0.1:0", Next: &sink{}, Metrics: ingest.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown without start: %v", err)
	}
	if r.Ready() == nil {
		t.Error("ready before start")
	}
	for i := 0; i < 2; i++ {
		if err := r.Start(ctx); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if err := r.Ready(); err != nil {
			t.Errorf("not ready after start: %v", err)
		}
		if err := r.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Shutdown(ctx); err != nil {
			t.Fatalf("second shutdown: %v", err)
		}
		if r.Ready() == nil {
			t.Error("ready after shutdown")
		}
	}

	// A port already taken fails Start with the address and leaves nothing running.
	busy, err := New(Settings{GRPCEndpoint: "127.0.0.1:0", HTTPEndpoint: "127.0.0.1:0", Next: &sink{}, Metrics: ingest.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer busy.Shutdown(ctx)
	clash, _ := New(Settings{GRPCEndpoint: "127.0.0.1:0", HTTPEndpoint: busy.HTTPAddr().String(), Next: &sink{}, Metrics: ingest.NewMetrics(prometheus.NewRegistry())})
	err = clash.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "start OTLP HTTP receiver on "+busy.HTTPAddr().String()) {
		t.Errorf("clash: %v", err)
	}

	if _, err := New(Settings{Metrics: ingest.NewMetrics(prometheus.NewRegistry())}); err == nil {
		t.Error("New without Next succeeded")
	}
}

// TestGRPCExportsRunOnStreamWorkers checks that exports are served by the receiver's stream
// workers: one after the other, they run on a few long-lived goroutines, where gRPC's default
// gives each export a new goroutine (a new id) that grows its stack again. An export that
// finds no worker waiting (one still returning from the export before, on a loaded machine)
// runs on a goroutine of its own, so the bound leaves room for a few.
func TestGRPCExportsRunOnStreamWorkers(t *testing.T) {
	var (
		mu  sync.Mutex
		ids = map[string]int{}
	)
	h := startWith(t, Settings{GRPCEndpoint: "127.0.0.1:0", Next: TracesConsumerFunc(func(context.Context, ptrace.Traces) error {
		var buf [64]byte
		id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine "), " ")
		mu.Lock()
		ids[id]++
		mu.Unlock()
		return nil
	})})
	client := ptraceotlp.NewGRPCClient(h.conn)
	const exports = 5 * minStreamWorkers
	for range exports {
		if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(1))); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, c := range ids {
		n += c
	}
	if n != exports || len(ids) > 2*minStreamWorkers {
		t.Errorf("%d exports ran on %d goroutines, want %d on at most %d", n, len(ids), exports, 2*minStreamWorkers)
	}
}
