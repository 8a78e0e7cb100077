package service_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/cmd/ragwatch/internal/service"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// TestMemoryLimitRefusesAndRecovers drives the memory guard with a fake heap: above
// memory_limit_mib every receiver refuses before reading input with its retryable answer and
// counts it; below 90% of the limit intake resumes.
func TestMemoryLimitRefusesAndRecovers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.MemoryLimitMiB = 100
	var heap atomic.Uint64
	heap.Store(50 << 20)
	e := startEnv(t, cfg, service.WithHeapReader(heap.Load, 2*time.Millisecond))
	a, sk, base := e.app, e.sink, e.base
	ctx := context.Background()
	body, err := ptraceotlp.NewExportRequestFromTraces(ragTrace(1)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	postOTLP := func() *http.Response {
		t.Helper()
		resp, err := http.Post("http://"+a.Addrs().OTLPHTTP+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	postRecord := func(id string) *http.Response {
		t.Helper()
		resp, err := http.Post(base+"/api/v1/records", "application/json", strings.NewReader(
			`{"trace_id":"`+id+`","service":"svc","query":"q","answer":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	conn, err := grpc.NewClient(a.Addrs().OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	exportGRPC := func() error {
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(ragTrace(2)))
		return err
	}
	nc, err := nats.Connect(a.NATS.ClientURL(), a.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	overloaded := func(rcv string) float64 {
		return scrape(t, base)[`ragwatch_ingest_rejected_total{reason="overloaded",receiver="`+rcv+`"}`]
	}

	// Below the limit: accepted.
	if resp := postOTLP(); resp.StatusCode != http.StatusOK {
		t.Fatalf("below the limit: OTLP HTTP = %d", resp.StatusCode)
	}

	// Over the limit: wait for the guard's next sample, then every receiver refuses.
	heap.Store(150 << 20)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "refusal", func() bool { return postOTLP().StatusCode == http.StatusServiceUnavailable })
	resp := postOTLP()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("OTLP HTTP = %d, Retry-After %q; want 503, 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	err = exportGRPC()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("OTLP gRPC = %v, want ResourceExhausted", err)
	}
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.GetRetryDelay().AsDuration()
		}
	}
	if delay != 5*time.Second {
		t.Fatalf("RetryInfo delay = %v, want 5s (details %v)", delay, st.Details())
	}
	resp = postRecord("bbbb0000000000000000000000000001")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
		t.Fatalf("API = %d, Retry-After %q; want 503, 5", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if err := nc.Publish("ragwatch.records.svc", []byte(`{"trace_id":"bbbb0000000000000000000000000002","service":"svc","query":"q","answer":"a"}`)); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "NATS refusal counted", func() bool { return overloaded("nats") == 1 })
	if got := overloaded("otlp_http"); got < 2 {
		t.Fatalf("otlp_http overloaded = %v, want >= 2", got)
	}
	for rcv, want := range map[string]float64{"otlp_grpc": 1, "api": 1, "nats": 1} {
		if got := overloaded(rcv); got != want {
			t.Errorf("%s overloaded = %v, want %v", rcv, got, want)
		}
	}
	if sk.get("bbbb0000000000000000000000000001") != nil || sk.get("bbbb0000000000000000000000000002") != nil {
		t.Fatal("a refused record reached the pipeline")
	}

	// Between 90% and 100% of the limit the guard keeps refusing (hysteresis), below it
	// intake resumes everywhere.
	heap.Store(80 << 20)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "recovery", func() bool { return postOTLP().StatusCode == http.StatusOK })
	if err := exportGRPC(); err != nil {
		t.Fatalf("OTLP gRPC after recovery: %v", err)
	}
	if resp := postRecord("bbbb0000000000000000000000000003"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("API after recovery = %d", resp.StatusCode)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "record after recovery", func() bool { return sk.get("bbbb0000000000000000000000000003") != nil })
	m := scrape(t, base)
	if m["ragwatch_memory_limit_bytes"] != 100<<20 {
		t.Fatalf("ragwatch_memory_limit_bytes = %v", m["ragwatch_memory_limit_bytes"])
	}
}

// TestIntakeLimits sends JSON nested too deep and batches over limits.max_records_per_batch to
// the API and to NATS: each is refused before decoding with a clear error and counted as
// reason "limits"; a batch at the limit passes. An OTLP request with an attribute over
// limits.intake.max_attribute_value_bytes is refused alike over gRPC and over NATS.
func TestIntakeLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.Limits.Intake.MaxRecordsPerBatch = 3
	cfg.Limits.Intake.MaxJSONDepth = 8
	cfg.Limits.Intake.MaxAttributeValueBytes = 1024
	e := startEnv(t, cfg)
	a, sk, base := e.app, e.sink, e.base
	rec := func(i int) string {
		return `{"trace_id":"dddd00000000000000000000000000` + string(rune('0'+i/10)) + string(rune('0'+i%10)) + `","service":"svc","query":"q","answer":"a"}`
	}
	batch := func(from, n int) string {
		var parts []string
		for i := from; i < from+n; i++ {
			parts = append(parts, rec(i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	deep := `{"trace_id":"dddd0000000000000000000000000099","service":"svc","query":"q","answer":"a","metadata":` +
		strings.Repeat(`{"a":`, 10) + `1` + strings.Repeat(`}`, 10) + `}`
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		path, body string
		code       int
		answer     string
	}{
		{"/api/v1/records", batch(0, 4), 400, `{"error":"over a limit","errors":["batch holds more than the limit of 3 items"]}`},
		{"/api/v1/records", deep, 400, `{"error":"over a limit","errors":["JSON nests deeper than the limit of 8"]}`},
		{"/api/v1/feedback", "[" + strings.Repeat(`{"trace_id":"dddd0000000000000000000000000001","score":1},`, 1000) + `{"trace_id":"dddd0000000000000000000000000001","score":1}]`, 400, ""},
		{"/api/v1/records", batch(0, 3), 202, `{"accepted":3}`},
	} {
		code, answer := post(c.path, c.body)
		if code != c.code || (c.answer != "" && answer != c.answer) {
			t.Errorf("POST %s = %d %s, want %d %s", c.path, code, answer, c.code, c.answer)
		}
	}
	nc, err := nats.Connect(a.NATS.ClientURL(), a.NATS.AppCredential().Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, m := range []string{batch(10, 4), deep, batch(20, 3)} {
		if err := nc.Publish("ragwatch.records.svc", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	bomb := ragTrace(7)
	bomb.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("big", strings.Repeat("x", 2000))
	req := ptraceotlp.NewExportRequestFromTraces(bomb)
	pb, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("ragwatch.otlp.traces", pb); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	conn, err := grpc.NewClient(a.Addrs().OTLPGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), req); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC export of an attribute bomb: %v, want InvalidArgument", err)
	}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "the NATS batch at the limit", func() bool { return sk.get("dddd0000000000000000000000000022") != nil })
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, "NATS rejections", func() bool {
		return testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "nats", "reason": "limits"}) == 3
	})
	if got := testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "otlp_grpc", "reason": "limits"}); got != 1 {
		t.Errorf("gRPC limits rejections = %v, want 1", got)
	}
	if got := testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "api", "reason": "limits"}); got != 3 {
		t.Fatalf("api limits rejections = %v, want 3", got)
	}
	if sk.get("dddd0000000000000000000000000010") != nil || sk.get("dddd0000000000000000000000000099") != nil {
		t.Fatal("a record of a refused message reached the pipeline")
	}
}

// liveHeap reads the same runtime metric as the memory guard.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestMemoryFloodStaysBounded floods the OTLP HTTP receiver with open traces the assembler has
// to hold (about 360 MB in all) under GOMEMLIMIT 128 MiB, with the real heap read every 10 ms:
// the receiver starts refusing with 503 at 90% of GOMEMLIMIT and the peak heap stays under
// GOMEMLIMIT instead of growing with the input (519 MiB measured without a limit).
func TestMemoryFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the heap")
	}
	runtime.GC()
	// GOMEMLIMIT 128 MiB and memory_limit_mib 0: the guard refuses at 90% of it, and the
	// garbage collector works harder near the limit, so garbage does not pile up on top.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(128 << 20))
	cfg := testConfig(t)
	cfg.Limits.MemoryLimitMiB = 0
	cfg.Assembly.Timeout = time.Minute // open traces stay in the assembler
	cfg.Assembly.MaxBytes = 4 << 30    // so only the memory guard bounds them
	a, err := service.New(cfg, nil, service.WithHeapReader(liveHeap, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })

	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if h := liveHeap(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	value := strings.Repeat("x", 900_000)
	url := "http://" + a.Addrs().OTLPHTTP + "/v1/traces"
	accepted, refused := 0, 0
	for i := range 100 {
		td := ragTrace(byte(i))
		rs := td.ResourceSpans().At(0)
		spans := rs.ScopeSpans().At(0).Spans()
		root := spans.At(0)
		root.SetParentSpanID([8]byte{9, 9, 9, 9, 9, 9, 9, 9}) // its parent never comes: the trace stays open
		tid := root.TraceID()
		tid[13] = byte(i >> 8)
		root.SetTraceID(tid)
		for k := range 4 {
			s := spans.AppendEmpty()
			root.CopyTo(s)
			s.SetSpanID([8]byte{0, 0, 0, 0, 0, 0, 1, byte(k)})
			s.Attributes().PutStr("rag.document", value)
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			accepted++
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	close(stop)
	<-done
	t.Logf("accepted %d, refused %d of 100 requests of 3.6 MB; peak heap %d MiB under GOMEMLIMIT 128 MiB",
		accepted, refused, peak.Load()>>20)
	if refused == 0 {
		t.Fatal("the flood was never refused")
	}
	// Measured 116-119 MiB; the margin covers the requests in flight during one 10 ms sample.
	if p := peak.Load(); p > 144<<20 {
		t.Fatalf("peak heap %d MiB, over GOMEMLIMIT 128 MiB plus 16 MiB in flight", p>>20)
	}
	if got := testutil.Sum(t, a.Registry, "ragwatch_memory_refusals_total", nil); got != float64(refused) {
		t.Fatalf("memory refusals = %v, want %d", got, refused)
	}
	if got := testutil.Sum(t, a.Registry, "ragwatch_ingest_rejected_total", map[string]string{"receiver": "otlp_http", "reason": "overloaded"}); got != float64(refused) {
		t.Fatalf("overloaded count = %v, want %d", got, refused)
	}
}
