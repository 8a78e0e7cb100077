package service_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/ragwatch/ragwatch/internal/testutil"
)

func ragTrace(tid byte) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "bad-input")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, tid})
	sp.SetSpanID(pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, 1})
	sp.SetName("handle")
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(100 * time.Millisecond)))
	sp.Attributes().PutStr("rag.query", "q?")
	sp.Attributes().PutStr("rag.answer", "a.")
	return td
}

// TestBadInput sends malformed and hostile requests to the running receivers and API: each
// gets its documented status and reason, is counted on /metrics, and ragwatch keeps serving.
func TestBadInput(t *testing.T) {
	cfg := testConfig(t)
	cfg.Receivers.OTLP.MaxRequestBytes = 2 << 20
	e := startEnv(t, cfg)
	addrs := e.app.Addrs()
	tracesURL := "http://" + addrs.OTLPHTTP + "/v1/traces"

	valid, err := ptraceotlp.NewExportRequestFromTraces(ragTrace(1)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	validJSON, err := ptraceotlp.NewExportRequestFromTraces(ragTrace(1)).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	hexID := ragTrace(1).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
	b64 := strings.Replace(string(validJSON), hexID.String(), base64.StdEncoding.EncodeToString(hexID[:]), 1)
	bomb := ragTrace(2)
	bomb.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("input.value", strings.Repeat("A", 1<<20+1))
	bombBody, _ := ptraceotlp.NewExportRequestFromTraces(bomb).MarshalProto()
	logsURL := "http://" + addrs.OTLPHTTP + "/v1/logs"
	logBomb := plog.NewLogs()
	lr := logBomb.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName("gen_ai.user.message")
	lr.Body().SetEmptyMap().PutStr("content", strings.Repeat("A", 1<<20+1))
	logBombBody, _ := plogotlp.NewExportRequestFromLogs(logBomb).MarshalProto()

	cases := []struct {
		name, url, contentType string
		body                   []byte
		status                 int
		msg                    string
		metric                 string
	}{
		{"truncated protobuf", tracesURL, "application/x-protobuf", valid[:len(valid)-3], 400, "invalid OTLP protobuf", `ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_http"}`},
		{"wrong content type", tracesURL, "text/plain", valid, 415, `unsupported Content-Type "text/plain"`, `ragwatch_ingest_rejected_total{reason="content_type",receiver="otlp_http"}`},
		{"invalid JSON", tracesURL, "application/json", []byte(`{"resourceSpans":[`), 400, "invalid OTLP/JSON", `ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_http"}`},
		{"base64 ids", tracesURL, "application/json", []byte(b64), 400, "traceId and spanId must be hex strings", `ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_http"}`},
		{"oversized body", tracesURL, "application/x-protobuf", make([]byte, 2<<20+1), 413, "over the limit of 2097152", `ragwatch_ingest_rejected_total{reason="too_large",receiver="otlp_http"}`},
		{"attribute bomb", tracesURL, "application/x-protobuf", bombBody, 400, `attribute "input.value" is over 1048576 bytes`, `ragwatch_ingest_rejected_total{reason="limits",receiver="otlp_http"}`},
		{"truncated log protobuf", logsURL, "application/x-protobuf", logBombBody[:len(logBombBody)-3], 400, "invalid OTLP protobuf", `ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_http"}`},
		{"invalid log JSON", logsURL, "application/json", []byte(`{"resourceLogs":[`), 400, "invalid OTLP/JSON", `ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_http"}`},
		{"log body bomb", logsURL, "application/x-protobuf", logBombBody, 400, "body is over 1048576 bytes", `ragwatch_ingest_rejected_total{reason="limits",receiver="otlp_http"}`},
		{"record without trace id", e.base + "/api/v1/records", "application/json", []byte(`{"query":"q"}`), 400, `"errors":["trace_id: is required"]`, `ragwatch_ingest_rejected_total{reason="invalid",receiver="api"}`},
		{"record invalid JSON", e.base + "/api/v1/records", "application/json", []byte(`[{`), 400, `"error":"malformed JSON"`, `ragwatch_ingest_rejected_total{reason="malformed",receiver="api"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := scrape(t, e.base)[c.metric]
			resp, err := http.Post(c.url, c.contentType, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			text := string(body)
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && (strings.Contains(c.url, "/v1/traces") || strings.Contains(c.url, "/v1/logs")) {
				var st spb.Status
				if err := protojson.Unmarshal(body, &st); err != nil {
					t.Fatalf("body %q is not a google.rpc.Status: %v", body, err)
				}
				text = st.Message
			}
			if !strings.Contains(text, c.msg) {
				t.Errorf("answer %q does not say %q", text, c.msg)
			}
			if after := scrape(t, e.base)[c.metric]; after != before+1 {
				t.Errorf("%s went from %v to %v", c.metric, before, after)
			}
		})
	}

	// gRPC: a zero trace id is InvalidArgument with the reason.
	conn, err := grpc.NewClient(addrs.OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	zero := ragTrace(3)
	zero.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(pcommon.TraceID{})
	_, err = ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(zero))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "trace_id must be 16 bytes, not all zero") {
		t.Errorf("gRPC zero trace id: %v", err)
	}
	if v := scrape(t, e.base)[`ragwatch_ingest_rejected_total{reason="invalid",receiver="otlp_grpc"}`]; v != 1 {
		t.Errorf("gRPC invalid counted %v times", v)
	}

	// gRPC: truncated protobuf, put on the wire raw, is InvalidArgument with the reason.
	var out []byte
	err = conn.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
		valid[:len(valid)-3], &out, grpc.ForceCodecV2(rawBytes{}))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "invalid OTLP protobuf: ") {
		t.Errorf("gRPC truncated protobuf: %v", err)
	}
	if v := scrape(t, e.base)[`ragwatch_ingest_rejected_total{reason="malformed",receiver="otlp_grpc"}`]; v != 1 {
		t.Errorf("gRPC malformed counted %v times", v)
	}

	// Nothing bad reached the pipeline, and ragwatch still serves both receivers.
	if n := e.sink.len(); n != 0 {
		t.Fatalf("%d records from bad input", n)
	}
	for p, proto := range []struct{ name, endpoint string }{{"grpc", addrs.OTLPGRPC}, {"http", addrs.OTLPHTTP}} {
		f := families()[4]
		newSender(t, proto.name, proto.endpoint, f.service).send(t, traceID(9, p), f.spans)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "records after bad input", func() bool { return e.sink.len() == 2 })
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s = %d", path, resp.StatusCode)
		}
	}
}

// TestShutdownDrains holds a trace (wait is an hour), then shuts down: receivers stop, the
// assembler assembles what it holds and the record reaches the signals and statsd before the
// exporters close.
func TestShutdownDrains(t *testing.T) {
	cfg := testConfig(t)
	cfg.Assembly.Wait = time.Hour
	cfg.Assembly.CompleteWait = time.Hour // the trace sent is complete
	cfg.Assembly.Timeout = 2 * time.Hour
	e := startEnv(t, cfg)
	addrs := e.app.Addrs()
	f := families()[2]
	newSender(t, "http", addrs.OTLPHTTP, f.service).send(t, traceID(7, 1), f.spans)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "trace held", func() bool { return e.app.Assembler.Held() == 1 })
	if e.sink.len() != 0 {
		t.Fatal("assembled before its wait")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := f.want
	want.TraceID, want.SpanID = traceID(7, 1).String(), rootSpanID
	if got := e.sink.get(want.TraceID); got == nil || asJSON(t, got) != asJSON(t, &want) {
		t.Fatalf("drained record = %v", got)
	}
	// statsd closed after the drain, flushing the drained record's lines.
	line := fmt.Sprintf("rag.requests:1|c|#service:%s", f.service)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "statsd flush", func() bool { return e.statsd.count(line) == 1 })
	// Receivers no longer listen; the HTTP server is down too.
	if _, err := http.Post("http://"+addrs.OTLPHTTP+"/v1/traces", "application/x-protobuf", nil); err == nil {
		t.Error("OTLP HTTP still accepting after shutdown")
	}
	if err := e.app.Shutdown(ctx); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
}

// TestLifecycle: shutdown without start, and a start that fails on a taken port undoes itself.
func TestLifecycle(t *testing.T) {
	a, err := appNew(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown without start: %v", err)
	}

	busy := startEnv(t, testConfig(t))
	cfg := testConfig(t)
	cfg.Receivers.OTLP.HTTP.Endpoint = busy.app.Addrs().OTLPHTTP
	b, err := appNew(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start otlp receivers: start OTLP HTTP receiver on "+cfg.Receivers.OTLP.HTTP.Endpoint) {
		t.Fatalf("start on a taken port: %v", err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown after failed start: %v", err)
	}
}

// rawBytes is a gRPC codec that sends bytes as they are.
type rawBytes struct{}

func (rawBytes) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawBytes) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawBytes) Name() string { return "proto" }

// TestInvalidUTF8ServiceName: OTLP protobuf strings are not checked on decode, and Prometheus
// panics on a label value that is not UTF-8. One such service.name once crashed the process;
// now it is labelled "other" and ragwatch keeps serving.
func TestInvalidUTF8ServiceName(t *testing.T) {
	e := startEnv(t, testConfig(t))
	td := ragTrace(9)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "\xf4")
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+e.app.Addrs().OTLPHTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "record", func() bool { return e.sink.len() == 1 })
	if v := scrape(t, e.base)[`ragwatch_requests_total{service="other"}`]; v != 1 {
		t.Errorf(`requests_total{service="other"} = %v, want 1`, v)
	}
}
