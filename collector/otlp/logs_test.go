package otlp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/config"
	"github.com/ragwatch/ragwatch/internal/ingest"
	"github.com/ragwatch/ragwatch/internal/testutil"
	"github.com/ragwatch/ragwatch/internal/tlsauth"
)

// logsSink decodes log exports with the real decoder and keeps the GenAI events' names.
type logsSink struct {
	mu     sync.Mutex
	events []string
	err    error
}

func (s *logsSink) ConsumeLogs(_ context.Context, body []byte, lim span.Limits) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	carriers, c, werr := span.DecodeLogs(body, lim, nil)
	if werr != nil {
		return 0, werr
	}
	for _, cs := range carriers {
		s.events = append(s.events, cs.Events[0].Name)
	}
	span.ReleaseSpans(carriers)
	return c.Records, nil
}

func (s *logsSink) got() string { s.mu.Lock(); defer s.mu.Unlock(); return strings.Join(s.events, ",") }

// genAILogs is a log export with a user message and a choice of one span, and one plain line.
func genAILogs(n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "support-bot")
	rs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		lr := rs.AppendEmpty()
		lr.SetTraceID(pcommon.TraceID{0x4b, 15: 1})
		lr.SetSpanID(pcommon.SpanID{0xf0, 7: 1})
		switch i % 3 {
		case 0:
			lr.SetEventName("gen_ai.user.message")
			lr.Body().SetEmptyMap().PutStr("content", "q?")
		case 1:
			lr.Attributes().PutStr("event.name", "gen_ai.choice")
			lr.Body().SetEmptyMap().PutEmptyMap("message").PutStr("content", "a.")
		default:
			lr.Body().SetStr("GET / 200")
		}
	}
	return ld
}

