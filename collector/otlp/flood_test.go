package otlp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ragwatch/ragwatch/collector/span"
	"github.com/ragwatch/ragwatch/internal/listen"
	"github.com/ragwatch/ragwatch/internal/testutil"
)

// The OTLP HTTP receiver answers 431 to headers over listen.MaxHeaderBytes (32 KiB) and the
// gRPC receiver refuses a header list over it, where both used to take up to 1 MiB and 16 MiB.
func TestHeadersOverTheCapAreRefused(t *testing.T) {
	h := start(t, span.Limits{})
	body := protoBody(t, traces(1))
	for _, c := range []struct {
		size int
		want int
	}{{64 << 10, http.StatusRequestHeaderFieldsTooLarge}, {1 << 10, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Fill", strings.Repeat("a", c.size))
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("HTTP with a %d-byte header: %v", c.size, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("HTTP with a %d-byte header: %d, want %d", c.size, resp.StatusCode, c.want)
		}
	}
	client := ptraceotlp.NewGRPCClient(h.conn)
	for _, c := range []struct {
		size int
		ok   bool
	}{{64 << 10, false}, {1 << 10, true}} {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-fill", strings.Repeat("a", c.size)), 5*time.Second)
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1)))
		cancel()
		if (err == nil) != c.ok {
			t.Errorf("gRPC with a %d-byte header: err %v, want ok=%v", c.size, err, c.ok)
		}
		if err != nil {
			t.Logf("gRPC with a %d-byte header: %v", c.size, err)
		}
	}
	if got := h.sink.count(); got != 2 {
		t.Errorf("sink has %d spans, want 2 (one per protocol)", got)
	}
}

// With a cap of one connection a listener, a new gRPC client takes the place of an idle
// one, but not of one with an export in flight: then the new one is refused.
func TestGRPCConnectionCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	next := &blockingSink{entered: make(chan struct{}, 4), release: make(chan struct{})}
	h := startWith(t, Settings{GRPCEndpoint: "127.0.0.1:0", Next: next,
		Listen: listen.Limits{MaxConns: 1}, ListenMetrics: listen.NewMetrics(reg)})
	count := func(name string) float64 {
		return testutil.Sum(t, reg, name, map[string]string{"listener": "otlp_grpc"})
	}
	dial := func() ptraceotlp.GRPCClient {
		conn, err := grpc.NewClient(h.r.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return ptraceotlp.NewGRPCClient(conn)
	}
	export := func(c ptraceotlp.GRPCClient) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.Export(ctx, ptraceotlp.NewExportRequestFromTraces(traces(1)))
		return err
	}
	// A: one export, then idle.
	a := dial()
	done := make(chan error, 1)
	go func() { done <- export(a) }()
	<-next.entered
	next.release <- struct{}{} // let this one through only
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// B: A is idle, so B's connection evicts it and B's export is served (and held).
	b := dial()
	go func() { done <- export(b) }()
	select {
	case <-next.entered:
	case err := <-done:
		t.Fatalf("B's export did not reach the consumer: %v", err)
	}
	if got := count("ragwatch_listener_connections_evicted_total"); got != 1 {
		t.Fatalf("evicted_total = %v, want 1", got)
	}
	// C: B has an export in flight, so C is refused.
	if err := export(dial()); status.Code(err) != codes.Unavailable {
		t.Fatalf("C's export with B's in flight: %v, want Unavailable", err)
	}
	if got := count("ragwatch_listener_connections_refused_total"); got < 1 {
		t.Fatalf("refused_total = %v, want ≥ 1", got)
	}
	close(next.release)
	if err := <-done; err != nil {
		t.Fatalf("B's export: %v", err)
	}
	if got := count("ragwatch_listener_max_connections"); got != 1 {
		t.Fatalf("max_connections = %v, want 1", got)
	}
}

// A gRPC connection without streams is closed after the idle timeout, an HTTP keep-alive
// connection too: idle exporters do not hold their place for ever.
func TestIdleConnectionsAreClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startWith(t, Settings{GRPCEndpoint: "127.0.0.1:0", HTTPEndpoint: "127.0.0.1:0",
		Listen: listen.Limits{IdleTimeout: 200 * time.Millisecond}, ListenMetrics: listen.NewMetrics(reg)})
	open := func(name string) float64 {
		return testutil.Sum(t, reg, "ragwatch_listener_connections", map[string]string{"listener": name})
	}
	if _, err := ptraceotlp.NewGRPCClient(h.conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(traces(1))); err != nil {
		t.Fatal(err)
	}
	resp, _ := post(t, h.url, "application/x-protobuf", "", protoBody(t, traces(1)))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP export: %d", resp.StatusCode)
	}
	if open("otlp_grpc") != 1 || open("otlp_http") != 1 {
		t.Fatalf("open after the exports: gRPC %v, HTTP %v; want 1 each", open("otlp_grpc"), open("otlp_http"))
	}
	testutil.Eventually(t, 5*time.Second, 10*time.Millisecond, "idle connections closed", func() bool {
		return open("otlp_grpc") == 0 && open("otlp_http") == 0
	})
}
