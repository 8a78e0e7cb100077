package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type countingServer struct {
	ptraceotlp.UnimplementedGRPCServer
	spans, traces atomic.Int64
}

func (s *countingServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.spans.Add(int64(req.Traces().SpanCount()))
	s.traces.Add(int64(req.Traces().ResourceSpans().Len()))
	return ptraceotlp.NewExportResponse(), nil
}

func TestRunSendsExactCountOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cs := &countingServer{}
	ptraceotlp.RegisterGRPCServer(srv, cs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	res, err := Run(context.Background(), Options{Protocol: "grpc", Endpoint: lis.Addr().String(), Count: 250, Batch: 10, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 250 || res.Errors != 0 || res.Requests != 25 {
		t.Fatalf("result %+v", res)
	}
	if got := cs.traces.Load(); got != 250 {
		t.Fatalf("server got %d traces, want 250", got)
	}
	if got := cs.spans.Load(); got != 750 {
		t.Fatalf("server got %d spans, want 750 (3 per trace)", got)
	}
	if res.P50 <= 0 || res.Max < res.P99 {
		t.Fatalf("latency percentiles not filled: %+v", res)
	}
}

func TestRunOverHTTPCountsErrorsAndSpanShape(t *testing.T) {
	var calls, spans atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if r.Header.Get("Content-Type") != "application/x-protobuf" || req.UnmarshalProto(body) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		spans.Add(int64(req.Traces().SpanCount()))
		if n%5 == 0 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Options{Protocol: "http", Endpoint: srv.URL, Count: 20, Concurrency: 1, Synth: synthOpts(5)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 20 || res.Requests != 20 || res.Errors != 4 {
		t.Fatalf("result %+v, want 20 traces, 20 requests, 4 errors", res)
	}
	if spans.Load() != 100 {
		t.Fatalf("spans = %d, want 100 (5 per trace)", spans.Load())
	}
	if res.FirstError == "" {
		t.Fatal("first error not reported")
	}
}

// TestRunOverHTTPJSON: http-json sends OTLP/JSON that pdata reads back, span for span.
func TestRunOverHTTPJSON(t *testing.T) {
	var spans atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if r.Header.Get("Content-Type") != "application/json" || req.UnmarshalJSON(body) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		spans.Add(int64(req.Traces().SpanCount()))
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Options{Protocol: "http-json", Endpoint: srv.URL, Count: 6, Batch: 3, Concurrency: 1, Synth: synthOpts(5)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 6 || res.Requests != 2 || res.Errors != 0 || spans.Load() != 30 {
		t.Fatalf("result %+v, %d spans; want 6 traces in 2 requests, 0 errors, 30 spans", res, spans.Load())
	}
}

func TestRunHonoursRate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	start := time.Now()
	res, err := Run(context.Background(), Options{Protocol: "http", Endpoint: srv.URL, Count: 30, Rate: 100, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 30 traces at 100/s with a burst of 1 need at least 290 ms.
	if el := time.Since(start); el < 280*time.Millisecond || res.Traces != 30 {
		t.Fatalf("sent %d traces in %s; the rate limit was not applied", res.Traces, el)
	}
}

func TestRunWithoutRootSendsOnlyChildren(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cs := &countingServer{}
	ptraceotlp.RegisterGRPCServer(srv, cs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	o := Options{Protocol: "grpc", Endpoint: lis.Addr().String(), Count: 40, Batch: 10, Concurrency: 2}
	o.Synth.Spans, o.Synth.NoRoot = 5, true
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 40 || res.Errors != 0 {
		t.Fatalf("result %+v", res)
	}
	if got := cs.spans.Load(); got != 160 {
		t.Fatalf("server got %d spans, want 160 (4 of 5 per trace, no root)", got)
	}
}

func TestCutByEnd(t *testing.T) {
	soon, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	later, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	past, cancel3 := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel3()
	deadline := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	unavailable := status.Error(codes.Unavailable, "connection refused")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"deadline exceeded just before the end", soon, deadline, true},
		{"another error just before the end", soon, unavailable, false},
		{"deadline exceeded long before the end", later, deadline, false},
		{"any error after the end", past, unavailable, true},
		{"no end", context.Background(), deadline, false},
	} {
		if got := cutByEnd(c.ctx, c.err); got != c.want {
			t.Errorf("%s: cutByEnd = %v, want %v", c.name, got, c.want)
		}
	}
}

// Requests still in flight when the duration ends are reported as cut, not as traces sent:
// the endpoint may never have taken them, and ragwatch's records are compared with traces.
func TestRunReportsRequestsCutByTheEnd(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 2 {
			select { // every request after the first two hangs past the end of the run
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	res, err := Run(context.Background(), Options{Protocol: "http", Endpoint: srv.URL, Duration: 300 * time.Millisecond, Batch: 4, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 8 || res.Cut != 4 || res.Requests != 3 || res.Errors != 0 {
		t.Fatalf("result %+v, want 8 traces in 2 answered requests, 4 cut in the third, 0 errors", res)
	}
	if s := res.String(); !strings.Contains(s, "traces=8 ") || !strings.Contains(s, " cut=4 ") {
		t.Fatalf("String() = %q", s)
	}
}

// rawServer keeps the protobuf of every OTLP export request of traces and of logs it is sent
// over gRPC, in arrival order.
type rawServer struct {
	ptraceotlp.UnimplementedGRPCServer
	mu     sync.Mutex
	traces [][]byte
	logs   [][]byte
	order  []string
}

func (s *rawServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	b, err := req.MarshalProto()
	s.mu.Lock()
	s.traces = append(s.traces, b)
	s.order = append(s.order, "traces")
	s.mu.Unlock()
	return ptraceotlp.NewExportResponse(), err
}

type rawLogs struct {
	plogotlp.UnimplementedGRPCServer
	*rawServer
}

func (s *rawLogs) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	b, err := req.MarshalProto()
	s.mu.Lock()
	s.logs = append(s.logs, b)
	s.order = append(s.order, "logs")
	s.mu.Unlock()
	return plogotlp.NewExportResponse(), err
}

// With Logs, every trace's GenAI events go to the logs service before its traces, and
// ragwatch's own decoders join each user message and choice to the trace's LLM span: none is
// orphaned, none is read as anything but the events of that span.
func TestRunWithLogsSendsEventsRagwatchJoinsToTheLLMSpan(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rs := &rawServer{}
	ptraceotlp.RegisterGRPCServer(srv, rs)
	plogotlp.RegisterGRPCServer(srv, &rawLogs{rawServer: rs})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	o := Options{Protocol: "grpc", Endpoint: lis.Addr().String(), Count: 30, Batch: 10, Concurrency: 1, Logs: true, Synth: synthOpts(5)}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 30 || res.LogRecords != 90 || res.Requests != 6 || res.Errors != 0 {
		t.Fatalf("result %+v, want 30 traces and 90 log records in 6 requests", res)
	}
	if s := res.String(); !strings.Contains(s, " log_records=90") {
		t.Fatalf("String() = %q", s)
	}
	if want := []string{"logs", "traces", "logs", "traces", "logs", "traces"}; !slices.Equal(rs.order, want) {
		t.Fatalf("requests in order %v, want %v", rs.order, want)
	}
	lim := span.Limits{}.WithDefaults()
	for i := range rs.traces {
		spans, n, werr := span.DecodeProto(rs.traces[i], lim, nil, nil, nil)
		if werr != nil || n != 50 {
			t.Fatalf("traces request %d: %d spans, %v", i, n, werr)
		}
		carriers, c, werr := span.DecodeLogs(rs.logs[i], lim, nil)
		if werr != nil {
			t.Fatal(werr)
		}
		// The system message is a GenAI event no reader reads; the user message and the choice
		// are carriers of their span.
		if c != (span.LogCounts{Records: 30, Events: 20, Unread: 10}) {
			t.Fatalf("logs request %d: counts %+v", i, c)
		}
		all, joined, orphaned := span.JoinEvents(append(spans, carriers...))
		if joined != 20 || orphaned != 0 || len(all) != 50 {
			t.Fatalf("logs request %d: joined %d, orphaned %d, %d spans", i, joined, orphaned, len(all))
		}
		llm := 0
		for _, s := range all {
			if s.Name != "llm" {
				if len(s.Events) != 0 {
					t.Fatalf("span %s got events %+v", s.Name, s.Events)
				}
				continue
			}
			llm++
			var names []string
			for _, e := range s.Events {
				names = append(names, e.Name)
			}
			if !slices.Equal(names, []string{"gen_ai.user.message", "gen_ai.choice"}) {
				t.Fatalf("llm span events %v", names)
			}
		}
		if llm != 10 {
			t.Fatalf("%d llm spans, want 10", llm)
		}
		span.ReleaseSpans(all)
	}
}

// Over HTTP the events go to /v1/logs, the traces to /v1/traces, of the same base URL.
func TestRunWithLogsOverHTTPUsesTheLogsPath(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := 0
		switch r.URL.Path {
		case "/v1/traces":
			req := ptraceotlp.NewExportRequest()
			if req.UnmarshalJSON(body) != nil {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			n = req.Traces().ResourceSpans().Len()
		case "/v1/logs":
			req := plogotlp.NewExportRequest()
			if req.UnmarshalJSON(body) != nil {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			n = req.Logs().LogRecordCount()
		default:
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		paths[r.URL.Path] += n
		mu.Unlock()
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Options{Protocol: "http-json", Endpoint: srv.URL + "/v1/traces", Count: 8, Batch: 4, Concurrency: 2, Logs: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != 8 || res.LogRecords != 24 || res.Requests != 4 || res.Errors != 0 {
		t.Fatalf("result %+v", res)
	}
	if paths["/v1/traces"] != 8 || paths["/v1/logs"] != 24 {
		t.Fatalf("received %v, want 8 traces on /v1/traces and 24 log records on /v1/logs", paths)
	}
}