func logsProto(t testing.TB, ld plog.Logs) []byte {
	t.Helper()
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func logsJSON(t testing.TB, ld plog.Logs) []byte {
	t.Helper()
	b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func startLogs(t *testing.T, set Settings) (*harness, *logsSink) {
	t.Helper()
	ls := &logsSink{}
	if set.Logs == nil {
		set.Logs = ls
	}
	set.GRPCEndpoint, set.HTTPEndpoint = "127.0.0.1:0", "127.0.0.1:0"
	h := startWith(t, set)
	h.url = "http://" + h.r.HTTPAddr().String() + LogsPath
	return h, ls
}

func (h *harness) logsReceived(receiver string) float64 {
	return testutil.Sum(h.t, h.reg, "ragwatch_log_records_received_total", map[string]string{"receiver": receiver})
}

func TestHTTPLogs(t *testing.T) {
	h, ls := startLogs(t, Settings{Limits: span.Limits{MaxSpansPerRequest: 5}})
	ok := []struct {
		name, ct, enc string
		body          []byte
	}{
		{"protobuf", ctProtobuf, "", logsProto(t, genAILogs(3))},
		{"json", ctJSON, "", logsJSON(t, genAILogs(3))},
		{"gzip protobuf", ctProtobuf, "gzip", gzipped(t, logsProto(t, genAILogs(3)))},
		{"gzip json", ctJSON, "gzip", gzipped(t, logsJSON(t, genAILogs(3)))},
	}
	for _, c := range ok {
		resp, body := post(t, h.url, c.ct, c.enc, c.body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != c.ct {
			t.Fatalf("%s: %d %s %q", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if got, want := ls.got(), strings.Repeat("gen_ai.user.message,gen_ai.choice,", 4); got+"," != want {
		t.Errorf("events %q, want %q", got, want)
	}
	if got := h.logsReceived(ingest.ReceiverOTLPHTTP); got != 12 {
		t.Errorf("log records received %v, want 12", got)
	}
	bad := []struct {
		name, ct     string
		body         []byte
		status       int
		reason, text string
	}{
		{"malformed protobuf", ctProtobuf, []byte{0x0a, 0x05, 0x01}, 400, ingest.ReasonMalformed, "invalid OTLP protobuf: unexpected EOF"},
		{"malformed json", ctJSON, []byte(`{"resourceLogs":[{`), 400, ingest.ReasonMalformed, "invalid OTLP/JSON"},
		{"too many records", ctProtobuf, logsProto(t, genAILogs(6)), 400, ingest.ReasonLimits, "request holds 6 log records, more than the limit of 5"},
		{"too many records, json", ctJSON, logsJSON(t, genAILogs(6)), 400, ingest.ReasonLimits, "request holds 6 log records, more than the limit of 5"},
		{"content type", "text/plain", []byte("x"), 415, ingest.ReasonContentType, "unsupported Content-Type"},
	}
	for _, c := range bad {
		before := h.rejected(ingest.ReceiverOTLPHTTP, c.reason)
		resp, body := post(t, h.url, c.ct, "", c.body)
		ct := c.ct
		if ct == "text/plain" {
			ct = ctJSON
		}
		st := decodeStatus(t, ct, body)
		if resp.StatusCode != c.status || !strings.Contains(st.Message, c.text) || st.Code != int32(codes.InvalidArgument) {
			t.Errorf("%s: %d %v %q, want %d %q", c.name, resp.StatusCode, codes.Code(st.Code), st.Message, c.status, c.text)
		}
		if got := h.rejected(ingest.ReceiverOTLPHTTP, c.reason); got != before+1 {
			t.Errorf("%s: rejected{reason=%q} %v, want %v", c.name, c.reason, got, before+1)
		}
	}
	// Overload travels back as for traces.
	ls.mu.Lock()
	ls.err = fmt.Errorf("held traces full: %w", ingest.ErrOverloaded)
	ls.mu.Unlock()
	resp, _ := post(t, h.url, ctProtobuf, "", logsProto(t, genAILogs(3)))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("overloaded consumer: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// Without a LogsConsumer neither /v1/logs nor the LogsService is served, as before logs existed.
func TestLogsNotServedWithoutConsumer(t *testing.T) {
	h := start(t, span.Limits{})
	resp, _ := post(t, strings.Replace(h.url, TracesPath, LogsPath, 1), ctProtobuf, "", logsProto(t, genAILogs(3)))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/v1/logs: %d, want 404", resp.StatusCode)
	}
	_, err := plogotlp.NewGRPCClient(h.conn).Export(context.Background(), plogotlp.NewExportRequestFromLogs(genAILogs(3)))
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("LogsService: %v, want Unimplemented", err)
	}
}

func TestGRPCLogs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := tlsauth.NewTokens(config.BearerAuth{TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	var refuse bool
	var mu sync.Mutex
	h, ls := startLogs(t, Settings{Limits: span.Limits{MaxSpansPerRequest: 5}, GRPCTokens: tok, Refuse: func() bool { mu.Lock(); defer mu.Unlock(); return refuse }})
	client := plogotlp.NewGRPCClient(h.conn)
	authed := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	if _, err := client.Export(authed, plogotlp.NewExportRequestFromLogs(genAILogs(3))); err != nil {
		t.Fatal(err)
	}
	if ls.got() != "gen_ai.user.message,gen_ai.choice" || h.logsReceived(ingest.ReceiverOTLPGRPC) != 3 {
		t.Fatalf("events %q, received %v", ls.got(), h.logsReceived(ingest.ReceiverOTLPGRPC))
	}
	_, err = client.Export(authed, plogotlp.NewExportRequestFromLogs(genAILogs(6)))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "request holds 6 log records, more than the limit of 5" {
		t.Errorf("too many: %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonLimits); got != 1 {
		t.Errorf("rejected{limits} %v", got)
	}
	if _, err := client.Export(context.Background(), plogotlp.NewExportRequestFromLogs(genAILogs(3))); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonUnauthenticated); got != 1 {
		t.Errorf("rejected{unauthenticated} %v", got)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	if _, err := client.Export(authed, plogotlp.NewExportRequestFromLogs(genAILogs(3))); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the memory limit: %v", err)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	// Malformed bytes, sent raw.
	var out []byte
	err = h.conn.Invoke(authed, logsExportMethod, []byte{0x0a, 0x05, 0x01}, &out, grpc.ForceCodecV2(rawCodec{}))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "invalid OTLP protobuf") {
		t.Errorf("malformed: %v", err)
	}
	if got := h.rejected(ingest.ReceiverOTLPGRPC, ingest.ReasonMalformed); got != 1 {
		t.Errorf("rejected{malformed} %v", got)
	}
}

// FuzzLogsHTTP: any body posted to /v1/logs, protobuf or JSON, is taken (200) or refused with
// 400/413, in the request's encoding, through the real wire decoder.
func FuzzLogsHTTP(f *testing.F) {
	r, err := New(Settings{
		Limits:  span.Limits{MaxRequestBytes: 1 << 20},
		Next:    &sink{},
		Logs:    &logsSink{},
		Metrics: ingest.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		f.Fatal(err)
	}
	h := r.HTTPHandler()
	f.Add(false, logsProto(f, genAILogs(3)))
	f.Add(true, logsJSON(f, genAILogs(3)))
	f.Add(false, []byte{0x0a, 0x02, 0x12, 0x00})
	f.Add(true, []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"gen_ai.choice","body":{"kvlistValue":{}}}]}]}]}`))
	f.Fuzz(func(t *testing.T, asJSON bool, body []byte) {
		ct := ctProtobuf
		if asJSON {
			ct = ctJSON
		}
		req := httptest.NewRequest(http.MethodPost, LogsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %d bytes: %s", rec.Code, len(body), rec.Body.Bytes())
		}
		if rec.Header().Get("Content-Type") != ct {
			t.Fatalf("Content-Type %q", rec.Header().Get("Content-Type"))
		}
	})
}
